/* The shared daemon's files, start and stop (see daemon.h). */
#include "daemon/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/client.h"
#include "policy/config.h"
#include "util/cleanup.h"
#include "util/clock.h"

/* A log past this is moved to <log>.1 when a daemon starts (one old log
 * kept): the ceiling on what the daemon's log takes. */
#define LOG_ROTATE_BYTES ((off_t)16 << 20)

const char *cm_daemon_token(void) {
        const char *t = getenv("CONTAINER_MCP_TOKEN");
        return t && *t ? t : NULL;
}

int cm_daemon_paths_init(cm_daemon_paths *p, const char *socket_path, cm_err *err) {
        cleanup_free char *sock = NULL;
        size_t base;
        *p = (cm_daemon_paths){0};
        if (socket_path && !*socket_path)
                return cm_err_set(err, EINVAL, "--socket-path is empty: give the daemon's socket file"), -EINVAL;
        if (socket_path && socket_path[0] == '/') {
                sock = xstrdup(socket_path);
        } else if (socket_path) {
                cleanup_free char *cwd = getcwd(NULL, 0);
                if (!cwd)
                        return cm_err_sys(err, errno, "--socket-path %s: the working directory", socket_path), -1;
                sock = xasprintf("%s/%s", cwd, socket_path);
        } else {
                cleanup_free char *dir = cm_config_default_state_dir();
                cm_mkdir_p(dir, 0700);
                if (access(dir, W_OK) < 0)
                        return cm_err_sys(err, errno,
                                          "the state dir %s cannot be made or written (set CONTAINER_MCP_STATE_DIR or give "
                                          "--socket-path)",
                                          dir),
                               -1;
                sock = xasprintf("%s/container-mcp.sock", dir);
        }
        base = strlen(sock);
        if (base > 5 && strcmp(sock + base - 5, ".sock") == 0)
                base -= 5;
        p->pid = xasprintf("%.*s.pid", (int)base, sock);
        p->log = xasprintf("%.*s.log", (int)base, sock);
        p->lock = xasprintf("%.*s.lock", (int)base, sock);
        p->socket = steal_pointer(&sock);
        return 0;
}

void cm_daemon_paths_free(cm_daemon_paths *p) {
        free(p->socket);
        free(p->pid);
        free(p->log);
        free(p->lock);
        *p = (cm_daemon_paths){0};
}

/* Open one of our 0600 files: never through a symlink, and only a regular
 * file of our uid that nobody else may read (another local user must not
 * plant one we would trust, or read our log). */
static int open_own(const char *path, int flags, cm_err *err) {
        struct stat st;
        int fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return cm_err_sys(err, errno, "opening %s", path), -errno;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
                (void)close(fd);
                return cm_err_set(err, EPERM,
                                  "%s is not a regular file of uid %u with mode 0600: remove it, or choose another "
                                  "--socket-path",
                                  path, (unsigned)geteuid()),
                       -EPERM;
        }
        return fd;
}

int cm_pidfile_take(const char *path, int *ret_fd, cm_err *err) {
        cleanup_close int fd = open_own(path, O_RDWR | O_CREAT, err);
        char buf[32];
        int n;
        if (fd < 0)
                return -1;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                char held[32] = "";
                ssize_t r = pread(fd, held, sizeof held - 1, 0);
                held[r > 0 ? r : 0] = '\0';
                held[strcspn(held, "\n")] = '\0';
                return cm_err_set(err, EBUSY,
                                  "pid file %s is held by a running daemon (pid %s): stop it first "
                                  "(container-mcp daemon stop), or choose another --socket-path",
                                  path, *held ? held : "?"),
                       -EBUSY;
        }
        n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)n, 0) != n)
                return cm_err_sys(err, errno, "writing pid file %s", path), -1;
        *ret_fd = take_fd(&fd);
        return 0;
}

void cm_pidfile_release(const char *path, int fd) {
        struct stat a, b;
        if (fd < 0)
                return;
        /* Only our own file: a pid file another daemon made since (after
         * someone removed ours) is not ours to remove. */
        if (fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
                (void)unlink(path);
        (void)close(fd);
}

pid_t cm_daemon_alive(const cm_daemon_paths *p) {
        cleanup_close int fd = open(p->pid, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        struct stat st;
        char buf[32];
        ssize_t n;
        long pid;
        if (fd < 0)
                return 0;
        /* Only a pid file of ours names a daemon of ours: one another user
         * planted (in a shared directory) and holds a lock on must never
         * make `stop` signal the pid it names. */
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
                return 0;
        if (flock(fd, LOCK_SH | LOCK_NB) == 0)
                return 0; /* nobody holds it: a crash left it */
        n = pread(fd, buf, sizeof buf - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        pid = strtol(buf, NULL, 10);
        /* Locked but no pid yet: a daemon between its lock and its write. */
        return pid > 0 ? (pid_t)pid : -1;
}

static int ignore_msg(void *arg, const cm_uresp *resp, char *msg, size_t len) {
        (void)arg, (void)resp, (void)msg, (void)len;
        return 0;
}

bool cm_daemon_answers(const cm_daemon_paths *p) {
        cm_uconn c = CM_UCONN_INIT;
        cm_uresp resp;
        cm_err err = CM_ERR_INIT;
        cm_ureq q = {.method = "GET", .path = "/status", .token = cm_daemon_token(), .accept = "application/json"};
        int r = cm_uhttp(&c, p->socket, &q, ignore_msg, NULL, &resp, &err);
        cm_uconn_close(&c);
        return r == 0 && resp.status > 0;
}

static int take_status(void *arg, const cm_uresp *resp, char *msg, size_t len) {
        json_t **ret = arg;
        if (resp->status == 200)
                *ret = json_loadb(msg, len, 0, NULL);
        return 0;
}

int cm_daemon_status(const cm_daemon_paths *p, json_t **ret, cm_err *err) {
        cm_uconn c = CM_UCONN_INIT;
        cm_uresp resp;
        cm_ureq q = {.method = "GET", .path = "/status", .token = cm_daemon_token(), .accept = "application/json"};
        json_t *doc = NULL;
        int r = cm_uhttp(&c, p->socket, &q, take_status, &doc, &resp, err);
        cm_uconn_close(&c);
        if (r < 0)
                return r;
        if (!doc)
                return cm_err_set(err, EPROTO,
                                  "the daemon at %s answered GET /status with HTTP %d%s", p->socket, resp.status,
                                  resp.status == 401 ? ": set CONTAINER_MCP_TOKEN to the daemon's token" : ""),
                       -EPROTO;
        *ret = doc;
        return 0;
}

/* ---- start ------------------------------------------------------------------ */

static void rotate_log(const char *log) {
        struct stat st;
        if (lstat(log, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > LOG_ROTATE_BYTES) {
                cleanup_free char *old = xasprintf("%s.1", log);
                (void)rename(log, old);
        }
}

/* The grandchild: detached from the caller's session and terminal, stdio
 * on the log, no fd of the caller's, then the server.  Never returns. */
static void exec_daemon(const cm_daemon_paths *p, char *const *args, size_t n_args, int log_fd) {
        char **argv = xcalloc(n_args + 7, sizeof *argv);
        size_t i = 0;
        sigset_t all;
        int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (nul < 0 || dup2(nul, STDIN_FILENO) < 0 || dup2(log_fd, STDOUT_FILENO) < 0 ||
            dup2(log_fd, STDERR_FILENO) < 0)
                _exit(127);
        /* The caller's fds (a proxy's client pipes, a terminal) stay behind. */
        if (syscall(SYS_close_range, 3u, ~0u, 0u) < 0)
                for (int fd = 3; fd < 1024; fd++)
                        (void)close(fd);
        (void)sigemptyset(&all);
        (void)sigprocmask(SIG_SETMASK, &all, NULL);
        (void)signal(SIGPIPE, SIG_DFL);
        (void)signal(SIGHUP, SIG_DFL);
        argv[i++] = (char *)"container-mcp";
        argv[i++] = (char *)"serve";
        argv[i++] = (char *)"--socket";
        argv[i++] = p->socket;
        argv[i++] = (char *)"--pid-file";
        argv[i++] = p->pid;
        for (size_t k = 0; k < n_args; k++)
                argv[i++] = args[k];
        execv("/proc/self/exe", argv);
        dprintf(STDERR_FILENO, "container-mcp daemon: exec /proc/self/exe: %s\n", strerror(errno));
        _exit(127);
}

/* Fork twice (setsid between) so the daemon is no session leader and can
 * never gain a controlling terminal.  Returns the daemon's pid. */
static pid_t spawn(const cm_daemon_paths *p, char *const *args, size_t n_args, cm_err *err) {
        cleanup_close int log_fd = -1;
        int pp[2], status;
        pid_t child, daemon_pid = -1;
        rotate_log(p->log);
        log_fd = open_own(p->log, O_WRONLY | O_APPEND | O_CREAT, err);
        if (log_fd < 0)
                return -1;
        if (pipe2(pp, O_CLOEXEC) < 0)
                return cm_err_sys(err, errno, "pipe"), -1;
        child = fork();
        if (child < 0) {
                (void)close(pp[0]), (void)close(pp[1]);
                return cm_err_sys(err, errno, "fork"), -1;
        }
        if (child == 0) {
                pid_t g;
                (void)close(pp[0]);
                if (setsid() < 0)
                        _exit(1);
                g = fork();
                if (g != 0) {
                        (void)!write(pp[1], &g, sizeof g);
                        _exit(g < 0);
                }
                exec_daemon(p, args, n_args, log_fd);
        }
        (void)close(pp[1]);
        if (read(pp[0], &daemon_pid, sizeof daemon_pid) != (ssize_t)sizeof daemon_pid)
                daemon_pid = -1;
        (void)close(pp[0]);
        while (waitpid(child, &status, 0) < 0 && errno == EINTR)
                ;
        if (daemon_pid <= 0)
                return cm_err_set(err, ECHILD, "could not start the daemon (fork failed)"), -1;
        return daemon_pid;
}

/* The last lines of the log from `from` on: why a daemon did not start. */
static void log_tail(const char *log, off_t from, char *out, size_t size) {
        cleanup_close int fd = open(log, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        struct stat st;
        ssize_t n;
        out[0] = '\0';
        if (fd < 0 || fstat(fd, &st) < 0)
                return;
        if (st.st_size - from > (off_t)size - 1)
                from = st.st_size - (off_t)size + 1;
        n = pread(fd, out, size - 1, from);
        out[n > 0 ? n : 0] = '\0';
        n = n > 0 ? n : 0;
        while (n > 0 && out[n - 1] == '\n')
                out[--n] = '\0';
}

static int pidfd_of(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

/* Whether `pidfd`'s process has exited (poll says readable). */
static bool exited(int pidfd, int wait_ms) {
        struct pollfd f = {.fd = pidfd, .events = POLLIN};
        return pidfd >= 0 && poll(&f, 1, wait_ms) > 0;
}

static int wait_answering(const cm_daemon_paths *p, pid_t pid, off_t log_from, unsigned timeout_ms, cm_err *err) {
        cleanup_close int pidfd = pidfd_of(pid);
        int64_t end = cm_now_ms() + timeout_ms;
        char tail[800];
        for (;;) {
                if (cm_daemon_alive(p) == pid && cm_daemon_answers(p))
                        return 0;
                if (exited(pidfd, 0) || (pidfd < 0 && kill(pid, 0) < 0)) {
                        log_tail(p->log, log_from, tail, sizeof tail);
                        return cm_err_set(err, ECHILD, "the daemon (pid %ld) exited while starting; its log %s says:\n%s",
                                          (long)pid, p->log, *tail ? tail : "(nothing)"),
                               -ECHILD;
                }
                if (cm_now_ms() > end)
                        return cm_err_set(err, ETIMEDOUT,
                                          "the daemon (pid %ld) did not answer on %s within %u ms; see its log %s",
                                          (long)pid, p->socket, timeout_ms, p->log),
                               -ETIMEDOUT;
                (void)exited(pidfd, 20); /* a short wait that ends early if it dies */
                if (pidfd < 0)
                        (void)poll(NULL, 0, 20);
        }
}

/* Under the start lock: a daemon that holds the pid file but does not
 * answer yet may be starting (a `serve --pid-file` by hand) or stopping;
 * give it the timeout to do either.  The live daemon's pid (-1: one that
 * has not written it yet), 0 for none; *ret_answers says it answers. */
static pid_t settle(const cm_daemon_paths *p, unsigned timeout_ms, bool *ret_answers) {
        int64_t end = cm_now_ms() + timeout_ms;
        for (;;) {
                pid_t pid = cm_daemon_alive(p);
                *ret_answers = pid > 0 && cm_daemon_answers(p);
                if (pid == 0 || *ret_answers || cm_now_ms() > end)
                        return pid;
                (void)poll(NULL, 0, 20);
        }
}

int cm_daemon_start(const cm_daemon_paths *p, char *const *args, size_t n_args, unsigned timeout_ms,
                    cm_daemon_started *ret, cm_err *err) {
        cleanup_close int lock = open_own(p->lock, O_RDWR | O_CREAT, err);
        struct stat st;
        pid_t pid;
        bool answers;
        off_t log_from;
        if (lock < 0)
                return -1;
        /* Two starts at once: the second waits here, then finds the first's
         * daemon answering. */
        while (flock(lock, LOCK_EX) < 0)
                if (errno != EINTR)
                        return cm_err_sys(err, errno, "locking %s", p->lock), -1;
        pid = settle(p, timeout_ms, &answers);
        if (pid != 0 && !answers)
                return cm_err_set(err, EBUSY,
                                  "daemon pid %ld holds %s but does not answer on %s: it may be hung or stopping; "
                                  "stop it (container-mcp daemon stop --socket-path %s) or kill it",
                                  (long)pid, p->pid, p->socket, p->socket),
                       -EBUSY;
        if (pid > 0) {
                *ret = (cm_daemon_started){.pid = pid, .already = true};
                return 0;
        }
        /* Stale: what a crash left.  Nobody holds the pid file, so nobody
         * serves the socket we own either (the server replaces a stale
         * socket itself, and refuses a live one of someone else's). */
        (void)unlink(p->pid);
        log_from = lstat(p->log, &st) == 0 && st.st_size <= LOG_ROTATE_BYTES ? st.st_size : 0;
        pid = spawn(p, args, n_args, err);
        if (pid < 0)
                return -1;
        if (wait_answering(p, pid, log_from, timeout_ms, err) < 0)
                return -1;
        *ret = (cm_daemon_started){.pid = pid, .already = false};
        return 0;
}

/* ---- stop ------------------------------------------------------------------- */

int cm_daemon_stop(const cm_daemon_paths *p, unsigned timeout_ms, pid_t *ret_pid, cm_err *err) {
        pid_t pid = cm_daemon_alive(p);
        cleanup_close int pidfd = -1;
        int64_t end = cm_now_ms() + timeout_ms;
        *ret_pid = 0;
        if (pid == 0)
                return 1;
        if (pid < 0)
                return cm_err_set(err, EAGAIN, "a daemon holds %s but has not written its pid yet: it is starting; "
                                               "try again in a moment", p->pid),
                       -EAGAIN;
        /* Through a pidfd, checked again after it is open: the signal goes
         * to the process that holds the pid file, never to a recycled pid. */
        pidfd = pidfd_of(pid);
        if (cm_daemon_alive(p) != pid)
                return 1;
        if ((pidfd >= 0 ? (int)syscall(SYS_pidfd_send_signal, pidfd, SIGTERM, NULL, 0) : kill(pid, SIGTERM)) < 0) {
                if (errno == ESRCH)
                        return 1;
                return cm_err_sys(err, errno, "signalling daemon pid %ld", (long)pid), -1;
        }
        *ret_pid = pid;
        for (;;) {
                int64_t left = end - cm_now_ms();
                if (pidfd >= 0 ? exited(pidfd, 0) : cm_daemon_alive(p) != pid)
                        return 0;
                if (left <= 0)
                        return cm_err_set(err, ETIMEDOUT,
                                          "daemon pid %ld is still running %u ms after SIGTERM (its calls may be "
                                          "ending); wait, or kill -KILL %ld (its sandboxes are then reaped at the "
                                          "next start)",
                                          (long)pid, timeout_ms, (long)pid),
                               -ETIMEDOUT;
                if (pidfd >= 0)
                        (void)exited(pidfd, left < 1000 ? (int)left : 1000);
                else
                        (void)poll(NULL, 0, 20);
        }
}
