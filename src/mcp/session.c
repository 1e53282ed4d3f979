/* A session: one client's state (negotiated version, log level, calls in
 * flight) and the dispatch of its messages. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "mcp/internal.h"
#include "util/cleanup.h"
#include "util/json.h"

#define DEFAULT_LOG_LEVEL 1 /* info */

static void random_hex(char *out, size_t bytes) {
        unsigned char raw[32];
        static const char hex[] = "0123456789abcdef";
        ssize_t n = 0;
        int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
                n = read(fd, raw, bytes);
                (void)close(fd);
        }
        if (n != (ssize_t)bytes)
                abort(); /* a guessable session id is worse than no server */
        for (size_t i = 0; i < bytes; i++) {
                out[2 * i] = hex[raw[i] >> 4];
                out[2 * i + 1] = hex[raw[i] & 15];
        }
        out[2 * bytes] = 0;
}

mcp_session *mcp_session_new(mcp_server *srv, mcp_sink *notify) {
        mcp_session *s = xcalloc(1, sizeof *s);
        s->srv = srv;
        atomic_init(&s->refs, 1);
        atomic_init(&s->log_level, DEFAULT_LOG_LEVEL);
        (void)pthread_mutex_init(&s->lock, NULL);
        random_hex(s->id, 16);
        s->notify = notify;
        mcp_sink_ref(notify);
        return s;
}

void mcp_session_ref(mcp_session *s) { atomic_fetch_add(&s->refs, 1); }

void mcp_session_unref(mcp_session *s) {
        if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
                return;
        /* Calls hold a reference, so none is in flight here, and no one can
         * attach anything any more: the session has ended. */
        for (mcp_attachment *a = s->attached, *next; a; a = next) {
                next = a->next;
                a->destroy(a->data);
                free(a);
        }
        for (size_t i = 0; i < EARLY_CANCELS; i++)
                json_decref(s->early_cancels[i]);
        mcp_sink_unref(s->notify);
        (void)pthread_mutex_destroy(&s->lock);
        free(s->client_name);
        free(s->client_version);
        free(s);
}

void mcp_session_set_notify(mcp_session *s, mcp_sink *notify) {
        mcp_sink *old;
        mcp_sink_ref(notify);
        (void)pthread_mutex_lock(&s->lock);
        old = s->notify;
        s->notify = notify;
        (void)pthread_mutex_unlock(&s->lock);
        mcp_sink_unref(old);
}

void *mcp_session_attach(mcp_session *s, const void *key, void *(*create)(void *arg), void *arg,
                         mcp_attach_destroy_fn destroy) {
        mcp_attachment *a;
        void *data;
        (void)pthread_mutex_lock(&s->lock);
        for (a = s->attached; a && a->key != key; a = a->next)
                ;
        if (!a) {
                a = xcalloc(1, sizeof *a);
                *a = (mcp_attachment){key, create(arg), destroy, s->attached};
                s->attached = a;
        }
        data = a->data;
        (void)pthread_mutex_unlock(&s->lock);
        return data;
}

void *mcp_session_attached(mcp_session *s, const void *key) {
        void *data = NULL;
        (void)pthread_mutex_lock(&s->lock);
        for (mcp_attachment *a = s->attached; a && !data; a = a->next)
                if (a->key == key)
                        data = a->data;
        (void)pthread_mutex_unlock(&s->lock);
        return data;
}

const char *mcp_session_id(const mcp_session *s) { return s->id; }

const char *mcp_session_version(mcp_session *s) { return s->state == SESSION_NEW ? NULL : s->version; }

const char *mcp_session_client(mcp_session *s) { return s->client_name ? s->client_name : "unknown"; }

bool mcp_session_initialized(mcp_session *s) { return s->state != SESSION_NEW; }

/* ---- calls in flight ---------------------------------------------------- */

bool mcp_call_mark(mcp_call *c, enum call_state how) {
        int live = CALL_LIVE;
        uint64_t one = 1;
        if (!atomic_compare_exchange_strong(&c->state, &live, (int)how))
                return false;
        if (c->cancel_fd >= 0)
                (void)!write(c->cancel_fd, &one, sizeof one);
        return true;
}

void mcp_session_cancel_all(mcp_session *s) {
        (void)pthread_mutex_lock(&s->lock);
        for (mcp_call *c = s->calls; c; c = c->next)
                (void)mcp_call_mark(c, CALL_CANCELLED);
        (void)pthread_mutex_unlock(&s->lock);
}

/* Called with the session lock held.  The code and message are written
 * before the state changes, so whoever sees CALL_ABANDONED reads them whole;
 * a call that already ended early keeps its way of ending. */
static void abandon_call(mcp_call *c, int code, const char *message) {
        if (atomic_load(&c->state) != CALL_LIVE || c->abandon_msg)
                return;
        c->abandon_code = code;
        c->abandon_msg = xstrdup(message);
        (void)mcp_call_mark(c, CALL_ABANDONED);
}

void mcp_session_abandon(mcp_session *s, int code, const char *message) {
        (void)pthread_mutex_lock(&s->lock);
        for (mcp_call *c = s->calls; c; c = c->next)
                abandon_call(c, code, message);
        (void)pthread_mutex_unlock(&s->lock);
}

static void cancel_by_id(mcp_session *s, const json_t *id) {
        bool found = false;
        if (!json_is_string(id) && !json_is_number(id))
                return;
        (void)pthread_mutex_lock(&s->lock);
        for (mcp_call *c = s->calls; c; c = c->next)
                if (json_equal(c->id, id)) {
                        (void)mcp_call_mark(c, CALL_CANCELLED);
                        found = true;
                }
        if (!found) {
                json_t **slot = &s->early_cancels[s->early_next++ % EARLY_CANCELS];
                json_decref(*slot);
                *slot = json_deep_copy(id);
        }
        (void)pthread_mutex_unlock(&s->lock);
}

/* Called with the session lock held: whether a cancel for `id` came
 * before its call (and forget it: an id is cancelled once). */
static bool cancelled_early(mcp_session *s, const json_t *id) {
        for (size_t i = 0; id && i < EARLY_CANCELS; i++)
                if (s->early_cancels[i] && json_equal(s->early_cancels[i], id)) {
                        json_decref(s->early_cancels[i]);
                        s->early_cancels[i] = NULL;
                        return true;
                }
        return false;
}

static void call_begin(mcp_call *c, mcp_session *s, const json_t *req, mcp_sink *out) {
        memset(c, 0, sizeof *c);
        c->session = s;
        c->id = json_incref(json_object_get(req, "id"));
        c->progress_token = json_incref((json_t *)mcp_message_progress_token(req));
        c->meta = json_object_get(json_object_get(req, "params"), "_meta");
        c->meta = json_is_object(c->meta) ? json_incref(c->meta) : NULL;
        c->out = out;
        c->cancel_fd = -1;
        atomic_init(&c->state, CALL_LIVE);
        mcp_session_ref(s);
        (void)pthread_mutex_lock(&s->lock);
        c->next = s->calls;
        s->calls = c;
        if (cancelled_early(s, c->id))
                atomic_store(&c->state, CALL_CANCELLED);
        (void)pthread_mutex_unlock(&s->lock);
}

static void call_end(mcp_call *c) {
        mcp_session *s = c->session;
        (void)pthread_mutex_lock(&s->lock);
        for (mcp_call **p = &s->calls; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        break;
                }
        (void)pthread_mutex_unlock(&s->lock);
        if (c->cancel_fd >= 0)
                (void)close(c->cancel_fd);
        json_decref(c->id);
        json_decref(c->progress_token);
        json_decref(c->meta);
        free(c->abandon_msg);
        mcp_session_unref(s);
}

mcp_session *mcp_call_session(mcp_call *c) { return c->session; }
mcp_server *mcp_call_server(mcp_call *c) { return c->session->srv; }
bool mcp_call_cancelled(mcp_call *c) { return atomic_load(&c->state) != CALL_LIVE; }

int mcp_call_cancel_fd(mcp_call *c) {
        mcp_session *s = c->session;
        (void)pthread_mutex_lock(&s->lock);
        if (c->cancel_fd < 0) {
                c->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
                if (c->cancel_fd >= 0 && mcp_call_cancelled(c)) {
                        uint64_t one = 1;
                        (void)!write(c->cancel_fd, &one, sizeof one);
                }
        }
        (void)pthread_mutex_unlock(&s->lock);
        return c->cancel_fd;
}

/* A notification that belongs to this call travels with its reply. */
static void call_notify(mcp_call *c, json_t *msg) {
        cleanup_free char *text = cm_json_dump(msg);
        mcp_session *s = c->session;
        mcp_sink *notify;
        json_decref(msg);
        if (!c->out->replies_only) {
                if (c->out->send(c->out, text, strlen(text)) < 0)
                        (void)mcp_call_mark(c, CALL_CANCELLED); /* the peer is gone: stop working for it */
                return;
        }
        (void)pthread_mutex_lock(&s->lock);
        notify = s->notify;
        mcp_sink_ref(notify);
        (void)pthread_mutex_unlock(&s->lock);
        if (notify)
                (void)notify->send(notify, text, strlen(text));
        mcp_sink_unref(notify);
}

const json_t *mcp_call_meta(mcp_call *c) { return c->meta; }

void mcp_call_progress(mcp_call *c, double progress, double total, const char *message) {
        json_t *params;
        if (!c->progress_token || mcp_call_cancelled(c))
                return;
        params = json_pack("{s:O, s:f}", "progressToken", c->progress_token, "progress", progress);
        if (total > 0)
                json_object_set_new(params, "total", json_real(total));
        if (message)
                json_object_set_new(params, "message", json_string(message));
        call_notify(c, json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", "notifications/progress", "params",
                                 params));
}

void mcp_call_log(mcp_call *c, const char *level, const char *fmt, ...) {
        char text[2048];
        va_list ap;
        int idx = mcp_log_level_index(level);
        if (idx < atomic_load(&c->session->log_level))
                return;
        va_start(ap, fmt);
        (void)vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        call_notify(c, json_pack("{s:s, s:s, s:{s:s, s:s, s:s}}", "jsonrpc", "2.0", "method",
                                 "notifications/message", "params", "level", level, "logger", "container-mcp",
                                 "data", text));
}

/* ---- methods ------------------------------------------------------------ */

typedef struct reply {
        json_t *result; /* or */
        int code;
        char *msg;
} reply;

static void fail(reply *r, int code, char *msg) {
        r->code = code;
        r->msg = msg;
}

static void do_initialize(mcp_session *s, const json_t *params, reply *r) {
        const char *asked = cm_json_str(params, "protocolVersion");
        const json_t *info = json_object_get(params, "clientInfo");
        const char *version;

        if (!json_is_object(params) || !asked)
                return fail(r, MCP_INVALID_PARAMS,
                            xstrdup("initialize: params.protocolVersion (string) is required, e.g. \"" MCP_LATEST_VERSION
                                    "\""));
        if (info && !json_is_object(info))
                return fail(r, MCP_INVALID_PARAMS, xstrdup("initialize: params.clientInfo must be an object"));
        /* The spec's rule: the client's version when we speak it, else our latest. */
        version = mcp_version_supported(asked) ? asked : MCP_LATEST_VERSION;

        (void)pthread_mutex_lock(&s->lock);
        if (s->state != SESSION_NEW) {
                (void)pthread_mutex_unlock(&s->lock);
                return fail(r, MCP_INVALID_REQUEST,
                            xstrdup("initialize: this session is already initialized; start a new session to "
                                    "initialize again"));
        }
        (void)snprintf(s->version, sizeof s->version, "%s", version);
        s->client_name = xstrdup(cm_json_str(info, "name") ? cm_json_str(info, "name") : "unknown");
        s->client_version = xstrdup(cm_json_str(info, "version") ? cm_json_str(info, "version") : "");
        s->state = SESSION_INITIALIZING;
        (void)pthread_mutex_unlock(&s->lock);

        r->result = json_pack("{s:s, s:{s:{s:b}, s:{}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", version,
                              "capabilities", "tools", "listChanged", 0, "logging", "serverInfo", "name",
                              s->srv->name, "title", "container-mcp: disposable containers for agents", "version",
                              s->srv->version, "instructions", s->srv->instructions);
}

static void do_set_level(mcp_session *s, const json_t *params, reply *r) {
        int idx = mcp_log_level_index(cm_json_str(params, "level"));
        if (idx < 0)
                return fail(r, MCP_INVALID_PARAMS,
                            xstrdup("logging/setLevel: params.level must be one of debug, info, notice, warning, "
                                    "error, critical, alert, emergency"));
        atomic_store(&s->log_level, idx);
        r->result = json_object();
}

/* Whether the call ended early; if so, r says how it is answered: not at
 * all when the client cancelled it (the spec says send nothing), with the
 * server's error when the server abandoned it.  A result is dropped. */
static bool ended_early(mcp_call *c, reply *r) {
        int state = atomic_load(&c->state);
        if (state == CALL_LIVE)
                return false;
        json_decref(r->result);
        r->result = NULL;
        if (state == CALL_CANCELLED)
                r->code = MCP_REQUEST_CANCELLED; /* with no msg: marks "no reply" */
        else
                fail(r, c->abandon_code, xstrdup(c->abandon_msg));
        return true;
}

/* `pre` is the call registered when the message was accepted, or NULL. */
static void do_call(mcp_session *s, const json_t *req, const json_t *params, mcp_sink *out, mcp_call *pre,
                    reply *r) {
        const json_t *name = json_object_get(params, "name");
        json_t *args = json_object_get(params, "arguments");
        cleanup_json json_t *empty = NULL;
        const reg_tool *t;
        mcp_call local;

        /* Cancelled or abandoned while it waited: the tool never runs. */
        if (pre && ended_early(pre, r))
                return;
        if (!json_is_object(params) || !json_is_string(name))
                return fail(r, MCP_INVALID_PARAMS, xstrdup("tools/call: params.name (string) is required"));
        t = mcp_server_find_tool(s->srv, json_string_value(name));
        if (!t)
                return fail(r, MCP_INVALID_PARAMS,
                            xasprintf("tools/call: unknown tool \"%s\"; call tools/list for the tools this server "
                                      "has",
                                      json_string_value(name)));
        if (!args || json_is_null(args))
                args = empty = json_object();
        else if (!json_is_object(args))
                return fail(r, MCP_INVALID_PARAMS,
                            xasprintf("tools/call: params.arguments must be an object, got %s",
                                      cm_json_type_name(args)));

        if (!pre)
                call_begin(&local, s, req, out);
        /* A cancel that came before the call: the tool never runs. */
        if (!ended_early(pre ? pre : &local, r)) {
                r->result = mcp_server_call_tool(s->srv, t, pre ? pre : &local, args);
                (void)ended_early(pre ? pre : &local, r);
        }
        if (!pre)
                call_end(&local);
}

static bool needs_init(const char *method) {
        return strcmp(method, "initialize") != 0 && strcmp(method, "ping") != 0;
}

static void dispatch(mcp_session *s, const json_t *req, const char *method, const json_t *params, mcp_sink *out,
                     mcp_call *pre, reply *r) {
        if (needs_init(method) && s->state == SESSION_NEW)
                return fail(r, MCP_INVALID_REQUEST,
                            xasprintf("%s: the session is not initialized; send initialize first", method));
        if (strcmp(method, "initialize") == 0)
                return do_initialize(s, params, r);
        if (strcmp(method, "ping") == 0) {
                r->result = json_object();
                return;
        }
        if (strcmp(method, "tools/list") == 0) {
                r->result = mcp_server_list_tools(s->srv, params, &r->code, &r->msg);
                return;
        }
        if (strcmp(method, "tools/call") == 0)
                return do_call(s, req, params, out, pre, r);
        if (strcmp(method, "logging/setLevel") == 0)
                return do_set_level(s, params, r);
        fail(r, MCP_METHOD_NOT_FOUND,
             xasprintf("unknown method \"%s\"; this server offers initialize, ping, tools/list, tools/call and "
                       "logging/setLevel",
                       method));
}

static void handle_notification(mcp_session *s, const char *method, const json_t *params) {
        if (strcmp(method, "notifications/initialized") == 0) {
                (void)pthread_mutex_lock(&s->lock);
                if (s->state == SESSION_INITIALIZING)
                        s->state = SESSION_READY;
                (void)pthread_mutex_unlock(&s->lock);
        } else if (strcmp(method, "notifications/cancelled") == 0) {
                const json_t *id = json_object_get(params, "requestId");
                if (id)
                        cancel_by_id(s, id);
        }
        /* Other notifications (roots/list_changed, progress...) need nothing. */
}

static bool valid_id(const json_t *id) { return json_is_string(id) || json_is_number(id); }

/* One message that is not a batch.  Replies are appended to `replies` when it
 * is non-NULL (inside a batch), else sent to `out`.  `pre`: its call, when it
 * was registered as the message was accepted. */
static void handle_one(mcp_session *s, const json_t *m, mcp_sink *out, json_t *replies, mcp_call *pre) {
        const json_t *id = json_object_get(m, "id");
        const json_t *method = json_object_get(m, "method");
        /* "params": null is taken as no params, as lenient servers do. */
        const json_t *params = json_is_null(json_object_get(m, "params")) ? NULL : json_object_get(m, "params");
        const char *jv = cm_json_str(m, "jsonrpc");
        reply r = {NULL, 0, NULL};
        json_t *msg;

        if (!json_is_object(m))
                fail(&r, MCP_INVALID_REQUEST, xasprintf("invalid request: expected a JSON-RPC object, got %s",
                                                        cm_json_type_name(m)));
        else if (!jv || strcmp(jv, "2.0") != 0)
                fail(&r, MCP_INVALID_REQUEST, xstrdup("invalid request: \"jsonrpc\" must be \"2.0\""));
        else if (!method && (json_object_get(m, "result") || json_object_get(m, "error")) && id)
                return; /* a response to a request we never send: ignore */
        else if (!json_is_string(method))
                fail(&r, MCP_INVALID_REQUEST, xstrdup("invalid request: \"method\" (string) is required"));
        else if (!id)
                return handle_notification(s, json_string_value(method), params);
        else if (params && !json_is_object(params))
                fail(&r, MCP_INVALID_PARAMS, xasprintf("%s: params must be an object, got %s",
                                                       json_string_value(method), cm_json_type_name(params)));
        else if (!valid_id(id))
                fail(&r, MCP_INVALID_REQUEST, xstrdup("invalid request: \"id\" must be a string or a number"));
        else if (params && mcp_json_has_nul(params))
                fail(&r, MCP_INVALID_PARAMS,
                     xasprintf("%s: strings may not contain \\u0000 (NUL); send binary data base64-encoded",
                               json_string_value(method)));
        else
                dispatch(s, m, json_string_value(method), params, out, pre, &r);

        if (!valid_id(id))
                id = NULL;
        if (r.result)
                msg = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "result", r.result);
        else if (r.code == MCP_REQUEST_CANCELLED && !r.msg)
                return;
        else
                msg = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error",
                                "code", r.code, "message", r.msg ? r.msg : "internal error");
        free(r.msg);
        if (replies)
                json_array_append_new(replies, msg);
        else
                mcp_send(out, msg);
}

/* Batches were part of MCP up to 2025-03-26 and removed after it. */
static bool batches_allowed(mcp_session *s) {
        const char *v = mcp_session_version(s);
        return v && strcmp(v, "2025-03-26") <= 0;
}

/* A request that accept() registers: a tools/call with an id a cancel can name. */
static bool is_call_request(const json_t *m) {
        const char *method = cm_json_str(m, "method");
        return json_is_object(m) && method && strcmp(method, "tools/call") == 0 && valid_id(json_object_get(m, "id"));
}

/* The job's registered call for `m`, taken in message order. */
static mcp_call *job_call(mcp_job *j, const json_t *m) {
        if (!j || !is_call_request(m) || j->next_call >= j->n_calls)
                return NULL;
        return j->calls[j->next_call++];
}

static void handle(mcp_session *s, json_t *msg, mcp_sink *out, mcp_job *j) {
        size_t i;
        json_t *m;
        cleanup_json json_t *replies = NULL;

        if (!json_is_array(msg))
                return handle_one(s, msg, out, NULL, job_call(j, msg));
        if (!batches_allowed(s))
                return mcp_send_error(out, NULL, MCP_INVALID_REQUEST,
                                      "JSON-RPC batches are not supported in this protocol version (only up to "
                                      "2025-03-26); send one message at a time");
        if (json_array_size(msg) == 0)
                return mcp_send_error(out, NULL, MCP_INVALID_REQUEST, "invalid request: empty batch");
        replies = json_array();
        json_array_foreach(msg, i, m) {
                mcp_call *pre = job_call(j, m);
                if (mcp_message_is_initialize(m))
                        json_array_append_new(replies,
                                              json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
                                                        json_object_get(m, "id"), "error", "code",
                                                        MCP_INVALID_REQUEST, "message",
                                                        "initialize must not be part of a batch"));
                else
                        handle_one(s, m, out, replies, pre);
        }
        if (json_array_size(replies) > 0)
                mcp_send(out, json_incref(replies));
}

void mcp_session_handle(mcp_session *s, json_t *msg, mcp_sink *out) { handle(s, msg, out, NULL); }

/* ---- jobs: messages accepted in reading order --------------------------- */

static size_t count_calls(const json_t *msg) {
        size_t i, n = 0;
        json_t *m;
        if (!json_is_array(msg))
                return is_call_request(msg);
        json_array_foreach(msg, i, m) n += is_call_request(m);
        return n;
}

mcp_job *mcp_session_accept(mcp_session *s, json_t *msg, mcp_sink *out) {
        size_t n = count_calls(msg), k = 0, i;
        mcp_job *j = xcalloc(1, sizeof *j + n * sizeof j->calls[0]);
        json_t *m;

        j->session = s;
        mcp_session_ref(s);
        j->msg = json_incref(msg);
        j->out = out;
        mcp_sink_ref(out);
        j->n_calls = n;
        for (i = 0; i < n; i++)
                j->calls[i] = xmalloc(sizeof *j->calls[i]);
        if (!json_is_array(msg)) {
                if (n)
                        call_begin(j->calls[0], s, msg, out);
                return j;
        }
        json_array_foreach(msg, i, m) if (is_call_request(m)) call_begin(j->calls[k++], s, m, out);
        return j;
}

static void job_free(mcp_job *j) {
        for (size_t i = 0; i < j->n_calls; i++) {
                call_end(j->calls[i]);
                free(j->calls[i]);
        }
        json_decref(j->msg);
        mcp_sink_unref(j->out);
        mcp_session_unref(j->session);
        free(j);
}

void mcp_job_run(mcp_job *j) {
        handle(j->session, j->msg, j->out, j);
        job_free(j);
}

void mcp_job_refuse(mcp_job *j, int code, const char *message) {
        mcp_session *s = j->session;
        (void)pthread_mutex_lock(&s->lock);
        for (size_t i = 0; i < j->n_calls; i++)
                abandon_call(j->calls[i], code, message);
        (void)pthread_mutex_unlock(&s->lock);
        mcp_job_run(j);
}
