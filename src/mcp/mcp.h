/* The MCP layer: JSON-RPC 2.0 messages, sessions, the tool registry.
 *
 * It knows nothing of how bytes travel.  A transport (stdio, HTTP, legacy SSE)
 * turns bytes into messages, hands them to mcp_session_handle(), and gives a
 * sink (mcp_sink) through which the replies of that message go back.  Which
 * thread runs a message is the transport's choice; mcp_message_is_slow() tells
 * it which ones may take long (tools/call) so it can run those off its reader.
 *
 * Threading: a session may be used from many threads at once (concurrent
 * tools/call over HTTP, the stdio worker pool).  Every function here is
 * thread-safe unless it says otherwise. */
#ifndef CM_MCP_H
#define CM_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

#define MCP_LATEST_VERSION "2025-11-25"

/* JSON-RPC and MCP error codes. */
enum {
        MCP_PARSE_ERROR = -32700,
        MCP_INVALID_REQUEST = -32600,
        MCP_METHOD_NOT_FOUND = -32601,
        MCP_INVALID_PARAMS = -32602,
        MCP_INTERNAL_ERROR = -32603,
        MCP_REQUEST_CANCELLED = -32800,
};

typedef struct mcp_server mcp_server;
typedef struct mcp_session mcp_session;
typedef struct mcp_call mcp_call;
typedef struct mcp_sink mcp_sink;

/* Where the messages of one exchange go.  A transport implements it; the MCP
 * layer calls send() from whichever thread produced the message, so send()
 * must serialise itself.  ref/unref keep a sink alive while a call that writes
 * to it runs in another thread; a sink with static lifetime leaves them NULL. */
struct mcp_sink {
        /* One complete JSON-RPC message, no trailing newline.  Returns < 0 when
         * the peer is gone (the running call is then cancelled). */
        int (*send)(mcp_sink *self, const char *json, size_t len);
        void (*ref)(mcp_sink *self);
        void (*unref)(mcp_sink *self);
        /* Set when the sink can carry only the reply (an HTTP response in
         * JSON mode): notifications of the call then go to the session's
         * notify sink instead. */
        bool replies_only;
};

void mcp_sink_ref(mcp_sink *s);
void mcp_sink_unref(mcp_sink *s);

/* ---- tools ------------------------------------------------------------ */

enum mcp_tool_hint {
        MCP_HINT_READ_ONLY = 1u << 0,
        MCP_HINT_DESTRUCTIVE = 1u << 1,
        MCP_HINT_IDEMPOTENT = 1u << 2,
        MCP_HINT_OPEN_WORLD = 1u << 3,
};

/* A handler fills *ret_structured with an object that matches the tool's
 * outputSchema and, optionally, *ret_text with the text shown in `content`
 * (the JSON of ret_structured when left NULL).  That text is a C string read
 * up to its first NUL, and most clients show a model nothing else: it must
 * carry the whole result (exit code and stderr too), with any NUL byte of
 * the data escaped.  On failure it returns < 0 and
 * fills err with a message that tells the agent how to fix the call; the
 * result then has isError: true.  `args` is already checked against the input
 * schema and is borrowed. */
typedef int (*mcp_tool_fn)(mcp_call *call, json_t *args, json_t **ret_structured, char **ret_text, cm_err *err);

typedef struct mcp_tool {
        const char *name;
        const char *title;
        const char *description;
        const char *input_schema;  /* JSON text of a JSON Schema object */
        const char *output_schema; /* JSON text, or NULL */
        unsigned hints;            /* enum mcp_tool_hint */
        const char *toolset;       /* family, for CONTAINER_MCP_TOOLSETS */
        mcp_tool_fn handler;
        /* The handler never blocks and returns in microseconds: a transport
         * may run it on its reader thread instead of handing it off. */
        bool quick;
} mcp_tool;

/* ---- server ----------------------------------------------------------- */

typedef struct mcp_server_info {
        const char *name;
        const char *version;
        const char *instructions;
        unsigned page_size;           /* tools/list page size; 0 = default (100) */
        size_t max_message_bytes;     /* transports refuse larger messages */
} mcp_server_info;

mcp_server *mcp_server_new(const mcp_server_info *info, void *userdata);
void mcp_server_free(mcp_server *srv);
void *mcp_server_userdata(mcp_server *srv);
size_t mcp_server_max_message(mcp_server *srv);

/* Add a tool described in C (tests, small embedders).  The schemas are parsed
 * here: a malformed one is a programming error and returns < 0 with err set.
 * `tool` must outlive the server. */
int mcp_server_add_tool(mcp_server *srv, const mcp_tool *tool, cm_err *err);
/* Add a tool described as data: `def` is its tools/list entry (name, title,
 * description, inputSchema, outputSchema or none, annotations).  The server
 * keeps a reference, not a copy (startup stays cheap): do not change `def`
 * afterwards.  Its schemas must pass mcp_schema_valid; `quick` as in
 * mcp_tool. */
int mcp_server_add_tool_def(mcp_server *srv, const json_t *def, mcp_tool_fn handler, bool quick, cm_err *err);
size_t mcp_server_tool_count(mcp_server *srv);

/* ---- sessions --------------------------------------------------------- */

/* A new session.  `notify` receives server messages that belong to no request
 * (log messages outside a call); it may be NULL (they are dropped) and can be
 * changed later.  The id is a random 128-bit hex string. */
mcp_session *mcp_session_new(mcp_server *srv, mcp_sink *notify);
void mcp_session_ref(mcp_session *s);
/* Dropping the last reference cancels the calls still running. */
void mcp_session_unref(mcp_session *s);
/* Cancel every running call of the session, silently (client gone). */
void mcp_session_cancel_all(mcp_session *s);
void mcp_session_set_notify(mcp_session *s, mcp_sink *notify);
const char *mcp_session_id(const mcp_session *s);
/* Negotiated protocol version; NULL before initialize. */
const char *mcp_session_version(mcp_session *s);
/* clientInfo.name, "unknown" before initialize. */
const char *mcp_session_client(mcp_session *s);
bool mcp_session_initialized(mcp_session *s);

/* Something a layer above keeps per session (the tools' sandbox), found by
 * `key` (any address of that layer's).  The first call with a key runs
 * create(arg) under the session's lock (keep it cheap: an allocation) and
 * remembers `destroy`; later calls return the same object.  destroy(data)
 * runs exactly once, when the session ends: its transport dropped it (stdio
 * input closed, HTTP DELETE, expiry, a legacy SSE stream gone, shutdown)
 * and its last call returned, in the thread that drops the last reference.
 * It may block (it removes a sandbox). */
typedef void (*mcp_attach_destroy_fn)(void *data);
void *mcp_session_attach(mcp_session *s, const void *key, void *(*create)(void *arg), void *arg,
                         mcp_attach_destroy_fn destroy);
/* The object attached under `key`, or NULL (nothing is created). */
void *mcp_session_attached(mcp_session *s, const void *key);

/* Parse one message.  On malformed JSON it sends the -32700 reply to `out`
 * and returns NULL. */
json_t *mcp_parse(const char *buf, size_t len, mcp_sink *out);
/* Send a JSON-RPC error with a null id (transports use it for oversized
 * messages and the like). */
void mcp_send_error(mcp_sink *out, const json_t *id, int code, const char *msg);

/* True when handling `msg` may take long (tools/call, or a batch holding
 * one): run it off the thread that reads the next message. */
bool mcp_message_is_slow(const json_t *msg);
/* True when `msg` is a tools/call of a tool marked quick. */
bool mcp_message_is_quick_call(mcp_server *srv, const json_t *msg);
/* True when `msg` holds at least one request (something that gets a reply). */
bool mcp_message_has_request(const json_t *msg);
/* True when `msg` is an initialize request. */
bool mcp_message_is_initialize(const json_t *msg);
/* The progress token of a request, or NULL. */
const json_t *mcp_message_progress_token(const json_t *msg);

/* Handle one parsed message (request, notification, response or batch).
 * Replies and request-related notifications go to `out`.  Runs in the
 * caller's thread and returns once the replies are sent.  `msg` is borrowed. */
void mcp_session_handle(mcp_session *s, json_t *msg, mcp_sink *out);

/* ---- messages handled later, and calls the server gives up on ---------- */

/* A message taken in reading order, to be handled later, maybe in another
 * thread.  A transport that runs tools/call off its reader accepts the message
 * on the reader, before it reads the next one: the calls it holds are then
 * registered with the session, so a notifications/cancelled read right after
 * it finds them even before any thread starts them (they then never run and
 * get no reply), and mcp_session_abandon() reaches them while they wait. */
typedef struct mcp_job mcp_job;

/* Accept `msg` (borrowed; the job keeps a reference), whose replies go to
 * `out` (referenced until the job is done). */
mcp_job *mcp_session_accept(mcp_session *s, json_t *msg, mcp_sink *out);
/* Handle the job's message as mcp_session_handle() does, then free the job. */
void mcp_job_run(mcp_job *j);
/* Answer the job's calls with a JSON-RPC error (code, message) instead of
 * running them (a call the client already cancelled gets nothing), handle the
 * rest of the message (a batch's pings, say), and free the job.  For a
 * transport that cannot take more work. */
void mcp_job_refuse(mcp_job *j, int code, const char *message);

/* The server gives up on every call of the session: those running and those
 * accepted and not yet run.  For shutdown, or a transport dropping the
 * session.  Each stops as if cancelled (mcp_call_cancelled(), its cancel fd),
 * but its request gets a JSON-RPC error (code, message) on its sink instead
 * of a result, so the client does not wait for its own timeout.  A call the
 * client cancelled itself stays silent, as the spec says.  Give code
 * MCP_INTERNAL_ERROR and a message that starts with what happened ("server
 * shutting down: ...", "session ended: ...") and says what the client can do.
 * A call that starts after this returns is not affected. */
void mcp_session_abandon(mcp_session *s, int code, const char *message);

/* Protocol versions this server speaks, newest first, NULL-terminated. */
extern const char *const mcp_supported_versions[];
bool mcp_version_supported(const char *v);

/* ---- inside a tool call ----------------------------------------------- */

mcp_session *mcp_call_session(mcp_call *c);
mcp_server *mcp_call_server(mcp_call *c);
bool mcp_call_cancelled(mcp_call *c);
/* An fd that becomes readable when the call is cancelled, for poll() loops.
 * Owned by the call. */
int mcp_call_cancel_fd(mcp_call *c);
/* The request's params._meta (borrowed, alive as long as the call), or
 * NULL when it has none or it is not an object: what the client says about
 * the call beyond its arguments (progressToken, a client's threadId). */
const json_t *mcp_call_meta(mcp_call *c);
/* notifications/progress, when the request carried a progressToken. */
void mcp_call_progress(mcp_call *c, double progress, double total, const char *message);
/* notifications/message, when `level` is at or above the session's level.
 * Levels are RFC 5424 names: debug, info, notice, warning, error, ... */
__attribute__((format(printf, 3, 4))) void mcp_call_log(mcp_call *c, const char *level, const char *fmt, ...);

#endif
