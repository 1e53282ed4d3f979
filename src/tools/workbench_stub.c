/* A stand-in for the session sandbox (tools/workbench.c, written in
 * parallel): a named container only.  Replaced at merge. */
#include <errno.h>

#include "tools/workbench.h"

cm_backend *cm_tool_workbench(mcp_call *call, const char *ref, size_t op_offset, const char *what,
                              cm_container_info *ret, cm_err *err) {
        if (ref)
                return cm_tool_target(call, ref, op_offset, what, ret, err);
        cm_err_set(err, ENOENT, "no session sandbox yet: pass container");
        return NULL;
}
