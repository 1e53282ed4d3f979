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
 * its own verified copy of every blob.
 *
 * Layers unpack while the others download: a worker thread takes each
 * layer blob as the registry client reports it whole, copies it into the
 * store and unpacks it (under gc.lock, shared, as an import).  The import
 * that follows then finds blobs and layers in place and checks each
 * against the config's diff-ids; a layer that unpacked to something else
 * is unpacked again there and refused, and the stray one goes at prune. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/internal.h"
#include "image/manifest.h"
#include "util/cleanup.h"
#include "util/sha256.h"

/* The lock of one pull; waits (for another pull of the same image) until
 * it is free or the caller cancels. */
static int pull_lock(img_store *s, const char *key, const cm_image_progress *prog, const cm_cancel *cancel,
                     cm_err *err) {
        cleanup_free char *name = xasprintf("pulls/%s.lock", key);
        bool said = false;

        for (;;) {
                int fd = img_lock(s, name, LOCK_EX | LOCK_NB);
                if (fd >= 0)
                        return fd;
                if (errno != EWOULDBLOCK)
                        return cm_err_sys(err, errno, "image store: cannot lock %s/%s", s->dir, name);
                if (!said && prog && prog->fn)
                        prog->fn(prog->arg, "waiting for another pull of the same image to finish", 0, 0);
                said = true;
                if (cm_cancelled(cancel))
                        return cm_err_set(err, ECANCELED, "cancelled while another pull of the same image ran");
                /* flock has no timed form: look again when the caller
                 * cancels or after a while */
                (void)poll(&(struct pollfd){.fd = cancel ? cancel->fd : -1, .events = POLLIN}, 1, 100);
        }
}

/* ---- unpacking while downloading ----------------------------------------- */

typedef struct early {
        img_store *s;
        const char *blobs; /* the layout's blobs/sha256 */
        const cm_cancel *cancel;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        char **queue; /* layer digests, NULL-terminated */
        size_t n, next;
        bool done;
} early;

static void on_blob(void *arg, const char *digest, const char *media_type) {
        early *e = arg;
        if (img_media_layer(media_type) < 0)
                return; /* the config, or not a layer: the import's */
        (void)pthread_mutex_lock(&e->lock);
        e->queue = xrealloc(e->queue, (e->n + 2) * sizeof *e->queue);
        e->queue[e->n++] = xstrdup(digest);
        e->queue[e->n] = NULL;
        (void)pthread_cond_signal(&e->cond);
        (void)pthread_mutex_unlock(&e->lock);
}

/* Errors are left to the import, which does it all again and says why. */
static void *early_unpack(void *arg) {
        early *e = arg;
        cleanup_close int gc = img_lock(e->s, "gc.lock", LOCK_SH);
        uint64_t total = 0;

        for (;;) {
                cleanup_free char *path = NULL, *stored = NULL;
                cleanup_close int fd = -1;
                cm_err err = CM_ERR_INIT;
                const char *digest;
                uint64_t bytes;
                char diffid[65];

                (void)pthread_mutex_lock(&e->lock);
                while (e->next == e->n && !e->done)
                        (void)pthread_cond_wait(&e->cond, &e->lock);
                digest = e->next < e->n ? e->queue[e->next++] : NULL;
                (void)pthread_mutex_unlock(&e->lock);
                /* past the image's cap the import stops anyway */
                if (!digest || gc < 0 || cm_cancelled(e->cancel) || total > e->s->max_size)
                        return NULL;
                /* a blob the store has: its layer is there (the import checks) */
                if (img_blob_exists(e->s, digest))
                        continue;
                path = xasprintf("%s/%s", e->blobs, digest + 7);
                fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 || img_blob_put_fd(e->s, fd, digest, -1, &stored, &err) < 0)
                        continue;
                if (img_layer_ensure(e->s, digest, NULL, e->cancel, &bytes, diffid, &err) == 0)
                        total += bytes;
        }
}

/* Whether a stopped pull's layout holds a whole blob to resume from. */
static bool has_blobs(img_store *s, const char *key) {
        cleanup_free char *rel = xasprintf("pulls/%s/blobs/sha256", key);
        DIR *d = img_opendir(s, rel);
        struct dirent *de;
        bool any = false;

        if (!d)
                return false;
        while (!any && (de = readdir(d)))
                any = de->d_name[0] != '.';
        (void)closedir(d);
        return any;
}

int img_pull(img_store *s, const cm_image_ref *ref, const cm_registry_opts *o, const cm_image_progress *prog,
             const cm_cancel *cancel, img_entry *ret, cm_err *err) {
        cleanup_free char *full = cm_image_ref_format(ref);
        cleanup_free char *keyed = xasprintf("%s\n%s", full, o && o->platform ? o->platform : "");
        cleanup_free char *dir = NULL, *digest = NULL, *have = NULL, *blobs = NULL;
        early ea;
        pthread_t thread;
        bool worker;
        cleanup_close int lock = -1;
        uint8_t sum[CM_SHA256_LEN];
        char key[2 * CM_SHA256_LEN + 1];
        cm_registry_opts opts = o ? *o : (cm_registry_opts){0};
        int r;

        if (mkdirat(s->dfd, "pulls", 0700) < 0 && errno != EEXIST)
                return cm_err_sys(err, errno, "image store: cannot create %s/pulls", s->dir);
        cm_sha256(keyed, strlen(keyed), sum);
        cm_hex(sum, sizeof sum, key);
        if ((lock = pull_lock(s, key, prog, cancel, err)) < 0)
                return -1;
        if (!opts.max_size)
                opts.max_size = (int64_t)s->max_size;
        /* the layers the store has are not fetched again */
        have = xasprintf("%s/blobs/sha256", s->dir);
        opts.reuse_dir = have;
        dir = xasprintf("%s/pulls/%s", s->dir, key);
        blobs = xasprintf("%s/blobs/sha256", dir);
        ea = (early){.s = s, .blobs = blobs, .cancel = cancel};
        (void)pthread_mutex_init(&ea.lock, NULL);
        (void)pthread_cond_init(&ea.cond, NULL);
        {
                /* the worker takes no signals: they are the process's to handle */
                sigset_t all, old;
                (void)sigfillset(&all);
                (void)pthread_sigmask(SIG_SETMASK, &all, &old);
                worker = pthread_create(&thread, NULL, early_unpack, &ea) == 0;
                (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
        }
        if (worker) {
                opts.on_blob = on_blob;
                opts.on_blob_arg = &ea;
        }
        r = cm_registry_fetch(ref, &opts, dir, prog, cancel, &digest, err);
        if (worker) {
                (void)pthread_mutex_lock(&ea.lock);
                ea.done = true;
                if (r < 0)
                        ea.next = ea.n; /* a failed pull: stop at the layer under way */
                (void)pthread_cond_signal(&ea.cond);
                (void)pthread_mutex_unlock(&ea.lock);
                (void)pthread_join(thread, NULL);
        }
        for (size_t i = 0; i < ea.n; i++)
                free(ea.queue[i]);
        free(ea.queue);
        (void)pthread_cond_destroy(&ea.cond);
        (void)pthread_mutex_destroy(&ea.lock);
        if (r < 0) {
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
        DIR *d = img_opendir(s, "pulls");
        struct dirent *de;
        uint64_t bytes = 0;

        if (!d)
                return 0;
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
