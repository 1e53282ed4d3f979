/* The HTTP transport's session table (see http_sess.h).
 *
 * One mutex guards the hash chains, the list of every live entry and the
 * busy/idle bookkeeping; it is held only for pointer work, never across a
 * call into the MCP layer.  An entry's own mutex makes "attach a stream and
 * route notifications to it" one step, so a closing stream cannot unroute a
 * newer one. */
#include "transport/http_sess.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "transport/http_log.h"
#include "util/cleanup.h"
#include "util/clock.h"

/* The logs of request streams a session keeps for replay: the running ones
 * and, once over, at most this many, each for t->replay_ms. */
#define MAX_ENDED_LOGS 16
/* Past this many bytes in all logs of the process, ended logs are dropped
 * at the next expiry pass (1 s), whatever their age: a ceiling on what
 * replay may hold, however many sessions there are. */
#define LOGS_BUDGET ((size_t)256 << 20)

struct http_sess {
        atomic_int refs;
        http_sessions *t;
        mcp_session *s;
        bool legacy;
        unsigned cred; /* index in t->creds */
        atomic_bool dropped;
        /* under t->mu */
        bool linked;
        bool used; /* a request came after the one that created it */
        int64_t born_ms;
        unsigned busy;
        int64_t last_ms;
        http_sess *next;                /* hash chain */
        http_sess *prev_all, *next_all; /* every live entry, for shutdown */
        /* under smu */
        pthread_mutex_t smu;
        cm_sse *stream;
        http_log **logs;
        size_t nlogs, caplogs;
};

/* One credential (a token, a peer uid) and its sessions. */
typedef struct http_cred {
        char key[48];
        unsigned count;
} http_cred;

struct http_sessions {
        pthread_mutex_t mu;
        http_sess **buckets;
        size_t mask;
        unsigned count, max, per_cred;
        int64_t idle_ms, grace_ms, replay_ms;
        http_sess *all;
        http_cred *creds; /* a handful: grown, never shrunk */
        unsigned ncreds;
};

static size_t hash(const char *s) {
        uint64_t h = 1469598103934665603ull; /* FNV-1a: ids are random already */
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 1099511628211ull;
        return (size_t)h;
}

http_sessions *http_sessions_new(const http_sess_limits *lim) {
        http_sessions *t = xcalloc(1, sizeof *t);
        size_t n = 64;
        while (n < (size_t)lim->max * 2 && n < ((size_t)1 << 20))
                n *= 2;
        (void)pthread_mutex_init(&t->mu, NULL);
        t->buckets = xcalloc(n, sizeof *t->buckets);
        t->mask = n - 1;
        t->max = lim->max;
        t->per_cred = lim->per_cred;
        t->idle_ms = (int64_t)lim->idle_sec * 1000;
        t->grace_ms = (int64_t)lim->grace_sec * 1000;
        t->replay_ms = (int64_t)lim->replay_sec * 1000;
        return t;
}

void http_sess_ref(http_sess *e) { atomic_fetch_add(&e->refs, 1); }

void http_sess_unref(http_sess *e) {
        http_sessions *t;
        if (!e || atomic_fetch_sub(&e->refs, 1) != 1)
                return;
        t = e->t;
        (void)pthread_mutex_lock(&t->mu);
        if (e->prev_all)
                e->prev_all->next_all = e->next_all;
        else
                t->all = e->next_all;
        if (e->next_all)
                e->next_all->prev_all = e->prev_all;
        (void)pthread_mutex_unlock(&t->mu);
        cm_sse_unref(e->stream);
        for (size_t i = 0; i < e->nlogs; i++)
                http_log_unref(e->logs[i]);
        free(e->logs);
        mcp_session_unref(e->s);
        (void)pthread_mutex_destroy(&e->smu);
        free(e);
}

static void unlink_locked(http_sess *e) {
        http_sessions *t = e->t;
        for (http_sess **p = &t->buckets[hash(mcp_session_id(e->s)) & t->mask]; *p; p = &(*p)->next)
                if (*p == e) {
                        *p = e->next;
                        break;
                }
        e->linked = false;
        e->next = NULL;
        t->count--;
        t->creds[e->cred].count--;
        atomic_store(&e->dropped, true);
}

/* The index of `key` in t->creds, added when new.  Under t->mu. */
static unsigned cred_index(http_sessions *t, const char *key) {
        for (unsigned i = 0; i < t->ncreds; i++)
                if (strcmp(t->creds[i].key, key) == 0)
                        return i;
        t->creds = xrealloc(t->creds, (t->ncreds + 1) * sizeof *t->creds);
        t->creds[t->ncreds] = (http_cred){.count = 0};
        (void)snprintf(t->creds[t->ncreds].key, sizeof t->creds[t->ncreds].key, "%s", key);
        return t->ncreds++;
}

/* After unlinking: stop its calls, end its stream, drop the table's ref. */
static void finish_dropped(http_sess *e) {
        cm_sse *q = http_sess_stream(e);
        mcp_session_cancel_all(e->s);
        if (q) {
                cm_sse_finish(q);
                cm_sse_unref(q);
        }
        http_sess_unref(e);
}

http_sess *http_sessions_create(http_sessions *t, mcp_server *srv, bool legacy, const char *cred,
                                enum http_sess_full *ret_full) {
        mcp_session *s = mcp_session_new(srv, NULL);
        http_sess *e;
        size_t b;
        unsigned ci;
        (void)pthread_mutex_lock(&t->mu);
        ci = cred_index(t, cred);
        if (t->count >= t->max || t->creds[ci].count >= t->per_cred) {
                *ret_full = t->count >= t->max ? HTTP_SESS_FULL : HTTP_SESS_CRED_FULL;
                (void)pthread_mutex_unlock(&t->mu);
                mcp_session_unref(s);
                return NULL;
        }
        e = xcalloc(1, sizeof *e);
        atomic_init(&e->refs, 2); /* the table's and the caller's */
        e->t = t;
        e->s = s;
        e->legacy = legacy;
        e->cred = ci;
        t->creds[ci].count++;
        e->linked = true;
        e->busy = 1;
        e->born_ms = e->last_ms = cm_now_ms();
        (void)pthread_mutex_init(&e->smu, NULL);
        b = hash(mcp_session_id(s)) & t->mask;
        e->next = t->buckets[b];
        t->buckets[b] = e;
        e->next_all = t->all;
        if (t->all)
                t->all->prev_all = e;
        t->all = e;
        t->count++;
        (void)pthread_mutex_unlock(&t->mu);
        return e;
}

http_sess *http_sessions_get(http_sessions *t, const char *id) {
        http_sess *e;
        (void)pthread_mutex_lock(&t->mu);
        for (e = t->buckets[hash(id) & t->mask]; e; e = e->next)
                if (strcmp(mcp_session_id(e->s), id) == 0)
                        break;
        if (e) {
                atomic_fetch_add(&e->refs, 1);
                e->busy++;
                e->used = true;
                e->last_ms = cm_now_ms();
        }
        (void)pthread_mutex_unlock(&t->mu);
        return e;
}

void http_sess_hold(http_sess *e) {
        (void)pthread_mutex_lock(&e->t->mu);
        atomic_fetch_add(&e->refs, 1);
        e->busy++;
        (void)pthread_mutex_unlock(&e->t->mu);
}

void http_sess_put(http_sess *e) {
        if (!e)
                return;
        (void)pthread_mutex_lock(&e->t->mu);
        e->busy--;
        e->last_ms = cm_now_ms();
        (void)pthread_mutex_unlock(&e->t->mu);
        http_sess_unref(e);
}

bool http_sess_drop(http_sess *e) {
        bool was;
        (void)pthread_mutex_lock(&e->t->mu);
        was = e->linked;
        if (was)
                unlink_locked(e);
        (void)pthread_mutex_unlock(&e->t->mu);
        if (was)
                finish_dropped(e);
        return was;
}

unsigned http_sessions_count(http_sessions *t) {
        unsigned n;
        (void)pthread_mutex_lock(&t->mu);
        n = t->count;
        (void)pthread_mutex_unlock(&t->mu);
        return n;
}

unsigned http_sessions_max(http_sessions *t) { return t->max; }
unsigned http_sessions_per_cred(http_sessions *t) { return t->per_cred; }
bool http_sess_dropped(http_sess *e) { return atomic_load(&e->dropped); }

/* Unlink, under the lock, the entries `pick` chooses; the caller finishes
 * them outside it.  Returns a malloc'd array (possibly empty). */
static http_sess **unlink_where(http_sessions *t, bool (*pick)(http_sess *, int64_t), size_t *ret_n) {
        http_sess **out;
        size_t n = 0;
        int64_t now = cm_now_ms();
        (void)pthread_mutex_lock(&t->mu);
        out = xcalloc(t->count + 1, sizeof *out);
        for (size_t b = 0; b <= t->mask; b++)
                for (http_sess *e = t->buckets[b], *next; e; e = next) {
                        next = e->next;
                        if (pick(e, now)) {
                                unlink_locked(e);
                                out[n++] = e;
                        }
                }
        (void)pthread_mutex_unlock(&t->mu);
        *ret_n = n;
        return out;
}

/* Idle past the timeout; or never used after the initialize that made it
 * past the grace: a client that meant it sends notifications/initialized at
 * once, so a table filled with initialize alone empties quickly. */
static bool is_idle(http_sess *e, int64_t now) {
        if (e->busy != 0)
                return false;
        return now - e->last_ms > e->t->idle_ms || (!e->used && !e->legacy && now - e->born_ms > e->t->grace_ms);
}
static bool any(http_sess *e, int64_t now) {
        (void)e, (void)now;
        return true;
}

static void expire_logs(http_sess *e, int64_t now);

void http_sessions_expire(http_sessions *t) {
        size_t n;
        cleanup_free http_sess **gone = unlink_where(t, is_idle, &n);
        cleanup_free http_sess **live = NULL;
        int64_t now = cm_now_ms();
        for (size_t i = 0; i < n; i++)
                finish_dropped(gone[i]);
        (void)pthread_mutex_lock(&t->mu);
        live = xcalloc(t->count + 1, sizeof *live);
        n = 0;
        for (http_sess *e = t->all; e; e = e->next_all)
                if (e->linked) {
                        atomic_fetch_add(&e->refs, 1);
                        live[n++] = e;
                }
        (void)pthread_mutex_unlock(&t->mu);
        for (size_t i = 0; i < n; i++) {
                expire_logs(live[i], now);
                http_sess_unref(live[i]);
        }
}

void http_sessions_cancel_all(http_sessions *t) {
        http_sess **live;
        size_t n = 0, cap = 16;
        (void)pthread_mutex_lock(&t->mu);
        live = xcalloc(cap, sizeof *live);
        for (http_sess *e = t->all; e; e = e->next_all) {
                if (n == cap)
                        live = xrealloc(live, (cap *= 2) * sizeof *live);
                atomic_fetch_add(&e->refs, 1);
                live[n++] = e;
        }
        (void)pthread_mutex_unlock(&t->mu);
        for (size_t i = 0; i < n; i++) {
                mcp_session_cancel_all(live[i]->s);
                http_sess_unref(live[i]);
        }
        free(live);
}

void http_sessions_drop_all(http_sessions *t) {
        size_t n;
        cleanup_free http_sess **gone = unlink_where(t, any, &n);
        for (size_t i = 0; i < n; i++)
                finish_dropped(gone[i]);
}

void http_sessions_free(http_sessions *t) {
        if (!t)
                return;
        http_sessions_drop_all(t);
        free(t->buckets);
        free(t->creds);
        (void)pthread_mutex_destroy(&t->mu);
        free(t);
}

mcp_session *http_sess_mcp(http_sess *e) { return e->s; }
bool http_sess_legacy(http_sess *e) { return e->legacy; }

bool http_sess_attach(http_sess *e, cm_sse *q) {
        bool ok;
        (void)pthread_mutex_lock(&e->smu);
        ok = e->stream == NULL;
        if (ok) {
                cm_sse_ref(q);
                e->stream = q;
                mcp_session_set_notify(e->s, cm_sse_sink(q));
        }
        (void)pthread_mutex_unlock(&e->smu);
        return ok;
}

void http_sess_detach(http_sess *e, cm_sse *q) {
        bool mine;
        (void)pthread_mutex_lock(&e->smu);
        mine = e->stream == q;
        if (mine) {
                e->stream = NULL;
                mcp_session_set_notify(e->s, NULL);
        }
        (void)pthread_mutex_unlock(&e->smu);
        if (mine)
                cm_sse_unref(q);
}

cm_sse *http_sess_stream(http_sess *e) {
        cm_sse *q;
        (void)pthread_mutex_lock(&e->smu);
        q = e->stream;
        if (q)
                cm_sse_ref(q);
        (void)pthread_mutex_unlock(&e->smu);
        return q;
}

/* ---- the logs of request streams, for replay ---------------------------------- */

/* Remove logs[i] (under smu); the caller unrefs it. */
static http_log *take_log_locked(http_sess *e, size_t i) {
        http_log *g = e->logs[i];
        memmove(e->logs + i, e->logs + i + 1, (e->nlogs - i - 1) * sizeof *e->logs);
        e->nlogs--;
        return g;
}

/* Drop ended logs past the replay time, and the oldest ended ones past
 * MAX_ENDED_LOGS. */
static void expire_logs(http_sess *e, int64_t now) {
        http_log *gone[64];
        size_t ngone = 0, ended = 0;
        int64_t end;
        bool tight = http_log_total_bytes() > LOGS_BUDGET;
        (void)pthread_mutex_lock(&e->smu);
        for (size_t i = e->nlogs; i-- > 0;) {
                if (!http_log_finished_at(e->logs[i], &end))
                        continue;
                if ((tight || now - end > e->t->replay_ms || ++ended > MAX_ENDED_LOGS) && ngone < 64)
                        gone[ngone++] = take_log_locked(e, i);
        }
        (void)pthread_mutex_unlock(&e->smu);
        for (size_t i = 0; i < ngone; i++)
                http_log_unref(gone[i]);
}

void http_sess_add_log(http_sess *e, http_log *g) {
        (void)pthread_mutex_lock(&e->smu);
        if (e->nlogs == e->caplogs)
                e->logs = xrealloc(e->logs, (e->caplogs = e->caplogs ? e->caplogs * 2 : 4) * sizeof *e->logs);
        http_log_ref(g);
        e->logs[e->nlogs++] = g;
        (void)pthread_mutex_unlock(&e->smu);
        expire_logs(e, cm_now_ms());
}

http_log *http_sess_find_log(http_sess *e, uint64_t stream) {
        http_log *g = NULL;
        (void)pthread_mutex_lock(&e->smu);
        for (size_t i = 0; i < e->nlogs && !g; i++)
                if (http_log_stream(e->logs[i]) == stream) {
                        g = e->logs[i];
                        http_log_ref(g);
                }
        (void)pthread_mutex_unlock(&e->smu);
        return g;
}
