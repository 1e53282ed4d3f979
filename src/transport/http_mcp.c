/* Streamable HTTP at /mcp (MCP 2025-11-25, "Transports"):
 *   POST    one JSON-RPC message (or a batch); the reply is one JSON body, or
 *           an event stream when the request carries a progressToken or is a
 *           call still running after CONTAINER_MCP_HTTP_STREAM_AFTER_MS
 *   GET     the session's stream of server messages unrelated to a request;
 *           with the Last-Event-ID of a request's stream, its replay
 *   DELETE  end the session */
#include <stdio.h>
#include <string.h>

#include "transport/http_int.h"
#include "transport/http_log.h"
#include "util/cleanup.h"
#include "util/json.h"

/* A missing MCP-Protocol-Version means 2025-03-26 (the spec's rule for
 * clients that predate the header); a present one must be spoken here. */
static bool version_ok(struct MHD_Connection *c, enum MHD_Result *ret) {
        const char *v = http_header(c, "MCP-Protocol-Version");
        char list[256] = "", buf[128];
        size_t n = 0;
        if (!v || mcp_version_supported(v))
                return true;
        for (size_t i = 0; mcp_supported_versions[i] && n < sizeof list; i++)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", mcp_supported_versions[i]);
        *ret = http_error(c, MHD_HTTP_BAD_REQUEST, MCP_INVALID_REQUEST,
                          "unsupported MCP-Protocol-Version \"%s\": this server speaks %s; send the version "
                          "initialize negotiated",
                          http_clip(v, buf), list);
        return false;
}

/* The session of Mcp-Session-Id, kept busy in r->e; else queue 400/404. */
static bool need_session(http_req *r, struct MHD_Connection *c, enum MHD_Result *ret) {
        const char *sid = http_header(c, "Mcp-Session-Id");
        char buf[128];
        if (!sid) {
                *ret = http_error(c, MHD_HTTP_BAD_REQUEST, MCP_INVALID_REQUEST,
                                  "missing Mcp-Session-Id header: send initialize first, then send the "
                                  "Mcp-Session-Id its response carried with every request");
                return false;
        }
        if (cm_http_session_id_ok(sid))
                r->e = http_sessions_get(r->l->h->sessions, sid);
        if (r->e && http_sess_legacy(r->e)) {
                http_sess_put(r->e); /* a legacy session lives at /messages only */
                r->e = NULL;
        }
        if (!r->e)
                *ret = http_error(c, MHD_HTTP_NOT_FOUND, HTTP_NO_SESSION,
                                  "unknown or expired session \"%s\": start a new one by sending initialize without "
                                  "an Mcp-Session-Id header",
                                  http_clip(sid, buf));
        return r->e != NULL;
}

static void stream_closed(cm_sse *q, void *arg) {
        http_sess *e = arg;
        http_sess_detach(e, q);
        http_sess_unref(e);
}

/* The stream of a session opened with SESSION_ENDS_HEADER: its close ends
 * the session, as a DELETE would.  `container-mcp proxy` asks for this, so
 * a proxy killed with SIGKILL (which sends no DELETE) leaves no session,
 * and no session sandbox, to wait for the idle timeout: its socket closes
 * with it and the stream watcher sees the hang-up. */
static void bound_stream_closed(cm_sse *q, void *arg) {
        http_sess *e = arg;
        http_sess_detach(e, q);
        (void)http_sess_drop(e);
        http_sess_unref(e);
}

/* A client's choice for its own session only (the id is the credential):
 * it can shorten the session's life, never lengthen it or touch another. */
#define SESSION_ENDS_HEADER "Container-MCP-Session-Ends"

static bool ends_with_stream(struct MHD_Connection *c) {
        const char *v = http_header(c, SESSION_ENDS_HEADER);
        return v && strcmp(v, "with-stream") == 0;
}

static enum MHD_Result open_stream(http_req *r, struct MHD_Connection *c) {
        cm_sse *q = cm_sse_new(c, http_conn_fd(c), CM_SSE_SESSION);
        struct MHD_Response *resp;
        if (!http_sess_attach(r->e, q)) {
                cm_sse_unref(q);
                return http_error(c, MHD_HTTP_CONFLICT, MCP_INVALID_REQUEST,
                                  "this session already has a GET stream open and only one is allowed: keep using "
                                  "it, or close it before opening another");
        }
        http_sess_ref(r->e);
        cm_sse_on_close(q, ends_with_stream(c) ? bound_stream_closed : stream_closed, r->e);
        resp = cm_sse_response(q);
        cm_sse_unref(q);
        return http_queue(c, MHD_HTTP_OK, resp);
}

static enum MHD_Result method_not_allowed(struct MHD_Connection *c, const char *why) {
        struct MHD_Response *r = http_error_response(MCP_INVALID_REQUEST, "%s", why);
        if (r)
                (void)MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, POST, DELETE");
        return http_queue(c, MHD_HTTP_METHOD_NOT_ALLOWED, r);
}

static enum MHD_Result not_allowed(struct MHD_Connection *c, const char *method) {
        char why[160];
        (void)snprintf(why, sizeof why,
                       "%.20s is not supported on /mcp: POST sends a message, GET opens the event stream, DELETE "
                       "ends the session",
                       method);
        return method_not_allowed(c, why);
}

/* GET with the Last-Event-ID of a request's stream: what the client missed
 * of it, the response included, then the rest as it comes (MCP 2025-11-25,
 * "Resumability and Redelivery").  Only the session's own streams are
 * found: the session id is the credential. */
static enum MHD_Result resume_stream(http_req *r, struct MHD_Connection *c, const char *last_id) {
        uint64_t stream, seq;
        http_log *g = NULL;
        enum MHD_Result ret;
        char buf[128];
        if (http_log_parse_id(last_id, &stream, &seq))
                g = http_sess_find_log(r->e, stream);
        if (!g)
                return http_error(c, MHD_HTTP_NOT_FOUND, MCP_INVALID_REQUEST,
                                  "no events to replay after Last-Event-ID \"%s\": this session has no such "
                                  "stream, or its events expired (kept CONTAINER_MCP_HTTP_REPLAY_SEC seconds after "
                                  "the request ends); if its response never came, send the request again",
                                  http_clip(last_id, buf));
        if (http_log_done_after(g, (int64_t)seq)) {
                /* The client has the whole stream.  An empty stream would
                 * make the SDK client (which takes only a result, not an
                 * error, as the end) reconnect again and again; 405 is how
                 * the spec says "no stream here", and it then stops. */
                http_log_unref(g);
                return method_not_allowed(c, "that stream is complete: every event after this Last-Event-ID was "
                                             "sent and nothing more will come");
        }
        http_req_answering(r);
        ret = http_stream_log(r->e, g, (int64_t)seq, c);
        http_log_unref(g);
        return ret;
}

enum MHD_Result http_mcp_begin(http_req *r, struct MHD_Connection *c, const char *method) {
        const char *accept = http_header(c, MHD_HTTP_HEADER_ACCEPT);
        const char *last_id = http_header(c, "Last-Event-ID");
        enum MHD_Result ret;
        bool post = strcmp(method, "POST") == 0, get = strcmp(method, "GET") == 0;

        if (!post && !get && strcmp(method, "DELETE") != 0)
                return not_allowed(c, method);
        /* A POST's version is checked once its body shows it is not
         * initialize, which negotiates the version and needs no header. */
        if (!post && !version_ok(c, &ret))
                return ret;
        if (post && !(cm_http_accepts(accept, "application/json") && cm_http_accepts(accept, "text/event-stream")))
                return http_error(c, MHD_HTTP_NOT_ACCEPTABLE, MCP_INVALID_REQUEST,
                                  "Accept must list both application/json and text/event-stream: the server "
                                  "answers a POST with either");
        if (get && !cm_http_accepts(accept, "text/event-stream"))
                return http_error(c, MHD_HTTP_NOT_ACCEPTABLE, MCP_INVALID_REQUEST,
                                  "GET /mcp opens an event stream: send Accept: text/event-stream (messages go in "
                                  "a POST)");
        if (post)
                return http_post_prepare(r, c);
        if (!need_session(r, c, &ret))
                return ret;
        if (get && last_id && last_id[0] == CM_SSE_REQUEST)
                return resume_stream(r, c, last_id);
        if (get)
                return open_stream(r, c);
        (void)http_sess_drop(r->e); /* DELETE: its calls are cancelled, its stream ends */
        return http_empty(c, MHD_HTTP_OK);
}

/* ---- POST ------------------------------------------------------------------ */

/* The collected reply; none at all (the call was cancelled) is 202. */
static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, http_collect *k) {
        struct MHD_Response *resp = http_collect_response(k);
        return resp ? http_queue(c, status, resp) : http_empty(c, MHD_HTTP_ACCEPTED);
}

static enum MHD_Result shutting_down(struct MHD_Connection *c) {
        return http_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, HTTP_UNAVAILABLE,
                          "the server is shutting down; reconnect once it is back");
}

static enum MHD_Result post_initialize(http_req *r, struct MHD_Connection *c, json_t *msg, http_collect *k) {
        cm_http *h = r->l->h;
        struct MHD_Response *resp;
        char cbuf[48];
        const char *cred = http_cred_key(r, c, cbuf);
        enum http_sess_full full;

        r->e = http_sessions_create(h->sessions, h->srv, false, cred, &full);
        if (!r->e) {
                http_collect_drop(k);
                return http_sessions_full(c, h, full, cred);
        }
        if (!http_handle(h, r->e, msg, http_collect_sink(k))) {
                http_collect_drop(k);
                return shutting_down(c);
        }
        resp = http_collect_response(k);
        if (mcp_session_initialized(http_sess_mcp(r->e))) {
                if (resp)
                        (void)MHD_add_response_header(resp, "Mcp-Session-Id", mcp_session_id(http_sess_mcp(r->e)));
        } else {
                (void)http_sess_drop(r->e); /* refused (bad params): no session to keep */
        }
        return http_queue(c, MHD_HTTP_OK, resp);
}

/* The reply streams: a worker runs the request into a log the session
 * keeps for replay, and this connection reads it as events. */
static enum MHD_Result post_stream(http_req *r, struct MHD_Connection *c, json_t *msg) {
        http_log *g = http_log_new();
        enum MHD_Result ret;
        int rc = http_spawn(r->l->h, r->e, msg, NULL, g, true);
        if (rc < 0) {
                http_log_unref(g);
                return http_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, HTTP_UNAVAILABLE,
                                  "could not start a thread for this request (%s); retry, or drop the "
                                  "progressToken to be answered without one",
                                  strerror(-rc));
        }
        http_sess_add_log(r->e, g);
        http_req_answering(r);
        ret = http_stream_log(r->e, g, -1, c);
        http_log_unref(g);
        return ret;
}

enum MHD_Result http_mcp_post(http_req *r, struct MHD_Connection *c) {
        cm_http *h = r->l->h;
        http_collect *k;
        cleanup_json json_t *msg = NULL;
        enum MHD_Result ret;

        if (r->too_big)
                return http_too_big(c, h);
        k = http_collect_new();
        msg = mcp_parse(r->body ? r->body : "", r->len, http_collect_sink(k));
        if (!msg)
                return reply(c, MHD_HTTP_BAD_REQUEST, k);
        if (mcp_message_is_initialize(msg))
                return post_initialize(r, c, msg, k);
        if (!version_ok(c, &ret) || !need_session(r, c, &ret)) {
                http_collect_drop(k);
                return ret;
        }
        if (mcp_message_progress_token(msg) && mcp_message_has_request(msg)) {
                http_collect_drop(k);
                return post_stream(r, c, steal_pointer(&msg));
        }
        if (mcp_message_is_slow(msg) && !mcp_message_is_quick_call(h->srv, msg)) {
                r->call = http_call_start(h, r->e, steal_pointer(&msg), k, MHD_HTTP_OK, c);
                if (r->call)
                        http_req_answering(r);
                return r->call ? MHD_YES /* answered by http_call_reply once resumed */ : shutting_down(c);
        }
        if (!http_handle(h, r->e, msg, http_collect_sink(k))) {
                http_collect_drop(k);
                return shutting_down(c);
        }
        /* Notifications and responses get 202, unless the layer refused the
         * message: then 400 with its error, which says why. */
        return reply(c, mcp_message_has_request(msg) ? MHD_HTTP_OK : MHD_HTTP_BAD_REQUEST, k);
}
