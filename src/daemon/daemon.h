/* The shared daemon (issue 11, the third seed's architecture): one `serve
 * --socket` in the background that every `container-mcp proxy` (one per
 * agent) and the CLI twins talk to.
 *
 * Its files sit side by side, named after the socket: <base>.sock (0600,
 * made by the server), <base>.pid (0600; the daemon holds an exclusive
 * flock on it for its whole life, so "a daemon is alive" is "the pid file
 * is locked", which a crash cannot leave behind and a recycled pid cannot
 * fake), <base>.log (0600; the daemon's stderr) and <base>.lock (0600;
 * held by whoever starts a daemon, so two concurrent starts make one). */
#ifndef CM_DAEMON_H
#define CM_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "util/err.h"
#include "util/json.h"

typedef struct cm_daemon_paths {
        char *socket, *pid, *log, *lock;
} cm_daemon_paths;

/* The files of the daemon at `socket_path`, or of the default one
 * (<state dir>/container-mcp.sock) when NULL.  A relative path is made
 * absolute against the working directory. */
int cm_daemon_paths_init(cm_daemon_paths *p, const char *socket_path, cm_err *err);
void cm_daemon_paths_free(cm_daemon_paths *p);

/* `serve --pid-file`: create or reuse `path` (a regular 0600 file of ours,
 * never a symlink), lock it for this process's life and write our pid.
 * Refused when a live daemon holds it.  *ret_fd stays open (close-on-exec). */
int cm_pidfile_take(const char *path, int *ret_fd, cm_err *err);
/* At exit: remove the file while it is still the one we hold. */
void cm_pidfile_release(const char *path, int fd);

/* The pid of the live daemon holding p->pid, 0 when none does (no file, or
 * nobody holds its lock: what a crash leaves). */
pid_t cm_daemon_alive(const cm_daemon_paths *p);

/* The daemon answers on its socket: GET /status gets a response. */
bool cm_daemon_answers(const cm_daemon_paths *p);

/* Start a daemon unless one runs: under p->lock, a live one (locked pid
 * file, answering socket) is reported with *ret_already; a stale pid file
 * and socket are removed; else `container-mcp serve --socket S --pid-file P
 * ARGS...` starts detached (setsid, stdio on the log, no other fd), and
 * this waits (up to timeout_ms) until it answers.  A daemon that dies
 * starting is reported with the last lines of its log. */
typedef struct cm_daemon_started {
        pid_t pid;
        bool already;
} cm_daemon_started;
int cm_daemon_start(const cm_daemon_paths *p, char *const *args, size_t n_args, unsigned timeout_ms,
                    cm_daemon_started *ret, cm_err *err);

/* SIGTERM to the live daemon, then wait (up to timeout_ms) for it to exit:
 * the server's own shutdown ends every session and removes their
 * sandboxes first.  Returns 1 when none was running (*ret_pid 0), 0 once it
 * exited, -ETIMEDOUT (err says what to do) when it is still there. */
int cm_daemon_stop(const cm_daemon_paths *p, unsigned timeout_ms, pid_t *ret_pid, cm_err *err);

/* The daemon's GET /status document (pid, uptimeSec, sessions, sandboxes). */
int cm_daemon_status(const cm_daemon_paths *p, json_t **ret, cm_err *err);

/* CONTAINER_MCP_TOKEN, which the socket asks for when it is set. */
const char *cm_daemon_token(void);

#endif
