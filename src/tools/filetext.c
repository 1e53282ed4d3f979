#include "tools/filetext.h"

#include <errno.h>
#include <iconv.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "util/cleanup.h"

int cm_file_path(const char *path, size_t len, char **ret, cm_err *err) {
        cleanup_free char *out = NULL;
        size_t o;
        if (len == 0)
                return cm_err_set(err, EINVAL, "path is empty; give a file's path (relative ones are under %s)",
                                  CM_FILE_WORKDIR);
        if (memchr(path, 0, len))
                return cm_err_set(err, EINVAL, "path holds a NUL byte, which no file name can");
        out = xmalloc(strlen(CM_FILE_WORKDIR) + len + 2);
        o = 0;
        if (path[0] != '/') {
                memcpy(out, CM_FILE_WORKDIR, strlen(CM_FILE_WORKDIR));
                o = strlen(CM_FILE_WORKDIR);
        }
        for (size_t i = 0; i < len;) {
                size_t j = i, n;
                while (j < len && path[j] != '/')
                        j++;
                n = j - i;
                if (n > NAME_MAX)
                        return cm_err_set(err, ENAMETOOLONG, "a name in path is %zu bytes long, over NAME_MAX (%d)", n,
                                          NAME_MAX);
                if (n && !(n == 1 && path[i] == '.')) {
                        out[o++] = '/';
                        memcpy(out + o, path + i, n);
                        o += n;
                }
                i = j + 1;
        }
        if (o == 0)
                out[o++] = '/';
        out[o] = 0;
        *ret = steal_pointer(&out);
        return 0;
}

bool cm_file_ext_allowed(char *const *exts, const char *path) {
        const char *name = strrchr(path, '/'), *dot;
        name = name ? name + 1 : path;
        dot = strrchr(name, '.');
        if (!exts)
                return true;
        if (!dot || dot == name || !dot[1])
                return false; /* no extension, or a dot file such as .bashrc */
        for (size_t i = 0; exts[i]; i++)
                if (strcasecmp(exts[i], dot + 1) == 0)
                        return true;
        return false;
}

void cm_text_lines(const char *p, size_t n, size_t offset, size_t limit, size_t *ret_start, size_t *ret_len) {
        size_t start = 0, end;
        for (size_t k = 0; k < offset && start < n; k++) {
                const char *nl = memchr(p + start, '\n', n - start);
                start = nl ? (size_t)(nl - p) + 1 : n;
        }
        end = start;
        if (limit == 0)
                end = n;
        for (size_t k = 0; limit && k < limit && end < n; k++) {
                const char *nl = memchr(p + end, '\n', n - end);
                end = nl ? (size_t)(nl - p) + 1 : n;
        }
        *ret_start = start;
        *ret_len = end - start;
}

/* ---- encodings ----------------------------------------------------------- */

static const struct {
        const char *name, *iconv;
} encodings[] = {
        {"utf-8", NULL},
        {"utf8", NULL},
        {"base64", NULL},
        {"latin-1", "ISO-8859-1"},
        {"latin1", "ISO-8859-1"},
        {"iso-8859-1", "ISO-8859-1"},
        {"latin-9", "ISO-8859-15"},
        {"iso-8859-15", "ISO-8859-15"},
        {"latin-2", "ISO-8859-2"},
        {"iso-8859-2", "ISO-8859-2"},
        {"cp1252", "CP1252"},
        {"windows-1252", "CP1252"},
        {"cp1250", "CP1250"},
        {"windows-1250", "CP1250"},
        {"cp1251", "CP1251"},
        {"windows-1251", "CP1251"},
        {"koi8-r", "KOI8-R"},
        {"cp437", "CP437"},
        {"ascii", "ASCII"},
        {"us-ascii", "ASCII"},
};

const char cm_text_encodings[] = "utf-8, base64, latin-1 (iso-8859-1), latin-9 (iso-8859-15), latin-2 "
                                 "(iso-8859-2), cp1252, cp1250, cp1251, koi8-r, cp437, ascii";

static int find_encoding(const char *e) {
        for (size_t i = 0; e && i < ARRAY_SIZE(encodings); i++)
                if (strcasecmp(e, encodings[i].name) == 0)
                        return (int)i;
        return -1;
}

bool cm_text_encoding_known(const char *encoding) { return find_encoding(encoding) >= 0; }

/* Offset of the first byte that is not well-formed UTF-8 (no overlong
 * forms, no surrogates, nothing over U+10FFFF), or n. */
static size_t utf8_invalid(const unsigned char *p, size_t n) {
        size_t i = 0;
        while (i < n) {
                unsigned c = p[i], len, min;
                uint32_t cp;
                if (c < 0x80) {
                        i++;
                        continue;
                }
                if (c >= 0xc2 && c <= 0xdf)
                        len = 2, min = 0x80, cp = c & 0x1f;
                else if (c >= 0xe0 && c <= 0xef)
                        len = 3, min = 0x800, cp = c & 0x0f;
                else if (c >= 0xf0 && c <= 0xf4)
                        len = 4, min = 0x10000, cp = c & 0x07;
                else
                        return i;
                if (n - i < len)
                        return i;
                for (unsigned k = 1; k < len; k++) {
                        if ((p[i + k] & 0xc0) != 0x80)
                                return i;
                        cp = cp << 6 | (p[i + k] & 0x3f);
                }
                if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                        return i;
                i += len;
        }
        return n;
}

/* n bytes, NUL bytes included, and a NUL after them. */
static char *dup_bytes(const char *p, size_t n) {
        char *out = xmalloc(n + 1);
        if (n)
                memcpy(out, p, n);
        out[n] = 0;
        return out;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *base64_encode(const unsigned char *p, size_t n, size_t *ret_len) {
        char *out = xmalloc((n + 2) / 3 * 4 + 1), *o = out;
        for (size_t i = 0; i < n; i += 3) {
                uint32_t v =
                        (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
                *o++ = b64[v >> 18 & 63];
                *o++ = b64[v >> 12 & 63];
                *o++ = i + 1 < n ? b64[v >> 6 & 63] : '=';
                *o++ = i + 2 < n ? b64[v & 63] : '=';
        }
        *o = 0;
        *ret_len = (size_t)(o - out);
        return out;
}

/* Standard base64; white space is skipped, padding may be left out. */
static int base64_decode(const char *p, size_t n, char **ret, size_t *ret_len, cm_err *err) {
        cleanup_free unsigned char *out = xmalloc(n / 4 * 3 + 4);
        size_t o = 0, q = 0, pad = 0;
        uint32_t v = 0;
        for (size_t i = 0; i < n; i++) {
                const char *c = memchr(b64, p[i], 64);
                if (p[i] == ' ' || p[i] == '\n' || p[i] == '\r' || p[i] == '\t')
                        continue;
                if (p[i] == '=' && q >= 2 && pad < 2) {
                        pad++;
                        continue;
                }
                if (!c || !p[i] || pad)
                        return cm_err_set(err, EINVAL, "content is not valid base64 (at character %zu)", i);
                v = v << 6 | (uint32_t)(c - b64);
                if (++q == 4) {
                        out[o++] = (unsigned char)(v >> 16);
                        out[o++] = (unsigned char)(v >> 8);
                        out[o++] = (unsigned char)v;
                        q = 0, v = 0;
                }
        }
        if (q == 1 || (pad && q == 0) || (q && pad && q + pad != 4))
                return cm_err_set(err, EINVAL, "content is not valid base64 (it ends in the middle of a group)");
        if (q == 2)
                out[o++] = (unsigned char)(v >> 4);
        if (q == 3) {
                out[o++] = (unsigned char)(v >> 10);
                out[o++] = (unsigned char)(v >> 2);
        }
        out[o] = 0;
        *ret = (char *)steal_pointer(&out);
        *ret_len = o;
        return 0;
}

/* iconv from one encoding to another, strictly: a byte with no meaning
 * in `from`, or a character `to` cannot hold, is -EILSEQ at *ret_bad. */
static int convert(const char *to, const char *from, const char *p, size_t n, char **ret, size_t *ret_len,
                   size_t *ret_bad) {
        iconv_t cd = iconv_open(to, from);
        size_t cap = 4 * n + 4, in_left = n, out_left = cap;
        cleanup_free char *out = xmalloc(cap + 1);
        char *in = (char *)p, *o = out;
        int r = 0;
        if (cd == (iconv_t)-1)
                return -errno;
        if (iconv(cd, &in, &in_left, &o, &out_left) == (size_t)-1 || in_left) {
                r = errno == E2BIG ? -E2BIG : -EILSEQ;
                *ret_bad = (size_t)(in - p);
        }
        (void)iconv_close(cd);
        if (r < 0)
                return r;
        *o = 0;
        *ret_len = (size_t)(o - out);
        *ret = steal_pointer(&out);
        return 0;
}

int cm_text_decode(const char *encoding, const char *p, size_t n, char **ret, size_t *ret_len, cm_err *err) {
        int i = find_encoding(encoding), r;
        size_t bad;
        if (i < 0)
                return cm_err_set(err, EINVAL, "encoding \"%s\" is not supported; use one of: %s", encoding,
                                  cm_text_encodings);
        if (strcmp(encodings[i].name, "base64") == 0) {
                *ret = base64_encode((const unsigned char *)p, n, ret_len);
                return 0;
        }
        if (!encodings[i].iconv) {
                if ((bad = utf8_invalid((const unsigned char *)p, n)) < n)
                        return cm_err_set(err, EILSEQ,
                                          "the file is not valid UTF-8 (byte %zu); read it with encoding \"base64\" "
                                          "(binary) or the encoding it is written in (e.g. \"latin-1\")",
                                          bad);
                *ret = dup_bytes(p, n);
                *ret_len = n;
                return 0;
        }
        if ((r = convert("UTF-8", encodings[i].iconv, p, n, ret, ret_len, &bad)) == -EILSEQ)
                return cm_err_set(err, EILSEQ,
                                  "the file is not valid %s (byte %zu); read it with encoding \"base64\" (binary) "
                                  "or the encoding it is written in",
                                  encodings[i].name, bad);
        return r < 0 ? cm_err_sys(err, -r, "converting from %s", encodings[i].name) : 0;
}

int cm_text_encode(const char *encoding, const char *p, size_t n, char **ret, size_t *ret_len, cm_err *err) {
        int i = find_encoding(encoding), r;
        size_t bad;
        if (i < 0)
                return cm_err_set(err, EINVAL, "encoding \"%s\" is not supported; use one of: %s", encoding,
                                  cm_text_encodings);
        if (strcmp(encodings[i].name, "base64") == 0)
                return base64_decode(p, n, ret, ret_len, err);
        if (!encodings[i].iconv) {
                *ret = dup_bytes(p, n);
                *ret_len = n;
                return 0;
        }
        if ((r = convert(encodings[i].iconv, "UTF-8", p, n, ret, ret_len, &bad)) == -EILSEQ)
                return cm_err_set(err, EILSEQ,
                                  "content has a character %s cannot hold (at byte %zu of its UTF-8); write it as "
                                  "utf-8, or as base64 bytes",
                                  encodings[i].name, bad);
        return r < 0 ? cm_err_sys(err, -r, "converting to %s", encodings[i].name) : 0;
}
