/* Image names: what a user calls an image, as the full reference the
 * index holds, by the registry client's Docker reference parser. */
#include <stddef.h>

#include "image/internal.h"
#include "image/ref.h"

char *img_name_normalize(const char *name) {
        cm_image_ref ref;
        cm_err err = CM_ERR_INIT;
        char *full;

        if (!name || cm_image_ref_parse(name, &ref, &err) < 0)
                return NULL;
        full = cm_image_ref_format(&ref);
        cm_image_ref_free(&ref);
        return full;
}
