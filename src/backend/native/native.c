/* The native backend: the operations table, opening (what this machine
 * offers, found once), status, and small helpers the other files share. */
#include "backend/native/native.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "backend/native/linux.h"
#include "util/cleanup.h"
#include "util/json.h"

/* ---- helpers ------------------------------------------------------------ */

int read_file(const char *path, char *buf, size_t size) { return read_file_at(AT_FDCWD, path, buf, size); }

int read_file_at(int dir, const char *path, char *buf, size_t size) {
        int fd = openat(dir, path, O_RDONLY | O_CLOEXEC);
        ssize_t n = 0;
        size_t len = 0;
        if (fd < 0)
                return -1;
        while (len + 1 < size && (n = read(fd, buf + len, size - 1 - len)) > 0)
                len += (size_t)n;
        (void)close(fd);
        buf[len] = 0;
        /* a /proc file may refuse at read, not open (io: EACCES) */
        return n < 0 && len == 0 ? -1 : (int)len;
}

int write_file(const char *path, const char *text) { return write_file_flags(path, text, O_WRONLY, 0); }

int write_file_flags(const char *path, const char *text, int flags, unsigned mode) {
        int fd = open(path, flags | O_CLOEXEC, mode);
        int r;
        if (fd < 0)
                return -1;
        r = write_all(fd, text, strlen(text));
        if (r < 0) {
                int e = errno;
                (void)close(fd);
                errno = e;
                return -1;
        }
        return close(fd);
}

/* Field 22 of /proc/<pid>/stat (start time in clock ticks since boot),
 * which tells a process from a later one that reused its pid; 0 when it is
 * gone or a zombie. */
const char *proc_stat_fields(int proc, pid_t pid, char *buf, size_t size) {
        char path[32];
        const char *p;

        (void)snprintf(path, sizeof path, "%s%d/stat", proc == AT_FDCWD ? "/proc/" : "", (int)pid);
        /* "pid (comm) S ...": comm may hold ") ", so the last ')' */
        if (read_file_at(proc, path, buf, size) <= 0 || !(p = strrchr(buf, ')')) || p[1] != ' ')
                return NULL;
        return p + 2;
}

uint64_t proc_start_time(pid_t pid) {
        char buf[1024];
        const char *p = proc_stat_fields(AT_FDCWD, pid, buf, sizeof buf);
        unsigned long long start = 0;
        char state;

        if (!p)
                return 0;
        if (sscanf(p, "%c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu", &state,
                   &start) != 2 ||
            state == 'Z' || state == 'X')
                return 0;
        return start;
}

bool proc_alive(pid_t pid, uint64_t start) {
        uint64_t now = pid > 0 ? proc_start_time(pid) : 0;
        return now != 0 && now == start;
}

/* pid is pid 1 of a pid namespace below ours: the last of its NSpid ids
 * (ours first, its own namespace's last) is 1, and there are two or more. */
static bool pid_is_ns_init(pid_t pid) {
        char path[32], buf[2048];
        const char *line;
        int levels = 0;
        long last = 0;

        (void)snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
        if (read_file(path, buf, sizeof buf) <= 0 || !(line = strstr(buf, "\nNSpid:")))
                return false;
        for (char *p = (char *)line + 7; *p && *p != '\n';) {
                char *end;
                long v = strtol(p, &end, 10);
                if (end == p)
                        break;
                levels++, last = v, p = end;
        }
        return levels >= 2 && last == 1;
}

bool init_alive(const nstate *s) {
        /* A record is a file: were a sandbox ever to reach one, it could name
         * any host process with that process's start time.  Only a process
         * that is the init of a pid namespace below ours is taken as one. */
        return s->init_pid > 0 && proc_alive(s->init_pid, s->init_start) && pid_is_ns_init(s->init_pid);
}

/* ---- what the machine offers -------------------------------------------- */

/* The absolute path of prog in PATH (owned), or NULL. */
static char *find_in_path(const char *prog) {
        const char *path = getenv("PATH");
        cleanup_free char *dup = xstrdup(path ? path : "/usr/local/bin:/usr/bin:/bin");
        char *save = NULL;
        for (char *d = strtok_r(dup, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
                char *p = xasprintf("%s/%s", d, prog);
                if (d[0] == '/' && access(p, X_OK) == 0)
                        return p;
                free(p);
        }
        return NULL;
}

static bool in_path(const char *prog) {
        cleanup_free char *p = find_in_path(prog);
        return p != NULL;
}

/* network: true runs pasta when there is one, else slirp4netns;
 * CONTAINER_MCP_NATIVE_NETSTACK=pasta|slirp4netns|none picks (tests force
 * the fallback with it). */
static void net_detect(native *n) {
        const char *force = getenv("CONTAINER_MCP_NATIVE_NETSTACK");
        static const enum net_stack order[] = {NET_PASTA, NET_SLIRP};
        for (size_t i = 0; i < ARRAY_SIZE(order) && !n->net_path; i++) {
                const char *name = net_stack_name(order[i]);
                if (force && *force && strcmp(force, name) != 0)
                        continue;
                n->net_path = find_in_path(name);
                n->net_stack = n->net_path ? order[i] : NET_NONE;
        }
}

/* Can we make the namespaces at all?  A throwaway child tells, in about a
 * millisecond, with the real reason when the kernel says no.  Unless
 * overlays are turned off, the child also tries one (rootfs.c) and exits
 * with the errno of that mount (255: it could not tell). */
static int probe_namespaces(const native *n, bool try_overlay, int *ret_overlay, int *ret_errno) {
        int pidfd = -1, go[2];
        struct cm_clone_args a = {
                .flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET | CLONE_PIDFD |
                         CLONE_NEWUSER,
                .pidfd = (uint64_t)(uintptr_t)&pidfd,
                .exit_signal = SIGCHLD,
        };
        siginfo_t si = {0};
        pid_t pid;

        /* a root server maps the child's range as for a sandbox (#0) */
        if (pipe2(go, O_CLOEXEC) < 0) {
                *ret_errno = errno;
                return -1;
        }
        pid = sys_clone3(&a);

        if (pid < 0 && errno == ENOSYS) {
                pid = (pid_t)syscall(SYS_clone, (unsigned long)(a.flags & ~(uint64_t)CLONE_PIDFD) | SIGCHLD, NULL, NULL,
                                     NULL, 0);
                if (pid > 0)
                        (void)waitid(P_PID, (id_t)pid, &si, WEXITED);
        }
        if (pid == 0) {
                sb_err e;
                int r;
                if (!n->rootless && (userns_wait_maps(go[0], &e) < 0 || userns_become_root(&e) < 0))
                        _exit(255);
                r = try_overlay ? rootfs_probe_overlay(n->rootless ? n->stage_dir : NULL, n->rootless, n->uid, n->gid) : 0;
                _exit(r < 0 ? 255 : r > 254 ? 254 : r);
        }
        (void)close(go[0]);
        if (pid < 0) {
                *ret_errno = errno;
                (void)close(go[1]);
                return -1;
        }
        if (!n->rootless) {
                char um[64], gm[64];
                cm_err err = CM_ERR_INIT;
                userns_range_maps(n->map_uid, n->map_gid, um, gm);
                if (userns_write_maps(pid, um, gm, &err) == 0)
                        (void)!write(go[1], "m", 1);
        }
        (void)close(go[1]);
        if (pidfd >= 0) {
                (void)waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED);
                (void)close(pidfd);
        }
        *ret_overlay = si.si_code == CLD_EXITED ? si.si_status : 255;
        return 0;
}

static void set_unavailable(native *n, const char *reason, const char *fix) {
        n->ok = false;
        (void)snprintf(n->reason, sizeof n->reason, "%.500s", reason);
        (void)snprintf(n->fix, sizeof n->fix, "%.500s", fix);
}

/* A short stable name for the state dir, so cgroups of servers with
 * different state dirs never mix. */
static void state_tag(const char *dir, char ret[9]) {
        uint32_t h = 2166136261u;
        for (const char *p = dir; *p; p++)
                h = (h ^ (uint8_t)*p) * 16777619u;
        (void)snprintf(ret, 9, "%08x", h);
}

/* Root: the sandboxes' id range, a namespace holding its map (for idmapped
 * mounts), and whether this kernel and the state dir's file system take an
 * idmapped mount at all (shown by status). */
static int probe_userns_range(native *n, cm_err *err) {
        char um[64], gm[64];
        cleanup_close int tree = -1;
        struct cm_mount_attr a = {.attr_set = MOUNT_ATTR_IDMAP};

        if (userns_pick_range(n->uid, &n->map_uid, &n->map_gid, n->map_from, sizeof n->map_from, err) < 0)
                return -1;
        userns_range_maps(n->map_uid, n->map_gid, um, gm);
        if (userns_make(um, gm, &n->map_userns, err) < 0)
                return -1;
        tree = sys_open_tree(AT_FDCWD, n->stage_dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        a.userns_fd = (uint64_t)n->map_userns;
        n->no_idmap = getenv("CONTAINER_MCP_NATIVE_IDMAP") && strcmp(getenv("CONTAINER_MCP_NATIVE_IDMAP"), "0") == 0;
        n->idmap = !n->no_idmap && tree >= 0 && sys_mount_setattr(tree, "", AT_EMPTY_PATH, &a) == 0;
        return 0;
}

static void probe(native *n) {
        cm_err err = CM_ERR_INIT;
        int e = 0, overlay = 0;
        const char *no_overlay = getenv("CONTAINER_MCP_NATIVE_OVERLAY");
        char tag[9];

        if (state_dir_resolve(&n->state_dir, &err) < 0)
                return set_unavailable(n, err.msg, "set CONTAINER_MCP_STATE_DIR to a writable directory");
        n->stage_dir = xasprintf("%s/root", n->state_dir);
        if (mkdir(n->stage_dir, 0755) < 0 && errno != EEXIST)
                return set_unavailable(n, "cannot create the staging dir under the state dir",
                                       "make the state directory writable (CONTAINER_MCP_STATE_DIR)");
        if (!n->rootless && probe_userns_range(n, &err) < 0)
                return set_unavailable(n, err.msg,
                                       "give the sandboxes 65536 unused host ids from 65536 up "
                                       "(CONTAINER_MCP_USERNS_BASE, or root's /etc/subuid and /etc/subgid), and "
                                       "enable user namespaces (sysctl user.max_user_namespaces>0)");
        if (probe_namespaces(n, !no_overlay || strcmp(no_overlay, "0") != 0, &overlay, &e) < 0) {
                char why[256];
                (void)snprintf(why, sizeof why, "cannot create user namespaces: %s", strerror(e));
                return set_unavailable(
                        n, why,
                        n->rootless ? "enable unprivileged user namespaces (sysctl "
                                      "kernel.unprivileged_userns_clone=1, user.max_user_namespaces>0, and on "
                                      "Ubuntu kernel.apparmor_restrict_unprivileged_userns=0), or run as root, or "
                                      "use the docker backend"
                                    : "enable user namespaces (sysctl user.max_user_namespaces>0), which "
                                      "every sandbox needs so that its root is not the host's; or use the "
                                      "docker backend");
        }
        rootfs_detect(n, overlay);
        if (seccomp_build(&n->seccomp, false, &err) < 0 || seccomp_build(&n->seccomp_rw, true, &err) < 0)
                return set_unavailable(n, err.msg, "install libseccomp 2.5 or newer");
        n->etc_dir = xasprintf("%s/etc", n->state_dir);
        state_tag(n->state_dir, tag);
        cg_detect(&n->cg, getenv("CONTAINER_MCP_NATIVE_CGROUP"), tag);
        n->srv_tag = xasprintf("srv-%d-%llu", (int)n->self_pid, (unsigned long long)n->self_start);
        net_detect(n);
        (void)cg_ensure_dir(&n->cg, n->srv_tag);
        n->ok = true;
}

/* ---- status ------------------------------------------------------------- */

static const char *limits_text(const native *n) {
        if (n->cg.mode == CG_V2)
                return "cgroup v2: memory.max, cpu.max, pids.max";
        if (n->cg.mode == CG_V1)
                return "cgroup v1: memory, cpu (cfs quota), pids";
        if (n->rootless)
                return "rlimits: RLIMIT_AS for memory, RLIMIT_NPROC (per user namespace) for pids; no cpu limit";
        return "rlimits: RLIMIT_AS for memory only (real root ignores RLIMIT_NPROC); no pids or cpu limit";
}

static void native_status(cm_backend *b, cm_backend_status *ret) {
        native *n = (native *)b;
        struct utsname u = {0};
        char buf[64];
        cleanup_json json_t *d = NULL, *warn = json_array();
        cleanup_free char *text = NULL;

        memset(ret, 0, sizeof *ret);
        ret->available = n->ok;
        if (uname(&u) == 0)
                (void)snprintf(ret->version, sizeof ret->version, "linux %s", u.release);
        if (!n->ok) {
                (void)snprintf(ret->reason, sizeof ret->reason, "%s", n->reason);
                (void)snprintf(ret->fix, sizeof ret->fix, "%s", n->fix);
        }
        if (n->cg.mode == CG_NONE)
                (void)json_array_append_new(warn, json_string("no cgroup: limits fall back to rlimits; run as root "
                                                              "or in a delegated cgroup v2"));
        if (n->ok && !n->overlay) {
                cleanup_free char *w = xasprintf("no overlayfs (%s): a directory image is copied for each container, "
                                                 "up to %llu MiB",
                                                 n->overlay_why, (unsigned long long)(NATIVE_COPY_MAX_BYTES >> 20));
                (void)json_array_append_new(warn, json_string(w));
        }
        if (n->cg.slow_attach)
                (void)json_array_append_new(
                        warn, json_string("cgroup v1 without favordynmods: each sandbox waits ~10 ms to join its "
                                          "cgroup; use cgroup v2, or mount -o remount,favordynmods one "
                                          "hierarchy"));
        d = json_pack("{s:s, s:b, s:s, s:s, s:s, s:b, s:b, s:b, s:b, s:s, s:s, s:O}", "kernel", u.release, "rootless",
                      n->rootless, "user_namespaces", n->ok ? "yes" : "no",
                      "cgroup", cg_mode_name(n->cg.mode), "limits", limits_text(n), "seccomp", n->seccomp.len > 0,
                      "overlay", n->overlay, "slirp4netns", in_path("slirp4netns"), "pasta", in_path("pasta"),
                      "network", "off by default; network: true through the user-mode stack", "state_dir",
                      n->state_dir ? n->state_dir : "", "warnings", warn);
        if (d) {
                (void)json_object_set_new(d, "network_stack", json_string(net_stack_name(n->net_stack)));
                /* sandbox root is host uid_base: never the host's root */
                (void)json_object_set_new(
                        d, "userns_map",
                        json_pack("{s:I, s:I, s:I, s:s}", "uid_base", (json_int_t)n->map_uid, "gid_base",
                                  (json_int_t)n->map_gid, "size", (json_int_t)(n->rootless ? 1 : USERNS_SIZE), "from",
                                  n->rootless ? "the server's own ids (rootless)" : n->map_from));
                if (!n->rootless)
                        (void)json_object_set_new(d, "idmapped_mounts", json_boolean(n->idmap));
                if (read_file("/proc/sys/user/max_user_namespaces", buf, sizeof buf) > 0)
                        (void)json_object_set_new(d, "max_user_namespaces", json_integer(atoll(buf)));
                (void)json_object_set_new(d, "cgroup_detail", json_string(n->cg.reason));
                text = cm_json_dump(d);
                /* The details must fit: the long explanations go first. */
                if (strlen(text) >= sizeof ret->details) {
                        (void)json_object_del(d, "cgroup_detail");
                        free(text);
                        text = cm_json_dump(d);
                }
                if (strlen(text) >= sizeof ret->details) {
                        (void)json_object_del(d, "warnings");
                        free(text);
                        text = cm_json_dump(d);
                }
                (void)snprintf(ret->details, sizeof ret->details, "%s", text);
        }
}

/* ---- open / free -------------------------------------------------------- */

static void native_free(cm_backend *b) {
        native *n = (native *)b;
        if (!n)
                return;
        pool_stop(n);
        zygote_drop(n, NULL);
        (void)pthread_mutex_destroy(&n->zyg_lock);
        (void)pthread_mutex_destroy(&n->hold_lock);
        free(n->holds);
        if (n->lifeline_r >= 0)
                (void)close(n->lifeline_r);
        if (n->lifeline_w >= 0)
                (void)close(n->lifeline_w);
        hostetc_close(n);
        userns_free(n);
        /* Our srv- dir, then the state dir's own, unless another live server
         * (whose srv- dir is in it) or a container still uses it. */
        for (int c = 0; c < CG__N && n->srv_tag; c++)
                if (n->cg.base[c]) {
                        cleanup_free char *dir = xasprintf("%s/%s", n->cg.base[c], n->srv_tag);
                        (void)rmdir(dir);
                        (void)rmdir(n->cg.base[c]);
                }
        img_store_free(n->store);
        free(n->srv_tag);
        free(n->net_path);
        free(n->etc_dir);
        cg_system_free(&n->cg);
        free(n->seccomp.filter);
        free(n->seccomp_rw.filter);
        free(n->state_dir);
        free(n->stage_dir);
        (void)pthread_mutex_destroy(&n->lock);
        free(n);
}

static const cm_backend_ops native_ops = {
        .name = "native",
        .status = native_status,
        .run = native_run,
        .run_wait = native_run_wait,
        .exec = native_exec,
        .list = native_list,
        .find = native_find,
        .inspect = native_inspect,
        .isolation = native_isolation,
        .logs = native_logs,
        .stats = native_stats,
        .stop = native_stop,
        .remove = native_remove,
        .copy_in = native_copy_in,
        .copy_out = native_copy_out,
        .file_read = native_file_read,
        .file_write = native_file_write,
        .file_list = native_file_list,
        .file_delete = native_file_delete,
        .file_move = native_file_move,
        .image_list = native_image_list,
        .image_pull = native_image_pull,
        .image_remove = native_image_remove,
        .image_prune = native_image_prune,
        .image_build = native_image_build,
        .free = native_free,
};

cm_backend *cm_native_open(void) {
        native *n = xcalloc(1, sizeof *n);
        const char *orphans = getenv("CONTAINER_MCP_ORPHANS");
        int p[2];

        n->base.ops = &native_ops;
        n->base.priv = n;
        n->lifeline_r = n->lifeline_w = -1;
        n->etc_inotify = -1;
        n->uid = geteuid();
        n->gid = getegid();
        n->rootless = n->uid != 0;
        n->map_uid = n->uid; /* rootless: our own ids, one each */
        n->map_gid = n->gid;
        n->map_userns = -1;
        n->caps_keep = caps_default_keep();
        n->last_cap = caps_last_cap();
        n->self_pid = getpid();
        n->self_start = proc_start_time(n->self_pid);
        n->adopt_orphans = orphans && strcmp(orphans, "adopt") == 0;
        (void)pthread_mutex_init(&n->lock, NULL);
        (void)pthread_mutex_init(&n->zyg_lock, NULL);
        (void)pthread_mutex_init(&n->hold_lock, NULL);
        /* Each init holds the read end; only we hold the write end, so our
         * death, however it comes, is EOF there. */
        if (pipe2(p, O_CLOEXEC) == 0) {
                n->lifeline_r = p[0];
                n->lifeline_w = p[1];
        }
        probe(n);
        if (n->ok) {
                state_reap_orphans(n);
                rootfs_reap(n);
        }
        return &n->base;
}
