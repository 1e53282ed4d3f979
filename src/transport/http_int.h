/* Shared between the files of the HTTP transport only:
 *   http.c         listeners, the request checks, routing, the serve loop
 *   http_mcp.c     Streamable HTTP at /mcp (POST, GET, DELETE)
 *   http_legacy.c  the 2024-11-05 HTTP+SSE transport at /sse and /messages
 *   http_run.c     replies, the collecting sink, worker threads
 *   http_sess.c    the session table;  http_sse.c  event streams
 *   http_listen.c  sockets;            http_check.c  pure header checks */
#ifndef CM_HTTP_INT_H
#define CM_HTTP_INT_H

#include <jansson.h>
#include <microhttpd.h>
#include "util/lazy.h" /* MHD_* calls go through the table loaded on first use */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "transport/http_check.h"
#include "transport/http_sess.h"
#include "transport/http_sse.h"
#include "transport/transport.h"
#include "util/clock.h"

/* JSON-RPC error codes of the transport itself (the server-error range):
 * the server cannot take the request now (shutting down, full), and the
 * session is not known (what the reference SDKs answer with 404). */
#define HTTP_UNAVAILABLE (-32000)
#define HTTP_NO_SESSION (-32001)

/* One cm_http_serve() call. */
typedef struct cm_http {
        mcp_server *srv;
        const cm_http_opts *opts;
        http_sessions *sessions;
        size_t max_msg;
        atomic_bool stopping;
        atomic_int handling; /* threads inside mcp_session_handle */
        pthread_mutex_t jobs_mu;
        pthread_cond_t jobs_cv;
        unsigned jobs;           /* worker threads alive */
        struct http_call *calls; /* suspended calls, under jobs_mu */
        char *gen_token;         /* the token of the state dir's file, when TCP uses it */
        char *token_path;        /* that file */
        int64_t stream_after_ms; /* a call still running then is answered with an event stream */
        atomic_int answering;    /* requests whose answer is a call or a stream, not yet completed */
        int64_t started_ms;      /* cm_now_ms() at start: /status's uptime */
} cm_http;

/* One listening socket and its daemon. */
typedef struct http_listener {
        cm_http *h;
        struct MHD_Daemon *daemon;
        bool check_host;   /* TCP only: a Unix socket has no Host to trust */
        const char *token; /* the bearer token required here, or NULL */
        cm_http_hostpolicy policy;
} http_listener;

enum http_route { ROUTE_STATUS, ROUTE_MCP, ROUTE_SSE, ROUTE_MESSAGES };

/* The state of one request, from its headers to its completion. */
typedef struct http_req {
        http_listener *l;
        enum http_route route;
        char *body;
        size_t len, cap;
        bool too_big;
        bool answering;         /* counted in h->answering */
        http_sess *e;           /* busy until the request completes */
        json_t *deferred;       /* legacy: the message to run once the 202 is sent */
        struct http_call *call; /* a call run by a worker while the connection is suspended */
} http_req;

/* ---- http_run.c: replies ---- */

/* Queue `resp` (may be NULL: allocation failed) and drop our reference. */
enum MHD_Result http_queue(struct MHD_Connection *c, unsigned status, struct MHD_Response *resp);
/* http.c: the CORS headers of a response to a page of an allowed origin;
 * http_queue adds them to every response. */
void http_cors_headers(struct MHD_Connection *c, struct MHD_Response *resp);
/* A JSON-RPC error body with a null id: {"jsonrpc":"2.0","id":null,"error":...}. */
__attribute__((format(printf, 2, 3))) struct MHD_Response *http_error_response(int code, const char *fmt, ...);
__attribute__((format(printf, 4, 5))) enum MHD_Result http_error(struct MHD_Connection *c, unsigned status, int code,
                                                                 const char *fmt, ...);
/* A JSON body (taken over, freed by libmicrohttpd). */
struct MHD_Response *http_json_response(char *body, size_t len);
enum MHD_Result http_empty(struct MHD_Connection *c, unsigned status);
/* The request header `name`, or NULL. */
const char *http_header(struct MHD_Connection *c, const char *name);
/* The client's socket, or -1. */
int http_conn_fd(struct MHD_Connection *c);
/* A header value fit to quote in a message: printable ASCII, at most ~100
 * characters, "(none)" for NULL. */
const char *http_clip(const char *v, char buf[static 128]);
/* The credential a new session counts against: "token" on TCP, the peer's
 * uid on the Unix socket. */
const char *http_cred_key(http_req *r, struct MHD_Connection *c, char buf[static 48]);
/* 503: the session table (or the credential's share) is full; what to do. */
enum MHD_Result http_sessions_full(struct MHD_Connection *c, cm_http *h, enum http_sess_full full,
                                   const char *cred);
/* 413 with the cap and how to raise it. */
enum MHD_Result http_too_big(struct MHD_Connection *c, cm_http *h);

/* This request's answer is a call's or a stream's: a stop waits (a while)
 * for it to go out before stopping the daemons. */
void http_req_answering(http_req *r);

/* ---- http_run.c: running messages ---- */

/* A sink that gathers every message of one exchange run in the connection
 * thread.  Its reply is one JSON body when only responses came, else a
 * complete event stream (progress and log messages, then the response) so
 * that the notifications of a request reach the client too. */
typedef struct http_collect http_collect;
http_collect *http_collect_new(void);
mcp_sink *http_collect_sink(http_collect *k);
/* The body, NULL when nothing came; *ret_events says it is an event stream.
 * Ends the collection (later sends are refused) and frees k. */
char *http_collect_end(http_collect *k, size_t *ret_len, bool *ret_events);
/* The same as a response with the right Content-Type; NULL when nothing
 * came (or out of memory). */
struct MHD_Response *http_collect_response(http_collect *k);
/* End a collection whose messages are not wanted. */
void http_collect_drop(http_collect *k);

/* mcp_session_handle, counted so a shutdown can cancel what runs.  Returns
 * false (and handles nothing) once a stop began. */
bool http_handle(cm_http *h, http_sess *e, json_t *msg, mcp_sink *out);
/* Handle `msg` in a new thread, replies to the log `g` (finished after, a
 * request the server gives up answered with an error), or else to `q`
 * (when `finish`, ended after).  Takes over `msg` (also on failure): its
 * reference count is then touched by one thread only.  Returns 0 or -errno. */
int http_spawn(cm_http *h, http_sess *e, json_t *msg, cm_sse *q, http_log *g, bool finish);
/* Answer `c` with the event stream of log `g`, from the event after seq
 * `after` (-1: all of it). */
enum MHD_Result http_stream_log(http_sess *e, http_log *g, int64_t after, struct MHD_Connection *c);

/* A request whose reply is one JSON body but that may take long (a
 * tools/call): a worker runs it while its connection is suspended, so the
 * thread that serves the connection (and many others) never waits on a tool.
 * The worker resumes the connection when done; libmicrohttpd then calls the
 * request handler again, which sends the reply with http_call_reply. */
typedef struct http_call http_call;
/* Suspend `c` and run `msg` (taken over) in a worker, its messages
 * collected into `k` (taken over); the reply gets `status`.  NULL when the
 * server is stopping (nothing suspended; answer 503).  A worker that cannot
 * start leaves a call that answers 503. */
http_call *http_call_start(cm_http *h, http_sess *e, json_t *msg, http_collect *k, unsigned status,
                           struct MHD_Connection *c);
/* The reply, once the connection was resumed. */
enum MHD_Result http_call_reply(http_call *call, struct MHD_Connection *c);
/* The request is over (its connection closed or answered). */
void http_call_end(http_call *call);
/* The clock (called by the stream watcher every tick): resume the calls
 * running for longer than h->stream_after_ms, whose reply then becomes an
 * event stream, so the client sees headers and keep-alives long before its
 * own timeout (Node's fetch gives up after 300 s without headers). */
void http_calls_tick(void *h);
/* Resume the connection of every call still running (the server stops;
 * libmicrohttpd must not be stopped with a suspended connection): they are
 * answered 503 and their workers' results dropped. */
void http_calls_resume_all(cm_http *h);

/* ---- http_mcp.c and http_legacy.c ---- */

/* Called once the headers are in and passed the checks.  Either queue a
 * response, or return MHD_YES to receive the body. */
enum MHD_Result http_mcp_begin(http_req *r, struct MHD_Connection *c, const char *method);
enum MHD_Result http_mcp_post(http_req *r, struct MHD_Connection *c);
enum MHD_Result http_legacy_begin(http_req *r, struct MHD_Connection *c, const char *method);
enum MHD_Result http_legacy_post(http_req *r, struct MHD_Connection *c);
/* After the 202 of a legacy POST went out: run its message. */
void http_legacy_completed(http_req *r);

/* Check Content-Type and Content-Length of a POST: queue 415 or 413, or get
 * ready for the body. */
enum MHD_Result http_post_prepare(http_req *r, struct MHD_Connection *c);

#endif
