/* The native image store (issue 13): content-addressed blobs, layers
 * unpacked once and shared, and an index of names.
 *
 *   <state>/images/
 *     blobs/sha256/<hex>     manifests, configs and layer archives, verified
 *     layers/<diffid-hex>/   one layer unpacked (whiteouts as overlayfs has them)
 *     index.json             the images: manifest, config, names, layers, size
 *     tmp/                   work in progress; never read, cleared on open
 *     gc.lock, index.lock    flock(2) files (see docs/architecture.md)
 *     ids                    whose ids the layers' owners are shifted into
 *
 * Everything lands in tmp/ first, is checked (digests, sizes) and synced,
 * and is then renamed into place; the index is the last thing written, so
 * a crash leaves at most a temporary or an unreferenced layer, never a
 * listed image with something missing.  Library code: no logging. */
#ifndef CM_IMAGE_STORE_H
#define CM_IMAGE_STORE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend/backend.h"
#include "image/registry.h"
#include "util/err.h"

/* Owners of unpacked files: a root server shifts the archive's ids into
 * the sandboxes' range (id k -> base + k; past 65535: the range's nobody),
 * so nothing in the store belongs to a host user and the sandbox's root
 * owns what the image's root owned.  A rootless server keeps its own ids
 * (its sandboxes map them to root). */
typedef struct img_owner {
        bool chown;
        uid_t uid_base;
        gid_t gid_base;
} img_owner;

typedef struct img_store img_store;

/* One image of the index. */
typedef struct img_entry {
        char *manifest; /* "sha256:<hex>": the image's key */
        char *config;   /* "sha256:<hex>": its id */
        char **names;   /* full references, NULL-terminated */
        size_t n_names;
        char **layers;  /* diff-id hex, bottom layer first, NULL-terminated */
        size_t n_layers;
        uint64_t size;  /* bytes unpacked (all its layers) */
        int64_t created;
} img_entry;

void img_entry_clear(img_entry *e);
void img_entries_free(img_entry *v, size_t n);

/* What of an image's config a run honours. */
typedef struct img_config {
        char **env;        /* KEY=VALUE, NULL-terminated */
        char **entrypoint; /* NULL-terminated; NULL: none */
        char **cmd;
        char *workdir;     /* NULL: none */
        char *user;        /* NULL: none */
        char **exposed;    /* ExposedPorts' keys ("8080/tcp"), sorted, NULL-terminated; NULL: none */
} img_config;

void img_config_clear(img_config *c);

/* max_size: CONTAINER_MCP_IMAGE_MAX_SIZE, the cap of one layer's and one
 * image's unpacked bytes (0: the default). */
int img_store_open(const char *state_dir, const img_owner *own, uint64_t max_size, img_store **ret, cm_err *err);
void img_store_free(img_store *s);
const char *img_store_dir(const img_store *s);
uint64_t img_store_max_size(const img_store *s);

/* flock(fd, op | LOCK_NB), asked again 2, 4, ... 128 ms (~250 ms in all)
 * while another holds it.  A process the server clones (a sandbox being
 * made, for the pool maybe) has a copy of every fd it had until its first
 * steps close them, and flock follows the copy: a lock of ours that just
 * ended can still show for a moment under load.  0, or -1 with errno
 * (EWOULDBLOCK: held all that time). */
int img_flock_settled(int fd, int op);

/* A user's name for an image as the full reference the index holds
 * ("busybox" -> "docker.io/library/busybox:latest"); NULL when it is not a
 * valid reference (src/image/ref.h parses it as Docker does). */
char *img_name_normalize(const char *name);

/* Find an image by name (normalised), "sha256:<hex>" of its manifest or
 * config, or 12+ hex digits of its config id.  -ENOENT (err says how to
 * get it) when the store has no such image. */
int img_resolve(img_store *s, const char *ref, img_entry *ret, cm_err *err);
int img_list(img_store *s, img_entry **ret, size_t *ret_n, cm_err *err);

/* Whether a container uses the image with this manifest digest. */
typedef bool (*img_in_use_fn)(void *arg, const char *manifest, char **ret_container);

/* Untag and delete.  In use: EBUSY naming the container, unless force,
 * which removes the names and keeps the image until no container uses it
 * (prune then removes it). */
int img_remove(img_store *s, const char *ref, bool force, img_in_use_fn in_use, void *arg, cm_err *err);
/* Images without names (all unused ones with `all`) that no container
 * uses, then every layer, blob and temporary nothing references. */
int img_prune(img_store *s, bool all, img_in_use_fn in_use, void *arg, uint64_t *ret_bytes, size_t *ret_images,
              cm_err *err);

/* Import (import.c).  An OCI image layout directory (index.json,
 * oci-layout, blobs/) under `name` (NULL: the names the layout carries).
 * The lead's registry pull fetches into such a directory and calls this. */
int img_import_layout(img_store *s, const char *dir, const char *name, const cm_image_progress *progress,
                      const cm_cancel *cancel, img_entry *ret, cm_err *err);
/* Pull `ref` from its registry (pull.c): fetched into a layout under
 * pulls/ (kept when the pull stops, resumed by the next) and imported
 * under the reference's full name.  o->max_size 0: the store's cap. */
int img_pull(img_store *s, const cm_image_ref *ref, const cm_registry_opts *o, const cm_image_progress *prog,
             const cm_cancel *cancel, img_entry *ret, cm_err *err);
/* Any importable thing at path `rel` beneath the directory fd `root`
 * (opened by the caller, symlinks never followed): an OCI layout (dir or
 * tar), a `docker save` archive (dir or tar), a root file system tarball. */
int img_import_at(img_store *s, int root, const char *rel, const char *name, const cm_image_progress *progress,
                  const cm_cancel *cancel, img_entry *ret, cm_err *err);

/* The absolute directory of a layer. */
char *img_layer_path(const img_store *s, const char *diffid);
int img_config_load(img_store *s, const img_entry *e, img_config *ret, cm_err *err);
/* The copy fallback (no overlayfs): the image's layers applied in order
 * into the new directory dst (whiteouts delete), owners as `own`. */
int img_apply_layers(img_store *s, const img_entry *e, const char *dst, const img_owner *own,
                     const cm_cancel *cancel, cm_err *err);

#endif
