/* The store's side of a native build (build.h): layer archives written
 * with libarchive (pax, uncompressed), the build cache, paths through a
 * stack of layers, and the built image's config, manifest and index
 * entry.
 *
 * A layer archive goes to a file under tmp/, then through the same door
 * as a pulled one: img_blob_put_fd (digest computed) and
 * img_layer_ensure (unpacked by the hostile-input reader).  Entries are
 * written in sorted order, so the same tree makes the same diff-id. */
#include "image/build.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "image/internal.h"
#include "util/cleanup.h"
#include "util/json.h"

#define IO_BLOCK (128 * 1024)
#define MAX_DEPTH 256
#define MAX_LINKS 40
#define LAYER_MEDIA "application/vnd.oci.image.layer.v1.tar"

struct img_tar {
        img_store *s;
        char *dir;  /* tmp/<dir>: holds the archive */
        char *path; /* the archive */
        int fd;
        struct archive *a;
        size_t entries;
        uint64_t bytes; /* written so far, 512 a header: the size cap's count */
        /* hard links of the upper dir: dev/ino -> the first path */
        struct link {
                dev_t dev;
                ino_t ino;
                char *path;
        } * links;
        size_t n_links;
        char *why; /* the first write error */
};

static int tar_error(img_tar *t, const char *path, cm_err *err) {
        return cm_err_set(err, EIO, "layer archive: cannot write \"%s\": %s", path, archive_error_string(t->a));
}

int img_tar_new(img_store *s, img_tar **ret, cm_err *err) {
        img_tar *t = xcalloc(1, sizeof *t);

        t->s = s;
        t->fd = -1;
        if (!(t->dir = img_tmp_dir(s, "build", err))) {
                free(t);
                return -1;
        }
        t->path = xasprintf("%s/layer.tar", t->dir);
        t->fd = open(t->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        t->a = archive_write_new();
        if (t->fd < 0 || !t->a || archive_write_set_format_pax_restricted(t->a) != ARCHIVE_OK ||
            archive_write_add_filter_none(t->a) != ARCHIVE_OK ||
            archive_write_set_bytes_in_last_block(t->a, 1) != ARCHIVE_OK ||
            archive_write_open_fd(t->a, t->fd) != ARCHIVE_OK) {
                int e = errno;
                img_tar_free(t);
                return cm_err_sys(err, e ? e : EIO, "layer archive: cannot start one in the image store");
        }
        *ret = t;
        return 0;
}

void img_tar_free(img_tar *t) {
        if (!t)
                return;
        if (t->a)
                (void)archive_write_free(t->a);
        if (t->fd >= 0)
                (void)close(t->fd);
        if (t->dir) {
                (void)unlink(t->path);
                (void)rmdir(t->dir);
        }
        for (size_t i = 0; i < t->n_links; i++)
                free(t->links[i].path);
        free(t->links);
        free(t->path);
        free(t->dir);
        free(t->why);
        free(t);
}

size_t img_tar_entries(const img_tar *t) { return t->entries; }

static struct archive_entry *entry(const char *path, mode_t mode, uid_t uid, gid_t gid, int64_t mtime) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, path);
        archive_entry_set_mode(e, mode);
        archive_entry_set_uid(e, uid);
        archive_entry_set_gid(e, gid);
        archive_entry_set_mtime(e, (time_t)mtime, 0);
        return e;
}

/* Count bytes against the store's size cap (CONTAINER_MCP_IMAGE_MAX_SIZE):
 * a context or an ADD archive (a decompression bomb) never writes a layer
 * bigger than an image may be. */
static int charge(img_tar *t, uint64_t n, const char *path, cm_err *err) {
        t->bytes += n;
        if (t->bytes > img_store_max_size(t->s))
                return cm_err_set(err, EFBIG,
                                  "the layer passes %llu bytes at \"%s\", more than an image may be "
                                  "(CONTAINER_MCP_IMAGE_MAX_SIZE)",
                                  (unsigned long long)img_store_max_size(t->s), path);
        return 0;
}

static int put_header(img_tar *t, struct archive_entry *e, const char *path, cm_err *err) {
        int r;
        if (charge(t, 512, path, err) < 0) {
                archive_entry_free(e);
                return -1;
        }
        r = archive_write_header(t->a, e);
        archive_entry_free(e);
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
                return tar_error(t, path, err);
        t->entries++;
        return 0;
}

int img_tar_add_dir(img_tar *t, const char *path, mode_t mode, uid_t uid, gid_t gid, int64_t mtime, cm_err *err) {
        cleanup_free char *name = xasprintf("%s/", path);
        return put_header(t, entry(name, S_IFDIR | (mode & 07777), uid, gid, mtime), path, err);
}

int img_tar_add_symlink(img_tar *t, const char *path, const char *target, uid_t uid, gid_t gid, int64_t mtime,
                        cm_err *err) {
        struct archive_entry *e = entry(path, S_IFLNK | 0777, uid, gid, mtime);
        archive_entry_set_symlink(e, target);
        return put_header(t, e, path, err);
}

int img_tar_add_file(img_tar *t, const char *path, int fd, const struct stat *st, mode_t mode, uid_t uid, gid_t gid,
                     cm_err *err) {
        struct archive_entry *e = entry(path, S_IFREG | (mode & 07777), uid, gid, (int64_t)st->st_mtime);
        cleanup_free char *buf = xmalloc(IO_BLOCK);
        int64_t left = st->st_size;

        archive_entry_set_size(e, st->st_size);
        if (put_header(t, e, path, err) < 0)
                return -1;
        while (left > 0) {
                ssize_t n = read(fd, buf, left < IO_BLOCK ? (size_t)left : IO_BLOCK);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return cm_err_sys(err, n < 0 ? errno : EIO, "\"%s\" changed while it was read", path);
                if (charge(t, (uint64_t)n, path, err) < 0)
                        return -1;
                if (archive_write_data(t->a, buf, (size_t)n) != n)
                        return tar_error(t, path, err);
                left -= n;
        }
        return 0;
}

/* ---- ADD of an archive ------------------------------------------------------ */

char *img_path_clean(const char *p, bool *ret_escaped) {
        cleanup_free char *copy = xstrdup(p);
        char *out = xstrdup(""), *save = NULL;

        if (ret_escaped)
                *ret_escaped = false;
        for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                char *prev = out, *slash;
                if (strcmp(c, ".") == 0)
                        continue;
                if (strcmp(c, "..") == 0) {
                        if (!out[0] && ret_escaped)
                                *ret_escaped = true;
                        slash = strrchr(out, '/');
                        *(slash ? slash : out) = 0;
                        continue;
                }
                out = xasprintf("%s%s%s", prev, prev[0] ? "/" : "", c);
                free(prev);
        }
        return out;
}

/* name (an entry of the archive) under dir, cleaned as Docker's untar
 * does; NULL for a name whose ".." would leave dir. */
static char *reroot(const char *dir, const char *name) {
        bool escaped;
        cleanup_free char *out = img_path_clean(name, &escaped);
        if (escaped)
                return NULL;
        return out[0] ? xasprintf("%s%s%s", dir, dir[0] ? "/" : "", out) : xstrdup(dir);
}

int img_tar_add_archive(img_tar *t, int fd, const char *dir, bool chown, uid_t uid, gid_t gid, bool *ret_not_archive,
                        cm_err *err) {
        struct archive *a = archive_read_new();
        struct archive_entry *e;
        cleanup_free char *buf = xmalloc(IO_BLOCK);
        size_t n = 0;
        int r;

        *ret_not_archive = false;
        (void)archive_read_support_filter_all(a);
        (void)archive_read_support_format_tar(a);
        (void)archive_read_support_format_gnutar(a);
        if (archive_read_open_fd(a, fd, IO_BLOCK) != ARCHIVE_OK) {
                *ret_not_archive = true;
                (void)archive_read_free(a);
                return -EINVAL;
        }
        while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
                const char *hl = archive_entry_hardlink(e);
                cleanup_free char *name = reroot(dir, archive_entry_pathname(e));
                cleanup_free char *target = hl ? reroot(dir, hl) : NULL;
                la_ssize_t got;

                if (!name || (hl && !target)) {
                        r = cm_err_set(err, EINVAL, "the archive's entry \"%s\" leaves its directory (\"..\"): refused",
                                       archive_entry_pathname(e));
                        (void)archive_read_free(a);
                        return r;
                }
                archive_entry_set_pathname(e, name);
                if (target)
                        archive_entry_set_hardlink(e, target);
                if (chown) {
                        archive_entry_set_uid(e, uid);
                        archive_entry_set_gid(e, gid);
                }
                archive_entry_set_uname(e, NULL);
                archive_entry_set_gname(e, NULL);
                if (charge(t, 512, name, err) < 0 || archive_write_header(t->a, e) < ARCHIVE_WARN) {
                        r = err->code ? -1 : tar_error(t, name, err);
                        (void)archive_read_free(a);
                        return r;
                }
                t->entries++;
                n++;
                while ((got = archive_read_data(a, buf, IO_BLOCK)) > 0)
                        if (charge(t, (uint64_t)got, name, err) < 0 ||
                            archive_write_data(t->a, buf, (size_t)got) != got) {
                                r = err->code ? -1 : tar_error(t, name, err);
                                (void)archive_read_free(a);
                                return r;
                        }
                if (got < 0)
                        break;
        }
        if (r != ARCHIVE_EOF) {
                /* the first header unreadable: not an archive, a plain file */
                *ret_not_archive = n == 0;
                r = *ret_not_archive ? -EINVAL
                                     : cm_err_set(err, EINVAL, "the archive is damaged: %s", archive_error_string(a));
                (void)archive_read_free(a);
                return r;
        }
        (void)archive_read_free(a);
        return 0;
}

/* ---- a RUN's upper dir ---------------------------------------------------- */

static bool is_whiteout(const struct stat *st) { return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0); }

/* An empty entry: a whiteout (.wh.NAME) or an opaque marker. */
static int put_marker(img_tar *t, const char *path, int64_t mtime, cm_err *err) {
        struct archive_entry *e = entry(path, S_IFREG | 0644, 0, 0, mtime);
        archive_entry_set_size(e, 0);
        return put_header(t, e, path, err);
}

typedef struct walk {
        img_tar *t;
        const char *const *skip;
        img_owner own;
} walk;

static bool skipped(const walk *w, const char *path) {
        for (const char *const *p = w->skip; p && *p; p++)
                if (strcmp(*p, path) == 0)
                        return true;
        return false;
}

uid_t img_owner_unshift(const img_owner *own, unsigned id, bool is_uid) {
        unsigned base = is_uid ? own->uid_base : own->gid_base;
        if (!own->chown)
                return id == (is_uid ? getuid() : getgid()) ? 0 : 65534;
        return id >= base && id - base < 65536 ? id - base : 65534;
}

static uid_t unshift(const walk *w, unsigned id, bool is_uid) { return img_owner_unshift(&w->own, id, is_uid); }

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

char **img_list_dir(int fd) {
        int dup_fd = dup(fd);
        DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
        struct dirent *de;
        char **v = xcalloc(1, sizeof *v);
        size_t n = 0;

        if (!d) {
                if (dup_fd >= 0)
                        (void)close(dup_fd);
                return v;
        }
        rewinddir(d);
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                v = xrealloc(v, (n + 2) * sizeof *v);
                v[n++] = xstrdup(de->d_name);
                v[n] = NULL;
        }
        (void)closedir(d);
        qsort(v, n, sizeof *v, cmp_name);
        return v;
}

static void strv_free(char **v) {
        for (char **p = v; p && *p; p++)
                free(*p);
        free(v);
}

static bool opaque(int fd) {
        char v[2] = {0};
        return (fgetxattr(fd, "user.overlay.opaque", v, sizeof v) == 1 ||
                fgetxattr(fd, "trusted.overlay.opaque", v, sizeof v) == 1) &&
               v[0] == 'y';
}

/* The pending directories: written only once something is written below
 * them, or when they end and are not skipped. */
typedef struct pending {
        char *path;
        struct stat st;
        bool written;
        bool opaque;
        struct pending *up;
} pending;

static int flush(walk *w, pending *p, cm_err *err) {
        if (!p || p->written)
                return 0;
        if (flush(w, p->up, err) < 0)
                return -1;
        p->written = true;
        if (img_tar_add_dir(w->t, p->path, p->st.st_mode, unshift(w, p->st.st_uid, true),
                            unshift(w, p->st.st_gid, false), (int64_t)p->st.st_mtime, err) < 0)
                return -1;
        if (p->opaque) {
                cleanup_free char *wh = xasprintf("%s/.wh..wh..opq", p->path);
                return put_marker(w->t, wh, (int64_t)p->st.st_mtime, err);
        }
        return 0;
}

static int walk_dir(walk *w, int dir, pending *here, int depth, cm_err *err);

static int walk_entry(walk *w, int dir, pending *here, const char *name, int depth, cm_err *err) {
        cleanup_free char *path = here ? xasprintf("%s/%s", here->path, name) : xstrdup(name);
        struct stat st;

        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return cm_err_sys(err, errno, "the RUN's changes: %s", path);
        if (S_ISDIR(st.st_mode)) {
                cleanup_close int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                pending p = {path, st, false, false, here};
                if (fd < 0)
                        return cm_err_sys(err, errno, "the RUN's changes: %s", path);
                if (depth >= MAX_DEPTH)
                        return cm_err_set(err, ELOOP, "the RUN's changes: %s is nested too deep", path);
                p.opaque = opaque(fd);
                if (!skipped(w, path) && flush(w, &p, err) < 0)
                        return -1;
                return walk_dir(w, fd, &p, depth + 1, err);
        }
        if (skipped(w, path))
                return 0;
        if (flush(w, here, err) < 0)
                return -1;
        if (is_whiteout(&st)) {
                cleanup_free char *wh = here ? xasprintf("%s/.wh.%s", here->path, name) : xasprintf(".wh.%s", name);
                return put_marker(w->t, wh, (int64_t)st.st_mtime, err);
        }
        if (S_ISLNK(st.st_mode)) {
                char target[4096];
                ssize_t n = readlinkat(dir, name, target, sizeof target - 1);
                if (n < 0)
                        return cm_err_sys(err, errno, "the RUN's changes: %s", path);
                target[n] = 0;
                return img_tar_add_symlink(w->t, path, target, unshift(w, st.st_uid, true),
                                           unshift(w, st.st_gid, false), (int64_t)st.st_mtime, err);
        }
        if (S_ISREG(st.st_mode)) {
                cleanup_close int fd = -1;
                if (st.st_nlink > 1) {
                        for (size_t i = 0; i < w->t->n_links; i++)
                                if (w->t->links[i].dev == st.st_dev && w->t->links[i].ino == st.st_ino) {
                                        struct archive_entry *e =
                                                entry(path, S_IFREG | (st.st_mode & 07777), unshift(w, st.st_uid, true),
                                                      unshift(w, st.st_gid, false), (int64_t)st.st_mtime);
                                        archive_entry_set_hardlink(e, w->t->links[i].path);
                                        return put_header(w->t, e, path, err);
                                }
                        w->t->links = xrealloc(w->t->links, (w->t->n_links + 1) * sizeof *w->t->links);
                        w->t->links[w->t->n_links++] = (struct link){st.st_dev, st.st_ino, xstrdup(path)};
                }
                fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
                if (fd < 0)
                        return cm_err_sys(err, errno, "the RUN's changes: %s", path);
                return img_tar_add_file(w->t, path, fd, &st, st.st_mode, unshift(w, st.st_uid, true),
                                        unshift(w, st.st_gid, false), err);
        }
        if (S_ISFIFO(st.st_mode)) {
                struct archive_entry *e = entry(path, S_IFIFO | (st.st_mode & 07777), unshift(w, st.st_uid, true),
                                                unshift(w, st.st_gid, false), (int64_t)st.st_mtime);
                return put_header(w->t, e, path, err);
        }
        return 0; /* device nodes and sockets: never in a layer */
}

static int walk_dir(walk *w, int dir, pending *here, int depth, cm_err *err) {
        char **names = img_list_dir(dir);
        int r = 0;

        for (char **p = names; *p && r == 0; p++)
                r = walk_entry(w, dir, here, *p, depth, err);
        strv_free(names);
        /* an empty directory the RUN made, or one it emptied */
        if (r == 0 && here && !here->written && !skipped(w, here->path))
                r = flush(w, here, err);
        return r;
}

int img_tar_add_upper(img_tar *t, int upper, const char *const *skip, cm_err *err) {
        walk w = {t, skip, t->s->own};
        return walk_dir(&w, upper, NULL, 0, err);
}

int img_tar_commit(img_tar *t, const cm_cancel *cancel, char *ret_diffid, uint64_t *ret_bytes, cm_err *err) {
        cleanup_free char *digest = NULL;

        if (archive_write_close(t->a) != ARCHIVE_OK)
                return tar_error(t, "(the end)", err);
        if (lseek(t->fd, 0, SEEK_SET) < 0)
                return cm_err_sys(err, errno, "layer archive");
        if (img_blob_put_fd(t->s, t->fd, NULL, -1, &digest, err) < 0)
                return -1;
        /* uncompressed: the blob's digest is the diff-id */
        return img_layer_ensure(t->s, digest, digest + 7, cancel, ret_bytes, ret_diffid, err);
}

/* ---- the cache ------------------------------------------------------------- */

static bool hex64(const char *s) { return strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64; }

bool img_cache_get(img_store *s, const char *key, char *ret_diffid, int64_t *ret_created) {
        cleanup_free char *rel = hex64(key) ? xasprintf("build-cache/%s", key) : NULL;
        cleanup_close int fd = rel ? openat(s->dfd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
        char buf[128], diff[65] = "";
        long long created = 0;
        ssize_t n;

        if (fd < 0 || (n = read(fd, buf, sizeof buf - 1)) <= 0)
                return false;
        buf[n] = 0;
        if (sscanf(buf, "%lld %64s", &created, diff) < 1 || (diff[0] && !hex64(diff)))
                return false;
        if (diff[0]) {
                cleanup_free char *layer = xasprintf("layers/%s", diff);
                cleanup_free char *blob = xasprintf("sha256:%s", diff);
                struct stat st;
                if (fstatat(s->dfd, layer, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
                    !img_blob_exists(s, blob))
                        return false; /* pruned since */
        }
        memcpy(ret_diffid, diff, sizeof diff);
        *ret_created = created;
        return true;
}

void img_cache_put(img_store *s, const char *key, const char *diffid, int64_t created) {
        cleanup_free char *rel = xasprintf("build-cache/%s", key), *tmp = xasprintf("build-cache/.%s", key);
        cleanup_free char *text = xasprintf("%lld %s\n", (long long)created, diffid);
        cleanup_close int fd = -1;

        if (!hex64(key))
                return;
        (void)mkdirat(s->dfd, "build-cache", 0700);
        fd = openat(s->dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return;
        if (write(fd, text, strlen(text)) == (ssize_t)strlen(text))
                (void)renameat(s->dfd, tmp, s->dfd, rel);
        else
                (void)unlinkat(s->dfd, tmp, 0);
}

/* ---- paths through layers ------------------------------------------------- */

/* Split path onto the front of the list of components still to walk. */
static void push_path(char ***todo, size_t *n, const char *path) {
        cleanup_free char *copy = xstrdup(path);
        char *save = NULL, **v = NULL;
        size_t k = 0;

        for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                v = xrealloc(v, (k + 1) * sizeof *v);
                v[k++] = xstrdup(c);
        }
        /* the list is a stack: its last element is walked first */
        *todo = xrealloc(*todo, (*n + k + 1) * sizeof **todo);
        for (size_t i = 0; i < k; i++)
                (*todo)[*n + i] = v[k - 1 - i];
        *n += k;
        free(v);
}

static int cmp_dirent(const void *a, const void *b) {
        return strcmp(((const img_dirent *)a)->name, ((const img_dirent *)b)->name);
}

/* cur/name in the layers: the top layer with it decides; an opaque cur
 * hides the layers below.  0, or -ENOENT. */
static int find(char *const *layers, const char *cur, const char *name, struct stat *ret, int *ret_layer) {
        for (int i = 0; layers[i]; i++) {
                cleanup_close int dir = img_layer_opendir(layers[i], cur);
                if (dir < 0)
                        continue;
                if (fstatat(dir, name, ret, AT_SYMLINK_NOFOLLOW) == 0) {
                        *ret_layer = i;
                        return is_whiteout(ret) ? -ENOENT : 0;
                }
                if (opaque(dir))
                        break;
        }
        return -ENOENT;
}

int img_layers_lookup(char *const *layers, const char *path, bool follow, struct stat *ret_st, char **ret_path,
                      int *ret_layer) {
        char **todo = NULL;
        size_t n = 0;
        cleanup_free char *cur = xstrdup("");
        struct stat st = {0};
        int links = 0, r = 0, at = 0;

        push_path(&todo, &n, path);
        if (n == 0) {
                /* the root itself: the top layer's */
                st.st_mode = S_IFDIR | 0755;
                for (int i = 0; layers[i]; i++)
                        if (stat(layers[i], &st) == 0)
                                break;
        }
        while (n > 0 && r == 0) {
                char *c = todo[--n];
                int layer;
                if (strcmp(c, ".") == 0) {
                        free(c);
                        continue;
                }
                if (strcmp(c, "..") == 0) {
                        char *slash = strrchr(cur, '/');
                        if (slash)
                                *slash = 0;
                        else
                                cur[0] = 0;
                        free(c);
                        continue;
                }
                r = find(layers, cur, c, &st, &layer);
                if (r == 0)
                        at = layer;
                if (r == 0 && S_ISLNK(st.st_mode) && (n > 0 || follow)) {
                        char target[4096];
                        cleanup_close int dir = img_layer_opendir(layers[layer], cur);
                        ssize_t len = -1;
                        if (dir >= 0)
                                len = readlinkat(dir, c, target, sizeof target - 1);
                        free(c);
                        if (len < 0 || ++links > MAX_LINKS) {
                                r = len < 0 ? -ENOENT : -ELOOP;
                                break;
                        }
                        target[len] = 0;
                        if (target[0] == '/')
                                cur[0] = 0;
                        push_path(&todo, &n, target);
                        continue;
                }
                if (r == 0 && n > 0 && !S_ISDIR(st.st_mode))
                        r = -ENOTDIR;
                if (r == 0) {
                        char *next = cur[0] ? xasprintf("%s/%s", cur, c) : xstrdup(c);
                        free(cur);
                        cur = next;
                }
                free(c);
        }
        while (n > 0)
                free(todo[--n]);
        free(todo);
        if (r < 0)
                return r;
        if (ret_st)
                *ret_st = st;
        if (ret_path)
                *ret_path = steal_pointer(&cur);
        if (ret_layer)
                *ret_layer = at;
        return 0;
}

/* ---- a directory through layers --------------------------------------------- */

int img_layers_list(char *const *layers, const char *dir, img_dirent **ret, size_t *ret_n) {
        img_dirent *v = NULL;
        size_t n = 0;
        cleanup_json json_t *seen = json_object(); /* names an upper layer had */
        bool found = false;

        for (int i = 0; layers[i]; i++) {
                cleanup_close int root = open(layers[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd = -1;
                struct stat st;
                char **names;
                if (root < 0)
                        continue;
                if (dir[0] && fstatat(root, dir, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode))
                        break; /* a file or a whiteout here hides the layers below */
                if ((fd = img_layer_opendir(layers[i], dir)) < 0)
                        continue;
                found = true;
                names = img_list_dir(fd);
                for (char **p = names; *p; p++) {
                        if (json_object_get(seen, *p))
                                continue;
                        (void)json_object_set_new(seen, *p, json_true());
                        if (fstatat(fd, *p, &st, AT_SYMLINK_NOFOLLOW) < 0 || is_whiteout(&st))
                                continue;
                        v = xrealloc(v, (n + 1) * sizeof *v);
                        v[n++] = (img_dirent){xstrdup(*p), i, st};
                }
                strv_free(names);
                if (opaque(fd))
                        break;
        }
        if (!found) {
                free(v);
                return -ENOENT;
        }
        if (n > 1)
                qsort(v, n, sizeof *v, cmp_dirent);
        *ret = v;
        *ret_n = n;
        return 0;
}

void img_dirents_free(img_dirent *v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i].name);
        free(v);
}

/* ---- publishing ------------------------------------------------------------ */

const char *img_host_arch(void) {
        static char arch[32];
        struct utsname u;
        if (uname(&u) < 0 || strcmp(u.machine, "x86_64") == 0)
                return "amd64";
        if (strcmp(u.machine, "aarch64") == 0)
                return "arm64";
        (void)snprintf(arch, sizeof arch, "%.31s", u.machine);
        return arch;
}

int img_build_base_layers(img_store *s, const img_entry *base, json_t **ret, cm_err *err) {
        cleanup_free char *buf = NULL;
        size_t len;
        img_manifest m;
        json_t *v;

        if (img_blob_read(s, base->manifest, IMG_MAX_JSON, &buf, &len, err) < 0 ||
            img_parse_manifest(buf, len, &m, err) < 0)
                return -1;
        if (m.n_layers != base->n_layers) {
                img_manifest_clear(&m);
                return cm_err_set(err, EINVAL, "image store: the manifest of %s does not match its index entry",
                                  base->manifest);
        }
        v = json_array();
        for (size_t i = 0; i < m.n_layers; i++)
                (void)json_array_append_new(v,
                                            json_pack("{s:s, s:s, s:I}", "mediaType", m.layers[i].media_type, "digest",
                                                      m.layers[i].digest, "size", (json_int_t)m.layers[i].size));
        img_manifest_clear(&m);
        *ret = v;
        return 0;
}

json_t *img_build_layer_desc(img_store *s, const char *diffid) {
        cleanup_free char *digest = xasprintf("sha256:%s", diffid);
        return json_pack("{s:s, s:s, s:I}", "mediaType", LAYER_MEDIA, "digest", digest, "size",
                         (json_int_t)img_blob_size(s, digest));
}

static char *put_json(img_store *s, json_t *j, cm_err *err) {
        cleanup_free char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        char *digest = NULL;
        if (!text) {
                (void)cm_err_set(err, ENOMEM, "image store: cannot write JSON");
                return NULL;
        }
        return img_blob_put_mem(s, text, strlen(text), &digest, err) < 0 ? NULL : digest;
}

int img_build_publish(img_store *s, json_t *config, json_t *descs, char *const *diffids, size_t n, const char *name,
                      int64_t created, uint64_t size, img_entry *ret, cm_err *err) {
        cleanup_json json_t *ids = json_array(), *m = NULL;
        cleanup_free char *cdigest = NULL, *mdigest = NULL;
        char iso[32];
        time_t now = (time_t)created;
        struct tm tm;
        img_entry e = {0};
        int r;

        for (size_t i = 0; i < n; i++)
                (void)json_array_append_new(ids, json_pack("s+", "sha256:", diffids[i]));
        (void)strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
        (void)json_object_set_new(config, "created", json_string(iso));
        (void)json_object_set_new(config, "rootfs", json_pack("{s:s, s:O}", "type", "layers", "diff_ids", ids));
        if (!(cdigest = put_json(s, config, err)))
                return -1;
        m = json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:O}", "schemaVersion", 2, "mediaType",
                      "application/vnd.oci.image.manifest.v1+json", "config", "mediaType",
                      "application/vnd.oci.image.config.v1+json", "digest", cdigest, "size",
                      (json_int_t)img_blob_size(s, cdigest), "layers", descs);
        if (!(mdigest = put_json(s, m, err)))
                return -1;
        e.manifest = steal_pointer(&mdigest);
        e.config = steal_pointer(&cdigest);
        e.names = xcalloc(2, sizeof *e.names);
        if (name && (e.names[0] = img_name_normalize(name)))
                e.n_names = 1;
        e.layers = xcalloc(n + 1, sizeof *e.layers);
        for (size_t i = 0; i < n; i++)
                e.layers[i] = xstrdup(diffids[i]);
        e.n_layers = n;
        e.size = size;
        e.created = created;
        r = img_index_publish(s, &e, err);
        if (r == 0 && ret)
                *ret = e;
        else
                img_entry_clear(&e);
        return r;
}

int img_build_base(img_store *s, const char *ref, img_entry *ret, json_t **ret_doc, json_t **ret_descs, cm_err *err) {
        cleanup_free char *buf = NULL;
        size_t len;
        json_t *doc;

        if (img_blob_read(s, ret->config, IMG_MAX_JSON, &buf, &len, err) < 0) {
                img_entry_clear(ret);
                return -1;
        }
        doc = json_loadb(buf, len, 0, NULL);
        if (!json_is_object(doc)) {
                json_decref(doc);
                img_entry_clear(ret);
                return cm_err_set(err, EINVAL, "image %s: its config is not a JSON object", ref);
        }
        if (img_build_base_layers(s, ret, ret_descs, err) < 0) {
                json_decref(doc);
                img_entry_clear(ret);
                return -1;
        }
        (void)json_object_del(doc, "rootfs");
        *ret_doc = doc;
        return 0;
}

int img_build_lock(img_store *s, cm_err *err) {
        int fd = img_lock(s, "gc.lock", LOCK_SH);
        if (fd < 0)
                return cm_err_sys(err, errno, "image store: cannot lock %s/gc.lock", s->dir);
        return fd;
}

char *img_build_tmp(img_store *s, const char *what, cm_err *err) { return img_tmp_dir(s, what, err); }

void img_build_tmp_remove(img_store *s, const char *dir) {
        size_t len = strlen(s->dir);
        if (strncmp(dir, s->dir, len) == 0 && dir[len] == '/')
                img_remove_at(s->dfd, dir + len + 1);
}

int img_layer_opendir(const char *layer, const char *rel) {
        cleanup_close int root = open(layer, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return -1;
        return rel[0] ? img_open_beneath(root, rel, O_RDONLY | O_DIRECTORY)
                      : openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

uint64_t img_layer_bytes(img_store *s, const char *diffid) {
        cleanup_free char *rel = xasprintf("layers/%s", diffid);
        return img_tree_bytes(s->dfd, rel);
}

void img_cache_sweep(img_store *s) {
        DIR *d = img_opendir(s, "build-cache");
        struct dirent *de;
        if (!d)
                return;
        while ((de = readdir(d))) {
                char diff[65];
                int64_t created;
                if (de->d_name[0] == '.' && strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        (void)unlinkat(dirfd(d), de->d_name, 0); /* a write that stopped */
                else if (hex64(de->d_name) && !img_cache_get(s, de->d_name, diff, &created))
                        (void)unlinkat(dirfd(d), de->d_name, 0);
        }
        (void)closedir(d);
}
