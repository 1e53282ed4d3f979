/* Replies of the HTTP transport, the sink that collects a JSON reply, and
 * the worker threads that run messages whose replies stream. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/http_int.h"
#include "transport/http_log.h"
#include "util/cleanup.h"
#include "util/json.h"

/* ---- replies ------------------------------------------------------------- */

enum MHD_Result http_queue(struct MHD_Connection *c, unsigned status, struct MHD_Response *resp) {
        enum MHD_Result ret;
        if (!resp)
                return MHD_NO; /* out of memory: libmicrohttpd closes the connection */
        http_cors_headers(c, resp);
        ret = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return ret;
}

struct MHD_Response *http_json_response(char *body, size_t len) {
        struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
        if (!r) {
                free(body);
                return NULL;
        }
        if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json") != MHD_YES) {
                MHD_destroy_response(r);
                return NULL;
        }
        return r;
}

__attribute__((format(printf, 2, 0))) static struct MHD_Response *error_va(int code, const char *fmt, va_list ap) {
        char msg[1024];
        json_t *j;
        char *body;
        (void)vsnprintf(msg, sizeof msg, fmt, ap);
        j = json_pack("{s:s, s:n, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", "error", "code", code, "message", msg);
        body = cm_json_dump(j); /* callers clip header values to ASCII, so j is never NULL */
        json_decref(j);
        return http_json_response(body, strlen(body));
}

struct MHD_Response *http_error_response(int code, const char *fmt, ...) {
        struct MHD_Response *r;
        va_list ap;
        va_start(ap, fmt);
        r = error_va(code, fmt, ap);
        va_end(ap);
        return r;
}

enum MHD_Result http_error(struct MHD_Connection *c, unsigned status, int code, const char *fmt, ...) {
        struct MHD_Response *r;
        va_list ap;
        va_start(ap, fmt);
        r = error_va(code, fmt, ap);
        va_end(ap);
        return http_queue(c, status, r);
}

enum MHD_Result http_empty(struct MHD_Connection *c, unsigned status) {
        return http_queue(c, status, MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT));
}

const char *http_header(struct MHD_Connection *c, const char *name) {
        return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

int http_conn_fd(struct MHD_Connection *c) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        return ci ? ci->connect_fd : -1;
}

const char *http_clip(const char *v, char buf[static 128]) {
        size_t i;
        if (!v)
                return "(none)";
        for (i = 0; i < 100 && v[i]; i++)
                buf[i] = (v[i] >= 0x20 && v[i] < 0x7f) ? v[i] : '?';
        (void)strcpy(buf + i, v[i] ? "..." : "");
        return buf;
}

enum MHD_Result http_too_big(struct MHD_Connection *c, cm_http *h) {
        return http_error(c, MHD_HTTP_CONTENT_TOO_LARGE, MCP_INVALID_REQUEST,
                          "message refused: the request body is longer than %zu bytes, the cap set by "
                          "CONTAINER_MCP_MAX_MESSAGE_BYTES (or --max-message-bytes); raise it there or send smaller "
                          "messages, e.g. split file content across calls",
                          h->max_msg);
}

/* ---- who a session belongs to ------------------------------------------------ */

const char *http_cred_key(http_req *r, struct MHD_Connection *c, char buf[static 48]) {
        struct ucred uc;
        socklen_t len = sizeof uc;
        int fd;
        if (r->l->check_host) /* TCP: whoever holds the listener's token (or anyone, with --no-auth) */
                return r->l->token ? "token" : "tcp (no token)";
        fd = http_conn_fd(c);
        if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
                return "unix (unknown peer)";
        (void)snprintf(buf, 48, "uid %u", (unsigned)uc.uid);
        return buf;
}

enum MHD_Result http_sessions_full(struct MHD_Connection *c, cm_http *h, enum http_sess_full full,
                                   const char *cred) {
        struct MHD_Response *r;
        unsigned grace = h->opts->init_grace_sec ? h->opts->init_grace_sec : 30;
        if (full == HTTP_SESS_CRED_FULL)
                r = http_error_response(
                        HTTP_UNAVAILABLE,
                        "too many sessions for one client credential (%s: %u, the limit set by "
                        "CONTAINER_MCP_HTTP_CREDENTIAL_SESSIONS): end unused ones with DELETE /mcp; sessions that "
                        "never get past initialize are dropped after %u s (CONTAINER_MCP_HTTP_INIT_GRACE) and idle "
                        "ones after CONTAINER_MCP_HTTP_SESSION_IDLE, so retry then, or raise the limit",
                        cred, http_sessions_per_cred(h->sessions), grace);
        else
                r = http_error_response(
                        HTTP_UNAVAILABLE,
                        "too many sessions (%u, the limit set by CONTAINER_MCP_HTTP_MAX_SESSIONS): end unused ones "
                        "with DELETE /mcp; sessions that never get past initialize are dropped after %u s "
                        "(CONTAINER_MCP_HTTP_INIT_GRACE) and idle ones after CONTAINER_MCP_HTTP_SESSION_IDLE, so "
                        "retry then, or raise the limit",
                        http_sessions_max(h->sessions), grace);
        if (r) {
                char after[16];
                (void)snprintf(after, sizeof after, "%u", grace);
                (void)MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, after);
        }
        return http_queue(c, MHD_HTTP_SERVICE_UNAVAILABLE, r);
}

/* ---- the collecting sink ------------------------------------------------- */

typedef struct collected {
        char *json;
        size_t len;
        bool response;
} collected;

struct http_collect {
        mcp_sink sink; /* first: a sink pointer is the collector */
        atomic_int refs;
        pthread_mutex_t mu;
        collected *m; /* every message, in order */
        size_t n, cap;
        bool notified;  /* at least one is not a response */
        bool responded; /* at least one is */
        bool closed;
        mcp_sink *fwd; /* the call now streams: messages go on to here */
};

static int collect_send(mcp_sink *self, const char *json, size_t len) {
        http_collect *k = (http_collect *)self;
        enum cm_http_msg_kind kind = cm_http_msg_kind(json, len);
        bool response = kind != CM_HTTP_MSG_NOTIFICATION && kind != CM_HTTP_MSG_REQUEST;
        int ret = 0;
        (void)pthread_mutex_lock(&k->mu);
        k->responded |= response;
        if (k->fwd) {
                ret = k->fwd->send(k->fwd, json, len); /* under mu: in order */
        } else if (k->closed) {
                ret = -EPIPE;
        } else {
                if (k->n == k->cap)
                        k->m = xrealloc(k->m, (k->cap = k->cap ? k->cap * 2 : 2) * sizeof *k->m);
                k->m[k->n++] = (collected){xstrndup(json, len), len, response};
                k->notified |= !response;
        }
        (void)pthread_mutex_unlock(&k->mu);
        return ret;
}

static void collect_ref(mcp_sink *self) { atomic_fetch_add(&((http_collect *)self)->refs, 1); }

static void collect_unref(mcp_sink *self) {
        http_collect *k = (http_collect *)self;
        if (atomic_fetch_sub(&k->refs, 1) != 1)
                return;
        for (size_t i = 0; i < k->n; i++)
                free(k->m[i].json);
        free(k->m);
        if (k->fwd)
                k->fwd->unref(k->fwd);
        (void)pthread_mutex_destroy(&k->mu);
        free(k);
}

http_collect *http_collect_new(void) {
        http_collect *k = xcalloc(1, sizeof *k);
        k->sink = (mcp_sink){collect_send, collect_ref, collect_unref};
        atomic_init(&k->refs, 1);
        (void)pthread_mutex_init(&k->mu, NULL);
        return k;
}

mcp_sink *http_collect_sink(http_collect *k) { return &k->sink; }

/* Send what came so far on to `to`, in order, and all that comes later. */
static void collect_forward(http_collect *k, mcp_sink *to) {
        (void)pthread_mutex_lock(&k->mu);
        to->ref(to);
        k->fwd = to;
        for (size_t i = 0; i < k->n; i++) {
                (void)to->send(to, k->m[i].json, k->m[i].len);
                free(k->m[i].json);
        }
        k->n = 0;
        (void)pthread_mutex_unlock(&k->mu);
}

static bool collect_responded(http_collect *k) {
        bool r;
        (void)pthread_mutex_lock(&k->mu);
        r = k->responded;
        (void)pthread_mutex_unlock(&k->mu);
        return r;
}

/* Every message as an event, in the order sent: a complete event stream. */
static char *as_events(http_collect *k, size_t *ret_len) {
        cm_sbuf b = {0};
        /* No ids: the stream is complete in one body, there is nothing to
         * resume (and an id would invite a GET with Last-Event-ID). */
        for (size_t i = 0; i < k->n; i++)
                cm_sse_encode(&b, CM_SSE_NO_ID, "message", k->m[i].json, k->m[i].len);
        *ret_len = b.len;
        return b.p;
}

/* One message as it is (a reply, a batch's array of replies, or the one
 * error that refuses a whole batch); several sent one by one as an array. */
static char *as_json(http_collect *k, size_t *ret_len) {
        cm_sbuf b = {0};
        if (k->n == 1) {
                *ret_len = k->m[0].len;
                return steal_pointer(&k->m[0].json);
        }
        for (size_t i = 0; i < k->n; i++) {
                cm_sbuf_add(&b, i ? "," : "[", 1);
                cm_sbuf_add(&b, k->m[i].json, k->m[i].len);
        }
        cm_sbuf_add(&b, "]", 1);
        *ret_len = b.len;
        return b.p;
}

char *http_collect_end(http_collect *k, size_t *ret_len, bool *ret_events) {
        char *body = NULL;
        (void)pthread_mutex_lock(&k->mu);
        k->closed = true;
        *ret_events = k->notified;
        if (k->n > 0)
                body = k->notified ? as_events(k, ret_len) : as_json(k, ret_len);
        (void)pthread_mutex_unlock(&k->mu);
        collect_unref(&k->sink);
        return body;
}

void http_collect_drop(http_collect *k) {
        size_t len;
        bool events;
        free(http_collect_end(k, &len, &events));
}

struct MHD_Response *http_collect_response(http_collect *k) {
        size_t len = 0;
        bool events;
        char *body = http_collect_end(k, &len, &events);
        struct MHD_Response *r;
        if (!body || !events)
                return body ? http_json_response(body, len) : NULL;
        r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
        if (!r) {
                free(body);
                return NULL;
        }
        if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream") != MHD_YES ||
            MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache") != MHD_YES) {
                MHD_destroy_response(r);
                return NULL;
        }
        return r;
}

/* ---- running messages ---------------------------------------------------- */

bool http_handle(cm_http *h, http_sess *e, json_t *msg, mcp_sink *out) {
        /* Count first, then look at `stopping`: the shutdown sets `stopping`
         * first, then cancels until the count is zero, so every call either
         * never starts or is seen and cancelled. */
        atomic_fetch_add(&h->handling, 1);
        if (atomic_load(&h->stopping)) {
                atomic_fetch_sub(&h->handling, 1);
                return false;
        }
        mcp_session_handle(http_sess_mcp(e), msg, out);
        atomic_fetch_sub(&h->handling, 1);
        return true;
}

/* The requests of `msg` (one, or those of a batch) answered with an error:
 * the server gives them up (it stops, or their session was ended).  A
 * client's own cancellation is not this: it stays silent, as the spec says. */
static void answer_abandoned(cm_http *h, http_sess *e, const json_t *msg, mcp_sink *out) {
        const char *why = atomic_load(&h->stopping)
                                  ? "the server is shutting down and cancelled this request; send it again once the "
                                    "server is back"
                                  : "the session was ended (DELETE /mcp, or it expired) while this request ran, so "
                                    "it was cancelled; start a new session and send it again";
        size_t n = json_is_array(msg) ? json_array_size(msg) : 1;
        (void)e;
        for (size_t i = 0; i < n; i++) {
                const json_t *m = json_is_array(msg) ? json_array_get(msg, i) : msg;
                json_t *id = json_object_get(m, "id");
                json_t *err;
                char *body;
                if (!id || !json_object_get(m, "method"))
                        continue; /* a notification or a response: nothing to answer */
                err = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code",
                                HTTP_UNAVAILABLE, "message", why);
                body = err ? cm_json_dump(err) : NULL;
                if (body)
                        (void)out->send(out, body, strlen(body));
                free(body);
                json_decref(err);
        }
}

/* After the MCP layer is done with `msg`: no response, and the server gave
 * the request up (not the client)? */
static bool abandoned(cm_http *h, http_sess *e, bool handled, bool responded) {
        return !responded && (!handled || atomic_load(&h->stopping) || http_sess_dropped(e));
}

typedef struct http_job {
        cm_http *h;
        http_sess *e;
        json_t *msg;
        cm_sse *q;
        http_log *g;
        bool finish;
} http_job;

static void job_free(http_job *j) {
        json_decref(j->msg);
        cm_sse_unref(j->q);
        http_log_unref(j->g);
        http_sess_put(j->e);
        free(j);
}

static void jobs_add(cm_http *h, int delta) {
        (void)pthread_mutex_lock(&h->jobs_mu);
        h->jobs += (unsigned)delta;
        if (h->jobs == 0)
                (void)pthread_cond_broadcast(&h->jobs_cv);
        (void)pthread_mutex_unlock(&h->jobs_mu);
}

/* A message whose replies go to the stream q (the legacy transport): a
 * collector passes them on and notes whether a response came. */
static void job_to_stream(http_job *j) {
        http_collect *k = http_collect_new();
        mcp_sink *out = http_collect_sink(k);
        bool handled;
        collect_forward(k, cm_sse_sink(j->q));
        handled = http_handle(j->h, j->e, j->msg, out);
        if (abandoned(j->h, j->e, handled, collect_responded(k)))
                answer_abandoned(j->h, j->e, j->msg, out);
        http_collect_drop(k);
        if (j->finish)
                cm_sse_finish(j->q);
}

static void *job_main(void *arg) {
        http_job *j = arg;
        cm_http *h = j->h;
        if (j->g) {
                mcp_sink *out = http_log_sink(j->g);
                bool handled = http_handle(h, j->e, j->msg, out);
                if (abandoned(h, j->e, handled, http_log_responded(j->g)))
                        answer_abandoned(h, j->e, j->msg, out);
                http_log_finish(j->g);
        } else {
                job_to_stream(j);
        }
        job_free(j);
        jobs_add(h, -1);
        return NULL;
}

int http_spawn(cm_http *h, http_sess *e, json_t *msg, cm_sse *q, http_log *g, bool finish) {
        http_job *j = xcalloc(1, sizeof *j);
        pthread_attr_t attr;
        pthread_t t;
        int rc;

        *j = (http_job){h, e, msg, q, g, finish};
        http_sess_hold(e);
        if (q)
                cm_sse_ref(q);
        if (g)
                http_log_ref(g);
        jobs_add(h, 1);
        rc = pthread_attr_init(&attr);
        if (rc == 0) {
                /* Detached: the shutdown waits on the jobs count instead of
                 * joining, so finished workers need no reaping. */
                (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                rc = pthread_create(&t, &attr, job_main, j);
                (void)pthread_attr_destroy(&attr);
        }
        if (rc != 0) {
                job_free(j);
                jobs_add(h, -1);
                return -rc;
        }
        return 0;
}

/* ---- calls run while their connection is suspended ------------------------- */

struct http_call {
        cm_http *h;
        http_sess *e;
        json_t *msg;
        http_collect *k;
        unsigned status;
        struct MHD_Connection *conn;
        atomic_int refs; /* the request's and the worker's */
        int64_t stream_at; /* still running then: answer with an event stream */
        /* under h->jobs_mu */
        bool suspended; /* whoever clears it resumes the connection */
        bool done;      /* the worker finished: k holds the reply */
        bool handled;   /* ... and the call ran (false: the server was stopping) */
        bool upgrade;   /* resumed by the clock: the reply becomes a stream */
        http_log *log;    /* that stream's log, finished by the worker */
        http_call *prev, *next;
};

static void call_unref(http_call *call) {
        if (atomic_fetch_sub(&call->refs, 1) != 1)
                return;
        json_decref(call->msg);
        if (call->k)
                http_collect_drop(call->k);
        http_log_unref(call->log);
        http_sess_put(call->e);
        free(call);
}

/* Called with h->jobs_mu held.  True when the caller must resume. */
static bool call_unsuspend(http_call *call) {
        bool was = call->suspended;
        call->suspended = false;
        return was;
}

static void *call_main(void *arg) {
        http_call *call = arg;
        cm_http *h = call->h;
        mcp_sink *out = http_collect_sink(call->k);
        http_log *log;
        bool resume, handled = http_handle(h, call->e, call->msg, out);
        if (abandoned(h, call->e, handled, collect_responded(call->k))) {
                answer_abandoned(h, call->e, call->msg, out);
                handled = true; /* the reply is that error */
        }
        (void)pthread_mutex_lock(&h->jobs_mu);
        call->done = true;
        call->handled = handled;
        log = call->log;
        resume = call_unsuspend(call);
        (void)pthread_mutex_unlock(&h->jobs_mu);
        if (log)
                http_log_finish(log);
        if (resume)
                MHD_resume_connection(call->conn); /* suspended until now, so still there */
        call_unref(call);
        jobs_add(h, -1);
        return NULL;
}

http_call *http_call_start(cm_http *h, http_sess *e, json_t *msg, http_collect *k, unsigned status,
                           struct MHD_Connection *c) {
        http_call *call;
        pthread_attr_t attr;
        pthread_t t;
        int rc;

        (void)pthread_mutex_lock(&h->jobs_mu);
        if (atomic_load(&h->stopping)) {
                /* too late: the stop may already have resumed every call,
                 * and must not meet a connection suspended after that */
                (void)pthread_mutex_unlock(&h->jobs_mu);
                json_decref(msg);
                http_collect_drop(k);
                return NULL;
        }
        call = xcalloc(1, sizeof *call);
        *call = (http_call){.h = h, .e = e, .msg = msg, .k = k, .status = status, .conn = c, .suspended = true};
        call->stream_at = cm_now_ms() + h->stream_after_ms;
        atomic_init(&call->refs, 2);
        http_sess_hold(e);
        /* Suspended under the lock, before the worker exists: every resume
         * (the worker's, the stop's) comes after it. */
        MHD_suspend_connection(c);
        call->next = h->calls;
        if (h->calls)
                h->calls->prev = call;
        h->calls = call;
        h->jobs++;
        (void)pthread_mutex_unlock(&h->jobs_mu);
        rc = pthread_attr_init(&attr);
        if (rc == 0) {
                (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                rc = pthread_create(&t, &attr, call_main, call);
                (void)pthread_attr_destroy(&attr);
        }
        if (rc != 0) {
                bool resume;
                (void)pthread_mutex_lock(&h->jobs_mu);
                resume = call_unsuspend(call);
                (void)pthread_mutex_unlock(&h->jobs_mu);
                if (resume)
                        MHD_resume_connection(c); /* answered 503: not done */
                call_unref(call);
                jobs_add(h, -1);
        }
        return call;
}

static void reader_closed(cm_sse *q, void *arg) {
        http_log *g = arg;
        http_log_detach(g, q);
        http_log_unref(g);
}

enum MHD_Result http_stream_log(http_sess *e, http_log *g, int64_t after, struct MHD_Connection *c) {
        cm_sse *q = cm_sse_new(c, http_conn_fd(c), CM_SSE_REQUEST);
        struct MHD_Response *resp;
        (void)e;
        http_log_ref(g);
        cm_sse_on_close(q, reader_closed, g);
        http_log_attach(g, q, after);
        resp = cm_sse_response(q); /* NULL: reader_closed ran, the log goes on */
        cm_sse_unref(q);
        return http_queue(c, MHD_HTTP_OK, resp);
}

enum MHD_Result http_call_reply(http_call *call, struct MHD_Connection *c) {
        cm_http *h = call->h;
        http_collect *k = NULL;
        http_log *g = NULL;
        struct MHD_Response *resp;
        (void)pthread_mutex_lock(&h->jobs_mu);
        if (call->done && call->handled) {
                k = steal_pointer(&call->k);
        } else if (!call->done && call->upgrade && !atomic_load(&h->stopping)) {
                /* Still running: from now on its messages go to a log that
                 * this connection reads as an event stream.  Under the lock,
                 * so the worker, once done, finds the log to finish. */
                g = call->log = http_log_new();
                collect_forward(call->k, http_log_sink(g));
        }
        (void)pthread_mutex_unlock(&h->jobs_mu);
        if (g) {
                http_sess_add_log(call->e, g);
                return http_stream_log(call->e, g, -1, c);
        }
        if (!k)
                return http_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, HTTP_UNAVAILABLE,
                                  "the call could not finish: the server is shutting down (or could not start a "
                                  "thread for it); send it again once the server is back");
        resp = http_collect_response(k);
        return resp ? http_queue(c, call->status, resp) : http_empty(c, MHD_HTTP_ACCEPTED);
}

void http_call_end(http_call *call) {
        cm_http *h = call->h;
        (void)pthread_mutex_lock(&h->jobs_mu);
        if (call->prev)
                call->prev->next = call->next;
        else
                h->calls = call->next;
        if (call->next)
                call->next->prev = call->prev;
        (void)pthread_mutex_unlock(&h->jobs_mu);
        call_unref(call);
}

/* Resume the suspended calls: every one (due < 0), or those still running
 * at `due` ms that have not been upgraded to a stream yet (and mark them). */
static void resume_calls(cm_http *h, int64_t due) {
        struct MHD_Connection **v = NULL;
        size_t n = 0, cap = 0;
        (void)pthread_mutex_lock(&h->jobs_mu);
        for (http_call *call = h->calls; call; call = call->next) {
                if (due >= 0 && (call->done || call->upgrade || due < call->stream_at))
                        continue;
                if (!call_unsuspend(call))
                        continue;
                if (due >= 0)
                        call->upgrade = true;
                if (n == cap)
                        v = xrealloc(v, (cap = cap ? cap * 2 : 16) * sizeof *v);
                v[n++] = call->conn;
        }
        (void)pthread_mutex_unlock(&h->jobs_mu);
        for (size_t i = 0; i < n; i++) /* outside the lock, as the workers do */
                MHD_resume_connection(v[i]);
        free(v);
}

void http_calls_tick(void *arg) {
        cm_http *h = arg;
        if (atomic_load(&h->stopping))
                return; /* the stop resumes every call once its error is in */
        resume_calls(h, cm_now_ms());
}

void http_calls_resume_all(cm_http *h) { resume_calls(h, -1); }
