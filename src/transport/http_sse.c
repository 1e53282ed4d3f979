/* Server-Sent Event streams (see http_sse.h). */
#include "transport/http_sse.h"

#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include "util/lazy.h" /* MHD_* calls go through the table loaded on first use */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "transport/transport.h"
#include "util/cleanup.h"

#define KEEPALIVE_MS 15000
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
        int efd; /* written when bytes are queued or the state changes */
        int sock;
        int64_t last_ms; /* last write to the client */
        cm_sse_close_fn on_close;
        void *close_arg;
};

/* Event ids only need to be unique within a session; one counter for the
 * whole process makes them unique everywhere. */
static atomic_uint_fast64_t next_event_id = 1;

static int64_t now_ms(void) {
        struct timespec ts;
        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void wake(cm_sse *q) {
        uint64_t one = 1;
        (void)!write(q->efd, &one, sizeof one);
}

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
        char head[96];
        size_t i = 0;
        int n = snprintf(head, sizeof head, "id: %c%" PRIuFAST64 "\nevent: %s\n", (char)kind,
                         atomic_fetch_add(&next_event_id, 1), event);
        cm_sbuf_add(b, head, (size_t)n);
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

cm_sse *cm_sse_new(int sock_fd, enum cm_sse_kind kind) {
        cm_sse *q = xcalloc(1, sizeof *q);
        q->sink = (mcp_sink){sink_send, sink_ref, sink_unref};
        atomic_init(&q->refs, 1);
        (void)pthread_mutex_init(&q->mu, NULL);
        q->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (q->efd < 0)
                abort(); /* like an allocation failure: out of fds or memory */
        q->sock = sock_fd;
        q->kind = kind;
        q->last_ms = now_ms();
        /* libmicrohttpd sends the headers with the first body bytes; a
         * comment now lets the client see the stream open before any event. */
        cm_sbuf_add(&q->out, ": stream open\n\n", 15);
        return q;
}

void cm_sse_ref(cm_sse *q) { atomic_fetch_add(&q->refs, 1); }

void cm_sse_unref(cm_sse *q) {
        if (!q || atomic_fetch_sub(&q->refs, 1) != 1)
                return;
        (void)close(q->efd);
        (void)pthread_mutex_destroy(&q->mu);
        free(q->out.p);
        free(q);
}

mcp_sink *cm_sse_sink(cm_sse *q) { return &q->sink; }

int cm_sse_push(cm_sse *q, const char *event, const char *data, size_t len) {
        int ret = 0;
        (void)pthread_mutex_lock(&q->mu);
        if (q->finished || q->dead)
                ret = -EPIPE;
        else if (q->out.len - q->off + len > MAX_PENDING)
                ret = -ENOBUFS, q->dead = true;
        else
                cm_sse_encode(&q->out, q->kind, event, data, len);
        (void)pthread_mutex_unlock(&q->mu);
        wake(q);
        return ret;
}

void cm_sse_finish(cm_sse *q) {
        (void)pthread_mutex_lock(&q->mu);
        q->finished = true;
        (void)pthread_mutex_unlock(&q->mu);
        wake(q);
}

void cm_sse_on_close(cm_sse *q, cm_sse_close_fn fn, void *arg) {
        (void)pthread_mutex_lock(&q->mu);
        q->on_close = fn;
        q->close_arg = arg;
        (void)pthread_mutex_unlock(&q->mu);
}

/* ---- the libmicrohttpd side ---------------------------------------------- */

/* Bytes for the client, or an end marker, or 0 when there is nothing yet. */
static ssize_t take(cm_sse *q, char *out, size_t max) {
        ssize_t r = 0;
        (void)pthread_mutex_lock(&q->mu);
        if (q->out.len > q->off) {
                size_t n = q->out.len - q->off < max ? q->out.len - q->off : max;
                memcpy(out, q->out.p + q->off, n);
                q->off += n;
                if (q->off == q->out.len)
                        q->off = q->out.len = 0;
                q->last_ms = now_ms();
                r = (ssize_t)n;
        } else if (q->dead) {
                r = MHD_CONTENT_READER_END_WITH_ERROR;
        } else if (q->finished) {
                r = MHD_CONTENT_READER_END_OF_STREAM;
        }
        (void)pthread_mutex_unlock(&q->mu);
        return r;
}

/* Block until something happens: an event, a hang-up, a stop, or the time
 * for a keepalive comment. */
static void wait_event(cm_sse *q) {
        struct pollfd p[3] = {
                {q->efd, POLLIN, 0},
                {q->sock, POLLRDHUP, 0}, /* only hang-ups: a pipelined request is not one */
                {cm_stop_fd(), POLLIN, 0},
        };
        int64_t left = q->last_ms + KEEPALIVE_MS - now_ms();
        uint64_t v;
        int n = left > 0 ? poll(p, 3, (int)left) : 0;

        (void)pthread_mutex_lock(&q->mu);
        if (n == 0) {
                cm_sbuf_add(&q->out, ": keepalive\n\n", 13);
        } else if (n > 0) {
                if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
                        q->dead = true;
                if (p[2].revents)
                        q->finished = true; /* shutting down: end the stream cleanly */
        }
        (void)pthread_mutex_unlock(&q->mu);
        if (n > 0 && p[0].revents)
                (void)!read(q->efd, &v, sizeof v);
}

static ssize_t sse_read(void *cls, uint64_t pos, char *out, size_t max) {
        cm_sse *q = cls;
        for (;;) {
                ssize_t r = take(q, out, max);
                if (r != 0)
                        return r;
                wait_event(q);
        }
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
