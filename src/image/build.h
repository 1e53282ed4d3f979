/* What the native builder needs of the store (build.c): layers written as
 * tar archives (from a RUN's overlay upper dir, or entry by entry for COPY
 * and ADD), the build cache, paths looked up through a stack of layers,
 * and the built image published.  Library code: no logging.
 *
 * A built layer is an uncompressed tar (media type
 * application/vnd.oci.image.layer.v1.tar: its digest is its diff-id),
 * stored as a blob and unpacked by img_layer_ensure like any pulled layer,
 * so what a build makes passes the same checks as what a registry sends. */
#ifndef CM_IMAGE_BUILD_H
#define CM_IMAGE_BUILD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include <jansson.h>

#include "image/store.h"

typedef struct img_tar img_tar;

/* A new layer archive in the store's tmp/. */
int img_tar_new(img_store *s, img_tar **ret, cm_err *err);
void img_tar_free(img_tar *t);
/* Entries: path relative to the image's root ("usr/bin/x"); owners are
 * the image's (0: its root), modes with their type bits. */
int img_tar_add_dir(img_tar *t, const char *path, mode_t mode, uid_t uid, gid_t gid, int64_t mtime, cm_err *err);
/* A regular file from fd (st: its stat; mode, uid, gid: as the image
 * gets it). */
int img_tar_add_file(img_tar *t, const char *path, int fd, const struct stat *st, mode_t mode, uid_t uid, gid_t gid,
                     cm_err *err);
int img_tar_add_symlink(img_tar *t, const char *path, const char *target, uid_t uid, gid_t gid, int64_t mtime,
                        cm_err *err);
/* Every entry of the archive read from fd (ADD of a local archive: tar,
 * compressed or not), re-rooted under dir ("app": a leading "/" dropped, a
 * ".." that would leave dir refused), owners as `uid`/`gid` when chown, else the
 * archive's.  -EINVAL with ret_not_archive true when fd is no archive. */
int img_tar_add_archive(img_tar *t, int fd, const char *dir, bool chown, uid_t uid, gid_t gid, bool *ret_not_archive,
                        cm_err *err);
/* A RUN's changes: everything below the directory `upper` (an overlayfs
 * upper dir, owners as the store's img_owner), whiteouts (character
 * devices 0/0) as `.wh.NAME`, opaque directories (user.overlay.opaque=y)
 * with `.wh..wh..opq`.  What the sandbox's set-up made rather than the
 * command (relative paths in skip: a file or symlink named there, a
 * directory named there with nothing else written below it) is left
 * out. */
int img_tar_add_upper(img_tar *t, int upper, const char *const *skip, cm_err *err);
/* Entries written so far. */
size_t img_tar_entries(const img_tar *t);
/* Close the archive, store it as a blob and unpack it as a layer:
 * ret_diffid (65 bytes, hex) and its files' bytes. */
int img_tar_commit(img_tar *t, const cm_cancel *cancel, char *ret_diffid, uint64_t *ret_bytes, cm_err *err);

/* A path cleaned as Go's filepath.Clean would, relative ("/a/./b/../c"
 * is "a/c"): ".." stops at the root (*ret_escaped then true). */
char *img_path_clean(const char *p, bool *ret_escaped);
/* The image's id of a store file's owner (store.h, img_owner): id k of
 * the sandboxes' range is k; anything else the range's nobody, 65534. */
uid_t img_owner_unshift(const img_owner *own, unsigned id, bool is_uid);

/* ---- the build cache ------------------------------------------------------ */

/* A layer-making step's result by its key (hex of a sha256 the builder
 * makes of everything the step depends on): the layer's diff-id ("" for
 * a step that changed nothing) and when it was made.  false: not cached,
 * or its layer is gone. */
bool img_cache_get(img_store *s, const char *key, char *ret_diffid, int64_t *ret_created);
void img_cache_put(img_store *s, const char *key, const char *diffid, int64_t created);
/* Prune (gc.lock held): the entries whose layer is gone. */
void img_cache_sweep(img_store *s);

/* ---- paths through layers ----------------------------------------------- */

/* path ("a/b/c", relative to the root) in the stack of layer dirs (top
 * first) as overlayfs would show it: symlinks in its directories followed
 * (kept inside the root, at most 40), whiteouts and opaque dirs honoured.
 * 0 with *ret_st, ret_path (the resolved path, relative; malloc'd) and
 * ret_layer (the index of the layer it is in);
 * -ENOENT when it does not exist.  The last component's symlink is
 * followed only with `follow`. */
int img_layers_lookup(char *const *layers, const char *path, bool follow, struct stat *ret_st, char **ret_path,
                      int *ret_layer);
/* The entries of directory dir (relative, resolved: no symlink on the
 * way) as overlayfs merges them: the top layer's of each name, whiteouts
 * hiding, an opaque directory ending the merge; sorted by name.  layer:
 * the index in layers of the one it comes from.  -ENOENT: no such dir. */
typedef struct img_dirent {
        char *name;
        int layer;
        struct stat st;
} img_dirent;
int img_layers_list(char *const *layers, const char *dir, img_dirent **ret, size_t *ret_n);
void img_dirents_free(img_dirent *v, size_t n);

/* ---- publishing ----------------------------------------------------------- */

/* The layer descriptors (mediaType, digest, size) of a stored image's
 * manifest, bottom first: a build's base. */
int img_build_base_layers(img_store *s, const img_entry *base, json_t **ret, cm_err *err);
/* The image: config (a JSON object with architecture, os, config,
 * history; its rootfs is set from diffids, hex, bottom first), a manifest
 * naming the layers by descs (one descriptor per diff-id), the index
 * entry under name (NULL: untagged).  created: unix seconds; size: the
 * layers' bytes. */
int img_build_publish(img_store *s, json_t *config, json_t *descs, char *const *diffids, size_t n, const char *name,
                      int64_t created, uint64_t size, img_entry *ret, cm_err *err);
/* The descriptor of a layer this build made (its uncompressed tar). */
json_t *img_build_layer_desc(img_store *s, const char *diffid);
/* A build's base image, resolved into e: its config document (without
 * rootfs) and layer descriptors.  e is cleared on failure; ref names it
 * in errors. */
int img_build_base(img_store *s, const char *ref, img_entry *e, json_t **ret_doc, json_t **ret_descs, cm_err *err);
/* A directory of the tmp dir removed (a RUN's, made by img_build_tmp). */
void img_build_tmp_remove(img_store *s, const char *dir);
/* A directory's entries (not . and ..), sorted; NULL-terminated. */
char **img_list_dir(int fd);
/* rel (relative, no symlink on the way; "": the layer itself) in the
 * layer directory `layer`, opened O_DIRECTORY; -1 with errno. */
int img_layer_opendir(const char *layer, const char *rel);
/* gc.lock, shared, for the whole build: an fd, or -1. */
int img_build_lock(img_store *s, cm_err *err);
/* A new directory under the store's tmp/ (cleared when no build or
 * import holds gc.lock); its absolute path. */
char *img_build_tmp(img_store *s, const char *what, cm_err *err);
/* The bytes of a stored layer's files. */
uint64_t img_layer_bytes(img_store *s, const char *diffid);
/* "amd64", "arm64", ... */
const char *img_host_arch(void);

#endif
