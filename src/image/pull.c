/* Pull: a registry's image fetched into an OCI layout under pulls/ and
 * imported into the store from there.
 *
 *   pulls/<key>/       the layout of one reference and platform (key: the
 *                      sha256 of "reference\nplatform"); kept when a pull
 *                      stops, so the next pull of the same image re-checks
 *                      what is there and fetches only the rest;
 *   pulls/<key>.lock   flock(2): one pull of a reference at a time, in this
 *                      process or another; prune removes the layouts
 *                      whose lock it can take (the lock files stay).
 *
 * The layout is removed once its image is in the index: the store keeps
 * its own verified copy of every blob. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/internal.h"
#include "util/cleanup.h"
#include "util/sha256.h"

/* The lock of one pull; waits (for another pull of the same image) until
 * it is free or the caller cancels. */
static int pull_lock(img_store *s, const char *key, const cm_cancel *cancel, cm_err *err) {
        cleanup_free char *name = xasprintf("pulls/%s.lock", key);

        for (;;) {
                int fd = img_lock(s, name, LOCK_EX | LOCK_NB);
                if (fd >= 0)
                        return fd;
                if (errno != EWOULDBLOCK)
                        return cm_err_sys(err, errno, "image store: cannot lock %s/%s", s->dir, name);
                if (cm_cancelled(cancel))
                        return cm_err_set(err, ECANCELED, "cancelled while another pull of the same image ran");
                /* flock has no timed form: look again when the caller
                 * cancels or after a while */
                (void)poll(&(struct pollfd){.fd = cancel ? cancel->fd : -1, .events = POLLIN}, 1, 100);
        }
}

/* Whether a stopped pull's layout holds a whole blob to resume from. */
static bool has_blobs(img_store *s, const char *key) {
        cleanup_free char *rel = xasprintf("pulls/%s/blobs/sha256", key);
        int fd = openat(s->dfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        bool any = false;

        if (!d) {
                if (fd >= 0)
                        (void)close(fd);
                return false;
        }
        while (!any && (de = readdir(d)))
                any = de->d_name[0] != '.';
        (void)closedir(d);
        return any;
}

int img_pull(img_store *s, const cm_image_ref *ref, const cm_registry_opts *o, const cm_image_progress *prog,
             const cm_cancel *cancel, img_entry *ret, cm_err *err) {
        cleanup_free char *full = cm_image_ref_format(ref);
        cleanup_free char *keyed = xasprintf("%s\n%s", full, o && o->platform ? o->platform : "");
        cleanup_free char *dir = NULL, *digest = NULL, *have = NULL;
        cleanup_close int lock = -1;
        uint8_t sum[CM_SHA256_LEN];
        char key[2 * CM_SHA256_LEN + 1];
        cm_registry_opts opts = o ? *o : (cm_registry_opts){0};
        int r;

        if (mkdirat(s->dfd, "pulls", 0700) < 0 && errno != EEXIST)
                return cm_err_sys(err, errno, "image store: cannot create %s/pulls", s->dir);
        cm_sha256(keyed, strlen(keyed), sum);
        cm_hex(sum, sizeof sum, key);
        if ((lock = pull_lock(s, key, cancel, err)) < 0)
                return -1;
        if (!opts.max_size)
                opts.max_size = (int64_t)s->max_size;
        /* the layers the store has are not fetched again */
        have = xasprintf("%s/blobs/sha256", s->dir);
        opts.reuse_dir = have;
        dir = xasprintf("%s/pulls/%s", s->dir, key);
        if (cm_registry_fetch(ref, &opts, dir, prog, cancel, &digest, err) < 0) {
                /* what came stays for the next pull to resume; a pull
                 * that got nothing (a bad name, no such image) leaves
                 * nothing */
                if (!has_blobs(s, key)) {
                        cleanup_free char *rel = xasprintf("pulls/%s", key);
                        img_remove_at(s->dfd, rel);
                }
                return -1;
        }
        r = img_import_layout(s, dir, full, prog, cancel, ret, err);
        if (r == 0) {
                cleanup_free char *rel = xasprintf("pulls/%s", key);
                img_remove_at(s->dfd, rel);
        }
        return r;
}

/* Layouts of pulls that stopped, unless a pull holds them. */
uint64_t img_pulls_sweep(img_store *s) {
        int fd = openat(s->dfd, "pulls", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        uint64_t bytes = 0;

        if (!d) {
                if (fd >= 0)
                        (void)close(fd);
                return 0;
        }
        while ((de = readdir(d))) {
                cleanup_free char *lock_name = NULL;
                int lock;
                if (de->d_name[0] == '.' || strchr(de->d_name, '.'))
                        continue; /* ".", "..", and the lock files */
                lock_name = xasprintf("pulls/%s.lock", de->d_name);
                lock = img_lock(s, lock_name, LOCK_EX | LOCK_NB);
                if (lock < 0)
                        continue; /* a pull is using it */
                bytes += img_tree_bytes(dirfd(d), de->d_name);
                img_remove_at(dirfd(d), de->d_name);
                /* the lock file stays: unlinked, a pull waiting on it
                 * would lock a file the next pull no longer sees */
                (void)close(lock);
        }
        (void)closedir(d);
        return bytes;
}
