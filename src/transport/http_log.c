/* The event log of a request stream (see http_log.h).
 *
 * Lock order: a log's mu, then its reader's (http_sse.c). */
#include "transport/http_log.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "transport/http_check.h"
#include "util/cleanup.h"
#include "util/clock.h"

/* Past this many bytes of events a log forgets its oldest ones (never the
 * newest: the final response is always kept), so a chatty call cannot make
 * the server hold its whole output for replay. */
#define LOG_MAX_BYTES (4u << 20)

typedef struct logged {
        uint64_t seq;
        char *ev; /* encoded, id included */
        size_t len;
} logged;

struct http_log {
        mcp_sink sink; /* first: a sink pointer is the log */
        atomic_int refs;
        pthread_mutex_t mu;
        uint64_t stream;
        uint64_t next_seq;
        logged *ev;
        size_t first, n, cap; /* ev[first..n) are kept */
        size_t bytes;
        bool finished, responded;
        int64_t end_ms;
        cm_sse *reader;
};

static atomic_uint_fast64_t next_stream = 1;
/* The bytes kept by every log of the process (see http_log_total_bytes). */
static atomic_size_t total_bytes;

size_t http_log_total_bytes(void) { return atomic_load(&total_bytes); }

/* Hand `ev` to the reader; a reader that refuses (gone, or too far behind)
 * is dropped: the events stay here for the next one. */
static void to_reader_locked(http_log *g, const char *ev, size_t len) {
        if (g->reader && cm_sse_push_raw(g->reader, ev, len) < 0) {
                cm_sse_unref(g->reader);
                g->reader = NULL;
        }
}

static void forget_oldest_locked(http_log *g) {
        while (g->bytes > LOG_MAX_BYTES && g->n - g->first > 1) {
                g->bytes -= g->ev[g->first].len;
                atomic_fetch_sub(&total_bytes, g->ev[g->first].len);
                free(g->ev[g->first].ev);
                g->first++;
        }
        if (g->first > 0 && g->first * 2 >= g->n) { /* compact now and then */
                memmove(g->ev, g->ev + g->first, (g->n - g->first) * sizeof *g->ev);
                g->n -= g->first;
                g->first = 0;
        }
}

static void add_locked(http_log *g, const char *data, size_t len) {
        cm_sbuf b = {0};
        char id[48];
        uint64_t seq = g->next_seq++;
        (void)snprintf(id, sizeof id, "r%" PRIu64 "-%" PRIu64, g->stream, seq);
        cm_sse_encode_id(&b, id, seq ? "message" : NULL, data, len);
        if (g->n == g->cap)
                g->ev = xrealloc(g->ev, (g->cap = g->cap ? g->cap * 2 : 8) * sizeof *g->ev);
        g->ev[g->n++] = (logged){seq, b.p, b.len};
        g->bytes += b.len;
        atomic_fetch_add(&total_bytes, b.len);
        to_reader_locked(g, b.p, b.len);
        forget_oldest_locked(g);
}

static int log_send(mcp_sink *self, const char *json, size_t len) {
        http_log *g = (http_log *)self;
        enum cm_http_msg_kind kind = cm_http_msg_kind(json, len);
        int ret = 0;
        (void)pthread_mutex_lock(&g->mu);
        if (g->finished) {
                ret = -EPIPE;
        } else {
                add_locked(g, json, len);
                g->responded |= kind == CM_HTTP_MSG_RESPONSE || kind == CM_HTTP_MSG_BATCH;
        }
        (void)pthread_mutex_unlock(&g->mu);
        return ret;
}

static void log_ref(mcp_sink *self) { http_log_ref((http_log *)self); }
static void log_unref(mcp_sink *self) { http_log_unref((http_log *)self); }

http_log *http_log_new(void) {
        http_log *g = xcalloc(1, sizeof *g);
        g->sink = (mcp_sink){log_send, log_ref, log_unref};
        atomic_init(&g->refs, 1);
        (void)pthread_mutex_init(&g->mu, NULL);
        g->stream = atomic_fetch_add(&next_stream, 1);
        add_locked(g, "", 0); /* the priming event, seq 0 */
        return g;
}

void http_log_ref(http_log *g) { atomic_fetch_add(&g->refs, 1); }

void http_log_unref(http_log *g) {
        if (!g || atomic_fetch_sub(&g->refs, 1) != 1)
                return;
        for (size_t i = g->first; i < g->n; i++)
                free(g->ev[i].ev);
        atomic_fetch_sub(&total_bytes, g->bytes);
        free(g->ev);
        if (g->reader) {
                cm_sse_finish(g->reader);
                cm_sse_unref(g->reader);
        }
        (void)pthread_mutex_destroy(&g->mu);
        free(g);
}

mcp_sink *http_log_sink(http_log *g) { return &g->sink; }
uint64_t http_log_stream(http_log *g) { return g->stream; }

static bool parse_u64(const char *s, const char **end, uint64_t *ret) {
        uint64_t v = 0;
        const char *p = s;
        for (; *p >= '0' && *p <= '9' && p - s < 19; p++)
                v = v * 10 + (uint64_t)(*p - '0');
        if (p == s)
                return false;
        *end = p;
        *ret = v;
        return true;
}

bool http_log_parse_id(const char *id, uint64_t *ret_stream, uint64_t *ret_seq) {
        const char *p;
        uint64_t stream, seq;
        if (!id || id[0] != CM_SSE_REQUEST || !parse_u64(id + 1, &p, &stream) || *p != '-' ||
            !parse_u64(p + 1, &p, &seq) || *p)
                return false;
        *ret_stream = stream;
        *ret_seq = seq;
        return true;
}

void http_log_attach(http_log *g, cm_sse *q, int64_t after) {
        (void)pthread_mutex_lock(&g->mu);
        if (g->reader) { /* the client came back on a new connection */
                cm_sse_finish(g->reader);
                cm_sse_unref(g->reader);
        }
        cm_sse_ref(q);
        g->reader = q;
        for (size_t i = g->first; i < g->n && g->reader; i++)
                if ((int64_t)g->ev[i].seq > after)
                        to_reader_locked(g, g->ev[i].ev, g->ev[i].len);
        if (g->finished && g->reader)
                cm_sse_finish(g->reader);
        (void)pthread_mutex_unlock(&g->mu);
}

void http_log_detach(http_log *g, cm_sse *q) {
        bool mine;
        (void)pthread_mutex_lock(&g->mu);
        mine = g->reader == q;
        if (mine)
                g->reader = NULL;
        (void)pthread_mutex_unlock(&g->mu);
        if (mine)
                cm_sse_unref(q);
}

static void end_locked(http_log *g) {
        if (!g->finished)
                g->end_ms = cm_now_ms();
        g->finished = true;
        if (g->reader)
                cm_sse_finish(g->reader);
}

void http_log_finish(http_log *g) {
        (void)pthread_mutex_lock(&g->mu);
        end_locked(g);
        (void)pthread_mutex_unlock(&g->mu);
}

bool http_log_responded(http_log *g) {
        bool r;
        (void)pthread_mutex_lock(&g->mu);
        r = g->responded;
        (void)pthread_mutex_unlock(&g->mu);
        return r;
}

bool http_log_finished_at(http_log *g, int64_t *ret_ms) {
        bool f;
        (void)pthread_mutex_lock(&g->mu);
        f = g->finished;
        *ret_ms = g->end_ms;
        (void)pthread_mutex_unlock(&g->mu);
        return f;
}

bool http_log_done_after(http_log *g, int64_t after) {
        bool done;
        (void)pthread_mutex_lock(&g->mu);
        done = g->finished && (g->n == g->first || (int64_t)g->ev[g->n - 1].seq <= after);
        (void)pthread_mutex_unlock(&g->mu);
        return done;
}
