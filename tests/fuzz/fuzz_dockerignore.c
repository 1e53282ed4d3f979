/* libFuzzer: a .dockerignore (a build context's bytes, the agent's) and a
 * path.  The input is the file, then a NUL, then the path.  Nothing may
 * crash, leak or take long (the matcher is linear per pattern); the answer
 * is stable; and a set without exceptions never asks to enter a
 * directory. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/dockerignore.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *text = (const char *)data, *nul = memchr(data, 0, size);
        size_t tlen = nul ? (size_t)(nul - text) : size;
        char *path;
        cm_dockerignore *d;
        cm_err err = CM_ERR_INIT;

        if (size > 16384)
                return 0;
        path = nul ? strndup(nul + 1, size - tlen - 1) : strdup("a/b/c");
        if (!path)
                return 0;
        d = cm_dockerignore_new();
        if (cm_dockerignore_parse(d, text, tlen, &err) == 0) {
                bool a = cm_dockerignore_excluded(d, path), b = cm_dockerignore_excluded(d, path);
                if (a != b)
                        abort();
                if (!memchr(text, '!', tlen) && cm_dockerignore_enter(d, path))
                        abort();
        } else if (!err.msg[0]) {
                abort();
        }
        cm_dockerignore_free(d);
        free(path);
        return 0;
}
