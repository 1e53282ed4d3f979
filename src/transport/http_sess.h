/* The HTTP transport's session table: Mcp-Session-Id (or legacy sessionId)
 * to MCP session, with the limits a shared listener needs (a maximum count,
 * an idle timeout) and the one server-to-client stream a session may have
 * (the GET /mcp stream, or the legacy /sse stream).
 *
 * An entry is reference-counted; the table holds one reference while the id
 * is known.  http_sessions_get() also marks the entry busy until
 * http_sess_put(), and only entries that are not busy can expire. */
#ifndef CM_HTTP_SESS_H
#define CM_HTTP_SESS_H

#include <stdbool.h>

#include "mcp/mcp.h"
#include "transport/http_sse.h"

typedef struct http_sess http_sess;
typedef struct http_sessions http_sessions;
typedef struct http_log http_log;

typedef struct http_sess_limits {
        unsigned max;        /* sessions at once */
        unsigned per_cred;   /* sessions at once of one credential (a token, a peer uid) */
        unsigned idle_sec;   /* an idle session is dropped after this */
        unsigned grace_sec;  /* one that never got past initialize, after this */
        unsigned replay_sec; /* a request stream's events are kept this long after it ends */
} http_sess_limits;

http_sessions *http_sessions_new(const http_sess_limits *lim);
/* Forget every session: calls cancelled, streams ended (shutdown). */
void http_sessions_drop_all(http_sessions *t);
/* Drops what is left and frees the table.  Call once no request runs. */
void http_sessions_free(http_sessions *t);

/* A new session of credential `cred` (a short key), known to the table and
 * busy for the caller; NULL when the table, or that credential's share of
 * it, is full (which one in *ret_full). */
enum http_sess_full { HTTP_SESS_FULL, HTTP_SESS_CRED_FULL };
http_sess *http_sessions_create(http_sessions *t, mcp_server *srv, bool legacy, const char *cred,
                                enum http_sess_full *ret_full);
/* The session with this id, busy for the caller; NULL when unknown. */
http_sess *http_sessions_get(http_sessions *t, const char *id);
/* Mark a session already held busy once more (a worker thread's turn). */
void http_sess_hold(http_sess *e);
/* End what _create, _get or _hold began. */
void http_sess_put(http_sess *e);

/* Forget the session: its calls are cancelled and its stream ends.  Returns
 * false when it was already forgotten. */
bool http_sess_drop(http_sess *e);

unsigned http_sessions_count(http_sessions *t);
unsigned http_sessions_max(http_sessions *t);
unsigned http_sessions_per_cred(http_sessions *t);
/* The session was forgotten (DELETE, expiry, shutdown). */
bool http_sess_dropped(http_sess *e);
/* Drop the sessions idle for longer than the timeout, and those never used
 * after initialize past the grace; forget request logs past their time. */
void http_sessions_expire(http_sessions *t);
/* Cancel the calls of every session alive, known or not (shutdown). */
void http_sessions_cancel_all(http_sessions *t);

mcp_session *http_sess_mcp(http_sess *e);
bool http_sess_legacy(http_sess *e);
void http_sess_ref(http_sess *e);
void http_sess_unref(http_sess *e);

/* Make `q` the session's stream and route the session's notifications to it.
 * Returns false when another stream is attached. */
bool http_sess_attach(http_sess *e, cm_sse *q);
/* Undo http_sess_attach when `q` is still the attached stream. */
void http_sess_detach(http_sess *e, cm_sse *q);
/* The attached stream with a reference, or NULL. */
cm_sse *http_sess_stream(http_sess *e);

/* Keep `g` (a reference taken) for replay to a client that reconnects. */
void http_sess_add_log(http_sess *e, http_log *g);
/* The log of request stream `stream` with a reference, or NULL. */
http_log *http_sess_find_log(http_sess *e, uint64_t stream);

#endif
