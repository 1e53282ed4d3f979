/* The session sandbox: each MCP session's own container, made on the first
 * call of a sandbox or file tool and removed when the session ends (or after
 * CONTAINER_MCP_SANDBOX_TTL seconds without use). */
#ifndef CM_TOOLS_WORKBENCH_H
#define CM_TOOLS_WORKBENCH_H

#include <stdbool.h>
#include <stddef.h>

#include "tools/common.h"

/* The container a sandbox or file tool acts on: `ref` (id or name) when
 * given, checked as cm_tool_target does (managed, visible, op present);
 * else the session's sandbox, created on first use.  NULL with err set. */
cm_backend *cm_tool_workbench(mcp_call *call, const char *ref, size_t op_offset, const char *what,
                              cm_container_info *ret, cm_err *err);
#define CM_TOOL_WORKBENCH(call, ref, op, what, ret, err)                                                               \
        cm_tool_workbench(call, ref, offsetof(cm_backend_ops, op), what, ret, err)

/* cm_tool_workbench for a call that runs a process for a while: when it
 * returns the session's sandbox, that sandbox is also kept from the idle
 * removal until cm_workbench_put(call), and *ret_held is true. */
cm_backend *cm_workbench_hold(mcp_call *call, const char *ref, size_t op_offset, const char *what,
                              cm_container_info *ret, bool *ret_held, cm_err *err);
void cm_workbench_put(mcp_call *call);

/* The id of the calling session's sandbox when it has one now (caller
 * frees), else NULL; never creates one. */
char *cm_workbench_id(mcp_call *call);

/* The server's set of sandboxes (cm_app.workbenches). */
typedef struct cm_workbenches cm_workbenches;
cm_workbenches *cm_workbenches_new(cm_app *app);
/* Server stop: stop the idle reaper and remove every sandbox still there
 * (sessions normally remove theirs as they end, before this). */
void cm_workbenches_free(cm_workbenches *set);

#endif
