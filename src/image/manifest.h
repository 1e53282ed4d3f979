/* The JSON of images (manifest.c): OCI indexes and manifests, Docker
 * schema 2 manifests, image configs, and `docker save`'s manifest.json.
 * Outside bytes: every field is checked for its type, digests for their
 * form, counts for a ceiling; what is not understood is an error. */
#ifndef CM_IMAGE_MANIFEST_H
#define CM_IMAGE_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "image/store.h"
#include "util/err.h"

#define IMG_MAX_LAYERS 128
#define IMG_MAX_JSON ((size_t)4 << 20) /* a manifest, index or config */

typedef struct img_desc {
        char *media_type;
        char *digest; /* "sha256:<64 hex>" */
        int64_t size;
        char *ref_name; /* annotation org.opencontainers.image.ref.name, or NULL */
        char *os, *arch, *variant; /* platform, or NULL */
} img_desc;

typedef struct img_manifest {
        img_desc config;
        img_desc *layers;
        size_t n_layers;
} img_manifest;

typedef struct img_config_doc {
        char **diff_ids; /* hex, NULL-terminated */
        size_t n_diff_ids;
        int64_t created;
        img_config run;
} img_config_doc;

typedef struct img_docker_entry {
        char *config;   /* path in the archive */
        char **tags;    /* RepoTags, NULL-terminated */
        char **layers;  /* paths in the archive */
        size_t n_layers;
} img_docker_entry;

bool img_digest_valid(const char *d);
bool img_media_is_index(const char *mt);
bool img_media_is_manifest(const char *mt);
/* A layer's media type: 0 known (tar, +gzip, +zstd, Docker's), -1 not. */
int img_media_layer(const char *mt);

void img_desc_clear(img_desc *d);
void img_descs_free(img_desc *v, size_t n);
void img_manifest_clear(img_manifest *m);
void img_config_doc_clear(img_config_doc *c);
void img_docker_entries_free(img_docker_entry *v, size_t n);

/* An OCI index (or Docker manifest list): its manifests. */
int img_parse_index(const char *buf, size_t len, img_desc **ret, size_t *ret_n, cm_err *err);
/* An image manifest (OCI or Docker schema 2). */
int img_parse_manifest(const char *buf, size_t len, img_manifest *ret, cm_err *err);
int img_parse_config(const char *buf, size_t len, img_config_doc *ret, cm_err *err);
/* `docker save`'s manifest.json. */
int img_parse_docker_manifest(const char *buf, size_t len, img_docker_entry **ret, size_t *ret_n, cm_err *err);

#endif
