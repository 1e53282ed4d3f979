/* Server-Sent Event streams for the HTTP transport.
 *
 * A stream is a queue of encoded events between the threads that produce MCP
 * messages (tool calls, the session's notifications) and the libmicrohttpd
 * thread that writes them.  That thread serves many connections, so it never
 * waits on a stream: with nothing to write, the content reader suspends the
 * connection (MHD_suspend_connection) and returns 0, and the next event, the
 * end of the stream, a hang-up or a stop resumes it.  One watcher thread for
 * the whole process looks after the suspended streams: their sockets, for
 * hang-ups (libmicrohttpd does not watch a suspended connection), and their
 * clocks: after 15 s without a write it queues a ": keepalive" comment, so a
 * dead peer is found and proxies keep the stream open.  A suspended
 * connection does not count against libmicrohttpd's idle timeout, so a
 * stream that is legitimately open is never closed by it.
 *
 * The mcp_sink of a stream sends "message" events and returns < 0 once the
 * peer is gone, which the MCP layer takes as cancellation of the call. */
#ifndef CM_HTTP_SSE_H
#define CM_HTTP_SSE_H

#include <stddef.h>
#include <stdint.h>

#include "mcp/mcp.h"

struct MHD_Response;
struct MHD_Connection;

typedef struct cm_sse cm_sse;

/* A growable byte buffer. */
typedef struct cm_sbuf {
        char *p;
        size_t len, cap;
} cm_sbuf;
void cm_sbuf_add(cm_sbuf *b, const char *s, size_t n);

/* The first character of an event id says which kind of stream carried it,
 * so that a GET with Last-Event-ID can tell the stream of a request (which
 * this server cannot resume: it keeps no events) from a session's own. */
enum cm_sse_kind { CM_SSE_REQUEST = 'r', CM_SSE_SESSION = 's', CM_SSE_NO_ID = 0 };

/* Append one event, "id: KN\nevent: EVENT\ndata: DATA\n\n" (K the kind, N
 * unique in the process); a line break inside DATA starts another data:
 * line. */
void cm_sse_encode(cm_sbuf *b, enum cm_sse_kind kind, const char *event, const char *data, size_t len);
/* The same with the id given (NULL: no id line) and `event` NULL for none. */
void cm_sse_encode_id(cm_sbuf *b, const char *id, const char *event, const char *data, size_t len);

/* A new stream with one reference, for the response to `conn` (whose daemon
 * allows suspension).  `sock_fd` is the client's socket, watched for
 * hang-ups while the connection is suspended (-1: not watched). */
cm_sse *cm_sse_new(struct MHD_Connection *conn, int sock_fd, enum cm_sse_kind kind);
void cm_sse_ref(cm_sse *q);
void cm_sse_unref(cm_sse *q);

/* The sink of the stream ("event: message"); ref/unref act on the stream. */
mcp_sink *cm_sse_sink(cm_sse *q);

/* Queue one event with a fresh id.  Returns 0, or < 0 when the stream is
 * finished, the peer is gone or the client stopped reading. */
int cm_sse_push(cm_sse *q, const char *event, const char *data, size_t len);

/* Queue bytes already encoded as events.  Same returns as cm_sse_push. */
int cm_sse_push_raw(cm_sse *q, const char *ev, size_t len);

/* End the stream once the events queued so far are written.  Idempotent. */
void cm_sse_finish(cm_sse *q);

/* Call fn(q, arg) once, from the connection thread, when the HTTP response
 * that carries the stream is released (stream over or peer gone).  Set
 * before cm_sse_response(). */
typedef void (*cm_sse_close_fn)(cm_sse *q, void *arg);
void cm_sse_on_close(cm_sse *q, cm_sse_close_fn fn, void *arg);

/* Start the watcher thread (once per process) and allow suspensions again
 * after a cm_sse_stop_all.  A quiet stream gets a keep-alive comment after
 * `keepalive_ms`; the watcher wakes every `tick_ms` and then calls fn(arg)
 * (the transport's timer; NULL: none) until cm_sse_stop_all.  Returns 0 or
 * -errno. */
int cm_sse_start(int64_t keepalive_ms, int tick_ms, void (*fn)(void *), void *arg);

/* The server stops: end every stream, resume every suspended connection
 * (libmicrohttpd must not be stopped with one suspended) and suspend none
 * from now on.  Call before MHD_stop_daemon. */
void cm_sse_stop_all(void);

/* A libmicrohttpd response that carries the stream (it takes a reference).
 * On allocation failure it returns NULL after running the on_close callback,
 * so a caller cleans up the same way on both paths. */
struct MHD_Response *cm_sse_response(cm_sse *q);

#endif
