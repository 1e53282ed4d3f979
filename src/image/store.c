/* The image store: opening it, its index, names, removal and pruning.
 *
 * Locks (flock, so they go with a process that dies):
 *   gc.lock     shared by every import for its whole run, exclusive for
 *               prune and for removal's clean-up, so nothing deletes a
 *               layer an import has unpacked but not yet published;
 *   index.lock  exclusive around each read-modify-write of index.json.
 * Always gc.lock first.  Readers take neither: index.json is only ever
 * replaced whole by rename(2).  Removal and prune are gc.c; names name.c. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/internal.h"
#include "util/cleanup.h"
#include "util/json.h"

#define INDEX_MAX ((size_t)64 << 20)

static void strv_free(char **v) {
        for (char **p = v; p && *p; p++)
                free(*p);
        free(v);
}

void img_entry_clear(img_entry *e) {
        free(e->manifest);
        free(e->config);
        strv_free(e->names);
        strv_free(e->layers);
        *e = (img_entry){0};
}

void img_entries_free(img_entry *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                img_entry_clear(&v[i]);
        free(v);
}

const char *img_store_dir(const img_store *s) { return s->dir; }
uint64_t img_store_max_size(const img_store *s) { return s->max_size; }

char *img_layer_path(const img_store *s, const char *diffid) { return xasprintf("%s/layers/%s", s->dir, diffid); }

int img_flock_settled(int fd, int op) {
        for (unsigned ms = 2;; ms *= 2) {
                if (flock(fd, op | LOCK_NB) == 0)
                        return 0;
                if (errno != EWOULDBLOCK || ms > 128)
                        return -1;
                (void)usleep(ms * 1000);
        }
}

int img_lock(img_store *s, const char *name, int op) {
        int fd = openat(s->dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -1;
        if (op & IMG_LOCK_SETTLED) {
                if (img_flock_settled(fd, op & ~IMG_LOCK_SETTLED) == 0)
                        return fd;
                (void)close(fd);
                return -1;
        }
        while (flock(fd, op) < 0) {
                if (errno == EINTR)
                        continue;
                (void)close(fd);
                return -1;
        }
        return fd;
}

char *img_tmp_dir(img_store *s, const char *what, cm_err *err) {
        char *path = xasprintf("%s/tmp/%s-%d-XXXXXX", s->dir, what, (int)getpid());
        if (!mkdtemp(path)) {
                (void)cm_err_sys(err, errno, "image store: cannot create a temporary directory in %s/tmp", s->dir);
                free(path);
                return NULL;
        }
        return path;
}

/* The ids layers were unpacked with must be this server's. */
static int check_ids(img_store *s, cm_err *err) {
        char want[96], have[96] = {0};
        int fd;
        ssize_t n;

        (void)snprintf(want, sizeof want, "%s %u %u\n", s->own.chown ? "shifted" : "own", (unsigned)s->own.uid_base,
                       (unsigned)s->own.gid_base);
        fd = openat(s->dfd, "ids", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                fd = openat(s->dfd, "ids", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd >= 0) {
                        n = write(fd, want, strlen(want));
                        (void)close(fd);
                        if (n == (ssize_t)strlen(want))
                                return 0;
                }
                fd = openat(s->dfd, "ids", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return cm_err_sys(err, errno, "image store: %s/ids", s->dir);
        }
        n = read(fd, have, sizeof have - 1);
        (void)close(fd);
        if (n > 0 && strcmp(have, want) != 0 && !(!s->own.chown && strncmp(have, "own ", 4) == 0))
                return cm_err_set(err, EXDEV,
                                  "image store %s holds layers unpacked for other sandbox ids (%.*s) than this "
                                  "server's (%.*s); use the server's own state dir (CONTAINER_MCP_STATE_DIR), or "
                                  "remove %s to start the store afresh",
                                  s->dir, (int)strcspn(have, "\n"), have, (int)strcspn(want, "\n"), want, s->dir);
        return 0;
}

int img_store_open(const char *state_dir, const img_owner *own, uint64_t max_size, img_store **ret, cm_err *err) {
        img_store *s;
        int lock;
        static const char *const dirs[] = {"blobs", "blobs/sha256", "layers", "tmp"};

        s = xcalloc(1, sizeof *s);
        s->dir = xasprintf("%s/images", state_dir);
        s->own = *own;
        s->max_size = max_size ? max_size : IMG_DEFAULT_MAX_SIZE;
        (void)mkdir(state_dir, 0700);
        if (mkdir(s->dir, 0700) < 0 && errno != EEXIST) {
                (void)cm_err_sys(err, errno, "image store: cannot create %s", s->dir);
                goto fail;
        }
        s->dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (s->dfd < 0) {
                (void)cm_err_sys(err, errno, "image store: cannot open %s", s->dir);
                goto fail;
        }
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
                if (mkdirat(s->dfd, dirs[i], 0700) < 0 && errno != EEXIST) {
                        (void)cm_err_sys(err, errno, "image store: cannot create %s/%s", s->dir, dirs[i]);
                        goto fail;
                }
        if (check_ids(s, err) < 0)
                goto fail;
        /* a crashed import's leftovers, when no import runs */
        lock = img_lock(s, "gc.lock", LOCK_EX | LOCK_NB);
        if (lock >= 0) {
                img_clear_tmp(s);
                (void)close(lock);
        }
        *ret = s;
        return 0;
fail:
        img_store_free(s);
        return -1;
}

void img_store_free(img_store *s) {
        if (!s)
                return;
        if (s->dfd > 0)
                (void)close(s->dfd);
        free(s->dir);
        free(s);
}

/* ---- the index ----------------------------------------------------------- */

static char **strv_from(const json_t *a) {
        size_t i;
        json_t *x;
        char **v = xcalloc(json_array_size(a) + 1, sizeof *v);
        size_t n = 0;
        json_array_foreach(a, i, x) if (json_is_string(x)) v[n++] = xstrdup(json_string_value(x));
        return v;
}

static size_t strv_len(char *const *v) {
        size_t n = 0;
        while (v && v[n])
                n++;
        return n;
}

int img_index_read(img_store *s, img_entry **ret, size_t *ret_n, cm_err *err) {
        cleanup_free char *buf = NULL;
        cleanup_close int fd = openat(s->dfd, "index.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        cleanup_json json_t *j = NULL;
        json_error_t je;
        const json_t *images;
        img_entry *v;
        size_t i, n = 0;
        json_t *x;

        *ret = NULL;
        *ret_n = 0;
        if (fd < 0)
                return errno == ENOENT ? 0 : cm_err_sys(err, errno, "image store: %s/index.json", s->dir);
        j = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
        images = json_object_get(j, "images");
        if (!json_is_array(images))
                return cm_err_set(err, EINVAL, "image store: %s/index.json is damaged (%s); remove it and import again",
                                  s->dir, j ? "no images" : je.text);
        v = xcalloc(json_array_size(images) + 1, sizeof *v);
        json_array_foreach(images, i, x) {
                const char *m = cm_json_str(x, "manifest"), *c = cm_json_str(x, "config");
                if (!img_digest_valid(m) || !img_digest_valid(c))
                        continue;
                v[n].manifest = xstrdup(m);
                v[n].config = xstrdup(c);
                v[n].names = strv_from(json_object_get(x, "names"));
                v[n].n_names = strv_len(v[n].names);
                v[n].layers = strv_from(json_object_get(x, "layers"));
                v[n].n_layers = strv_len(v[n].layers);
                v[n].size = (uint64_t)json_integer_value(json_object_get(x, "size"));
                v[n].created = json_integer_value(json_object_get(x, "created"));
                n++;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

static json_t *strv_json(char *const *v) {
        json_t *a = json_array();
        for (; v && *v; v++)
                (void)json_array_append_new(a, json_string(*v));
        return a;
}

/* Under index.lock: write tmp, fsync, rename over index.json. */
int img_index_write(img_store *s, const img_entry *v, size_t n, cm_err *err) {
        cleanup_json json_t *images = json_array(), *j = NULL;
        /* one name: writers hold index.lock; tmp/ is not ours to use here
         * (an open clears it when no import holds gc.lock) */
        cleanup_free char *text = NULL, *tmp = xstrdup("index.json.tmp");
        cleanup_close int fd = -1;
        size_t len;

        for (size_t i = 0; i < n; i++)
                (void)json_array_append_new(
                        images, json_pack("{s:s, s:s, s:o, s:o, s:I, s:I}", "manifest", v[i].manifest, "config",
                                          v[i].config, "names", strv_json(v[i].names), "layers",
                                          strv_json(v[i].layers), "size", (json_int_t)v[i].size, "created",
                                          (json_int_t)v[i].created));
        j = json_pack("{s:i, s:O}", "version", 1, "images", images);
        text = json_dumps(j, JSON_INDENT(1));
        len = strlen(text);
        fd = openat(s->dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 || write(fd, text, len) != (ssize_t)len || fsync(fd) < 0 ||
            renameat(s->dfd, tmp, s->dfd, "index.json") < 0) {
                int e = errno;
                (void)unlinkat(s->dfd, tmp, 0);
                return cm_err_sys(err, e, "image store: cannot write %s/index.json", s->dir);
        }
        (void)fsync(s->dfd);
        return 0;
}

void img_strv_remove(char **v, size_t *n, const char *s) {
        for (size_t i = 0; v && v[i]; i++)
                if (strcmp(v[i], s) == 0) {
                        free(v[i]);
                        memmove(&v[i], &v[i + 1], (*n - i) * sizeof *v);
                        (*n)--;
                        return;
                }
}

static bool strv_has(char *const *v, const char *s) {
        for (; v && *v; v++)
                if (strcmp(*v, s) == 0)
                        return true;
        return false;
}

static void entry_copy(img_entry *dst, const img_entry *src) {
        dst->manifest = xstrdup(src->manifest);
        dst->config = xstrdup(src->config);
        dst->names = xcalloc(src->n_names + 1, sizeof *dst->names);
        for (size_t i = 0; i < src->n_names; i++)
                dst->names[i] = xstrdup(src->names[i]);
        dst->n_names = src->n_names;
        dst->layers = xcalloc(src->n_layers + 1, sizeof *dst->layers);
        for (size_t i = 0; i < src->n_layers; i++)
                dst->layers[i] = xstrdup(src->layers[i]);
        dst->n_layers = src->n_layers;
        dst->size = src->size;
        dst->created = src->created;
}

int img_index_publish(img_store *s, const img_entry *e, cm_err *err) {
        cleanup_close int lock = img_lock(s, "index.lock", LOCK_EX);
        img_entry *v = NULL;
        size_t n = 0, i;
        int r;

        if (lock < 0)
                return cm_err_sys(err, errno, "image store: cannot lock %s/index.lock", s->dir);
        if (img_index_read(s, &v, &n, err) < 0)
                return -1;
        /* a name points to one image: the new one takes it */
        for (i = 0; i < n; i++)
                for (size_t k = 0; k < e->n_names; k++)
                        img_strv_remove(v[i].names, &v[i].n_names, e->names[k]);
        for (i = 0; i < n && strcmp(v[i].manifest, e->manifest) != 0; i++)
                ;
        if (i == n) {
                v = xrealloc(v, (n + 2) * sizeof *v);
                v[n] = (img_entry){0};
                entry_copy(&v[n++], e);
        } else
                for (size_t k = 0; k < e->n_names; k++)
                        if (!strv_has(v[i].names, e->names[k])) {
                                v[i].names = xrealloc(v[i].names, (v[i].n_names + 2) * sizeof *v[i].names);
                                v[i].names[v[i].n_names++] = xstrdup(e->names[k]);
                                v[i].names[v[i].n_names] = NULL;
                        }
        r = img_index_write(s, v, n, err);
        img_entries_free(v, n);
        return r;
}

/* ---- finding ------------------------------------------------------------- */

static bool is_hex(const char *s) {
        for (; *s; s++)
                if (!isdigit((unsigned char)*s) && !(*s >= 'a' && *s <= 'f'))
                        return false;
        return true;
}

ssize_t img_index_find(const img_entry *v, size_t n, const char *ref, char **ret_name) {
        cleanup_free char *norm = img_name_normalize(ref);
        size_t len = strlen(ref);

        if (ret_name)
                *ret_name = NULL;
        for (size_t i = 0; i < n; i++) {
                if (norm && strv_has(v[i].names, norm)) {
                        if (ret_name)
                                *ret_name = steal_pointer(&norm);
                        return (ssize_t)i;
                }
                if (strcmp(ref, v[i].manifest) == 0 || strcmp(ref, v[i].config) == 0)
                        return (ssize_t)i;
                if (len >= 12 && len <= 64 && is_hex(ref) && strncmp(v[i].config + 7, ref, len) == 0)
                        return (ssize_t)i;
        }
        return -1;
}

int img_resolve(img_store *s, const char *ref, img_entry *ret, cm_err *err) {
        img_entry *v;
        size_t n;
        ssize_t i;

        if (img_index_read(s, &v, &n, err) < 0)
                return -1;
        i = img_index_find(v, n, ref, NULL);
        if (i < 0) {
                img_entries_free(v, n);
                return cm_err_set(err, ENOENT,
                                  "image \"%s\" is not in the image store; call pull_image first (or import it: "
                                  "container-mcp image import FILE %s), or use image \"host\" (the host's /usr, "
                                  "read-only)",
                                  ref, ref);
        }
        *ret = v[i];
        v[i] = (img_entry){0};
        img_entries_free(v, n);
        return 0;
}

int img_list(img_store *s, img_entry **ret, size_t *ret_n, cm_err *err) { return img_index_read(s, ret, ret_n, err); }

int img_config_load(img_store *s, const img_entry *e, img_config *ret, cm_err *err) {
        cleanup_free char *buf = NULL;
        size_t len;
        img_config_doc doc;

        if (img_blob_read(s, e->config, IMG_MAX_JSON, &buf, &len, err) < 0 || img_parse_config(buf, len, &doc, err) < 0)
                return -1;
        *ret = doc.run;
        doc.run = (img_config){0};
        img_config_doc_clear(&doc);
        return 0;
}

