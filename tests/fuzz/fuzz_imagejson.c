/* libFuzzer: arbitrary bytes through every parser of image JSON (an OCI
 * index, a manifest, a config, docker save's manifest.json) and the
 * reference normaliser.  Nothing may crash or leak; what is accepted must
 * hold its promises (digests well-formed, layer counts within the cap). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *buf = (const char *)data;
        cm_err err = CM_ERR_INIT;
        img_desc *descs;
        size_t n;
        img_manifest m;
        img_config_doc c;
        img_docker_entry *d;
        char *s, *name;

        if (img_parse_index(buf, size, &descs, &n, &err) == 0) {
                for (size_t i = 0; i < n; i++)
                        if (!img_digest_valid(descs[i].digest))
                                abort();
                img_descs_free(descs, n);
        }
        if (img_parse_manifest(buf, size, &m, &err) == 0) {
                if (m.n_layers > IMG_MAX_LAYERS || !img_digest_valid(m.config.digest))
                        abort();
                img_manifest_clear(&m);
        }
        if (img_parse_config(buf, size, &c, &err) == 0) {
                if (c.n_diff_ids > IMG_MAX_LAYERS)
                        abort();
                for (size_t i = 0; i < c.n_diff_ids; i++)
                        if (strlen(c.diff_ids[i]) != 64)
                                abort();
                img_config_doc_clear(&c);
        }
        if (img_parse_docker_manifest(buf, size, &d, &n, &err) == 0)
                img_docker_entries_free(d, n);
        s = malloc(size + 1);
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = 0;
        if ((name = img_name_normalize(s))) {
                char *again = img_name_normalize(name);
                if (!again || strcmp(again, name) != 0)
                        abort(); /* a full reference normalises to itself */
                free(again);
                free(name);
        }
        free(s);
        return 0;
}
