/* The sandbox, top to bottom (contain() below is the whole order).
 *
 * The parent clones one child with every namespace at once (user, mount,
 * pid, uts, ipc, and net unless a spent one is reused).  That child becomes
 * pid 1 of the new pid namespace; it leaves the server's session (setsid),
 * maps the user namespace (or, under a root server, waits for the parent to
 * map it, #0), joins its cgroup, becomes the namespace's root and roots a
 * cgroup namespace there, builds and pivots
 * into the new root, names itself, brings lo up, loads the seccomp filter,
 * drops to the default capability set, then vforks the main process
 * (rlimits when there is no cgroup, no_new_privs and execve; the filter is
 * inherited) and stays on as the init (init.c).
 *
 * Sync points, mirrored in parent and child:
 *   #0  (root server only, ns_user.c) parent -> child: the parent has
 *       written the child's uid_map and gid_map (a range only a privileged
 *       process may write); one byte on a pipe, EOF if it failed.
 *   #1  child -> parent: an sb_err message on err_fd if a step failed; EOF
 *       (every copy of the close-on-exec err_fd closed) once the main
 *       process has exec'd, or, with no main process, the init is ready.
 *   #2, #3 (network: true only, netstack.c): the child hands its
 *       namespaces to the parent and waits for the network to be up.
 * Otherwise nothing flows from parent to child: a rootless child maps its
 * own ids, every child joins its cgroup through fds opened for it and
 * attaches the binds the parent made for it (mount.c), so set-up costs one
 * round trip (two under a root server). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "backend/native/linux.h"
#include "util/cleanup.h"

/* ---- errors from the child ---------------------------------------------- */

static const char *sb_step_name(int step) {
        static const char *const names[SB_STEP__MAX] = {
                [SB_STEP_FDS] = "closing inherited fds",
                [SB_STEP_CGROUP] = "joining the cgroup",
                [SB_STEP_USERNS] = "mapping the user namespace",
                [SB_STEP_MOUNTNS] = "making the mount namespace private",
                [SB_STEP_OVERLAY] = "mounting the image's overlay",
                [SB_STEP_ROOTFS] = "building the root file system",
                [SB_STEP_MOUNTS] = "bind-mounting the requested mounts",
                [SB_STEP_PROC] = "mounting /proc and /sys",
                [SB_STEP_DEV] = "populating /dev",
                [SB_STEP_PIVOT] = "pivot_root",
                [SB_STEP_HOSTNAME] = "setting the hostname",
                [SB_STEP_NETWORK] = "setting up the network",
                [SB_STEP_RLIMITS] = "setting rlimits",
                [SB_STEP_INIT] = "starting the init",
                [SB_STEP_SETNS] = "joining the container's namespaces",
                [SB_STEP_WORKDIR] = "changing to the working directory",
                [SB_STEP_CAPS] = "dropping capabilities",
                [SB_STEP_NO_NEW_PRIVS] = "setting no_new_privs",
                [SB_STEP_SECCOMP] = "installing the seccomp filter",
                [SB_STEP_EXEC] = "executing the command",
        };
        return step >= 0 && step < SB_STEP__MAX && names[step] ? names[step] : "set-up";
}

int sb_fail(sb_err *e, int step, int code, const char *fmt, ...) {
        va_list ap;
        e->step = step;
        e->code = code ? code : EIO;
        va_start(ap, fmt);
        (void)vsnprintf(e->what, sizeof e->what, fmt, ap);
        va_end(ap);
        return -e->code;
}

void sb_report(int fd, const sb_err *e) { (void)write_all(fd, e, sizeof *e); }

/* parent: turn a child's message into an error an agent can act on. */
static int sb_err_to_cm(const sb_err *e, cm_err *err) {
        sb_err m = *e;
        const char *hint = "";

        m.what[sizeof m.what - 1] = 0;
        if (m.step == SB_STEP_EXEC && (m.code == ENOENT || m.code == ENOTDIR))
                hint = "; the command is not in the image: check its name, or give an absolute path";
        else if (m.step == SB_STEP_EXEC && m.code == EACCES)
                hint = "; the file is not executable";
        else if (m.step == SB_STEP_WORKDIR)
                hint = "; the working directory must exist in the container (e.g. /workspace or /tmp)";
        else if (m.step == SB_STEP_USERNS)
                hint = "; unprivileged user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone=1)";
        return cm_err_set(err, m.code, "sandbox %s failed: %s: %s%s", sb_step_name(m.step), m.what, strerror(m.code),
                          hint);
}

/* ---- small child-safe helpers ------------------------------------------- */

/* Close every fd but the ones listed (the child of a raw clone inherits all
 * of the server's, close-on-exec or not, and it never execs). */
void sb_close_fds_except(const int *keep, size_t n) {
        int k[SB_MAX_FDS];
        size_t m = 0;
        unsigned lo = 0;

        for (size_t i = 0; i < n && m < ARRAY_SIZE(k); i++)
                if (keep[i] >= 0)
                        k[m++] = keep[i];
        for (size_t i = 1; i < m; i++)
                for (size_t j = i; j > 0 && k[j - 1] > k[j]; j--) {
                        int t = k[j];
                        k[j] = k[j - 1];
                        k[j - 1] = t;
                }
        for (size_t i = 0; i <= m; i++) {
                unsigned hi = i < m ? (unsigned)k[i] : ~0U;
                if (hi > lo && sys_close_range(lo, hi - 1, 0) < 0) {
                        long max = sysconf(_SC_OPEN_MAX);
                        for (long fd = lo; fd < (long)hi && fd < max; fd++)
                                (void)close((int)fd);
                }
                if (i < m)
                        lo = (unsigned)k[i] + 1;
        }
}

static int sb_set_rlimits(int64_t memory_bytes, int64_t pids, sb_err *e) {
        struct rlimit rl;
        if (memory_bytes > 0) {
                rl.rlim_cur = rl.rlim_max = (rlim_t)memory_bytes;
                if (setrlimit(RLIMIT_AS, &rl) < 0)
                        return sb_fail(e, SB_STEP_RLIMITS, errno, "RLIMIT_AS");
        }
        if (pids > 0) {
                rl.rlim_cur = rl.rlim_max = (rlim_t)pids;
                if (setrlimit(RLIMIT_NPROC, &rl) < 0)
                        return sb_fail(e, SB_STEP_RLIMITS, errno, "RLIMIT_NPROC");
        }
        return 0;
}

/* execvpe() searches the server's PATH; this searches the container's. */
static int exec_path(char *const *argv, char *const *envp) {
        const char *path = NATIVE_PATH;
        char buf[4096];
        int saved = ENOENT;

        if (strchr(argv[0], '/')) {
                (void)execve(argv[0], argv, envp);
                return -errno;
        }
        for (char *const *e = envp; e && *e; e++)
                if (strncmp(*e, "PATH=", 5) == 0)
                        path = *e + 5;
        for (const char *p = path; *p;) {
                const char *colon = strchrnul(p, ':');
                int len = (int)(colon - p);
                (void)snprintf(buf, sizeof buf, "%.*s%s%s", len, p, len ? "/" : "", argv[0]);
                (void)execve(buf, argv, envp);
                if (errno == EACCES)
                        saved = EACCES;
                else if (errno != ENOENT && errno != ENOTDIR)
                        return -errno;
                p = *colon ? colon + 1 : colon;
        }
        return -saved;
}

int sb_exec_proc(const sb_proc *p, sb_err *e) {
        int r;
        /* Here, not in the init: it must not be bound by them itself. */
        if ((p->rlimit_memory > 0 || p->rlimit_pids > 0) && sb_set_rlimits(p->rlimit_memory, p->rlimit_pids, e) < 0)
                return -e->code;
        if (p->workdir && chdir(p->workdir) < 0)
                return sb_fail(e, SB_STEP_WORKDIR, errno, "chdir %s", p->workdir);
        r = caps_drop(p->caps_keep, p->last_cap);
        if (r < 0)
                return sb_fail(e, SB_STEP_CAPS, -r, "drop to the default set");
        /* The image's user: leaving uid 0 clears what capabilities are left,
         * as for Docker's non-root users.  Raw syscalls: libc's would try
         * to reach the parent's other threads (child). */
        if (p->set_ids && (syscall(SYS_setgroups, 0, NULL) < 0 ||
                           syscall(SYS_setresgid, p->gid, p->gid, p->gid) < 0 ||
                           syscall(SYS_setresuid, p->uid, p->uid, p->uid) < 0))
                return sb_fail(e, SB_STEP_CAPS, errno, "become the image's user %u:%u", (unsigned)p->uid,
                               (unsigned)p->gid);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return sb_fail(e, SB_STEP_NO_NEW_PRIVS, errno, "prctl");
        /* The last thing before execve: from here on the filter applies. */
        r = p->seccomp ? seccomp_apply(p->seccomp) : 0;
        if (r < 0)
                return sb_fail(e, SB_STEP_SECCOMP, -r, "load %u instructions", (unsigned)p->seccomp->len);
        r = exec_path(p->argv, p->envp);
        return sb_fail(e, SB_STEP_EXEC, -r, "%s", p->argv[0]);
}

/* 0, 1, 2 from the given fds (-1: /dev/null), safe when they overlap
 * (but not with a fd the caller keeps: see sb_fd_above_stdio). */
int sb_install_stdio(int in, int out, int err) {
        int src[3] = {in, out, err}, tmp[3];
        int null = -1;

        for (int i = 0; i < 3; i++) {
                if (src[i] < 0) {
                        if (null < 0 && (null = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
                                return -errno;
                        src[i] = null;
                }
                tmp[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 3);
                if (tmp[i] < 0)
                        return -errno;
        }
        for (int i = 0; i < 3; i++)
                if (dup2(tmp[i], i) < 0)
                        return -errno;
        return 0;
}

/* ---- the main process --------------------------------------------------- */

/* Made by the init: stdio, then the last steps and execve.  vfork, not
 * fork: no copy of the server's page tables for a process about to exec
 * (and no atfork handlers, which would take locks the server's other
 * threads may have held when we were cloned).  The child only makes
 * syscalls on its own stack frames and execs or _exits. */
static pid_t spawn_main(const sb_config *c, int log_w, sb_err *e) {
        /* seccomp: inherited from the init */
        sb_proc proc = {c->argv,
                        c->envp,
                        c->workdir,
                        c->caps_keep,
                        c->last_cap,
                        NULL,
                        c->rlimit_fallback ? c->memory_bytes : 0,
                        c->rlimit_fallback ? c->pids : 0,
                        c->set_ids && !c->nest_ids,
                        c->run_uid,
                        c->run_gid};
        pid_t pid = vfork();

        if (pid < 0)
                return sb_fail(e, SB_STEP_INIT, errno, "fork the main process");
        if (pid > 0)
                return pid;
        (void)sigprocmask(SIG_SETMASK, &(sigset_t){0}, NULL);
        /* out of the way of stdio (a server without its own) */
        const int sync = c->err_fd < 3 ? fcntl(c->err_fd, F_DUPFD_CLOEXEC, 3) : c->err_fd;
        if (sb_install_stdio(c->stdin_fd, log_w >= 0 ? log_w : c->stdout_fd, log_w >= 0 ? log_w : c->stderr_fd) < 0)
                (void)sb_fail(e, SB_STEP_INIT, errno, "set up stdin/stdout/stderr");
        else {
                sb_close_fds_except((int[]){0, 1, 2, sync}, 4);
                (void)sb_exec_proc(&proc, e);
        }
        sb_report(sync, e);
        _exit(127);
}

/* ---- the child: the whole set-up in order ------------------------------- */

static int keep_fds(const sb_config *c, sb_err *e) {
        int keep[SB_MAX_FDS];
        size_t n = 0;
        keep[n++] = c->err_fd;
        keep[n++] = c->stdin_fd;
        keep[n++] = c->stdout_fd;
        keep[n++] = c->stderr_fd;
        keep[n++] = c->log_fd;
        keep[n++] = c->log_idx_fd;
        keep[n++] = c->exit_fd;
        keep[n++] = c->lifeline_fd;
        keep[n++] = c->ctl_fd;
        keep[n++] = c->ctl_conn;
        keep[n++] = c->net_sync;
        keep[n++] = c->map_wait;
        for (size_t i = 0; i < c->n_cg_fds; i++)
                keep[n++] = c->cg_fds[i];
        for (size_t i = 0; i < c->plan->n && n < SB_MAX_FDS; i++)
                if (c->plan->ops[i].fd >= 0)
                        keep[n++] = c->plan->ops[i].fd;
        sb_close_fds_except(keep, n);
        (void)e;
        return 0;
}

/* Runs in the clone()d child, pid 1 of the new pid namespace. */
static __attribute__((noreturn)) void contain(const sb_config *c) {
        sb_err e = {0};
        pid_t main_pid = 0;
        int log_p[2] = {-1, -1}, r;
        sigset_t set;

        /* The parent blocked every signal around clone(); the init takes its
         * own through a signalfd, so they stay blocked. */
        sb_reset_signals();
        init_signal_set(&set);
        (void)sigprocmask(SIG_SETMASK, &set, NULL);
        /* A session of our own, with no controlling terminal: the server's
         * (an MCP client or a shell started it from one) must not reach
         * the sandbox, whose /dev/tty then opens nothing (ENXIO). */
        if (setsid() < 0) {
                (void)sb_fail(&e, SB_STEP_INIT, errno, "setsid");
                goto fail;
        }
        if (keep_fds(c, &e) < 0)
                goto fail;
        init_scrub();
        /* A rootless server's child writes its maps through /proc/self
         * files, which belong to the host's root while we are not dumpable
         * (as after a server's setuid); nothing else runs in the new
         * namespaces yet.  A root server writes a range map for us (#0). */
        if (c->parent_maps) {
                if (userns_wait_maps(c->map_wait, &e) < 0)
                        goto fail;
        } else if (c->userns) {
                (void)prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
                if (userns_map(c->outer_uid, c->outer_gid, &e) < 0)
                        goto fail;
        }
        /* Still the host's root here: cgroup v1 checks the writer's ids. */
        if (cg_join(c->cg_fds, c->n_cg_fds) < 0) {
                (void)sb_fail(&e, SB_STEP_CGROUP, errno, "write cgroup.procs");
                goto fail;
        }
        if (c->parent_maps && userns_become_root(&e) < 0)
                goto fail;
        /* We are a copy of the server's memory: nothing in the sandbox may
         * read it through /proc/1/mem. */
        (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        for (size_t i = 0; i < c->n_cg_fds; i++)
                (void)close(c->cg_fds[i]);
        if (unshare(CLONE_NEWCGROUP) < 0) { /* rooted at the sandbox's cgroup */
                (void)sb_fail(&e, SB_STEP_CGROUP, errno, "unshare the cgroup namespace");
                goto fail;
        }
        if (mnt_enter_stage(c->stage, c->root_bytes, &e) < 0)
                goto fail;
        if (mnt_plan_run(c->plan, SB_STEP_OVERLAY, &e) < 0)
                goto fail;
        if (mnt_plan_run(c->plan, SB_STEP_ROOTFS, &e) < 0)
                goto fail;
        if (mnt_plan_run(c->plan, SB_STEP_MOUNTS, &e) < 0)
                goto fail;
        if (mnt_plan_run(c->plan, SB_STEP_PROC, &e) < 0)
                goto fail;
        if (mnt_plan_run(c->plan, SB_STEP_DEV, &e) < 0)
                goto fail;
        if (mnt_pivot(c->readonly_rootfs, &e) < 0)
                goto fail;
        if (sethostname(c->hostname, strlen(c->hostname)) < 0) {
                (void)sb_fail(&e, SB_STEP_HOSTNAME, errno, "%s", c->hostname);
                goto fail;
        }
        if (net_lo_up(&e) < 0)
                goto fail;
        /* network: true: the server connects our namespace to a user-mode
         * stack before the main process may use it (#2, #3). */
        if (c->net_sync >= 0 && net_handoff(c->net_sync, c->userns, &e) < 0)
                goto fail;
        /* Rootless, an image's User: its own namespace, after everything
         * that needs the sandbox's root (ns_user.c). */
        if (c->nest_ids && userns_nest(c->run_uid, c->run_gid, &e) < 0)
                goto fail;
        /* Loaded once, here: the main process inherits it (nothing it does
         * before execve is filtered) and the init keeps it. */
        if (seccomp_apply(c->seccomp) < 0) {
                (void)sb_fail(&e, SB_STEP_SECCOMP, errno, "load %u instructions", (unsigned)c->seccomp->len);
                goto fail;
        }
        /* From here the init holds no more than the sandbox will: once the
         * main process runs user code it may race us to /proc/1. */
        r = caps_drop(c->caps_keep, c->last_cap);
        if (r < 0) {
                (void)sb_fail(&e, SB_STEP_CAPS, -r, "drop to the default set");
                goto fail;
        }
        if (c->argv) {
                /* A detached main process writes into a pipe the init pumps
                 * into the capped log. */
                if (c->log_fd >= 0 && pipe2(log_p, O_CLOEXEC) < 0) {
                        (void)sb_fail(&e, SB_STEP_INIT, errno, "pipe for the log");
                        goto fail;
                }
                main_pid = spawn_main(c, log_p[1], &e);
                if (main_pid < 0)
                        goto fail;
                if (log_p[1] >= 0)
                        (void)close(log_p[1]);
        }
        init_run(c, main_pid, log_p[0]); /* #1: closes err_fd */
fail:
        sb_report(c->err_fd, &e); /* #1: the failed step */
        _exit(127);
}

/* ---- the parent --------------------------------------------------------- */

/* parent, #0: a root server writes the child's range map, then lets it
 * go on (closing go without a byte tells it we failed). */
static int write_child_maps(const sb_config *c, pid_t pid, int go, cm_err *err) {
        char um[64], gm[64];
        userns_range_maps(c->outer_uid, c->outer_gid, um, gm);
        if (userns_write_maps(pid, um, gm, err) < 0)
                return -1;
        if (write(go, "m", 1) != 1)
                return cm_err_sys(err, errno, "let the sandbox go on (#0)");
        return 0;
}

int sb_spawn(const sb_config *cfg, int *ret_pidfd, cm_err *err) {
        sb_config cc = *cfg;
        const sb_config *c = &cc;
        int map_p[2] = {-1, -1};
        int pidfd = -1;
        struct cm_clone_args a = {
                .flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_PIDFD |
                         CLONE_NEWNET | (c->userns ? CLONE_NEWUSER : 0) |
                         (c->cg_dirfd >= 0 ? CLONE_INTO_CGROUP : 0),
                .pidfd = (uint64_t)(uintptr_t)&pidfd,
                .exit_signal = SIGCHLD,
                .cgroup = c->cg_dirfd >= 0 ? (uint64_t)c->cg_dirfd : 0,
        };
        sigset_t all, old;
        pid_t pid;

        if (cc.parent_maps) {
                if (pipe2(map_p, O_CLOEXEC) < 0)
                        return cm_err_sys(err, errno, "pipe");
                cc.map_wait = map_p[0];
        } else
                cc.map_wait = -1;
        /* No signal handler of the server may run in the child before it
         * resets them. */
        (void)sigfillset(&all);
        (void)pthread_sigmask(SIG_SETMASK, &all, &old);
        pid = sys_clone3(&a);
        if (pid < 0 && (errno == ENOSYS || errno == E2BIG || errno == EINVAL) && c->cg_dirfd >= 0) {
                /* Before 5.7: no CLONE_INTO_CGROUP; the child joins by
                 * writing cgroup.procs instead. */
                a.flags &= ~CLONE_INTO_CGROUP;
                a.cgroup = 0;
                pid = sys_clone3(&a);
        }
        if (pid < 0 && errno == ENOSYS) {
                pid = (pid_t)syscall(SYS_clone, (unsigned long)(a.flags & ~(uint64_t)CLONE_PIDFD) | SIGCHLD, NULL, NULL,
                                     NULL, 0);
                if (pid > 0)
                        pidfd = sys_pidfd_open(pid, 0);
        }
        if (pid < 0) {
                int e = errno;
                (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
                if (map_p[0] >= 0) {
                        (void)close(map_p[0]);
                        (void)close(map_p[1]);
                }
                if (e == EPERM || e == ENOSPC || e == EUSERS)
                        return cm_err_sys(err, e,
                                          "cannot create the sandbox namespaces (user namespaces may be disabled "
                                          "or exhausted: check sysctl user.max_user_namespaces and "
                                          "kernel.unprivileged_userns_clone)");
                return cm_err_sys(err, e, "clone of the sandbox failed");
        }
        if (pid == 0)
                contain(c);
        (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (map_p[0] >= 0) {
                int r;
                (void)close(map_p[0]);
                r = write_child_maps(c, pid, map_p[1], err); /* #0 */
                (void)close(map_p[1]);
                if (r < 0) {
                        (void)kill(pid, SIGKILL);
                        (void)waitpid(pid, NULL, 0);
                        if (pidfd >= 0)
                                (void)close(pidfd);
                        return -1;
                }
        }
        if (pidfd < 0 && pid > 0) {
                (void)kill(pid, SIGKILL);
                return cm_err_sys(err, ENOSYS, "no pidfd for the sandbox (Linux 5.3 or newer is needed)");
        }
        *ret_pidfd = pidfd;
        return pid;
}

int sb_wait_ready(int err_fd, int *ret_step, cm_err *err) {
        sb_err m;
        ssize_t n;

        if (ret_step)
                *ret_step = -1;
        do
                n = read(err_fd, &m, sizeof m);
        while (n < 0 && errno == EINTR);
        if (n == 0)
                return 0;
        if (n != (ssize_t)sizeof m)
                return cm_err_sys(err, n < 0 ? errno : EPROTO, "sandbox set-up: bad message from the child");
        if (ret_step)
                *ret_step = m.step;
        return sb_err_to_cm(&m, err);
}
