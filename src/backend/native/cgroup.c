/* cgroups: limits, stats and killing a process tree as a whole.
 *
 * cgroup v2 when its controllers are usable, else the v1 hierarchies (this
 * is still common: hybrid systems bind memory, cpu and pids to v1 and leave
 * an empty v2 mount), else none, in which case the sandbox falls back to
 * rlimits and says so in status().
 *
 * Where containers go (<tag> names the state dir, so servers with different
 * state dirs never reap each other's cgroups):
 *   v2 as root       <v2 mount>/container-mcp/<tag>/<id>
 *   v2 rootless      <own cgroup>/container-mcp/<tag>/<id>, the server moved to
 *                    <own>/cm-supervisor (a delegated cgroup, e.g. systemd-run
 *                    --user -p Delegate=yes)
 *   v1               <ctrl mount><own path>/container-mcp/<tag>/<id>, per
 *                    controller, nested under the server's own cgroup so its
 *                    limits hold */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "backend/native/linux.h"
#include "util/cleanup.h"
#include "util/clock.h"

static const char *const ctrl_names[CG__N] = {"memory", "cpu", "cpuacct", "pids", "freezer", "blkio"};

const char *cg_mode_name(enum cg_mode m) { return m == CG_V2 ? "v2" : m == CG_V1 ? "v1" : "none"; }

const char *cg_ctrl_name(int c) { return c >= 0 && c < CG__N ? ctrl_names[c] : "?"; }

int cg_ctrl_from_name(const char *name) {
        for (int c = 0; c < CG__N; c++)
                if (strcmp(ctrl_names[c], name) == 0)
                        return c;
        return -1;
}

/* ---- small file helpers ------------------------------------------------- */

static int cg_write(const char *dir, const char *file, const char *text) {
        cleanup_free char *path = xasprintf("%s/%s", dir, file);
        return write_file(path, text);
}

static int cg_read(const char *dir, const char *file, char *buf, size_t size) {
        cleanup_free char *path = xasprintf("%s/%s", dir, file);
        return read_file(path, buf, size);
}

static bool word_in(const char *list, const char *word) {
        size_t n = strlen(word);
        for (const char *p = list; (p = strstr(p, word)); p += n)
                if ((p == list || p[-1] == ' ' || p[-1] == ',' || p[-1] == '\n') &&
                    (p[n] == 0 || p[n] == ' ' || p[n] == ',' || p[n] == '\n'))
                        return true;
        return false;
}

/* ---- detection ---------------------------------------------------------- */

typedef struct cg_mounts {
        bool favordynmods; /* some hierarchy has it: cgroup.procs writes are fast */
        char v2[4096];
        char v2_root[4096];
        char v1[CG__N][4096];
        char v1_root[CG__N][4096];
} cg_mounts;

static void find_mounts(cg_mounts *m) {
        FILE *f = fopen("/proc/self/mountinfo", "re");
        char *line = NULL;
        size_t cap = 0;

        if (!f)
                return;
        while (getline(&line, &cap, f) > 0) {
                char root[4096], point[4096], type[64], opts[1024];
                char *dash = strstr(line, " - ");
                if (!dash || sscanf(line, "%*s %*s %*s %4095s %4095s", root, point) != 2 ||
                    sscanf(dash + 3, "%63s %*s %1023s", type, opts) != 2)
                        continue;
                if ((strcmp(type, "cgroup") == 0 || strcmp(type, "cgroup2") == 0) && word_in(opts, "favordynmods"))
                        m->favordynmods = true;
                if (strcmp(type, "cgroup2") == 0 && !m->v2[0]) {
                        (void)snprintf(m->v2, sizeof m->v2, "%s", point);
                        (void)snprintf(m->v2_root, sizeof m->v2_root, "%s", root);
                } else if (strcmp(type, "cgroup") == 0) {
                        for (int c = 0; c < CG__N; c++)
                                if (word_in(opts, ctrl_names[c]) && !m->v1[c][0]) {
                                        (void)snprintf(m->v1[c], sizeof m->v1[c], "%s", point);
                                        (void)snprintf(m->v1_root[c], sizeof m->v1_root[c], "%s", root);
                                }
                }
        }
        free(line);
        (void)fclose(f);
}

/* Our own cgroup in the hierarchy holding ctrl (NULL: the v2 one), as a path
 * under the hierarchy's mount point. */
static int own_cgroup(const char *ctrl, const char *mount_root, char *ret, size_t size) {
        FILE *f = fopen("/proc/self/cgroup", "re");
        char *line = NULL;
        size_t cap = 0;
        int r = -ENOENT;

        if (!f)
                return -errno;
        while (getline(&line, &cap, f) > 0) {
                char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
                if (!c2)
                        continue;
                *c2 = 0;
                c2[strcspn(c2 + 1, "\n") + 1] = 0;
                if (ctrl ? !word_in(c1 + 1, ctrl) : c1[1] != 0)
                        continue;
                const char *path = c2 + 1;
                size_t rl = strlen(mount_root);
                /* Inside a cgroup namespace the mount root may be a prefix. */
                if (strcmp(mount_root, "/") != 0 && strncmp(path, mount_root, rl) == 0)
                        path += rl;
                (void)snprintf(ret, size, "%s", strcmp(path, "/") == 0 ? "" : path);
                r = 0;
                break;
        }
        free(line);
        (void)fclose(f);
        return r;
}

static void enable_controllers(const char *dir) {
        static const char *const want[] = {"+memory", "+pids", "+cpu", "+io"};
        for (size_t i = 0; i < ARRAY_SIZE(want); i++)
                (void)cg_write(dir, "cgroup.subtree_control", want[i]);
}

static bool v2_has(const char *dir, const char *ctrl) {
        char buf[512];
        return cg_read(dir, "cgroup.controllers", buf, sizeof buf) >= 0 && word_in(buf, ctrl);
}

/* <top>/container-mcp/<tag>, controllers enabled on the way down: a tree of
 * our own, so a server reaping its state dir's leftovers (and the srv- dirs
 * of dead servers under sibling tags) never touches anyone else's cgroups. */
static int make_tree(cg_system *s, const char *top, const char *tag) {
        char dir[8192], leaf[8300];

        (void)snprintf(dir, sizeof dir, "%s/container-mcp", top);
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return snprintf(s->reason, sizeof s->reason, "cannot create %.200s: %s", dir, strerror(errno)), -1;
        enable_controllers(dir);
        (void)snprintf(leaf, sizeof leaf, "%s/%s", dir, tag);
        if (mkdir(leaf, 0755) < 0 && errno != EEXIST)
                return snprintf(s->reason, sizeof s->reason, "cannot create %.200s: %s", leaf, strerror(errno)), -1;
        enable_controllers(leaf);
        if (!v2_has(leaf, "memory") || !v2_has(leaf, "pids"))
                return snprintf(s->reason, sizeof s->reason, "cannot enable memory/pids in %.200s", leaf), -1;
        s->base[0] = xstrdup(leaf);
        return 0;
}

static int detect_v2(cg_system *s, const cg_mounts *m, const char *tag) {
        char own[4096], dir[8192], leaf[8300], pid[32];
        size_t len;

        if (!m->v2[0])
                return snprintf(s->reason, sizeof s->reason, "no cgroup v2 mount"), -1;
        if (geteuid() == 0) {
                if (!v2_has(m->v2, "memory") || !v2_has(m->v2, "pids"))
                        return snprintf(s->reason, sizeof s->reason,
                                        "cgroup v2 at %.200s has no memory/pids controllers (bound to v1)", m->v2),
                               -1;
                enable_controllers(m->v2);
                return make_tree(s, m->v2, tag);
        }
        /* Rootless: only a cgroup delegated to us, with us moved to a leaf so
         * its controllers can be enabled for siblings. */
        if (own_cgroup(NULL, m->v2_root, own, sizeof own) < 0)
                return snprintf(s->reason, sizeof s->reason, "own cgroup v2 path unknown"), -1;
        (void)snprintf(dir, sizeof dir, "%s%s", m->v2, own);
        /* Moved there by an earlier server of this process, or of the one
         * that forked us: the delegated cgroup is the parent. */
        len = strlen(dir);
        if (len > 14 && strcmp(dir + len - 14, "/cm-supervisor") == 0)
                dir[len - 14] = 0;
        if (!v2_has(dir, "memory") || !v2_has(dir, "pids") || access(dir, W_OK) < 0 ||
            cg_read(dir, "cgroup.subtree_control", own, sizeof own) < 0)
                return snprintf(s->reason, sizeof s->reason,
                                "cgroup %.200s is not delegated to this user (start the server under "
                                "systemd-run --user --scope -p Delegate=yes)",
                                dir),
                       -1;
        if (!word_in(own, "memory") || !word_in(own, "pids")) {
                (void)snprintf(leaf, sizeof leaf, "%s/cm-supervisor", dir);
                (void)snprintf(pid, sizeof pid, "%d", (int)getpid());
                if ((mkdir(leaf, 0755) < 0 && errno != EEXIST) || cg_write(leaf, "cgroup.procs", pid) < 0)
                        return snprintf(s->reason, sizeof s->reason, "cannot move the server into %.200s: %s", leaf,
                                        strerror(errno)),
                               -1;
                enable_controllers(dir);
                if (cg_read(dir, "cgroup.subtree_control", own, sizeof own) < 0 || !word_in(own, "memory") ||
                    !word_in(own, "pids"))
                        return snprintf(s->reason, sizeof s->reason,
                                        "cannot enable memory/pids in %.200s (other processes share it)", dir),
                               -1;
        }
        return make_tree(s, dir, tag);
}

static int detect_v1(cg_system *s, const cg_mounts *m, const char *tag) {
        char own[4096], dir[8300], sub[8400], used[256] = "";
        size_t n = 0;

        for (int c = 0; c < CG__N; c++) {
                /* blkio: every hierarchy joined costs each sandbox a
                 * cgroup.procs write, and tmpfs work never reaches a disk */
                if (c == CG_BLKIO || !m->v1[c][0] || own_cgroup(ctrl_names[c], m->v1_root[c], own, sizeof own) < 0)
                        continue;
                (void)snprintf(dir, sizeof dir, "%s%s/container-mcp", m->v1[c], own);
                (void)snprintf(sub, sizeof sub, "%s/%s", dir, tag);
                if ((mkdir(dir, 0755) < 0 && errno != EEXIST) || (mkdir(sub, 0755) < 0 && errno != EEXIST) ||
                    access(sub, W_OK) < 0)
                        continue;
                s->base[c] = xstrdup(sub);
                n += (size_t)snprintf(used + n, sizeof used - n, "%s%s", n ? ", " : "", ctrl_names[c]);
                if (n >= sizeof used)
                        n = sizeof used - 1;
        }
        if (!s->base[CG_MEMORY] && !s->base[CG_PIDS]) {
                cg_system_free(s);
                return snprintf(s->reason, sizeof s->reason,
                                "no writable cgroup v1 memory or pids hierarchy (run as root, or delegate one)"),
                       -1;
        }
        (void)snprintf(s->reason, sizeof s->reason, "v1 controllers %.200s under %s", used,
                       s->base[CG_MEMORY] ? s->base[CG_MEMORY] : s->base[CG_PIDS]);
        return 0;
}

void cg_detect(cg_system *s, const char *force, const char *tag) {
        cg_mounts *m = xcalloc(1, sizeof *m);
        char why_v2[384] = "";

        *s = (cg_system){.mode = CG_NONE};
        find_mounts(m);
        if (!force || !*force || strcmp(force, "auto") == 0 || strcmp(force, "v2") == 0) {
                if (detect_v2(s, m, tag) == 0) {
                        s->mode = CG_V2;
                        (void)snprintf(s->reason, sizeof s->reason, "v2 under %.200s", s->base[0]);
                        goto out;
                }
                memcpy(why_v2, s->reason, sizeof why_v2);
        }
        if (!force || !*force || strcmp(force, "auto") == 0 || strcmp(force, "v1") == 0) {
                if (detect_v1(s, m, tag) == 0) {
                        s->mode = CG_V1;
                        s->slow_attach = !m->favordynmods;
                        if (why_v2[0]) {
                                size_t n = strlen(s->reason);
                                (void)snprintf(s->reason + n, sizeof s->reason - n, "; not v2: %s", why_v2);
                        }
                        goto out;
                }
        }
        if (force && strcmp(force, "none") == 0)
                (void)snprintf(s->reason, sizeof s->reason, "cgroups disabled by CONTAINER_MCP_NATIVE_CGROUP=none");
        else if (why_v2[0]) {
                char v1why[384];
                memcpy(v1why, s->reason, sizeof v1why);
                (void)snprintf(s->reason, sizeof s->reason, "%.180s; %.180s", why_v2, v1why);
        }
out:
        free(m);
}

void cg_system_free(cg_system *s) {
        for (int c = 0; c < CG__N; c++) {
                free(s->base[c]);
                s->base[c] = NULL;
        }
}

/* ---- one container ------------------------------------------------------ */

void cg_paths_free(cg_paths *p) {
        for (int c = 0; c < CG__N; c++) {
                free(p->dir[c]);
                p->dir[c] = NULL;
        }
        p->mode = CG_NONE;
}

bool cg_paths_empty(const cg_paths *p) {
        for (int c = 0; c < CG__N; c++)
                if (p->dir[c])
                        return false;
        return true;
}

static int write_limits_v2(const char *dir, const cg_limits *l) {
        char buf[64];
        if (l->memory_bytes > 0) {
                (void)snprintf(buf, sizeof buf, "%" PRId64, l->memory_bytes);
                if (cg_write(dir, "memory.max", buf) < 0)
                        return -errno;
                (void)cg_write(dir, "memory.swap.max", "0");
        }
        if (l->cpus > 0) {
                (void)snprintf(buf, sizeof buf, "%" PRId64 " 100000", (int64_t)(l->cpus * 100000));
                if (cg_write(dir, "cpu.max", buf) < 0 && errno != ENOENT)
                        return -errno;
        }
        if (l->pids > 0) {
                (void)snprintf(buf, sizeof buf, "%" PRId64, l->pids);
                if (cg_write(dir, "pids.max", buf) < 0)
                        return -errno;
        }
        return 0;
}

static int write_limits_v1(int c, const char *dir, const cg_limits *l) {
        char buf[64];
        switch (c) {
        case CG_MEMORY:
                if (l->memory_bytes <= 0)
                        return 0;
                (void)snprintf(buf, sizeof buf, "%" PRId64, l->memory_bytes);
                if (cg_write(dir, "memory.limit_in_bytes", buf) < 0)
                        return -errno;
                (void)cg_write(dir, "memory.memsw.limit_in_bytes", buf);
                return 0;
        case CG_CPU:
                if (l->cpus <= 0)
                        return 0;
                (void)snprintf(buf, sizeof buf, "%" PRId64, (int64_t)(l->cpus * 100000));
                if (cg_write(dir, "cpu.cfs_period_us", "100000") < 0 || cg_write(dir, "cpu.cfs_quota_us", buf) < 0)
                        return -errno;
                return 0;
        case CG_PIDS:
                if (l->pids <= 0)
                        return 0;
                (void)snprintf(buf, sizeof buf, "%" PRId64, l->pids);
                return cg_write(dir, "pids.max", buf) < 0 ? -errno : 0;
        }
        return 0;
}

int cg_set_limits(const cg_paths *p, const cg_limits *l) {
        int r;
        if (p->mode == CG_V2) {
                r = p->dir[0] ? write_limits_v2(p->dir[0], l) : 0;
                return r < 0 ? (errno = -r, -1) : 0;
        }
        for (int c = 0; c < CG__N; c++)
                if (p->dir[c] && (r = write_limits_v1(c, p->dir[c], l)) < 0)
                        return errno = -r, -1;
        return 0;
}

/* Was this dir made already for another controller of the same hierarchy? */
static bool dir_seen(const cg_paths *p, int upto, const char *dir) {
        for (int c = 0; c < upto; c++)
                if (p->dir[c] && strcmp(p->dir[c], dir) == 0)
                        return true;
        return false;
}

int cg_ensure_dir(const cg_system *s, const char *rel) {
        int r = 0;
        for (int c = 0; c < CG__N; c++) {
                if (!s->base[c])
                        continue;
                cleanup_free char *dir = xasprintf("%s/%s", s->base[c], rel);
                if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                        r = -errno;
                else if (s->mode == CG_V2)
                        enable_controllers(dir);
        }
        return r;
}

/* mkdir, and when a parent went (someone cleaned up our empty dirs, or the
 * last server removed its state dir's), the parents first. */
static int mkdir_cg(const char *dir, bool v2) {
        cleanup_free char *parent = NULL;
        char *slash;
        if (mkdir(dir, 0755) == 0)
                return 0;
        if (errno != ENOENT)
                return -1;
        parent = xstrdup(dir);
        slash = strrchr(parent, '/');
        if (!slash || slash == parent)
                return -1;
        *slash = 0;
        if (mkdir_cg(parent, v2) < 0 && errno != EEXIST)
                return -1;
        if (v2)
                enable_controllers(parent);
        return mkdir(dir, 0755);
}

/* v1 hierarchies a run to completion needs: only those holding a limit
 * (each one joined costs the sandbox a cgroup.procs write). */
static bool needed_v1(int c, const cg_limits *l) {
        return (c == CG_MEMORY && l->memory_bytes > 0) || (c == CG_CPU && l->cpus > 0) || (c == CG_PIDS && l->pids > 0);
}

int cg_create(const cg_system *s, const char *id, const cg_limits *l, bool limits_only, cg_paths *ret, cm_err *err) {
        cg_paths p = {.mode = s->mode};
        int r;

        if (s->mode == CG_NONE) {
                *ret = p;
                return 0;
        }
        for (int c = 0; c < CG__N; c++) {
                if (!s->base[c] || (limits_only && s->mode == CG_V1 && !needed_v1(c, l)))
                        continue;
                p.dir[c] = xasprintf("%s/%s", s->base[c], id);
                if (!dir_seen(&p, c, p.dir[c]) && mkdir_cg(p.dir[c], s->mode == CG_V2) < 0) {
                        r = cm_err_sys(err, errno, "cgroup: cannot create %s", p.dir[c]);
                        goto fail;
                }
                r = s->mode == CG_V2 ? write_limits_v2(p.dir[c], l) : write_limits_v1(c, p.dir[c], l);
                if (r < 0) {
                        r = cm_err_sys(err, -r, "cgroup: cannot set the limits in %s", p.dir[c]);
                        goto fail;
                }
        }
        *ret = p;
        return 0;
fail:
        (void)cg_destroy(&p);
        cg_paths_free(&p);
        return r;
}

int cg_create_sub(const cg_paths *parent, const char *name, cg_paths *ret, cm_err *err) {
        cg_paths p = {.mode = parent->mode};
        int c = parent->mode == CG_V2     ? CG_MEMORY
                : parent->dir[CG_FREEZER] ? CG_FREEZER
                : parent->dir[CG_PIDS]    ? CG_PIDS
                                          : CG_MEMORY;

        if (parent->mode == CG_NONE || !parent->dir[c]) {
                *ret = p;
                return 0;
        }
        p.dir[c] = xasprintf("%s/%s", parent->dir[c], name);
        if (mkdir(p.dir[c], 0755) < 0) {
                int r = cm_err_sys(err, errno, "cgroup: cannot create %s", p.dir[c]);
                cg_paths_free(&p);
                return r;
        }
        *ret = p;
        return 0;
}

int cg_open_join(const cg_paths *p, const cg_paths *sub, int *fds, size_t max, size_t *ret_n, int *ret_dirfd,
                 cm_err *err) {
        size_t n = 0;
        cg_paths all = {.mode = p->mode};

        *ret_dirfd = -1;
        for (int c = 0; c < CG__N; c++)
                all.dir[c] = sub && sub->dir[c] ? sub->dir[c] : p->dir[c];
        for (int c = 0; c < CG__N && n < max; c++) {
                char path[4200];
                if (!all.dir[c] || dir_seen(&all, c, all.dir[c]))
                        continue;
                if (p->mode == CG_V2 && *ret_dirfd < 0)
                        *ret_dirfd = open(all.dir[c], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                (void)snprintf(path, sizeof path, "%s/cgroup.procs", all.dir[c]);
                fds[n] = open(path, O_WRONLY | O_CLOEXEC);
                if (fds[n] < 0) {
                        int r = cm_err_sys(err, errno, "cgroup: cannot open %s", path);
                        while (n > 0)
                                (void)close(fds[--n]);
                        if (*ret_dirfd >= 0)
                                (void)close(*ret_dirfd);
                        *ret_dirfd = -1;
                        return r;
                }
                n++;
        }
        *ret_n = n;
        return 0;
}

int cg_join(const int *fds, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (write(fds[i], "0", 1) < 0)
                        return -errno;
        return 0;
}

/* ---- killing ------------------------------------------------------------ */

/* SIGKILL every process listed in dir/cgroup.procs; the number signalled. */
static int kill_listed(const char *dir) {
        char path[4200], buf[8192];
        int fd, killed = 0;
        ssize_t len;
        size_t keep = 0;

        (void)snprintf(path, sizeof path, "%s/cgroup.procs", dir);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        while ((len = read(fd, buf + keep, sizeof buf - 1 - keep)) > 0) {
                char *p = buf, *nl;
                buf[keep + (size_t)len] = 0;
                while ((nl = strchr(p, '\n'))) {
                        pid_t pid = (pid_t)strtol(p, NULL, 10);
                        if (pid > 0 && kill(pid, SIGKILL) == 0)
                                killed++;
                        p = nl + 1;
                }
                keep = strlen(p);
                memmove(buf, p, keep);
        }
        (void)close(fd);
        return killed;
}

static void settle(int round) {
        struct timespec ts = {0, 100000L * (round < 10 ? round + 1 : 10)};
        (void)nanosleep(&ts, NULL);
}

void cg_kill(const cg_paths *p) {
        const char *frz = p->mode == CG_V1 ? p->dir[CG_FREEZER] : NULL;
        char state[32];

        if (p->mode == CG_NONE)
                return;
        if (p->mode == CG_V2) {
                for (int c = 0; c < CG__N; c++)
                        if (p->dir[c] && cg_write(p->dir[c], "cgroup.kill", "1") == 0)
                                return;
        }
        /* v1: freeze so nothing forks while we kill, then thaw so the
         * signals land. */
        if (frz && cg_write(frz, "freezer.state", "FROZEN") == 0) {
                for (int i = 0; i < 200; i++) {
                        if (cg_read(frz, "freezer.state", state, sizeof state) < 0 || strncmp(state, "FROZEN", 6) == 0)
                                break;
                        settle(i);
                }
                (void)kill_listed(frz);
                (void)cg_write(frz, "freezer.state", "THAWED");
                return;
        }
        for (int i = 0; i < 100; i++) {
                int n = 0;
                for (int c = 0; c < CG__N; c++)
                        if (p->dir[c])
                                n += kill_listed(p->dir[c]);
                if (n == 0)
                        return;
        }
}

/* rmdir a cgroup, its children first; processes just killed may take a
 * moment to leave, so EBUSY is retried for a bounded time: up to 2 s (a
 * sandbox's pid 1 takes its whole namespace down first, which on a loaded
 * machine outlasted the ~0.1 s this once allowed, and the cgroup stayed
 * behind with its record gone). */
#define RM_CGROUP_MS 2000

static int rm_cgroup(const char *dir) {
        DIR *d = opendir(dir);
        struct dirent *de;

        if (!d)
                return errno == ENOENT ? 0 : -errno;
        while ((de = readdir(d))) {
                if (de->d_type == DT_DIR && de->d_name[0] != '.') {
                        cleanup_free char *sub = xasprintf("%s/%s", dir, de->d_name);
                        (void)rm_cgroup(sub);
                }
        }
        (void)closedir(d);
        for (int64_t t0 = cm_now_ms(), i = 0;; i++) {
                if (rmdir(dir) == 0 || errno == ENOENT)
                        return 0;
                if (errno != EBUSY)
                        return -errno;
                if (cm_now_ms() - t0 > RM_CGROUP_MS)
                        return -EBUSY;
                (void)kill_listed(dir);
                settle(i < 1000 ? (int)i : 1000);
        }
}

void cg_release(const cg_paths *p) {
        for (int c = 0; c < CG__N; c++)
                if (p->dir[c])
                        (void)rmdir(p->dir[c]);
}

int cg_destroy(const cg_paths *p) {
        int r = 0;
        bool empty = true;

        /* Usually all is gone already (a sandbox's processes die with its
         * pid 1): then rmdir is all it takes. */
        for (int c = 0; c < CG__N; c++)
                if (p->dir[c] && !dir_seen(p, c, p->dir[c]) && rmdir(p->dir[c]) < 0 && errno != ENOENT)
                        empty = false;
        if (empty)
                return 0;
        cg_kill(p);
        for (int c = 0; c < CG__N; c++) {
                if (!p->dir[c] || dir_seen(p, c, p->dir[c]))
                        continue;
                int q = rm_cgroup(p->dir[c]);
                if (q < 0 && r == 0)
                        r = q;
        }
        return r;
}

/* ---- stats -------------------------------------------------------------- */

static uint64_t read_u64(const char *dir, const char *file) {
        char buf[64];
        if (!dir || cg_read(dir, file, buf, sizeof buf) < 0 || strncmp(buf, "max", 3) == 0)
                return 0;
        return strtoull(buf, NULL, 10);
}

static uint64_t keyed_u64(const char *dir, const char *file, const char *key) {
        char buf[4096];
        size_t n = strlen(key);
        if (!dir || cg_read(dir, file, buf, sizeof buf) < 0)
                return 0;
        for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
                if (strncmp(line, key, n) == 0 && line[n] == ' ')
                        return strtoull(line + n + 1, NULL, 10);
        return 0;
}

static void io_v2(const char *dir, cm_stats *ret) {
        char buf[8192];
        if (cg_read(dir, "io.stat", buf, sizeof buf) < 0)
                return;
        for (char *p = buf; (p = strstr(p, "bytes="));) {
                bool rd = p > buf && p[-1] == 'r';
                bool wr = p > buf && p[-1] == 'w';
                uint64_t v = strtoull(p + 6, &p, 10);
                if (rd)
                        ret->io_read_bytes += v;
                else if (wr)
                        ret->io_write_bytes += v;
        }
}

static void io_v1(const char *dir, cm_stats *ret) {
        char buf[8192];
        if (!dir || cg_read(dir, "blkio.throttle.io_service_bytes", buf, sizeof buf) < 0)
                return;
        for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                char op[16];
                unsigned long long v;
                if (sscanf(line, "%*s %15s %llu", op, &v) != 2)
                        continue;
                if (strcmp(op, "Read") == 0)
                        ret->io_read_bytes += v;
                else if (strcmp(op, "Write") == 0)
                        ret->io_write_bytes += v;
        }
}

int cg_stats(const cg_paths *p, cm_stats *ret) {
        *ret = (cm_stats){0};
        if (p->mode == CG_V2) {
                const char *d = p->dir[0];
                ret->cpu_usec = keyed_u64(d, "cpu.stat", "usage_usec");
                ret->memory_bytes = read_u64(d, "memory.current");
                ret->memory_peak_bytes = read_u64(d, "memory.peak");
                ret->memory_limit_bytes = read_u64(d, "memory.max");
                ret->pids = read_u64(d, "pids.current");
                io_v2(d, ret);
                ret->source = "cgroup v2";
                return 0;
        }
        if (p->mode == CG_V1) {
                ret->cpu_usec = read_u64(p->dir[CG_CPUACCT], "cpuacct.usage") / 1000;
                ret->memory_bytes = read_u64(p->dir[CG_MEMORY], "memory.usage_in_bytes");
                ret->memory_peak_bytes = read_u64(p->dir[CG_MEMORY], "memory.max_usage_in_bytes");
                ret->memory_limit_bytes = read_u64(p->dir[CG_MEMORY], "memory.limit_in_bytes");
                if (ret->memory_limit_bytes >= (UINT64_C(1) << 62))
                        ret->memory_limit_bytes = 0;
                ret->pids = read_u64(p->dir[CG_PIDS], "pids.current");
                io_v1(p->dir[CG_BLKIO], ret);
                ret->source = "cgroup v1";
                return 0;
        }
        return -ENOTSUP;
}
