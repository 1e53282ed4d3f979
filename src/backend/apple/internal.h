/* The apple backend's parts, for its files and its unit tests.  Only POSIX
 * and jansson here and in every file of this directory: it must build on
 * macOS, where the CLI it drives runs. */
#ifndef CM_APPLE_INTERNAL_H
#define CM_APPLE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/spawn.h"

/* A growing, NULL-terminated argv of owned strings. */
typedef struct apple_argv {
        char **v;
        size_t n, cap;
} apple_argv;

void apple_argv_add(apple_argv *a, const char *s);
__attribute__((format(printf, 2, 3))) void apple_argv_addf(apple_argv *a, const char *fmt, ...);
void apple_argv_free(apple_argv *a);

/* argv builders (argv.c).  Each starts with `cli`, refuses before any spawn
 * a value the CLI would read as one of its own flags (a leading '-' where an
 * option's value or the first word of a command goes) and what its syntax
 * cannot carry (':' in a --volume or cp path), and fills *ret only on
 * success. */
int apple_run_argv(const char *cli, const cm_run_spec *s, const char *name, bool detach, apple_argv *ret,
                   cm_err *err);
int apple_exec_argv(const char *cli, const char *id, const cm_exec_spec *s, apple_argv *ret, cm_err *err);
int apple_cp_argv(const char *cli, const char *id, const char *host_path, const char *container_path, bool to_container,
                  apple_argv *ret, cm_err *err);
/* A command of one container: `container VERB [flags...] ID`. */
int apple_id_argv(const char *cli, const char *verb, const char *const *flags, const char *id, apple_argv *ret,
                  cm_err *err);

/* Parsers of the CLI's JSON (parse.c).  `container ls --all --format json`
 * prints every container whatever --all says; `all` false keeps the running
 * ones. */
int apple_parse_list(const char *text, size_t len, bool all, cm_container_info **ret, size_t *ret_n, cm_err *err);
/* `container inspect ID`: a JSON array, empty when there is no such
 * container (-ENOENT).  *ret_json is our inspect document: the container's
 * own object (status, configuration, networks, as the seed's users read
 * them) with the common fields (id, name, image, state, runtime, labels,
 * argv, env, workdir, network, limits, ports) added. */
int apple_parse_inspect(const char *text, size_t len, const char *id, char **ret_json, cm_err *err);
/* `container stats --no-stream --format json ID`. */
int apple_parse_stats(const char *text, size_t len, cm_stats *ret, cm_err *err);
/* A Swift Date as JSONEncoder writes it by default (seconds since
 * 2001-01-01) or an RFC 3339 string, as unix seconds; 0 when neither. */
int64_t apple_unix_time(const void *json_value);

/* The backend. */
typedef struct apple {
        cm_backend base;
        int64_t timeout_ms;      /* every CLI run but exec and wait runs (their own timeout) */
        char timeout_error[256]; /* a bad CONTAINER_MCP_APPLE_TIMEOUT_MS, else "" */
} apple;

#define APPLE_JSON_CAP (32u << 20) /* ls/inspect/stats output kept; more is refused */
#define APPLE_LOG_CAP (4u << 20)   /* as the native runtime's log cap */
#define APPLE_FIX_MISSING "install Apple's container CLI (macOS 26, Apple silicon) or choose --backend native|docker"

/* cli.c */
char *apple_find_cli(cm_err *err);
int apple_cli_failed(const char *what, const cm_exec_result *r, int64_t timeout_ms, cm_err *err);
/* Run argv with the backend's deadline (+ extra_ms); 0 only when it exited
 * 0.  *ret keeps the output either way (the caller clears it). */
int apple_run_cli(const apple *a, const apple_argv *argv, const char *what, size_t cap, const cm_cancel *cancel,
                  int64_t extra_ms, cm_exec_result *ret, cm_err *err);
/* `container VERB FLAGS... ID`, its output thrown away. */
int apple_id_command(const apple *a, const char *verb, const char *const *flags, const char *id, int64_t extra_ms,
                     cm_err *err);

/* The operations (run.c, manage.c, copy.c). */
int apple_run(cm_backend *b, const cm_run_spec *spec, char **ret_id, cm_err *err);
int apple_run_wait(cm_backend *b, const cm_run_spec *spec, const cm_cancel *cancel, cm_exec_result *ret, cm_err *err);
int apple_exec(cm_backend *b, const char *id, const cm_exec_spec *spec, const cm_cancel *cancel, cm_exec_result *ret,
               cm_err *err);
int apple_list(cm_backend *b, bool all, cm_container_info **ret, size_t *ret_n, cm_err *err);
int apple_inspect(cm_backend *b, const char *id, char **ret_json, cm_err *err);
int apple_logs(cm_backend *b, const char *id, size_t tail, int64_t since_ms, char **ret, size_t *ret_len, cm_err *err);
int apple_stats(cm_backend *b, const char *id, cm_stats *ret, cm_err *err);
int apple_stop(cm_backend *b, const char *id, int grace_sec, cm_err *err);
int apple_remove(cm_backend *b, const char *id, bool force, cm_err *err);
int apple_copy_in(cm_backend *b, const char *id, const cm_host_path *src, const char *container_path,
                  cm_copy_stats *ret, cm_err *err);
int apple_copy_out(cm_backend *b, const char *id, const char *container_path, const cm_host_path *dst,
                   cm_copy_stats *ret, cm_err *err);

#endif
