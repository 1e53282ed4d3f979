/* Removing images and collecting what no image needs.  Locks as
 * store.c says: gc.lock (exclusive here) before index.lock. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/build.h"
#include "image/internal.h"
#include "util/cleanup.h"

static void strv_free(char **v) {
        for (char **p = v; p && *p; p++)
                free(*p);
        free(v);
}

/* Everything in tmp/: only while no import holds gc.lock. */
DIR *img_opendir(img_store *s, const char *rel) {
        int fd = openat(s->dfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d && fd >= 0)
                (void)close(fd);
        return d;
}

void img_clear_tmp(img_store *s) {
        DIR *d = img_opendir(s, "tmp");
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        img_remove_at(dirfd(d), de->d_name);
        (void)closedir(d);
}

/* ---- removing ------------------------------------------------------------ */

/* Remove every entry of dir (relative to the store) whose name is not in
 * keep; the bytes it held. */
static uint64_t sweep(img_store *s, const char *dir, char *const *keep, size_t n_keep) {
        DIR *d = img_opendir(s, dir);
        struct dirent *de;
        uint64_t bytes = 0;

        if (!d)
                return 0;
        while ((de = readdir(d))) {
                bool kept = false;
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                for (size_t i = 0; i < n_keep && !kept; i++)
                        kept = strcmp(keep[i], de->d_name) == 0;
                if (kept)
                        continue;
                bytes += img_tree_bytes(dirfd(d), de->d_name);
                img_remove_at(dirfd(d), de->d_name);
        }
        (void)closedir(d);
        return bytes;
}

/* The layers and blobs no image in v needs (gc.lock held, exclusive). */
static uint64_t collect(img_store *s, const img_entry *v, size_t n) {
        char **layers = NULL, **blobs = NULL;
        size_t nl = 0, nb = 0;
        uint64_t bytes;

        for (size_t i = 0; i < n; i++) {
                cleanup_free char *buf = NULL;
                size_t len;
                img_manifest m;
                cm_err e = CM_ERR_INIT;

                layers = xrealloc(layers, (nl + v[i].n_layers + 1) * sizeof *layers);
                for (size_t k = 0; k < v[i].n_layers; k++)
                        layers[nl++] = v[i].layers[k];
                blobs = xrealloc(blobs, (nb + 2) * sizeof *blobs);
                blobs[nb++] = xstrdup(v[i].manifest + 7);
                blobs[nb++] = xstrdup(v[i].config + 7);
                if (img_blob_read(s, v[i].manifest, IMG_MAX_JSON, &buf, &len, &e) < 0 ||
                    img_parse_manifest(buf, len, &m, &e) < 0)
                        continue;
                blobs = xrealloc(blobs, (nb + m.n_layers + 1) * sizeof *blobs);
                for (size_t k = 0; k < m.n_layers; k++)
                        blobs[nb++] = xstrdup(m.layers[k].digest + 7);
                img_manifest_clear(&m);
        }
        bytes = sweep(s, "layers", layers, nl) + sweep(s, "blobs/sha256", blobs, nb);
        for (size_t k = 0; k < nb; k++)
                free(blobs[k]);
        free(layers);
        free(blobs);
        return bytes;
}

int img_remove(img_store *s, const char *ref, bool force, img_in_use_fn in_use, void *arg, cm_err *err) {
        /* collected below unless an import or build holds gc.lock; the
         * shared lock of one that just ended can linger a moment (CI13's
         * remove_image left a layer for prune so) */
        cleanup_close int gc = img_lock(s, "gc.lock", LOCK_EX | IMG_LOCK_SETTLED);
        cleanup_close int lock = img_lock(s, "index.lock", LOCK_EX);
        cleanup_free char *name = NULL, *user = NULL;
        img_entry *v;
        size_t n;
        ssize_t i;
        int r;

        if (lock < 0)
                return cm_err_sys(err, errno, "image store: cannot lock %s/index.lock", s->dir);
        if (img_index_read(s, &v, &n, err) < 0)
                return -1;
        i = img_index_find(v, n, ref, &name);
        if (i < 0) {
                img_entries_free(v, n);
                return cm_err_set(err, ENOENT, "image \"%s\" is not in the image store (list_images shows what is)",
                                  ref);
        }
        if (name && v[i].n_names > 1) {
                /* one of several names: only that name goes */
                img_strv_remove(v[i].names, &v[i].n_names, name);
        } else if (in_use && in_use(arg, v[i].manifest, &user)) {
                if (!force) {
                        img_entries_free(v, n);
                        return cm_err_set(err, EBUSY,
                                          "image \"%s\" is used by container %s: remove it first or force", ref, user);
                }
                /* kept, nameless, until its container goes (prune) */
                strv_free(v[i].names);
                v[i].names = xcalloc(1, sizeof *v[i].names);
                v[i].n_names = 0;
        } else {
                img_entry_clear(&v[i]);
                memmove(&v[i], &v[i + 1], (n - (size_t)i - 1) * sizeof *v);
                n--;
        }
        r = img_index_write(s, v, n, err);
        if (r == 0 && gc >= 0)
                (void)collect(s, v, n); /* an import runs: prune later */
        img_entries_free(v, n);
        return r;
}

int img_prune(img_store *s, bool all, img_in_use_fn in_use, void *arg, uint64_t *ret_bytes, size_t *ret_images,
              cm_err *err) {
        cleanup_close int gc = img_lock(s, "gc.lock", LOCK_EX);
        cleanup_close int lock = img_lock(s, "index.lock", LOCK_EX);
        img_entry *v;
        size_t n, k = 0, removed = 0;
        int r;

        if (gc < 0 || lock < 0)
                return cm_err_sys(err, errno, "image store: cannot lock %s", s->dir);
        if (img_index_read(s, &v, &n, err) < 0)
                return -1;
        for (size_t i = 0; i < n; i++) {
                cleanup_free char *user = NULL;
                if ((all || v[i].n_names == 0) && !(in_use && in_use(arg, v[i].manifest, &user))) {
                        img_entry_clear(&v[i]);
                        removed++;
                } else
                        v[k++] = v[i];
        }
        n = k;
        r = removed ? img_index_write(s, v, n, err) : 0;
        if (r == 0) {
                *ret_bytes = collect(s, v, n) + img_pulls_sweep(s);
                img_cache_sweep(s);
                *ret_images = removed;
                img_clear_tmp(s);
        }
        img_entries_free(v, n);
        return r;
}
