/* The HTTP+SSE transport of MCP 2024-11-05, for clients that predate
 * Streamable HTTP:
 *   GET /sse                     opens a session and its event stream; the
 *                                first event, "endpoint", names the URL to
 *                                POST to
 *   POST /messages?sessionId=ID  one message; 202 at once, and every reply
 *                                and notification travels on the stream
 * The session lives as long as its stream: closing it ends the session. */
#include <string.h>
#include <time.h>

#include "transport/http_int.h"
#include "util/cleanup.h"
#include "util/json.h"

static enum MHD_Result only(struct MHD_Connection *c, const char *method, const char *allow, const char *what) {
        struct MHD_Response *r = http_error_response(MCP_INVALID_REQUEST, "%s is not supported here: %s", method, what);
        if (r)
                (void)MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
        return http_queue(c, MHD_HTTP_METHOD_NOT_ALLOWED, r);
}

static void stream_closed(cm_sse *q, void *arg) {
        http_sess *e = arg;
        (void)http_sess_drop(e); /* cancels its calls */
        http_sess_detach(e, q);
        http_sess_unref(e);
}

static enum MHD_Result open_sse(http_req *r, struct MHD_Connection *c) {
        cm_http *h = r->l->h;
        const char *accept = http_header(c, MHD_HTTP_HEADER_ACCEPT);
        cleanup_free char *endpoint = NULL;
        struct MHD_Response *resp;
        cm_sse *q;

        if (accept && !cm_http_accepts(accept, "text/event-stream"))
                return http_error(c, MHD_HTTP_NOT_ACCEPTABLE, MCP_INVALID_REQUEST,
                                  "GET /sse opens an event stream: send Accept: text/event-stream");
        char cbuf[48];
        const char *cred = http_cred_key(r, c, cbuf);
        enum http_sess_full full;
        r->e = http_sessions_create(h->sessions, h->srv, true, cred, &full);
        if (!r->e)
                return http_sessions_full(c, h, full, cred);
        q = cm_sse_new(c, http_conn_fd(c), CM_SSE_SESSION);
        (void)http_sess_attach(r->e, q); /* a new session has no stream yet */
        endpoint = xasprintf("/messages?sessionId=%s", mcp_session_id(http_sess_mcp(r->e)));
        (void)cm_sse_push(q, "endpoint", endpoint, strlen(endpoint));
        http_sess_ref(r->e);
        cm_sse_on_close(q, stream_closed, r->e);
        http_req_answering(r); /* a stop lets the errors of its calls go out */
        resp = cm_sse_response(q);
        cm_sse_unref(q);
        return http_queue(c, MHD_HTTP_OK, resp);
}

enum MHD_Result http_legacy_begin(http_req *r, struct MHD_Connection *c, const char *method) {
        const char *sid;
        char buf[128];
        if (r->route == ROUTE_SSE)
                return strcmp(method, "GET") == 0 ? open_sse(r, c)
                                                  : only(c, method, "GET", "GET /sse opens a legacy HTTP+SSE session");
        if (strcmp(method, "POST") != 0)
                return only(c, method, "POST", "POST /messages?sessionId=ID sends a message of a legacy session");
        sid = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "sessionId");
        if (!sid)
                return http_error(c, MHD_HTTP_BAD_REQUEST, MCP_INVALID_REQUEST,
                                  "missing sessionId query parameter: POST to the URL the \"endpoint\" event of "
                                  "GET /sse announced");
        if (cm_http_session_id_ok(sid))
                r->e = http_sessions_get(r->l->h->sessions, sid);
        if (r->e && !http_sess_legacy(r->e)) {
                http_sess_put(r->e); /* a Streamable HTTP session lives at /mcp only */
                r->e = NULL;
        }
        if (!r->e)
                return http_error(c, MHD_HTTP_NOT_FOUND, HTTP_NO_SESSION,
                                  "unknown or closed session \"%s\": open GET /sse again for a new one",
                                  http_clip(sid, buf));
        return http_post_prepare(r, c);
}

enum MHD_Result http_legacy_post(http_req *r, struct MHD_Connection *c) {
        http_collect *k;

        if (r->too_big)
                return http_too_big(c, r->l->h);
        k = http_collect_new();
        r->deferred = mcp_parse(r->body ? r->body : "", r->len, http_collect_sink(k));
        if (!r->deferred)
                return http_queue(c, MHD_HTTP_BAD_REQUEST, http_collect_response(k));
        http_collect_drop(k);
        /* The message runs once this 202 is on the wire (http_legacy_completed):
         * a client may drop the POST the moment its reply arrives on the
         * stream, so the reply must not overtake the 202. */
        return http_empty(c, MHD_HTTP_ACCEPTED);
}

void http_legacy_completed(http_req *r) {
        cm_http *h = r->l->h;
        json_t *msg = steal_pointer(&r->deferred);
        cm_sse *q = http_sess_stream(r->e);
        /* Quick messages run here, in the order they came; a tools/call runs
         * in a worker so a notifications/cancelled after it is not stuck
         * behind it.  With the stream gone the session is over: nothing runs. */
        if (q && mcp_message_is_slow(msg)) {
                (void)http_spawn(h, r->e, steal_pointer(&msg), q, NULL, false); /* failing, the client times out */
        } else if (q) {
                (void)http_handle(h, r->e, msg, cm_sse_sink(q));
        }
        cm_sse_unref(q);
        json_decref(msg);
}
