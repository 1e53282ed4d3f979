/* Transports: how MCP messages travel.  Each one takes bytes from a client,
 * turns them into messages for the MCP layer (mcp.h) and carries the replies
 * back.  They block until the client goes away or a stop is requested
 * (cm_request_stop, from the signal handler). */
#ifndef CM_TRANSPORT_H
#define CM_TRANSPORT_H

#include <stdbool.h>

#include "mcp/mcp.h"
#include "util/json.h"
#include "util/err.h"

typedef struct cm_http_opts {
        const char *listen;       /* "[HOST:]PORT" for TCP, or NULL */
        const char *socket_path;  /* Unix socket path, or NULL */
        const char *token;        /* bearer token required when set */
        const char *const *allowed_hosts; /* extra Host/Origin names, NULL-terminated, or NULL */
        unsigned max_sessions;    /* 0: default (1024) */
        unsigned session_idle_sec;/* idle sessions are dropped after this; 0: default (3600) */
        const char *state_dir;    /* where a generated token is kept (TCP without `token`) */
        bool no_auth;             /* --no-auth: TCP on loopback without a token */
        unsigned conn_timeout_sec;/* idle or stalled connections are closed after this; 0: 30 */
        unsigned max_conns;       /* connections at once, per listener; 0: 4096 */
        unsigned max_conns_per_ip;/* TCP connections at once from one address; 0: 512 */
        unsigned threads;         /* pool threads per listener; 0: four per core, at least 8 */
        const char *const *allowed_origins; /* CORS: origins whose pages may call, NULL-terminated, or NULL */
        unsigned max_sessions_per_cred; /* sessions of one token / peer uid; 0: default (512) */
        unsigned init_grace_sec;  /* a session never used after initialize is dropped after this; 0: 30 */
        unsigned stream_after_ms; /* a call still running then is answered as an event stream; 0: 1000 */
        unsigned keepalive_ms;    /* a quiet event stream gets a comment this often; 0: 15000 */
        unsigned replay_sec;      /* a request stream's events are kept this long after it ends; 0: 300 */
        /* GET /status adds what this returns (a JSON object, taken over) to
         * the transport's own figures; NULL: the transport's alone. */
        json_t *(*status)(void *arg);
        void *status_arg;
} cm_http_opts;

/* MCP over newline-delimited JSON on in_fd/out_fd.  Returns 0 at EOF or on a
 * stop request, after the calls still running have finished or been
 * cancelled. */
int cm_stdio_serve(mcp_server *srv, int in_fd, int out_fd, cm_err *err);

/* Streamable HTTP at /mcp and legacy HTTP+SSE at /sse + /messages, on TCP
 * and/or a Unix socket (mode 0600).  Returns 0 on a stop request. */
int cm_http_serve(mcp_server *srv, const cm_http_opts *opts, cm_err *err);

/* Stop requests: async-signal-safe, wakes every transport. */
void cm_request_stop(void);
bool cm_stop_requested(void);
/* Readable once a stop is requested; for poll() loops.  Never closed. */
int cm_stop_fd(void);

#endif
