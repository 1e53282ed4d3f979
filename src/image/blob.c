/* Blobs and unpacked layers: written under tmp/, checked, synced, renamed
 * into place.  A name in blobs/ or layers/ is therefore always complete
 * and verified; concurrent writers of the same content race harmlessly
 * (the second rename finds the first's result and its own copy goes). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/internal.h"
#include "util/cleanup.h"

#define IO_BLOCK (128 * 1024)

static char *blob_rel(const char *digest) { return xasprintf("blobs/sha256/%s", digest + 7); }

bool img_blob_exists(img_store *s, const char *digest) {
        cleanup_free char *rel = img_digest_valid(digest) ? blob_rel(digest) : NULL;
        struct stat st;
        return rel && fstatat(s->dfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

int img_blob_open(img_store *s, const char *digest, cm_err *err) {
        cleanup_free char *rel = img_digest_valid(digest) ? blob_rel(digest) : NULL;
        int fd = rel ? openat(s->dfd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
        if (fd < 0)
                return cm_err_sys(err, rel ? errno : EINVAL, "image store: blob %s", digest ? digest : "(none)");
        return fd;
}

int img_read_exact(int fd, size_t size, char **ret) {
        cleanup_free char *buf = xmalloc(size + 1);
        size_t got = 0;
        while (got < size) {
                ssize_t n = read(fd, buf + got, size - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
                got += (size_t)n;
        }
        buf[got] = 0;
        *ret = steal_pointer(&buf);
        return 0;
}

int img_blob_read(img_store *s, const char *digest, size_t max, char **ret, size_t *ret_len, cm_err *err) {
        cleanup_close int fd = img_blob_open(s, digest, err);
        struct stat st;
        int r;

        if (fd < 0)
                return -1;
        if (fstat(fd, &st) < 0)
                return cm_err_sys(err, errno, "image store: blob %s", digest);
        if ((uint64_t)st.st_size > max)
                return cm_err_set(err, EFBIG, "image store: blob %s is %lld bytes, more than %zu", digest,
                                  (long long)st.st_size, max);
        if ((r = img_read_exact(fd, (size_t)st.st_size, ret)) < 0)
                return cm_err_sys(err, -r, "image store: reading blob %s", digest);
        *ret_len = (size_t)st.st_size;
        return 0;
}

static int write_all(int fd, const char *p, size_t len) {
        while (len > 0) {
                ssize_t w = write(fd, p, len);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return -1;
                p += w;
                len -= (size_t)w;
        }
        return 0;
}

/* Publish tmp/<name> as the blob of digest hex. */
static int publish(img_store *s, int fd, const char *tmp_rel, const char *digest, cm_err *err) {
        cleanup_free char *rel = blob_rel(digest);
        if (fsync(fd) < 0 || renameat(s->dfd, tmp_rel, s->dfd, rel) < 0) {
                int e = errno;
                (void)unlinkat(s->dfd, tmp_rel, 0);
                return cm_err_sys(err, e, "image store: cannot store blob %s", digest);
        }
        return 0;
}

int img_blob_put_fd(img_store *s, int src, const char *expect, int64_t size, char **ret_digest, cm_err *err) {
        cleanup_free char *tmp_rel = NULL, *buf = NULL;
        cleanup_close int fd = -1;
        cm_sha256_ctx sha;
        uint8_t sum[CM_SHA256_LEN];
        char digest[7 + 65] = "sha256:";
        uint64_t total = 0, cap = size >= 0 ? (uint64_t)size : s->max_size;

        if (expect && img_blob_exists(s, expect)) {
                if (ret_digest)
                        *ret_digest = xstrdup(expect);
                return 0; /* verified when it was stored */
        }
        tmp_rel = xasprintf("tmp/blob-%d-XXXXXX", (int)getpid());
        {
                cleanup_free char *abs = xasprintf("%s/%s", s->dir, tmp_rel);
                fd = mkostemp(abs, O_CLOEXEC);
                if (fd < 0)
                        return cm_err_sys(err, errno, "image store: cannot create a temporary in %s/tmp", s->dir);
                free(tmp_rel);
                tmp_rel = xstrdup(abs + strlen(s->dir) + 1);
        }
        buf = xmalloc(IO_BLOCK);
        cm_sha256_init(&sha);
        for (;;) {
                ssize_t n = read(src, buf, IO_BLOCK);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        (void)unlinkat(s->dfd, tmp_rel, 0);
                        return cm_err_sys(err, errno, "reading a blob");
                }
                if (n == 0)
                        break;
                total += (uint64_t)n;
                if (total > cap) {
                        (void)unlinkat(s->dfd, tmp_rel, 0);
                        return size >= 0 ? cm_err_set(err, EINVAL, "blob %s is larger than the %lld bytes it says",
                                                      expect ? expect : "", (long long)size)
                                         : cm_err_set(err, EFBIG,
                                                      "blob is bigger than %llu bytes (CONTAINER_MCP_IMAGE_MAX_SIZE)",
                                                      (unsigned long long)cap);
                }
                cm_sha256_update(&sha, buf, (size_t)n);
                if (write_all(fd, buf, (size_t)n) < 0) {
                        int e = errno;
                        (void)unlinkat(s->dfd, tmp_rel, 0);
                        return cm_err_sys(err, e, "image store: writing a blob");
                }
        }
        cm_sha256_final(&sha, sum);
        cm_hex(sum, sizeof sum, digest + 7);
        if (size >= 0 && total != (uint64_t)size) {
                (void)unlinkat(s->dfd, tmp_rel, 0);
                return cm_err_set(err, EINVAL, "blob %s is truncated: %llu bytes of the %lld it says",
                                  expect ? expect : digest, (unsigned long long)total, (long long)size);
        }
        if (expect && strcmp(expect, digest) != 0) {
                (void)unlinkat(s->dfd, tmp_rel, 0);
                return cm_err_set(err, EINVAL, "blob %s does not match its digest (its bytes hash to %s): refused",
                                  expect, digest);
        }
        if (publish(s, fd, tmp_rel, digest, err) < 0)
                return -1;
        if (ret_digest)
                *ret_digest = xstrdup(digest);
        return 0;
}

int img_blob_put_mem(img_store *s, const char *buf, size_t len, char **ret_digest, cm_err *err) {
        uint8_t sum[CM_SHA256_LEN];
        char digest[7 + 65] = "sha256:";
        cleanup_free char *abs = xasprintf("%s/tmp/blob-%d-XXXXXX", s->dir, (int)getpid());
        cleanup_close int fd = -1;

        cm_sha256(buf, len, sum);
        cm_hex(sum, sizeof sum, digest + 7);
        *ret_digest = xstrdup(digest);
        if (img_blob_exists(s, digest))
                return 0;
        fd = mkostemp(abs, O_CLOEXEC);
        if (fd < 0 || write_all(fd, buf, len) < 0) {
                int e = errno;
                if (fd >= 0)
                        (void)unlink(abs);
                return cm_err_sys(err, e, "image store: writing a blob");
        }
        return publish(s, fd, abs + strlen(s->dir) + 1, digest, err);
}

int img_layer_ensure(img_store *s, const char *blob, const char *expect_diffid, const cm_cancel *cancel,
                     uint64_t *ret_bytes, char *ret_diffid, cm_err *err) {
        cleanup_free char *tmp = NULL, *rel = NULL, *name = NULL;
        cleanup_close int src = -1, dst = -1;
        img_unpack_result res;
        img_unpack_opts o = {UNPACK_LAYER, s->own, s->max_size, cancel};
        char hex[65];
        struct stat st;

        if (expect_diffid) {
                rel = xasprintf("layers/%s", expect_diffid);
                if (fstatat(s->dfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
                        *ret_bytes = img_tree_bytes(s->dfd, rel);
                        (void)snprintf(ret_diffid, 65, "%s", expect_diffid);
                        return 0; /* shared with an image already here */
                }
        }
        if ((src = img_blob_open(s, blob, err)) < 0 || !(tmp = img_tmp_dir(s, "layer", err)))
                return -1;
        dst = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dst < 0)
                return cm_err_sys(err, errno, "image store: %s", tmp);
        if (s->own.chown)
                (void)fchown(dst, s->own.uid_base, s->own.gid_base);
        (void)fchmod(dst, 0755);
        name = xstrdup(tmp + strlen(s->dir) + 1);
        if (img_unpack(src, dst, &o, &res, err) < 0) {
                cm_err_prefix(err, "layer %s", blob);
                img_remove_at(s->dfd, name);
                return -1;
        }
        cm_hex(res.diff_id, sizeof res.diff_id, hex);
        if (expect_diffid && strcmp(hex, expect_diffid) != 0) {
                img_remove_at(s->dfd, name);
                return cm_err_set(err, EINVAL,
                                  "layer %s unpacks to sha256:%s, not the sha256:%s its image config says: refused",
                                  blob, hex, expect_diffid);
        }
        free(rel);
        rel = xasprintf("layers/%s", hex);
        if (syncfs(dst) < 0 || renameat(s->dfd, name, s->dfd, rel) < 0) {
                int e = errno;
                img_remove_at(s->dfd, name);
                if (e != EEXIST && e != ENOTEMPTY)
                        return cm_err_sys(err, e, "image store: cannot publish layer %s", hex);
                /* another import unpacked it meanwhile: theirs is as good */
        }
        *ret_bytes = res.file_bytes;
        memcpy(ret_diffid, hex, 65);
        return 0;
}

int img_apply_layers(img_store *s, const img_entry *e, const char *dst, const img_owner *own,
                     const cm_cancel *cancel, cm_err *err) {
        cleanup_free char *buf = NULL;
        cleanup_close int dfd = -1;
        img_manifest m;
        size_t len;
        int r = 0;

        if (img_blob_read(s, e->manifest, IMG_MAX_JSON, &buf, &len, err) < 0 || img_parse_manifest(buf, len, &m, err) < 0)
                return -1;
        if (mkdir(dst, 0755) < 0 || (dfd = open(dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
                img_manifest_clear(&m);
                return cm_err_sys(err, errno, "cannot create %s", dst);
        }
        if (own->chown)
                (void)fchown(dfd, own->uid_base, own->gid_base);
        for (size_t i = 0; i < m.n_layers && r == 0; i++) {
                cleanup_close int src = img_blob_open(s, m.layers[i].digest, err);
                img_unpack_opts o = {UNPACK_APPLY, *own, s->max_size, cancel};
                img_unpack_result res;
                r = src < 0 ? -1 : img_unpack(src, dfd, &o, &res, err);
        }
        img_manifest_clear(&m);
        return r;
}
