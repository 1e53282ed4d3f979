/* exec: run a command in a running sandbox.
 *
 * Usually the sandbox's init spawns it (a request on its control socket,
 * see init.c): vforked from a process already in every namespace and
 * cgroup of the sandbox, with its privileges and filter, the command costs
 * no fork of the server and no cgroup join (which on cgroup v1 waits for
 * an RCU grace period).  On timeout or cancel the init kills the command's
 * whole tree (tree.c).
 *
 * The fallback, for an init that cannot take the request: the server
 * clones a waiter, which joins the cgroup (a per-exec sub-cgroup, so the
 * exec's whole process tree can be killed at once) and the init's
 * namespaces (setns on its pidfd; without CAP_SYS_PTRACE, on namespace fds
 * the init hands out).  Joining a pid namespace only applies to children,
 * so the waiter forks the process that drops privileges and execs, and
 * exits with its status.
 *
 * Sync points (both ways):
 *   #1  child -> parent: an sb_err on the sync pipe if a step failed; EOF
 *       once the command exec'd (every other copy is closed by then, the
 *       command's own went at exec). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "backend/native/linux.h"
#include "util/cleanup.h"

typedef struct exec_child {
        int init_pidfd;    /* setns on it (root: the init is not dumpable) */
        int ns[INIT_N_NS]; /* or these, from the init's control socket */
        int nested_fd;     /* then this one: the image user's (nest_ids), or -1 */
        pid_t init_pid;
        bool userns;
        bool become_root; /* root server: from host root to the namespace's */
        int cg_fds[CG__N];
        size_t n_cg_fds;
        int in_fd, out_fd, err_fd;
        int sync_fd; /* #1 */
        sb_proc proc;
} exec_child;

/* Into every namespace of the init: at once with setns on its pidfd (Linux
 * 5.8), or one fd at a time, the user namespace first. */
static int join_namespaces(const exec_child *x, sb_err *e) {
        static const int flags[INIT_N_NS] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWUTS,   CLONE_NEWIPC,
                                             CLONE_NEWNET,  CLONE_NEWPID, CLONE_NEWCGROUP};
        int all = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWCGROUP |
                  (x->userns ? CLONE_NEWUSER : 0);

        if (x->init_pidfd >= 0) {
                if (setns(x->init_pidfd, all) < 0)
                        return sb_fail(e, SB_STEP_SETNS, errno, "setns into the init's namespaces");
                return 0;
        }
        for (int i = 0; i < INIT_N_NS; i++) {
                if (!(all & flags[i]))
                        continue;
                if (setns(x->ns[i], flags[i]) < 0)
                        return sb_fail(e, SB_STEP_SETNS, errno, "setns %d", flags[i]);
        }
        return 0;
}

/* The command itself: pid namespace member, its own session. */
static __attribute__((noreturn)) void exec_command(const exec_child *x) {
        sb_err e = {0};
        int sync = x->sync_fd < 3 ? fcntl(x->sync_fd, F_DUPFD_CLOEXEC, 3) : x->sync_fd;
        /* Dies with the waiter, so killing the waiter is enough without a
         * cgroup. */
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        (void)setsid();
        (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); /* see tree.c */
        if (sb_install_stdio(x->in_fd, x->out_fd, x->err_fd) < 0)
                (void)sb_fail(&e, SB_STEP_EXEC, errno, "set up stdin/stdout/stderr");
        else {
                sb_close_fds_except((int[]){0, 1, 2, sync}, 4);
                (void)sb_exec_proc(&x->proc, &e);
        }
        sb_report(sync, &e);
        _exit(127);
}

/* The command, and the host's /proc that shows it by that pid (the
 * sandbox's shows the waiter nothing), for the waiter's SIGTERM handler. */
static volatile sig_atomic_t command_pid, host_proc = -1;

/* Without cgroups, the server stops an exec by sending its waiter SIGTERM:
 * the command's whole tree goes (tree.c), then the waiter. */
static void on_term(int sig) {
        (void)sig;
        if (command_pid > 0)
                tree_kill(host_proc, (pid_t)command_pid);
        _exit(128 + SIGKILL); /* as with a cgroup: the command was killed */
}

static __attribute__((noreturn)) void exec_waiter(const exec_child *x) {
        sb_err e = {0};
        int keep[7 + INIT_N_NS + CG__N] = {x->init_pidfd, x->in_fd, x->out_fd, x->err_fd, x->sync_fd};
        size_t nk = 5;
        pid_t pid;
        int st;

        (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        (void)setsid(); /* nothing of the server's terminal, even here */
        sb_reset_signals();
        (void)sigprocmask(SIG_SETMASK, &(sigset_t){0}, NULL);
        host_proc = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC); /* before setns */
        keep[nk++] = host_proc;
        for (size_t i = 0; i < x->n_cg_fds; i++)
                keep[nk++] = x->cg_fds[i];
        for (int i = 0; i < INIT_N_NS; i++)
                keep[nk++] = x->ns[i];
        keep[nk++] = x->nested_fd;
        sb_close_fds_except(keep, nk);
        if (cg_join(x->cg_fds, x->n_cg_fds) < 0) {
                (void)sb_fail(&e, SB_STEP_CGROUP, errno, "write cgroup.procs");
                goto fail;
        }
        if (join_namespaces(x, &e) < 0)
                goto fail;
        /* last: from inside it nothing of the sandbox's could be joined */
        if (x->nested_fd >= 0 && setns(x->nested_fd, CLONE_NEWUSER) < 0) {
                (void)sb_fail(&e, SB_STEP_SETNS, errno, "setns into the image user's namespace");
                goto fail;
        }
        /* setns kept our ids, the host's root, unmapped in the sandbox:
         * the command must run as the sandbox's root (host BASE). */
        if (x->become_root && userns_become_root(&e) < 0)
                goto fail;
        /* vfork: the command execs at once; no page tables to copy */
        pid = vfork();
        if (pid < 0) {
                (void)sb_fail(&e, SB_STEP_EXEC, errno, "fork in the container");
                goto fail;
        }
        if (pid == 0)
                exec_command(x);
        command_pid = pid;
        (void)sigaction(SIGTERM, &(struct sigaction){.sa_handler = on_term}, NULL);
        (void)close(x->sync_fd); /* #1: the command's copy closes at its exec */
        (void)close(x->in_fd);
        (void)close(x->out_fd);
        (void)close(x->err_fd);
        if (x->init_pidfd >= 0)
                (void)close(x->init_pidfd);
        for (int i = 0; i < INIT_N_NS; i++)
                if (x->ns[i] >= 0)
                        (void)close(x->ns[i]);
        while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR)
                        _exit(127);
        _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
fail:
        sb_report(x->sync_fd, &e);
        _exit(127);
}

static void closefd(int *fd) {
        if (*fd >= 0)
                (void)close(*fd);
        *fd = -1;
}

typedef struct exec_run {
        int pidfd; /* the waiter */
        pid_t pid;
        cg_paths sub;
} exec_run;

/* With a sub-cgroup, everything the exec started dies at once (v2
 * cgroup.kill, v1 freezer); without, the waiter kills the command's
 * tree. */
static void kill_exec(void *ctx) {
        exec_run *x = ctx;
        if (!cg_paths_empty(&x->sub)) {
                cg_kill(&x->sub);
                (void)sys_pidfd_send_signal(x->pidfd, SIGKILL);
        } else
                (void)sys_pidfd_send_signal(x->pidfd, SIGTERM);
}

/* Collect an exec's output from the parent's ends of its pipes (the pump
 * closes them, so they are taken) until the command ends; on timeout or
 * cancellation the pump kills it through `t`. */
static int pump_exec(const cm_exec_spec *spec, const cm_cancel *cancel, int *out_r, int *err_r, int *in_w,
                     const pump_target *t, cm_exec_result *ret, cm_err *err) {
        pump_io io = {.out_fd = take_fd(out_r),
                      .err_fd = take_fd(err_r),
                      .in_fd = take_fd(in_w),
                      .in_data = spec->stdin_data,
                      .in_len = spec->stdin_len,
                      .cap = spec->output_cap,
                      .timeout_ms = spec->timeout_ms,
                      .cancel = cancel,
                      .watch = spec->watch};
        return pump_run(&io, t, ret, err);
}

static int start_waiter(const exec_child *x, int cg_dirfd, exec_run *run, cm_err *err) {
        int pidfd = -1;
        struct cm_clone_args a = {
                .flags = CLONE_PIDFD | (cg_dirfd >= 0 ? CLONE_INTO_CGROUP : 0),
                .pidfd = (uint64_t)(uintptr_t)&pidfd,
                .exit_signal = SIGCHLD,
                .cgroup = cg_dirfd >= 0 ? (uint64_t)cg_dirfd : 0,
        };
        sigset_t all, old;
        pid_t pid;

        (void)sigfillset(&all);
        (void)pthread_sigmask(SIG_SETMASK, &all, &old);
        pid = sys_clone3(&a);
        if (pid < 0 && errno != EPERM && errno != EAGAIN) {
                pid = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, 0);
                if (pid > 0)
                        pidfd = sys_pidfd_open(pid, 0);
        }
        if (pid == 0)
                exec_waiter(x);
        (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (pid < 0)
                return cm_err_sys(err, errno, "exec: clone");
        if (pidfd < 0) {
                (void)kill(pid, SIGKILL);
                (void)waitpid(pid, NULL, 0);
                return cm_err_sys(err, ENOSYS, "exec: no pidfd (Linux 5.3 or newer is needed)");
        }
        run->pid = pid;
        run->pidfd = pidfd;
        return 0;
}

/* The fallback: a waiter joins the init's namespaces and cgroup, then
 * forks the command (for containers whose init serves no spawn requests,
 * or requests too large for it). */
static int exec_setns(native *n, const nstate *sp, const cm_exec_spec *spec, char **argv, char **envp,
                      const cm_cancel *cancel, cm_exec_result *ret, cm_err *err) {
        nstate s = *sp;
        exec_child x = {.init_pidfd = -1,
                        .ns = {-1, -1, -1, -1, -1, -1, -1},
                        .nested_fd = -1,
                        .in_fd = -1,
                        .out_fd = -1,
                        .err_fd = -1,
                        .sync_fd = -1};
        exec_run run = {.pidfd = -1};
        int sync_p[2] = {-1, -1}, out_p[2] = {-1, -1}, err_p[2] = {-1, -1}, in_p[2] = {-1, -1};
        int cg_dirfd = -1, r = -1;
        int64_t t0 = cm_now_ms();
        char sub_name[32], rnd[17];
        siginfo_t si = {0};

        x.init_pidfd = native_init_pidfd(&s);
        if (x.init_pidfd < 0) {
                r = cm_err_set(err, ESRCH, "container %s is not running (%s); start a new one with run_container",
                               s.name, s.state);
                goto out;
        }
        /* Without CAP_SYS_PTRACE the init (not dumpable) cannot be setns'd
         * through its pidfd; it hands out its namespaces instead. */
        if (n->rootless) {
                if (init_ctl_fetch(s.dir, x.ns, err) < 0 ||
                    (s.nest_ids && init_ctl_nested(s.dir, &x.nested_fd, err) < 0))
                        goto out;
                closefd(&x.init_pidfd);
        }
        native_random_id(rnd);
        (void)snprintf(sub_name, sizeof sub_name, "exec-%.8s", rnd);
        if (cg_create_sub(&s.cg, sub_name, &run.sub, err) < 0 ||
            cg_open_join(&s.cg, &run.sub, x.cg_fds, CG__N, &x.n_cg_fds, &cg_dirfd, err) < 0)
                goto out;
        if (pipe2(sync_p, O_CLOEXEC) < 0 || pipe2(out_p, O_CLOEXEC) < 0 || pipe2(err_p, O_CLOEXEC) < 0 ||
            (spec->stdin_len > 0 && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_p) < 0)) {
                r = cm_err_sys(err, errno, "exec: pipe");
                goto out;
        }
        x.init_pid = s.init_pid;
        x.userns = s.userns;
        x.become_root = s.userns && !n->rootless;
        x.in_fd = in_p[1];
        x.out_fd = out_p[1];
        x.err_fd = err_p[1];
        x.sync_fd = sync_p[1];
        x.proc = (sb_proc){argv,
                           envp,
                           spec->workdir ? spec->workdir : s.workdir,
                           n->caps_keep,
                           n->last_cap,
                           /* the record does not say whether the sandbox has a
                              read-write mount: the stricter filter */
                           &n->seccomp_rw,
                           n->cg.mode == CG_NONE ? s.limits.memory_bytes : 0,
                           n->cg.mode == CG_NONE ? s.limits.pids : 0,
                           s.set_ids && !s.nest_ids,
                           s.run_uid,
                           s.run_gid};
        if (start_waiter(&x, cg_dirfd, &run, err) < 0)
                goto out;
        /* The child's ends. */
        closefd(&sync_p[1]);
        closefd(&out_p[1]);
        closefd(&err_p[1]);
        closefd(&in_p[1]);
        closefd(&cg_dirfd);
        for (size_t i = 0; i < x.n_cg_fds; i++)
                closefd(&x.cg_fds[i]);
        x.n_cg_fds = 0;
        closefd(&x.init_pidfd);
        for (int i = 0; i < INIT_N_NS; i++)
                closefd(&x.ns[i]);
        closefd(&x.nested_fd);
        if (sb_wait_ready(sync_p[0], NULL, err) < 0) { /* #1 */
                kill_exec(&run);
                (void)waitid((idtype_t)P_PIDFD, (id_t)run.pidfd, &si, WEXITED);
                goto out;
        }
        r = pump_exec(spec, cancel, &out_p[0], &err_p[0], &in_p[0], &(pump_target){run.pidfd, kill_exec, &run}, ret,
                      err);
        if (r < 0)
                kill_exec(&run);
        if (waitid((idtype_t)P_PIDFD, (id_t)run.pidfd, &si, WEXITED) == 0 && r == 0)
                ret->exit_code = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
        ret->duration_ms = cm_now_ms() - t0;
        if (r < 0)
                cm_exec_result_clear(ret);
out:
        closefd(&run.pidfd);
        for (int i = 0; i < 2; i++) {
                closefd(&sync_p[i]);
                closefd(&out_p[i]);
                closefd(&err_p[i]);
                closefd(&in_p[i]);
        }
        closefd(&cg_dirfd);
        for (size_t i = 0; i < x.n_cg_fds; i++)
                closefd(&x.cg_fds[i]);
        closefd(&x.init_pidfd);
        for (int i = 0; i < INIT_N_NS; i++)
                closefd(&x.ns[i]);
        closefd(&x.nested_fd);
        /* An exec's background processes keep its cgroup until the
         * container goes; a killed or finished tree leaves it empty. */
        if (ret->timed_out)
                (void)cg_destroy(&run.sub);
        else
                cg_release(&run.sub);
        cg_paths_free(&run.sub);
        return r;
}

/* ---- through the init ---------------------------------------------------- */

static void kill_via_init(void *ctx) { (void)send(*(int *)ctx, "k", 1, MSG_NOSIGNAL); /* the init kills the tree */ }

/* The init spawns the command: nothing to fork here, nothing to join.
 * Returns 1 when the init cannot take the request (use setns). */
static int exec_init(const nstate *s, const cm_exec_spec *spec, char **argv, char **envp, const cm_cancel *cancel,
                     cm_exec_result *ret, cm_err *err) {
        int sync_p[2] = {-1, -1}, out_p[2] = {-1, -1}, err_p[2] = {-1, -1}, in_p[2] = {-1, -1};
        int conn = -1, r = -1;
        int32_t code;
        ssize_t k;

        if (pipe2(sync_p, O_CLOEXEC) < 0 || pipe2(out_p, O_CLOEXEC) < 0 || pipe2(err_p, O_CLOEXEC) < 0 ||
            (spec->stdin_len > 0 && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_p) < 0)) {
                r = cm_err_sys(err, errno, "exec: pipe");
                goto out;
        }
        conn = init_ctl_spawn(s->dir, argv, envp, spec->workdir ? spec->workdir : s->workdir,
                              (int[]){sync_p[1], out_p[1], err_p[1], in_p[1]}, err);
        if (conn == -E2BIG || conn == -ENOENT || conn == -ECONNREFUSED) {
                r = 1;
                goto out;
        }
        if (conn < 0)
                goto out;
        /* The child's ends: the init holds its copies now. */
        closefd(&sync_p[1]);
        closefd(&out_p[1]);
        closefd(&err_p[1]);
        closefd(&in_p[1]);
        if (sb_wait_ready(sync_p[0], NULL, err) < 0) /* #1 */
                goto out;
        r = pump_exec(spec, cancel, &out_p[0], &err_p[0], &in_p[0], &(pump_target){conn, kill_via_init, &conn}, ret,
                      err);
        if (r < 0)
                goto out;
        do
                k = recv(conn, &code, sizeof code, 0);
        while (k < 0 && errno == EINTR);
        /* No code: the container stopped under the command. */
        ret->exit_code = k == (ssize_t)sizeof code ? code : 128 + SIGKILL;
out:
        closefd(&conn);
        for (int i = 0; i < 2; i++) {
                closefd(&sync_p[i]);
                closefd(&out_p[i]);
                closefd(&err_p[i]);
                closefd(&in_p[i]);
        }
        return r;
}

int native_exec(cm_backend *b, const char *id, const cm_exec_spec *spec, const cm_cancel *cancel, cm_exec_result *ret,
                cm_err *err) {
        native *n = (native *)b;
        nstate s = {0};
        int64_t t0 = cm_now_ms();
        cleanup_free char **argv = NULL;
        char **envp = NULL;
        int r;

        *ret = (cm_exec_result){0};
        if (!spec->argv || spec->argc == 0 || !spec->argv[0] || !spec->argv[0][0])
                return cm_err_set(err, EINVAL, "exec needs a command");
        if (spec->workdir && spec->workdir[0] != '/')
                return cm_err_set(err, EINVAL, "workdir \"%s\" must be an absolute path", spec->workdir);
        if (state_load(n, id, &s, err) < 0)
                return -1;
        if (strcmp(s.state, "running") != 0) {
                r = cm_err_set(err, ESRCH, "container %s is not running (%s); start a new one with run_container",
                               s.name, s.state);
                state_free(&s);
                return r;
        }
        argv = xcalloc(spec->argc + 1, sizeof *argv);
        for (size_t i = 0; i < spec->argc; i++)
                argv[i] = spec->argv[i];
        envp = native_env_merge(s.env, spec->env, spec->n_env);
        r = spec->warm ? zygote_exec(n, &s, spec, envp, cancel, ret, err) : 1;
        if (r == 1)
                r = exec_init(&s, spec, argv, envp, cancel, ret, err);
        if (r == 1)
                r = exec_setns(n, &s, spec, argv, envp, cancel, ret, err);
        if (r < 0)
                cm_exec_result_clear(ret);
        else
                ret->duration_ms = cm_now_ms() - t0;
        for (char **p = envp; p && *p; p++)
                free(*p);
        free(envp);
        state_free(&s);
        return r;
}
