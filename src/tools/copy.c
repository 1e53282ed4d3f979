/* copy_files: between an allowed host path and a running container. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "tools/common.h"
#include "util/cleanup.h"

static int copy_files(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        cm_backend *b = cm_tool_backend(call, err);
        const cm_config *cfg = cm_call_app(call)->cfg;
        bool to = strcmp(cm_json_str(args, "direction"), "to_container") == 0;
        const char *src = cm_json_str(args, "source"), *dst = cm_json_str(args, "destination");
        cleanup_free char *root = NULL, *rel = NULL;
        cm_container_info info = {0};
        cm_copy_stats st = {0};
        cm_host_path host;
        int r;

        if (!b || cm_tool_writable(call, "copy_files", err) < 0)
                return -1;
        if (to ? !b->ops->copy_in : !b->ops->copy_out)
                return cm_tool_unsupported(b, "copy files yet", err);
        if (cm_policy_host_split(cfg, to ? src : dst, to, &root, &rel, err) < 0)
                return -1;
        if ((to ? dst : src)[0] != '/')
                return cm_err_set(err, EINVAL, "%s \"%s\": give an absolute path in the container, e.g. /workspace",
                                  to ? "destination" : "source", to ? dst : src);
        if (cm_tool_find(call, b, cm_json_str(args, "container"), &info, err) < 0)
                return -1;
        host = (cm_host_path){root, rel};
        r = to ? b->ops->copy_in(b, info.id, &host, dst, &st, err) : b->ops->copy_out(b, info.id, src, &host, &st, err);
        if (r == 0) {
                *ret = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "container", info.id, "direction",
                                 to ? "to_container" : "from_container", "source", src, "destination", dst, "files",
                                 (json_int_t)st.files, "directories", (json_int_t)st.dirs, "symlinks",
                                 (json_int_t)st.symlinks, "skipped", (json_int_t)st.skipped, "bytes",
                                 (json_int_t)st.bytes);
                *ret_text = xasprintf("copied %llu files, %llu directories, %llu symlinks (%llu bytes) %s%s",
                                      (unsigned long long)st.files, (unsigned long long)st.dirs,
                                      (unsigned long long)st.symlinks, (unsigned long long)st.bytes,
                                      to ? "into the container" : "to the host",
                                      st.skipped ? "; skipped device nodes, FIFOs or sockets" : "");
        }
        cm_container_info_clear(&info);
        return r;
}

/* Name, description and schemas of each: src/tools/defs/copy.json. */
static const cm_tool_handler handlers[] = {
        {"copy_files", copy_files},
};

const cm_tool_family cm_tools_copy = {__FILE__, handlers, ARRAY_SIZE(handlers)};
