/* list_containers, container_logs, container_stats, inspect_container,
 * stop_container, remove_container. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/common.h"
#include "util/cleanup.h"
#include "util/when.h"

static json_t *info_json(const cm_container_info *c) {
        json_t *labels = json_object();
        for (size_t i = 0; i < c->n_labels; i++)
                json_object_set_new(labels, c->labels[i].key, json_string(c->labels[i].value));
        return json_pack("{s:s, s:s, s:s, s:s, s:i, s:I, s:o}", "id", c->id, "name", c->name ? c->name : "", "image",
                         c->image ? c->image : "", "state", c->state ? c->state : "unknown", "exitCode", c->exit_code,
                         "createdAt", (json_int_t)c->created_at, "labels", labels);
}

static int list_containers(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        cm_backend *b = cm_tool_backend(call, err);
        bool unmanaged = cm_call_app(call)->cfg->allow_unmanaged;
        cm_container_info *all = NULL;
        size_t n = 0;
        json_t *list;
        if (!b)
                return -1;
        if (!b->ops->list)
                return cm_tool_unsupported(b, "list containers yet", err);
        if (b->ops->list(b, json_is_true(json_object_get(args, "all")), &all, &n, err) < 0)
                return -1;
        list = json_array();
        for (size_t i = 0; i < n; i++) {
                /* Only ours and this session's (or shared), unless the
                 * operator opened the rest up. */
                if ((unmanaged || cm_container_managed(&all[i])) && cm_tool_visible(call, &all[i]))
                        json_array_append_new(list, info_json(&all[i]));
                cm_container_info_clear(&all[i]);
        }
        free(all);
        *ret = json_pack("{s:o}", "containers", list);
        return 0;
}

/* `since`: unix seconds as a number, or what cm_parse_when reads. */
static int since_ms(const json_t *since, int64_t *ret, cm_err *err) {
        cm_err why = CM_ERR_INIT;
        struct timespec now;
        *ret = 0;
        if (!since)
                return 0;
        if (json_is_integer(since)) {
                *ret = (int64_t)json_integer_value(since) * 1000;
                return 0;
        }
        (void)clock_gettime(CLOCK_REALTIME, &now);
        if (cm_parse_when(json_string_value(since), (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000, ret, &why) < 0)
                return cm_err_set(err, EINVAL, "since: %s", why.msg);
        return 0;
}

static int container_logs(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        cm_container_info info = {0};
        const json_t *tail = json_object_get(args, "tail");
        cleanup_free char *logs = NULL;
        size_t len = 0;
        int64_t since = 0;
        cm_backend *b;
        int r;
        if (since_ms(json_object_get(args, "since"), &since, err) < 0)
                return -1;
        if (!(b = CM_TOOL_TARGET(call, cm_json_str(args, "container"), logs, "read logs yet", &info, err)))
                return -1;
        r = b->ops->logs(b, info.id, tail ? (size_t)json_integer_value(tail) : 0, since, &logs, &len, err);
        if (r == 0) {
                *ret = json_pack("{s:s, s:o}", "container", info.id, "logs", cm_json_bytes(logs, len));
                const json_t *text = json_object_get(*ret, "logs");
                *ret_text = cm_text_of_bytes(json_string_value(text), json_string_length(text));
        }
        cm_container_info_clear(&info);
        return r;
}

static int container_stats(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        cm_container_info info = {0};
        cm_stats st = {0};
        cm_backend *b;
        int r;
        if (!(b = CM_TOOL_TARGET(call, cm_json_str(args, "container"), stats, "report stats yet", &info, err)))
                return -1;
        r = b->ops->stats(b, info.id, &st, err);
        if (r == 0)
                *ret = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s}", "container", info.id, "cpuUsec",
                                 (json_int_t)st.cpu_usec, "memoryBytes", (json_int_t)st.memory_bytes,
                                 "memoryPeakBytes", (json_int_t)st.memory_peak_bytes, "memoryLimitBytes",
                                 (json_int_t)st.memory_limit_bytes, "pids", (json_int_t)st.pids, "ioReadBytes",
                                 (json_int_t)st.io_read_bytes, "ioWriteBytes", (json_int_t)st.io_write_bytes,
                                 "source", st.source ? st.source : "");
        cm_container_info_clear(&info);
        return r;
}

static int inspect_container(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        cm_container_info info = {0};
        cleanup_free char *text = NULL;
        cm_backend *b;
        int r;
        if (!(b = CM_TOOL_TARGET(call, cm_json_str(args, "container"), inspect, "inspect containers yet", &info, err)))
                return -1;
        r = b->ops->inspect(b, info.id, &text, err);
        if (r == 0) {
                *ret = json_loads(text, 0, NULL);
                if (!json_is_object(*ret)) {
                        json_decref(*ret);
                        *ret = NULL;
                        r = cm_err_set(err, EIO, "the %s backend returned an unreadable inspect document",
                                       b->ops->name);
                }
        }
        cm_container_info_clear(&info);
        return r;
}

static int stop_container(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        cm_container_info info = {0};
        const json_t *grace = json_object_get(args, "timeout");
        cm_backend *b;
        int r;
        if (cm_tool_writable(call, "stop_container", err) < 0)
                return -1;
        if (!(b = CM_TOOL_TARGET(call, cm_json_str(args, "container"), stop, "stop containers yet", &info, err)))
                return -1;
        r = b->ops->stop(b, info.id, grace ? (int)json_integer_value(grace) : 10, err);
        if (r == 0)
                *ret = json_pack("{s:s, s:b}", "container", info.id, "stopped", 1);
        cm_container_info_clear(&info);
        return r;
}

static int remove_container(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        cm_container_info info = {0};
        cm_backend *b;
        int r;
        if (cm_tool_writable(call, "remove_container", err) < 0)
                return -1;
        if (!(b = CM_TOOL_TARGET(call, cm_json_str(args, "container"), remove, "remove containers yet", &info, err)))
                return -1;
        r = b->ops->remove(b, info.id, json_is_true(json_object_get(args, "force")), err);
        if (r == 0)
                *ret = json_pack("{s:s, s:b}", "container", info.id, "removed", 1);
        cm_container_info_clear(&info);
        return r;
}

#define CONTAINER_ARG "\"container\":{\"type\":\"string\",\"minLength\":1,\"description\":\"Id or name.\"}"
#define ONE_CONTAINER(extra)                                                                                           \
        "{\"type\":\"object\",\"properties\":{" CONTAINER_ARG extra "},\"required\":[\"container\"],"                 \
        "\"additionalProperties\":false}"

static const mcp_tool tools[] = {
        {
                .name = "list_containers",
                .title = "List containers",
                .description = "List this session's containers (running ones; all: true adds stopped ones) "
                               "and the ones the operator shares, with id, name, image, state and labels.",
                .input_schema = "{\"type\":\"object\",\"properties\":{\"all\":{\"type\":\"boolean\"}},"
                                "\"additionalProperties\":false}",
                .output_schema = "{\"type\":\"object\",\"properties\":{\"containers\":{\"type\":\"array\","
                                 "\"items\":{\"type\":\"object\"}}},\"required\":[\"containers\"]}",
                .hints = MCP_HINT_READ_ONLY | MCP_HINT_IDEMPOTENT,
                .toolset = "containers",
                .handler = list_containers,
        },
        {
                .name = "container_logs",
                .title = "Container logs",
                .description = "Output of a container's main process (stdout and stderr, capped per container).",
                .input_schema = ONE_CONTAINER(
                        ",\"tail\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":100000,"
                        "\"description\":\"Only the last N lines (0: all).\"},"
                        "\"since\":{\"type\":[\"string\",\"integer\"],\"minimum\":0,\"maxLength\":64,"
                        "\"description\":\"Only output written since then, to the second: unix seconds, RFC 3339 "
                        "(2026-11-29T13:00:00Z; no zone: UTC), or a duration back from now (10m, 1h30m). With "
                        "tail, the last N lines of that.\"}"),
                .output_schema = "{\"type\":\"object\",\"properties\":{\"container\":{\"type\":\"string\"},"
                                 "\"logs\":{\"type\":\"string\"}},\"required\":[\"container\",\"logs\"]}",
                .hints = MCP_HINT_READ_ONLY,
                .toolset = "containers",
                .handler = container_logs,
        },
        {
                .name = "container_stats",
                .title = "Container stats",
                .description = "A snapshot of a container's CPU time, memory (current, peak, limit), process "
                               "count and block I/O. `source` says where the figures come from: the cgroup, or "
                               "/proc where the cgroup lacks them (memory is then the sum of resident sets, and "
                               "peak 0: unknown).",
                .input_schema = ONE_CONTAINER(""),
                .output_schema = "{\"type\":\"object\",\"properties\":{\"container\":{\"type\":\"string\"},"
                                 "\"cpuUsec\":{\"type\":\"integer\"},\"memoryBytes\":{\"type\":\"integer\"},"
                                 "\"memoryPeakBytes\":{\"type\":\"integer\"},"
                                 "\"memoryLimitBytes\":{\"type\":\"integer\"},\"pids\":{\"type\":\"integer\"},"
                                 "\"ioReadBytes\":{\"type\":\"integer\"},\"ioWriteBytes\":{\"type\":\"integer\"},"
                                 "\"source\":{\"type\":\"string\"}},\"required\":[\"container\",\"cpuUsec\","
                                 "\"memoryBytes\",\"pids\",\"source\"]}",
                .hints = MCP_HINT_READ_ONLY,
                .toolset = "containers",
                .handler = container_stats,
        },
        {
                .name = "inspect_container",
                .title = "Inspect a container",
                .description = "Full detail of a container: configuration, mounts, labels, limits, network, state.",
                .input_schema = ONE_CONTAINER(""),
                .output_schema = "{\"type\":\"object\"}",
                .hints = MCP_HINT_READ_ONLY | MCP_HINT_IDEMPOTENT,
                .toolset = "containers",
                .handler = inspect_container,
        },
        {
                .name = "stop_container",
                .title = "Stop a container",
                .description = "Stop a running container: SIGTERM, then SIGKILL after timeout seconds (10).",
                .input_schema = ONE_CONTAINER(",\"timeout\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":3600}"),
                .output_schema = "{\"type\":\"object\",\"properties\":{\"container\":{\"type\":\"string\"},"
                                 "\"stopped\":{\"type\":\"boolean\"}},\"required\":[\"container\",\"stopped\"]}",
                .hints = MCP_HINT_DESTRUCTIVE | MCP_HINT_IDEMPOTENT,
                .toolset = "containers",
                .handler = stop_container,
        },
        {
                .name = "remove_container",
                .title = "Remove a container",
                .description = "Remove a container and everything it wrote. force: true removes a running one.",
                .input_schema = ONE_CONTAINER(",\"force\":{\"type\":\"boolean\"}"),
                .output_schema = "{\"type\":\"object\",\"properties\":{\"container\":{\"type\":\"string\"},"
                                 "\"removed\":{\"type\":\"boolean\"}},\"required\":[\"container\",\"removed\"]}",
                .hints = MCP_HINT_DESTRUCTIVE,
                .toolset = "containers",
                .handler = remove_container,
        },
};

const cm_toolset cm_toolset_lifecycle = {"containers", tools, ARRAY_SIZE(tools)};
