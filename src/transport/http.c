/* The HTTP transport: Streamable HTTP at /mcp, the legacy HTTP+SSE transport
 * at /sse and /messages, and a status page at /, on TCP and/or a Unix socket.
 *
 * libmicrohttpd runs a small pool of threads, each serving many connections
 * with epoll, so an idle or half-sent connection costs a socket and a few
 * kilobytes, never a thread; it is closed after CONTAINER_MCP_HTTP_TIMEOUT
 * seconds without progress, and connections are capped in all and per
 * client address.  Quick requests (initialize, tools/list, a quick tool) run
 * right in the pool thread: no thread hop on the hot path.  A tools/call runs
 * in a worker while its connection is suspended (http_call_* in http_run.c);
 * still running after a while, its reply becomes an event stream.  Request
 * streams are written into a log the session keeps for replay (http_log.c);
 * the pool thread writes a stream out and suspends the connection while it
 * has nothing to send (http_sse.c).
 *
 * Every request passes the Host and Origin checks before anything else, and
 * the bearer-token check before anything but a CORS preflight and a 404 for
 * /.well-known/, neither of which says anything (see begin); http_check.c
 * holds the checks themselves. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "transport/http_int.h"
#include "transport/http_listen.h"
#include "transport/http_token.h"
#include "util/cleanup.h"
#include "util/clock.h"
#include "util/log.h"

#define DEFAULT_MAX_SESSIONS 1024
#define DEFAULT_IDLE_SEC 3600
#define DEFAULT_TIMEOUT_SEC 30
#define DEFAULT_MAX_CONNS 4096
#define DEFAULT_MAX_CONNS_PER_IP 512
#define MAX_POOL_THREADS 32
#define STOP_CANCEL_MS 30000
#define DEFAULT_PER_CRED 512
#define DEFAULT_GRACE_SEC 30
#define DEFAULT_STREAM_AFTER_MS 1000
#define DEFAULT_KEEPALIVE_MS 15000
#define DEFAULT_REPLAY_SEC 300
/* At a stop, answers already made (the errors of abandoned calls) get this
 * long to be written before the daemons close their connections. */
#define STOP_DRAIN_MS 2000

/* ---- the checks every request passes ------------------------------------ */

static enum MHD_Result refuse_host(http_listener *l, struct MHD_Connection *c, const char *what, const char *v) {
        char buf[128], names[CM_HTTP_NAME_MAX + 64];
        const char *bind = l->policy.bind_name;
        if (l->policy.loopback_names)
                (void)snprintf(names, sizeof names, "localhost, 127.0.0.1 and [::1]");
        else
                (void)snprintf(names, sizeof names, strchr(bind, ':') ? "[%s], its address" : "%s, its address", bind);
        return http_error(c, MHD_HTTP_FORBIDDEN, MCP_INVALID_REQUEST,
                          "%s \"%s\" is not allowed: this server answers to %s only, which stops DNS-rebinding "
                          "attacks from web pages; if the name is yours, allow it with --allow-host NAME or "
                          "CONTAINER_MCP_ALLOWED_HOSTS",
                          what, http_clip(v, buf), names);
}

static enum MHD_Result refuse_token(http_listener *l, struct MHD_Connection *c) {
        struct MHD_Response *r = http_error_response(
                MCP_INVALID_REQUEST,
                "missing or wrong bearer token: send the header \"Authorization: Bearer <token>\" with %s",
                l->h->token_path && l->token == l->h->gen_token
                        ? "the token in the file the server's log names (its state dir's http-token)"
                        : "the token the server was given in CONTAINER_MCP_TOKEN");
        if (r &&
            MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"container-mcp\"") != MHD_YES) {
                MHD_destroy_response(r);
                r = NULL;
        }
        return http_queue(c, MHD_HTTP_UNAUTHORIZED, r);
}

/* Returns true when the request may go on; else a response is queued.
 * Host and Origin first: they stop DNS rebinding and foreign pages whatever
 * else the request is. */
static bool names_ok(http_listener *l, struct MHD_Connection *c, enum MHD_Result *ret) {
        const char *host = http_header(c, MHD_HTTP_HEADER_HOST);
        const char *origin = http_header(c, MHD_HTTP_HEADER_ORIGIN);
        if (l->check_host && !cm_http_host_ok(&l->policy, host))
                *ret = refuse_host(l, c, "Host", host);
        else if (origin && !cm_http_origin_ok(&l->policy, origin))
                *ret = refuse_host(l, c, "Origin", origin);
        else
                return true;
        return false;
}

static bool token_ok(http_listener *l, struct MHD_Connection *c, enum MHD_Result *ret) {
        const char *token = l->token;
        if (token && *token && !cm_http_bearer_ok(http_header(c, MHD_HTTP_HEADER_AUTHORIZATION), token)) {
                *ret = refuse_token(l, c);
                return false;
        }
        return true;
}

/* ---- cross-origin requests (CORS) ---------------------------------------- */

/* The listener of a connection, set when it was accepted. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
        (void)c;
        if (code == MHD_CONNECTION_NOTIFY_STARTED)
                *socket_context = cls;
}

/* Every response to a page of an origin the operator allowed (--allow-origin)
 * says so, or the browser hides it from the page; no other gets a CORS
 * header, so other pages read nothing.  No Allow-Credentials: the token goes
 * in Authorization, which the page must hold and send itself. */
void http_cors_headers(struct MHD_Connection *c, struct MHD_Response *resp) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        const http_listener *l = ci ? ci->socket_context : NULL;
        const char *origin;
        if (!l || !l->policy.origins || !l->policy.origins[0])
                return;
        (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Origin");
        origin = http_header(c, MHD_HTTP_HEADER_ORIGIN);
        if (!origin || !cm_http_origin_listed(l->policy.origins, origin) ||
            (l->check_host && !cm_http_host_ok(&l->policy, http_header(c, MHD_HTTP_HEADER_HOST))))
                return; /* a wrong Host is refused for every origin, and says so to none */
        (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_EXPOSE_HEADERS,
                                      "Mcp-Session-Id, MCP-Protocol-Version");
}

/* A preflight carries no credentials (browsers never send them there), so
 * it is answered before the token check, and says nothing but which methods
 * and headers a later, authenticated request may use. */
static enum MHD_Result preflight(http_listener *l, struct MHD_Connection *c, const char *origin) {
        const char *pna = http_header(c, "Access-Control-Request-Private-Network");
        struct MHD_Response *r;
        char buf[128];
        if (!cm_http_origin_listed(l->policy.origins, origin))
                return http_error(c, MHD_HTTP_FORBIDDEN, MCP_INVALID_REQUEST,
                                  "cross-origin requests from \"%s\" are not allowed: if that page is yours, allow "
                                  "its origin with --allow-origin ORIGIN or CONTAINER_MCP_ALLOWED_ORIGINS",
                                  http_clip(origin, buf));
        r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
        if (!r)
                return MHD_NO;
        (void)MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_METHODS, "GET, POST, DELETE, OPTIONS");
        (void)MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_HEADERS,
                                      "Authorization, Content-Type, Accept, Mcp-Session-Id, MCP-Protocol-Version, "
                                      "Last-Event-ID");
        (void)MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_MAX_AGE, "600");
        /* Chrome asks before a public page may reach a private address; the
         * operator allowed this origin, so the answer is yes. */
        if (pna && strcasecmp(pna, "true") == 0)
                (void)MHD_add_response_header(r, "Access-Control-Allow-Private-Network", "true");
        return http_queue(c, MHD_HTTP_NO_CONTENT, r);
}

/* Bodies over the cap are read and thrown away, then refused with 413: a
 * reply sent before the body is read makes the server close the connection
 * with unread data, which resets it and loses the reply.  Only a client that
 * waits for "100 Continue", or announces an absurd size, is refused at once. */
#define DRAIN_MAX ((uint64_t)256 << 20)

enum MHD_Result http_post_prepare(http_req *r, struct MHD_Connection *c) {
        const char *ct = http_header(c, MHD_HTTP_HEADER_CONTENT_TYPE);
        const char *cl = http_header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
        const char *expect = http_header(c, MHD_HTTP_HEADER_EXPECT);
        size_t max = r->l->h->max_msg;
        uint64_t n;
        char buf[128];
        if (!cm_http_is_json_type(ct))
                return http_error(c, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, MCP_INVALID_REQUEST,
                                  "Content-Type must be application/json, got \"%s\": the body is one JSON-RPC "
                                  "message",
                                  http_clip(ct, buf));
        if (!cl || !cm_http_parse_length(cl, &n))
                return MHD_YES; /* chunked: take_body watches the size */
        if (n > max && (expect || n > max + DRAIN_MAX))
                return http_too_big(c, r->l->h);
        if (n > max) {
                r->too_big = true;
                return MHD_YES;
        }
        r->cap = (size_t)n;
        r->body = xmalloc(r->cap + 1);
        return MHD_YES;
}

/* Body bytes as they arrive, never more than the cap held. */
static void take_body(http_req *r, const char *data, size_t n) {
        size_t max = r->l->h->max_msg;
        if (r->too_big)
                return;
        if (n > max - r->len) {
                r->too_big = true; /* answered with 413 once the rest is drained */
                free(r->body);
                r->body = NULL;
                r->len = r->cap = 0;
                return;
        }
        if (r->len + n > r->cap) {
                r->cap = r->cap * 2 > r->len + n ? r->cap * 2 : r->len + n + 4096;
                if (r->cap > max)
                        r->cap = max;
                r->body = xrealloc(r->body, r->cap + 1);
        }
        memcpy(r->body + r->len, data, n);
        r->len += n;
}

/* ---- the status page ------------------------------------------------------ */

static enum MHD_Result status_page(http_req *r, struct MHD_Connection *c, const char *method) {
        struct MHD_Response *resp;
        char *html;
        if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
                resp = http_error_response(MCP_INVALID_REQUEST,
                                           "%s / is not supported: / is a status page; MCP is at /mcp", method);
                if (resp)
                        (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
                return http_queue(c, MHD_HTTP_METHOD_NOT_ALLOWED, resp);
        }
        html = xasprintf("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>container-mcp</title></head>\n"
                         "<body><h1>container-mcp</h1>\n<p>Version %s. Sessions: %u (limit %u).</p>\n"
                         "<p>MCP endpoint: <code>/mcp</code> (<a href=\"https://modelcontextprotocol.io/"
                         "specification/2025-11-25/basic/transports#streamable-http\">Streamable HTTP</a>); "
                         "legacy HTTP+SSE: <code>/sse</code>.</p>\n</body></html>\n",
                         CM_VERSION, http_sessions_count(r->l->h->sessions), http_sessions_max(r->l->h->sessions));
        resp = MHD_create_response_from_buffer(strlen(html), html, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(html);
                return MHD_NO;
        }
        (void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
        return http_queue(c, MHD_HTTP_OK, resp);
}

/* GET /status: what `container-mcp daemon status` shows, as JSON: the
 * process, its age, its sessions, and what the layer above adds (the
 * sandboxes).  Behind the token like every route, on the Unix socket only;
 * it names no session id. */
static enum MHD_Result status_json(http_req *r, struct MHD_Connection *c, const char *method) {
        cm_http *h = r->l->h;
        cleanup_json json_t *doc = NULL;
        char *body;
        if (strcmp(method, "GET") != 0)
                return http_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, MCP_INVALID_REQUEST,
                                  "%.20s /status is not supported: GET it", method);
        doc = h->opts->status ? h->opts->status(h->opts->status_arg) : NULL;
        if (!doc)
                doc = json_object();
        (void)json_object_set_new(doc, "pid", json_integer((json_int_t)getpid()));
        (void)json_object_set_new(doc, "version", json_string(CM_VERSION));
        (void)json_object_set_new(doc, "uptimeSec", json_integer((json_int_t)((cm_now_ms() - h->started_ms) / 1000)));
        (void)json_object_set_new(doc, "sessions", json_integer((json_int_t)http_sessions_count(h->sessions)));
        (void)json_object_set_new(doc, "sessionLimit", json_integer((json_int_t)http_sessions_max(h->sessions)));
        if (h->opts->socket_path)
                (void)json_object_set_new(doc, "socket", json_string(h->opts->socket_path));
        body = json_dumps(doc, JSON_COMPACT);
        if (!body)
                return MHD_NO;
        return http_queue(c, MHD_HTTP_OK, http_json_response(body, strlen(body)));
}

/* ---- libmicrohttpd callbacks ------------------------------------------------ */

static enum MHD_Result begin(http_req *r, struct MHD_Connection *c, const char *url, const char *method) {
        enum MHD_Result ret;
        char buf[128];
        if (atomic_load(&r->l->h->stopping))
                return http_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, HTTP_UNAVAILABLE,
                                  "the server is shutting down; reconnect once it is back");
        if (!names_ok(r->l, c, &ret))
                return ret;
        if (strcmp(method, "OPTIONS") == 0 && http_header(c, MHD_HTTP_HEADER_ORIGIN))
                return preflight(r->l, c, http_header(c, MHD_HTTP_HEADER_ORIGIN));
        /* Nothing is served under /.well-known/.  A 404 there (not 401) is
         * how a client learns this server offers no OAuth, and stops
         * looking for an authorization server; it tells nobody anything. */
        if (strncmp(url, "/.well-known/", 13) == 0)
                return http_error(c, MHD_HTTP_NOT_FOUND, MCP_INVALID_REQUEST,
                                  "no such path \"%s\": this server offers no OAuth; send its bearer token in the "
                                  "header \"Authorization: Bearer <token>\"",
                                  http_clip(url, buf));
        if (!token_ok(r->l, c, &ret))
                return ret;
        if (strcmp(url, "/mcp") == 0) {
                r->route = ROUTE_MCP;
                return http_mcp_begin(r, c, method);
        }
        if (strcmp(url, "/sse") == 0 || strcmp(url, "/messages") == 0) {
                r->route = url[1] == 's' ? ROUTE_SSE : ROUTE_MESSAGES;
                return http_legacy_begin(r, c, method);
        }
        if (strcmp(url, "/") == 0)
                return status_page(r, c, method);
        /* The Unix socket only: it is 0600, so its peers are the operator's
         * own processes.  Token holders on TCP are clients, and the list of
         * every session's containers is not theirs to read. */
        if (strcmp(url, "/status") == 0 && !r->l->check_host)
                return status_json(r, c, method);
        return http_error(c, MHD_HTTP_NOT_FOUND, MCP_INVALID_REQUEST,
                          "no such path \"%s\": the MCP endpoint is /mcp (Streamable HTTP); /sse and /messages "
                          "serve the legacy HTTP+SSE transport",
                          http_clip(url, buf));
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
        http_req *r = *con_cls;
        if (r && r->call) /* resumed: the worker is done (or the server stops) */
                return http_call_reply(r->call, c);
        if (!r) {
                r = xcalloc(1, sizeof *r);
                r->l = cls;
                *con_cls = r;
                return begin(r, c, url, method);
        }
        if (*upload_size > 0) {
                take_body(r, upload, *upload_size);
                *upload_size = 0;
                return MHD_YES;
        }
        /* Only POSTs that passed http_post_prepare get here. */
        return r->route == ROUTE_MCP ? http_mcp_post(r, c) : http_legacy_post(r, c);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
        http_req *r = *con_cls;
        if (!r)
                return;
        if (r->deferred)
                http_legacy_completed(r);
        if (r->call)
                http_call_end(r->call);
        if (r->answering)
                atomic_fetch_sub(&r->l->h->answering, 1);
        free(r->body);
        http_sess_put(r->e);
        free(r);
        *con_cls = NULL;
}

__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap) {
        char line[512];
        size_t n;
        (void)vsnprintf(line, sizeof line, fmt, ap);
        n = strlen(line);
        while (n > 0 && line[n - 1] == '\n')
                line[--n] = 0;
        log_debug("libmicrohttpd: %s", line);
}

void http_req_answering(http_req *r) {
        if (!r->answering)
                atomic_fetch_add(&r->l->h->answering, 1);
        r->answering = true;
}

/* ---- listeners ---------------------------------------------------------------- */

/* Pool threads (CONTAINER_MCP_HTTP_THREADS, else four per core, at least
 * 8), at most MAX_POOL_THREADS.  The connection cap is split among them:
 * a thread whose share is full accepts nothing, so with several threads
 * the daemon may hold a few less than the cap (never more).  Their
 * count does not grow with connections.  A connection stays on the thread
 * that accepted it, picked at random; with few threads, busy keep-alive
 * clients often share one while another idles (4 clients on 4 threads
 * measured 26,000-46,000 calls/s on 2 cores; on 8, 28,000-40,000 and
 * steadier).  An idle pool thread costs a stack and an epoll set. */
static unsigned pool_size(unsigned asked) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        if (asked)
                return asked > MAX_POOL_THREADS ? MAX_POOL_THREADS : asked;
        n *= 4;
        return n < 8 ? 8 : n > MAX_POOL_THREADS ? MAX_POOL_THREADS : (unsigned)n;
}

static int start_daemon(http_listener *l, int fd, bool tcp, const char *what, cm_err *err) {
        const cm_http_opts *o = l->h->opts;
        unsigned flags = MHD_USE_AUTO | MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
        unsigned timeout = o->conn_timeout_sec ? o->conn_timeout_sec : DEFAULT_TIMEOUT_SEC;
        unsigned max = o->max_conns ? o->max_conns : DEFAULT_MAX_CONNS;
        /* A Unix socket has no client address: only the global cap applies. */
        unsigned per_ip = !tcp ? 0 : o->max_conns_per_ip ? o->max_conns_per_ip : DEFAULT_MAX_CONNS_PER_IP;
        l->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, l, MHD_OPTION_LISTEN_SOCKET, fd,
                                     MHD_OPTION_NOTIFY_COMPLETED, on_completed, l, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
                                     NULL, MHD_OPTION_NOTIFY_CONNECTION, on_connection, l, MHD_OPTION_THREAD_POOL_SIZE,
                                     pool_size(o->threads), MHD_OPTION_CONNECTION_TIMEOUT, timeout, MHD_OPTION_CONNECTION_LIMIT,
                                     max, MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip, MHD_OPTION_END);
        if (!l->daemon) {
                (void)close(fd);
                return cm_err_set(err, EIO,
                                  "%s: libmicrohttpd would not start (run with --log-level debug for "
                                  "its reason)",
                                  what);
        }
        return 0;
}

typedef struct listeners {
        http_listener tcp, unix_;
        char bind_name[CM_HTTP_NAME_MAX];
        struct stat sock_st;
} listeners;

/* Who may use the TCP listener: the token of CONTAINER_MCP_TOKEN; else, on
 * loopback only, the token of the state dir's file (created on first use) or
 * nobody's with --no-auth.  Other addresses are reachable from other machines:
 * they take a token the operator chose and handed out, never none. */
static int tcp_auth(cm_http *h, listeners *ls, const http_bind *b, cm_err *err) {
        const cm_http_opts *o = h->opts;
        bool created = false;
        if (o->token && *o->token) {
                if (o->no_auth)
                        return cm_err_set(err, EINVAL,
                                          "--no-auth contradicts CONTAINER_MCP_TOKEN: unset the token to serve "
                                          "without one, or drop --no-auth");
                ls->tcp.token = o->token;
                return 0;
        }
        if (!b->loopback)
                return cm_err_set(err, EACCES,
                                  "--http %s refused: %s is not a loopback address, so other machines can connect, "
                                  "and HTTP there needs a token%s; set CONTAINER_MCP_TOKEN to a secret (e.g. "
                                  "CONTAINER_MCP_TOKEN=$(openssl rand -hex 32)) and give it to the clients, or bind "
                                  "127.0.0.1",
                                  o->listen, b->host[0] ? b->host : "the wildcard address",
                                  o->no_auth ? " (--no-auth is for loopback only)" : "");
        if (o->no_auth)
                return 0;
        if (!o->state_dir)
                return cm_err_set(err, EINVAL, "HTTP token: no state dir to keep it in; set CONTAINER_MCP_TOKEN");
        if (cm_http_token_load(o->state_dir, &h->gen_token, &h->token_path, &created, err) < 0)
                return -1;
        ls->tcp.token = h->gen_token;
        if (created)
                log_info("created the HTTP bearer token in %s (mode 0600, kept across restarts)", h->token_path);
        return 0;
}

/* How a client authenticates, once the URL is known. */
static void log_auth(cm_http *h, const http_listener *l, const char *url) {
        if (!l->token)
                log_warn("--no-auth: HTTP at %s takes no token, so every local user (and every web page that "
                         "gets past the Host check) can drive this server with its rights (uid %u); use the "
                         "default token or the Unix socket (--socket) instead",
                         url, (unsigned)geteuid());
        else if (l->token == h->gen_token)
                log_info("HTTP needs \"Authorization: Bearer $(cat %s)\"; for example: claude mcp add "
                         "--transport http container-mcp %s --header \"Authorization: Bearer $(cat %s)\"",
                         h->token_path, url, h->token_path);
        else
                log_info("HTTP needs \"Authorization: Bearer $CONTAINER_MCP_TOKEN\"");
}

static int open_tcp(cm_http *h, listeners *ls, cm_err *err) {
        http_bind b;
        char url[CM_HTTP_NAME_MAX + 32];
        if (http_listen_tcp(h->opts->listen, &b, err) < 0)
                return -1;
        memcpy(ls->bind_name, b.host, sizeof ls->bind_name);
        ls->tcp = (http_listener){.h = h, .check_host = true};
        ls->tcp.policy = (cm_http_hostpolicy){b.loopback || b.wildcard, ls->bind_name, h->opts->allowed_hosts,
                                              h->opts->allowed_origins};
        if (tcp_auth(h, ls, &b, err) < 0) {
                (void)close(b.fd);
                return -1;
        }
        if (start_daemon(&ls->tcp, b.fd, true, h->opts->listen, err) < 0)
                return -1;
        (void)snprintf(url, sizeof url, strchr(b.host, ':') ? "http://[%s]:%u/mcp" : "http://%s:%u/mcp", b.host,
                       b.port);
        log_auth(h, &ls->tcp, url); /* first: who waits for "listening on" finds it written */
        log_info("listening on %s", url);
        return 0;
}

static int open_unix(cm_http *h, listeners *ls, cm_err *err) {
        const char *path = h->opts->socket_path;
        int fd;
        if (http_listen_unix(path, &fd, &ls->sock_st, err) < 0)
                return -1;
        /* No Host check (nothing to compare it with), but a browser page can
         * still be made to talk to a socket through a proxy: check Origin. */
        ls->unix_ = (http_listener){.h = h, .token = h->opts->token && *h->opts->token ? h->opts->token : NULL};
        ls->unix_.policy = (cm_http_hostpolicy){true, NULL, h->opts->allowed_hosts, h->opts->allowed_origins};
        if (start_daemon(&ls->unix_, fd, false, path, err) < 0) {
                http_unlink_unix(path, &ls->sock_st);
                return -1;
        }
        log_info("listening on unix:%s", path);
        return 0;
}

/* ---- serve and stop ------------------------------------------------------------- */

static int wait_for_stop(cm_http *h, cm_err *err) {
        struct pollfd p = {cm_stop_fd(), POLLIN, 0};
        while (!cm_stop_requested()) {
                int n = poll(&p, 1, 1000);
                if (n < 0 && errno != EINTR)
                        return cm_err_sys(err, errno, "http: poll");
                if (n > 0)
                        break;
                http_sessions_expire(h->sessions);
        }
        return 0;
}

static bool work_left(cm_http *h) {
        bool left;
        (void)pthread_mutex_lock(&h->jobs_mu);
        left = h->jobs > 0 || atomic_load(&h->handling) > 0;
        (void)pthread_mutex_unlock(&h->jobs_mu);
        return left;
}

/* Cancel until nothing runs (a call may start between two rounds), end
 * every session's stream, resume every suspended connection (streams and
 * calls; libmicrohttpd must not be stopped with one), then stop the daemons,
 * which joins their threads. */
static void stop_all(cm_http *h, listeners *ls) {
        struct timespec tick = {0, 10 * 1000 * 1000};
        atomic_store(&h->stopping, true);
        for (int waited = 0; work_left(h) && waited < STOP_CANCEL_MS; waited += 10) {
                http_sessions_cancel_all(h->sessions);
                (void)nanosleep(&tick, NULL);
        }
        http_sessions_drop_all(h->sessions);
        cm_sse_stop_all();
        http_calls_resume_all(h);
        /* What the stop answered (each abandoned call its error) must reach
         * the client: libmicrohttpd drops unwritten replies when it stops. */
        for (int waited = 0; atomic_load(&h->answering) > 0 && waited < STOP_DRAIN_MS; waited += 10)
                (void)nanosleep(&tick, NULL);
        if (ls->tcp.daemon)
                MHD_stop_daemon(ls->tcp.daemon);
        if (ls->unix_.daemon) {
                MHD_stop_daemon(ls->unix_.daemon);
                http_unlink_unix(h->opts->socket_path, &ls->sock_st);
        }
        (void)pthread_mutex_lock(&h->jobs_mu);
        while (h->jobs > 0)
                (void)pthread_cond_wait(&h->jobs_cv, &h->jobs_mu);
        (void)pthread_mutex_unlock(&h->jobs_mu);
}

/* Each allowed origin must be one (a typo would otherwise allow nothing,
 * silently); "*" is refused: every page of the web is never what is meant. */
static int check_origins(const char *const *list, cm_err *err) {
        char canon[CM_HTTP_NAME_MAX + 16];
        for (size_t i = 0; list && list[i]; i++)
                if (!cm_http_origin_canon(list[i], canon, sizeof canon))
                        return cm_err_set(err, EINVAL,
                                          "--allow-origin/CONTAINER_MCP_ALLOWED_ORIGINS: \"%.100s\" is not an origin; "
                                          "give each as scheme://host[:port] with no path, e.g. "
                                          "http://localhost:6274",
                                          list[i]);
        return 0;
}

int cm_http_serve(mcp_server *srv, const cm_http_opts *opts, cm_err *err) {
        cm_http h = {.srv = srv, .opts = opts, .max_msg = mcp_server_max_message(srv), .started_ms = cm_now_ms()};
        listeners ls = {0};
        http_sess_limits lim;
        int64_t ka;
        int ret = 0, tick;

        if (!opts->listen && !opts->socket_path)
                return cm_err_set(err, EINVAL,
                                  "http: nothing to listen on; give --http [HOST:]PORT and/or --socket "
                                  "PATH");
        if (check_origins(opts->allowed_origins, err) < 0 || cm_mhd_load(err) < 0)
                return -1;
        h.stream_after_ms = opts->stream_after_ms ? opts->stream_after_ms : DEFAULT_STREAM_AFTER_MS;
        ka = opts->keepalive_ms ? opts->keepalive_ms : DEFAULT_KEEPALIVE_MS;
        /* The watcher's tick times keep-alives and the switch of long calls
         * to streams: a quarter of the shorter, at most 1 s. */
        tick = (int)((ka < h.stream_after_ms ? ka : h.stream_after_ms) / 4);
        tick = tick < 5 ? 5 : tick > 1000 ? 1000 : tick;
        (void)pthread_mutex_init(&h.jobs_mu, NULL);
        (void)pthread_cond_init(&h.jobs_cv, NULL);
        if ((ret = cm_sse_start(ka, tick, http_calls_tick, &h)) < 0) {
                (void)pthread_cond_destroy(&h.jobs_cv);
                (void)pthread_mutex_destroy(&h.jobs_mu);
                return cm_err_sys(err, -ret, "http: starting the stream watcher");
        }
        lim.max = opts->max_sessions ? opts->max_sessions : DEFAULT_MAX_SESSIONS;
        lim.per_cred = opts->max_sessions_per_cred ? opts->max_sessions_per_cred : DEFAULT_PER_CRED;
        lim.idle_sec = opts->session_idle_sec ? opts->session_idle_sec : DEFAULT_IDLE_SEC;
        lim.grace_sec = opts->init_grace_sec ? opts->init_grace_sec : DEFAULT_GRACE_SEC;
        lim.replay_sec = opts->replay_sec ? opts->replay_sec : DEFAULT_REPLAY_SEC;
        h.sessions = http_sessions_new(&lim);
        if ((opts->listen && open_tcp(&h, &ls, err) < 0) || (opts->socket_path && open_unix(&h, &ls, err) < 0))
                ret = -1;
        else
                ret = wait_for_stop(&h, err);
        stop_all(&h, &ls);
        http_sessions_free(h.sessions);
        free(h.gen_token);
        free(h.token_path);
        (void)pthread_cond_destroy(&h.jobs_cv);
        (void)pthread_mutex_destroy(&h.jobs_mu);
        return ret;
}
