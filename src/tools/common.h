/* Helpers shared by the container tool families. */
#ifndef CM_TOOLS_COMMON_H
#define CM_TOOLS_COMMON_H

#include <stddef.h>

#include "tools/tools.h"
#include "util/json.h"

#define CM_LABEL_MANAGED "dev.container-mcp.managed"
/* The owning session, as an opaque keyed hash (cm_tool_owner), never the
 * session id. */
#define CM_LABEL_SESSION "dev.container-mcp.session"
#define CM_LABEL_CLIENT "dev.container-mcp.client"
#define CM_LABEL_AGENT "dev.container-mcp.agent"

/* The active backend; NULL with an error that says why when there is none. */
cm_backend *cm_tool_backend(mcp_call *call, cm_err *err);
/* The active backend when it has the operation at op_offset (offsetof in
 * cm_backend_ops); else NULL and err says the backend cannot `what`. */
cm_backend *cm_tool_backend_op(mcp_call *call, size_t op_offset, const char *what, cm_err *err);
/* The error for a backend that lacks an operation ("cannot <what>"). */
int cm_tool_unsupported(cm_backend *b, const char *what, cm_err *err);
/* Refuse a tool that changes things when CONTAINER_MCP_READONLY is set. */
int cm_tool_writable(mcp_call *call, const char *tool, cm_err *err);
/* Hex digits of the owner label (128 bits of HMAC-SHA256). */
#define CM_OWNER_HEX 32
/* The owner label of the calling session: HMAC-SHA256 of its id under the
 * server's random key, truncated, in hex.  Opaque to every client, stable
 * for the session's life. */
void cm_tool_owner(mcp_call *call, char ret[CM_OWNER_HEX + 1]);
/* May the calling session see and act on `c`?  Its own containers, the
 * ones named in CONTAINER_MCP_SHARED_CONTAINERS, every one with
 * CONTAINER_MCP_SHARE_CONTAINERS, and unmanaged ones with
 * CONTAINER_MCP_ALLOW_UNMANAGED (they belong to no session). */
bool cm_tool_visible(mcp_call *call, const cm_container_info *c);
/* Find a container by id, name or unique id prefix among those the session
 * may see (another session's is "no container", exactly as one that does
 * not exist); refuse unmanaged ones unless CONTAINER_MCP_ALLOW_UNMANAGED. */
int cm_tool_find(mcp_call *call, cm_backend *b, const char *ref, cm_container_info *ret, cm_err *err);
bool cm_container_managed(const cm_container_info *c);
/* The start of every tool that acts on one container: the active backend,
 * which must have the operation at `op_offset` in cm_backend_ops (else "the
 * X backend cannot <what>"), and the container `ref`, found and checked as
 * managed.  NULL with err set on any failure.  Use CM_TOOL_TARGET. */
cm_backend *cm_tool_target(mcp_call *call, const char *ref, size_t op_offset, const char *what,
                           cm_container_info *ret, cm_err *err);
#define CM_TOOL_TARGET(call, ref, op, what, ret, err)                                                                  \
        cm_tool_target(call, ref, offsetof(cm_backend_ops, op), what, ret, err)
/* cm_tool_target for the codex tools (dexec, dpatch, dinspect; issue 11):
 * the session's own managed containers as there, and also the existing
 * containers named by --allow-container / CONTAINER_MCP_ALLOWED_CONTAINERS
 * (by name, id, or an id prefix of 12 or more), managed or not; every
 * other unmanaged one is refused with a message naming the flag
 * (CONTAINER_MCP_ALLOW_UNMANAGED does not open these tools). */
cm_backend *cm_tool_codex_target(mcp_call *call, const char *ref, size_t op_offset, const char *what,
                                 cm_container_info *ret, cm_err *err);
#define CM_TOOL_CODEX_TARGET(call, ref, op, what, ret, err)                                                            \
        cm_tool_codex_target(call, ref, offsetof(cm_backend_ops, op), what, ret, err)

/* Run the command line `cmd` in container `id` with `bash <bash_flags>
 * cmd` ("-c", "-lc"), or, when that exec finds no bash (ENOENT), with `sh
 * -c cmd`: the tools promise a shell, and an image may have only sh.
 * spec->argv is set here; *ret_sh says sh ran.  Cancellation goes to the
 * backend as the call's cancel fd. */
int cm_tool_shell_exec(mcp_call *call, cm_backend *b, const char *id, const char *bash_flags, const char *cmd,
                       cm_exec_spec *spec, cm_exec_result *res, bool *ret_sh, cm_err *err);

/* A slot under CONTAINER_MCP_MAX_CONTAINERS, taken under app->run_lock
 * (run_container, the session sandbox); given back with
 * cm_tool_release_slot once the backend lists the container or the run
 * has ended. */
int cm_tool_reserve_slot(cm_app *app, cm_backend *b, cm_err *err);
void cm_tool_release_slot(cm_app *app);

/* The four labels every container gets (strings borrowed from the session
 * and from `owner`, which the caller keeps alive). */
void cm_tool_labels(mcp_call *call, char owner[CM_OWNER_HEX + 1], cm_kv ret[4]);

json_t *cm_exec_result_json(const cm_exec_result *r);
/* The text of an exec result: stdout, stderr, exit code; NUL bytes escaped
 * (the text is a C string). */
char *cm_exec_result_text(const cm_exec_result *r);
/* Bytes as the C string of a tool's text: as they are, or, when they hold a
 * NUL, with NUL as \0 and backslash as \\ and a last line that says so. */
char *cm_text_of_bytes(const char *p, size_t n);

/* A JSON array of strings (already schema-checked) as a NULL-terminated argv. */
int cm_tool_argv(const json_t *arr, char ***ret_argv, size_t *ret_argc);
void cm_tool_argv_free(char **argv);
/* A JSON object of strings as cm_kv pairs (borrowed strings). */
int cm_tool_env(const json_t *obj, cm_kv **ret, size_t *ret_n, cm_err *err);

#endif
