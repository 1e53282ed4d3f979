/* libFuzzer: arbitrary bytes into cm_image_ref_parse (an agent's `image`).
 * Nothing may crash; what it accepts must format to a name that parses
 * again to itself, fits Docker's lengths and carries no byte a URL path or
 * a shell would treat specially. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);
        cm_err err = CM_ERR_INIT;
        cm_image_ref r, again;

        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = 0;
        if (cm_image_ref_parse(s, &r, &err) == 0) {
                char *full = cm_image_ref_format(&r), *full2;
                if (strlen(r.domain) + 1 + strlen(r.path) > CM_IMAGE_NAME_MAX || strpbrk(full, " \t\n?#%\\\"'$;&|"))
                        abort();
                if (cm_image_ref_parse(full, &again, &err) != 0)
                        abort();
                full2 = cm_image_ref_format(&again);
                if (strcmp(full, full2) != 0)
                        abort();
                free(full), free(full2);
                cm_image_ref_free(&again);
                cm_image_ref_free(&r);
        } else if (!strstr(err.msg, "image reference")) {
                abort();
        }
        free(s);
        return 0;
}
