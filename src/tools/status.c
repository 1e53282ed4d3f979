/* system_status: which backends this machine can use and why not, the
 * active policy in brief, the server version. */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "tools/common.h"
#include "tools/tools.h"
#include "tools/workbench.h"
#include "util/cleanup.h"
#include "util/json.h"

static json_t *strv_json(char *const *v) {
        json_t *a = json_array();
        for (size_t i = 0; v && v[i]; i++)
                json_array_append_new(a, json_string(v[i]));
        return a;
}

static json_t *backend_json(const cm_backend_entry *e, cm_backend *b, bool active) {
        cm_backend_status st;
        json_t *details = NULL;
        b->ops->status(b, &st);
        if (st.details[0])
                details = json_loads(st.details, 0, NULL);
        if (!json_is_object(details)) {
                json_decref(details);
                details = json_object();
        }
        return json_pack("{s:s, s:s, s:b, s:b, s:s, s:s, s:s, s:o}", "name", e->name, "summary", e->summary,
                         "available", st.available, "active", active, "version", st.version, "reason", st.reason,
                         "fix", st.fix, "details", details);
}

/* The session and ceiling settings (issue 7). */
static json_t *policy_limits_json(const cm_config *c, json_t *pol) {
        (void)json_object_set_new(pol, "maxMemoryBytes", json_integer(c->max_memory));
        (void)json_object_set_new(pol, "maxCpus", json_real(c->max_cpus));
        (void)json_object_set_new(pol, "shareContainers", json_boolean(c->share_containers));
        (void)json_object_set_new(pol, "sharedContainers", strv_json(c->shared_containers));
        (void)json_object_set_new(pol, "allowedContainers", strv_json(c->allowed_containers));
        (void)json_object_set_new(pol, "allowedRegistries", strv_json(c->allowed_registries));
        /* the session sandbox and its tools (issue 10) */
        (void)json_object_set_new(pol, "sandboxImage", json_string(c->sandbox_image));
        (void)json_object_set_new(pol, "sandboxTtlSec", json_integer(c->sandbox_ttl_sec));
        (void)json_object_set_new(pol, "commandTimeoutSec", json_integer(c->command_timeout_sec));
        (void)json_object_set_new(pol, "commandTimeoutMaxSec", json_integer(c->command_timeout_max_sec));
        (void)json_object_set_new(pol, "pythonMemoryBytes", json_integer(c->python_memory));
        return pol;
}

static json_t *policy_json(const cm_config *c) {
        return json_pack("{s:b, s:b, s:b, s:o, s:f, s:I, s:i, s:I, s:s, s:o, s:b}", "readonly", c->readonly,
                         "allowNetwork", c->allow_network, "allowUnmanaged", c->allow_unmanaged, "allowedMounts",
                         strv_json(c->allowed_mounts), "defaultCpus", c->default_cpus, "defaultMemoryBytes",
                         (json_int_t)c->default_memory, "maxContainers", (int)c->max_containers, "timeoutMs",
                         (json_int_t)c->timeout_ms, "agentName", c->agent_name, "toolsets", strv_json(c->toolsets),
                         "httpToken", c->token != NULL);
}

json_t *cm_status_json(cm_app *app, const char *protocol_version) {
        json_t *backends = json_array();
        for (size_t i = 0; i < app->n_backends; i++)
                json_array_append_new(backends,
                                      backend_json(cm_backends[i], app->backends[i], app->backends[i] == app->active));
        return json_pack("{s:{s:s, s:s}, s:s?, s:s?, s:o, s:o}", "server", "name", "container-mcp", "version",
                         CM_VERSION, "protocolVersion", protocol_version, "activeBackend",
                         app->active ? app->active->ops->name : NULL, "backends", backends, "policy",
                         policy_limits_json(app->cfg, policy_json(app->cfg)));
}

/* A short text for people and agents; the JSON is in structuredContent. */
static char *status_text(const json_t *st) {
        const json_t *pol = json_object_get(st, "policy"), *b, *m;
        char *text = NULL;
        size_t len = 0, i;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return NULL;
        fprintf(f, "container-mcp %s, MCP %s\n", cm_json_str(json_object_get(st, "server"), "version"),
                cm_json_str(st, "protocolVersion") ? cm_json_str(st, "protocolVersion") : "-");
        json_array_foreach(json_object_get(st, "backends"), i, b) {
                if (json_is_true(json_object_get(b, "available")))
                        fprintf(f, "backend %s: available, %s%s\n", cm_json_str(b, "name"), cm_json_str(b, "version"),
                                json_is_true(json_object_get(b, "active")) ? " (active)" : "");
                else
                        fprintf(f, "backend %s: not available: %s; fix: %s\n", cm_json_str(b, "name"),
                                cm_json_str(b, "reason"), cm_json_str(b, "fix"));
        }
        fprintf(f, "policy: network %s, %s, mounts allowed under",
                json_is_true(json_object_get(pol, "allowNetwork")) ? "allowed" : "denied",
                json_is_true(json_object_get(pol, "readonly")) ? "read-only mode" : "read-write");
        json_array_foreach(json_object_get(pol, "allowedMounts"), i, m) fprintf(f, " %s", json_string_value(m));
        fprintf(f, "%s\n", json_array_size(json_object_get(pol, "allowedMounts")) ? "" : " (none)");
        (void)fclose(f);
        return text;
}

/* `start: true` (the first seed's): start the active backend's system
 * service when it has one and it is stopped.  What happened is the
 * `service` member; a failure is reported there, next to the status that
 * says why, rather than instead of it. */
static json_t *service_start(cm_app *app) {
        cm_backend *b = app->active;
        cm_err err = CM_ERR_INIT;
        bool started = false;
        if (!b)
                return json_pack("{s:n, s:s, s:s}", "backend", "state", "failed", "message",
                                 "no container backend is active; see backends for why");
        if (!b->ops->service_start)
                return json_pack("{s:s, s:s, s:s}", "backend", b->ops->name, "state", "none", "message",
                                 "this backend has no system service to start");
        if (b->ops->service_start(b, &started, &err) < 0)
                return json_pack("{s:s, s:s, s:s}", "backend", b->ops->name, "state", "failed", "message", err.msg);
        return json_pack("{s:s, s:s, s:s}", "backend", b->ops->name, "state", started ? "started" : "running",
                         "message", started ? "container system service started" : "running");
}

static int system_status(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        cm_app *app = cm_call_app(call);
        cleanup_free char *sandbox = cm_workbench_id(call);
        json_t *service = NULL;
        /* Before the status, so the status shows the service as it is now. */
        if (json_is_true(json_object_get(args, "start"))) {
                if (cm_tool_writable(call, "system_status with start: true", err) < 0)
                        return -1;
                service = service_start(app);
        }
        *ret = cm_status_json(app, mcp_session_version(mcp_call_session(call)));
        if (service)
                (void)json_object_set_new(*ret, "service", service);
        /* The calling session's sandbox, null until a sandbox or file tool
         * made one (and again after it was removed). */
        (void)json_object_set_new(*ret, "sessionSandbox", sandbox ? json_string(sandbox) : json_null());
        {
                cleanup_free char *text = status_text(*ret);
                const json_t *sv = json_object_get(*ret, "service");
                cleanup_free char *svc = sv ? xasprintf("service (%s): %s\n", cm_json_str(sv, "state"),
                                                        cm_json_str(sv, "message"))
                                            : xstrdup("");
                *ret_text = xasprintf("%s%ssession sandbox: %s\n", svc, text ? text : "",
                                      sandbox ? sandbox : "none yet (made by the first sandbox or file tool call)");
        }
        return 0;
}

/* Name, description and schemas of each: src/tools/defs/status.json. */
static const cm_tool_handler handlers[] = {
        {"system_status", system_status},
};

const cm_tool_family cm_tools_status = {__FILE__, handlers, ARRAY_SIZE(handlers)};

/* `daemon status`: the containers this server manages that are running now
 * (session sandboxes and run_container's), counted and listed by id and
 * name; the backend's own list, so it is what exists, not what we think. */
json_t *cm_daemon_sandboxes_json(cm_app *app) {
        cm_container_info *all = NULL;
        size_t n = 0;
        cm_err err = CM_ERR_INIT;
        json_t *list = json_array(), *doc;
        const char *backend = NULL;
        for (size_t i = 0; i < app->n_backends; i++)
                if (app->backends[i] == app->active)
                        backend = cm_backends[i]->name;
        if (app->active && app->active->ops->list(app->active, false, &all, &n, &err) == 0) {
                for (size_t i = 0; i < n; i++) {
                        if (cm_container_managed(&all[i]) && all[i].state && strcmp(all[i].state, "running") == 0)
                                json_array_append_new(list, json_pack("{s:s, s:s?}", "id", all[i].id, "name",
                                                                      all[i].name));
                        cm_container_info_clear(&all[i]);
                }
                free(all);
        }
        doc = json_pack("{s:s?, s:I}", "backend", backend, "sandboxCount",
                        (json_int_t)json_array_size(list));
        (void)json_object_set_new(doc, "sandboxes", list);
        if (err.code)
                (void)json_object_set_new(doc, "sandboxError", json_string(err.msg));
        return doc;
}
