/* The apple backend: Apple's `container` CLI (macOS 26, Apple silicon).
 * Every operation is one or two runs of the CLI: argv.c builds them,
 * spawn.c runs them, parse.c reads their JSON.  What the CLI cannot do is a
 * NULL operation (the file tools) or an error that says so; nothing in this
 * directory is Linux-only, so it builds on macOS. */
#include "backend/apple/apple.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/apple/internal.h"
#include "util/cleanup.h"
#include "util/json.h"

#define DEFAULT_TIMEOUT_MS 120000 /* the first seed's base CLI timeout */

/* `container ARGS...` (no container id), its result kept. */
static int system_cmd(const apple *a, const char *cli, const char *const *args, cm_exec_result *ret, cm_err *err) {
        apple_argv argv = {0};
        cm_spawn_io io = {NULL, 0, a->timeout_ms, NULL, 1 << 16};
        int r;
        apple_argv_add(&argv, cli);
        for (size_t i = 0; args[i]; i++)
                apple_argv_add(&argv, args[i]);
        r = cm_spawn(argv.v, &io, ret, err);
        apple_argv_free(&argv);
        return r;
}

static void trim(char *s) {
        size_t n = strlen(s);
        while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
                s[--n] = 0;
}

/* Is the container system service up?  `container system status` exits 0
 * when its apiserver answers. */
static int service_running(const apple *a, const char *cli, bool *ret, char *why, size_t why_len) {
        cm_exec_result r = {0};
        cm_err err = CM_ERR_INIT;
        if (system_cmd(a, cli, (const char *const[]){"system", "status", NULL}, &r, &err) < 0) {
                (void)snprintf(why, why_len, "%.390s", err.msg);
                return -1;
        }
        *ret = r.exit_code == 0 && !r.timed_out;
        if (!*ret) {
                trim(r.out);
                trim(r.err);
                (void)snprintf(why, why_len, "%.200s%s%.180s",
                               r.timed_out ? "`container system status` timed out" : r.out,
                               r.out[0] && r.err[0] ? "; " : "", r.err);
        }
        cm_exec_result_clear(&r);
        return 0;
}

static void apple_status(cm_backend *b, cm_backend_status *ret) {
        apple *a = (apple *)b;
        cm_err err = CM_ERR_INIT;
        cm_exec_result r = {0};
        cleanup_free char *cli = NULL;
        char why[400] = "";
        bool running = false;

        memset(ret, 0, sizeof *ret);
        if (a->timeout_error[0]) {
                (void)snprintf(ret->reason, sizeof ret->reason, "%s", a->timeout_error);
                (void)snprintf(ret->fix, sizeof ret->fix, "fix CONTAINER_MCP_APPLE_TIMEOUT_MS, or unset it (120000)");
                return;
        }
        if (!(cli = apple_find_cli(&err))) {
                (void)snprintf(ret->reason, sizeof ret->reason, "%.500s", err.msg);
                (void)snprintf(ret->fix, sizeof ret->fix, "%s", APPLE_FIX_MISSING);
                return;
        }
        if (system_cmd(a, cli, (const char *const[]){"--version", NULL}, &r, &err) == 0 && r.exit_code == 0) {
                trim(r.out);
                (void)snprintf(ret->version, sizeof ret->version, "%.120s", r.out);
        }
        cm_exec_result_clear(&r);
        {
                cleanup_json json_t *det = json_pack("{s:s, s:I}", "cli", cli, "timeoutMs", (json_int_t)a->timeout_ms);
                if (service_running(a, cli, &running, why, sizeof why) == 0)
                        (void)json_object_set_new(det, "serviceRunning", json_boolean(running));
                cleanup_free char *text = cm_json_dump(det);
                (void)snprintf(ret->details, sizeof ret->details, "%s", text);
        }
        ret->available = running;
        if (!running) {
                (void)snprintf(ret->reason, sizeof ret->reason, "the container system service is not running: %.400s",
                               why[0] ? why : "no answer");
                (void)snprintf(ret->fix, sizeof ret->fix,
                               "call system_status with start: true, or run `container system start`");
        }
}

/* The seed's system_status with start: true. */
static int apple_service_start(cm_backend *b, bool *ret_started, cm_err *err) {
        apple *a = (apple *)b;
        cleanup_free char *cli = apple_find_cli(err);
        cm_exec_result r = {0};
        char why[400] = "";
        bool running = false;
        int rc;
        if (!cli)
                return -1;
        if (service_running(a, cli, &running, why, sizeof why) < 0)
                return cm_err_set(err, EIO, "%s", why);
        *ret_started = false;
        if (running)
                return 0;
        rc = system_cmd(a, cli, (const char *const[]){"system", "start", NULL}, &r, err);
        if (rc == 0 && (r.exit_code != 0 || r.timed_out))
                rc = apple_cli_failed("system start", &r, a->timeout_ms, err);
        cm_exec_result_clear(&r);
        if (rc < 0)
                return -1;
        *ret_started = true;
        return 0;
}

static void apple_free(cm_backend *b) { free(b); }

static const cm_backend_ops apple_ops = {
        .name = "apple",
        .status = apple_status,
        .run = apple_run,
        .run_wait = apple_run_wait,
        .exec = apple_exec,
        .list = apple_list,
        .inspect = apple_inspect,
        .logs = apple_logs,
        .stats = apple_stats,
        .stop = apple_stop,
        .remove = apple_remove,
        .copy_in = apple_copy_in,
        .copy_out = apple_copy_out,
        .service_start = apple_service_start,
        .free = apple_free,
};

static int64_t parse_timeout(const char *s, char *why, size_t why_len) {
        char *end;
        long long v;
        if (!s || !s[0])
                return DEFAULT_TIMEOUT_MS;
        errno = 0;
        v = strtoll(s, &end, 10);
        if (errno || *end || v < 100 || v > 86400000) {
                (void)snprintf(why, why_len,
                               "CONTAINER_MCP_APPLE_TIMEOUT_MS=%.40s: give milliseconds from 100 to 86400000", s);
                return DEFAULT_TIMEOUT_MS;
        }
        return v;
}

cm_backend *cm_apple_open(void) {
        apple *a = xcalloc(1, sizeof *a);
        a->base.ops = &apple_ops;
        a->base.priv = a;
        a->timeout_ms = parse_timeout(getenv("CONTAINER_MCP_APPLE_TIMEOUT_MS"), a->timeout_error,
                                      sizeof a->timeout_error);
        return &a->base;
}
