/* The pool of warm sandboxes.
 *
 * One thread of the backend keeps CONTAINER_MCP_NATIVE_WARM sandboxes
 * (default 2; 0 turns the pool off) started and idle, and tears down the
 * ones a run used, so that neither cost falls on the caller.  It starts
 * with the first run to completion, so a process that never runs one (a
 * `ps`, a status check) never pays for it.  A run to
 * completion takes a warm sandbox when its spec fits one (the host image
 * or a stored one, no name, no mounts, default sizes, writable root): it
 * then costs a write of its limits and a request to the sandbox's init.
 * Otherwise, or when none is ready, it starts a sandbox of its own as
 * before.
 *
 * Stored images: the pool keeps as many sandboxes of the stored image last
 * run to completion (by manifest digest, so a name pulled anew is a new
 * image), besides those of `host`; a run of another image retires them.
 * Their init was started with the image's User; the run brings the
 * config's Entrypoint, Cmd, Env and WorkingDir.  Removing or pruning
 * images bumps the pool's generation: no older box is used again, since
 * its layers may be gone.
 *
 * Warm sandboxes have no record; like every run to completion they die
 * with the server (the lifeline) and their cgroups sit under its srv- dir. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/native/internal.h"
#include "util/cleanup.h"

static void pool_start_now(native *n, const char *env);

static bool is_host(const char *image) { return !image || !image[0] || strcmp(image, "host") == 0; }

static bool fits(const cm_run_spec *spec) {
        return (is_host(spec->image) || native_image_is_stored(spec->image)) && !spec->name && spec->n_mounts == 0 &&
               !spec->readonly_rootfs && !spec->network && spec->n_ports == 0 &&
               (spec->tmpfs_bytes == 0 || spec->tmpfs_bytes == NATIVE_TMPFS_BYTES);
}

/* Ready boxes of the host image (image ""), or of a stored one, of the
 * current generation; p->lock held. */
static size_t count_ready(const native_pool *p, const char *image) {
        size_t k = 0;
        for (size_t i = 0; i < p->n_ready; i++)
                k += strcmp(p->ready[i].image, image) == 0 && p->ready_gen[i] == p->generation;
        return k;
}

/* Ready boxes no run will take (another image, an old generation) go to
 * be torn down; p->lock held. */
static void retire_stale(native_pool *p) {
        size_t k = 0;
        for (size_t i = 0; i < p->n_ready; i++) {
                bool keep = p->ready_gen[i] == p->generation &&
                            (!p->ready[i].image[0] || strcmp(p->ready[i].image, p->image) == 0);
                if (!keep && p->n_spent < ARRAY_SIZE(p->spent)) {
                        p->spent[p->n_spent++] = p->ready[i];
                        continue;
                }
                p->ready_gen[k] = p->ready_gen[i];
                p->ready[k++] = p->ready[i];
        }
        p->n_ready = k;
}

static void *pool_thread(void *arg) {
        native *n = arg;
        native_pool *p = n->pool;
        int failures = 0;

        (void)pthread_mutex_lock(&p->lock);
        while (!p->stop) {
                if (p->n_spent > 0) {
                        warm_box w = p->spent[--p->n_spent];
                        (void)pthread_mutex_unlock(&p->lock);
                        native_warm_destroy(n, &w);
                        (void)pthread_mutex_lock(&p->lock);
                        continue;
                }
                /* After repeated failures (say, no room for more processes)
                 * stop trying; runs go the usual way and say why.  The
                 * host image's boxes first, then those of the stored
                 * image last run. */
                bool host = count_ready(p, "") < p->target;
                if (p->primed && (host || (p->image[0] && count_ready(p, p->image) < p->target)) && failures < 3) {
                        warm_box w;
                        cm_err err = CM_ERR_INIT;
                        char image[sizeof p->image];
                        unsigned gen = p->generation;
                        int r;
                        memcpy(image, host ? "" : p->image, host ? 1 : sizeof image);
                        (void)pthread_mutex_unlock(&p->lock);
                        r = native_warm_create(n, image[0] ? image : NULL, &w, &err);
                        (void)pthread_mutex_lock(&p->lock);
                        if (r < 0) {
                                failures++;
                                continue;
                        }
                        failures = 0;
                        if (p->stop || p->n_ready == ARRAY_SIZE(p->ready) || gen != p->generation ||
                            (w.image[0] && strcmp(w.image, p->image) != 0)) {
                                p->spent[p->n_spent++] = w;
                                continue;
                        }
                        p->ready_gen[p->n_ready] = gen;
                        p->ready[p->n_ready++] = w;
                        continue;
                }
                (void)pthread_cond_wait(&p->cond, &p->lock);
        }
        (void)pthread_mutex_unlock(&p->lock);
        return NULL;
}

/* Once per backend, on the first run to completion; n->lock held. */
static void pool_start(native *n) {
        const char *env = getenv("CONTAINER_MCP_NATIVE_WARM");
        if (n->pool_tried)
                return;
        n->pool_tried = true;
        pool_start_now(n, env);
}

static void pool_start_now(native *n, const char *env) {
        long target = env && *env ? strtol(env, NULL, 10) : 2;
        native_pool *p;
        sigset_t all, old;

        if (!n->ok || target <= 0)
                return;
        p = xcalloc(1, sizeof *p);
        p->target = target > POOL_MAX ? POOL_MAX : (size_t)target;
        (void)pthread_mutex_init(&p->lock, NULL);
        (void)pthread_cond_init(&p->cond, NULL);
        n->pool = p;
        /* The thread takes no signals: they are the server's to handle. */
        (void)sigfillset(&all);
        (void)pthread_sigmask(SIG_SETMASK, &all, &old);
        p->running = pthread_create(&p->thread, NULL, pool_thread, n) == 0;
        (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (!p->running) {
                (void)pthread_cond_destroy(&p->cond);
                (void)pthread_mutex_destroy(&p->lock);
                free(p);
                n->pool = NULL;
        }
}

void pool_stop(native *n) {
        native_pool *p = n->pool;
        if (!p)
                return;
        (void)pthread_mutex_lock(&p->lock);
        p->stop = true;
        (void)pthread_cond_signal(&p->cond);
        (void)pthread_mutex_unlock(&p->lock);
        (void)pthread_join(p->thread, NULL);
        while (p->n_spent > 0)
                native_warm_destroy(n, &p->spent[--p->n_spent]);
        while (p->n_ready > 0)
                native_warm_destroy(n, &p->ready[--p->n_ready]);
        (void)pthread_cond_destroy(&p->cond);
        (void)pthread_mutex_destroy(&p->lock);
        free(p);
        n->pool = NULL;
}

void pool_primed(native *n) {
        native_pool *p = n->pool;
        if (!p || __atomic_load_n(&p->primed, __ATOMIC_RELAXED))
                return;
        (void)pthread_mutex_lock(&p->lock);
        p->primed = true;
        (void)pthread_cond_signal(&p->cond);
        (void)pthread_mutex_unlock(&p->lock);
}

void pool_forget_images(native *n) {
        native_pool *p = n->pool;
        if (!p)
                return;
        (void)pthread_mutex_lock(&p->lock);
        p->generation++;
        p->image[0] = 0;
        retire_stale(p);
        (void)pthread_cond_signal(&p->cond);
        (void)pthread_mutex_unlock(&p->lock);
}

/* Take a ready box of image (manifest digest, or "" for host); p->lock
 * held.  0 and *ret, or 1: none. */
static int take_ready(native_pool *p, const char *image, warm_box *ret) {
        for (size_t i = p->n_ready; i-- > 0;) {
                if (p->ready_gen[i] != p->generation || strcmp(p->ready[i].image, image) != 0)
                        continue;
                *ret = p->ready[i];
                p->ready[i] = p->ready[p->n_ready - 1];
                p->ready_gen[i] = p->ready_gen[p->n_ready - 1];
                p->n_ready--;
                return 0;
        }
        return 1;
}

int pool_run(native *n, const cm_run_spec *spec, const native_image *im, const cm_cancel *cancel, cm_exec_result *ret,
             cm_err *err) {
        native_pool *p;
        warm_box w;
        bool stored;
        int r;

        (void)pthread_mutex_lock(&n->lock);
        pool_start(n);
        p = n->pool;
        (void)pthread_mutex_unlock(&n->lock);
        if (!p || !fits(spec))
                return 1;
        /* A stored image by its manifest (im, resolved by the caller): a
         * box made for it runs it only while the name still means that
         * image.  Not resolved: the usual way, which says what is wrong. */
        stored = !is_host(spec->image);
        /* without overlayfs a stored image is a copy per sandbox, made and
         * removed with the run: not kept warm */
        if (stored && (!n->overlay || !im))
                return 1;
        (void)pthread_mutex_lock(&p->lock);
        if (stored && strcmp(p->image, im->e.manifest) != 0) {
                /* the pool keeps boxes of the image last run, from now on */
                (void)snprintf(p->image, sizeof p->image, "%s", im->e.manifest);
                retire_stale(p);
                (void)pthread_cond_signal(&p->cond);
        }
        r = take_ready(p, stored ? im->e.manifest : "", &w);
        if (r == 0)
                (void)pthread_cond_signal(&p->cond); /* make the next one */
        (void)pthread_mutex_unlock(&p->lock);
        if (r == 1)
                return 1;

        r = native_warm_run(n, &w, stored ? im : NULL, spec, cancel, ret, err);

        /* Spent either way: the thread tears it down, off our path. */
        (void)pthread_mutex_lock(&p->lock);
        if (p->n_spent < ARRAY_SIZE(p->spent)) {
                p->spent[p->n_spent++] = w;
                (void)pthread_cond_signal(&p->cond);
                w.pidfd = -1;
        }
        (void)pthread_mutex_unlock(&p->lock);
        if (w.pidfd >= 0)
                native_warm_destroy(n, &w);
        return r;
}
