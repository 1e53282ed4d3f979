/* run_container and exec_in_container: validate, apply policy, call the
 * backend, shape the result. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "tools/common.h"
#include "util/cleanup.h"

#define WAIT_TIMEOUT_MS 600000 /* the seed's default for wait-mode runs */

typedef struct run_plan {
        cm_run_spec spec;
        char **argv;
        cm_kv *env;
        cm_mount *mounts;
        char **mount_real;
        char *image_real; /* a directory image, canonical */
        cm_port *ports;
        cm_kv labels[4];
        char owner[CM_OWNER_HEX + 1];
} run_plan;

static void run_plan_free(run_plan *p) {
        cm_tool_argv_free(p->argv);
        free(p->env);
        for (size_t i = 0; i < p->spec.n_mounts; i++)
                free(p->mount_real[i]);
        free(p->mount_real);
        free(p->image_real);
        free(p->mounts);
        free(p->ports);
}

static int plan_mounts(const cm_config *cfg, const json_t *arr, run_plan *p, cm_err *err) {
        size_t n = json_array_size(arr), i;
        const json_t *m;
        p->mounts = xcalloc(n + 1, sizeof *p->mounts);
        p->mount_real = xcalloc(n + 1, sizeof *p->mount_real);
        json_array_foreach(arr, i, m) {
                const char *target = cm_json_str(m, "target");
                if (target[0] != '/' || strstr(target, "/../") || strcmp(target, "/") == 0)
                        return cm_err_set(err, EINVAL,
                                          "mounts[%zu].target \"%s\": give an absolute path in the container other "
                                          "than /, without ..",
                                          i, target);
                if (cm_policy_host_path(cfg, cm_json_str(m, "source"), &p->mount_real[i], err) < 0) {
                        cm_err_prefix(err, "mounts[%zu]", i);
                        return -EACCES;
                }
                p->mounts[i] = (cm_mount){p->mount_real[i], target, json_is_true(json_object_get(m, "readonly"))};
                p->spec.n_mounts = i + 1;
        }
        p->spec.mounts = p->mounts;
        return 0;
}

static int plan_ports(const cm_config *cfg, const json_t *arr, run_plan *p, cm_err *err) {
        size_t n = json_array_size(arr), i;
        const json_t *m;
        p->ports = xcalloc(n + 1, sizeof *p->ports);
        json_array_foreach(arr, i, m) {
                const char *proto = cm_json_str(m, "protocol");
                p->ports[i] = (cm_port){(uint16_t)json_integer_value(json_object_get(m, "hostPort")),
                                        (uint16_t)json_integer_value(json_object_get(m, "containerPort")),
                                        proto ? proto : "tcp"};
                if (cm_policy_host_port(cfg, p->ports[i].host_port, err) < 0) {
                        cm_err_prefix(err, "ports[%zu]", i);
                        return -EACCES;
                }
        }
        p->spec.ports = p->ports;
        p->spec.n_ports = n;
        return 0;
}

#define MIN_MEMORY (4 << 20) /* less and the init cannot start */
#define MIN_CPUS 0.01        /* cgroup v2 takes no quota under 1 ms per 100 ms */

static int plan_memory(const cm_config *cfg, const json_t *mem, int64_t *ret, cm_err *err) {
        char max[32];
        *ret = cfg->default_memory;
        if (json_is_integer(mem))
                *ret = json_integer_value(mem);
        else if (json_is_string(mem)) {
                int r = cm_parse_size(json_string_value(mem), ret);
                if (r == -ERANGE)
                        *ret = INT64_MAX; /* over any ceiling: refused below, naming it */
                else if (r < 0)
                        return cm_err_set(err, EINVAL, "memory \"%s\": give a size like 512m or 2g",
                                          json_string_value(mem));
        }
        if (*ret < MIN_MEMORY)
                return cm_err_set(err, EINVAL, "memory: at least 4m, so the container can start");
        cm_format_size(cfg->max_memory, max);
        if (*ret > cfg->max_memory) {
                cleanup_free char *asked = json_is_string(mem) ? xasprintf("%s", json_string_value(mem))
                                                               : xasprintf("%lld", (long long)*ret);
                return cm_err_set(err, EINVAL,
                                  "memory %s is over the ceiling of %s (%lld bytes, CONTAINER_MCP_MAX_MEMORY); ask "
                                  "for less or have the operator raise CONTAINER_MCP_MAX_MEMORY",
                                  asked, max, (long long)cfg->max_memory);
        }
        return 0;
}

static int plan_limits(const cm_config *cfg, const json_t *args, run_plan *p, cm_err *err) {
        const json_t *cpus = json_object_get(args, "cpus");
        p->spec.cpus = cpus ? json_number_value(cpus) : cfg->default_cpus;
        if (p->spec.cpus < MIN_CPUS)
                return cm_err_set(err, EINVAL, "cpus %g: at least %g", p->spec.cpus, MIN_CPUS);
        if (p->spec.cpus > cfg->max_cpus)
                return cm_err_set(err, EINVAL,
                                  "cpus %g is over the ceiling of %g (CONTAINER_MCP_MAX_CPUS); ask for fewer or have "
                                  "the operator raise CONTAINER_MCP_MAX_CPUS",
                                  p->spec.cpus, cfg->max_cpus);
        if (plan_memory(cfg, json_object_get(args, "memory"), &p->spec.memory_bytes, err) < 0)
                return -EINVAL;
        p->spec.pids = 512;
        return 0;
}

static int plan_run(mcp_call *call, const json_t *args, run_plan *p, cm_err *err) {
        const cm_config *cfg = cm_call_app(call)->cfg;
        const json_t *cmd = json_object_get(args, "command"), *env = json_object_get(args, "env");
        const char *name = cm_json_str(args, "name");
        const json_t *timeout = json_object_get(args, "timeout");

        p->spec.image = cm_json_str(args, "image");
        if (cm_policy_image(cfg, p->spec.image, &p->image_real, err) < 0 || (name && cm_policy_name(name, err) < 0))
                return -EINVAL;
        if (p->image_real)
                p->spec.image = p->image_real;
        p->spec.name = name;
        if (cmd && json_array_size(cmd) > 0) {
                cm_tool_argv(cmd, &p->argv, &p->spec.argc);
                p->spec.argv = p->argv;
        }
        if (env && cm_tool_env(env, &p->env, &p->spec.n_env, err) < 0)
                return -EINVAL;
        p->spec.env = p->env;
        p->spec.workdir = cm_json_str(args, "workdir");
        if (plan_limits(cfg, args, p, err) < 0 || plan_mounts(cfg, json_object_get(args, "mounts"), p, err) < 0)
                return -EINVAL;
        if (plan_ports(cfg, json_object_get(args, "ports"), p, err) < 0)
                return -EACCES;
        /* network: true per call, or on for every call with ALLOW_NETWORK. */
        p->spec.network = json_is_true(json_object_get(args, "network")) || cfg->allow_network;
        p->spec.readonly_rootfs = json_is_true(json_object_get(args, "readonlyRootfs"));
        p->spec.timeout_ms = timeout ? json_integer_value(timeout) * 1000 : WAIT_TIMEOUT_MS;
        cm_tool_labels(call, p->owner, p->labels);
        p->spec.labels = p->labels;
        p->spec.n_labels = 4;
        return 0;
}

/* The same words whoever holds the name. */
static int name_taken(const char *name, cm_err *err) {
        return cm_err_set(err, EEXIST,
                          "name \"%s\" is taken by another container (this session's or another's); choose another "
                          "name, or leave name out for a generated one",
                          name);
}

/* A name must be unique among every container of the backend, this
 * session's or not.  The refusal reads the same whoever holds the name, so
 * it tells another session's agent only that the name is taken. */
static int check_name_free(mcp_call *call, cm_backend *b, const char *name, cm_err *err) {
        const cm_config *cfg = cm_call_app(call)->cfg;
        cm_container_info *all = NULL;
        size_t n = 0;
        bool taken = false;
        for (size_t i = 0; cfg->shared_containers[i]; i++)
                if (strcmp(cfg->shared_containers[i], name) == 0)
                        return cm_err_set(err, EEXIST,
                                          "name \"%s\" is reserved: CONTAINER_MCP_SHARED_CONTAINERS lists it for a "
                                          "container the operator provides to every session; choose another name",
                                          name);
        /* An allowlisted name too: a container an agent made under it
         * would be open to every session's dexec, dpatch and dinspect. */
        for (size_t i = 0; cfg->allowed_containers && cfg->allowed_containers[i]; i++)
                if (strcmp(cfg->allowed_containers[i], name) == 0)
                        return cm_err_set(err, EEXIST,
                                          "name \"%s\" is reserved: --allow-container "
                                          "(CONTAINER_MCP_ALLOWED_CONTAINERS) names it for a container the operator "
                                          "opens to dexec, dpatch and dinspect; choose another name",
                                          name);
        if (b->ops->list(b, true, &all, &n, err) < 0)
                return -1;
        for (size_t i = 0; i < n; i++) {
                taken |= all[i].name && strcmp(all[i].name, name) == 0;
                cm_container_info_clear(&all[i]);
        }
        free(all);
        if (taken)
                return name_taken(name, err);
        return 0;
}

/* The published ports as the backend set them up (host ports it picked for
 * hostPort 0 included), from its inspect record; NULL when it says none. */
static json_t *published_ports(cm_backend *b, const char *id) {
        cleanup_free char *text = NULL;
        cleanup_json json_t *j = NULL;
        const json_t *ports, *p;
        json_t *out;
        cm_err err = CM_ERR_INIT;
        size_t i;

        if (!b->ops->inspect || b->ops->inspect(b, id, &text, &err) < 0 || !(j = json_loads(text, 0, NULL)))
                return NULL;
        ports = json_object_get(j, "ports");
        if (!json_is_array(ports) || json_array_size(ports) == 0)
                return NULL;
        out = json_array();
        json_array_foreach(ports, i, p) {
                const char *proto = cm_json_str(p, "protocol");
                (void)json_array_append_new(out, json_pack("{s:s, s:I, s:I, s:s}", "hostIp", "127.0.0.1", "hostPort",
                                                           json_integer_value(json_object_get(p, "host_port")),
                                                           "containerPort",
                                                           json_integer_value(json_object_get(p, "container_port")),
                                                           "protocol", proto ? proto : "tcp"));
        }
        return out;
}

static int run_wait(mcp_call *call, cm_backend *b, run_plan *p, json_t **ret, char **ret_text, cm_err *err) {
        cm_cancel cancel = {mcp_call_cancel_fd(call)};
        cm_exec_result res = {0};
        int r = -1;
        mcp_call_progress(call, 0, 1, "starting");
        if (b->ops->run_wait(b, &p->spec, &cancel, &res, err) == 0) {
                *ret = cm_exec_result_json(&res);
                *ret_text = cm_exec_result_text(&res);
                r = 0;
        }
        cm_exec_result_clear(&res);
        return r;
}

/* The text of a detached run says all its structuredContent does: the
 * published ports too, which the agent needs to reach the service. */
static char *detached_text(const char *id, const char *name, const char *image, const json_t *ports) {
        char *text = NULL;
        size_t len = 0, i;
        const json_t *pt;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return NULL; /* the JSON of structuredContent is shown instead */
        fprintf(f, "started container %s", id);
        if (name)
                fprintf(f, " named \"%s\"", name);
        fprintf(f, " (image %s)", image);
        for (i = 0; i < json_array_size(ports); i++) {
                pt = json_array_get(ports, i);
                fprintf(f, "%s%s:%lld->%lld/%s", i ? ", " : "; ports: ", cm_json_str(pt, "hostIp"),
                        (long long)json_integer_value(json_object_get(pt, "hostPort")),
                        (long long)json_integer_value(json_object_get(pt, "containerPort")), cm_json_str(pt, "protocol"));
        }
        fprintf(f, "; use exec_in_container with container \"%s\"", id);
        (void)fclose(f);
        return text;
}

static int run_detached(cm_backend *b, run_plan *p, json_t **ret, char **ret_text, cm_err *err) {
        cleanup_free char *id = NULL;
        json_t *ports;
        if (b->ops->run(b, &p->spec, &id, err) < 0) {
                if (err->code == EEXIST && p->spec.name) /* lost a race for the name: say it as check_name_free */
                        (void)name_taken(p->spec.name, err);
                return -1;
        }
        ports = p->spec.n_ports > 0 ? published_ports(b, id) : NULL;
        *ret = json_pack("{s:s, s:s?, s:s, s:s}", "id", id, "name", p->spec.name, "image", p->spec.image, "state",
                         "running");
        if (ports)
                (void)json_object_set_new(*ret, "ports", ports);
        *ret_text = detached_text(id, p->spec.name, p->spec.image, ports);
        return 0;
}

static int run_container(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        cm_app *app = cm_call_app(call);
        bool wait = json_is_true(json_object_get(args, "wait"));
        cm_backend *b = cm_tool_backend(call, err);
        run_plan p = {0};
        int r = -1;

        if (!b || cm_tool_writable(call, "run_container", err) < 0)
                return -1;
        if ((wait ? !b->ops->run_wait : !b->ops->run) || !b->ops->list)
                return cm_tool_unsupported(b, "run containers yet", err);
        if (plan_run(call, args, &p, err) < 0 || (p.spec.name && check_name_free(call, b, p.spec.name, err) < 0))
                goto out;
        if (cm_tool_reserve_slot(app, b, err) < 0)
                goto out;
        r = wait ? run_wait(call, b, &p, ret, ret_text, err) : run_detached(b, &p, ret, ret_text, err);
        cm_tool_release_slot(app);
out:
        run_plan_free(&p);
        return r;
}

static int exec_in_container(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        cm_backend *b;
        cm_cancel cancel = {mcp_call_cancel_fd(call)};
        cm_container_info info = {0};
        cm_exec_spec spec = {0};
        cm_exec_result res = {0};
        char **argv = NULL;
        cm_kv *env = NULL;
        const char *in = cm_json_str(args, "stdin");
        const json_t *timeout = json_object_get(args, "timeout");
        int r = -1;

        if (cm_tool_writable(call, "exec_in_container", err) < 0 ||
            !(b = CM_TOOL_TARGET(call, cm_json_str(args, "container"), exec, "exec in containers yet", &info, err)))
                return -1;
        cm_tool_argv(json_object_get(args, "command"), &argv, &spec.argc);
        spec.argv = argv;
        if (json_object_get(args, "env") && cm_tool_env(json_object_get(args, "env"), &env, &spec.n_env, err) < 0)
                goto out;
        spec.env = env;
        spec.workdir = cm_json_str(args, "workdir");
        spec.stdin_data = in;
        spec.stdin_len = in ? strlen(in) : 0;
        spec.timeout_ms = timeout ? json_integer_value(timeout) * 1000 : cm_call_app(call)->cfg->timeout_ms;
        if (b->ops->exec(b, info.id, &spec, &cancel, &res, err) == 0) {
                *ret = cm_exec_result_json(&res);
                *ret_text = cm_exec_result_text(&res);
                r = 0;
        }
out:
        cm_exec_result_clear(&res);
        cm_container_info_clear(&info);
        cm_tool_argv_free(argv);
        free(env);
        return r;
}

/* Name, description and schemas of each: src/tools/defs/containers.json. */
static const cm_tool_handler handlers[] = {
        {"run_container", run_container},
        {"exec_in_container", exec_in_container},
};

const cm_tool_family cm_tools_containers = {__FILE__, handlers, ARRAY_SIZE(handlers)};
