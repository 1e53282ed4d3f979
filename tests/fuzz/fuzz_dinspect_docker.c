/* libFuzzer: an engine's inspect document (outside bytes: whatever answers
 * on the Docker socket) into cm_dinspect_docker.  Nothing may crash; a
 * document it maps gives every field dinspect's schema requires. */
#include <stdint.h>
#include <stdlib.h>

#include "backend/dinspect_docker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char *const required[] = {"container", "id",     "runtime",       "state",   "source",
                                               "privileged", "caps",  "namespaces",    "devices", "mounts",
                                               "readonly_root", "network", "limits", "seccomp", "no_new_privs"};
        json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL), *v;
        if (!doc)
                return 0;
        v = cm_dinspect_docker(doc, "docker");
        for (size_t i = 0; v && i < sizeof required / sizeof required[0]; i++)
                if (!json_object_get(v, required[i]))
                        abort();
        json_decref(v);
        json_decref(doc);
        return 0;
}
