#include "tools/tools.h"

static const cm_toolset *const toolsets[] = {&cm_toolset_run, &cm_toolset_lifecycle, &cm_toolset_copy, &cm_toolset_containers,
                                                  &cm_toolset_diagnostics};

int cm_tools_register(mcp_server *srv, const cm_config *cfg, cm_err *err) {
        for (size_t i = 0; i < sizeof toolsets / sizeof toolsets[0]; i++) {
                const cm_toolset *ts = toolsets[i];
                if (!cm_toolset_enabled(cfg, ts->family))
                        continue;
                for (size_t j = 0; j < ts->n_tools; j++)
                        if (mcp_server_add_tool(srv, &ts->tools[j], err) < 0)
                                return -1;
        }
        return 0;
}
