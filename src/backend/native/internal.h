/* What the files of the native runtime share.  Not for use outside
 * src/backend/native/.
 *
 * Two worlds meet here.  The parent (the server, maybe multi-threaded) plans
 * everything: paths, mount lists, argv, env, the seccomp program, cgroups.
 * The child of a raw clone() only carries the plan out: it must not allocate
 * or take libc locks, so the functions marked "child" use syscalls, stack
 * buffers and snprintf only. */
#ifndef CM_NATIVE_INTERNAL_H
#define CM_NATIVE_INTERNAL_H

#include <linux/filter.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend/backend.h"
#include "image/store.h"
#include "util/clock.h"
#include "util/err.h"

#define NATIVE_OUTPUT_CAP ((size_t)1 << 20)     /* per stream, when the spec says 0 */
#define NATIVE_TMPFS_BYTES ((int64_t)256 << 20) /* /tmp and /workspace, when 0 */
#define NATIVE_LOG_CAP ((size_t)4 << 20)        /* per-container log file */

/* The log's time index (<dir>/log.idx), for logs `since`: the init appends
 * one record each time output arrives in a new second, so the file stays
 * small, and bytes from `offset` on were written at or after `unix_ms`. */
typedef struct log_idx {
        uint64_t offset;
        int64_t unix_ms;
} log_idx;
#define NATIVE_WORKDIR "/workspace"
#define NATIVE_MAX_MOUNTS 32
#define NATIVE_COPY_MAX_BYTES ((uint64_t)2 << 30) /* a directory image copied, without overlayfs */
#define NATIVE_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* ---- errors from the child (sandbox.c) ---------------------------------- */

/* Set-up steps in the order DESIGN §4 gives; the child names the one that
 * failed. */
enum sb_step {
        SB_STEP_FDS,
        SB_STEP_CGROUP,
        SB_STEP_USERNS,
        SB_STEP_MOUNTNS,
        SB_STEP_OVERLAY, /* a directory image's overlay (rootfs.c: may fall back) */
        SB_STEP_ROOTFS,
        SB_STEP_MOUNTS,
        SB_STEP_PROC,
        SB_STEP_DEV,
        SB_STEP_PIVOT,
        SB_STEP_HOSTNAME,
        SB_STEP_NETWORK,
        SB_STEP_RLIMITS,
        SB_STEP_INIT,
        SB_STEP_SETNS,
        SB_STEP_WORKDIR,
        SB_STEP_CAPS,
        SB_STEP_NO_NEW_PRIVS,
        SB_STEP_SECCOMP,
        SB_STEP_EXEC,
        SB_STEP__MAX
};

/* The structured message a child sends its parent when a step fails.  It is
 * smaller than PIPE_BUF so one write() is atomic. */
typedef struct sb_err {
        int32_t step;
        int32_t code; /* errno */
        char what[248];
} sb_err;

/* child: fill e and return -code. */
__attribute__((format(printf, 4, 5))) int sb_fail(sb_err *e, int step, int code, const char *fmt, ...);

/* ---- mount plans (mount.c) ---------------------------------------------- */

enum mnt_kind {
        MNT_MKDIR,   /* dst, mode */
        MNT_SYMLINK, /* src = link text, dst */
        MNT_TOUCH,   /* dst: an empty file to bind a file on */
        MNT_WRITE,   /* dst, data = file contents */
        MNT_BIND,    /* src (host path) on dst, recursive */
        MNT_TMPFS,   /* dst, data = options, flags */
        MNT_PROC,    /* dst */
        MNT_SYSFS,   /* dst */
        MNT_DEVPTS,  /* dst, data = options */
        MNT_MKNOD,   /* dst, mode, flags = dev_t: a character device */
        MNT_MASK,    /* dst: hide a file (bind /dev/null) or dir (empty ro tmpfs) */
        MNT_RDONLY,  /* dst: make the mount at dst read-only (recursively) */
        MNT_OVERLAY, /* dst, data = options */
        MNT_CHDIR,   /* dst: the new root is here (an overlay on a dir) */
};

typedef struct mnt_op {
        enum mnt_kind kind;
        int step; /* the sb_step it runs in */
        char *src;
        char *dst; /* relative to the new root while it is being built */
        char *data;
        unsigned long flags;
        unsigned mode;
        bool optional; /* skip silently when the source is missing */
        bool keep_rw;  /* MNT_RDONLY: set the other bits only */
        bool check_id; /* MNT_BIND: src must still be this dev/ino */
        dev_t dev;
        ino_t ino;
        /* MNT_BIND, root server: the parent makes the bind (open_tree,
         * which walks host paths with the server's rights) and the child
         * attaches it (move_mount); idmapped as `idmap` says. */
        bool detach;
        enum mnt_idmap { IDMAP_NONE, IDMAP_RANGE, IDMAP_OWNER } idmap;
        int fd; /* the detached mount; -1: none (the child binds src) */
} mnt_op;

typedef struct mnt_plan {
        mnt_op *ops;
        size_t n, cap;
        int step;            /* given to the ops added next */
        bool lower_unmapped; /* a directory image could not be idmapped
                                (container.c copies it instead) */
} mnt_plan;

void mnt_plan_free(mnt_plan *p);

typedef struct rootfs_opts {
        const char *image;   /* "host" or an absolute rootfs directory */
        const char *copy;    /* a directory image: NULL for an overlay over
                                it, else where the parent copies it to */
        const char *stage;   /* where the scratch tmpfs is (absolute) */
        const char *etc_dir; /* the host image's /etc copy */
        const char *hostname;
        const char *resolv; /* /etc/resolv.conf's text (net_resolv_conf) */
        int64_t tmpfs_bytes;
        bool readonly_rootfs;
        bool userns;
        struct native *n; /* root server: binds made by the parent (detach),
                             idmapped; NULL: the child binds */
        const cm_mount *mounts;
        size_t n_mounts;
        char *const *layers; /* a stored image: its layer dirs, top first
                                (image is then its name) */
        const char *upper;   /* a build's RUN: a host dir whose u/ and w/ are
                                the overlay's upper and work dirs (kept) */
} rootfs_opts;

/* parent: the whole file system of a sandbox, as a list of steps. */
int mnt_plan_build(const rootfs_opts *o, mnt_plan *ret, cm_err *err);
/* parent, root server (o->n): make the plan's binds, detached and idmapped
 * (after the image's copy exists); p->lower_unmapped when the image cannot
 * be idmapped (copy it instead). */
int mnt_plan_detach(const rootfs_opts *o, mnt_plan *p, cm_err *err);
/* child: carry out the plan, cwd being the new root; e says which op failed. */
int mnt_plan_run(const mnt_plan *p, int step, sb_err *e);
/* child: make "/" private, put a tmpfs on stage (NULL: stacked on /, for a
 * root server's child, which cannot walk to the stage) and chdir into it. */
int mnt_enter_stage(const char *stage, int64_t size, sb_err *e);
/* child: pivot_root into the cwd and drop the old root. */
int mnt_pivot(bool readonly_root, sb_err *e);

/* ---- cgroups (cgroup.c) ------------------------------------------------- */

enum cg_mode { CG_NONE, CG_V1, CG_V2 };

enum cg_ctrl { CG_MEMORY, CG_CPU, CG_CPUACCT, CG_PIDS, CG_FREEZER, CG_BLKIO, CG__N };

/* What this machine offers, found once at open. */
typedef struct cg_system {
        enum cg_mode mode;
        char *base[CG__N]; /* v1: per controller, the dir containers go under;
                              v2: base[0] only.  NULL: not in use. */
        char reason[384];  /* why this mode (shown by status) */
        bool slow_attach;  /* v1 without favordynmods: joining a cgroup
                              waits for an RCU grace period */
} cg_system;

/* One container's (or one exec's) cgroup directories. */
typedef struct cg_paths {
        enum cg_mode mode;
        char *dir[CG__N]; /* v2: dir[0] only */
} cg_paths;

typedef struct cg_limits {
        int64_t memory_bytes;
        double cpus;
        int64_t pids;
} cg_limits;

void cg_detect(cg_system *s, const char *force, const char *tag);
const char *cg_ctrl_name(int c);
int cg_ctrl_from_name(const char *name);
void cg_system_free(cg_system *s);
const char *cg_mode_name(enum cg_mode m);
/* parent: base/rel for every controller (v2: with controllers enabled for
 * its children). */
int cg_ensure_dir(const cg_system *s, const char *rel);
/* parent: mkdir base/id and write limits. */
int cg_create(const cg_system *s, const char *id, const cg_limits *l, bool limits_only, cg_paths *ret, cm_err *err);
/* parent: a sub-cgroup (v2: every controller; v1: freezer or pids only) to
 * kill one exec's process tree as a whole. */
int cg_create_sub(const cg_paths *parent, const char *name, cg_paths *ret, cm_err *err);
/* parent: fds the child writes "0" into to join; *ret_dirfd: v2 dir for
 * CLONE_INTO_CGROUP (-1 for v1). */
int cg_open_join(const cg_paths *p, const cg_paths *sub, int *fds, size_t max, size_t *ret_n, int *ret_dirfd,
                 cm_err *err);
/* child */
int cg_join(const int *fds, size_t n);
void cg_kill(const cg_paths *p);
/* Remove the dirs if nothing runs in them any more (an exec's background
 * processes keep theirs until the container goes). */
void cg_release(const cg_paths *p);
/* Remove the dirs (kills what is left first). */
int cg_destroy(const cg_paths *p);
int cg_stats(const cg_paths *p, cm_stats *ret);
/* parent: (re)write the limits of an existing cgroup; 0 values are left. */
int cg_set_limits(const cg_paths *p, const cg_limits *l);
void cg_paths_free(cg_paths *p);
bool cg_paths_empty(const cg_paths *p);

/* ---- privileges (caps.c, seccomp.c) ------------------------------------- */

uint64_t caps_default_keep(void);
int caps_last_cap(void);
/* child: bounding set, ambient, then effective/permitted/inheritable. */
int caps_drop(uint64_t keep, int last_cap);

/* parent: build the filter once; the program stays owned by the backend.
 * no_setid: also refuse the setuid and setgid bits (sandboxes with a
 * read-write host mount). */
int seccomp_build(struct sock_fprog *ret, bool no_setid, cm_err *err);
/* child: install; the last thing before execve. */
int seccomp_apply(const struct sock_fprog *prog);

/* ---- user namespaces (ns_user.c) --------------------------------------- */

/* A root server's sandboxes: ids 0..USERNS_SIZE-1 on host [BASE, BASE +
 * USERNS_SIZE).  The default base lies past what Debian's useradd hands out
 * as subordinate ranges (100000 up, 65536 a user, to 600100000) and past
 * systemd-nspawn's container range (524288-1879048191): 0x70000000. */
#define USERNS_SIZE 65536u
#define USERNS_DEFAULT_BASE 1879048192u

/* parent: the range of a root server (see ns_user.c); *ret_from says where
 * it came from. */
int userns_pick_range(uid_t euid, uid_t *ret_uid, gid_t *ret_gid, char *ret_from, size_t from_size, cm_err *err);
/* "0 BASE 65536\n" for uid and gid. */
void userns_range_maps(uid_t ubase, gid_t gbase, char uid_map[64], char gid_map[64]);
/* parent: write a child's maps (#0). */
int userns_write_maps(pid_t pid, const char *uid_map, const char *gid_map, cm_err *err);
/* parent: a user namespace holding these maps and nothing else (for
 * mount_setattr's MOUNT_ATTR_IDMAP); *ret_fd its fd. */
int userns_make(const char *uid_map, const char *gid_map, int *ret_fd, cm_err *err);

/* ---- the backend ------------------------------------------------------- */

/* The user-mode network stack `network: true` runs (netstack.c). */
enum net_stack { NET_NONE, NET_PASTA, NET_SLIRP };

typedef struct native {
        cm_backend base;
        bool ok;          /* usable at all */
        enum net_stack net_stack; /* what network: true uses (netstack.c) */
        char *net_path;           /* its absolute path */
        char reason[512]; /* when !ok */
        char fix[512];
        char *state_dir;
        char *stage_dir; /* empty dir the new roots are mounted on */
        bool rootless;   /* euid != 0: a user namespace maps us to root */
        uid_t uid;
        gid_t gid;
        /* root: sandbox id 0 is host map_uid/map_gid, 65536 ids on (for a
         * rootless server, its own uid and gid, one id) */
        uid_t map_uid;
        gid_t map_gid;
        char map_from[96]; /* where the range came from */
        bool idmap;        /* root: idmapped mounts work here (probe) */
        bool no_idmap;     /* CONTAINER_MCP_NATIVE_IDMAP=0: never idmap
                              (tests force the fallbacks with it) */
        int map_userns;    /* root: a namespace with the sandboxes' map, for
                              idmapped mounts; -1 otherwise */
        struct {
                uid_t uid;
                gid_t gid;
                int fd;
        } owner_ns[16]; /* userns_for_owner's cache */
        size_t n_owner_ns;
        cg_system cg;
        struct sock_fprog seccomp;
        struct sock_fprog seccomp_rw; /* with a read-write host mount: no setuid/setgid */
        uint64_t caps_keep;
        int last_cap;
        int lifeline_r; /* each init polls this; EOF = the server died */
        int lifeline_w;
        bool adopt_orphans; /* CONTAINER_MCP_ORPHANS=adopt */
        pid_t self_pid;
        uint64_t self_start;
        pthread_mutex_t lock;  /* state records, within this process */
        bool overlay;          /* directory images get an overlay (rootfs.c) */
        char overlay_why[256]; /* when !overlay */
        char *etc_dir;         /* the host image's /etc (hostetc.c) */
        int etc_inotify;
        bool etc_ready;
        char *srv_tag;     /* srv-<pid>-<start>: cgroups of our run_waits */
        struct native_pool *pool;
        bool pool_tried; /* pool_start ran (under lock) */
        pthread_mutex_t hold_lock; /* the images our runs and builds hold (images.c) */
        struct native_hold *holds;
        size_t n_holds;
        pthread_mutex_t zyg_lock;  /* the warm processes (zygote.c) */
        struct zygote *zygotes;
        img_store *store; /* images.c: opened on first use, under lock */
} native;

/* ns_user.c: a namespace mapping host uid:gid to the sandbox's root (a
 * read-write mount's owner); a new fd, cached by the backend. */
int userns_for_owner(native *n, uid_t uid, gid_t gid, int *ret_fd, cm_err *err);
void userns_free(native *n);


/* rootfs.c: a directory image's root when there is no overlayfs, a copy
 * of the image in a directory of the container's own.
 *
 * child of the open-time probe: can this sandbox mount an overlay?  0, or
 * the mount's errno; -1 when the probe itself could not be set up. */
int rootfs_probe_overlay(const char *stage, bool self_map, uid_t uid, gid_t gid);
/* parent: decide from CONTAINER_MCP_NATIVE_OVERLAY and the probe's result. */
void rootfs_detect(native *n, int probe);
/* The errnos of an overlay mount that mean "not here": fall back to a copy. */
bool rootfs_overlay_unavailable(int code);
/* parent: where a run to completion's copy goes (<state>/scratch/<srv>/<id>). */
char *rootfs_scratch_path(const native *n, const char *id);
/* parent: copy the image to dst (a new directory), at most
 * NATIVE_COPY_MAX_BYTES; on failure nothing is left at dst.  why: why there
 * is no overlay, for the error. */
int rootfs_copy(const native *n, const char *image, const char *dst, const char *why, cm_err *err);
/* Remove a copy (and its parent dir, when a scratch dir, once empty). */
void rootfs_remove(const char *path);
/* The scratch copies of dead servers. */
void rootfs_reap(native *n);

/* images.c: the image store (src/image/) and stored images in runs. */
typedef struct native_image {
        img_entry e;
        img_config cfg;
        char **lowers; /* the layers' dirs, top first, NULL-terminated */
} native_image;

/* Not "host" and not a directory: a name (or id) in the store. */
bool native_image_is_stored(const char *image);
img_owner native_image_owner(const native *n);
int native_store(native *n, img_store **ret, cm_err *err);
int native_image_resolve(native *n, const char *ref, native_image *ret, cm_err *err);
/* A run to completion of a stored image holds it (a shared flock) until it
 * ends, so removal sees it in use: the fd for native_image_release, or -1. */
int native_image_hold(native *n, const char *manifest);
void native_image_release(native *n, const char *manifest, int fd);
void native_image_clear(native_image *im);
/* The image config's User ("name", "uid", "uid:gid", "name:group") as ids,
 * names looked up in the image's own /etc/passwd and /etc/group. */
int native_image_user(const native_image *im, uid_t *ret_uid, gid_t *ret_gid, cm_err *err);
/* The copy fallback: the layers applied into the new directory dst. */
int native_image_copy(native *n, const native_image *im, const char *dst, cm_err *err);
int native_image_list(cm_backend *b, cm_image_info **ret, size_t *ret_n, cm_err *err);
int native_image_pull(cm_backend *b, const cm_pull_spec *spec, const cm_cancel *cancel, cm_image_info *ret,
                      cm_err *err);
int native_image_remove(cm_backend *b, const char *ref, bool force, cm_err *err);
int native_image_prune(cm_backend *b, bool all, cm_prune_result *ret, cm_err *err);

/* hostetc.c: bring <state>/etc up to date with the host's; cheap when
 * nothing changed. */
int hostetc_sync(native *n, cm_err *err);
void hostetc_close(native *n);

/* ---- the sandbox (sandbox.c, init.c, exec.c) --------------------------- */

/* Everything a new sandbox's child needs, prepared by the parent. */
typedef struct sb_config {
        bool userns;
        uid_t outer_uid; /* rootless: our uid; root: the range's base */
        gid_t outer_gid;
        bool parent_maps; /* root: the parent writes a range map (#0) */
        int map_wait;     /* set by sb_spawn: the child's end of #0 */
        const char *hostname;
        const char *stage; /* NULL: a tmpfs stacked on / (mnt_enter_stage) */
        int64_t root_bytes;
        const mnt_plan *plan;
        bool readonly_rootfs;
        int cg_fds[CG__N];
        size_t n_cg_fds;
        int cg_dirfd;         /* v2: clone straight into it; -1 otherwise */
        bool rlimit_fallback; /* no cgroup: limits through rlimits */
        int64_t memory_bytes;
        int64_t pids;
        uint64_t caps_keep;
        int last_cap;
        const struct sock_fprog *seccomp;
        char *const *argv; /* NULL: the init waits for exec and stop */
        char *const *envp;
        const char *workdir;
        int err_fd;    /* sb_err messages; EOF = exec happened */
        int stdin_fd;  /* -1: /dev/null */
        int stdout_fd; /* -1 with log_fd: pumped to the log */
        int stderr_fd;
        int log_fd; /* -1: none */
        int log_idx_fd; /* log_idx records for `since`; -1: none */
        size_t log_cap;
        int exit_fd; /* the init writes the main exit code here */
        int lifeline_fd;
        int ctl_fd;   /* listening socket the init hands its
                         namespaces out on; -1: none */
        int ctl_conn; /* a warm sandbox: one spawn request comes
                         on this connected socket; -1: none */
        int net_sync; /* network: true: namespaces out, go back in
                         (#2, #3); -1: none */
        bool set_ids; /* a stored image's User, for its processes */
        bool nest_ids; /* rootless: that User through a nested user namespace */
        uid_t run_uid;
        gid_t run_gid;
} sb_config;

/* The init's control socket (SOCK_SEQPACKET at <dir>/ctl, in the state
 * dir, mode 0700: only the server's user reaches it).  A client sends one
 * request; its first byte says what:
 *   'n'  namespaces: the reply carries fds of the init's namespaces
 *        (user, mnt, uts, ipc, net, pid, cgroup, in that order), for setns.
 *   'r'  root: the reply carries an O_PATH fd of the sandbox's "/".
 *   'i'  io: the reply is two uint64, the block I/O bytes read and written
 *        by the init and all it reaped (getrusage): rootless, nobody may
 *        read its /proc/1/io, the init is not dumpable.
 *   's'  spawn: an init_spawn_req, then the strings (workdir, argv, env,
 *        each NUL-terminated), with fds [sync, stdout, stderr(, stdin)].
 *        The init vforks the command (so it is born in the sandbox's
 *        namespaces and cgroups, with its privileges and filter: nothing to
 *        join), reports a failed exec on sync like any set-up step, and
 *        sends the exit code as an int32 when the command ends.  A byte 'k'
 *        from the client, or the client hanging up first, kills the
 *        command's whole process tree (tree.c), what left its session
 *        included. */
#define INIT_N_NS 7
#define INIT_SPAWN_MAX (96 * 1024) /* bytes of strings */
#define INIT_SPAWN_ARGS 4096       /* argv plus env entries */
#define INIT_MAX_EXECS 32          /* at once, per container */

typedef struct init_spawn_req {
        char kind; /* 's' */
        uint8_t has_stdin;
        uint16_t reserved;
        uint32_t argc, envc;
        uint32_t len;          /* bytes of strings that follow */
        int64_t rlimit_memory; /* without a cgroup; 0: the sandbox's */
        int64_t rlimit_pids;
} init_spawn_req;

/* parent: the namespace fds of a running container's init. */
int init_ctl_fetch(const char *dir, int ret[INIT_N_NS], cm_err *err);
/* parent: an O_PATH fd of the container's root, from its init. */
int init_ctl_root(const char *dir, int *ret_fd, cm_err *err);
/* The nested user namespace of a sandbox with nest_ids ('u'). */
int init_ctl_nested(const char *dir, int *ret_fd, cm_err *err);
/* parent: the block I/O of the init and all it reaped; 0 or -errno. */
int init_ctl_io(const char *dir, uint64_t *ret_read, uint64_t *ret_write);
/* parent: a listening socket at <dir>/ctl for the init. */
int init_ctl_listen(const char *dir, cm_err *err);
/* parent: ask the init to spawn; fds[] = sync, stdout, stderr, stdin (-1:
 * none).  Returns the connection (the exit code arrives on it), -E2BIG when
 * the request is too large for the init (use setns instead), or another
 * negative errno with err set. */
int init_ctl_spawn(const char *dir, char *const *argv, char *const *envp, const char *workdir, const int fds[4],
                   cm_err *err);
/* The request itself, on a connected socket: 0, -E2BIG or -errno. */
int init_ctl_send_spawn(int conn, char *const *argv, char *const *envp, const char *workdir, const int fds[4],
                        int64_t rlimit_memory, int64_t rlimit_pids);

/* parent: clone the sandbox; returns its pid (pid 1 inside). */
int sb_spawn(const sb_config *c, int *ret_pidfd, cm_err *err);
/* parent: wait for sync point #1 (set-up done and exec, or an error);
 * *ret_step (may be NULL): the step that failed, -1 if none did. */
int sb_wait_ready(int err_fd, int *ret_step, cm_err *err);

/* The last steps of every process that runs user code: rlimits (without a
 * cgroup), workdir, caps, no_new_privs, seccomp (unless inherited: seccomp
 * NULL), execve (PATH searched in envp). child. */
typedef struct sb_proc {
        char *const *argv;
        char *const *envp;
        const char *workdir;
        uint64_t caps_keep;
        int last_cap;
        const struct sock_fprog *seccomp;
        int64_t rlimit_memory; /* without a cgroup: RLIMIT_AS, 0: none */
        int64_t rlimit_pids;   /* without a cgroup: RLIMIT_NPROC, 0: none */
        bool set_ids;          /* a stored image's User: become uid:gid */
        uid_t uid;
        gid_t gid;
} sb_proc;
int sb_exec_proc(const sb_proc *p, sb_err *e);
#define SB_MAX_FDS 96
void sb_close_fds_except(const int *keep, size_t n);
void sb_report(int fd, const sb_err *e);

/* init.c: pid 1 of the sandbox: reaps, pumps the main process's output
 * into the log, forwards stop signals, exits with the main process.  Closes
 * err_fd (sync point #1).  Never returns. */
__attribute__((noreturn)) void init_run(const sb_config *c, pid_t main_pid, int log_r);
/* child: hide the server's command line and environment in our copy of
 * its memory. */
void init_scrub(void);
/* The signals the init takes through its signalfd; blocked before the main
 * process is forked so none is lost. */
void init_signal_set(sigset_t *set);
int sb_install_stdio(int in, int out, int err);
void sb_reset_signals(void);

/* tree.c: SIGKILL the whole tree of `cmd`, a child of ours made a child
 * subreaper before its exec; `proc`: a /proc dirfd that shows it by that
 * pid.  Child-safe, async-signal-safe. */
void tree_kill(int proc, pid_t cmd);
/* tree.c: fn(child) for each child of each thread of pid, as the /proc
 * under the dirfd `proc` lists them.  Child-safe, async-signal-safe. */
void proc_each_child(int proc, pid_t pid, void (*fn)(pid_t child, void *ctx), void *ctx);

/* ns_user.c, ns_net.c (child) */
int userns_map(uid_t outer_uid, gid_t outer_gid, sb_err *e);
/* child, root server: #0 wait for the parent's maps; become the
 * namespace's root (host BASE) with no host supplementary group. */
int userns_wait_maps(int fd, sb_err *e);
int userns_become_root(sb_err *e);
/* A rootless sandbox's init, after its mounts: into a user namespace nested
 * in the sandbox's that maps uid:gid onto the sandbox's one id, keeping the
 * outer one open in sb_outer_userns (for execs that join from outside). */
int userns_nest(uid_t uid, gid_t gid, sb_err *e);
extern int sb_outer_userns;
int net_lo_up(sb_err *e);

/* ---- output capture (pump.c) ------------------------------------------- */

typedef struct pump_target {
        int pidfd; /* the process whose exit ends the run */
        void (*kill)(void *ctx);
        void *ctx;
        /* Optional: called once when the run has not ended grace_ms after
         * kill (a killer inside the sandbox, which the sandbox's code can
         * stop, gets a backstop outside it). */
        void (*kill_hard)(void *ctx);
        int64_t grace_ms;
} pump_target;

typedef struct pump_io {
        int out_fd, err_fd; /* read ends, owned by the pump (closed) */
        int in_fd;          /* write end for stdin_data, -1: none */
        const char *in_data;
        size_t in_len;
        size_t cap;
        int64_t timeout_ms;
        const cm_cancel *cancel;
        const cm_exec_watch *watch; /* NULL: keep the output in the result */
} pump_io;

/* Collect output until the process exits and the pipes close, killing it on
 * timeout or cancel.  Fills ret (except exit_code and duration). */
int pump_run(const pump_io *io, const pump_target *t, cm_exec_result *ret, cm_err *err);

/* ---- network: a user-mode stack (netstack.c) ---------------------------
 *
 * `network: true` connects the sandbox's own network namespace to the
 * outside through pasta (preferred) or slirp4netns, run by us as a helper
 * process; published ports are forwarded from 127.0.0.1 on the host. */

#define NET_MAX_PORTS 32

typedef struct net_port {
        uint16_t host_port; /* on 127.0.0.1, chosen by us when asked for 0 */
        uint16_t container_port;
        bool udp;
} net_port;

/* A process checked by start time, so a reused pid is never killed. */
typedef struct net_proc {
        pid_t pid;
        uint64_t start;
} net_proc;

typedef struct net_info {
        enum net_stack stack; /* NET_NONE: no network */
        net_proc helper;      /* pasta or slirp4netns */
        net_proc watcher;     /* kills the helper when the init exits */
        net_port ports[NET_MAX_PORTS];
        size_t n_ports;
} net_info;

const char *net_stack_name(enum net_stack s);
/* parent: the text of a sandbox's /etc/resolv.conf (malloc'd). */
char *net_resolv_conf(bool network);
/* parent: validate network and ports, and pick the host ports asked as 0. */
int net_plan(const native *n, const cm_run_spec *spec, net_info *ret, cm_err *err);
/* parent: sync points #2 and #3 with the child (sandbox.c): take its
 * namespaces from sync_fd, start the helper (watched by a process that
 * kills it when init_pidfd's process exits), forward the ports, and let
 * the child go on.  tag names the API socket (slirp4netns). */
int net_start(native *n, int sync_fd, int init_pidfd, const char *tag, net_info *info, cm_err *err);
/* parent: kill the helper and its watcher (any path: run end, stop,
 * remove, orphan reaping), reaping them if they are our children. */
void net_stop(const net_info *info);
/* child: #2 send our user and network namespaces on sync_fd, #3 wait for
 * the parent's go. */
int net_handoff(int sync_fd, bool userns, sb_err *e);

/* ---- state (state.c) --------------------------------------------------- */

typedef struct nstate {
        char *id;
        char *name;
        char *image;
        char *image_id; /* a stored image's manifest digest; NULL: none */
        char **exposed; /* its config's ExposedPorts ("8080/tcp"), shown by inspect; NULL: none */
        bool set_ids;   /* its config's User, in the sandbox's ids */
        bool nest_ids;  /* rootless: that User through a nested user namespace (ns_user.c) */
        uid_t run_uid;
        gid_t run_gid;
        char *dir; /* <state>/containers/<id> */
        int64_t created_at;
        pid_t init_pid;
        uint64_t init_start;
        pid_t server_pid;
        uint64_t server_start;
        bool userns;
        bool ephemeral; /* run_wait: removed when done */
        bool network;
        bool readonly_rootfs;
        cg_paths cg;
        cg_limits limits;
        int64_t tmpfs_bytes;
        net_info net;
        char **argv; /* NULL-terminated; NULL: idle init */
        char **env;  /* NULL-terminated KEY=VALUE, the container's */
        char *workdir;
        cm_kv *labels;
        size_t n_labels;
        /* The policy mounts run_container asked for (dinspect reports them,
         * each with what the kernel says of ro/rw). */
        struct nmount {
                char *source;
                char *target;
                bool readonly;
        } *mounts;
        size_t n_mounts;
        /* derived on load */
        char state[16]; /* created | running | exited | dead */
        int exit_code;
} nstate;

int state_dir_resolve(char **ret, cm_err *err);
int state_save(const nstate *s, cm_err *err);
int state_load(const native *n, const char *id_or_name, nstate *ret, cm_err *err);
int state_list(const native *n, nstate **ret, size_t *ret_n, cm_err *err);
void state_free(nstate *s);
void state_delete(const nstate *s);
char *state_to_json(const nstate *s);
int state_name_taken(const native *n, const char *name);
void state_kill_init(const nstate *s);
/* The record's init is alive (start time) and is the init of a pid
 * namespace below ours: never a host process a forged record names. */
bool init_alive(const nstate *s);
/* Reap (or adopt) sandboxes whose server died. */
void state_reap_orphans(native *n);

/* ---- the operations (container.c, exec.c) ------------------------------ */

int native_run(cm_backend *b, const cm_run_spec *spec, char **ret_id, cm_err *err);
int native_run_wait(cm_backend *b, const cm_run_spec *spec, const cm_cancel *cancel, cm_exec_result *ret, cm_err *err);
/* A build's RUN (build.c): spec->argv in a sandbox on im's layers (im is
 * moved in; its manifest is any non-NULL text, its cfg gives env, workdir
 * and user), the changes in upper/u (rootfs_opts.upper), no pool. */
int native_build_run(native *n, const cm_run_spec *spec, native_image *im, const char *upper, const cm_cancel *cancel,
                     cm_exec_result *ret, cm_err *err);
/* What list_images and the rest report of a store entry. */
void native_image_info(const img_entry *e, bool used, cm_image_info *ret);
int native_image_build(cm_backend *b, const cm_build_spec *spec, const cm_cancel *cancel, cm_image_info *ret,
                       cm_err *err);
int native_exec(cm_backend *b, const char *id, const cm_exec_spec *spec, const cm_cancel *cancel, cm_exec_result *ret,
                cm_err *err);
int native_list(cm_backend *b, bool all, cm_container_info **ret, size_t *ret_n, cm_err *err);
int native_find(cm_backend *b, const char *ref, cm_container_info *ret, cm_err *err);
int native_inspect(cm_backend *b, const char *id, char **ret_json, cm_err *err);
/* isolation.c: dinspect's view, from the kernel for a running sandbox. */
int native_isolation(cm_backend *b, const char *id, char **ret_json, cm_err *err);
int native_logs(cm_backend *b, const char *id, size_t tail, int64_t since_ms, char **ret, size_t *ret_len,
                cm_err *err);
int native_stats(cm_backend *b, const char *id, cm_stats *ret, cm_err *err);
int native_stop(cm_backend *b, const char *id, int grace_sec, cm_err *err);
int native_remove(cm_backend *b, const char *id, bool force, cm_err *err);

/* copy.c */
int native_copy_in(cm_backend *b, const char *id, const cm_host_path *src, const char *container_path,
                   cm_copy_stats *ret, cm_err *err);
int native_copy_out(cm_backend *b, const char *id, const char *container_path, const cm_host_path *dst,
                    cm_copy_stats *ret, cm_err *err);
/* native_root_fd of a running container by id; `tool` names the caller in
 * the error when it is not running. */
int native_open_root(native *n, const char *id, const char *tool, int *ret_fd, cm_err *err);
/* Root server: this thread's fs ids become (uid, gid) (per thread, raw
 * syscalls); `dac` keeps CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH.
 * (0, 0, true) restores the server's. */
int native_fs_ids(uid_t uid, gid_t gid, bool dac);

/* files.c: the file tools' operations, in the container's root. */
int native_file_read(cm_backend *b, const char *id, const char *path, uint64_t max_bytes, cm_file_data *ret,
                     cm_err *err);
int native_file_write(cm_backend *b, const char *id, const char *path, const char *data, size_t len, cm_err *err);
int native_file_list(cm_backend *b, const char *id, const char *path, const cm_file_query *q, cm_file_entry **ret,
                     size_t *ret_n, cm_err *err);
int native_file_delete(cm_backend *b, const char *id, const char *path, cm_err *err);
int native_file_move(cm_backend *b, const char *id, const char *src, const char *dst, cm_err *err);

/* An O_PATH fd of a running container's root directory: through
 * /proc/<init>/root when we may (root), else from the init itself (its
 * control socket), as a server without CAP_SYS_PTRACE may not look into a
 * non-dumpable process's /proc. */
int native_root_fd(const nstate *s, int *ret_fd, cm_err *err);

/* The container's env (base, KEY=VALUE) with env laid over it. */
char **native_env_merge(char *const *base, const cm_kv *env, size_t n_env);
/* 16 hex digits from getrandom. */
void native_random_id(char ret[17]);
/* A pidfd for a container's init, checked against its start time; -1 when
 * it is not running. */
int native_init_pidfd(const nstate *s);

/* ---- warm sandboxes (pool.c, container.c) -------------------------------
 *
 * A run to completion is the common call.  A sandbox started ahead of need
 * (by the pool's thread, off the caller's path) only waits for its command:
 * the caller pays for writing limits and one request to its init, not for
 * namespaces, mounts or (on cgroup v1, a grace period each) cgroup joins. */

typedef struct warm_box {
        pid_t pid;
        int pidfd;
        int conn; /* our end of the init's socketpair */
        cg_paths cg;
        char hostname[32];
        char image[72]; /* a stored image's manifest digest; "": the host image */
} warm_box;

#define POOL_MAX 4

typedef struct native_pool {
        pthread_t thread;
        bool running;
        bool stop;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        size_t target; /* warm sandboxes to keep ready, of the host image and of `image` */
        char image[72];      /* the stored image (manifest digest) last run to completion; "": none */
        unsigned generation; /* bumped when images are removed: older boxes are not used */
        bool primed;         /* the run that started the pool has its sandbox: boxes may be made */
        warm_box ready[POOL_MAX * 2];
        unsigned ready_gen[POOL_MAX * 2];
        size_t n_ready;
        warm_box spent[POOL_MAX * 4]; /* to tear down */
        size_t n_spent;
} native_pool;

void pool_stop(native *n);
/* 1: nothing warm fits (start a sandbox the usual way); 0 or -1 as
 * run_wait. */
int pool_run(native *n, const cm_run_spec *spec, const native_image *im, const cm_cancel *cancel, cm_exec_result *ret,
             cm_err *err);
/* The run to completion that found no warm sandbox has started its own:
 * the pool's first boxes are made after that, not while it starts (on a
 * fresh state dir the first box also copies the host's /etc, which would
 * slow the server's first run several times over). */
void pool_primed(native *n);
/* Images were removed: warm sandboxes of stored images are not used again
 * (their layers may be gone) and are torn down. */
void pool_forget_images(native *n);
/* A warm sandbox of the host image (image NULL) or of a stored image (its
 * manifest digest). */
int native_warm_create(native *n, const char *image, warm_box *ret, cm_err *err);
/* im: the stored image the box was made for, resolved for this run (its
 * config's Entrypoint, Cmd, Env and WorkingDir apply); NULL for host. */
int native_warm_run(native *n, warm_box *w, const native_image *im, const cm_run_spec *spec, const cm_cancel *cancel,
                    cm_exec_result *ret, cm_err *err);
void native_warm_destroy(native *n, warm_box *w);

/* procstat.c: stats summed over the sandbox's processes (its init's
 * descendants), added to ret; io only, or everything.  -ESRCH when the
 * init is gone. */
int proc_stats(const nstate *s, bool io_only, cm_stats *ret);

/* ---- small shared helpers (native.c) ----------------------------------- */

uint64_t proc_start_time(pid_t pid);
/* /proc/<pid>/stat read into buf, from the field after the command name
 * (the state letter) on; NULL when gone.  proc: a /proc dirfd, or AT_FDCWD
 * for our own /proc.  child-safe. */
const char *proc_stat_fields(int proc, pid_t pid, char *buf, size_t size);
bool proc_alive(pid_t pid, uint64_t start);
/* The file (up to size - 1 bytes, NUL-terminated); its length or -1.
 * child-safe. */
int read_file(const char *path, char *buf, size_t size);
int read_file_at(int dir, const char *path, char *buf, size_t size);
int write_file(const char *path, const char *text);
/* child-safe (no allocation): open with flags, write all of text, close. */
int write_file_flags(const char *path, const char *text, int flags, unsigned mode);

/* ---- warm processes (zygote.c) ---------------------------------------- */

typedef struct zygote zygote;
/* Serve an exec from the container's warm process of spec->warm (started
 * on first use); 1 when it cannot (run argv as usual), else exec's result. */
int zygote_exec(native *n, const nstate *s, const cm_exec_spec *spec, char **envp, const cm_cancel *cancel,
                cm_exec_result *ret, cm_err *err);
/* The container is gone (id NULL: every container, at free). */
void zygote_drop(native *n, const char *id);

#endif
