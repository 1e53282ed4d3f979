/* `container-mcp proxy`: what an MCP client's config launches.  It speaks
 * MCP on stdin/stdout and relays it to the shared daemon's socket
 * (src/daemon/relay.c), starting the daemon first when none answers. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "daemon/daemon.h"
#include "daemon/relay.h"
#include "transport/transport.h"
#include "util/cleanup.h"

static void proxy_help(void) {
        printf("Usage: container-mcp proxy [--socket-path PATH] [--timeout SEC] [SERVE OPTIONS]\n\n"
               "MCP on stdin/stdout, served by the shared daemon (`container-mcp daemon`): each\n"
               "proxy is one session of it.  When no daemon answers on the socket, the proxy starts\n"
               "one first, with the SERVE OPTIONS given here (--allow-container, --runlog-dir, ...;\n"
               "a running daemon keeps its own).  The session ends when stdin closes, on SIGTERM,\n"
               "SIGHUP or SIGINT, and when the proxy dies any other way (the daemon sees its\n"
               "connection close).  CONTAINER_MCP_TOKEN, when set, is sent to the socket.\n\n"
               "  --socket-path PATH  the daemon's socket (default <state dir>/container-mcp.sock)\n"
               "  --timeout SEC       how long to wait for a daemon it starts (default 60)\n"
               "  -h, --help          show this help\n");
}


int cmd_proxy(int argc, char **argv) {
        cleanup_free char **serve = xcalloc((size_t)argc + 1, sizeof *serve);
        const char *socket_path = NULL;
        unsigned timeout = 60;
        size_t n = 0;
        cm_daemon_paths p;
        cm_err err = CM_ERR_INIT;
        int ret = 1;
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
                        return proxy_help(), 0;
                if ((strcmp(argv[i], "--socket-path") == 0 || strcmp(argv[i], "--timeout") == 0) && i + 1 >= argc)
                        return cmd_usage_error("proxy", "option %s needs a value", argv[i]);
                if (strcmp(argv[i], "--socket-path") == 0)
                        socket_path = argv[++i];
                else if (strcmp(argv[i], "--timeout") == 0)
                        timeout = (unsigned)strtoul(argv[++i], NULL, 10);
                else
                        serve[n++] = argv[i];
        }
        if (timeout < 1 || timeout > 3600)
                return cmd_usage_error("proxy", "--timeout: expected seconds, 1 to 3600");
        if (cm_daemon_paths_init(&p, socket_path, &err) < 0) {
                fprintf(stderr, "container-mcp proxy: %s\n", err.msg);
                return 1;
        }
        /* Before any thread: starting a daemon forks. */
        if (!cm_daemon_answers(&p)) {
                cm_daemon_started st;
                if (cm_daemon_start(&p, serve, n, timeout * 1000, &st, &err) < 0) {
                        fprintf(stderr, "container-mcp proxy: %s\n", err.msg);
                        goto out;
                }
                if (!st.already)
                        fprintf(stderr, "container-mcp proxy: started the daemon (pid %ld, socket %s, log %s)\n",
                                (long)st.pid, p.socket, p.log);
        }
        cmd_install_stop_signals();
        if (cm_relay_run(&(cm_relay_opts){.socket_path = p.socket,
                                          .token = cm_daemon_token(),
                                          .in_fd = STDIN_FILENO,
                                          .out_fd = STDOUT_FILENO},
                         &err) < 0)
                fprintf(stderr, "container-mcp proxy: %s\n", err.msg);
        else
                ret = 0;
out:
        cm_daemon_paths_free(&p);
        return ret;
}
