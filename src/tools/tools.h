/* Tool families.  Each family is a file with a table of mcp_tool; a handler
 * only validates, applies policy, calls a backend and shapes the result. */
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
} cm_app;

typedef struct cm_toolset {
        const char *family;
        const mcp_tool *tools;
        size_t n_tools;
} cm_toolset;

extern const cm_toolset cm_toolset_run;       /* run_container, exec_in_container */
extern const cm_toolset cm_toolset_lifecycle; /* list, logs, stats, inspect, stop, remove */
extern const cm_toolset cm_toolset_copy;      /* copy_files */
extern const cm_toolset cm_toolset_containers; /* system_status */
extern const cm_toolset cm_toolset_diagnostics;

static inline cm_app *cm_call_app(mcp_call *c) { return mcp_server_userdata(mcp_call_server(c)); }

/* Open every backend of the registry and pick the active one: cfg->backend
 * when set, else the first available. */
int cm_app_open(cm_app *app, cm_config *cfg, cm_err *err);
void cm_app_close(cm_app *app);

/* Register the tools of every enabled family. */
int cm_tools_register(mcp_server *srv, const cm_config *cfg, cm_err *err);

/* The system_status document, also printed by `container-mcp status`. */
json_t *cm_status_json(cm_app *app, const char *protocol_version);

#endif
