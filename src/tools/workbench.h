/* The session's sandbox: the container the sandbox and file tools act on. */
#ifndef CM_TOOLS_WORKBENCH_H
#define CM_TOOLS_WORKBENCH_H

#include <stddef.h>

#include "tools/common.h"

/* The container a sandbox or file tool acts on: `ref` (id or name) when
 * given, checked as cm_tool_target does (managed, visible, op present);
 * else the session's sandbox, created on first use.  NULL with err set. */
cm_backend *cm_tool_workbench(mcp_call *call, const char *ref, size_t op_offset, const char *what,
                              cm_container_info *ret, cm_err *err);
#define CM_TOOL_WORKBENCH(call, ref, op, what, ret, err) \
        cm_tool_workbench(call, ref, offsetof(cm_backend_ops, op), what, ret, err)

#endif
