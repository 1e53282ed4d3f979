/* What the container tools share: the backend in use, read-only mode,
 * managed-container checks, labels, and exec results as JSON. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/common.h"
#include "util/cleanup.h"
#include "util/json.h"
#include "util/sha256.h"

cm_backend *cm_tool_backend(mcp_call *call, cm_err *err) {
        cm_app *app = cm_call_app(call);
        if (!app->active)
                cm_err_set(err, ENODEV,
                           "no container backend is available on this machine; call system_status for the reason "
                           "and the fix of each backend");
        return app->active;
}

int cm_tool_unsupported(cm_backend *b, const char *what, cm_err *err) {
        cm_backend_status st;
        b->ops->status(b, &st);
        return cm_err_set(err, ENOTSUP, "the %s backend cannot %s%s%s", b->ops->name, what, st.reason[0] ? ": " : "",
                          st.reason);
}

int cm_tool_writable(mcp_call *call, const char *tool, cm_err *err) {
        if (cm_call_app(call)->cfg->readonly)
                return cm_err_set(err, EROFS,
                                  "%s refused: the server runs with CONTAINER_MCP_READONLY, so only list_containers, "
                                  "container_logs, inspect_container, container_stats, system_status, file_read, "
                                  "file_list and dinspect work; "
                                  "restart it without CONTAINER_MCP_READONLY to change containers",
                                  tool);
        return 0;
}

static const char *label(const cm_container_info *c, const char *key) {
        for (size_t i = 0; i < c->n_labels; i++)
                if (strcmp(c->labels[i].key, key) == 0)
                        return c->labels[i].value;
        return NULL;
}

bool cm_container_managed(const cm_container_info *c) {
        const char *v = label(c, CM_LABEL_MANAGED);
        return v && strcmp(v, "true") == 0;
}

void cm_tool_owner(mcp_call *call, char ret[CM_OWNER_HEX + 1]) {
        const cm_app *app = cm_call_app(call);
        const char *id = mcp_session_id(mcp_call_session(call));
        uint8_t mac[CM_SHA256_LEN];
        cm_hmac_sha256(app->owner_key, sizeof app->owner_key, id, strlen(id), mac);
        cm_hex(mac, CM_OWNER_HEX / 2, ret);
}

static bool in_list(char *const *v, const char *s) {
        for (size_t i = 0; s && v && v[i]; i++)
                if (strcmp(v[i], s) == 0)
                        return true;
        return false;
}

bool cm_tool_visible(mcp_call *call, const cm_container_info *c) {
        const cm_config *cfg = cm_call_app(call)->cfg;
        const char *owner = label(c, CM_LABEL_SESSION);
        char mine[CM_OWNER_HEX + 1];
        if (cfg->share_containers || in_list(cfg->shared_containers, c->id) || in_list(cfg->shared_containers, c->name))
                return true;
        if (!cm_container_managed(c))
                return cfg->allow_unmanaged;
        cm_tool_owner(call, mine);
        return owner && strcmp(owner, mine) == 0;
}

/* Pick `ref` among the containers the session may see: an id, else a name,
 * else a unique prefix of an id.  Used without a find op, and when find
 * says a prefix is ambiguous, which may be only because of containers this
 * session must not learn of. */
/* Named by --allow-container / CONTAINER_MCP_ALLOWED_CONTAINERS: its id,
 * its name, or an id prefix of at least 12 characters (what `docker ps`
 * shows). */
static bool allowlisted(const cm_config *cfg, const cm_container_info *c) {
        for (char *const *a = cfg->allowed_containers; a && *a; a++) {
                size_t n = strlen(*a);
                if ((c->name && strcmp(c->name, *a) == 0) || strcmp(c->id, *a) == 0 ||
                    (n >= 12 && strncmp(c->id, *a, n) == 0))
                        return true;
        }
        return false;
}

/* Visible to this call: as cm_tool_visible, and for the codex tools also
 * the allowlisted containers. */
static bool visible_for(mcp_call *call, const cm_container_info *c, bool codex) {
        return cm_tool_visible(call, c) || (codex && allowlisted(cm_call_app(call)->cfg, c));
}

static int find_visible(mcp_call *call, cm_backend *b, const char *ref, bool codex, cm_container_info *ret,
                        cm_err *err) {
        cm_container_info *all = NULL;
        size_t n = 0, hit = SIZE_MAX, prefix_hits = 0, prefix = SIZE_MAX;
        if (!b->ops->list)
                return cm_err_set(err, ENOTSUP, "the %s backend cannot list containers", b->ops->name);
        if (b->ops->list(b, true, &all, &n, err) < 0)
                return -1;
        for (size_t i = 0; i < n; i++) {
                if (!visible_for(call, &all[i], codex))
                        continue;
                if (strcmp(all[i].id, ref) == 0 || (hit == SIZE_MAX && all[i].name && strcmp(all[i].name, ref) == 0))
                        hit = i;
                else if (strncmp(all[i].id, ref, strlen(ref)) == 0)
                        prefix_hits++, prefix = i;
        }
        if (hit == SIZE_MAX && prefix_hits == 1)
                hit = prefix;
        if (hit != SIZE_MAX)
                *ret = all[hit]; /* handed over: not cleared below */
        for (size_t i = 0; i < n; i++)
                if (i != hit)
                        cm_container_info_clear(&all[i]);
        free(all);
        if (hit == SIZE_MAX && prefix_hits > 1)
                return cm_err_set(err, EINVAL, "\"%s\" matches %zu containers; give more of the id", ref, prefix_hits);
        return hit == SIZE_MAX ? -ENOENT : 0;
}

static int find_checked(mcp_call *call, cm_backend *b, const char *ref, bool codex, cm_container_info *ret,
                        cm_err *err) {
        const cm_config *cfg = cm_call_app(call)->cfg;
        cm_err why = CM_ERR_INIT;
        int r = b->ops->find ? b->ops->find(b, ref, ret, &why) : -ENOTSUP;
        if (r == -ENOTSUP || r == -EINVAL)
                r = find_visible(call, b, ref, codex, ret, err);
        else if (r < 0 && r != -ENOENT)
                return cm_err_set(err, why.code, "%s", why.msg);
        if (r == 0 && cm_container_managed(ret) && !visible_for(call, ret, codex)) {
                /* Another session's: the answer must be the one this session
                 * would get if it did not exist ("no container", or one of its
                 * own that `ref` also names by prefix), so look again among
                 * the visible ones only. */
                cm_container_info_clear(ret);
                r = find_visible(call, b, ref, codex, ret, err);
        }
        if (r == -ENOENT)
                return cm_err_set(err, ENOENT, "no container \"%s\"; call list_containers for the ids and names", ref);
        if (r < 0)
                return r;
        if (codex && !cm_container_managed(ret) && !allowlisted(cfg, ret)) {
                cm_err_set(err, EPERM,
                           "container \"%s\" was not created by container-mcp and is not on the allowlist; start "
                           "the server with --allow-container %s (or CONTAINER_MCP_ALLOWED_CONTAINERS) to let "
                           "dexec, dpatch and dinspect use it",
                           ref, ret->name ? ret->name : ret->id);
                cm_container_info_clear(ret);
                return -EPERM;
        }
        if (!codex && !cm_container_managed(ret) && !cfg->allow_unmanaged) {
                cm_err_set(err, EPERM,
                           "container \"%s\" was not created by container-mcp (no %s=true label); it is left alone "
                           "unless the server runs with CONTAINER_MCP_ALLOW_UNMANAGED=1",
                           ref, CM_LABEL_MANAGED);
                cm_container_info_clear(ret);
                return -EPERM;
        }
        return 0;
}

int cm_tool_find(mcp_call *call, cm_backend *b, const char *ref, cm_container_info *ret, cm_err *err) {
        return find_checked(call, b, ref, false, ret, err);
}

cm_backend *cm_tool_backend_op(mcp_call *call, size_t op_offset, const char *what, cm_err *err) {
        cm_backend *b = cm_tool_backend(call, err);
        if (!b)
                return NULL;
        /* POSIX lets a function pointer be read as a void *. */
        if (!*(void *const *)((const char *)b->ops + op_offset)) {
                (void)cm_tool_unsupported(b, what, err);
                return NULL;
        }
        return b;
}

static cm_backend *target(mcp_call *call, const char *ref, size_t op_offset, const char *what, bool codex,
                          cm_container_info *ret, cm_err *err) {
        cm_backend *b = cm_tool_backend_op(call, op_offset, what, err);
        if (!b)
                return NULL;
        return find_checked(call, b, ref, codex, ret, err) < 0 ? NULL : b;
}

cm_backend *cm_tool_target(mcp_call *call, const char *ref, size_t op_offset, const char *what,
                           cm_container_info *ret, cm_err *err) {
        return target(call, ref, op_offset, what, false, ret, err);
}

cm_backend *cm_tool_codex_target(mcp_call *call, const char *ref, size_t op_offset, const char *what,
                                 cm_container_info *ret, cm_err *err) {
        return target(call, ref, op_offset, what, true, ret, err);
}

int cm_tool_shell_exec(mcp_call *call, cm_backend *b, const char *id, const char *bash_flags, const char *cmd,
                       cm_exec_spec *spec, cm_exec_result *res, bool *ret_sh, cm_err *err) {
        char *argv[] = {(char *)"bash", (char *)bash_flags, (char *)cmd, NULL};
        cm_cancel cancel = {mcp_call_cancel_fd(call)};
        int r;
        spec->argv = argv;
        spec->argc = 3;
        *ret_sh = false;
        r = b->ops->exec(b, id, spec, &cancel, res, err);
        if (r < 0 && err->code == ENOENT && !mcp_call_cancelled(call)) {
                /* No bash in the image.  (A working directory that does not
                 * exist is ENOENT too: sh then fails the same way, and its
                 * error is the one shown.) */
                cm_exec_result_clear(res);
                *err = (cm_err)CM_ERR_INIT;
                argv[0] = (char *)"sh";
                argv[1] = (char *)"-c";
                *ret_sh = true;
                r = b->ops->exec(b, id, spec, &cancel, res, err);
        }
        spec->argv = NULL;
        return r;
}

static int count_managed_running(cm_backend *b, size_t *ret, cm_err *err) {
        cm_container_info *all = NULL;
        size_t n = 0;
        *ret = 0;
        if (b->ops->list(b, false, &all, &n, err) < 0)
                return -1;
        for (size_t i = 0; i < n; i++) {
                *ret += cm_container_managed(&all[i]);
                cm_container_info_clear(&all[i]);
        }
        free(all);
        return 0;
}

/* Check the cap and take a slot under one lock, so concurrent calls cannot
 * all pass the check before any of them starts.  Counted: the managed
 * containers the backend lists as running (every session's, and other
 * servers' on the same state dir or engine: the cap protects the host)
 * plus this server's runs in flight (wait runs live only in the call, and
 * a detached run is not listed until it has started).  The slot is given
 * back with cm_tool_release_slot. */
int cm_tool_reserve_slot(cm_app *app, cm_backend *b, cm_err *err) {
        size_t listed;
        int r = 0;
        (void)pthread_mutex_lock(&app->run_lock);
        if (count_managed_running(b, &listed, err) < 0)
                r = -1;
        else if (listed + app->runs_in_flight >= app->cfg->max_containers)
                r = cm_err_set(err, EBUSY,
                               "%zu containers are running (%zu listed, %u runs starting or running to completion, "
                               "of every session), the most CONTAINER_MCP_MAX_CONTAINERS=%u allows; wait for a run "
                               "to finish, remove containers with remove_container (list_containers shows yours), "
                               "or have the operator raise CONTAINER_MCP_MAX_CONTAINERS",
                               listed + app->runs_in_flight, listed, app->runs_in_flight, app->cfg->max_containers);
        else
                app->runs_in_flight++;
        (void)pthread_mutex_unlock(&app->run_lock);
        return r;
}

void cm_tool_release_slot(cm_app *app) {
        (void)pthread_mutex_lock(&app->run_lock);
        app->runs_in_flight--;
        (void)pthread_mutex_unlock(&app->run_lock);
}

void cm_tool_labels(mcp_call *call, char owner[CM_OWNER_HEX + 1], cm_kv ret[4]) {
        mcp_session *s = mcp_call_session(call);
        cm_tool_owner(call, owner);
        ret[0] = (cm_kv){CM_LABEL_MANAGED, "true"};
        ret[1] = (cm_kv){CM_LABEL_SESSION, owner};
        ret[2] = (cm_kv){CM_LABEL_CLIENT, mcp_session_client(s)};
        ret[3] = (cm_kv){CM_LABEL_AGENT, cm_call_app(call)->cfg->agent_name};
}

json_t *cm_exec_result_json(const cm_exec_result *r) {
        return json_pack("{s:i, s:o, s:o, s:I, s:b, s:b}", "exitCode", r->exit_code, "stdout",
                         cm_json_bytes(r->out, r->out_len), "stderr", cm_json_bytes(r->err, r->err_len), "durationMs",
                         (json_int_t)r->duration_ms, "truncated", r->truncated, "timedOut", r->timed_out);
}

/* The text of `content` is a C string (mcp.h: the server reads it up to its
 * first NUL), and a model reads that text, not structuredContent: output
 * that holds a NUL byte is written with each NUL as \0 and, so that stays
 * unambiguous, each backslash as \\; other output goes as it is. */
#define NUL_NOTE "NUL bytes shown as \\0, backslashes as \\\\"

static void put_bytes(FILE *f, const char *p, size_t n, bool escape) {
        if (!escape) {
                (void)fwrite(p, 1, n, f);
                return;
        }
        for (size_t i = 0; i < n; i++) {
                if (p[i] == 0)
                        fputs("\\0", f);
                else if (p[i] == '\\')
                        fputs("\\\\", f);
                else
                        fputc(p[i], f);
        }
}

static bool has_nul(const char *p, size_t n) { return n && memchr(p, 0, n); }

char *cm_text_of_bytes(const char *p, size_t n) {
        char *text = NULL;
        size_t len = 0;
        FILE *f;
        if (!has_nul(p, n))
                return xstrndup(p ? p : "", n);
        f = open_memstream(&text, &len);
        if (!f)
                abort(); /* out of memory, as x* allocators do */
        put_bytes(f, p, n, true);
        fputs(p[n - 1] != '\n' ? "\n[" NUL_NOTE "]" : "[" NUL_NOTE "]", f);
        (void)fclose(f);
        return text;
}

/* stdout, then stderr under a "[stderr]" line, then a last line with the
 * exit code: everything structuredContent says, in the one text a client
 * is sure to show. */
char *cm_exec_result_text(const cm_exec_result *r) {
        char *text = NULL;
        size_t len = 0;
        bool escape = has_nul(r->out, r->out_len) || has_nul(r->err, r->err_len);
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return NULL;
        const char *last = NULL;
        if (r->out_len) {
                put_bytes(f, r->out, r->out_len, escape);
                last = &r->out[r->out_len - 1];
        }
        if (r->err_len) {
                fputs(last && *last != '\n' ? "\n[stderr]\n" : "[stderr]\n", f);
                put_bytes(f, r->err, r->err_len, escape);
                last = &r->err[r->err_len - 1];
        }
        if (last && *last != '\n')
                fputc('\n', f);
        fprintf(f, "[exit code %d%s%s, %lld ms%s]", r->exit_code, r->timed_out ? ", timed out" : "",
                r->truncated ? ", output truncated" : "", (long long)r->duration_ms, escape ? "; " NUL_NOTE : "");
        (void)fclose(f);
        return text;
}

int cm_tool_argv(const json_t *arr, char ***ret_argv, size_t *ret_argc) {
        size_t n = json_array_size(arr), i;
        const json_t *v;
        char **argv = xcalloc(n + 1, sizeof *argv);
        json_array_foreach(arr, i, v) argv[i] = xstrdup(json_string_value(v));
        *ret_argv = argv;
        *ret_argc = n;
        return 0;
}

void cm_tool_argv_free(char **argv) {
        for (size_t i = 0; argv && argv[i]; i++)
                free(argv[i]);
        free(argv);
}

int cm_tool_env(const json_t *obj, cm_kv **ret, size_t *ret_n, cm_err *err) {
        const char *k;
        json_t *v;
        size_t n = 0;
        cm_kv *env = xcalloc(json_object_size(obj) + 1, sizeof *env);
        json_object_foreach((json_t *)obj, k, v) {
                if (!*k || strchr(k, '=')) {
                        free(env);
                        return cm_err_set(err, EINVAL, "env: \"%s\" is not a variable name (no '=' and not empty)", k);
                }
                env[n++] = (cm_kv){k, json_string_value(v)};
        }
        *ret = env;
        *ret_n = n;
        return 0;
}
