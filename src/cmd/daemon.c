/* `container-mcp daemon start|stop|status` and the third seed's names for
 * them, `start-service`, `stop-service`, `status-service`: one server in
 * the background on a 0600 Unix socket, shared by every proxy and CLI twin
 * (src/daemon/daemon.c does the work). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "daemon/daemon.h"
#include "util/cleanup.h"
#include "util/json.h"

#define DEFAULT_TIMEOUT_SEC 60

static void daemon_help(void) {
        printf("Usage: container-mcp daemon start|stop|status [OPTIONS] [SERVE OPTIONS]\n"
               "       container-mcp start-service|stop-service|status-service [OPTIONS] [SERVE OPTIONS]\n\n"
               "One server in the background for every agent on this machine: `container-mcp proxy`\n"
               "(what an MCP client launches) and `container-mcp exec|patch` talk to it.\n\n"
               "  start    start it unless it runs (then say so, with its pid); a pid file or socket\n"
               "           left by a crash is replaced.  Takes serve's options (--allow-container,\n"
               "           --runlog-dir, --toolsets, --env-file, ...; see `container-mcp serve --help`)\n"
               "           and the environment's CONTAINER_MCP_* settings\n"
               "  stop     SIGTERM, then wait until it has ended every session and removed their\n"
               "           sandboxes and exited\n"
               "  status   pid, uptime, socket, sessions, sandboxes (exit 3 when it is not running)\n\n"
               "  --socket-path PATH  the daemon's socket (default <state dir>/container-mcp.sock);\n"
               "                      its .pid, .log and .lock files sit beside it, all mode 0600\n"
               "  --timeout SEC       how long start waits for it to answer, and stop for it to\n"
               "                      exit (default %d)\n"
               "  --json              status: print the daemon's own status document\n"
               "  -h, --help          show this help\n\n"
               "The daemon keeps the working directory it was started in (relative paths in its\n"
               "options, and the default allowed mount root, are taken from there).\n",
               DEFAULT_TIMEOUT_SEC);
}

typedef struct daemon_opts {
        const char *socket_path;
        unsigned timeout_sec;
        bool json;
        char **serve_args; /* the options passed on to serve */
        size_t n_serve;
} daemon_opts;

static int parse(const char *cmd, int argc, char **argv, daemon_opts *o) {
        o->timeout_sec = DEFAULT_TIMEOUT_SEC;
        o->serve_args = xcalloc((size_t)argc + 1, sizeof *o->serve_args);
        for (int i = 0; i < argc; i++) {
                const char *a = argv[i];
                if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
                        return daemon_help(), 1;
                if (strcmp(a, "--socket-path") == 0 || strcmp(a, "--timeout") == 0) {
                        if (i + 1 >= argc)
                                return cmd_usage_error(cmd, "option %s needs a value", a), -1;
                        if (a[2] == 's') {
                                o->socket_path = argv[++i];
                        } else {
                                char *end;
                                unsigned long v = strtoul(argv[++i], &end, 10);
                                if (*end || v < 1 || v > 3600)
                                        return cmd_usage_error(cmd, "--timeout %s: expected seconds, 1 to 3600",
                                                               argv[i]),
                                               -1;
                                o->timeout_sec = (unsigned)v;
                        }
                } else if (strncmp(a, "--socket-path=", 14) == 0) {
                        o->socket_path = a + 14;
                } else if (strcmp(a, "--json") == 0) {
                        o->json = true;
                } else if (strcmp(a, "--socket") == 0 || strcmp(a, "--pid-file") == 0 ||
                           strncmp(a, "--socket=", 9) == 0 || strncmp(a, "--pid-file=", 11) == 0) {
                        return cmd_usage_error(cmd, "%s is the daemon's own: choose its socket with --socket-path",
                                               a),
                               -1;
                } else {
                        o->serve_args[o->n_serve++] = argv[i]; /* serve checks them */
                }
        }
        return 0;
}

static int do_start(const cm_daemon_paths *p, const daemon_opts *o) {
        cm_err err = CM_ERR_INIT;
        cm_daemon_started st;
        if (cm_daemon_start(p, o->serve_args, o->n_serve, o->timeout_sec * 1000, &st, &err) < 0) {
                fprintf(stderr, "container-mcp daemon: %s\n", err.msg);
                return 1;
        }
        if (st.already)
                printf("container-mcp daemon is already running: pid %ld, socket %s\n", (long)st.pid, p->socket);
        else
                printf("container-mcp daemon started: pid %ld, socket %s, log %s\n", (long)st.pid, p->socket, p->log);
        return 0;
}

static int do_stop(const cm_daemon_paths *p, const daemon_opts *o) {
        cm_err err = CM_ERR_INIT;
        pid_t pid;
        int r = cm_daemon_stop(p, o->timeout_sec * 1000, &pid, &err);
        if (r < 0) {
                fprintf(stderr, "container-mcp daemon: %s\n", err.msg);
                return 1;
        }
        if (r == 1)
                printf("container-mcp daemon is not running (socket %s)\n", p->socket);
        else
                printf("container-mcp daemon stopped: pid %ld exited, its sessions ended and their sandboxes "
                       "removed\n",
                       (long)pid);
        return 0;
}

static void print_uptime(json_int_t s) {
        if (s >= 86400)
                printf("  uptime     %lldd %lldh %lldm\n", s / 86400, s % 86400 / 3600, s % 3600 / 60);
        else if (s >= 3600)
                printf("  uptime     %lldh %lldm %llds\n", s / 3600, s % 3600 / 60, s % 60);
        else
                printf("  uptime     %lldm %llds\n", s / 60, s % 60);
}

static void print_status(const cm_daemon_paths *p, json_t *doc) {
        json_t *boxes = json_object_get(doc, "sandboxes"), *b;
        size_t i;
        printf("container-mcp daemon: running\n");
        printf("  pid        %lld\n", (long long)json_integer_value(json_object_get(doc, "pid")));
        print_uptime(json_integer_value(json_object_get(doc, "uptimeSec")));
        printf("  socket     %s\n", p->socket);
        printf("  log        %s\n", p->log);
        printf("  sessions   %lld (limit %lld)\n", (long long)json_integer_value(json_object_get(doc, "sessions")),
               (long long)json_integer_value(json_object_get(doc, "sessionLimit")));
        printf("  sandboxes  %zu%s%s\n", json_array_size(boxes), cm_json_str(doc, "backend") ? " on " : "",
               cm_json_str(doc, "backend") ? cm_json_str(doc, "backend") : "");
        json_array_foreach(boxes, i, b) printf("    %.12s  %s\n", cm_json_str(b, "id") ? cm_json_str(b, "id") : "?",
                                               cm_json_str(b, "name") ? cm_json_str(b, "name") : "");
}

static int do_status(const cm_daemon_paths *p, const daemon_opts *o) {
        cm_err err = CM_ERR_INIT;
        cleanup_json json_t *doc = NULL;
        pid_t pid = cm_daemon_alive(p);
        if (pid == 0) {
                printf("container-mcp daemon: not running (no live daemon holds %s)\n", p->pid);
                return 3;
        }
        if (cm_daemon_status(p, &doc, &err) < 0) {
                fprintf(stderr, "container-mcp daemon: pid %ld holds %s but: %s\n", (long)pid, p->pid, err.msg);
                return 1;
        }
        if (o->json) {
                (void)json_object_set_new(doc, "log", json_string(p->log));
                (void)json_dumpf(doc, stdout, JSON_INDENT(2));
                putchar('\n');
        } else {
                print_status(p, doc);
        }
        return 0;
}

static int run(const char *cmd, const char *action, int argc, char **argv) {
        daemon_opts o = {0};
        cm_daemon_paths p;
        cm_err err = CM_ERR_INIT;
        int r = parse(cmd, argc, argv, &o), ret;
        if (r != 0) {
                free(o.serve_args);
                return r > 0 ? 0 : 2;
        }
        if (strcmp(action, "start") != 0 && o.n_serve > 0) {
                ret = cmd_usage_error(cmd, "unexpected argument \"%s\" (serve's options go to start)",
                                      o.serve_args[0]);
                free(o.serve_args);
                return ret;
        }
        if (cm_daemon_paths_init(&p, o.socket_path, &err) < 0) {
                fprintf(stderr, "container-mcp daemon: %s\n", err.msg);
                free(o.serve_args);
                return 1;
        }
        ret = strcmp(action, "start") == 0  ? do_start(&p, &o)
              : strcmp(action, "stop") == 0 ? do_stop(&p, &o)
                                            : do_status(&p, &o);
        cm_daemon_paths_free(&p);
        free(o.serve_args);
        return ret;
}

int cmd_daemon(int argc, char **argv) {
        if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0))
                return daemon_help(), 0;
        if (argc < 2 || (strcmp(argv[1], "start") != 0 && strcmp(argv[1], "stop") != 0 &&
                         strcmp(argv[1], "status") != 0))
                return cmd_usage_error("daemon", "expected start, stop or status%s%s", argc >= 2 ? ", not " : "",
                                       argc >= 2 ? argv[1] : "");
        return run("daemon", argv[1], argc - 2, argv + 2);
}

/* The seed's names: start-service, stop-service, status-service. */
int cmd_service(int argc, char **argv) {
        char action[8];
        (void)snprintf(action, sizeof action, "%.*s", (int)strcspn(argv[0], "-"), argv[0]);
        return run(argv[0], action, argc - 1, argv + 1);
}
