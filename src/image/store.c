/* The image store: opening it, its index, names, removal and pruning.
 *
 * Locks (flock, so they go with a process that dies):
 *   gc.lock     shared by every import for its whole run, exclusive for
 *               prune and for removal's clean-up, so nothing deletes a
 *               layer an import has unpacked but not yet published;
 *   index.lock  exclusive around each read-modify-write of index.json.
 * Always gc.lock first.  Readers take neither: index.json is only ever
 * replaced whole by rename(2). */
#include <ctype.h>
#include <dirent.h>
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

int img_lock(img_store *s, const char *name, int op) {
        int fd = openat(s->dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -1;
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

/* Everything in tmp/: only while no import holds gc.lock. */
static void clear_tmp(img_store *s) {
        int fd = openat(s->dfd, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;

        if (!d) {
                if (fd >= 0)
                        (void)close(fd);
                return;
        }
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        img_remove_at(dirfd(d), de->d_name);
        (void)closedir(d);
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
                clear_tmp(s);
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

/* ---- names --------------------------------------------------------------- */

static bool repo_ok(const char *p, size_t n) {
        if (n == 0 || n > 255)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!(islower((unsigned char)p[i]) || isdigit((unsigned char)p[i]) || strchr("._-/", p[i])))
                        return false;
        return p[0] != '/' && p[n - 1] != '/' && !strstr(p, "//");
}

static bool tag_ok(const char *t) {
        size_t n = strlen(t);
        if (n == 0 || n > 128 || t[0] == '.' || t[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)t[i]) && !strchr("_.-", t[i]))
                        return false;
        return true;
}

char *img_name_normalize(const char *name) {
        cleanup_free char *copy = NULL;
        char *at, *slash, *colon, *domain = NULL, *rest;
        const char *tag = "latest";
        cleanup_free char *digest = NULL;

        if (!name || !name[0] || strlen(name) > 512 || name[0] == '-' || name[0] == '/')
                return NULL;
        copy = xstrdup(name);
        if ((at = strchr(copy, '@'))) {
                if (!img_digest_valid(at + 1))
                        return NULL;
                digest = xstrdup(at + 1);
                *at = 0;
                tag = NULL;
        }
        slash = strchr(copy, '/');
        if (slash && (memchr(copy, '.', (size_t)(slash - copy)) || memchr(copy, ':', (size_t)(slash - copy)) ||
                      strncmp(copy, "localhost/", 10) == 0)) {
                *slash = 0;
                domain = copy;
                rest = slash + 1;
        } else
                rest = copy;
        /* a tag is after the last ':' that follows the last '/' */
        colon = strrchr(rest, ':');
        if (colon && !strchr(colon, '/')) {
                *colon = 0;
                if (digest || !tag_ok(colon + 1))
                        return NULL;
                tag = colon + 1;
        }
        if (!repo_ok(rest, strlen(rest)))
                return NULL;
        if (domain)
                for (char *p = domain; *p; p++)
                        if (!isalnum((unsigned char)*p) && !strchr(".-:", *p))
                                return NULL;
        if (!domain || strcmp(domain, "docker.io") == 0 || strcmp(domain, "index.docker.io") == 0) {
                bool library = !strchr(rest, '/');
                return digest ? xasprintf("docker.io/%s%s@%s", library ? "library/" : "", rest, digest)
                              : xasprintf("docker.io/%s%s:%s", library ? "library/" : "", rest, tag);
        }
        return digest ? xasprintf("%s/%s@%s", domain, rest, digest) : xasprintf("%s/%s:%s", domain, rest, tag);
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
static int index_write(img_store *s, const img_entry *v, size_t n, cm_err *err) {
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

static void strv_remove(char **v, size_t *n, const char *s) {
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
                        strv_remove(v[i].names, &v[i].n_names, e->names[k]);
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
        r = index_write(s, v, n, err);
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

/* The index position of ref in v, or -1. */
static ssize_t find(const img_entry *v, size_t n, const char *ref, char **ret_name) {
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
        i = find(v, n, ref, NULL);
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

/* ---- removing ------------------------------------------------------------ */

/* Remove every entry of dir (relative to the store) whose name is not in
 * keep; the bytes it held. */
static uint64_t sweep(img_store *s, const char *dir, char *const *keep, size_t n_keep) {
        int fd = openat(s->dfd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        uint64_t bytes = 0;

        if (!d) {
                if (fd >= 0)
                        (void)close(fd);
                return 0;
        }
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
        cleanup_close int gc = img_lock(s, "gc.lock", LOCK_EX | LOCK_NB);
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
        i = find(v, n, ref, &name);
        if (i < 0) {
                img_entries_free(v, n);
                return cm_err_set(err, ENOENT, "image \"%s\" is not in the image store (list_images shows what is)",
                                  ref);
        }
        if (name && v[i].n_names > 1) {
                /* one of several names: only that name goes */
                strv_remove(v[i].names, &v[i].n_names, name);
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
        r = index_write(s, v, n, err);
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
        r = removed ? index_write(s, v, n, err) : 0;
        if (r == 0) {
                *ret_bytes = collect(s, v, n);
                *ret_images = removed;
                clear_tmp(s);
        }
        img_entries_free(v, n);
        return r;
}
