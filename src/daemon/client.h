/* A small HTTP/1.1 client over a Unix socket: what `container-mcp proxy`,
 * `daemon status` and the CLI twins speak to the daemon with.  It knows
 * exactly what our own server sends (Content-Length or chunked bodies, JSON
 * or text/event-stream), keeps a connection for the next request, and hands
 * each JSON-RPC message of a response (the JSON body, or each SSE event's
 * data) to a callback as it arrives.
 *
 * Our own code rather than libcurl: a proxy runs beside every agent, and
 * this keeps it at a few hundred kilobytes with no TLS stack mapped, and
 * adds no copy or thread to each call. */
#ifndef CM_DAEMON_CLIENT_H
#define CM_DAEMON_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

typedef struct cm_uconn {
        int fd; /* -1: not connected */
        bool reused; /* has carried a response already */
        char *buf;
        size_t off, len, cap;
} cm_uconn;

#define CM_UCONN_INIT {.fd = -1}

/* Connect to the socket at `path`.  -errno (ENOENT, ECONNREFUSED: nobody
 * listens) with err set. */
int cm_uconn_open(cm_uconn *c, const char *path, cm_err *err);
void cm_uconn_close(cm_uconn *c);

typedef struct cm_ureq {
        const char *method;  /* GET, POST, DELETE */
        const char *path;    /* /mcp, /status */
        const char *session; /* Mcp-Session-Id, or NULL */
        const char *version; /* MCP-Protocol-Version, or NULL */
        const char *token;   /* Authorization: Bearer, or NULL */
        const char *extra;   /* one more "Name: value" header, or NULL */
        const char *accept;  /* NULL: application/json, text/event-stream */
        const char *body;
        size_t len;
} cm_ureq;

typedef struct cm_uresp {
        int status;
        char session[160]; /* Mcp-Session-Id of the response, or "" */
        bool events;       /* the body was an event stream */
} cm_uresp;

/* One message of the response: NUL-terminated, `len` bytes, the callee's to
 * modify.  A negative return stops reading (the connection is closed). */
typedef int (*cm_umsg_fn)(void *arg, const cm_uresp *resp, char *msg, size_t len);

/* Send `q` and read the whole response, handing `fn` each message.  On a
 * kept connection that the server had closed (nothing at all came back), the
 * request is sent once more on a new one, which is safe: the server never
 * saw it.  Returns 0, or -errno with err set (connection lost, a response
 * this client cannot read). */
int cm_uhttp(cm_uconn *c, const char *path, const cm_ureq *q, cm_umsg_fn fn, void *arg, cm_uresp *ret,
             cm_err *err);

#endif
