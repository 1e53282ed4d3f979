/* `container-mcp serve`: MCP over stdio, Streamable HTTP, or a Unix socket. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "config.h"
#include "daemon/daemon.h"
#include "tools/tools.h"
#include "transport/transport.h"
#include "util/cleanup.h"
#include "util/log.h"

#define INSTRUCTIONS                                                                                                   \
        "container-mcp runs commands and code in disposable, isolated containers: use run_container with "           \
        "wait: true for a one-off run, or keep a container and use exec_in_container, with file, log and stats "      \
        "tools around it. Containers get no network and no host paths unless the policy allows them; call "           \
        "system_status to see the backends and limits in force."

static void serve_help(void) {
        printf("Usage: container-mcp serve [OPTIONS]\n\n"
               "Serve MCP. Without --http or --socket: newline-delimited JSON-RPC on stdin/stdout\n"
               "(logs go to stderr only).\n\n"
               "  --http [HOST:]PORT      Streamable HTTP at /mcp and legacy SSE at /sse (HOST defaults\n"
               "                          to 127.0.0.1; PORT 0 picks a free port)\n"
               "  --socket PATH           the same HTTP over a Unix socket created with mode 0600\n"
"  --no-auth               HTTP on loopback without a token: every local user can then\n"
               "                          use this server; refused on other addresses\n"
               "  --allow-host NAME       accept this Host/Origin name too (repeatable;\n"
               "                          env CONTAINER_MCP_ALLOWED_HOSTS)\n"
               "  --allow-origin ORIGIN   let web pages of ORIGIN (scheme://host[:port]) call this server\n"
               "                          from a browser (CORS; they still need the token; repeatable;\n"
               "                          env CONTAINER_MCP_ALLOWED_ORIGINS)\n"
               "  --allow-container NAME  let dexec, dpatch and dinspect act on this existing container,\n"
               "                          managed or not (id or name; repeatable;\n"
               "                          env CONTAINER_MCP_ALLOWED_CONTAINERS)\n"
               "  --runlog-dir DIR        where dexec keeps every run, one file per conversation and day\n"
               "                          (env CONTAINER_MCP_RUNLOG_DIR; default: runlog/ in the state dir)\n"
               "  --toolsets LIST         tool families, comma-separated: containers, images, sandbox,\n"
               "                          files, codex, web, diagnostics, or all (env CONTAINER_MCP_TOOLSETS)\n"
               "  --backend NAME          native, docker or apple (env CONTAINER_MCP_BACKEND; default: the first\n"
               "                          that works here)\n"
               "  --page-size N           tools per tools/list page (env CONTAINER_MCP_PAGE_SIZE; 100)\n"
               "  --max-message-bytes N   largest accepted message (env CONTAINER_MCP_MAX_MESSAGE_BYTES;\n"
               "                          16777216)\n"
               "  --env-file PATH         read CONTAINER_MCP_* settings from a file (the environment wins)\n"
               "  --log-level LEVEL       debug, info, warn or error (stderr; default info)\n"
               "  --pid-file PATH         write the pid to PATH (0600) and hold a lock on it while running\n"
               "                          (`container-mcp daemon` uses it to find this server)\n"
               "  -h, --help              show this help\n\n"
               "HTTP needs a bearer token: CONTAINER_MCP_TOKEN, or else (loopback only) the one\n"
               "generated into the state dir's http-token file, which the log names. An address\n"
               "other than loopback needs CONTAINER_MCP_TOKEN. The Unix socket needs none unless\n"
               "CONTAINER_MCP_TOKEN is set. See README.md for every CONTAINER_MCP_* setting.\n");
}

typedef struct serve_opts {
        const char *http, *socket, *env_file, *toolsets, *backend, *log_level, *pid_file, *runlog_dir;
        const char *hosts[32];
        size_t n_hosts;
        const char *origins[32];
        size_t n_origins;
        const char *containers[64];
        size_t n_containers;
        unsigned long page_size, max_message;
        bool no_auth;
} serve_opts;

static int parse_number(const char *opt, const char *v, unsigned long min, unsigned long max, unsigned long *ret) {
        char *end;
        unsigned long n = strtoul(v, &end, 10);
        if (*v == '-' || *end || end == v || n < min || n > max)
                return (void)cmd_usage_error("serve", "%s %s: expected a whole number from %lu to %lu", opt, v, min,
                                             max),
                       -1;
        *ret = n;
        return 0;
}

static int parse_args(int argc, char **argv, serve_opts *o) {
        enum { O_HTTP = 256, O_SOCKET, O_HOST, O_TOOLSETS, O_BACKEND, O_PAGE, O_MAXMSG, O_ENVFILE, O_LOGLEVEL, O_NOAUTH,
               O_ORIGIN, O_CONTAINER, O_PIDFILE, O_RUNLOG };
        static const struct option opts[] = {
                {"http", required_argument, NULL, O_HTTP},
                {"socket", required_argument, NULL, O_SOCKET},
                {"allow-host", required_argument, NULL, O_HOST},
                {"toolsets", required_argument, NULL, O_TOOLSETS},
                {"backend", required_argument, NULL, O_BACKEND},
                {"page-size", required_argument, NULL, O_PAGE},
                {"max-message-bytes", required_argument, NULL, O_MAXMSG},
                {"env-file", required_argument, NULL, O_ENVFILE},
                {"log-level", required_argument, NULL, O_LOGLEVEL},
                {"no-auth", no_argument, NULL, O_NOAUTH},
                {"allow-origin", required_argument, NULL, O_ORIGIN},
                {"allow-container", required_argument, NULL, O_CONTAINER},
                {"pid-file", required_argument, NULL, O_PIDFILE},
                {"runlog-dir", required_argument, NULL, O_RUNLOG},
                {"help", no_argument, NULL, 'h'},
                {NULL, 0, NULL, 0},
        };
        int c;
        opterr = 0;
        optind = 1;
        while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
                switch (c) {
                case 'h': serve_help(); return 1;
                case O_HTTP: o->http = optarg; break;
                case O_SOCKET: o->socket = optarg; break;
                case O_HOST:
                        if (o->n_hosts >= 31)
                                return (void)cmd_usage_error("serve", "--allow-host: at most 31 names"), -1;
                        o->hosts[o->n_hosts++] = optarg;
                        break;
                case O_TOOLSETS: o->toolsets = optarg; break;
                case O_BACKEND: o->backend = optarg; break;
                case O_PAGE:
                        if (parse_number("--page-size", optarg, 1, 10000, &o->page_size) < 0)
                                return -1;
                        break;
                case O_MAXMSG:
                        if (parse_number("--max-message-bytes", optarg, 1024, 1ul << 30, &o->max_message) < 0)
                                return -1;
                        break;
                case O_ENVFILE: o->env_file = optarg; break;
                case O_LOGLEVEL: o->log_level = optarg; break;
                case O_NOAUTH: o->no_auth = true; break;
                case O_PIDFILE: o->pid_file = optarg; break;
                case O_ORIGIN:
                        if (o->n_origins >= 31)
                                return (void)cmd_usage_error("serve", "--allow-origin: at most 31 origins"), -1;
                        o->origins[o->n_origins++] = optarg;
                        break;
                case O_CONTAINER:
                        if (o->n_containers >= 63)
                                return (void)cmd_usage_error("serve", "--allow-container: at most 63 containers "
                                                                      "(CONTAINER_MCP_ALLOWED_CONTAINERS takes more)"),
                                       -1;
                        if (!cm_config_container_ref_ok(optarg))
                                return (void)cmd_usage_error("serve", "--allow-container \"%s\": expected a "
                                                                      "container id or name (letters, digits, "
                                                                      "then also _ . -)", optarg),
                                       -1;
                        o->containers[o->n_containers++] = optarg;
                        break;
                case O_RUNLOG:
                        if (!*optarg)
                                return (void)cmd_usage_error("serve", "--runlog-dir: expected a directory"), -1;
                        o->runlog_dir = optarg;
                        break;
                case ':': return (void)cmd_usage_error("serve", "option %s needs a value", argv[optind - 1]), -1;
                default: return (void)cmd_usage_error("serve", "unknown option %s", argv[optind - 1]), -1;
                }
        }
        if (optind < argc)
                return (void)cmd_usage_error("serve", "unexpected argument \"%s\"", argv[optind]), -1;
        return 0;
}

static int apply_log_level(const char *level) {
        static const char *const names[] = {"debug", "info", "warn", "error"};
        for (int i = 0; i < 4; i++)
                if (strcmp(level, names[i]) == 0) {
                        cm_log_set_level((enum cm_log_level)i);
                        return 0;
                }
        return (void)cmd_usage_error("serve", "--log-level %s: expected debug, info, warn or error", level), -1;
}

/* Flags win over the environment and the env-file. */
static int apply_flags(cm_config *cfg, const serve_opts *o, cm_err *err) {
        if (o->toolsets && cm_config_set_toolsets(cfg, o->toolsets, err) < 0)
                return -1;
        if (o->backend) {
                free(cfg->backend);
                cfg->backend = xstrdup(o->backend);
        }
        for (size_t i = 0; i < o->n_hosts; i++)
                cm_config_add_host(cfg, o->hosts[i]);
        for (size_t i = 0; i < o->n_origins; i++)
                cm_config_add_origin(cfg, o->origins[i]);
        for (size_t i = 0; i < o->n_containers; i++)
                cm_config_add_container(cfg, o->containers[i]);
        if (o->runlog_dir && cm_config_set_runlog_dir(cfg, o->runlog_dir, "--runlog-dir", err) < 0)
                return -1;
        if (o->page_size)
                cfg->page_size = (unsigned)o->page_size;
        if (o->max_message)
                cfg->max_message_bytes = o->max_message;
        return 0;
}


static json_t *daemon_status(void *arg) { return cm_daemon_sandboxes_json(arg); }

static int run_transport(mcp_server *srv, const cm_config *cfg, const serve_opts *o, cm_err *err) {
        cm_http_opts http = {0};
        if (!o->http && !o->socket)
                return cm_stdio_serve(srv, STDIN_FILENO, STDOUT_FILENO, err);
        http.listen = o->http;
        http.socket_path = o->socket;
        http.token = cfg->token;
        http.allowed_hosts = (const char *const *)cfg->allowed_hosts;
        http.state_dir = cfg->state_dir;
        http.no_auth = o->no_auth;
        http.conn_timeout_sec = cfg->http_timeout_sec;
        http.max_conns = cfg->http_max_connections;
        http.max_conns_per_ip = cfg->http_client_connections;
        http.threads = cfg->http_threads;
        http.allowed_origins = (const char *const *)cfg->allowed_origins;
        http.max_sessions = cfg->http_max_sessions;
        http.max_sessions_per_cred = cfg->http_credential_sessions;
        http.session_idle_sec = cfg->http_session_idle_sec;
        http.init_grace_sec = cfg->http_init_grace_sec;
        http.stream_after_ms = cfg->http_stream_after_ms;
        http.keepalive_ms = cfg->http_keepalive_ms;
        http.replay_sec = cfg->http_replay_sec;
        http.status = daemon_status;
        http.status_arg = mcp_server_userdata(srv);
        return cm_http_serve(srv, &http, err);
}

int cmd_serve(int argc, char **argv) {
        serve_opts o = {0};
        cm_config cfg;
        cm_app app = {0};
        cm_err err = CM_ERR_INIT;
        mcp_server *srv = NULL;
        int r = parse_args(argc, argv, &o), ret = 1, pid_fd = -1;

        if (r != 0)
                return r > 0 ? 0 : 2;
        if (o.log_level && apply_log_level(o.log_level) < 0)
                return 2;
        if (o.pid_file && !o.socket && !o.http)
                return cmd_usage_error("serve", "--pid-file is for a server in the background: give --socket "
                                                "PATH or --http too");
        /* First, before the socket: a second daemon stops here, with the
         * first one's pid, and never touches the first one's socket. */
        if (o.pid_file && cm_pidfile_take(o.pid_file, &pid_fd, &err) < 0) {
                log_error("%s", err.msg);
                return 1;
        }
        if (cm_config_load(&cfg, o.env_file, &err) < 0 || apply_flags(&cfg, &o, &err) < 0 ||
            cm_app_open(&app, &cfg, &err) < 0) {
                log_error("%s", err.msg);
                goto out;
        }
        srv = mcp_server_new(&(mcp_server_info){.name = "container-mcp",
                                                .version = CM_VERSION,
                                                .instructions = INSTRUCTIONS,
                                                .page_size = cfg.page_size,
                                                .max_message_bytes = cfg.max_message_bytes},
                             &app);
        if (cm_tools_register(srv, &cfg, &err) < 0) {
                log_error("%s", err.msg);
                goto out;
        }
        cmd_install_stop_signals();
        if (run_transport(srv, &cfg, &o, &err) < 0)
                log_error("%s", err.msg);
        else
                ret = 0;
out:
        mcp_server_free(srv);
        cm_app_close(&app);
        cm_config_free(&cfg);
        /* Last: while the lock is held, `daemon stop` waits for us, so it
         * returns only once the sandboxes are gone. */
        cm_pidfile_release(o.pid_file, pid_fd);
        return ret;
}
