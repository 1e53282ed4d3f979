/* The session sandbox (workbench.h).
 *
 * A session's sandbox is an object attached to its mcp_session
 * (mcp_session_attach), so it is destroyed, and its container removed,
 * exactly when the session ends, whichever way: stdio input closed, HTTP
 * DELETE, expiry, a legacy SSE stream gone, shutdown.  The server's set of
 * them (cm_workbenches) serves the idle removal (CONTAINER_MCP_SANDBOX_TTL,
 * a thread started with the first sandbox) and the last sweep at shutdown.
 * A crash leaves the container to the backend's orphan reaping, like any
 * other container of a dead server.
 *
 * Locks, outermost first: a session's lock -> set->mu (only to link a new
 * workbench); a workbench's lock is taken with neither held, and is held
 * while its container is created, checked or removed, so concurrent first
 * calls of a session create exactly one. */
#include "tools/workbench.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy/policy.h"
#include "util/cleanup.h"
#include "util/clock.h"

#define CM_LABEL_ROLE "dev.container-mcp.role"
#define ROLE_SANDBOX "session-sandbox"

typedef struct cm_workbench cm_workbench;

struct cm_workbench {
        atomic_int refs;
        cm_workbenches *set;
        pthread_mutex_t lock;
        char *id;             /* under lock; NULL: none now */
        cm_backend *b;        /* the backend that holds it */
        atomic_llong last_ms; /* monotonic; the last use */
        atomic_uint busy;     /* calls running a process in it */
        bool linked;          /* under set->mu */
        cm_workbench *prev, *next;
};

struct cm_workbenches {
        cm_app *app;
        pthread_mutex_t mu;
        pthread_cond_t cv;
        cm_workbench *all;
        bool reaper, stopping;
        pthread_t thread;
};

/* The key of the session attachment: the address of this variable. */
static const char attach_key;

static void wb_unref(cm_workbench *w) {
        if (!w || atomic_fetch_sub(&w->refs, 1) != 1)
                return;
        free(w->id);
        (void)pthread_mutex_destroy(&w->lock);
        free(w);
}

/* Remove the container, if any.  Under w->lock.  Errors are not reported:
 * nobody is left to read them (the session is gone), and a container that
 * could not be removed now is an orphan the next start reaps. */
static void wb_remove_locked(cm_workbench *w) {
        cm_err err = CM_ERR_INIT;
        if (!w->id)
                return;
        if (w->b->ops->remove)
                (void)w->b->ops->remove(w->b, w->id, true, &err);
        free(w->id);
        w->id = NULL;
}

static void unlink_wb(cm_workbenches *set, cm_workbench *w) {
        (void)pthread_mutex_lock(&set->mu);
        if (w->linked) {
                if (w->prev)
                        w->prev->next = w->next;
                else
                        set->all = w->next;
                if (w->next)
                        w->next->prev = w->prev;
                w->linked = false;
        }
        (void)pthread_mutex_unlock(&set->mu);
}

/* The session ended (mcp_session_attach's destroy). */
static void wb_destroy(void *data) {
        cm_workbench *w = data;
        unlink_wb(w->set, w);
        (void)pthread_mutex_lock(&w->lock);
        wb_remove_locked(w);
        (void)pthread_mutex_unlock(&w->lock);
        wb_unref(w);
}

/* Called under the session's lock: allocate and link only. */
static void *wb_create(void *arg) {
        cm_workbenches *set = arg;
        cm_workbench *w = xcalloc(1, sizeof *w);
        atomic_init(&w->refs, 1);
        atomic_init(&w->last_ms, cm_now_ms());
        atomic_init(&w->busy, 0);
        (void)pthread_mutex_init(&w->lock, NULL);
        w->set = set;
        w->b = set->app->active;
        (void)pthread_mutex_lock(&set->mu);
        w->next = set->all;
        if (set->all)
                set->all->prev = w;
        set->all = w;
        w->linked = true;
        (void)pthread_mutex_unlock(&set->mu);
        return w;
}

/* ---- the idle removal ---------------------------------------------------- */

/* Sandboxes idle past the TTL, with a reference each (under set->mu). */
static size_t idle_locked(cm_workbenches *set, int64_t ttl_ms, cm_workbench ***ret) {
        size_t n = 0, cap = 0;
        int64_t now = cm_now_ms();
        *ret = NULL;
        for (cm_workbench *w = set->all; w; w = w->next) {
                if (atomic_load(&w->busy) || now - atomic_load(&w->last_ms) < ttl_ms)
                        continue;
                if (n == cap)
                        *ret = xrealloc(*ret, (cap = cap ? cap * 2 : 8) * sizeof **ret);
                atomic_fetch_add(&w->refs, 1);
                (*ret)[n++] = w;
        }
        return n;
}

static void reap_idle(cm_workbenches *set, int64_t ttl_ms) {
        cleanup_free cm_workbench **idle = NULL;
        size_t n;
        (void)pthread_mutex_lock(&set->mu);
        n = idle_locked(set, ttl_ms, &idle);
        (void)pthread_mutex_unlock(&set->mu);
        for (size_t i = 0; i < n; i++) {
                cm_workbench *w = idle[i];
                (void)pthread_mutex_lock(&w->lock);
                /* Looked at again under its lock: a call may have used it. */
                if (!atomic_load(&w->busy) && cm_now_ms() - atomic_load(&w->last_ms) >= ttl_ms)
                        wb_remove_locked(w);
                (void)pthread_mutex_unlock(&w->lock);
                wb_unref(w);
        }
}

static void *reaper_main(void *arg) {
        cm_workbenches *set = arg;
        int64_t ttl_ms = (int64_t)set->app->cfg->sandbox_ttl_sec * 1000;
        /* A quarter of the TTL, at most 1 s: removal within 25% of it. */
        int64_t tick = ttl_ms / 4 < 1000 ? (ttl_ms / 4 > 10 ? ttl_ms / 4 : 10) : 1000;
        (void)pthread_mutex_lock(&set->mu);
        while (!set->stopping) {
                struct timespec ts;
                (void)clock_gettime(CLOCK_MONOTONIC, &ts);
                ts.tv_sec += tick / 1000;
                ts.tv_nsec += (tick % 1000) * 1000000;
                if (ts.tv_nsec >= 1000000000) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000;
                }
                (void)pthread_cond_timedwait(&set->cv, &set->mu, &ts);
                if (set->stopping)
                        break;
                (void)pthread_mutex_unlock(&set->mu);
                reap_idle(set, ttl_ms);
                (void)pthread_mutex_lock(&set->mu);
        }
        (void)pthread_mutex_unlock(&set->mu);
        return NULL;
}

/* Start the reaper with the first sandbox (a server whose agents never use
 * one runs no extra thread).  A thread that cannot start leaves sandboxes
 * to the session's end, which still removes them. */
static void start_reaper(cm_workbenches *set) {
        if (set->app->cfg->sandbox_ttl_sec == 0)
                return;
        (void)pthread_mutex_lock(&set->mu);
        if (!set->reaper && !set->stopping)
                set->reaper = pthread_create(&set->thread, NULL, reaper_main, set) == 0;
        (void)pthread_mutex_unlock(&set->mu);
}

cm_workbenches *cm_workbenches_new(cm_app *app) {
        cm_workbenches *set = xcalloc(1, sizeof *set);
        pthread_condattr_t attr;
        set->app = app;
        (void)pthread_mutex_init(&set->mu, NULL);
        (void)pthread_condattr_init(&attr);
        (void)pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        (void)pthread_cond_init(&set->cv, &attr);
        (void)pthread_condattr_destroy(&attr);
        return set;
}

void cm_workbenches_free(cm_workbenches *set) {
        bool joined;
        if (!set)
                return;
        (void)pthread_mutex_lock(&set->mu);
        set->stopping = true;
        joined = set->reaper;
        (void)pthread_cond_broadcast(&set->cv);
        (void)pthread_mutex_unlock(&set->mu);
        if (joined)
                (void)pthread_join(set->thread, NULL);
        /* Sessions still alive here (a reference kept past the transport's
         * end) lose their sandbox now; their destroy later finds it gone. */
        for (;;) {
                cm_workbench *w;
                (void)pthread_mutex_lock(&set->mu);
                w = set->all;
                if (w) {
                        atomic_fetch_add(&w->refs, 1);
                        set->all = w->next;
                        if (set->all)
                                set->all->prev = NULL;
                        w->linked = false;
                }
                (void)pthread_mutex_unlock(&set->mu);
                if (!w)
                        break;
                (void)pthread_mutex_lock(&w->lock);
                wb_remove_locked(w);
                (void)pthread_mutex_unlock(&w->lock);
                wb_unref(w);
        }
        (void)pthread_cond_destroy(&set->cv);
        (void)pthread_mutex_destroy(&set->mu);
        free(set);
}

/* ---- the sandbox itself ---------------------------------------------------- */

/* Create the session's container: the sandbox image, the usual limits and
 * labels, network as every run gets it, a long sleep as its main process
 * (the init keeps it; execs come through the init).  Under w->lock. */
static int wb_start_locked(mcp_call *call, cm_workbench *w, cm_err *err) {
        cm_app *app = cm_call_app(call);
        const cm_config *cfg = app->cfg;
        static char *const argv[] = {(char *)"sleep", (char *)"infinity", NULL};
        cleanup_free char *image_real = NULL;
        char owner[CM_OWNER_HEX + 1];
        cm_kv labels[5];
        cm_run_spec spec = {0};
        int r;

        if (!w->b->ops->run || !w->b->ops->list)
                return cm_tool_unsupported(w->b, "run containers yet", err);
        /* Making the sandbox is a change like run_container: file_read and
         * file_list still work in read-only mode, on a named container. */
        if (cfg->readonly)
                return cm_err_set(err, EROFS,
                                  "this session has no sandbox, and the server runs with CONTAINER_MCP_READONLY, "
                                  "which makes none: pass `container` to read a container that exists");
        if (cm_policy_image(cfg, cfg->sandbox_image, &image_real, err) < 0) {
                cm_err_prefix(err, "the session sandbox's image (CONTAINER_MCP_SANDBOX_IMAGE)");
                return -1;
        }
        cm_tool_labels(call, owner, labels);
        labels[4] = (cm_kv){CM_LABEL_ROLE, ROLE_SANDBOX};
        spec.image = image_real ? image_real : cfg->sandbox_image;
        spec.argv = argv;
        spec.argc = 2;
        spec.workdir = "/workspace";
        spec.labels = labels;
        spec.n_labels = 5;
        spec.cpus = cfg->default_cpus;
        spec.memory_bytes = cfg->default_memory;
        spec.pids = 512;
        spec.network = cfg->allow_network;
        if (cm_tool_reserve_slot(app, w->b, err) < 0) {
                cm_err_prefix(err, "the session sandbox cannot start");
                return -1;
        }
        r = w->b->ops->run(w->b, &spec, &w->id, err);
        cm_tool_release_slot(app);
        if (r < 0) {
                cm_err_prefix(err, "the session sandbox (image %s) did not start", spec.image);
                return -1;
        }
        start_reaper(w->set);
        return 0;
}

/* The sandbox's info when it is there and running; else a leftover (it
 * died, the agent removed it) is cleared for a new one.  Under w->lock. */
static bool wb_check_locked(mcp_call *call, cm_workbench *w, cm_container_info *ret) {
        cm_err err = CM_ERR_INIT;
        if (!w->id)
                return false;
        if (cm_tool_find(call, w->b, w->id, ret, &err) == 0) {
                if (ret->state && strcmp(ret->state, "running") == 0)
                        return true;
                cm_container_info_clear(ret);
        }
        wb_remove_locked(w);
        return false;
}

static cm_workbench *session_wb(mcp_call *call) {
        cm_app *app = cm_call_app(call);
        return mcp_session_attach(mcp_call_session(call), &attach_key, wb_create, app->workbenches, wb_destroy);
}

static cm_backend *own_sandbox(mcp_call *call, size_t op_offset, const char *what, cm_container_info *ret, bool hold,
                               cm_err *err) {
        cm_backend *b = cm_tool_backend(call, err);
        cm_workbench *w;
        if (!b)
                return NULL;
        if (!*(void *const *)((const char *)b->ops + op_offset)) {
                (void)cm_tool_unsupported(b, what, err);
                return NULL;
        }
        w = session_wb(call);
        (void)pthread_mutex_lock(&w->lock);
        if (!wb_check_locked(call, w, ret) &&
            (wb_start_locked(call, w, err) < 0 || cm_tool_find(call, w->b, w->id, ret, err) < 0)) {
                (void)pthread_mutex_unlock(&w->lock);
                return NULL;
        }
        if (hold)
                atomic_fetch_add(&w->busy, 1);
        atomic_store(&w->last_ms, cm_now_ms());
        (void)pthread_mutex_unlock(&w->lock);
        return w->b;
}

cm_backend *cm_workbench_hold(mcp_call *call, const char *ref, size_t op_offset, const char *what,
                              cm_container_info *ret, bool *ret_held, cm_err *err) {
        cm_backend *b;
        *ret_held = false;
        if (ref && *ref)
                return cm_tool_target(call, ref, op_offset, what, ret, err);
        b = own_sandbox(call, op_offset, what, ret, true, err);
        *ret_held = b != NULL;
        return b;
}

cm_backend *cm_tool_workbench(mcp_call *call, const char *ref, size_t op_offset, const char *what,
                              cm_container_info *ret, cm_err *err) {
        if (ref && *ref)
                return cm_tool_target(call, ref, op_offset, what, ret, err);
        return own_sandbox(call, op_offset, what, ret, false, err);
}

void cm_workbench_put(mcp_call *call) {
        cm_workbench *w = mcp_session_attached(mcp_call_session(call), &attach_key);
        if (!w)
                return;
        atomic_store(&w->last_ms, cm_now_ms());
        atomic_fetch_sub(&w->busy, 1);
}

char *cm_workbench_id(mcp_call *call) {
        cm_workbench *w = mcp_session_attached(mcp_call_session(call), &attach_key);
        char *id = NULL;
        if (!w)
                return NULL;
        (void)pthread_mutex_lock(&w->lock);
        if (w->id)
                id = xstrdup(w->id);
        (void)pthread_mutex_unlock(&w->lock);
        return id;
}
