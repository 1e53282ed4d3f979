/* dinspect (toolset codex, issue 11): what a process in a container may
 * do, in a few hundred bytes.  The backend's `isolation` op gives the view
 * (the native runtime reads it from the kernel, backend/native/isolation.c);
 * a backend without it is asked for its inspect document, mapped from
 * Docker's format (backend/dinspect_docker.c) when it is the Engine API's
 * own. */
#include <errno.h>

#include "backend/dinspect_docker.h"
#include "tools/common.h"
#include "util/cleanup.h"

static int view_of(cm_backend *b, const char *id, json_t **ret, cm_err *err) {
        cleanup_free char *text = NULL;
        cleanup_json json_t *doc = NULL;
        int r = b->ops->isolation ? b->ops->isolation(b, id, &text, err) : b->ops->inspect(b, id, &text, err);
        if (r < 0)
                return r;
        doc = json_loads(text, 0, NULL);
        if (b->ops->isolation && json_is_object(doc)) {
                *ret = steal_pointer(&doc);
                return 0;
        }
        if ((*ret = json_is_object(doc) ? cm_dinspect_docker(doc, b->ops->name) : NULL))
                return 0;
        return cm_err_set(err, EIO,
                          "the %s backend's inspect document of %s is not one dinspect reads (Docker Engine API "
                          "JSON); inspect_container shows it whole",
                          b->ops->name, id);
}

static int dinspect(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        cm_container_info info = {0};
        cm_backend *b = CM_TOOL_CODEX_TARGET(call, cm_json_str(args, "container"), inspect, "inspect containers yet",
                                             &info, err);
        int r;
        (void)ret_text; /* the text is the JSON itself: it is already compact */
        if (!b)
                return -1;
        r = view_of(b, info.id, ret, err);
        cm_container_info_clear(&info);
        return r;
}

/* Name, description and schemas: src/tools/defs/dinspect.json. */
static const cm_tool_handler handlers[] = {
        {"dinspect", dinspect},
};

const cm_tool_family cm_tools_dinspect = {__FILE__, handlers, ARRAY_SIZE(handlers)};
