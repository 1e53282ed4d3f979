/* pid 1 of a sandbox.
 *
 * It keeps the namespaces alive for exec, reaps every orphan, pumps a
 * detached main process's output into the capped log, forwards stop signals
 * to the main process and exits with its status, which takes the whole pid
 * namespace down with it.  It also dies when the server does (the lifeline
 * pipe reads EOF), unless orphans are to be adopted.
 *
 * It also spawns the commands of exec (see the control socket below), so
 * it holds exactly what a sandbox process holds: the default capability
 * set, no_new_privs, the seccomp filter (loaded before it forked the main
 * process).  And it is not dumpable: it is a copy of the server's memory,
 * which nothing in the sandbox may read through /proc/1/mem. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "backend/native/linux.h"
#include "util/cleanup.h"

void init_signal_set(sigset_t *set) {
        (void)sigemptyset(set);
        (void)sigaddset(set, SIGCHLD);
        (void)sigaddset(set, SIGTERM);
        (void)sigaddset(set, SIGINT);
        (void)sigaddset(set, SIGHUP);
        (void)sigaddset(set, SIGQUIT);
        (void)sigaddset(set, SIGUSR1);
        (void)sigaddset(set, SIGUSR2);
}

/* Default dispositions: the server's handlers and ignored signals (SIGPIPE,
 * usually) must not leak into the sandbox; ignored ones survive execve. */
void sb_reset_signals(void) {
        struct sigaction sa = {.sa_handler = SIG_DFL};
        for (int s = 1; s < NSIG; s++)
                if (s != SIGKILL && s != SIGSTOP)
                        (void)sigaction(s, &sa, NULL);
}

typedef struct init_log {
        int fd;
        int idx_fd; /* log_idx records; -1: none */
        size_t cap;
        size_t written;
        int64_t second; /* of the last record */
        bool cut;
} init_log;

/* A record when output arrives in a new second (see log_idx). */
static void log_mark(init_log *l) {
        struct timespec ts;
        log_idx rec;
        if (l->idx_fd < 0 || clock_gettime(CLOCK_REALTIME, &ts) < 0 || ts.tv_sec == l->second)
                return;
        l->second = ts.tv_sec;
        rec = (log_idx){l->written, (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000};
        (void)write_all(l->idx_fd, &rec, sizeof rec);
}

static void log_write(init_log *l, const char *buf, size_t n) {
        char note[96];
        if (l->fd < 0 || l->cut)
                return;
        log_mark(l);
        if (l->written + n > l->cap) {
                size_t room = l->cap - l->written;
                (void)write_all(l->fd, buf, room);
                int len = snprintf(note, sizeof note, "\n[container-mcp: log cut at %zu bytes]\n", l->cap);
                (void)write_all(l->fd, note, (size_t)len);
                l->written = l->cap;
                l->cut = true;
                return;
        }
        if (write_all(l->fd, buf, n) == 0)
                l->written += n;
}

/* Read what the pipe holds now; false at EOF. */
static bool pump_log(int fd, init_log *l) {
        char buf[16384];
        for (;;) {
                ssize_t n = read(fd, buf, sizeof buf);
                if (n > 0) {
                        log_write(l, buf, (size_t)n);
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                return n < 0 && errno == EAGAIN;
        }
}

static int status_code(int st) {
        if (WIFEXITED(st))
                return WEXITSTATUS(st);
        if (WIFSIGNALED(st))
                return 128 + WTERMSIG(st);
        return 255;
}

static __attribute__((noreturn)) void finish(const sb_config *c, int code, int log_r, init_log *l) {
        char buf[16];
        int len = snprintf(buf, sizeof buf, "%d\n", code);
        if (c->exit_fd >= 0)
                (void)pwrite(c->exit_fd, buf, (size_t)len, 0);
        if (log_r >= 0)
                (void)pump_log(log_r, l);
        /* Our exit kills everything left in the pid namespace. */
        _exit(code);
}

/* We are a copy of the server: /proc/1/cmdline (readable by all in the
 * sandbox) would show the server's command line, and our memory still
 * holds its environment.  Overwrite both, and name ourselves.  Reads the
 * host's /proc, so it runs before pivot_root. */
void init_scrub(void) {
        char buf[1024], *p;
        unsigned long long v[4] = {0};
        int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;

        if (fd >= 0)
                (void)close(fd);
        (void)prctl(PR_SET_NAME, "cm-init", 0, 0, 0);
        if (n <= 0)
                return;
        buf[n] = 0;
        p = strrchr(buf, ')');
        /* fields 48-51: arg_start, arg_end, env_start, env_end */
        for (int field = 3; p && field <= 51; field++) {
                p = strchr(p + 1, ' ');
                if (p && field >= 48)
                        v[field - 48] = strtoull(p + 1, NULL, 10);
        }
        if (v[1] > v[0] && v[1] - v[0] < (1u << 20)) {
                memset((void *)(uintptr_t)v[0], 0, v[1] - v[0]);
                if (v[1] - v[0] > 8)
                        memcpy((void *)(uintptr_t)v[0], "cm-init", 8);
        }
        if (v[3] > v[2] && v[3] - v[2] < (1u << 20))
                memset((void *)(uintptr_t)v[2], 0, v[3] - v[2]);
}

/* The namespaces exec joins, in the order it must join them. */
static const char *const ns_names[INIT_N_NS] = {"user", "mnt", "uts", "ipc", "net", "pid", "cgroup"};

/* Commands spawned for exec, and the connection each answers to. */
typedef struct init_exec {
        pid_t pid;
        int conn;    /* -1: the client hung up (the command was killed) */
        bool killed; /* its tree got SIGKILL */
} init_exec;

typedef struct init_state {
        const sb_config *c;
        int proc; /* /proc, for killing an exec's tree */
        int ns[INIT_N_NS];
        int nested; /* the image user's namespace (nest_ids), or -1 */
        init_exec execs[INIT_MAX_EXECS];
        size_t n_execs;
} init_state;

/* Static: the init must not allocate.  One request at a time. */
static char req_buf[sizeof(init_spawn_req) + INIT_SPAWN_MAX];
static char *req_argv[INIT_SPAWN_ARGS + 2];

static void send_fds(int conn, char kind, const int *fds, int n) {
        struct iovec iov = {&kind, 1};
        union {
                char buf[CMSG_SPACE(sizeof(int) * INIT_N_NS)];
                struct cmsghdr align;
        } u;
        struct msghdr msg = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = u.buf,
                             .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n)};
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)n);
        (void)sendmsg(conn, &msg, MSG_NOSIGNAL);
}

/* The strings of a spawn request as workdir, argv and envp; false when they
 * do not add up. */
static bool parse_spawn(const init_spawn_req *h, size_t n, const char **ret_workdir, char ***ret_argv,
                        char ***ret_envp) {
        char *p = req_buf + sizeof *h, *end = p + h->len;
        size_t k = 0;

        if (n != sizeof *h + h->len || h->len == 0 || end[-1] != 0 || h->argc == 0 ||
            (size_t)h->argc + h->envc > INIT_SPAWN_ARGS)
                return false;
        *ret_workdir = p;
        p += strlen(p) + 1;
        for (uint32_t i = 0; i < h->argc + h->envc; i++) {
                if (p >= end)
                        return false;
                if (i == h->argc)
                        req_argv[k++] = NULL;
                req_argv[k++] = p;
                p += strlen(p) + 1;
        }
        if (h->envc == 0)
                req_argv[k++] = NULL;
        req_argv[k] = NULL;
        *ret_argv = req_argv;
        *ret_envp = req_argv + h->argc + 1;
        return p == end;
}

/* vfork the command: in its own session, a child subreaper (so its whole
 * tree can be killed, see tree.c), its stdio from the client, the last
 * steps as for the main process. */
static pid_t spawn_exec(init_state *st, const init_spawn_req *h, const char *workdir, char **argv, char **envp,
                        const int *fds, int n_fds) {
        const sb_config *c = st->c;
        bool has_stdin = h->has_stdin;
        /* rlimits (without a cgroup): the request's, else the sandbox's */
        sb_proc proc = {argv,
                        envp,
                        workdir[0] ? workdir : NULL,
                        c->caps_keep,
                        c->last_cap,
                        NULL,
                        !c->rlimit_fallback ? 0
                        : h->rlimit_memory  ? h->rlimit_memory
                                            : c->memory_bytes,
                        !c->rlimit_fallback ? 0
                        : h->rlimit_pids    ? h->rlimit_pids
                                            : c->pids,
                        c->set_ids && !c->nest_ids,
                        c->run_uid,
                        c->run_gid};
        sb_err e = {0};
        pid_t pid = vfork();

        if (pid != 0)
                return pid;
        (void)sigprocmask(SIG_SETMASK, &(sigset_t){0}, NULL);
        (void)setsid();
        (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        if (sb_install_stdio(has_stdin && n_fds > 3 ? fds[3] : -1, fds[1], fds[2]) < 0)
                (void)sb_fail(&e, SB_STEP_EXEC, errno, "set up stdin/stdout/stderr");
        else {
                sb_close_fds_except((int[]){0, 1, 2, fds[0]}, 4);
                (void)sb_exec_proc(&proc, &e);
        }
        sb_report(fds[0], &e);
        _exit(127);
}

static void handle_spawn(init_state *st, int conn, size_t n, const int *fds, int n_fds) {
        const init_spawn_req *h = (const init_spawn_req *)req_buf;
        const char *workdir = NULL;
        char **argv = NULL, **envp = NULL;
        sb_err e = {0};
        pid_t pid = -1;

        if (n_fds < 3 || n_fds > 4) {
                (void)close(conn);
                return;
        }
        if (!parse_spawn(h, n, &workdir, &argv, &envp))
                (void)sb_fail(&e, SB_STEP_EXEC, EINVAL, "malformed spawn request");
        else if (st->n_execs == INIT_MAX_EXECS)
                (void)sb_fail(&e, SB_STEP_EXEC, EAGAIN, "%d execs already run in this container", INIT_MAX_EXECS);
        else if ((pid = spawn_exec(st, h, workdir, argv, envp, fds, n_fds)) < 0)
                (void)sb_fail(&e, SB_STEP_EXEC, errno, "vfork");
        if (e.code) {
                sb_report(fds[0], &e);
                (void)close(conn);
        } else {
                (void)fcntl(conn, F_SETFL, O_NONBLOCK);
                st->execs[st->n_execs++] = (init_exec){pid, conn};
        }
        for (int i = 0; i < n_fds; i++)
                (void)close(fds[i]);
}

/* One request on a connection, from a client of the control socket (or,
 * for a warm sandbox, the server's end of its socketpair). */
static void serve_conn(init_state *st, int conn) {
        union {
                char buf[CMSG_SPACE(sizeof(int) * 4)];
                struct cmsghdr align;
        } u;
        struct iovec iov = {req_buf, sizeof req_buf};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
        struct timeval tv = {1, 0}; /* a client that connects and says nothing */
        int fds[4], n_fds = 0;
        struct cmsghdr *cm;
        ssize_t n;

        (void)setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        n = recvmsg(conn, &msg, MSG_CMSG_CLOEXEC);
        for (cm = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL; cm; cm = CMSG_NXTHDR(&msg, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                        n_fds = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                        memcpy(fds, CMSG_DATA(cm), sizeof(int) * (size_t)n_fds);
                }
        if (n >= 1 && req_buf[0] == 'n' && n_fds == 0) {
                send_fds(conn, 'n', st->ns, INIT_N_NS);
                (void)close(conn);
        } else if (n >= 1 && req_buf[0] == 'u' && n_fds == 0) {
                if (st->nested >= 0)
                        send_fds(conn, 'u', &st->nested, 1);
                (void)close(conn);
        } else if (n >= 1 && req_buf[0] == 'i' && n_fds == 0) {
                /* block I/O of ours and of all we reaped, which nobody may
                 * read from /proc/1/io rootless, not even we (not dumpable:
                 * the file belongs to the host's root) */
                struct rusage self, kids;
                uint64_t v[2] = {0, 0};
                if (getrusage(RUSAGE_SELF, &self) == 0 && getrusage(RUSAGE_CHILDREN, &kids) == 0) {
                        v[0] = (uint64_t)(self.ru_inblock + kids.ru_inblock) * 512;
                        v[1] = (uint64_t)(self.ru_oublock + kids.ru_oublock) * 512;
                }
                (void)send(conn, v, sizeof v, MSG_NOSIGNAL);
                (void)close(conn);
        } else if (n >= 1 && req_buf[0] == 'r' && n_fds == 0) {
                int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (root >= 0) {
                        send_fds(conn, 'r', &root, 1);
                        (void)close(root);
                }
                (void)close(conn);
        } else if (n >= (ssize_t)sizeof(init_spawn_req) && req_buf[0] == 's' && !(msg.msg_flags & MSG_TRUNC))
                handle_spawn(st, conn, (size_t)n, fds, n_fds);
        else {
                for (int i = 0; i < n_fds; i++)
                        (void)close(fds[i]);
                (void)close(conn);
        }
}

static void serve_ctl(init_state *st) {
        int conn = accept4(st->c->ctl_fd, NULL, NULL, SOCK_CLOEXEC);
        if (conn >= 0)
                serve_conn(st, conn);
}

/* A client's byte 'k', or its hanging up while the command runs: kill the
 * command's whole tree. */
static void serve_exec_conn(init_state *st, init_exec *x) {
        char b;
        ssize_t n = read(x->conn, &b, 1);
        if (n < 0 && errno == EAGAIN)
                return;
        if (!x->killed)
                tree_kill(st->proc, x->pid);
        x->killed = true;
        if (n <= 0) {
                (void)close(x->conn);
                x->conn = -1;
        }
}

/* An exec's command ended: its exit code to the client. */
static bool reap_exec(init_state *st, pid_t pid, int code) {
        for (size_t i = 0; i < st->n_execs; i++)
                if (st->execs[i].pid == pid) {
                        int32_t v = code;
                        /* A killed exec answers only once its group is
                         * reaped (the zombies of its leader are ours), so
                         * "killed with its children" holds when the client
                         * hears of it.  The rest of its tree is dead
                         * already (tree_kill): this wait is short. */
                        while (st->execs[i].killed && waitpid(-pid, NULL, 0) > 0)
                                ;
                        if (st->execs[i].conn >= 0) {
                                (void)send(st->execs[i].conn, &v, sizeof v, MSG_NOSIGNAL);
                                (void)close(st->execs[i].conn);
                        }
                        st->execs[i] = st->execs[--st->n_execs];
                        return true;
                }
        return false;
}

void init_run(const sb_config *c, pid_t main_pid, int log_r) {
        init_log l = {c->log_fd, c->log_idx_fd, c->log_cap ? c->log_cap : NATIVE_LOG_CAP, 0, -1, false};
        static init_state st; /* static: big, and the init has one */
        struct pollfd pf[5 + INIT_MAX_EXECS];
        sigset_t set;
        int sfd, pending = c->ctl_conn; /* a warm sandbox's one request */

        st.c = c;
        st.proc = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
        /* 0, 1 and 2 taken (by /dev/null): fds received later for exec
         * must not land there, where the command's stdio goes. */
        for (int i = 0; i < 3; i++)
                if (fcntl(i, F_GETFD) < 0)
                        (void)open("/dev/null", O_RDWR);
        /* Only what the init itself uses stays open. */
        if (c->stdin_fd >= 0)
                (void)close(c->stdin_fd);
        if (c->stdout_fd >= 0)
                (void)close(c->stdout_fd);
        if (c->stderr_fd >= 0)
                (void)close(c->stderr_fd);
        for (int i = 0; i < INIT_N_NS; i++) {
                char path[32];
                (void)snprintf(path, sizeof path, "/proc/self/ns/%s", ns_names[i]);
                st.ns[i] = c->ctl_fd >= 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
                if (c->ctl_fd >= 0 && st.ns[i] < 0)
                        st.ns[i] = open("/dev/null", O_RDONLY | O_CLOEXEC); /* keeps the message whole */
        }
        /* Nested (an image's user, rootless): an exec from outside joins
         * the sandbox's user namespace first, the nested one last. */
        st.nested = -1;
        if (sb_outer_userns >= 0 && c->ctl_fd >= 0) {
                st.nested = st.ns[0];
                st.ns[0] = sb_outer_userns;
        }
        init_signal_set(&set);
        sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
        /* No further drop: the commands spawned for exec get the sandbox's
         * set from us.  no_new_privs for them as for the main process. */
        if (sfd < 0 || (log_r >= 0 && fcntl(log_r, F_SETFL, O_NONBLOCK) < 0) ||
            prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
                sb_err e;
                (void)sb_fail(&e, SB_STEP_INIT, errno, "signalfd of the init");
                sb_report(c->err_fd, &e);
                if (main_pid > 0)
                        (void)kill(main_pid, SIGKILL);
                _exit(127);
        }
        (void)close(c->err_fd); /* #1: ready (the main process's copy closes at exec) */

        for (;;) {
                nfds_t n = 0;
                int i_life = -1, i_log = -1, i_ctl = -1, i_pend = -1, i_exec = -1;
                struct signalfd_siginfo si;

                pf[n++] = (struct pollfd){sfd, POLLIN, 0};
                if (c->lifeline_fd >= 0)
                        i_life = (int)n, pf[n++] = (struct pollfd){c->lifeline_fd, POLLIN, 0};
                if (log_r >= 0)
                        i_log = (int)n, pf[n++] = (struct pollfd){log_r, POLLIN, 0};
                if (c->ctl_fd >= 0)
                        i_ctl = (int)n, pf[n++] = (struct pollfd){c->ctl_fd, POLLIN, 0};
                if (pending >= 0)
                        i_pend = (int)n, pf[n++] = (struct pollfd){pending, POLLIN, 0};
                i_exec = (int)n;
                for (size_t i = 0; i < st.n_execs; i++)
                        pf[n++] = (struct pollfd){st.execs[i].conn, POLLIN, 0}; /* -1: ignored */
                if (poll(pf, n, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        _exit(125);
                }
                if (i_life >= 0 && pf[i_life].revents)
                        _exit(137); /* the server died: so do we */
                if (i_log >= 0 && pf[i_log].revents && !pump_log(log_r, &l)) {
                        (void)close(log_r);
                        log_r = -1;
                }
                for (size_t i = 0; i < st.n_execs && i_exec + (int)i < (int)n; i++)
                        if (st.execs[i].conn >= 0 && pf[i_exec + (int)i].revents)
                                serve_exec_conn(&st, &st.execs[i]);
                if (i_ctl >= 0 && pf[i_ctl].revents)
                        serve_ctl(&st);
                if (i_pend >= 0 && pf[i_pend].revents) {
                        serve_conn(&st, pending);
                        pending = -1;
                }
                while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                        if (si.ssi_signo != SIGCHLD) {
                                /* stop: to the main process, or we are the sandbox */
                                if (main_pid > 0)
                                        (void)kill(main_pid, (int)si.ssi_signo);
                                else
                                        finish(c, 128 + (int)si.ssi_signo, log_r, &l);
                                continue;
                        }
                        for (;;) {
                                int stat;
                                pid_t p = waitpid(-1, &stat, WNOHANG);
                                if (p <= 0)
                                        break;
                                if (p == main_pid)
                                        finish(c, status_code(stat), log_r, &l);
                                (void)reap_exec(&st, p, status_code(stat));
                        }
                }
        }
}

/* ---- the control socket, parent side ------------------------------------ */

/* sockaddr_un holds 108 bytes; a long state dir is reached through an fd. */
static int ctl_addr(const char *dir, struct sockaddr_un *a, int *ret_dirfd) {
        int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        *a = (struct sockaddr_un){.sun_family = AF_UNIX};
        (void)snprintf(a->sun_path, sizeof a->sun_path, "/proc/self/fd/%d/ctl", dfd);
        *ret_dirfd = dfd;
        return 0;
}

int init_ctl_listen(const char *dir, cm_err *err) {
        struct sockaddr_un a;
        int dfd = -1, fd, r = ctl_addr(dir, &a, &dfd);

        if (r < 0)
                return cm_err_sys(err, -r, "state: cannot open %s", dir);
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 16) < 0) {
                r = cm_err_sys(err, errno, "state: cannot make the control socket in %s", dir);
                if (fd >= 0)
                        (void)close(fd);
                fd = r;
        }
        (void)close(dfd);
        return fd;
}

/* A connection to the init's control socket, or -errno. */
static int ctl_connect(const char *dir) {
        struct sockaddr_un a;
        int dfd = -1, fd, r = ctl_addr(dir, &a, &dfd);

        if (r < 0)
                return r;
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
                r = -errno;
                (void)close(fd);
                fd = r;
        } else if (fd < 0)
                fd = -errno;
        (void)close(dfd);
        return fd;
}

/* Send the one-byte request kind, receive n fds. */
static int ctl_fetch(const char *dir, char kind, int *ret, int n, cm_err *err) {
        char byte;
        struct iovec iov = {&byte, 1};
        union {
                char buf[CMSG_SPACE(sizeof(int) * INIT_N_NS)];
                struct cmsghdr align;
        } u;
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
        struct cmsghdr *cm;
        int fd = ctl_connect(dir), r;
        ssize_t k;

        if (fd < 0 || send(fd, &kind, 1, MSG_NOSIGNAL) != 1) {
                r = cm_err_sys(err, fd < 0 ? -fd : errno, "cannot reach the container's init (its control socket in %s)",
                               dir);
                goto out;
        }
        do
                k = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
        while (k < 0 && errno == EINTR);
        cm = k > 0 ? CMSG_FIRSTHDR(&msg) : NULL;
        if (!cm || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN(sizeof(int) * (size_t)n)) {
                r = cm_err_set(err, EPROTO, "the container's init did not answer");
                goto out;
        }
        memcpy(ret, CMSG_DATA(cm), sizeof(int) * (size_t)n);
        r = 0;
out:
        if (fd >= 0)
                (void)close(fd);
        return r;
}

int init_ctl_fetch(const char *dir, int ret[INIT_N_NS], cm_err *err) {
        return ctl_fetch(dir, 'n', ret, INIT_N_NS, err);
}

int init_ctl_root(const char *dir, int *ret_fd, cm_err *err) { return ctl_fetch(dir, 'r', ret_fd, 1, err); }

int init_ctl_nested(const char *dir, int *ret_fd, cm_err *err) { return ctl_fetch(dir, 'u', ret_fd, 1, err); }

int init_ctl_io(const char *dir, uint64_t *ret_read, uint64_t *ret_write) {
        int fd = ctl_connect(dir), r;
        uint64_t v[2];
        ssize_t k = -1;

        if (fd < 0)
                return fd;
        if (send(fd, "i", 1, MSG_NOSIGNAL) == 1)
                do
                        k = recv(fd, v, sizeof v, 0);
                while (k < 0 && errno == EINTR);
        r = k == (ssize_t)sizeof v ? 0 : -EPROTO;
        if (r == 0)
                *ret_read = v[0], *ret_write = v[1];
        (void)close(fd);
        return r;
}

int init_ctl_send_spawn(int conn, char *const *argv, char *const *envp, const char *workdir, const int fds[4],
                        int64_t rlimit_memory, int64_t rlimit_pids) {
        init_spawn_req h = {
                .kind = 's', .has_stdin = fds[3] >= 0, .rlimit_memory = rlimit_memory, .rlimit_pids = rlimit_pids};
        size_t len = strlen(workdir ? workdir : "") + 1, n_fds = fds[3] >= 0 ? 4 : 3;
        union {
                char buf[CMSG_SPACE(sizeof(int) * 4)];
                struct cmsghdr align;
        } u;
        struct iovec iov[2];
        struct msghdr msg = {.msg_iov = iov,
                             .msg_iovlen = 2,
                             .msg_control = u.buf,
                             .msg_controllen = CMSG_SPACE(sizeof(int) * n_fds)};
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cleanup_free char *buf = NULL;
        char *p;

        for (char *const *v = argv; *v; v++, h.argc++)
                len += strlen(*v) + 1;
        for (char *const *v = envp; v && *v; v++, h.envc++)
                len += strlen(*v) + 1;
        if (len > INIT_SPAWN_MAX || (size_t)h.argc + h.envc > INIT_SPAWN_ARGS)
                return -E2BIG;
        h.len = (uint32_t)len;
        p = buf = xmalloc(len);
        p = stpcpy(p, workdir ? workdir : "") + 1;
        for (char *const *v = argv; *v; v++)
                p = stpcpy(p, *v) + 1;
        for (char *const *v = envp; v && *v; v++)
                p = stpcpy(p, *v) + 1;
        iov[0] = (struct iovec){&h, sizeof h};
        iov[1] = (struct iovec){buf, len};
        memset(u.buf, 0, sizeof u.buf);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * n_fds);
        if (sendmsg(conn, &msg, MSG_NOSIGNAL) != (ssize_t)(sizeof h + len))
                return -errno;
        return 0;
}

int init_ctl_spawn(const char *dir, char *const *argv, char *const *envp, const char *workdir, const int fds[4],
                   cm_err *err) {
        int fd = ctl_connect(dir), r;

        if (fd < 0)
                return fd == -ENOENT || fd == -ECONNREFUSED
                               ? fd
                               : cm_err_sys(err, -fd, "cannot reach the container's init (its control socket in %s)",
                                            dir);
        r = init_ctl_send_spawn(fd, argv, envp, workdir, fds, 0, 0);
        if (r == -E2BIG)
                goto out;
        if (r < 0) {
                r = cm_err_sys(err, -r, "cannot send the command to the container's init");
                goto out;
        }
        r = fd;
        fd = -1;
out:
        if (fd >= 0)
                (void)close(fd);
        return r;
}
