/* What the files of the image store share (not for use outside src/image/). */
#ifndef CM_IMAGE_INTERNAL_H
#define CM_IMAGE_INTERNAL_H

#include "image/layer.h"
#include "image/manifest.h"
#include "image/store.h"

#include <dirent.h>
#include <sys/types.h>

#define IMG_DEFAULT_MAX_SIZE ((uint64_t)8 << 30)

struct img_store {
        char *dir; /* <state>/images */
        int dfd;   /* O_PATH of dir */
        img_owner own;
        uint64_t max_size;
};

/* flock(2) on dir/name: LOCK_SH or LOCK_EX (| LOCK_NB, or
 * | IMG_LOCK_SETTLED: not blocking, but as img_flock_settled); the fd or
 * -1. */
#define IMG_LOCK_SETTLED 0x100
int img_lock(img_store *s, const char *name, int op);
/* A new directory under tmp/ (mkdtemp); its absolute path. */
char *img_tmp_dir(img_store *s, const char *what, cm_err *err);

/* blob.c: exactly `size` bytes of fd into a new NUL-terminated buffer;
 * 0, or -errno (-EIO: the file was shorter). */
int img_read_exact(int fd, size_t size, char **ret);
/* blob.c: blobs/sha256/<hex>.  put_fd copies from src while hashing and
 * publishes only when the digest (and size, when >= 0) match; with
 * `expect` NULL the digest is whatever the bytes hash to. */
int img_blob_put_fd(img_store *s, int src, const char *expect, int64_t size, char **ret_digest, cm_err *err);
int img_blob_put_mem(img_store *s, const char *buf, size_t len, char **ret_digest, cm_err *err);
int img_blob_open(img_store *s, const char *digest, cm_err *err);
int img_blob_read(img_store *s, const char *digest, size_t max, char **ret, size_t *ret_len, cm_err *err);
bool img_blob_exists(img_store *s, const char *digest);
/* import.c: a stored blob's size; 0 when it is not there. */
int64_t img_blob_size(img_store *s, const char *digest);

/* A layer unpacked from a stored blob into layers/<diffid>; expect_diffid
 * (hex, or NULL: whatever it is) must match.  *ret_bytes: its files'
 * bytes; ret_diffid: 65 bytes. */
int img_layer_ensure(img_store *s, const char *blob, const char *expect_diffid, const cm_cancel *cancel,
                     uint64_t *ret_bytes, char *ret_diffid, cm_err *err);

/* The index: read (no lock needed: it is replaced by rename) and the
 * publication of an image, which takes its names from any other. */
int img_index_read(img_store *s, img_entry **ret, size_t *ret_n, cm_err *err);
int img_index_publish(img_store *s, const img_entry *e, cm_err *err);
/* Under index.lock: replace index.json with v. */
int img_index_write(img_store *s, const img_entry *v, size_t n, cm_err *err);
/* The position of ref (a name, a digest, an id prefix) in v, or -1;
 * *ret_name: the name it matched, if by name. */
ssize_t img_index_find(const img_entry *v, size_t n, const char *ref, char **ret_name);
void img_strv_remove(char **v, size_t *n, const char *s);
/* gc.c: a directory of the store (relative, no symlink followed) to
 * read; NULL when it cannot be opened. */
DIR *img_opendir(img_store *s, const char *rel);
/* gc.c: everything in tmp/ (only while no import holds gc.lock). */
void img_clear_tmp(img_store *s);
/* pull.c: the layouts of stopped pulls that no pull holds; their bytes. */
uint64_t img_pulls_sweep(img_store *s);

#endif
