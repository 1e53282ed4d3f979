/* libFuzzer: an agent's bytes into the file tools' parsers (filetext.c).
 * Nothing may crash or overflow; base64 that is accepted decodes to bytes
 * that encode and decode back to themselves; what utf-8 accepts comes back
 * unchanged; a path accepted is absolute, with no empty or "." name. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tools/filetext.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_base64(const char *p, size_t n) {
        cm_err err = CM_ERR_INIT;
        char *raw = NULL, *text = NULL, *again = NULL;
        size_t rn, tn, an;
        if (cm_text_encode("base64", p, n, &raw, &rn, &err) == 0) {
                if (cm_text_decode("base64", raw, rn, &text, &tn, &err) < 0 ||
                    cm_text_encode("base64", text, tn, &again, &an, &err) < 0 || an != rn ||
                    memcmp(again, raw, rn) != 0)
                        abort();
        }
        free(raw);
        free(text);
        free(again);
}

static void check_utf8(const char *p, size_t n) {
        cm_err err = CM_ERR_INIT;
        char *out = NULL;
        size_t on;
        if (cm_text_decode("utf-8", p, n, &out, &on, &err) == 0 && (on != n || memcmp(out, p, n) != 0))
                abort();
        free(out);
        out = NULL;
        if (cm_text_decode("cp1252", p, n, &out, &on, &err) == 0) {
                char *again = NULL;
                size_t gn;
                if (cm_text_decode("utf-8", out, on, &again, &gn, &err) < 0)
                        abort(); /* what iconv makes is UTF-8 */
                free(again);
        }
        free(out);
}

static void check_path(const char *p, size_t n) {
        cm_err err = CM_ERR_INIT;
        char *out = NULL;
        if (cm_file_path(p, n, &out, &err) == 0) {
                if (out[0] != '/' || strstr(out, "//") || strstr(out, "/./") ||
                    (strlen(out) > 1 && out[strlen(out) - 1] == '/'))
                        abort();
        }
        free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        check_base64((const char *)data, size);
        check_utf8((const char *)data, size);
        check_path((const char *)data, size);
        return 0;
}
