/* The CLI twins of the third seed, for people: `container-mcp exec
 * --container NAME 'cmd' [-]` calls dexec and `container-mcp patch
 * --container NAME FILE|-` calls dpatch.  Through the daemon when one
 * answers on the socket, else through a server of their own (`serve` on a
 * socketpair, stdio framing), so the tool, its policy and its run log are
 * exactly the MCP tool's.  Each prints what it got and exits with the
 * command's exit code. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "daemon/client.h"
#include "daemon/daemon.h"
#include "util/cleanup.h"
#include "util/json.h"

/* A failure of the tool or of reaching it, not of the command (docker
 * run's convention: 125). */
#define EXIT_TOOL 125
#define EXIT_TIMEOUT 124

/* The server the twin talks to: the daemon over HTTP, or its own child. */
typedef struct twin {
        const char *cmd;
        bool http;
        cm_daemon_paths paths;
        cm_uconn conn;
        char session[160], version[40];
        int fd;    /* the child's end of the socketpair, ours */
        pid_t pid; /* the child */
        char *buf;
        size_t start, len, cap;
        json_int_t next_id;
} twin;

/* ---- over the daemon ---------------------------------------------------------- */

typedef struct grab {
        json_t *id;
        json_t *resp;
        int status;
        char err[600];
} grab;

static int grab_msg(void *arg, const cm_uresp *resp, char *msg, size_t len) {
        grab *g = arg;
        json_t *v = json_loadb(msg, len, 0, NULL);
        g->status = resp->status;
        if (resp->status >= 400) {
                json_t *e = json_object_get(v, "error");
                (void)snprintf(g->err, sizeof g->err, "%s", cm_json_str(e, "message") ? cm_json_str(e, "message") : "");
        } else if (v && g->id && json_equal(json_object_get(v, "id"), g->id) && !g->resp) {
                g->resp = json_incref(v);
        }
        json_decref(v);
        return 0;
}

static json_t *http_send(twin *t, json_t *msg, cm_err *err) {
        cleanup_free char *body = cm_json_dump(msg);
        grab g = {.id = json_object_get(msg, "id")};
        cm_uresp resp;
        cm_ureq q = {.method = "POST",
                     .path = "/mcp",
                     .session = t->session[0] ? t->session : NULL,
                     .version = t->version[0] ? t->version : NULL,
                     .token = cm_daemon_token(),
                     .body = body,
                     .len = strlen(body)};
        if (cm_uhttp(&t->conn, t->paths.socket, &q, grab_msg, &g, &resp, err) < 0)
                return NULL;
        if (resp.session[0] && !t->session[0])
                (void)snprintf(t->session, sizeof t->session, "%s", resp.session);
        if (resp.status >= 400) {
                json_decref(g.resp);
                cm_err_set(err, EPROTO, "the daemon answered HTTP %d: %s", resp.status, g.err);
                return NULL;
        }
        if (!g.resp && g.id)
                cm_err_set(err, EPROTO, "the daemon sent no response to %s", cm_json_str(msg, "method"));
        return g.resp ? g.resp : g.id ? NULL : json_object();
}

/* ---- over a server of our own ---------------------------------------------------- */

static int spawn_server(twin *t, char **serve, size_t n, cm_err *err) {
        int sv[2];
        char **argv = xcalloc(n + 8, sizeof *argv);
        size_t i = 0;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
                free(argv);
                return cm_err_sys(err, errno, "socketpair");
        }
        argv[i++] = (char *)"container-mcp";
        argv[i++] = (char *)"serve";
        argv[i++] = (char *)"--log-level";
        argv[i++] = (char *)"warn";
        for (size_t k = 0; k < n; k++)
                argv[i++] = serve[k];
        t->pid = fork();
        if (t->pid == 0) {
                if (dup2(sv[1], STDIN_FILENO) < 0 || dup2(sv[1], STDOUT_FILENO) < 0)
                        _exit(127);
                execv("/proc/self/exe", argv);
                _exit(127);
        }
        free(argv);
        (void)close(sv[1]);
        if (t->pid < 0) {
                (void)close(sv[0]);
                return cm_err_sys(err, errno, "fork");
        }
        t->fd = sv[0];
        return 0;
}

/* The next line from the child, NUL-terminated at t->buf; NULL at EOF
 * (the server died: its stderr, which is ours, said why). */
static char *read_line(twin *t, size_t *ret_len) {
        char *nl;
        if (t->start) {
                memmove(t->buf, t->buf + t->start, t->len - t->start);
                t->len -= t->start;
                t->start = 0;
        }
        while (!(nl = t->len ? memchr(t->buf, '\n', t->len) : NULL)) {
                ssize_t n;
                if (t->len + 65536 > t->cap) {
                        t->cap = (t->len + 65536) * 2;
                        t->buf = xrealloc(t->buf, t->cap);
                }
                n = read(t->fd, t->buf + t->len, t->cap - t->len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return NULL;
                t->len += (size_t)n;
        }
        *nl = '\0';
        t->start = (size_t)(nl - t->buf) + 1;
        *ret_len = (size_t)(nl - t->buf);
        return t->buf;
}

static json_t *stdio_send(twin *t, json_t *msg, cm_err *err) {
        cleanup_free char *line = cm_json_dump(msg);
        size_t len = strlen(line), off = 0;
        json_t *id = json_object_get(msg, "id");
        line = xrealloc(line, len + 2);
        line[len++] = '\n';
        while (off < len) {
                ssize_t w = write(t->fd, line + off, len - off);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return cm_err_sys(err, errno, "writing to the server"), NULL;
                off += (size_t)w;
        }
        if (!id)
                return json_object();
        for (;;) {
                size_t n;
                char *got = read_line(t, &n);
                json_t *v;
                if (!got)
                        return cm_err_set(err, EPIPE, "the server exited before answering %s",
                                          cm_json_str(msg, "method")),
                               NULL;
                v = json_loadb(got, n, 0, NULL);
                if (v && json_equal(json_object_get(v, "id"), id))
                        return v;
                json_decref(v); /* progress, log messages */
        }
}

/* ---- either ----------------------------------------------------------------------- */

static json_t *send_msg(twin *t, json_t *msg, cm_err *err) {
        return t->http ? http_send(t, msg, err) : stdio_send(t, msg, err);
}

static json_t *rpc(twin *t, const char *method, json_t *params, cm_err *err) {
        cleanup_json json_t *msg = json_pack("{s:s, s:I, s:s, s:o}", "jsonrpc", "2.0", "id", ++t->next_id, "method",
                                             method, "params", params);
        return send_msg(t, msg, err);
}

static int twin_open(twin *t, const char *socket_path, char **serve, size_t n, cm_err *err) {
        cleanup_json json_t *init = NULL, *done = NULL, *note = NULL;
        const char *v;
        t->fd = -1;
        t->conn = (cm_uconn)CM_UCONN_INIT;
        if (cm_daemon_paths_init(&t->paths, socket_path, err) < 0)
                return -1;
        t->http = cm_daemon_answers(&t->paths);
        if (!t->http && spawn_server(t, serve, n, err) < 0)
                return -1;
        init = rpc(t, "initialize",
                   json_pack("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion", "2025-11-25", "capabilities",
                             "clientInfo", "name", "container-mcp-cli", "version", "1"),
                   err);
        if (!init)
                return -1;
        if (json_object_get(init, "error"))
                return cm_err_set(err, EPROTO, "initialize refused: %s",
                                  cm_json_str(json_object_get(init, "error"), "message")),
                       -1;
        v = cm_json_str(json_object_get(init, "result"), "protocolVersion");
        (void)snprintf(t->version, sizeof t->version, "%s", v ? v : "");
        note = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", "notifications/initialized");
        done = send_msg(t, note, err);
        return done ? 0 : -1;
}

static void twin_close(twin *t) {
        if (t->http && t->session[0]) {
                cm_uresp resp;
                cm_err err = CM_ERR_INIT;
                cm_ureq q = {.method = "DELETE", .path = "/mcp", .session = t->session, .version = t->version,
                             .token = cm_daemon_token()};
                (void)cm_uhttp(&t->conn, t->paths.socket, &q, grab_msg, &(grab){0}, &resp, &err);
        }
        cm_uconn_close(&t->conn);
        if (t->fd >= 0) {
                int st;
                (void)shutdown(t->fd, SHUT_WR); /* EOF: the server ends its session and exits */
                (void)close(t->fd);
                while (waitpid(t->pid, &st, 0) < 0 && errno == EINTR)
                        ;
        }
        free(t->buf);
        cm_daemon_paths_free(&t->paths);
}

/* tools/call; the result, or NULL with err set (the tool is missing, the
 * call was refused by the protocol layer). */
static json_t *call_tool(twin *t, const char *name, json_t *args, cm_err *err) {
        cleanup_json json_t *r = rpc(t, "tools/call", json_pack("{s:s, s:o}", "name", name, "arguments", args), err);
        json_t *e;
        if (!r)
                return NULL;
        if ((e = json_object_get(r, "error")))
                return cm_err_set(err, EPROTO, "%s: %s", name, cm_json_str(e, "message") ? cm_json_str(e, "message")
                                                                                         : "error"),
                       NULL;
        return json_incref(json_object_get(r, "result"));
}

static const char *result_text(json_t *res) {
        return cm_json_str(json_array_get(json_object_get(res, "content"), 0), "text");
}

/* ---- the command lines --------------------------------------------------------------- */

typedef struct twin_args {
        const char *container, *socket_path, *timeout;
        char **pos;
        size_t n_pos;
        char **serve;
        size_t n_serve;
} twin_args;

static int parse(const char *cmd, int argc, char **argv, twin_args *a, void (*help)(void)) {
        a->pos = xcalloc((size_t)argc + 1, sizeof *a->pos);
        a->serve = xcalloc((size_t)argc + 1, sizeof *a->serve);
        for (int i = 1; i < argc; i++) {
                const char *s = argv[i];
                const char **slot = strcmp(s, "--container") == 0     ? &a->container
                                    : strcmp(s, "--socket-path") == 0 ? &a->socket_path
                                    : strcmp(s, "--timeout") == 0     ? &a->timeout
                                                                      : NULL;
                if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0)
                        return help(), 1;
                if (slot) {
                        if (i + 1 >= argc)
                                return cmd_usage_error(cmd, "option %s needs a value", s), -1;
                        *slot = argv[++i];
                } else if (s[0] == '-' && s[1] == '-') {
                        /* serve's options, for a server of our own */
                        a->serve[a->n_serve++] = argv[i];
                        if (i + 1 < argc && strchr(s, '=') == NULL && strcmp(s, "--no-auth") != 0)
                                a->serve[a->n_serve++] = argv[++i];
                } else {
                        a->pos[a->n_pos++] = argv[i];
                }
        }
        if (!a->container)
                return cmd_usage_error(cmd, "--container NAME is required (an allowlisted container, "
                                            "--allow-container)"),
                       -1;
        return 0;
}

static char *read_all(int fd, size_t *ret_len, cm_err *err) {
        char *buf = NULL;
        size_t len = 0, cap = 0;
        for (;;) {
                ssize_t n;
                if (len + 65536 + 1 > cap)
                        buf = xrealloc(buf, cap = (len + 65536 + 1) * 2);
                n = read(fd, buf + len, cap - len - 1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        free(buf);
                        return cm_err_sys(err, errno, "reading"), NULL;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        buf[len] = '\0';
        *ret_len = len;
        return buf;
}

static void exec_help(void) {
        printf("Usage: container-mcp exec --container NAME [--timeout SEC] [--socket-path PATH]\n"
               "                          [SERVE OPTIONS] 'COMMAND' [-]\n\n"
               "Run COMMAND with bash in the container through the dexec tool (its run log records\n"
               "it), print its output (the preview: head and tail of a long one) and exit with its\n"
               "exit code (124: timed out; 125: the tool refused or could not be reached).  A\n"
               "trailing - passes this command's stdin to it.  Through the daemon when one runs,\n"
               "else through a server of its own started with SERVE OPTIONS (--allow-container, ...).\n");
}

static void patch_help(void) {
        printf("Usage: container-mcp patch --container NAME [--socket-path PATH] [SERVE OPTIONS] FILE|-\n\n"
               "Apply a patch in Codex's format (*** Begin Patch ... *** End Patch; absolute paths in\n"
               "the container) through the dpatch tool, from FILE or stdin (-), and print what\n"
               "changed.  Exit 0 when it applied, 1 when it did not (nothing changed then), 125\n"
               "when the tool could not be reached.  Through the daemon when one runs, else\n"
               "through a server of its own started with SERVE OPTIONS.\n");
}

/* Run one tool call through a twin; the result, or NULL (already said). */
static json_t *run_call(const char *cmd, const twin_args *a, const char *tool, json_t *args) {
        twin t = {.cmd = cmd};
        cm_err err = CM_ERR_INIT;
        json_t *res = NULL;
        if (twin_open(&t, a->socket_path, a->serve, a->n_serve, &err) == 0)
                res = call_tool(&t, tool, args, &err);
        else
                json_decref(args);
        twin_close(&t);
        if (!res)
                fprintf(stderr, "container-mcp %s: %s\n", cmd, err.msg);
        return res;
}

int cmd_exec(int argc, char **argv) {
        twin_args a = {0};
        cleanup_free char *in = NULL;
        cleanup_json json_t *res = NULL;
        json_t *sc, *args;
        size_t in_len = 0;
        int r = parse("exec", argc, argv, &a, exec_help), ret = EXIT_TOOL;
        cm_err err = CM_ERR_INIT;
        if (r != 0)
                goto out;
        if (a.n_pos < 1 || a.n_pos > 2 || (a.n_pos == 2 && strcmp(a.pos[1], "-") != 0)) {
                r = cmd_usage_error("exec", "expected one COMMAND, and - after it to pass stdin");
                goto out;
        }
        if (a.n_pos == 2 && !(in = read_all(STDIN_FILENO, &in_len, &err))) {
                fprintf(stderr, "container-mcp exec: stdin: %s\n", err.msg);
                goto out;
        }
        args = json_pack("{s:s, s:s}", "command", a.pos[0], "container", a.container);
        if (a.timeout)
                (void)json_object_set_new(args, "timeout_sec", json_integer(strtoll(a.timeout, NULL, 10)));
        if (in)
                (void)json_object_set_new(args, "stdin", cm_json_bytes(in, in_len));
        if (!(res = run_call("exec", &a, "dexec", args)))
                goto out;
        sc = json_object_get(res, "structuredContent");
        if (json_is_true(json_object_get(res, "isError")) || !json_is_object(sc)) {
                fprintf(stderr, "container-mcp exec: %s\n", result_text(res) ? result_text(res) : "dexec failed");
                goto out;
        }
        if (cm_json_str(sc, "preview"))
                (void)fwrite(cm_json_str(sc, "preview"), 1, strlen(cm_json_str(sc, "preview")), stdout);
        if (json_integer_value(json_object_get(sc, "truncated_bytes")) > 0 || json_is_true(json_object_get(sc, "timed_out")))
                fprintf(stderr, "container-mcp exec: %s; the whole output is in %s\n",
                        json_is_true(json_object_get(sc, "timed_out")) ? "timed out" : "output shortened",
                        cm_json_str(sc, "runlog") ? cm_json_str(sc, "runlog") : "the run log");
        ret = json_is_true(json_object_get(sc, "timed_out")) ? EXIT_TIMEOUT
                                                             : (int)json_integer_value(json_object_get(sc, "exit_code"));
out:
        free(a.pos);
        free(a.serve);
        (void)fflush(stdout);
        return r < 0 ? 2 : r > 0 ? 0 : ret;
}

int cmd_patch(int argc, char **argv) {
        twin_args a = {0};
        cleanup_free char *patch = NULL;
        cleanup_json json_t *res = NULL;
        size_t len = 0;
        int r = parse("patch", argc, argv, &a, patch_help), ret = EXIT_TOOL;
        cm_err err = CM_ERR_INIT;
        if (r != 0)
                goto out;
        if (a.n_pos != 1) {
                r = cmd_usage_error("patch", "expected one FILE, or - for stdin");
                goto out;
        }
        if (strcmp(a.pos[0], "-") == 0) {
                patch = read_all(STDIN_FILENO, &len, &err);
        } else {
                cleanup_close int fd = open(a.pos[0], O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        cm_err_sys(&err, errno, "opening %s", a.pos[0]);
                else
                        patch = read_all(fd, &len, &err);
        }
        if (!patch) {
                fprintf(stderr, "container-mcp patch: %s\n", err.msg);
                goto out;
        }
        if (!(res = run_call("patch", &a, "dpatch",
                             json_pack("{s:o, s:s}", "patch", cm_json_bytes(patch, len), "container", a.container))))
                goto out;
        if (json_is_true(json_object_get(res, "isError"))) {
                fprintf(stderr, "container-mcp patch: %s\n", result_text(res) ? result_text(res) : "dpatch failed");
                ret = 1;
        } else {
                printf("%s\n", result_text(res) ? result_text(res) : "applied");
                ret = 0;
        }
out:
        free(a.pos);
        free(a.serve);
        (void)fflush(stdout);
        return r < 0 ? 2 : r > 0 ? 0 : ret;
}
