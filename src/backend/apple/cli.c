/* Finding and running the CLI, and its failures as errors an agent can act
 * on. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/apple/internal.h"
#include "util/cleanup.h"

#define ERR_SHOWN 600 /* bytes of the CLI's stderr quoted in an error */

static bool executable(const char *path) {
        struct stat st;
        return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* CONTAINER_MCP_APPLE_CLI, else the first `container` on PATH: looked up at
 * each call, so installing the CLI needs no restart. */
char *apple_find_cli(cm_err *err) {
        const char *env = getenv("CONTAINER_MCP_APPLE_CLI"), *path = getenv("PATH");
        if (env && env[0]) {
                if (env[0] == '/' && executable(env))
                        return xstrdup(env);
                cm_err_set(err, ENOENT,
                           "CONTAINER_MCP_APPLE_CLI=%s is not an absolute path to an executable; set it to Apple's "
                           "`container` (e.g. /usr/local/bin/container), or " APPLE_FIX_MISSING,
                           env);
                return NULL;
        }
        cleanup_free char *copy = xstrdup(path ? path : "/usr/bin:/bin");
        char *save = NULL;
        for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
                cleanup_free char *cand = xasprintf("%s/container", dir);
                if (dir[0] == '/' && executable(cand))
                        return steal_pointer(&cand);
        }
        cm_err_set(err, ENOENT,
                   "Apple's container CLI was not found (no `container` on PATH, CONTAINER_MCP_APPLE_CLI unset): " APPLE_FIX_MISSING);
        return NULL;
}

/* The CLI's own words, cut short and on one line, for an error. */
static char *said(const cm_exec_result *r) {
        const char *src = r->err_len ? r->err : r->out;
        size_t n = strlen(src);
        char *s = xstrndup(src, n > ERR_SHOWN ? ERR_SHOWN : n);
        for (char *p = s; *p; p++)
                if (*p == '\n' || *p == '\r')
                        *p = ' ';
        for (size_t k = strlen(s); k > 0 && s[k - 1] == ' ';)
                s[--k] = 0;
        return s;
}

/* A failed CLI run as an error an agent can act on. */
int apple_cli_failed(const char *what, const cm_exec_result *r, int64_t timeout_ms, cm_err *err) {
        cleanup_free char *words = said(r);
        if (r->timed_out)
                return cm_err_set(err, ETIMEDOUT,
                                  "`container %s` did not finish within %lld ms (CONTAINER_MCP_APPLE_TIMEOUT_MS) and "
                                  "was killed; check the service with system_status, or `container system status`",
                                  what, (long long)timeout_ms);
        if (strstr(words, "not found") || strstr(words, "notFound") || strstr(words, "No such container"))
                return cm_err_set(err, ENOENT, "`container %s`: %s", what, words);
        if (strstr(words, "already exists"))
                return cm_err_set(err, EEXIST, "`container %s`: %s", what, words);
        if (r->exit_code == 64 || strstr(words, "Unexpected argument") || strstr(words, "Unknown option"))
                return cm_err_set(err, ENOTSUP,
                                  "this container CLI does not understand `container %s` (%s); update Apple's "
                                  "container CLI (`container --version`)",
                                  what, words);
        if (strstr(words, "XPC") || strstr(words, "apiserver"))
                return cm_err_set(err, EHOSTDOWN,
                                  "`container %s`: %s; the container system service is not running: call "
                                  "system_status with start: true, or run `container system start`",
                                  what, words);
        return cm_err_set(err, EIO, "`container %s` failed (exit %d): %s", what, r->exit_code, words[0] ? words : "no message");
}

/* Run argv (argv[0] the CLI) with the backend's deadline; 0 only when it
 * exited 0.  *ret keeps its output either way (cleared by the caller). */
int apple_run_cli(const apple *a, const apple_argv *argv, const char *what, size_t cap, const cm_cancel *cancel,
                   int64_t extra_ms, cm_exec_result *ret, cm_err *err) {
        cm_spawn_io io = {NULL, 0, a->timeout_ms + extra_ms, cancel, cap};
        if (cm_spawn(argv->v, &io, ret, err) < 0)
                return -1;
        if (ret->exit_code != 0 || ret->timed_out)
                return apple_cli_failed(what, ret, io.timeout_ms, err);
        return 0;
}

/* A command of one container, its output thrown away. */
int apple_id_command(const apple *a, const char *verb, const char *const *flags, const char *id, int64_t extra_ms,
                      cm_err *err) {
        cleanup_free char *cli = apple_find_cli(err);
        apple_argv argv = {0};
        cm_exec_result r = {0};
        int ret;
        if (!cli || apple_id_argv(cli, verb, flags, id, &argv, err) < 0)
                return -1;
        ret = apple_run_cli(a, &argv, verb, 1 << 16, NULL, extra_ms, &r, err);
        cm_exec_result_clear(&r);
        apple_argv_free(&argv);
        return ret;
}

