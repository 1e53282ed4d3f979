/* libFuzzer: arbitrary bytes as a registry's manifest or index
 * (rg_manifest_parse), then platform selection over what it accepted; and
 * the same bytes as a WWW-Authenticate challenge (rg_challenge_param).
 * Nothing may crash; whatever is accepted has well-formed digests and
 * sizes that are not negative; a refusal always says why. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/registry_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        rg_manifest m;
        cm_err err = CM_ERR_INIT;
        size_t i;

        char *ch = malloc(size + 1);
        if (!ch)
                return 0;
        memcpy(ch, data, size);
        ch[size] = 0;
        for (size_t k = 0; k < 3; k++) {
                static const char *const keys[] = {"realm", "service", "scope"};
                char *v = rg_challenge_param(ch, keys[k]);
                if (v && strlen(v) > size)
                        abort();
                free(v);
        }
        free(ch);
        if (rg_manifest_parse((const char *)data, size, size & 1 ? RG_MT_OCI_INDEX : NULL, &m, &err) < 0) {
                if (!err.msg[0])
                        abort();
                return 0;
        }
        for (size_t k = 0; k < m.n; k++)
                if (!cm_image_digest_ok(m.items[k].digest) || m.items[k].size < 0)
                        abort();
        if (!m.is_index && (!cm_image_digest_ok(m.config.digest) || m.config.size < 0))
                abort();
        if (m.is_index) {
                if (rg_pick_platform(&m, NULL, &i, &err) == 0 && i >= m.n)
                        abort();
                if (rg_pick_platform(&m, "linux/arm64/v8", &i, &err) == 0 && i >= m.n)
                        abort();
                (void)rg_pick_platform(&m, "bogus", &i, &err);
        }
        rg_manifest_free(&m);
        return 0;
}
