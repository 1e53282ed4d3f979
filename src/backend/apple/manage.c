/* list, inspect, logs, stats, stop, remove: one CLI run each. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/apple/internal.h"
#include "util/cleanup.h"

/* Run argv and keep its stdout: 0 and *ret filled only when it exited 0. */
static int output_of(const apple *a, apple_argv *argv, const char *what, size_t cap, int64_t extra_ms,
                     cm_exec_result *ret, cm_err *err) {
        int r = apple_run_cli(a, argv, what, cap, NULL, extra_ms, ret, err);
        apple_argv_free(argv);
        if (r == 0 && ret->truncated)
                r = cm_err_set(err, E2BIG, "`container %s` printed more than %zu bytes; refused rather than cut", what,
                               cap);
        if (r < 0)
                cm_exec_result_clear(ret);
        return r;
}

int apple_list(cm_backend *b, bool all, cm_container_info **ret, size_t *ret_n, cm_err *err) {
        cleanup_free char *cli = apple_find_cli(err);
        apple_argv argv = {0};
        cm_exec_result r = {0};
        int rc;
        if (!cli)
                return -1;
        apple_argv_add(&argv, cli);
        apple_argv_add(&argv, "ls");
        apple_argv_add(&argv, "--all");
        apple_argv_add(&argv, "--format");
        apple_argv_add(&argv, "json");
        if (output_of((apple *)b, &argv, "ls --all --format json", APPLE_JSON_CAP, 0, &r, err) < 0)
                return -1;
        rc = apple_parse_list(r.out, r.out_len, all, ret, ret_n, err);
        cm_exec_result_clear(&r);
        return rc;
}

static int id_output(cm_backend *b, const char *verb, const char *const *flags, const char *id, size_t cap,
                     cm_exec_result *ret, cm_err *err) {
        cleanup_free char *cli = apple_find_cli(err);
        apple_argv argv = {0};
        if (!cli || apple_id_argv(cli, verb, flags, id, &argv, err) < 0)
                return -1;
        return output_of((apple *)b, &argv, verb, cap, 0, ret, err);
}

int apple_inspect(cm_backend *b, const char *id, char **ret_json, cm_err *err) {
        cm_exec_result r = {0};
        int rc;
        if (id_output(b, "inspect", NULL, id, APPLE_JSON_CAP, &r, err) < 0)
                return -1;
        rc = apple_parse_inspect(r.out, r.out_len, id, ret_json, err);
        cm_exec_result_clear(&r);
        return rc;
}

int apple_logs(cm_backend *b, const char *id, size_t tail, int64_t since_ms, char **ret, size_t *ret_len,
               cm_err *err) {
        cm_exec_result r = {0};
        char n[32];
        if (since_ms > 0)
                return cm_err_set(err, ENOTSUP,
                                  "the apple backend cannot select logs by time: Apple's `container logs` has no "
                                  "--since; leave since out, or use tail");
        (void)snprintf(n, sizeof n, "%zu", tail);
        if (id_output(b, "logs", tail ? (const char *const[]){"-n", n, NULL} : NULL, id, APPLE_LOG_CAP, &r, err) < 0)
                return -1;
        *ret = steal_pointer(&r.out);
        *ret_len = r.out_len;
        cm_exec_result_clear(&r);
        return 0;
}

int apple_stats(cm_backend *b, const char *id, cm_stats *ret, cm_err *err) {
        cm_exec_result r = {0};
        int rc;
        if (id_output(b, "stats", (const char *const[]){"--no-stream", "--format", "json", NULL}, id, APPLE_JSON_CAP,
                      &r, err) < 0) {
                if (err->code == ENOTSUP)
                        cm_err_prefix(err, "the apple backend cannot report stats with this CLI");
                return -1;
        }
        rc = apple_parse_stats(r.out, r.out_len, ret, err);
        cm_exec_result_clear(&r);
        return rc;
}

int apple_stop(cm_backend *b, const char *id, int grace_sec, cm_err *err) {
        char t[16];
        (void)snprintf(t, sizeof t, "%d", grace_sec < 0 ? 0 : grace_sec);
        /* The CLI waits the grace itself: our deadline comes after it. */
        return apple_id_command((apple *)b, "stop", (const char *const[]){"-t", t, NULL}, id, (int64_t)grace_sec * 1000,
                                err);
}

int apple_remove(cm_backend *b, const char *id, bool force, cm_err *err) {
        return apple_id_command((apple *)b, "delete", force ? (const char *const[]){"--force", NULL} : NULL, id, 0, err);
}
