/* Blobs: downloaded a few at once (one curl multi handle), each hashed and
 * counted as it streams to a temporary file, published by rename only when
 * its digest and size are the descriptor's.  A blob already in the layout
 * and whole is not fetched again: an interrupted pull resumes by blob. */
#include "image/registry_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/lazy.h"
#include "util/sha256.h"

#define TMP_PREFIX ".tmp-"

static bool digest_matches(cm_sha256_ctx *sha, const char *digest) {
        uint8_t md[CM_SHA256_LEN];
        char hex[2 * CM_SHA256_LEN + 1];
        cm_sha256_final(sha, md);
        cm_hex(md, sizeof md, hex);
        return strcmp(hex, digest + 7) == 0;
}

bool rg_blob_verified(int blobs_fd, const rg_desc *d) {
        cleanup_close int fd = openat(blobs_fd, d->digest + 7, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        struct stat st;
        cm_sha256_ctx sha;
        char buf[1 << 16];
        ssize_t n;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size != d->size)
                return false;
        cm_sha256_init(&sha);
        while ((n = read(fd, buf, sizeof buf)) > 0)
                cm_sha256_update(&sha, buf, (size_t)n);
        return n == 0 && digest_matches(&sha, d->digest);
}

/* Temporary names carry the pid and a counter (two pulls of one process
 * may share a layout): those of a pull that died (kill -9) are removed by
 * the next, those of a live process are left to it. */
static char *temp_name(const char *name) {
        static unsigned counter;
        return xasprintf(TMP_PREFIX "%s.%d.%u", name, (int)getpid(), __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
}

static void remove_dead_temps(int blobs_fd) {
        int fd = dup(blobs_fd);
        DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *e;
        if (!dir) {
                if (fd >= 0)
                        (void)close(fd);
                return;
        }
        while ((e = readdir(dir))) {
                const char *dot = strchr(e->d_name + strlen(TMP_PREFIX), '.');
                long pid;
                if (strncmp(e->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) != 0 || !dot)
                        continue;
                pid = strtol(dot + 1, NULL, 10);
                if (pid <= 0 || (kill((pid_t)pid, 0) < 0 && errno == ESRCH))
                        (void)unlinkat(blobs_fd, e->d_name, 0);
        }
        closedir(dir);
}

static int publish(int dir_fd, const char *tmp, int fd, const char *name, cm_err *err) {
        if (fsync(fd) < 0 || renameat(dir_fd, tmp, dir_fd, name) < 0) {
                int e = errno;
                (void)unlinkat(dir_fd, tmp, 0);
                return cm_err_sys(err, e, "cannot publish %s in the image layout", name);
        }
        return 0;
}

int rg_file_write(int dir_fd, const char *name, const char *data, size_t len, cm_err *err) {
        cleanup_free char *tmp = temp_name(name);
        cleanup_close int fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        size_t done = 0;
        if (fd < 0)
                return cm_err_sys(err, errno, "cannot write %s in the image layout", name);
        while (done < len) {
                ssize_t n = write(fd, data + done, len - done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        int e = errno;
                        (void)unlinkat(dir_fd, tmp, 0);
                        return cm_err_sys(err, e, "cannot write %s in the image layout", name);
                }
                done += (size_t)n;
        }
        return publish(dir_fd, tmp, fd, name, err);
}

int rg_blob_write(int blobs_fd, const char *digest, const char *data, size_t len, cm_err *err) {
        return rg_file_write(blobs_fd, digest + 7, data, len, err);
}

typedef struct blob {
        const rg_desc *d;
        rg_conn *c;
        CURL *h;
        struct curl_slist *hdrs;
        int fd;
        char *tmp;
        cm_sha256_ctx sha;
        int64_t got, reported;
        bool over, write_failed, done;
        char what[64];
        char errbody[256];
        size_t errlen;
} blob;

static size_t on_data(char *p, size_t sz, size_t n, void *arg) {
        blob *b = arg;
        size_t len = sz * n, done = 0;
        long status = 0;
        (void)curl_easy_getinfo(b->h, CURLINFO_RESPONSE_CODE, &status);
        if (status != 200) { /* keep a little of an error's body for the message */
                size_t k = len < sizeof b->errbody - 1 - b->errlen ? len : sizeof b->errbody - 1 - b->errlen;
                memcpy(b->errbody + b->errlen, p, k);
                b->errlen += k;
                b->errbody[b->errlen] = 0;
                return len;
        }
        if (b->got + (int64_t)len > b->d->size) {
                b->over = true; /* more than the descriptor says: stop now, not after 8 GiB */
                return 0;
        }
        cm_sha256_update(&b->sha, p, len);
        while (done < len) {
                ssize_t w = write(b->fd, p + done, len - done);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0) {
                        b->write_failed = true;
                        return 0;
                }
                done += (size_t)w;
        }
        b->got += (int64_t)len;
        return len;
}

static int blob_start(blob *b, int blobs_fd, CURLM *m, cm_err *err) {
        cleanup_free char *url = xasprintf("%s/v2/%s/blobs/%s", b->c->base, b->c->repo, b->d->digest);
        b->tmp = temp_name(b->d->digest + 7);
        b->fd = openat(blobs_fd, b->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (b->fd < 0)
                return cm_err_sys(err, errno, "cannot create a blob file in the image layout");
        cm_sha256_init(&b->sha);
        if (!(b->h = curl_easy_init()))
                return cm_err_set(err, ENOMEM, "libcurl failed to initialise");
        rg_easy_setup(b->c, b->h, url, &b->hdrs);
        (void)curl_easy_setopt(b->h, CURLOPT_WRITEFUNCTION, on_data);
        (void)curl_easy_setopt(b->h, CURLOPT_WRITEDATA, b);
        (void)curl_easy_setopt(b->h, CURLOPT_PRIVATE, b);
        if (curl_multi_add_handle(m, b->h) != CURLM_OK)
                return cm_err_set(err, EIO, "libcurl refused a transfer");
        return 0;
}

static void blob_stop(blob *b, int blobs_fd, CURLM *m) {
        if (b->h) {
                (void)curl_multi_remove_handle(m, b->h);
                curl_easy_cleanup(b->h);
                b->h = NULL;
        }
        curl_slist_free_all(b->hdrs);
        b->hdrs = NULL;
        if (b->fd >= 0)
                (void)close(b->fd);
        b->fd = -1;
        if (b->tmp)
                (void)unlinkat(blobs_fd, b->tmp, 0); /* a no-op once published */
        free(b->tmp);
        b->tmp = NULL;
}

/* A finished transfer: verify, then publish or say why not. */
static int blob_finish(blob *b, int blobs_fd, CURLcode rc, cm_err *err) {
        long status = 0, os_errno = 0;
        const char *dg = b->d->digest;
        (void)curl_easy_getinfo(b->h, CURLINFO_RESPONSE_CODE, &status);
        (void)curl_easy_getinfo(b->h, CURLINFO_OS_ERRNO, &os_errno);
        if (b->over)
                return cm_err_set(err, EPROTO,
                                  "the registry %s sent more of blob %s than the %lld bytes its manifest says; "
                                  "refused, nothing kept",
                                  b->c->base, dg, (long long)b->d->size);
        if (b->write_failed)
                return cm_err_sys(err, errno ? errno : EIO, "cannot write blob %s into the image layout", dg);
        if (rc != CURLE_OK)
                return rg_transport_error(b->c, rc, os_errno, b->what, err);
        if (status == 401 || status == 403)
                return rg_refused(b->c, err);
        if (status != 200)
                return cm_err_set(err, EIO, "the registry %s answered HTTP %ld for blob %s: %.200s", b->c->base, status,
                                  dg, b->errbody);
        if (b->got != b->d->size)
                return cm_err_set(err, EPROTO,
                                  "the registry %s sent %lld bytes of blob %s where its manifest says %lld (a "
                                  "truncated blob); refused, nothing kept",
                                  b->c->base, (long long)b->got, dg, (long long)b->d->size);
        if (!digest_matches(&b->sha, dg))
                return cm_err_set(err, EPROTO,
                                  "blob %s from the registry %s does not hash to its digest; refused, nothing kept", dg,
                                  b->c->base);
        if (publish(blobs_fd, b->tmp, b->fd, dg + 7, err) < 0)
                return -1;
        b->done = true;
        return 0;
}

static void report(blob *b, const cm_image_progress *progress, bool force) {
        int64_t step = b->d->size / 100 > (64 << 10) ? b->d->size / 100 : (64 << 10);
        if (!progress || !progress->fn || (!force && b->got - b->reported < step))
                return;
        b->reported = b->got;
        progress->fn(progress->arg, b->what, (uint64_t)b->got, (uint64_t)b->d->size);
}

static void whole(rg_conn *c, const rg_desc *d) {
        if (c->o && c->o->on_blob)
                c->o->on_blob(c->o->on_blob_arg, d->digest, d->media_type ? d->media_type : "");
}

/* Run the transfers until all are done or one fails. */
static int run(rg_conn *c, int blobs_fd, blob *v, size_t n, const cm_image_progress *progress, CURLM *m, cm_err *err) {
        unsigned parallel = c->o && c->o->parallel ? c->o->parallel : 3;
        size_t next = 0, active = 0;
        for (;;) {
                int running = 0, numfds = 0, left;
                CURLMsg *msg;
                struct curl_waitfd wait = {.fd = c->cancel ? c->cancel->fd : -1, .events = CURL_WAIT_POLLIN};
                while (active < parallel && next < n) {
                        if (v[next].done) {
                                next++;
                                continue;
                        }
                        if (blob_start(&v[next++], blobs_fd, m, err) < 0)
                                return -1;
                        active++;
                }
                if (active == 0)
                        return 0;
                if (curl_multi_perform(m, &running) != CURLM_OK)
                        return cm_err_set(err, EIO, "libcurl failed while downloading blobs");
                while ((msg = curl_multi_info_read(m, &left))) {
                        blob *b = NULL;
                        if (msg->msg != CURLMSG_DONE)
                                continue;
                        (void)curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&b);
                        if (blob_finish(b, blobs_fd, msg->data.result, err) < 0)
                                return -1;
                        report(b, progress, true);
                        whole(c, b->d);
                        blob_stop(b, blobs_fd, m);
                        active--;
                }
                for (size_t i = 0; i < n; i++)
                        if (v[i].h)
                                report(&v[i], progress, false);
                if (c->cancel && cm_cancelled(c->cancel))
                        return cm_err_set(err, ECANCELED, "cancelled while fetching %s", c->name);
                if (active == 0)
                        continue; /* start the next ones, or done: nothing to wait for */
                (void)curl_multi_poll(m, wait.fd >= 0 ? &wait : NULL, wait.fd >= 0 ? 1 : 0, 500, &numfds);
        }
}

int rg_fetch_blobs(rg_conn *c, int blobs_fd, const rg_desc *const *descs, size_t n, const cm_image_progress *progress,
                   cm_err *err) {
        blob *v = xcalloc(n + 1, sizeof *v);
        CURLM *m = NULL;
        int r = 0;

        remove_dead_temps(blobs_fd);
        for (size_t i = 0; i < n; i++) {
                v[i] = (blob){.d = descs[i], .c = c, .fd = -1};
                (void)snprintf(v[i].what, sizeof v[i].what, "%.19s %zu/%zu", descs[i]->digest, i + 1, n);
                /* a blob the caller already has (the image store's) is
                 * linked in and checked like one of the layout's own */
                if (c->o && c->o->reuse_dir &&
                    faccessat(blobs_fd, descs[i]->digest + 7, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
                        cleanup_free char *have = xasprintf("%s/%s", c->o->reuse_dir, descs[i]->digest + 7);
                        (void)linkat(AT_FDCWD, have, blobs_fd, descs[i]->digest + 7, 0);
                }
                if (rg_blob_verified(blobs_fd, descs[i])) {
                        v[i].done = true;
                        v[i].got = descs[i]->size;
                        report(&v[i], progress, true);
                        whole(c, descs[i]);
                }
        }
        if (!(m = curl_multi_init()))
                r = cm_err_set(err, ENOMEM, "libcurl failed to initialise");
        else
                r = run(c, blobs_fd, v, n, progress, m, err);
        for (size_t i = 0; i < n; i++)
                blob_stop(&v[i], blobs_fd, m);
        if (m)
                (void)curl_multi_cleanup(m);
        free(v);
        return r < 0 ? -1 : 0;
}
