#include "util/json.h"

#include <string.h>

#include "util/cleanup.h"

const char *cm_json_type_name(const json_t *v) {
        switch (json_typeof(v)) {
        case JSON_OBJECT: return "object";
        case JSON_ARRAY: return "array";
        case JSON_STRING: return "string";
        case JSON_INTEGER: return "integer";
        case JSON_REAL: return "number";
        case JSON_TRUE:
        case JSON_FALSE: return "boolean";
        case JSON_NULL: return "null";
        }
        return "unknown";
}

char *cm_json_dump(const json_t *v) {
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!s)
                s = xstrdup("null");
        return s;
}

const char *cm_json_str(const json_t *obj, const char *key) {
        return json_string_value(json_object_get(obj, key));
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), or 0. */
static size_t utf8_seq(const unsigned char *p, size_t n) {
        size_t len;
        unsigned cp;
        if (p[0] < 0x80)
                return 1;
        if ((p[0] & 0xe0) == 0xc0)
                len = 2, cp = p[0] & 0x1f;
        else if ((p[0] & 0xf0) == 0xe0)
                len = 3, cp = p[0] & 0x0f;
        else if ((p[0] & 0xf8) == 0xf0)
                len = 4, cp = p[0] & 0x07;
        else
                return 0;
        if (len > n)
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (p[i] & 0x3f);
        }
        /* overlong forms, surrogates and values past U+10FFFF are invalid */
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return len;
}

json_t *cm_json_bytes(const char *p, size_t n) {
        const unsigned char *s = (const unsigned char *)p;
        size_t i = 0, o = 0, k;
        char *out;
        json_t *j;
        if (!p)
                return json_string("");
        for (i = 0; i < n && (k = utf8_seq(s + i, n - i)) > 0; i += k)
                ;
        if (i == n)
                return json_stringn_nocheck(p, n);
        out = xmalloc(n * 3 + 1);
        for (i = 0; i < n;) {
                k = utf8_seq(s + i, n - i);
                if (k) {
                        memcpy(out + o, s + i, k);
                        o += k;
                        i += k;
                } else {
                        memcpy(out + o, "\xef\xbf\xbd", 3); /* U+FFFD for each bad byte */
                        o += 3;
                        i++;
                }
        }
        j = json_stringn_nocheck(out, o);
        free(out);
        return j;
}
