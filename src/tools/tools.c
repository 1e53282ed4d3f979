#include <errno.h>
#include <string.h>

#include "tools/defs.h"
#include "tools/tools.h"
#include "util/json.h"

const cm_tool_family *const cm_tool_families[] = {&cm_tools_containers, &cm_tools_lifecycle, &cm_tools_copy, &cm_tools_images, &cm_tools_files,
                                                  &cm_tools_status, &cm_tools_sandbox, &cm_tools_dexec, &cm_tools_dpatch,
                                                  &cm_tools_dinspect, &cm_tools_diagnostics, NULL};

const cm_tool_handler *cm_tool_handler_find(const char *name) {
        for (size_t i = 0; name && cm_tool_families[i]; i++)
                for (size_t j = 0; j < cm_tool_families[i]->n_handlers; j++)
                        if (strcmp(cm_tool_families[i]->handlers[j].name, name) == 0)
                                return &cm_tool_families[i]->handlers[j];
        return NULL;
}

static int register_tool(mcp_server *srv, const json_t *def, cm_err *err) {
        const char *name = cm_json_str(def, "name");
        const cm_tool_handler *h = cm_tool_handler_find(name);
        /* The build's check (tools/defs_check.c) makes this unreachable. */
        if (!h)
                return cm_err_set(err, ENOENT, "tool %s has a definition but no handler", name ? name : "?");
        return mcp_server_add_tool_def(srv, def, h->fn, h->quick, err);
}

int cm_tools_register(mcp_server *srv, const cm_config *cfg, cm_err *err) {
        cleanup_json json_t *defs = cm_tooldefs_load(err);
        return defs ? cm_tools_register_defs(srv, cfg, defs, err) : -1;
}

int cm_tools_register_defs(mcp_server *srv, const cm_config *cfg, const json_t *defs, cm_err *err) {
        const json_t *file, *def;
        size_t i, j;
        json_array_foreach(defs, i, file) {
                if (!cm_toolset_enabled(cfg, cm_json_str(file, "toolset")))
                        continue;
                json_array_foreach(json_object_get(file, "tools"), j, def) {
                        if (register_tool(srv, def, err) < 0)
                                return -1;
                }
        }
        return 0;
}
