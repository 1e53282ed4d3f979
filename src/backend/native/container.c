/* The birth of a container: create and start (detached, to completion, or
 * warm for the pool).  This is the parent's side; the child's is sandbox.c;
 * what follows the start (stop, remove, list, logs, stats) is manage.c. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "backend/native/linux.h"
#include "util/cleanup.h"

/* What is being started: a detached container (with a record, a log and a
 * control socket), a run to completion (no record), or a warm sandbox for
 * the pool (no record; its init waits for one command on a socketpair). */
enum launch_kind { L_RUN, L_WAIT, L_WARM };

/* One container being started. */
typedef struct launch {
        enum launch_kind kind;
        nstate st;
        mnt_plan plan;
        char **envp;
        int sync[2]; /* #1 */
        int out[2];  /* run_wait: stdout */
        int eout[2]; /* run_wait: stderr */
        int log_fd, log_idx_fd, exit_fd;
        int cg_fds[CG__N];
        size_t n_cg_fds;
        int cg_dirfd;
        bool copy_image;     /* a directory image copied, not an overlay (rootfs.c) */
        bool overlay_failed; /* the overlay mount said "not here": copy */
        char *scratch;       /* run_wait: the image's copy, removed at the end */
        native_image img;    /* a stored image (images.c); e.manifest NULL: none */
        const char *upper;   /* a build's RUN: where its changes go (rootfs_opts) */
        int ctl_fd;          /* run: the init's control socket (listening) */
        int ctl_pair[2];     /* warm: [0] ours, [1] the init's */
        int net_sync[2];     /* network: [0] ours, [1] the child's (#2, #3) */
        pid_t pid;
        int pidfd;
} launch;

static void closefd(int *fd) {
        if (*fd >= 0)
                (void)close(*fd);
        *fd = -1;
}

/* The child's ends and what only the child needs: closed once it has them. */
static void launch_close_child_fds(launch *l) {
        closefd(&l->sync[1]);
        closefd(&l->out[1]);
        closefd(&l->eout[1]);
        closefd(&l->log_fd);
        closefd(&l->log_idx_fd);
        closefd(&l->exit_fd);
        closefd(&l->cg_dirfd);
        closefd(&l->ctl_fd);
        closefd(&l->ctl_pair[1]);
        closefd(&l->net_sync[1]);
        for (size_t i = 0; i < l->n_cg_fds; i++)
                closefd(&l->cg_fds[i]);
        l->n_cg_fds = 0;
}

static void launch_close_fds(launch *l) {
        launch_close_child_fds(l);
        closefd(&l->sync[0]);
        closefd(&l->out[0]);
        closefd(&l->eout[0]);
        closefd(&l->ctl_pair[0]);
        closefd(&l->net_sync[0]);
}

static void strv_free(char **v) {
        for (char **p = v; p && *p; p++)
                free(*p);
        free(v);
}

static void launch_free(launch *l) {
        launch_close_fds(l);
        closefd(&l->pidfd);
        mnt_plan_free(&l->plan);
        strv_free(l->envp);
        state_free(&l->st);
        native_image_clear(&l->img);
        rootfs_remove(l->scratch); /* the sandbox is gone by now */
        free(l->scratch);
        l->scratch = NULL;
}

/* Undo a start that failed or finished: kill, network helper, cgroups,
 * record. */
static void launch_discard(launch *l) {
        if (l->pidfd >= 0) {
                (void)sys_pidfd_send_signal(l->pidfd, SIGKILL);
                (void)waitid((idtype_t)P_PIDFD, (id_t)l->pidfd, &(siginfo_t){0}, WEXITED);
        }
        net_stop(&l->st.net);
        (void)cg_destroy(&l->st.cg);
        if (l->st.dir)
                state_delete(&l->st);
}

/* ---- validation and the environment ------------------------------------ */

static bool name_ok(const char *s) {
        size_t n = strlen(s);
        if (n == 0 || n > 63 ||
            !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= '0' && s[0] <= '9')))
                return false;
        for (; *s; s++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", *s))
                        return false;
        return true;
}

static int check_spec(const native *n, const cm_run_spec *spec, bool wait, cm_err *err) {
        if (!n->ok)
                return cm_err_set(err, ENOTSUP, "the native runtime is not usable here: %s; %s", n->reason, n->fix);
        /* a stored image may bring its own command (checked once resolved) */
        if (wait && (!spec->argv || spec->argc == 0 || !spec->argv[0]) && !native_image_is_stored(spec->image))
                return cm_err_set(err, EINVAL, "a command is needed to run to completion");
        if (spec->argv && spec->argc > 0 && (!spec->argv[0] || !spec->argv[0][0]))
                return cm_err_set(err, EINVAL, "the command's first element must be a program name");
        if (spec->name && !name_ok(spec->name))
                return cm_err_set(err, EINVAL,
                                  "container name \"%s\" is not valid: use 1-63 of [a-zA-Z0-9_.-], starting with a "
                                  "letter or digit",
                                  spec->name);
        if (spec->workdir && spec->workdir[0] != '/')
                return cm_err_set(err, EINVAL, "workdir \"%s\" must be an absolute path", spec->workdir);
        for (size_t i = 0; i < spec->n_env; i++)
                if (!spec->env[i].key || !spec->env[i].key[0] || strchr(spec->env[i].key, '='))
                        return cm_err_set(err, EINVAL, "environment variable name \"%s\" is not valid",
                                          spec->env[i].key ? spec->env[i].key : "");
        if (spec->cpus < 0 || spec->memory_bytes < 0 || spec->pids < 0 || spec->tmpfs_bytes < 0)
                return cm_err_set(err, EINVAL, "limits cannot be negative");
        return 0;
}

static void env_set(char ***v, size_t *len, const char *key, const char *value) {
        size_t kl = strlen(key);
        char *kv = xasprintf("%s=%s", key, value ? value : "");
        for (size_t i = 0; i < *len; i++)
                if (strncmp((*v)[i], key, kl) == 0 && (*v)[i][kl] == '=') {
                        free((*v)[i]);
                        (*v)[i] = kv;
                        return;
                }
        *v = xrealloc(*v, (*len + 2) * sizeof **v);
        (*v)[(*len)++] = kv;
        (*v)[*len] = NULL;
}

/* The container's environment: defaults, the image's (a stored image's
 * config Env), then the spec's: the run's own win, as with Docker. */
static char **make_env(const cm_run_spec *spec, const char *hostname, char *const *image_env) {
        char **v = xcalloc(1, sizeof *v);
        size_t len = 0;
        env_set(&v, &len, "PATH", NATIVE_PATH);
        env_set(&v, &len, "HOME", "/root");
        env_set(&v, &len, "HOSTNAME", hostname);
        env_set(&v, &len, "LANG", "C.UTF-8");
        for (char *const *p = image_env; p && *p; p++) {
                const char *eq = strchr(*p, '=');
                cleanup_free char *k = eq && eq != *p ? xstrndup(*p, (size_t)(eq - *p)) : NULL;
                if (k)
                        env_set(&v, &len, k, eq + 1);
        }
        for (size_t i = 0; i < spec->n_env; i++)
                env_set(&v, &len, spec->env[i].key, spec->env[i].value);
        return v;
}

char **native_env_merge(char *const *base, const cm_kv *env, size_t n_env) {
        char **v = xcalloc(1, sizeof *v);
        size_t len = 0;
        for (char *const *p = base; p && *p; p++) {
                const char *eq = strchr(*p, '=');
                cleanup_free char *k = eq ? xstrndup(*p, (size_t)(eq - *p)) : NULL;
                if (k)
                        env_set(&v, &len, k, eq + 1);
        }
        for (size_t i = 0; i < n_env; i++)
                env_set(&v, &len, env[i].key, env[i].value);
        return v;
}

/* A stored image's command, as Docker makes it: the run's command
 * replaces Cmd and keeps the Entrypoint; without one, Entrypoint + Cmd.
 * A detached container of an image with no Entrypoint idles instead of
 * running its Cmd (a shell, usually, which would exit at once with no
 * terminal): the agent execs into it.  NULL: nothing to run. */
static char **image_argv(const img_config *c, const cm_run_spec *spec, bool wait) {
        size_t ne = 0, nc = 0, k = 0;
        char *const *cmd = spec->argv && spec->argc ? spec->argv : c->cmd;
        char **v;

        while (c->entrypoint && c->entrypoint[ne])
                ne++;
        if (cmd == spec->argv)
                nc = spec->argc;
        else
                while (cmd && cmd[nc])
                        nc++;
        if ((ne == 0 && nc == 0) || (!wait && ne == 0 && cmd != spec->argv))
                return NULL;
        v = xcalloc(ne + nc + 1, sizeof *v);
        for (size_t i = 0; i < ne; i++)
                v[k++] = xstrdup(c->entrypoint[i]);
        for (size_t i = 0; i < nc; i++)
                v[k++] = xstrdup(cmd[i]);
        return v;
}

static char **copy_argv(char *const *argv, size_t argc) {
        char **v;
        if (!argv || argc == 0)
                return NULL;
        v = xcalloc(argc + 1, sizeof *v);
        for (size_t i = 0; i < argc; i++)
                v[i] = xstrdup(argv[i]);
        return v;
}

void native_random_id(char ret[17]) {
        unsigned char b[8];
        if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
                struct timespec ts;
                (void)clock_gettime(CLOCK_MONOTONIC, &ts);
                uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_sec;
                memcpy(b, &x, sizeof b);
        }
        for (int i = 0; i < 8; i++)
                (void)snprintf(ret + 2 * i, 3, "%02x", b[i]);
}

/* ---- creating ----------------------------------------------------------- */

static int lock_state(const native *n) {
        cleanup_free char *path = xasprintf("%s/lock", n->state_dir);
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0 && flock(fd, LOCK_EX) < 0) {
                (void)close(fd);
                return -1;
        }
        return fd;
}

static int finish_prepare(native *n, const cm_run_spec *spec, const char *cg_name, launch *l, cm_err *err);

/* A build's RUN (build.c): its image is the build's layers so far (moved
 * into the launch), its changes go to upper. */
typedef struct build_in {
        native_image *im;
        const char *upper;
} build_in;

/* The record first (so a crash leaves nothing a new server cannot find),
 * then cgroups, the mount plan, env and fds. */
static int prepare(native *n, const cm_run_spec *spec, enum launch_kind kind, bool copy_image, build_in *b, launch *l,
                   cm_err *err) {
        bool wait = kind != L_RUN;
        char id[17];
        int lock = -1, r;
        cg_limits lim = {spec->memory_bytes, spec->cpus, spec->pids};

        *l = (launch){.sync = {-1, -1},
                      .out = {-1, -1},
                      .eout = {-1, -1},
                      .log_fd = -1,
                      .log_idx_fd = -1,
                      .exit_fd = -1,
                      .cg_dirfd = -1,
                      .ctl_fd = -1,
                      .ctl_pair = {-1, -1},
                      .net_sync = {-1, -1},
                      .pidfd = -1,
                      .kind = kind,
                      .copy_image = copy_image};
        if (check_spec(n, spec, kind == L_WAIT, err) < 0 || net_plan(n, spec, &l->st.net, err) < 0)
                return -1;
        if (b) {
                l->img = *b->im;
                *b->im = (native_image){0};
                l->upper = b->upper;
        } else if (native_image_is_stored(spec->image) && native_image_resolve(n, spec->image, &l->img, err) < 0)
                return -1;
        native_random_id(id);
        l->st.id = xstrdup(id);
        l->st.name = spec->name ? xstrdup(spec->name) : xasprintf("cm-%.10s", id);
        l->st.image = xstrdup(spec->image && spec->image[0] ? spec->image : "host");
        l->st.created_at = (int64_t)time(NULL);
        l->st.server_pid = n->self_pid;
        l->st.server_start = n->self_start;
        l->st.userns = true; /* always: under a root server, a range (ns_user.c) */
        l->st.ephemeral = wait;
        l->st.readonly_rootfs = spec->readonly_rootfs;
        l->st.network = spec->network;
        l->st.limits = lim;
        l->st.tmpfs_bytes = spec->tmpfs_bytes > 0 ? spec->tmpfs_bytes : NATIVE_TMPFS_BYTES;
        if (l->img.e.manifest) {
                const char *wd = l->img.cfg.workdir;
                l->st.image_id = xstrdup(l->img.e.manifest);
                {
                        size_t ne = 0;
                        while (l->img.cfg.exposed && l->img.cfg.exposed[ne])
                                ne++;
                        l->st.exposed = copy_argv(l->img.cfg.exposed, ne);
                }
                /* A rootless sandbox maps one id (ours, as its root): the
                 * image's user gets it through a nested user namespace
                 * (ns_user.c userns_nest); root:root needs nothing. */
                if (l->img.cfg.user && l->img.cfg.user[0]) {
                        if (native_image_user(&l->img, &l->st.run_uid, &l->st.run_gid, err) < 0)
                                return -1;
                        l->st.set_ids = !n->rootless || l->st.run_uid != 0 || l->st.run_gid != 0;
                        l->st.nest_ids = n->rootless && l->st.set_ids;
                }
                /* a warm sandbox's init waits for its command */
                l->st.argv = kind == L_WARM ? NULL : image_argv(&l->img.cfg, spec, wait);
                l->st.workdir = xstrdup(spec->workdir ? spec->workdir : wd && wd[0] == '/' ? wd : NATIVE_WORKDIR);
                if (kind == L_WAIT && !l->st.argv)
                        return cm_err_set(err, EINVAL,
                                          "a command is needed to run to completion: image \"%s\" has no "
                                          "Entrypoint or Cmd",
                                          spec->image);
        } else {
                l->st.argv = copy_argv(spec->argv, spec->argc);
                l->st.workdir = xstrdup(spec->workdir ? spec->workdir : NATIVE_WORKDIR);
        }
        l->st.labels = xcalloc(spec->n_labels + 1, sizeof *l->st.labels);
        for (size_t i = 0; i < spec->n_labels; i++) {
                l->st.labels[i].key = xstrdup(spec->labels[i].key);
                l->st.labels[i].value = xstrdup(spec->labels[i].value);
        }
        l->st.n_labels = spec->n_labels;
        l->st.mounts = xcalloc(spec->n_mounts + 1, sizeof *l->st.mounts);
        for (size_t i = 0; i < spec->n_mounts; i++)
                l->st.mounts[i] = (struct nmount){xstrdup(spec->mounts[i].source), xstrdup(spec->mounts[i].target),
                                                  spec->mounts[i].readonly};
        l->st.n_mounts = spec->n_mounts;
        l->envp = make_env(spec, l->st.name, l->img.cfg.env);
        l->st.env = native_env_merge(l->envp, NULL, 0);

        /* A run to completion (or a warm sandbox) leaves no record: its init
         * dies with us, and its cgroup sits under our srv-<pid>-<start> dir,
         * which the next server reaps if we crash. */
        if (wait) {
                cleanup_free char *rel = xasprintf("%s/%s", n->srv_tag, id);
                return finish_prepare(n, spec, rel, l, err);
        }
        /* Names given by the caller must be unique, across servers too. */
        if (spec->name) {
                lock = lock_state(n);
                if (state_name_taken(n, spec->name)) {
                        if (lock >= 0)
                                (void)close(lock);
                        return cm_err_set(err, EEXIST,
                                          "a container named \"%s\" exists; pick another name or remove it first",
                                          spec->name);
                }
        }
        {
                cleanup_free char *cdir = xasprintf("%s/containers", n->state_dir);
                (void)mkdir(cdir, 0700);
        }
        l->st.dir = xasprintf("%s/containers/%s", n->state_dir, id);
        r = mkdir(l->st.dir, 0700) < 0 ? cm_err_sys(err, errno, "state: cannot create %s", l->st.dir)
                                       : state_save(&l->st, err);
        if (lock >= 0)
                (void)close(lock);
        if (r < 0) {
                (void)rmdir(l->st.dir);
                free(l->st.dir);
                l->st.dir = NULL;
                return -1;
        }
        return finish_prepare(n, spec, id, l, err);
}

/* cgroups, the mount plan, fds. */
static int finish_prepare(native *n, const cm_run_spec *spec, const char *cg_name, launch *l, cm_err *err) {
        bool wait = l->st.ephemeral;
        bool stored = l->img.e.manifest != NULL;
        bool copy = (l->st.image[0] == '/' || stored) && (l->copy_image || !n->overlay);
        cleanup_free char *copy_dir = NULL, *resolv = net_resolv_conf(spec->network);
        rootfs_opts ro;

        /* A run to completion joins only the hierarchies holding its limits;
         * a warm sandbox all, its limits come later. */
        if (cg_create(&n->cg, cg_name, &l->st.limits, l->kind == L_WAIT, &l->st.cg, err) < 0)
                return -1;
        if (!wait && state_save(&l->st, err) < 0)
                return -1;
        if (strcmp(l->st.image, "host") == 0 && hostetc_sync(n, err) < 0)
                return -1;
        /* Without an overlay, a copy of a directory image: in the record's
         * dir (removed with it), or a scratch dir for a run to completion. */
        if (copy)
                copy_dir = l->st.dir ? xasprintf("%s/rootfs", l->st.dir) : rootfs_scratch_path(n, l->st.id);
        ro = (rootfs_opts){l->st.image,          copy_dir,      n->stage_dir, n->etc_dir,
                           l->st.name,           resolv,        l->st.tmpfs_bytes,     spec->readonly_rootfs,
                           true,                 n->rootless ? NULL : n,        spec->mounts,  spec->n_mounts,
                           stored ? l->img.lowers : NULL, l->upper};
        if (mnt_plan_build(&ro, &l->plan, err) < 0)
                return -1;
        l->copy_image = copy;
        if (copy) {
                const char *why =
                        n->overlay ? "the kernel refused this image as an overlay's lower layer" : n->overlay_why;
                if (!l->st.dir)
                        l->scratch = xstrdup(copy_dir);
                /* after the plan: the image has passed its checks */
                if (stored ? native_image_copy(n, &l->img, copy_dir, err) < 0
                           : rootfs_copy(n, l->st.image, copy_dir, why, err) < 0)
                        return -1;
        }
        if (mnt_plan_detach(&ro, &l->plan, err) < 0) {
                /* an image the kernel will not idmap: start again on a copy */
                l->overlay_failed = !copy && l->plan.lower_unmapped;
                return -1;
        }
        if (cg_open_join(&l->st.cg, NULL, l->cg_fds, CG__N, &l->n_cg_fds, &l->cg_dirfd, err) < 0)
                return -1;
        if (pipe2(l->sync, O_CLOEXEC) < 0)
                return cm_err_sys(err, errno, "pipe");
        if (spec->network && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, l->net_sync) < 0)
                return cm_err_sys(err, errno, "socketpair");
        if (l->kind == L_WAIT) {
                if (pipe2(l->out, O_CLOEXEC) < 0 || pipe2(l->eout, O_CLOEXEC) < 0)
                        return cm_err_sys(err, errno, "pipe");
        } else if (l->kind == L_WARM) {
                if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, l->ctl_pair) < 0)
                        return cm_err_sys(err, errno, "socketpair");
        } else {
                cleanup_free char *log = xasprintf("%s/log", l->st.dir);
                cleanup_free char *ex = xasprintf("%s/exit", l->st.dir);
                cleanup_free char *idx = xasprintf("%s/log.idx", l->st.dir);
                l->log_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
                l->log_idx_fd = open(idx, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
                l->exit_fd = open(ex, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (l->log_fd < 0 || l->log_idx_fd < 0 || l->exit_fd < 0)
                        return cm_err_sys(err, errno, "state: cannot create the log of %s", l->st.id);
                l->ctl_fd = init_ctl_listen(l->st.dir, err);
                if (l->ctl_fd < 0)
                        return -1;
        }
        return 0;
}

/* Files made in a read-write host mount stay on the host: no setuid or
 * setgid bit may be set in such a sandbox (seccomp.c). */
static bool has_rw_mount(const cm_run_spec *spec) {
        for (size_t i = 0; i < spec->n_mounts; i++)
                if (!spec->mounts[i].readonly)
                        return true;
        return false;
}

static int start(native *n, const cm_run_spec *spec, launch *l, cm_err *err) {
        bool wait = l->kind != L_RUN;
        int step;
        sb_config c = {
                .userns = true,
                .outer_uid = n->map_uid,
                .outer_gid = n->map_gid,
                .parent_maps = !n->rootless,
                .hostname = l->st.name,
                /* a root server's child cannot walk the state dir */
                .stage = n->rootless ? n->stage_dir : NULL,
                .root_bytes = l->st.tmpfs_bytes,
                .plan = &l->plan,
                .readonly_rootfs = spec->readonly_rootfs,
                .n_cg_fds = l->n_cg_fds,
                .cg_dirfd = l->cg_dirfd,
                .rlimit_fallback = n->cg.mode == CG_NONE,
                .memory_bytes = spec->memory_bytes,
                .pids = spec->pids,
                .caps_keep = n->caps_keep,
                .last_cap = n->last_cap,
                .seccomp = has_rw_mount(spec) ? &n->seccomp_rw : &n->seccomp,
                .argv = l->st.argv,
                .envp = l->envp,
                .workdir = l->st.workdir,
                .err_fd = l->sync[1],
                .stdin_fd = -1,
                .stdout_fd = l->out[1],
                .stderr_fd = l->eout[1],
                .log_fd = l->log_fd,
                .log_idx_fd = l->log_idx_fd,
                .log_cap = NATIVE_LOG_CAP,
                .exit_fd = l->exit_fd,
                /* A run-to-completion sandbox always dies with its server. */
                .lifeline_fd = wait || !n->adopt_orphans ? n->lifeline_r : -1,
                .ctl_fd = l->ctl_fd,
                .ctl_conn = l->ctl_pair[1],
                .net_sync = l->net_sync[1],
                .set_ids = l->st.set_ids,
                .nest_ids = l->st.nest_ids,
                .run_uid = l->st.run_uid,
                .run_gid = l->st.run_gid,
        };
        memcpy(c.cg_fds, l->cg_fds, sizeof c.cg_fds);

        l->pid = sb_spawn(&c, &l->pidfd, err);
        if (l->pid < 0)
                return -1;
        launch_close_child_fds(l);
        /* #2, #3: returns 0 without a helper when the child failed first;
         * its message is read below. */
        if (l->net_sync[0] >= 0 && net_start(n, l->net_sync[0], l->pidfd, l->st.id, &l->st.net, err) < 0)
                return -1;
        closefd(&l->net_sync[0]);
        if (sb_wait_ready(l->sync[0], &step, err) < 0) { /* #1 */
                l->overlay_failed = !l->copy_image && step == SB_STEP_OVERLAY && rootfs_overlay_unavailable(err->code);
                return -1;
        }
        closefd(&l->sync[0]);
        return 0;
}

/* prepare and start.  A directory image the kernel will not take as an
 * overlay's lower layer (say, on overlays already stacked as deep as they
 * go) is started again, on a copy (rootfs.c).  On failure l still needs
 * launch_discard and launch_free. */
static int launch_start(native *n, const cm_run_spec *spec, enum launch_kind kind, launch *l, cm_err *err) {
        if (prepare(n, spec, kind, false, NULL, l, err) == 0 && start(n, spec, l, err) == 0)
                return 0;
        if (!l->overlay_failed)
                return -1;
        launch_discard(l);
        launch_free(l);
        if (prepare(n, spec, kind, true, NULL, l, err) < 0 || start(n, spec, l, err) < 0)
                return -1;
        return 0;
}

static void kill_sandbox(void *ctx) {
        launch *l = ctx;
        (void)sys_pidfd_send_signal(l->pidfd, SIGKILL); /* pid 1: the whole namespace goes */
}

static int exit_code_of(const siginfo_t *si) {
        if (si->si_code == CLD_EXITED)
                return si->si_status;
        return 128 + si->si_status;
}

/* A started run to completion: its output pumped until it ends, then
 * everything of it gone (l freed). */
static int wait_launch(native *n, const cm_run_spec *spec, launch *l, int64_t t0, const cm_cancel *cancel,
                       cm_exec_result *ret, cm_err *err) {
        siginfo_t si = {0};
        int r;
        pump_io io = {.out_fd = l->out[0],
                      .err_fd = l->eout[0],
                      .in_fd = -1,
                      .cap = spec->output_cap,
                      .timeout_ms = spec->timeout_ms,
                      .cancel = cancel};
        pump_target t = {l->pidfd, kill_sandbox, l};

        (void)n;
        l->out[0] = l->eout[0] = -1; /* the pump closes them */
        r = pump_run(&io, &t, ret, err);
        if (r < 0)
                (void)sys_pidfd_send_signal(l->pidfd, SIGKILL);
        if (waitid((idtype_t)P_PIDFD, (id_t)l->pidfd, &si, WEXITED) == 0 && r == 0)
                ret->exit_code = exit_code_of(&si);
        /* The helper goes before we return: nothing of the run outlives it. */
        net_stop(&l->st.net);
        closefd(&l->pidfd);
        (void)cg_destroy(&l->st.cg);
        launch_free(l);
        ret->duration_ms = cm_now_ms() - t0;
        if (r < 0)
                cm_exec_result_clear(ret);
        return r;
}

/* im: the stored image resolved, or NULL. */
static int run_wait(native *n, const cm_run_spec *spec, const native_image *im, const cm_cancel *cancel,
                    cm_exec_result *ret, cm_err *err) {
        launch l;
        int64_t t0 = cm_now_ms();
        int r;

        /* A warm sandbox when one fits and is ready. */
        r = pool_run(n, spec, im, cancel, ret, err);
        if (r != 1) {
                if (r == 0)
                        ret->duration_ms = cm_now_ms() - t0;
                else
                        cm_exec_result_clear(ret);
                return r;
        }
        r = launch_start(n, spec, L_WAIT, &l, err);
        pool_primed(n); /* the pool's work waits until this sandbox is up */
        if (r < 0) {
                launch_discard(&l);
                launch_free(&l);
                return -1;
        }
        return wait_launch(n, spec, &l, t0, cancel, ret, err);
}

int native_build_run(native *n, const cm_run_spec *spec, native_image *im, const char *upper, const cm_cancel *cancel,
                     cm_exec_result *ret, cm_err *err) {
        build_in b = {im, upper};
        launch l;
        int64_t t0 = cm_now_ms();

        *ret = (cm_exec_result){0};
        if (prepare(n, spec, L_WAIT, false, &b, &l, err) < 0 || start(n, spec, &l, err) < 0) {
                launch_discard(&l);
                launch_free(&l);
                return -1;
        }
        return wait_launch(n, spec, &l, t0, cancel, ret, err);
}

int native_run_wait(cm_backend *b, const cm_run_spec *spec, const cm_cancel *cancel, cm_exec_result *ret, cm_err *err) {
        native *n = (native *)b;
        native_image im = {0};
        cm_err ignored = CM_ERR_INIT;
        int hold = -1, r;

        *ret = (cm_exec_result){0};
        if (check_spec(n, spec, true, err) < 0)
                return -1;
        /* A stored image, resolved once for the hold and the pool (a name
         * that resolves to nothing: the launch says why).  The hold keeps
         * it while this runs: no record says it is in use. */
        if (native_image_is_stored(spec->image) && native_image_resolve(n, spec->image, &im, &ignored) == 0)
                hold = native_image_hold(n, im.e.manifest);
        r = run_wait(n, spec, im.e.manifest ? &im : NULL, cancel, ret, err);
        if (hold >= 0)
                native_image_release(n, im.e.manifest, hold);
        native_image_clear(&im);
        return r;
}

int native_run(cm_backend *b, const cm_run_spec *spec, char **ret_id, cm_err *err) {
        native *n = (native *)b;
        launch l;

        if (launch_start(n, spec, L_RUN, &l, err) < 0) {
                launch_discard(&l);
                launch_free(&l);
                return -1;
        }
        l.st.init_pid = l.pid;
        l.st.init_start = proc_start_time(l.pid);
        if (state_save(&l.st, err) < 0) {
                launch_discard(&l);
                launch_free(&l);
                return -1;
        }
        *ret_id = xstrdup(l.st.id);
        launch_free(&l);
        return 0;
}

/* ---- warm sandboxes (the pool, pool.c) ---------------------------------- */

int native_warm_create(native *n, const char *image, warm_box *ret, cm_err *err) {
        cm_run_spec spec = {.image = image ? image : "host"};
        launch l;
        int r = -1;

        /* a copy of the image (no overlayfs) would go with launch_free */
        if (image && !n->overlay)
                return cm_err_set(err, ENOTSUP, "no warm sandbox of a stored image without overlayfs");

        if (prepare(n, &spec, L_WARM, false, NULL, &l, err) == 0 && start(n, &spec, &l, err) == 0) {
                *ret = (warm_box){.pid = l.pid,
                                  .pidfd = take_fd(&l.pidfd),
                                  .conn = take_fd(&l.ctl_pair[0]),
                                  .cg = l.st.cg};
                (void)snprintf(ret->hostname, sizeof ret->hostname, "%s", l.st.name);
                (void)snprintf(ret->image, sizeof ret->image, "%s", l.img.e.manifest ? l.img.e.manifest : "");
                l.st.cg = (cg_paths){0};
                r = 0;
        } else
                launch_discard(&l);
        launch_free(&l);
        return r;
}

void native_warm_destroy(native *n, warm_box *w) {
        if (w->pidfd >= 0) {
                (void)sys_pidfd_send_signal(w->pidfd, SIGKILL);
                (void)waitid((idtype_t)P_PIDFD, (id_t)w->pidfd, &(siginfo_t){0}, WEXITED);
        }
        closefd(&w->pidfd);
        closefd(&w->conn);
        (void)cg_destroy(&w->cg);
        cg_paths_free(&w->cg);
}

static void kill_warm(void *ctx) {
        (void)sys_pidfd_send_signal(((warm_box *)ctx)->pidfd, SIGKILL); /* pid 1: all goes */
}

/* Run to completion in a warm sandbox: limits into its cgroup, then the
 * command through its init.  As with a fresh sandbox, the whole sandbox
 * goes afterwards (the pool's thread tears it down). */
int native_warm_run(native *n, warm_box *w, const native_image *im, const cm_run_spec *spec, const cm_cancel *cancel,
                    cm_exec_result *ret, cm_err *err) {
        cg_limits lim = {spec->memory_bytes, spec->cpus, spec->pids};
        int sync_p[2] = {-1, -1}, out_p[2] = {-1, -1}, err_p[2] = {-1, -1};
        char **argv = im ? image_argv(&im->cfg, spec, true) : copy_argv(spec->argv, spec->argc);
        char **envp = make_env(spec, w->hostname, im ? im->cfg.env : NULL);
        const char *wd = im ? im->cfg.workdir : NULL;
        int r = -1;
        int32_t code;
        ssize_t k;

        if (!spec->workdir && !(wd && wd[0] == '/'))
                wd = NATIVE_WORKDIR;
        if (!argv) {
                r = 1; /* nothing to run: the usual way says why */
                goto out;
        }
        if (cg_set_limits(&w->cg, &lim) < 0) {
                r = cm_err_sys(err, errno, "cgroup: cannot set the limits");
                goto out;
        }
        if (pipe2(sync_p, O_CLOEXEC) < 0 || pipe2(out_p, O_CLOEXEC) < 0 || pipe2(err_p, O_CLOEXEC) < 0) {
                r = cm_err_sys(err, errno, "pipe");
                goto out;
        }
        r = init_ctl_send_spawn(w->conn, argv, envp, spec->workdir ? spec->workdir : wd,
                                (int[]){sync_p[1], out_p[1], err_p[1], -1},
                                n->cg.mode == CG_NONE ? spec->memory_bytes : 0, n->cg.mode == CG_NONE ? spec->pids : 0);
        if (r < 0) {
                r = r == -E2BIG ? 1 : cm_err_sys(err, -r, "cannot send the command to the sandbox's init");
                goto out;
        }
        closefd(&sync_p[1]);
        closefd(&out_p[1]);
        closefd(&err_p[1]);
        r = sb_wait_ready(sync_p[0], NULL, err); /* #1 */
        if (r < 0)
                goto out;
        {
                pump_io io = {.out_fd = out_p[0],
                              .err_fd = err_p[0],
                              .in_fd = -1,
                              .cap = spec->output_cap,
                              .timeout_ms = spec->timeout_ms,
                              .cancel = cancel};
                pump_target t = {w->conn, kill_warm, w};
                out_p[0] = err_p[0] = -1; /* the pump closes them */
                r = pump_run(&io, &t, ret, err);
        }
        if (r == 0) {
                do
                        k = recv(w->conn, &code, sizeof code, 0);
                while (k < 0 && errno == EINTR);
                ret->exit_code = k == (ssize_t)sizeof code ? code : 128 + SIGKILL;
        }
out:
        for (int i = 0; i < 2; i++) {
                closefd(&sync_p[i]);
                closefd(&out_p[i]);
                closefd(&err_p[i]);
        }
        for (char **p = envp; *p; p++)
                free(*p);
        free(envp);
        for (char **p = argv; p && *p; p++)
                free(*p);
        free(argv);
        return r;
}
