/* stdio <-> Streamable HTTP on the daemon's socket (see relay.h). */
#include "daemon/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/client.h"
#include "transport/transport.h"
#include "util/cleanup.h"
#include "util/json.h"

/* The largest line taken from the client; the daemon has its own, smaller
 * cap (CONTAINER_MCP_MAX_MESSAGE_BYTES) and says so. */
#define MAX_LINE ((size_t)1 << 30)
/* Connections kept for the next request (one per request running at once
 * is opened as needed; these are the ones kept when idle). */
#define POOL 8

typedef struct relay {
        /* A copy, strings included: detached threads read it after
         * cm_relay_run has returned and its caller freed what it passed. */
        cm_relay_opts o_copy;
        const cm_relay_opts *o;
        pthread_mutex_t out_mu;
        bool out_dead;
        /* set once by initialize, read after */
        char session[160];
        char version[40];
        pthread_mutex_t pool_mu;
        cm_uconn pool[POOL];
        int n_pool;
        int wake[2]; /* the stream thread's end: the daemon ended the session */
        atomic_bool closing;
        char stream_err[CM_ERR_MAX * 2];
} relay;

/* ---- output ------------------------------------------------------------------ */

static void write_line(relay *r, const char *p, size_t n) {
        (void)pthread_mutex_lock(&r->out_mu);
        while (!r->out_dead && n > 0) {
                ssize_t w = write(r->o->out_fd, p, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0) {
                        r->out_dead = true; /* the client is gone: the read side sees EOF too */
                        break;
                }
                p += w, n -= (size_t)w;
        }
        (void)pthread_mutex_unlock(&r->out_mu);
}

/* One message to the client, on one line. */
static void emit(relay *r, const char *msg, size_t len) {
        cleanup_free char *line = NULL;
        if (memchr(msg, '\n', len)) { /* pretty JSON would break the framing: re-encode */
                cleanup_json json_t *v = json_loadb(msg, len, 0, NULL);
                if (!v)
                        return;
                line = cm_json_dump(v);
                len = strlen(line);
                msg = line;
        }
        char *buf = xmalloc(len + 1);
        memcpy(buf, msg, len);
        buf[len] = '\n';
        write_line(r, buf, len + 1);
        free(buf);
}

static void emit_error(relay *r, json_t *id, int code, const char *message) {
        cleanup_json json_t *m = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code",
                                           code, "message", message);
        cleanup_free char *s = cm_json_dump(m);
        emit(r, s, strlen(s));
}

/* ---- connections ------------------------------------------------------------- */

static cm_uconn pool_take(relay *r) {
        cm_uconn c = CM_UCONN_INIT;
        (void)pthread_mutex_lock(&r->pool_mu);
        if (r->n_pool > 0)
                c = r->pool[--r->n_pool];
        (void)pthread_mutex_unlock(&r->pool_mu);
        return c;
}

static void pool_put(relay *r, cm_uconn *c) {
        if (c->fd < 0)
                return;
        (void)pthread_mutex_lock(&r->pool_mu);
        if (r->n_pool < POOL) {
                r->pool[r->n_pool++] = *c;
                *c = (cm_uconn)CM_UCONN_INIT;
        }
        (void)pthread_mutex_unlock(&r->pool_mu);
        cm_uconn_close(c);
}

/* ---- one exchange ------------------------------------------------------------ */

typedef struct exch {
        relay *r;
        json_t *id;       /* the request's id, or NULL */
        bool initialize;
        bool unparsed;    /* the client's line was not JSON: its error goes back as is */
        bool answered;    /* a response with that id went out */
        char http_err[600]; /* an HTTP error's message (its body has id null) */
} exch;

static int on_message(void *arg, const cm_uresp *resp, char *msg, size_t len) {
        exch *x = arg;
        cleanup_json json_t *v = NULL;
        json_t *id;
        if (resp->status >= 400 && x->unparsed) {
                emit(x->r, msg, len); /* -32700 with id null, as a stdio server answers */
                return 0;
        }
        if (resp->status >= 400) {
                /* The transport's own error (id null): the client gets it
                 * with its request's id, below. */
                v = json_loadb(msg, len, 0, NULL);
                (void)snprintf(x->http_err, sizeof x->http_err, "%s",
                               cm_json_str(json_object_get(v, "error"), "message")
                                       ? cm_json_str(json_object_get(v, "error"), "message")
                                       : "(no message)");
                return 0;
        }
        if (x->id || x->initialize) {
                v = json_loadb(msg, len, 0, NULL);
                id = json_object_get(v, "id");
                if (x->id && id && json_equal(id, x->id) &&
                    (json_object_get(v, "result") || json_object_get(v, "error")))
                        x->answered = true;
                if (x->initialize && cm_json_str(json_object_get(v, "result"), "protocolVersion"))
                        (void)snprintf(x->r->version, sizeof x->r->version, "%s",
                                       cm_json_str(json_object_get(v, "result"), "protocolVersion"));
        }
        emit(x->r, msg, len);
        return 0;
}

/* POST one message; its replies go out as they come. */
static void post(relay *r, const char *body, size_t len, json_t *id, bool initialize, bool unparsed) {
        exch x = {.r = r, .id = id, .initialize = initialize, .unparsed = unparsed};
        cm_uconn c = pool_take(r);
        cm_uresp resp;
        cm_err err = CM_ERR_INIT;
        cm_ureq q = {.method = "POST",
                     .path = "/mcp",
                     .session = r->session[0] ? r->session : NULL,
                     .version = r->version[0] ? r->version : NULL,
                     .token = r->o->token,
                     .body = body,
                     .len = len};
        int rc = cm_uhttp(&c, r->o->socket_path, &q, on_message, &x, &resp, &err);
        if (rc == 0 && initialize && resp.session[0])
                (void)snprintf(r->session, sizeof r->session, "%s", resp.session);
        pool_put(r, &c);
        if (x.answered || !id)
                return;
        if (rc < 0) {
                char m[CM_ERR_MAX + 100];
                (void)snprintf(m, sizeof m, "container-mcp proxy: %s; is the daemon running? (container-mcp daemon "
                                            "status)", err.msg);
                emit_error(r, id, -32603, m);
        } else if (resp.status >= 400) {
                char m[800];
                (void)snprintf(m, sizeof m, "the daemon answered HTTP %d: %s", resp.status,
                               x.http_err[0] ? x.http_err : "(no message)");
                emit_error(r, id, resp.status == 404 ? -32001 : -32603, m);
        }
        /* 200 without our response: a cancelled call, which gets none. */
}

typedef struct job {
        relay *r;
        char *body;
        size_t len;
        json_t *id;
} job;

static void *job_run(void *arg) {
        job *j = arg;
        post(j->r, j->body, j->len, j->id, false, false);
        json_decref(j->id);
        free(j->body);
        free(j);
        return NULL;
}

/* ---- the session's stream ------------------------------------------------------- */

static int on_event(void *arg, const cm_uresp *resp, char *msg, size_t len) {
        relay *r = arg;
        if (resp->status == 200)
                emit(r, msg, len);
        return 0;
}

static void *stream_run(void *arg) {
        relay *r = arg;
        cm_uconn c = CM_UCONN_INIT;
        cm_uresp resp;
        cm_err err = CM_ERR_INIT;
        cm_ureq q = {.method = "GET",
                     .path = "/mcp",
                     .session = r->session,
                     .version = r->version[0] ? r->version : NULL,
                     .token = r->o->token,
                     .extra = "Container-MCP-Session-Ends: with-stream",
                     .accept = "text/event-stream"};
        int rc = cm_uhttp(&c, r->o->socket_path, &q, on_event, r, &resp, &err);
        cm_uconn_close(&c);
        (void)snprintf(r->stream_err, sizeof r->stream_err,
                       "the daemon at %.200s ended this session (%.600s): it stopped, or the session was removed; "
                       "restart the client to start a new one",
                       r->o->socket_path, rc < 0 ? err.msg : resp.status == 200 ? "its stream ended" : "its stream was refused");
        (void)!write(r->wake[1], "x", 1);
        return NULL;
}

static void start_thread(void *(*fn)(void *), void *arg) {
        pthread_t t;
        pthread_attr_t a;
        (void)pthread_attr_init(&a);
        (void)pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        (void)pthread_attr_setstacksize(&a, 256 << 10);
        if (pthread_create(&t, &a, fn, arg) != 0)
                fn(arg); /* no thread: do it here, in order */
        (void)pthread_attr_destroy(&a);
}

/* ---- the client's lines ---------------------------------------------------------- */

static json_t *request_id(json_t *m) {
        json_t *id = json_object_get(m, "id");
        return json_object_get(m, "method") && id && !json_is_null(id) ? id : NULL;
}

static void handle_line(relay *r, char *line, size_t len) {
        cleanup_json json_t *m = json_loadb(line, len, 0, NULL);
        json_t *id = json_is_object(m) ? request_id(m) : NULL;
        bool init = id && cm_json_str(m, "method") && strcmp(cm_json_str(m, "method"), "initialize") == 0;
        bool batch_request = false;
        size_t i;
        json_t *e;
        if (json_is_array(m))
                json_array_foreach(m, i, e) batch_request |= json_is_object(e) && request_id(e);
        if (init && !r->session[0]) {
                /* In order: nothing else can be sent before its session id. */
                post(r, line, len, id, true, false);
                if (r->session[0])
                        start_thread(stream_run, r);
                return;
        }
        if (id || batch_request) {
                job *j = xcalloc(1, sizeof *j);
                j->r = r;
                j->body = xmalloc(len + 1);
                memcpy(j->body, line, len);
                j->body[len] = '\0';
                j->len = len;
                j->id = json_incref(id);
                start_thread(job_run, j);
                return;
        }
        /* Notifications, responses, and what does not parse (the daemon
         * answers that with its parse error): in reading order. */
        post(r, line, len, NULL, false, m == NULL);
}

static void end_session(relay *r) {
        cm_uconn c = CM_UCONN_INIT;
        cm_uresp resp;
        cm_err err = CM_ERR_INIT;
        cm_ureq q = {.method = "DELETE",
                     .path = "/mcp",
                     .session = r->session,
                     .version = r->version[0] ? r->version : NULL,
                     .token = r->o->token};
        if (r->session[0])
                (void)cm_uhttp(&c, r->o->socket_path, &q, on_event, r, &resp, &err);
        cm_uconn_close(&c);
}

/* Split what was read into lines; keep the unfinished rest. */
static int take_lines(relay *r, char **buf, size_t *len) {
        char *p = *buf, *nl;
        size_t left = *len;
        while ((nl = memchr(p, '\n', left))) {
                size_t n = (size_t)(nl - p);
                *nl = '\0';
                if (n && p[n - 1] == '\r')
                        p[--n] = '\0';
                if (n)
                        handle_line(r, p, n);
                left -= (size_t)(nl - p) + 1;
                p = nl + 1;
        }
        memmove(*buf, p, left);
        *len = left;
        return left > MAX_LINE ? -EMSGSIZE : 0;
}

static int read_loop(relay *r, cm_err *err) {
        cleanup_free char *buf = NULL;
        size_t len = 0, cap = 0;
        struct pollfd f[3] = {{.fd = r->o->in_fd, .events = POLLIN},
                              {.fd = cm_stop_fd(), .events = POLLIN},
                              {.fd = r->wake[0], .events = POLLIN}};
        for (;;) {
                ssize_t n;
                if (poll(f, 3, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return cm_err_sys(err, errno, "poll");
                }
                if (f[1].revents || cm_stop_requested())
                        return 0;
                if (f[2].revents)
                        return cm_err_set(err, EPIPE, "%s", r->stream_err);
                if (len + 65536 + 1 > cap) {
                        cap = (len + 65536 + 1) * 2;
                        buf = xrealloc(buf, cap);
                }
                n = read(r->o->in_fd, buf + len, cap - len - 1);
                if (n < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                if (n <= 0)
                        return 0; /* the client is gone */
                len += (size_t)n;
                if (take_lines(r, &buf, &len) < 0)
                        return cm_err_set(err, EMSGSIZE, "a line from the client passed %zu bytes without a newline",
                                          MAX_LINE);
                if (r->out_dead)
                        return 0;
        }
}

int cm_relay_run(const cm_relay_opts *o, cm_err *err) {
        static relay r; /* detached threads may still read it as the process exits */
        int ret;
        r = (relay){.o_copy = *o};
        r.o_copy.socket_path = xstrdup(o->socket_path);
        r.o_copy.token = o->token ? xstrdup(o->token) : NULL;
        r.o = &r.o_copy;
        (void)pthread_mutex_init(&r.out_mu, NULL);
        (void)pthread_mutex_init(&r.pool_mu, NULL);
        if (pipe2(r.wake, O_CLOEXEC) < 0)
                return cm_err_sys(err, errno, "pipe");
        ret = read_loop(&r, err);
        atomic_store(&r.closing, true);
        if (ret == 0 || err->code != EPIPE)
                end_session(&r);
        return ret;
}
