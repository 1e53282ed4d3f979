/* system_run_command, system_run_python, system_env_var: the seed's sandbox
 * tools, run in the session's sandbox (workbench.h) or in `container`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/cmdline.h"
#include "tools/python.h"
#include "tools/workbench.h"
#include "util/cleanup.h"

#define OUTPUT_CAP ((size_t)1 << 20) /* per stream, as exec_in_container */
#define GRACE_SEC 2                  /* python: its own timer first, then exec's tree kill */

/* A timeout in ms from the call's `timeout` (seconds), refused over the
 * maximum: a silent clamp would cut a long job short with no word why. */
static int plan_timeout(mcp_call *call, const json_t *args, int64_t *ret, cm_err *err) {
        const cm_config *cfg = cm_call_app(call)->cfg;
        const json_t *t = json_object_get(args, "timeout");
        json_int_t s = t ? json_integer_value(t) : cfg->command_timeout_sec;
        if (s > cfg->command_timeout_max_sec)
                return cm_err_set(err, EINVAL,
                                  "timeout %lld s is over the maximum of %u s (CONTAINER_MCP_COMMAND_TIMEOUT_MAX); ask "
                                  "for less, run it detached with run_container, or have the operator raise "
                                  "CONTAINER_MCP_COMMAND_TIMEOUT_MAX",
                                  (long long)s, cfg->command_timeout_max_sec);
        *ret = (int64_t)s * 1000;
        return 0;
}

/* working_dir: relative to /workspace, or absolute in the container.  It
 * resolves inside the container (the exec chdirs there), so `..` cannot
 * leave it. */
static char *plan_workdir(const json_t *args) {
        const char *wd = cm_json_str(args, "working_dir");
        if (!wd || !*wd)
                return xstrdup("/workspace");
        return wd[0] == '/' ? xstrdup(wd) : xasprintf("/workspace/%s", wd);
}

/* What every tool here starts with: read-only mode, the target, and its
 * hold on the session's sandbox (released by done()). */
typedef struct target {
        cm_backend *b;
        cm_container_info info;
        bool held;
} target;

static int begin(mcp_call *call, const json_t *args, const char *tool, target *t, cm_err *err) {
        if (cm_tool_writable(call, tool, err) < 0)
                return -1;
        t->b = cm_workbench_hold(call, cm_json_str(args, "container"), offsetof(cm_backend_ops, exec),
                                 "exec in containers yet", &t->info, &t->held, err);
        return t->b ? 0 : -1;
}

static void done(mcp_call *call, target *t) {
        if (t->held)
                cm_workbench_put(call);
        cm_container_info_clear(&t->info);
}

static int run(mcp_call *call, target *t, cm_exec_spec *spec, cm_exec_result *res, cm_err *err) {
        cm_cancel cancel = {mcp_call_cancel_fd(call)};
        return t->b->ops->exec(t->b, t->info.id, spec, &cancel, res, err);
}

/* ---- system_run_command --------------------------------------------------- */

static char *command_text(const cm_exec_result *r, bool sh) {
        cleanup_free char *base = cm_exec_result_text(r);
        return sh ? xasprintf("%s\n[run with sh -c: the image has no bash]", base ? base : "") : steal_pointer(&base);
}

/* CONTAINER_MCP_ALLOWED_COMMANDS, when set: checked before a sandbox is
 * made or anything runs (a guard rail; the sandbox is the boundary). */
static int allowed(mcp_call *call, const char *cmd, cm_err *err) {
        const cm_config *cfg = cm_call_app(call)->cfg;
        if (!cfg->allowed_commands)
                return 0;
        return cm_cmdline_allowed(cmd, (const char *const *)cfg->allowed_commands, cfg->n_allowed_commands, err);
}

static int system_run_command(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        const char *cmd = cm_json_str(args, "command");
        cleanup_free char *wd = plan_workdir(args);
        cm_exec_spec spec = {.workdir = wd, .output_cap = OUTPUT_CAP};
        cm_exec_result res = {0};
        target t = {0};
        bool sh = false;
        int r;

        if (allowed(call, cmd, err) < 0 || plan_timeout(call, args, &spec.timeout_ms, err) < 0 ||
            begin(call, args, "system_run_command", &t, err) < 0)
                return -1;
        /* the seed's tool promises a shell: sh when there is no bash, and
         * the result says so */
        r = cm_tool_shell_exec(call, t.b, t.info.id, "-c", cmd, &spec, &res, &sh, err);
        if (r == 0) {
                *ret = json_pack("{s:o, s:o, s:i, s:b}", "stdout", cm_json_bytes(res.out, res.out_len), "stderr",
                                 cm_json_bytes(res.err, res.err_len), "exit_code", res.exit_code, "success",
                                 res.exit_code == 0 && !res.timed_out);
                if (sh)
                        (void)json_object_set_new(*ret, "shell", json_string("sh"));
                if (res.timed_out)
                        (void)json_object_set_new(*ret, "timed_out", json_true());
                if (res.truncated)
                        (void)json_object_set_new(*ret, "truncated", json_true());
                *ret_text = command_text(&res, sh);
        }
        cm_exec_result_clear(&res);
        done(call, &t);
        return r;
}

/* ---- system_run_python ---------------------------------------------------- */

/* The wrapper's document, checked; NULL when it is not one (the exec's
 * tree was killed before it printed, python3 failed to start). */
static json_t *python_doc(const cm_exec_result *res) {
        json_t *doc = res->out_len ? json_loadb(res->out, res->out_len, JSON_ALLOW_NUL, NULL) : NULL;
        if (!json_is_object(doc) || !json_is_string(json_object_get(doc, "output")) ||
            !json_is_string(json_object_get(doc, "error")) || !json_is_boolean(json_object_get(doc, "success"))) {
                json_decref(doc);
                return NULL;
        }
        if (!json_is_true(json_object_get(doc, "truncated")))
                (void)json_object_del(doc, "truncated");
        return doc;
}

/* output, [error] and error, then a last line with the verdict and the
 * result: everything structuredContent says, NUL bytes escaped as for
 * exec results (cm_text_of_bytes). */
static char *python_text(const json_t *doc) {
        const json_t *o = json_object_get(doc, "output"), *e = json_object_get(doc, "error");
        const json_t *rv = json_object_get(doc, "result");
        cleanup_free char *out = cm_text_of_bytes(json_string_value(o), json_string_length(o));
        cleanup_free char *er = cm_text_of_bytes(json_string_value(e), json_string_length(e));
        cleanup_free char *rj = rv ? json_dumps(rv, JSON_ENCODE_ANY) : NULL;
        cleanup_free char *result = rj ? xasprintf("; result %s", rj) : NULL;
        return xasprintf("%s%s%s%s%s[%s%s%s]", out, *out && out[strlen(out) - 1] != '\n' ? "\n" : "",
                         *er ? "[error]\n" : "", er, *er && er[strlen(er) - 1] != '\n' ? "\n" : "",
                         json_is_true(json_object_get(doc, "success")) ? "success" : "failed",
                         json_is_true(json_object_get(doc, "timed_out")) ? ", timed out" : "", result ? result : "");
}

static int python_result(const cm_exec_result *res, int64_t timeout_ms, json_t **ret, char **ret_text, cm_err *err) {
        json_t *doc = python_doc(res);
        if (!doc && res->timed_out) {
                doc = json_pack("{s:s, s:o, s:b, s:b}", "output", "", "error",
                                json_string_nocheck("[timed out; its output was lost with its process tree]"),
                                "success", false, "timed_out", true);
        } else if (!doc) {
                return cm_err_set(err, ENOEXEC,
                                  "python3 did not run in the container (exit code %d): %.*s; use a sandbox image "
                                  "with python3 (CONTAINER_MCP_SANDBOX_IMAGE, or `container`)",
                                  res->exit_code, (int)(res->err_len > 300 ? 300 : res->err_len),
                                  res->err ? res->err : "");
        }
        if (json_is_true(json_object_get(doc, "timed_out"))) {
                /* appended by length: the error may hold NUL bytes */
                const json_t *e = json_object_get(doc, "error");
                size_t el = json_string_length(e);
                cleanup_free char *note = xasprintf("[timed out after %lld s; its whole process tree was killed]\n",
                                                    (long long)(timeout_ms / 1000));
                cleanup_free char *all = xmalloc(el + strlen(note));
                memcpy(all, json_string_value(e), el);
                memcpy(all + el, note, strlen(note));
                (void)json_object_set_new(doc, "error", json_stringn(all, el + strlen(note)));
        }
        *ret_text = python_text(doc);
        *ret = doc;
        return 0;
}

static int system_run_python(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        const cm_config *cfg = cm_call_app(call)->cfg;
        const char *code = cm_json_str(args, "code");
        cleanup_free char *wd = plan_workdir(args);
        cleanup_free char *lim = xasprintf("%lld", (long long)cfg->python_memory);
        cleanup_free char *cap = xasprintf("%zu", OUTPUT_CAP);
        cleanup_free char *tmo = NULL;
        char *argv[] = {(char *)"python3", (char *)"-c", (char *)cm_python_wrapper, lim, cap, NULL, NULL};
        /* A warm interpreter of the container serves the call when it can
         * (python.c): the same document, without python3's start-up. */
        static char *const zygote_argv[] = {(char *)"python3", (char *)"-c", (char *)cm_python_zygote, NULL};
        cm_exec_warm warm = {"python3", zygote_argv, argv + 3};
        /* room for the wrapper's JSON of two capped streams, escapes included */
        cm_exec_spec spec = {.argv = argv,
                             .argc = 6,
                             .workdir = wd,
                             .output_cap = 16 * OUTPUT_CAP,
                             .stdin_data = code,
                             .stdin_len = strlen(code),
                             .warm = &warm};
        cm_exec_result res = {0};
        target t = {0};
        int64_t timeout_ms;
        int r;

        if (plan_timeout(call, args, &timeout_ms, err) < 0 || begin(call, args, "system_run_python", &t, err) < 0)
                return -1;
        argv[5] = tmo = xasprintf("%lld", (long long)(timeout_ms / 1000));
        spec.timeout_ms = timeout_ms + GRACE_SEC * 1000;
        r = run(call, &t, &spec, &res, err);
        if (r == 0)
                r = python_result(&res, timeout_ms, ret, ret_text, err);
        cm_exec_result_clear(&res);
        done(call, &t);
        return r;
}

/* ---- system_env_var --------------------------------------------------------- */

/* NUL-separated NAME=value pairs as a JSON object; a later duplicate wins,
 * as getenv would not promise, but no shell exports two. */
static json_t *env_object(const char *p, size_t n) {
        json_t *vars = json_object();
        for (const char *end = p + n; p < end;) {
                size_t len = strnlen(p, (size_t)(end - p));
                const char *eq = memchr(p, '=', len);
                if (eq && eq != p) {
                        cleanup_free char *k = xstrndup(p, (size_t)(eq - p));
                        (void)json_object_set_new(vars, k, cm_json_bytes(eq + 1, len - (size_t)(eq - p) - 1));
                }
                p += len + 1;
        }
        return vars;
}

static int system_env_var(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        char *argv[] = {(char *)"env", (char *)"-0", NULL};
        cm_exec_spec spec = {.argv = argv, .argc = 2, .output_cap = 4 * OUTPUT_CAP, .timeout_ms = 30000};
        cm_exec_result res = {0};
        const char *name = cm_json_str(args, "var_name");
        target t = {0};
        int r;

        (void)ret_text; /* the JSON is the text */
        if (begin(call, args, "system_env_var", &t, err) < 0)
                return -1;
        r = run(call, &t, &spec, &res, err);
        if (r == 0 && (res.exit_code != 0 || res.truncated))
                r = cm_err_set(err, EIO, "env -0 in the container failed (exit code %d%s): %.*s", res.exit_code,
                               res.truncated ? ", output over 4 MiB" : "", (int)(res.err_len > 300 ? 300 : res.err_len),
                               res.err ? res.err : "");
        if (r == 0) {
                json_t *vars = env_object(res.out, res.out_len);
                *ret = json_pack("{s:o}", "variables", vars);
                if (name) {
                        json_t *v = json_object_get(vars, name);
                        (void)json_object_set_new(*ret, "requested_var", v ? json_incref(v) : json_null());
                }
        }
        cm_exec_result_clear(&res);
        done(call, &t);
        return r;
}

/* Name, description and schemas of each: src/tools/defs/sandbox.json. */
static const cm_tool_handler handlers[] = {
        {"system_run_command", system_run_command},
        {"system_run_python", system_run_python},
        {"system_env_var", system_env_var},
};

const cm_tool_family cm_tools_sandbox = {__FILE__, handlers, ARRAY_SIZE(handlers)};
