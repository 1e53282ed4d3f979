/* The pool of warm sandboxes.
 *
 * One thread of the backend keeps CONTAINER_MCP_NATIVE_WARM sandboxes
 * (default 2; 0 turns the pool off) started and idle, and tears down the
 * ones a run used, so that neither cost falls on the caller.  It starts
 * with the first run to completion, so a process that never runs one (a
 * `ps`, a status check) never pays for it.  A run to
 * completion takes a warm sandbox when its spec fits one (the host image,
 * no name, no mounts, default sizes, writable root): it then costs a write
 * of its limits and a request to the sandbox's init.  Otherwise, or when
 * none is ready, it starts a sandbox of its own as before.
 *
 * Warm sandboxes have no record; like every run to completion they die
 * with the server (the lifeline) and their cgroups sit under its srv- dir. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/native/internal.h"
#include "util/cleanup.h"

static void pool_start_now(native *n, const char *env);

static bool fits(const cm_run_spec *spec) {
        return (!spec->image || !spec->image[0] || strcmp(spec->image, "host") == 0) && !spec->name &&
               spec->n_mounts == 0 && !spec->readonly_rootfs && !spec->network && spec->n_ports == 0 &&
               (spec->tmpfs_bytes == 0 || spec->tmpfs_bytes == NATIVE_TMPFS_BYTES);
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
                 * stop trying; runs go the usual way and say why. */
                if (p->n_ready < p->target && failures < 3) {
                        warm_box w;
                        cm_err err = CM_ERR_INIT;
                        int r;
                        (void)pthread_mutex_unlock(&p->lock);
                        r = native_warm_create(n, &w, &err);
                        (void)pthread_mutex_lock(&p->lock);
                        if (r < 0) {
                                failures++;
                                continue;
                        }
                        failures = 0;
                        if (p->stop || p->n_ready == POOL_MAX) {
                                p->spent[p->n_spent++] = w;
                                continue;
                        }
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

int pool_run(native *n, const cm_run_spec *spec, const cm_cancel *cancel, cm_exec_result *ret, cm_err *err) {
        native_pool *p;
        warm_box w;
        int r;

        (void)pthread_mutex_lock(&n->lock);
        pool_start(n);
        p = n->pool;
        (void)pthread_mutex_unlock(&n->lock);
        if (!p || !fits(spec))
                return 1;
        (void)pthread_mutex_lock(&p->lock);
        if (p->n_ready == 0) {
                (void)pthread_mutex_unlock(&p->lock);
                return 1;
        }
        w = p->ready[--p->n_ready];
        (void)pthread_cond_signal(&p->cond); /* make the next one */
        (void)pthread_mutex_unlock(&p->lock);

        r = native_warm_run(n, &w, spec, cancel, ret, err);

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
