/* libFuzzer: the JSON-lines streams an engine answers a pull, a build and
 * an image load with (a hostile or broken engine, or a registry's and a
 * Dockerfile's text inside them): split into lines however the bytes
 * arrive, each object turned into progress, an error, a build's steps and
 * the tail of its output, an id.  Nothing may crash or leak, and the
 * answer must not depend on how the bytes were cut. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/docker/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same(const char *a, const char *b) { return (!a && !b) || (a && b && strcmp(a, b) == 0); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        enum dk_stream_kind kind;
        size_t chunk;
        char *e1, *i1, *e2, *i2;
        int r1, r2;
        if (size < 2)
                return 0;
        kind = (enum dk_stream_kind)(data[0] % 3);
        chunk = (size_t)data[1] + 1;
        r1 = dk_image_stream_parse(kind, (const char *)data + 2, size - 2, 0, &e1, &i1);
        r2 = dk_image_stream_parse(kind, (const char *)data + 2, size - 2, chunk, &e2, &i2);
        if (r1 != r2 || !same(e1, e2) || !same(i1, i2))
                abort();
        free(e1), free(i1), free(e2), free(i2);
        return 0;
}
