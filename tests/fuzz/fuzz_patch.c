/* libFuzzer: arbitrary bytes as a dpatch call, the agent's value, through
 * the whole library (src/patch/): parse, then plan, whose reads see one
 * file.  Input: the file's bytes, a NUL, the patch; without a NUL the
 * whole input is the patch and every file is empty.  Paths ending in "/d"
 * read as directories, in "/none" as missing.  Beyond "no crash, no
 * overflow, no leak":
 *  - err is filled iff a step fails, and the plan then hands back no step;
 *  - a second plan of the same patch gives the same steps, byte for byte;
 *  - no step writes more than the cap. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "patch/patch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CAP 4096

typedef struct one_file {
        const char *data;
        size_t len;
} one_file;

static bool ends_with(const char *s, const char *suffix) {
        size_t n = strlen(s), k = strlen(suffix);
        return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int read_one(void *ctx, const char *path, bool want_data, char **ret, size_t *ret_len, cm_err *err) {
        const one_file *f = ctx;
        (void)err;
        if (ends_with(path, "/d"))
                return -EISDIR;
        if (ends_with(path, "/none"))
                return -ENOENT;
        if (want_data) {
                *ret = malloc(f->len + 1);
                if (!*ret)
                        abort();
                memcpy(*ret, f->data, f->len);
                *ret_len = f->len;
        }
        return 0;
}

static void same_ops(const cm_patch_op *a, size_t na, const cm_patch_op *b, size_t nb) {
        if (na != nb)
                abort();
        for (size_t i = 0; i < na; i++) {
                if (a[i].action != b[i].action || strcmp(a[i].path, b[i].path) != 0 || a[i].len != b[i].len ||
                    a[i].hunks != b[i].hunks || (a[i].len && memcmp(a[i].data, b[i].data, a[i].len) != 0) ||
                    (a[i].from == NULL) != (b[i].from == NULL) || (a[i].from && strcmp(a[i].from, b[i].from) != 0))
                        abort();
                if (a[i].len > CAP)
                        abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *nul = memchr(data, 0, size), *text = (const char *)data;
        one_file file = {"", 0};
        cm_patch_io io = {&file, read_one, CAP, "FUZZ_CAP", 4 * CAP, 1u << 20};
        cm_err err = {12345, "untouched"}, err2 = {12345, "untouched"};
        cm_patch_op *ops = NULL, *ops2 = NULL;
        size_t n = 0, n2 = 0, len = size;
        cm_patch p;
        int r, r2;
        if (nul) {
                file = (one_file){text, (size_t)(nul - text)};
                len = size - file.len - 1;
                text = nul + 1;
        }
        if (cm_patch_parse(text, len, &p, &err) < 0) {
                if (err.code <= 0 || !err.msg[0] || strcmp(err.msg, "untouched") == 0)
                        abort();
                return 0;
        }
        if (err.code != 12345)
                abort(); /* a success leaves err alone */
        r = cm_patch_plan(&p, &io, &ops, &n, &err);
        r2 = cm_patch_plan(&p, &io, &ops2, &n2, &err2);
        if (r != r2 || (r < 0 && (err.code <= 0 || strcmp(err.msg, err2.msg) != 0 || ops || n)))
                abort();
        if (r == 0)
                same_ops(ops, n, ops2, n2);
        cm_patch_ops_free(ops, n);
        cm_patch_ops_free(ops2, n2);
        cm_patch_clear(&p);
        return 0;
}
