/* Server-Sent Event streams (see http_sse.h). */
#include "transport/http_sse.h"

#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include "util/lazy.h" /* MHD_* calls go through the table loaded on first use */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "transport/transport.h"
#include "util/cleanup.h"
#include "util/clock.h"

/* Settings of cm_sse_start: a keep-alive after this long without a write,
 * and the watcher's tick, which also runs the transport's own timer. */
static int64_t keepalive_ms = 15000;
static int tick_ms = 1000;
static void (*tick_fn)(void *);
static void *tick_arg;
/* Held while tick_fn runs, so a stop waits for a tick under way. */
static pthread_mutex_t tick_mu = PTHREAD_MUTEX_INITIALIZER;
/* A client that stops reading must not make us hold its events forever:
 * past this much unsent data the stream counts as dead. */
#define MAX_PENDING (32u << 20)
#define BLOCK_SIZE (32 * 1024)

struct cm_sse {
        mcp_sink sink; /* first, so a sink pointer is the stream */
        atomic_int refs;
        pthread_mutex_t mu;
        enum cm_sse_kind kind;
        cm_sbuf out; /* encoded, not yet written */
        size_t off;  /* written part of out */
        bool finished, dead;
        struct MHD_Connection *conn;
        bool suspended; /* by the content reader; whoever clears it resumes */
        int sock;
        _Atomic int64_t last_ms; /* last write to the client; read by the watcher */
        cm_sse_close_fn on_close;
        void *close_arg;
        /* the watcher's, under watch.mu */
        uint64_t watch_id; /* 0: not watched */
        cm_sse *watch_prev, *watch_next;
};

/* Event ids only need to be unique within a session; one counter for the
 * whole process makes them unique everywhere. */
static atomic_uint_fast64_t next_event_id = 1;

/* ---- the watcher of suspended streams -------------------------------------- */

/* Lock order: a stream's mu, then watch.mu. */
static struct {
        pthread_mutex_t mu;
        pthread_once_t once;
        int start_error;
        int epfd;
        uint64_t next_id;
        bool stopping;
        cm_sse *head; /* every suspended stream, each with a reference */
} watch = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_ONCE_INIT, 0, -1, 1, false, NULL};

/* Called with q->mu held: q suspends.  False when the server stops. */
static bool watch_add(cm_sse *q) {
        struct epoll_event ev = {.events = EPOLLRDHUP};
        bool ok;
        (void)pthread_mutex_lock(&watch.mu);
        ok = !watch.stopping;
        if (ok) {
                q->watch_id = watch.next_id++;
                q->watch_prev = NULL;
                q->watch_next = watch.head;
                if (watch.head)
                        watch.head->watch_prev = q;
                watch.head = q;
                cm_sse_ref(q);
                ev.data.u64 = q->watch_id;
                if (q->sock >= 0)
                        (void)epoll_ctl(watch.epfd, EPOLL_CTL_ADD, q->sock, &ev);
        }
        (void)pthread_mutex_unlock(&watch.mu);
        return ok;
}

/* Returns true when the caller must drop the watcher's reference. */
static bool watch_del(cm_sse *q) {
        bool was;
        (void)pthread_mutex_lock(&watch.mu);
        was = q->watch_id != 0;
        if (was) {
                if (q->sock >= 0)
                        (void)epoll_ctl(watch.epfd, EPOLL_CTL_DEL, q->sock, NULL);
                if (q->watch_prev)
                        q->watch_prev->watch_next = q->watch_next;
                else
                        watch.head = q->watch_next;
                if (q->watch_next)
                        q->watch_next->watch_prev = q->watch_prev;
                q->watch_id = 0;
                q->watch_prev = q->watch_next = NULL;
        }
        (void)pthread_mutex_unlock(&watch.mu);
        return was;
}

/* Called with q->mu held after a change the reader must see.  True when the
 * reader had suspended the connection: the caller then calls wake_finish()
 * once q->mu is unlocked.  Only the one who clears `suspended` resumes, so
 * the connection stays valid until then. */
static bool wake_locked(cm_sse *q) {
        if (!q->suspended)
                return false;
        q->suspended = false;
        return true;
}

static void wake_finish(cm_sse *q) {
        /* Out of the watch list first: once resumed, the reader may suspend
         * and add it again. */
        bool drop = watch_del(q);
        MHD_resume_connection(q->conn);
        if (drop)
                cm_sse_unref(q);
}

/* Apply `what` to q and resume it. */
enum nudge { NUDGE_KEEPALIVE, NUDGE_HANGUP, NUDGE_STOP };

static void nudge(cm_sse *q, enum nudge what) {
        bool resume;
        (void)pthread_mutex_lock(&q->mu);
        if (what == NUDGE_KEEPALIVE && q->suspended)
                cm_sbuf_add(&q->out, ": keepalive\n\n", 13);
        else if (what == NUDGE_HANGUP)
                q->dead = true;
        else if (what == NUDGE_STOP)
                q->finished = true; /* shutting down: end the stream cleanly */
        resume = wake_locked(q);
        (void)pthread_mutex_unlock(&q->mu);
        if (resume)
                wake_finish(q);
}

/* Streams with a reference each, under watch.mu: those whose keep-alive is
 * due (or all of them), or the one of a watch id. */
static size_t collect(cm_sse ***ret, bool all, int64_t due_before, uint64_t id) {
        size_t n = 0, cap = 0;
        cm_sse **v = NULL;
        (void)pthread_mutex_lock(&watch.mu);
        for (cm_sse *q = watch.head; q; q = q->watch_next) {
                if (!(all || (id && q->watch_id == id) || (!id && q->last_ms < due_before)))
                        continue;
                if (n == cap)
                        v = xrealloc(v, (cap = cap ? cap * 2 : 16) * sizeof *v);
                cm_sse_ref(q);
                v[n++] = q;
        }
        (void)pthread_mutex_unlock(&watch.mu);
        *ret = v;
        return n;
}

static void nudge_all(cm_sse **v, size_t n, enum nudge what) {
        for (size_t i = 0; i < n; i++) {
                nudge(v[i], what);
                cm_sse_unref(v[i]);
        }
        free(v);
}

static void *watch_main(void *arg) {
        struct epoll_event ev[64];
        cm_sse **v;
        (void)arg;
        for (;;) {
                void (*fn)(void *);
                void *fn_arg;
                int n = epoll_wait(watch.epfd, ev, 64, tick_ms);
                for (int i = 0; i < n; i++) {
                        size_t k = collect(&v, false, 0, ev[i].data.u64);
                        nudge_all(v, k, NUDGE_HANGUP);
                }
                size_t k = collect(&v, false, cm_now_ms() - keepalive_ms, 0);
                nudge_all(v, k, NUDGE_KEEPALIVE);
                (void)pthread_mutex_lock(&tick_mu);
                (void)pthread_mutex_lock(&watch.mu);
                fn = watch.stopping ? NULL : tick_fn;
                fn_arg = tick_arg;
                (void)pthread_mutex_unlock(&watch.mu);
                if (fn)
                        fn(fn_arg);
                (void)pthread_mutex_unlock(&tick_mu);
        }
        return NULL;
}

static void watch_init(void) {
        pthread_attr_t attr;
        pthread_t t;
        watch.epfd = epoll_create1(EPOLL_CLOEXEC);
        if (watch.epfd < 0) {
                watch.start_error = errno;
                return;
        }
        watch.start_error = pthread_attr_init(&attr);
        if (watch.start_error)
                return;
        (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        watch.start_error = pthread_create(&t, &attr, watch_main, NULL);
        (void)pthread_attr_destroy(&attr);
}

int cm_sse_start(int64_t keepalive, int tick, void (*fn)(void *), void *arg) {
        (void)pthread_mutex_lock(&watch.mu);
        keepalive_ms = keepalive > 0 ? keepalive : 15000;
        tick_ms = tick > 0 ? tick : 1000;
        tick_fn = fn;
        tick_arg = arg;
        (void)pthread_mutex_unlock(&watch.mu);
        (void)pthread_once(&watch.once, watch_init);
        (void)pthread_mutex_lock(&watch.mu);
        watch.stopping = false;
        (void)pthread_mutex_unlock(&watch.mu);
        return -watch.start_error;
}

void cm_sse_stop_all(void) {
        cm_sse **v;
        size_t n;
        (void)pthread_mutex_lock(&watch.mu);
        watch.stopping = true;
        tick_fn = NULL;
        (void)pthread_mutex_unlock(&watch.mu);
        (void)pthread_mutex_lock(&tick_mu); /* a tick under way ends first */
        (void)pthread_mutex_unlock(&tick_mu);
        n = collect(&v, true, 0, 0);
        nudge_all(v, n, NUDGE_STOP);
}

/* ---- streams ---------------------------------------------------------------- */

static int sink_send(mcp_sink *self, const char *json, size_t len) {
        return cm_sse_push((cm_sse *)self, "message", json, len);
}
static void sink_ref(mcp_sink *self) { cm_sse_ref((cm_sse *)self); }
static void sink_unref(mcp_sink *self) { cm_sse_unref((cm_sse *)self); }

void cm_sbuf_add(cm_sbuf *b, const char *s, size_t n) {
        if (b->len + n > b->cap) {
                size_t cap = b->cap ? b->cap : 256;
                while (cap < b->len + n)
                        cap *= 2;
                b->p = xrealloc(b->p, cap);
                b->cap = cap;
        }
        memcpy(b->p + b->len, s, n);
        b->len += n;
}

void cm_sse_encode(cm_sbuf *b, enum cm_sse_kind kind, const char *event, const char *data, size_t len) {
        char id[32];
        if (kind == CM_SSE_NO_ID) {
                cm_sse_encode_id(b, NULL, event, data, len);
                return;
        }
        (void)snprintf(id, sizeof id, "%c%" PRIuFAST64, (char)kind, atomic_fetch_add(&next_event_id, 1));
        cm_sse_encode_id(b, id, event, data, len);
}

void cm_sse_encode_id(cm_sbuf *b, const char *id, const char *event, const char *data, size_t len) {
        size_t i = 0;
        if (id) {
                cm_sbuf_add(b, "id: ", 4);
                cm_sbuf_add(b, id, strlen(id));
                cm_sbuf_add(b, "\n", 1);
        }
        if (event) {
                cm_sbuf_add(b, "event: ", 7);
                cm_sbuf_add(b, event, strlen(event));
                cm_sbuf_add(b, "\n", 1);
        }
        /* SSE ends a line at CR, LF or CRLF.  Compact JSON has none, but a
         * stray one must not end the event early. */
        for (;;) {
                size_t j = i;
                while (j < len && data[j] != '\n' && data[j] != '\r')
                        j++;
                cm_sbuf_add(b, "data: ", 6);
                cm_sbuf_add(b, data + i, j - i);
                cm_sbuf_add(b, "\n", 1);
                if (j >= len)
                        break;
                if (data[j] == '\r' && j + 1 < len && data[j + 1] == '\n')
                        j++;
                i = j + 1;
        }
        cm_sbuf_add(b, "\n", 1);
}

cm_sse *cm_sse_new(struct MHD_Connection *conn, int sock_fd, enum cm_sse_kind kind) {
        cm_sse *q = xcalloc(1, sizeof *q);
        q->sink = (mcp_sink){sink_send, sink_ref, sink_unref};
        atomic_init(&q->refs, 1);
        (void)pthread_mutex_init(&q->mu, NULL);
        q->conn = conn;
        q->sock = sock_fd;
        q->kind = kind;
        q->last_ms = cm_now_ms();
        /* libmicrohttpd sends the headers with the first body bytes; a
         * comment now lets the client see the stream open before any event. */
        cm_sbuf_add(&q->out, ": stream open\n\n", 15);
        return q;
}

void cm_sse_ref(cm_sse *q) { atomic_fetch_add(&q->refs, 1); }

void cm_sse_unref(cm_sse *q) {
        if (!q || atomic_fetch_sub(&q->refs, 1) != 1)
                return;
        (void)pthread_mutex_destroy(&q->mu);
        free(q->out.p);
        free(q);
}

mcp_sink *cm_sse_sink(cm_sse *q) { return &q->sink; }

/* An event (encoded here, or already encoded when raw) onto the queue,
 * waking the reader. */
static int push(cm_sse *q, const char *event, const char *data, size_t len, bool raw) {
        int ret = 0;
        bool resume;
        (void)pthread_mutex_lock(&q->mu);
        if (q->finished || q->dead)
                ret = -EPIPE;
        else if (q->out.len - q->off + len > MAX_PENDING)
                ret = -ENOBUFS, q->dead = true;
        else if (raw)
                cm_sbuf_add(&q->out, data, len);
        else
                cm_sse_encode(&q->out, q->kind, event, data, len);
        resume = wake_locked(q);
        (void)pthread_mutex_unlock(&q->mu);
        if (resume)
                wake_finish(q);
        return ret;
}

int cm_sse_push(cm_sse *q, const char *event, const char *data, size_t len) { return push(q, event, data, len, false); }

int cm_sse_push_raw(cm_sse *q, const char *ev, size_t len) { return push(q, NULL, ev, len, true); }

void cm_sse_finish(cm_sse *q) {
        bool resume;
        (void)pthread_mutex_lock(&q->mu);
        q->finished = true;
        resume = wake_locked(q);
        (void)pthread_mutex_unlock(&q->mu);
        if (resume)
                wake_finish(q);
}

void cm_sse_on_close(cm_sse *q, cm_sse_close_fn fn, void *arg) {
        (void)pthread_mutex_lock(&q->mu);
        q->on_close = fn;
        q->close_arg = arg;
        (void)pthread_mutex_unlock(&q->mu);
}

/* ---- the libmicrohttpd side ---------------------------------------------- */

/* Bytes for the client, or an end marker; with nothing to write yet, the
 * connection is suspended and 0 returned (libmicrohttpd asks again once it is
 * resumed).  Never blocks: this thread serves other connections too. */
static ssize_t sse_read(void *cls, uint64_t pos, char *out, size_t max) {
        cm_sse *q = cls;
        ssize_t r = 0;
        (void)pos;
        (void)pthread_mutex_lock(&q->mu);
        if (q->out.len > q->off) {
                size_t n = q->out.len - q->off < max ? q->out.len - q->off : max;
                memcpy(out, q->out.p + q->off, n);
                q->off += n;
                if (q->off == q->out.len)
                        q->off = q->out.len = 0;
                q->last_ms = cm_now_ms();
                r = (ssize_t)n;
        } else if (q->dead) {
                r = MHD_CONTENT_READER_END_WITH_ERROR;
        } else if (q->finished || !watch_add(q)) {
                r = MHD_CONTENT_READER_END_OF_STREAM; /* finished, or the server stops */
        } else {
                MHD_suspend_connection(q->conn);
                q->suspended = true;
        }
        (void)pthread_mutex_unlock(&q->mu);
        return r;
}

static void sse_free(void *cls) {
        cm_sse *q = cls;
        cm_sse_close_fn fn;
        void *arg;
        (void)pthread_mutex_lock(&q->mu);
        q->dead = true; /* from now on the sink refuses, which cancels its call */
        fn = q->on_close;
        arg = q->close_arg;
        q->on_close = NULL;
        (void)pthread_mutex_unlock(&q->mu);
        if (fn)
                fn(q, arg);
        cm_sse_unref(q);
}

struct MHD_Response *cm_sse_response(cm_sse *q) {
        struct MHD_Response *r;
        cm_sse_ref(q);
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, BLOCK_SIZE, sse_read, q, sse_free);
        if (!r) {
                sse_free(q);
                return NULL;
        }
        if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream") != MHD_YES ||
            MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache") != MHD_YES ||
            /* tell buffering reverse proxies (nginx) to pass events through at once */
            MHD_add_response_header(r, "X-Accel-Buffering", "no") != MHD_YES) {
                MHD_destroy_response(r); /* runs sse_free */
                return NULL;
        }
        return r;
}
