/* Importing images: an OCI image layout (a directory, or a tar of one), a
 * `docker save` / `podman save` archive (manifest.json with layer tars:
 * the legacy form and the OCI-layout form Docker 25 writes), or a plain
 * root file system tarball (one layer, an empty config).
 *
 * An archive is first unpacked (UNPACK_PLAIN) into a temporary of the
 * store and read as a directory: every member is opened beneath it with
 * O_NOFOLLOW like a directory's.
 * Each blob is hashed on its way in and must match its descriptor (digest
 * and size); each layer must unpack to its config's diff-id; the image is
 * listed only once all of it is in place (store.c). */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "image/build.h"
#include "image/internal.h"
#include "util/cleanup.h"
#include "util/json.h"

typedef struct job {
        img_store *s;
        int dir; /* the layout or archive directory */
        const char *name;
        const cm_image_progress *progress;
        const cm_cancel *cancel;
        img_entry *ret;
} job;


static void progress(const job *j, const char *what, uint64_t done, uint64_t total) {
        if (j->progress && j->progress->fn)
                j->progress->fn(j->progress->arg, what, done, total);
}

/* A member of the directory, at most max bytes. */
static int read_member(int dir, const char *rel, size_t max, char **ret, size_t *ret_len, cm_err *err) {
        cleanup_close int fd = img_open_beneath(dir, rel, O_RDONLY);
        struct stat st;
        int r;

        if (fd < 0)
                return cm_err_sys(err, errno, "\"%s\" in the image (symlinks are not followed)", rel);
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return cm_err_set(err, EINVAL, "\"%s\" in the image is not a regular file", rel);
        if ((uint64_t)st.st_size > max)
                return cm_err_set(err, EFBIG, "\"%s\" in the image is %lld bytes, more than the %zu allowed", rel,
                                  (long long)st.st_size, max);
        if ((r = img_read_exact(fd, (size_t)st.st_size, ret)) < 0)
                return cm_err_sys(err, -r, "reading \"%s\" in the image", rel);
        *ret_len = (size_t)st.st_size;
        return 0;
}

/* A file of the directory into the store as a blob (expect: its digest,
 * size >= 0: its size). */
static int put_member(job *j, const char *rel, const char *expect, int64_t size, char **ret_digest, cm_err *err) {
        cleanup_close int fd = img_open_beneath(j->dir, rel, O_RDONLY);
        struct stat st;
        if (fd < 0)
                return cm_err_sys(err, errno, "\"%s\" in the image (symlinks are not followed)", rel);
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return cm_err_set(err, EINVAL, "\"%s\" in the image is not a regular file", rel);
        if (size > 0 && (uint64_t)size > img_store_max_size(j->s))
                return cm_err_set(err, EFBIG, "blob %s is %lld bytes, more than CONTAINER_MCP_IMAGE_MAX_SIZE", rel,
                                  (long long)size);
        return img_blob_put_fd(j->s, fd, expect, size, ret_digest, err);
}

static const char *layer_media(img_store *s, const char *digest) {
        unsigned char m[4] = {0};
        cm_err e = CM_ERR_INIT;
        cleanup_close int fd = img_blob_open(s, digest, &e);
        if (fd >= 0 && read(fd, m, sizeof m) == (ssize_t)sizeof m) {
                if (m[0] == 0x1f && m[1] == 0x8b)
                        return "application/vnd.oci.image.layer.v1.tar+gzip";
                if (m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd)
                        return "application/vnd.oci.image.layer.v1.tar+zstd";
        }
        return "application/vnd.oci.image.layer.v1.tar";
}

int64_t img_blob_size(img_store *s, const char *digest) {
        cm_err e = CM_ERR_INIT;
        cleanup_close int fd = img_blob_open(s, digest, &e);
        struct stat st;
        return fd >= 0 && fstat(fd, &st) == 0 ? st.st_size : 0;
}

/* Unpack each layer blob to its diff-id, counting the image's bytes. */
static int unpack_layers(job *j, char *const *blobs, char **diff_ids, size_t n, img_entry *e, cm_err *err) {
        e->layers = xcalloc(n + 1, sizeof *e->layers);
        for (size_t i = 0; i < n; i++) {
                char what[128], hex[65];
                uint64_t bytes;
                (void)snprintf(what, sizeof what, "layer %zu/%zu %.19s", i + 1, n, blobs[i]);
                progress(j, what, i, n);
                if (img_layer_ensure(j->s, blobs[i], diff_ids ? diff_ids[i] : NULL, j->cancel, &bytes, hex, err) < 0)
                        return -1;
                e->layers[e->n_layers++] = xstrdup(hex);
                e->size += bytes;
                if (e->size > img_store_max_size(j->s))
                        return cm_err_set(err, EFBIG,
                                          "image is bigger than %llu bytes unpacked (CONTAINER_MCP_IMAGE_MAX_SIZE): "
                                          "stopped; raise the setting if the image is meant to be this big",
                                          (unsigned long long)img_store_max_size(j->s));
        }
        progress(j, "layers", n, n);
        return 0;
}

static void add_name(img_entry *e, const char *raw) {
        char *norm = raw ? img_name_normalize(raw) : NULL;
        if (!norm)
                return;
        for (size_t i = 0; i < e->n_names; i++)
                if (strcmp(e->names[i], norm) == 0) {
                        free(norm);
                        return;
                }
        e->names = xrealloc(e->names, (e->n_names + 2) * sizeof *e->names);
        e->names[e->n_names++] = norm;
        e->names[e->n_names] = NULL;
}

static int finish(job *j, img_entry *e, cm_err *err) {
        if (!e->names)
                e->names = xcalloc(1, sizeof *e->names);
        if (img_index_publish(j->s, e, err) < 0)
                return -1;
        if (j->ret) {
                img_entry_clear(j->ret);
                *j->ret = *e;
                *e = (img_entry){0};
        }
        return 0;
}

/* Our own OCI manifest for what came without one (docker save, rootfs). */
static int make_manifest(job *j, const char *config, char *const *blobs, size_t n, char **ret, cm_err *err) {
        cleanup_json json_t *layers = json_array(), *m = NULL;
        cleanup_free char *text = NULL;

        for (size_t i = 0; i < n; i++)
                (void)json_array_append_new(layers, json_pack("{s:s, s:s, s:I}", "mediaType",
                                                              layer_media(j->s, blobs[i]), "digest", blobs[i], "size",
                                                              (json_int_t)img_blob_size(j->s, blobs[i])));
        m = json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:O}", "schemaVersion", 2, "mediaType",
                      "application/vnd.oci.image.manifest.v1+json", "config", "mediaType",
                      "application/vnd.oci.image.config.v1+json", "digest", config, "size",
                      (json_int_t)img_blob_size(j->s, config), "layers", layers);
        text = json_dumps(m, JSON_COMPACT);
        return img_blob_put_mem(j->s, text, strlen(text), ret, err);
}

static void strv_free(char **v) {
        for (char **p = v; p && *p; p++)
                free(*p);
        free(v);
}

/* ---- OCI layouts ---------------------------------------------------------- */

static char *blob_path(const char *digest) { return xasprintf("blobs/sha256/%s", digest + 7); }

/* A manifest of the layout (desc) and everything it names. */
static int import_manifest(job *j, const img_desc *d, const char *name, cm_err *err) {
        cleanup_free char *rel = blob_path(d->digest), *mdigest = NULL, *cdigest = NULL, *buf = NULL, *cbuf = NULL;
        img_manifest m = {0};
        img_config_doc c = {0};
        img_entry e = {0};
        char **blobs = NULL;
        size_t len;
        int r = -1;

        if (put_member(j, rel, d->digest, d->size, &mdigest, err) < 0 ||
            img_blob_read(j->s, mdigest, IMG_MAX_JSON, &buf, &len, err) < 0 ||
            img_parse_manifest(buf, len, &m, err) < 0)
                goto out;
        free(rel);
        rel = blob_path(m.config.digest);
        if (put_member(j, rel, m.config.digest, m.config.size, &cdigest, err) < 0 ||
            img_blob_read(j->s, cdigest, IMG_MAX_JSON, &cbuf, &len, err) < 0 || img_parse_config(cbuf, len, &c, err) < 0)
                goto out;
        if (c.n_diff_ids != m.n_layers) {
                (void)cm_err_set(err, EINVAL, "image manifest has %zu layers but its config %zu diff_ids", m.n_layers,
                                 c.n_diff_ids);
                goto out;
        }
        blobs = xcalloc(m.n_layers + 1, sizeof *blobs);
        for (size_t i = 0; i < m.n_layers; i++) {
                cleanup_free char *lrel = blob_path(m.layers[i].digest);
                if (put_member(j, lrel, m.layers[i].digest, m.layers[i].size, &blobs[i], err) < 0)
                        goto out;
        }
        if (unpack_layers(j, blobs, c.diff_ids, m.n_layers, &e, err) < 0)
                goto out;
        e.manifest = steal_pointer(&mdigest);
        e.config = steal_pointer(&cdigest);
        e.created = c.created;
        add_name(&e, name);
        r = finish(j, &e, err);
out:
        strv_free(blobs);
        img_manifest_clear(&m);
        img_config_doc_clear(&c);
        img_entry_clear(&e);
        return r;
}

static bool platform_fits(const img_desc *d) {
        return (!d->os || strcmp(d->os, "linux") == 0) && (!d->arch || strcmp(d->arch, img_host_arch()) == 0);
}

/* A nested index (a multi-platform image): the host's manifest in it. */
static int pick_platform(job *j, const img_desc *d, img_desc *ret, cm_err *err) {
        cleanup_free char *rel = blob_path(d->digest), *buf = NULL;
        img_desc *v = NULL;
        size_t len, n = 0;

        if (read_member(j->dir, rel, IMG_MAX_JSON, &buf, &len, err) < 0 ||
            img_parse_index(buf, len, &v, &n, err) < 0)
                return -1;
        for (size_t i = 0; i < n; i++)
                if (img_media_is_manifest(v[i].media_type) && platform_fits(&v[i])) {
                        *ret = v[i];
                        v[i] = (img_desc){0};
                        img_descs_free(v, n);
                        return 0;
                }
        img_descs_free(v, n);
        return cm_err_set(err, ENOENT, "the image index %s has no manifest for linux/%s", d->digest, img_host_arch());
}

/* The name a layout's descriptor carries: a full reference in the
 * annotations (a bare tag names no repository). */
static const char *desc_name(const img_desc *d) {
        return d->ref_name && (strchr(d->ref_name, '/') || strchr(d->ref_name, ':')) ? d->ref_name : NULL;
}

static int import_oci(job *j, cm_err *err) {
        cleanup_free char *buf = NULL;
        img_desc *v = NULL;
        size_t len, n = 0, done = 0;
        int r = 0;

        if (read_member(j->dir, "index.json", IMG_MAX_JSON, &buf, &len, err) < 0 ||
            img_parse_index(buf, len, &v, &n, err) < 0)
                return -1;
        if (j->name && n > 1) {
                img_descs_free(v, n);
                return cm_err_set(err, EINVAL,
                                  "the OCI layout holds %zu images; import it without a name (each keeps the name "
                                  "in its annotations) or make a layout of one",
                                  n);
        }
        for (size_t i = 0; i < n && r == 0; i++) {
                img_desc picked = {0};
                const img_desc *d = &v[i];
                if (img_media_is_index(d->media_type)) {
                        if (pick_platform(j, d, &picked, err) < 0) {
                                r = -1;
                                break;
                        }
                        d = &picked;
                } else if (!platform_fits(d))
                        continue;
                r = import_manifest(j, d, j->name ? j->name : desc_name(&v[i]), err);
                done += r == 0;
                img_desc_clear(&picked);
        }
        img_descs_free(v, n);
        if (r == 0 && done == 0)
                return cm_err_set(err, ENOENT, "the OCI layout has no image for linux/%s", img_host_arch());
        return r;
}

/* ---- docker save ---------------------------------------------------------- */

static int import_docker_one(job *j, const img_docker_entry *d, const char *name, cm_err *err) {
        cleanup_free char *cdigest = NULL, *mdigest = NULL, *cbuf = NULL;
        img_config_doc c = {0};
        img_entry e = {0};
        char **blobs = NULL;
        size_t len;
        int r = -1;

        if (put_member(j, d->config, NULL, -1, &cdigest, err) < 0 ||
            img_blob_read(j->s, cdigest, IMG_MAX_JSON, &cbuf, &len, err) < 0 || img_parse_config(cbuf, len, &c, err) < 0)
                goto out;
        if (c.n_diff_ids != d->n_layers) {
                (void)cm_err_set(err, EINVAL, "manifest.json lists %zu layers but the config %zu diff_ids", d->n_layers,
                                 c.n_diff_ids);
                goto out;
        }
        blobs = xcalloc(d->n_layers + 1, sizeof *blobs);
        for (size_t i = 0; i < d->n_layers; i++)
                if (put_member(j, d->layers[i], NULL, -1, &blobs[i], err) < 0)
                        goto out;
        if (unpack_layers(j, blobs, c.diff_ids, d->n_layers, &e, err) < 0 ||
            make_manifest(j, cdigest, blobs, d->n_layers, &mdigest, err) < 0)
                goto out;
        e.manifest = steal_pointer(&mdigest);
        e.config = steal_pointer(&cdigest);
        e.created = c.created;
        if (name)
                add_name(&e, name);
        else
                for (char **t = d->tags; t && *t; t++)
                        add_name(&e, *t);
        r = finish(j, &e, err);
out:
        strv_free(blobs);
        img_config_doc_clear(&c);
        img_entry_clear(&e);
        return r;
}

static int import_docker(job *j, cm_err *err) {
        cleanup_free char *buf = NULL;
        img_docker_entry *v = NULL;
        size_t len, n = 0;
        int r = 0;

        if (read_member(j->dir, "manifest.json", IMG_MAX_JSON, &buf, &len, err) < 0 ||
            img_parse_docker_manifest(buf, len, &v, &n, err) < 0)
                return -1;
        if (j->name && n > 1)
                r = cm_err_set(err, EINVAL, "the archive holds %zu images; import it without a name", n);
        for (size_t i = 0; i < n && r == 0; i++)
                r = import_docker_one(j, &v[i], j->name, err);
        img_docker_entries_free(v, n);
        return r;
}

static int import_dir(job *j, cm_err *err) {
        struct stat st;
        if (fstatat(j->dir, "manifest.json", &st, AT_SYMLINK_NOFOLLOW) == 0)
                return import_docker(j, err);
        if (fstatat(j->dir, "index.json", &st, AT_SYMLINK_NOFOLLOW) == 0)
                return import_oci(j, err);
        return cm_err_set(err, EINVAL,
                          "the directory is neither an OCI image layout (index.json) nor a docker save archive "
                          "(manifest.json); for a root file system, import a tarball of it");
}

/* ---- files ---------------------------------------------------------------- */

/* Is the tarball an image archive (index.json or manifest.json at its
 * top), rather than a root file system? */
static int archive_kind(int fd, bool *ret_image, cm_err *err) {
        struct archive *a = archive_read_new();
        struct archive_entry *e;
        int r;

        *ret_image = false;
        (void)archive_read_support_filter_gzip(a);
        (void)archive_read_support_filter_zstd(a);
        (void)archive_read_support_format_tar(a);
        if (archive_read_open_fd(a, fd, 64 * 1024) != ARCHIVE_OK) {
                (void)cm_err_set(err, EINVAL, "not a tar archive (plain, gzip or zstd): %s", archive_error_string(a));
                (void)archive_read_free(a);
                return -1;
        }
        while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
                const char *p = archive_entry_pathname(e);
                while (p && p[0] == '.' && p[1] == '/')
                        p += 2;
                if (p && (strcmp(p, "manifest.json") == 0 || strcmp(p, "index.json") == 0)) {
                        *ret_image = true;
                        break;
                }
        }
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN && r != ARCHIVE_EOF) {
                (void)cm_err_set(err, EINVAL, "not a valid tar archive: %s", archive_error_string(a));
                (void)archive_read_free(a);
                return -1;
        }
        (void)archive_read_free(a);
        return lseek(fd, 0, SEEK_SET) < 0 ? cm_err_sys(err, errno, "seek") : 0;
}

static int import_archive(job *j, int fd, cm_err *err) {
        cleanup_free char *tmp = img_tmp_dir(j->s, "archive", err), *name = NULL;
        cleanup_close int dir = -1;
        img_unpack_opts o = {UNPACK_PLAIN, {0}, img_store_max_size(j->s) * 2, j->cancel};
        img_unpack_result res;
        int r;

        if (!tmp)
                return -1;
        name = xstrdup(tmp + strlen(img_store_dir(j->s)) + 1);
        dir = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        progress(j, "reading the archive", 0, 0);
        if (dir < 0)
                r = cm_err_sys(err, errno, "%s", tmp);
        else if ((r = img_unpack(fd, dir, &o, &res, err)) == 0) {
                j->dir = dir;
                r = import_dir(j, err);
        }
        {
                cleanup_close int sdir = open(img_store_dir(j->s), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (sdir >= 0)
                        img_remove_at(sdir, name);
        }
        return r;
}

static int import_rootfs(job *j, int fd, cm_err *err) {
        cleanup_free char *blob = NULL, *cdigest = NULL, *mdigest = NULL, *text = NULL, *diff = NULL;
        cleanup_json json_t *cfg = NULL;
        img_entry e = {0};
        char *blobs[2] = {NULL, NULL};
        char iso[32];
        time_t now = time(NULL);
        struct tm tm;
        int r = -1;

        if (img_blob_put_fd(j->s, fd, NULL, -1, &blob, err) < 0)
                return -1;
        blobs[0] = blob;
        if (unpack_layers(j, blobs, NULL, 1, &e, err) < 0)
                goto out;
        diff = xasprintf("sha256:%s", e.layers[0]);
        (void)strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
        cfg = json_pack("{s:s, s:s, s:s, s:{s:s, s:[s]}, s:{}}", "architecture", img_host_arch(), "os", "linux", "created",
                        iso, "rootfs", "type", "layers", "diff_ids", diff, "config");
        text = json_dumps(cfg, JSON_COMPACT);
        if (img_blob_put_mem(j->s, text, strlen(text), &cdigest, err) < 0 ||
            make_manifest(j, cdigest, blobs, 1, &mdigest, err) < 0)
                goto out;
        e.manifest = steal_pointer(&mdigest);
        e.config = steal_pointer(&cdigest);
        e.created = (int64_t)now;
        add_name(&e, j->name);
        r = finish(j, &e, err);
out:
        img_entry_clear(&e);
        return r;
}

/* ---- entry points ----------------------------------------------------------- */

static int check_name(const char *name, cm_err *err) {
        cleanup_free char *norm = name ? img_name_normalize(name) : NULL;
        if (name && !norm)
                return cm_err_set(err, EINVAL,
                                  "image name \"%s\" is not a valid reference; use e.g. myimage, myimage:1.0 or "
                                  "registry.example.com/team/myimage:1.0 (lower-case repository)",
                                  name);
        return 0;
}

int img_import_at(img_store *s, int root, const char *rel, const char *name, const cm_image_progress *prog,
                  const cm_cancel *cancel, img_entry *ret, cm_err *err) {
        cleanup_close int gc = -1, fd = -1;
        job j = {s, -1, name, prog, cancel, ret};
        struct stat st;
        bool image;

        if (ret)
                *ret = (img_entry){0};
        if (check_name(name, err) < 0)
                return -1;
        gc = img_lock(s, "gc.lock", LOCK_SH);
        if (gc < 0)
                return cm_err_sys(err, errno, "image store: cannot lock %s/gc.lock", img_store_dir(s));
        fd = rel[0] ? img_open_beneath(root, rel, O_RDONLY) : openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0)
                return cm_err_sys(err, errno, "import \"%s\" (opened without following symlinks)", rel);
        if (S_ISDIR(st.st_mode)) {
                j.dir = fd;
                return import_dir(&j, err);
        }
        if (!S_ISREG(st.st_mode))
                return cm_err_set(err, EINVAL, "import \"%s\": not a file or a directory", rel);
        if (archive_kind(fd, &image, err) < 0)
                return -1;
        return image ? import_archive(&j, fd, err) : import_rootfs(&j, fd, err);
}

int img_import_layout(img_store *s, const char *dir, const char *name, const cm_image_progress *prog,
                      const cm_cancel *cancel, img_entry *ret, cm_err *err) {
        cleanup_close int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return cm_err_sys(err, errno, "OCI layout %s", dir);
        return img_import_at(s, fd, "", name, prog, cancel, ret, err);
}
