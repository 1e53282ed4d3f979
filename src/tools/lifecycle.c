/* list_containers, container_logs, container_stats, inspect_container,
 * stop_container, remove_container. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/common.h"
#include "tools/workbench.h"
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
                } else {
                        cleanup_free char *mine = cm_workbench_id(call);
                        (void)json_object_set_new(*ret, "sessionSandbox",
                                                  json_boolean(mine && strcmp(mine, info.id) == 0));
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

/* Name, description and schemas of each: src/tools/defs/lifecycle.json. */
static const cm_tool_handler handlers[] = {
        {"list_containers", list_containers},
        {"container_logs", container_logs},
        {"container_stats", container_stats},
        {"inspect_container", inspect_container},
        {"stop_container", stop_container},
        {"remove_container", remove_container},
};

const cm_tool_family cm_tools_lifecycle = {__FILE__, handlers, ARRAY_SIZE(handlers)};
