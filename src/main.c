/* container-mcp: disposable, isolated containers for AI agents over MCP.
 * This file only dispatches to a subcommand; everything else is a library. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "config.h"
#include "transport/transport.h"

static const cm_command commands[] = {
        {"serve", "serve MCP over stdio (default), Streamable HTTP, or a Unix socket", cmd_serve},
        {"status", "print which backends work here, and the active policy, as JSON", cmd_status},
        {"daemon", "start, stop or show the shared background server (start|stop|status)", cmd_daemon},
        {"proxy", "MCP on stdio, served by the shared daemon (what a client config launches)", cmd_proxy},
        {"exec", "run a command in a container through dexec: exec --container NAME 'cmd' [-]", cmd_exec},
        {"patch", "apply a Codex patch in a container through dpatch: patch --container NAME FILE|-", cmd_patch},
        {"fetch-image", "pull an image from a registry into an OCI layout: fetch-image REF DIR [--platform P]",
         cmd_fetch_image},
        {"pull", "pull an image from its registry into the native image store: pull REF", cmd_pull},
        {"image", "the native image store: image pull REF, import FILE|DIR [NAME], list, rm NAME, prune", cmd_image},
        {"start-service", "the same as daemon start", cmd_service},
        {"stop-service", "the same as daemon stop", cmd_service},
        {"status-service", "the same as daemon status", cmd_service},
};

static void usage(FILE *f) {
        fprintf(f, "container-mcp %s: disposable, isolated containers for AI agents, over MCP\n\n"
                   "Usage: container-mcp [COMMAND] [OPTIONS]\n\nCommands:\n", CM_VERSION);
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
                fprintf(f, "  %-14s %s\n", commands[i].name, commands[i].summary);
        fprintf(f, "\nWith no command, or with only options, container-mcp serves MCP on stdin/stdout.\n"
                   "`container-mcp COMMAND --help` explains a command.\n\n"
                   "  -h, --help     show this help\n"
                   "  -V, --version  show the version\n");
}

static void on_stop_signal(int sig) {
        (void)sig;
        cm_request_stop();
}

void cmd_install_stop_signals(void) {
        struct sigaction sa = {0};
        (void)cm_stop_fd(); /* the pipe must exist before a handler can write to it */
        sa.sa_handler = on_stop_signal;
        (void)sigemptyset(&sa.sa_mask);
        (void)sigaction(SIGINT, &sa, NULL);
        (void)sigaction(SIGTERM, &sa, NULL);
        (void)sigaction(SIGHUP, &sa, NULL);
        sa.sa_handler = SIG_IGN;
        (void)sigaction(SIGPIPE, &sa, NULL);
}

int cmd_usage_error(const char *cmd, const char *fmt, ...) {
        va_list ap;
        fprintf(stderr, "container-mcp %s: ", cmd);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "\nTry `container-mcp %s --help`.\n", cmd);
        return 2;
}

/* The third seed puts its options first (`run.py --allow-container x
 * start-service`): a *-service name after options is moved to the front. */
static void seed_order(int argc, char **argv) {
        if (argc < 3 || argv[1][0] != '-')
                return;
        for (int i = 2; i < argc; i++) {
                char *cmd = argv[i];
                if (strcmp(cmd, "start-service") != 0 && strcmp(cmd, "stop-service") != 0 &&
                    strcmp(cmd, "status-service") != 0)
                        continue;
                memmove(argv + 2, argv + 1, (size_t)(i - 1) * sizeof *argv);
                argv[1] = cmd;
                return;
        }
}

int main(int argc, char **argv) {
        static char serve[] = "serve";
        if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
                          strcmp(argv[1], "help") == 0)) {
                usage(stdout);
                return 0;
        }
        if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0 ||
                          strcmp(argv[1], "version") == 0)) {
                printf("container-mcp %s\n", CM_VERSION);
                return 0;
        }
        seed_order(argc, argv);
        if (argc < 2 || argv[1][0] == '-') {
                /* No command: serve, with whatever options were given. */
                argv[0] = serve;
                return cmd_serve(argc, argv);
        }
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
                if (strcmp(argv[1], commands[i].name) == 0)
                        return commands[i].run(argc - 1, argv + 1);
        fprintf(stderr, "container-mcp: unknown command \"%s\"\n\n", argv[1]);
        usage(stderr);
        return 2;
}
