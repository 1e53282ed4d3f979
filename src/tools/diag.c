/* The diagnostics family (off unless CONTAINER_MCP_TOOLSETS names it):
 * `echo`, the cheapest possible call, for measuring protocol overhead, and
 * `sleep`, a long call that reports progress and stops when cancelled, for
 * checking a client's progress and cancellation handling end to end. */
#include <poll.h>
#include <time.h>

#include "tools/tools.h"
#include "util/cleanup.h"
#include "util/clock.h"
#include "util/json.h"

static int echo(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        const char *text = cm_json_str(args, "text");
        *ret = json_pack("{s:s}", "text", text);
        *ret_text = xstrdup(text);
        return 0;
}

/* Sleep until `deadline` or until the call is cancelled; true if cancelled. */
static bool wait_until(mcp_call *call, int64_t deadline) {
        struct pollfd p = {mcp_call_cancel_fd(call), POLLIN, 0};
        for (int64_t left; (left = deadline - cm_now_ms()) > 0;) {
                if (poll(&p, 1, (int)left) > 0 || mcp_call_cancelled(call))
                        return true;
        }
        return mcp_call_cancelled(call);
}

static int do_sleep(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        json_int_t ms = json_integer_value(json_object_get(args, "ms"));
        json_t *st = json_object_get(args, "steps");
        json_int_t steps = st ? json_integer_value(st) : 10, done = 0;
        int64_t start = cm_now_ms();
        bool cancelled = false;

        mcp_call_log(call, "info", "sleeping %lld ms in %lld steps", (long long)ms, (long long)steps);
        /* Progress goes out as each slice starts (0 .. steps-1 of steps):
         * the result itself says "done", and a last notification sent right
         * before it can reach a client after the result, which the SDK
         * clients report as a progress for an unknown token. */
        while (done < steps && !cancelled) {
                mcp_call_progress(call, (double)done, (double)steps, "sleeping");
                cancelled = wait_until(call, start + ms * (done + 1) / steps);
                done += !cancelled;
        }
        *ret = json_pack("{s:I, s:b}", "sleptMs", (json_int_t)(cm_now_ms() - start), "cancelled", cancelled);
        return 0;
}

/* Name, description and schemas of each: src/tools/defs/diagnostics.json. */
static const cm_tool_handler handlers[] = {
        {"echo", echo, true}, /* quick: never blocks */
        {"sleep", do_sleep},
};

const cm_tool_family cm_tools_diagnostics = {__FILE__, handlers, ARRAY_SIZE(handlers)};
