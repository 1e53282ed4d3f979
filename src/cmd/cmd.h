/* Subcommands: one small file each, dispatched from the table in main.c. */
#ifndef CM_CMD_H
#define CM_CMD_H

typedef struct cm_command {
        const char *name;
        const char *summary;
        int (*run)(int argc, char **argv); /* argv[0] is the subcommand */
} cm_command;

int cmd_serve(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_daemon(int argc, char **argv);
int cmd_service(int argc, char **argv); /* start-service, stop-service, status-service */
int cmd_proxy(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_patch(int argc, char **argv);
int cmd_fetch_image(int argc, char **argv);
int cmd_image(int argc, char **argv);
int cmd_pull(int argc, char **argv); /* image pull */

/* Shared by subcommands: report a usage error the way every one does. */
int cmd_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* SIGINT, SIGTERM and SIGHUP ask for a clean stop (cm_request_stop);
 * SIGPIPE is ignored: a vanished client is an error return, not a death. */
void cmd_install_stop_signals(void);

#endif
