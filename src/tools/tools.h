/* Tool families.  Each family is a JSON file of definitions (src/tools/defs/)
 * and a C file with a table of handlers; a handler only validates, applies
 * policy, calls a backend and shapes the result. */
#ifndef CM_TOOLS_H
#define CM_TOOLS_H

#include <pthread.h>
#include <stdint.h>

#include "backend/backend.h"
#include "mcp/mcp.h"
#include "policy/config.h"

/* What every handler can reach: mcp_server_userdata() of the server. */
typedef struct cm_app {
        cm_config *cfg;
        cm_backend **backends; /* parallel to cm_backends[] */
        size_t n_backends;
        cm_backend *active;    /* the one tools use; NULL when none is available */
        /* The key of the owner label: a session's containers carry
         * HMAC-SHA256(owner_key, session id), never the id itself (the id is
         * the HTTP session's credential).  Random per server process. */
        uint8_t owner_key[32];
        /* Runs between the container cap's check and their end (wait runs)
         * or their record (detached runs): counted with the backend's list
         * so concurrent calls cannot all pass the check. */
        pthread_mutex_t run_lock;
        unsigned runs_in_flight;
        /* Every session's sandbox (tools/workbench.c). */
        struct cm_workbenches *workbenches;
        /* dpatch: one patch at a time per container (tools/keylock.c). */
        struct cm_keylocks *patch_locks;
} cm_app;

/* A tool's handler.  Its definition (title, description, annotations,
 * schemas, toolset) is data: src/tools/defs/<family>.json, embedded by the
 * build, which fails when a definition has no handler or a handler no
 * definition (tools/defs_check.c). */
typedef struct cm_tool_handler {
        const char *name;
        mcp_tool_fn fn;
        /* The handler never blocks and returns in microseconds (mcp_tool):
         * a promise about this C code, so it is kept here, not in the JSON. */
        bool quick;
} cm_tool_handler;

/* One file of handlers. */
typedef struct cm_tool_family {
        const char *file; /* __FILE__, for the build check's messages */
        const cm_tool_handler *handlers;
        size_t n_handlers;
} cm_tool_family;

extern const cm_tool_family cm_tools_containers;  /* run_container, exec_in_container */
extern const cm_tool_family cm_tools_lifecycle;   /* list, logs, stats, inspect, stop, remove */
extern const cm_tool_family cm_tools_copy;        /* copy_files */
extern const cm_tool_family cm_tools_images;      /* list_images, pull_image, build_image, remove_image, prune_images */
extern const cm_tool_family cm_tools_files;       /* file_read, file_write, file_list, file_delete, file_move */
extern const cm_tool_family cm_tools_status;      /* system_status */
extern const cm_tool_family cm_tools_diagnostics; /* echo, sleep */
extern const cm_tool_family cm_tools_sandbox;     /* system_run_command, system_run_python, system_env_var */
extern const cm_tool_family cm_tools_dinspect;    /* dinspect (toolset codex) */
extern const cm_tool_family cm_tools_dpatch;      /* dpatch */
extern const cm_tool_family cm_tools_dexec;       /* dexec (toolset codex) */

/* Every family, NULL-terminated. */
extern const cm_tool_family *const cm_tool_families[];

/* The handler of the tool called `name`, or NULL. */
const cm_tool_handler *cm_tool_handler_find(const char *name);

static inline cm_app *cm_call_app(mcp_call *c) { return mcp_server_userdata(mcp_call_server(c)); }

/* Open every backend of the registry and pick the active one: cfg->backend
 * when set, else the first available. */
int cm_app_open(cm_app *app, cm_config *cfg, cm_err *err);
void cm_app_close(cm_app *app);

/* Register the tools of every enabled toolset, in the order of the
 * definition files (the order of tools/list). */
int cm_tools_register(mcp_server *srv, const cm_config *cfg, cm_err *err);
/* The same with definitions parsed by cm_tooldefs_parse (tooldefs-check). */
int cm_tools_register_defs(mcp_server *srv, const cm_config *cfg, const json_t *defs, cm_err *err);

/* The system_status document, also printed by `container-mcp status`. */
json_t *cm_status_json(cm_app *app, const char *protocol_version);
/* What `daemon status` shows of the tools layer: the running managed
 * containers (backend, sandboxCount, sandboxes [{id, name}]). */
json_t *cm_daemon_sandboxes_json(cm_app *app);

#endif
