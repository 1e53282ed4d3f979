/* dinspect's view of a native sandbox (the backend op `isolation`): what a
 * process in it may do, in a few hundred bytes of JSON (the fields of
 * src/tools/defs/dinspect.json).
 *
 * The record says what was asked; the kernel says what holds.  For a
 * running sandbox every field the kernel keeps is read from the kernel for
 * the sandbox's init, which holds exactly what every process there holds
 * (init.c: the capability set, no_new_privs, the seccomp filter):
 * capabilities, no_new_privs and seccomp from /proc/PID/status, root's
 * host uid from /proc/PID/uid_map, the mounts' ro/rw, the root's and the
 * devices from /proc/PID/mountinfo, the namespaces by comparing the init's
 * with the server's own, the limits from the cgroup's files, ulimits from
 * /proc/PID/limits, the network from the interfaces of its namespace.
 * These are the host's /proc entries of our own init, never the sandbox's
 * /proc; the init is trusted only through init_alive(), checked again after
 * the reads, so a pid reused meanwhile is never described.  A sandbox that
 * is not running is described from its record ("source": "record"). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "util/capnames.h"
#include "util/cleanup.h"
#include "util/json.h"

#define PROC_TEXT_MAX ((size_t)1 << 20) /* no /proc file we read is bigger */

/* The whole of a (/proc or cgroup) file, NUL-terminated; NULL when it
 * cannot be read. */
static char *slurp(const char *path) {
        cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
        size_t len = 0, cap = 4096;
        char *buf;
        ssize_t k;

        if (fd < 0)
                return NULL;
        buf = xmalloc(cap);
        while ((k = read(fd, buf + len, cap - 1 - len)) > 0) {
                len += (size_t)k;
                if (len + 1 == cap && cap < PROC_TEXT_MAX)
                        buf = xrealloc(buf, cap *= 2);
                else if (len + 1 == cap)
                        break;
        }
        if (k < 0 && len == 0) {
                free(buf);
                return NULL;
        }
        buf[len] = 0;
        return buf;
}

static char *proc_text(pid_t pid, const char *file) {
        cleanup_free char *path = xasprintf("/proc/%d/%s", (int)pid, file);
        return slurp(path);
}

/* The value of "Key:\t..." in /proc/PID/status, or NULL. */
static const char *status_field(const char *status, const char *key) {
        size_t n = strlen(key);
        for (const char *p = status; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                if (strncmp(p, key, n) == 0 && p[n] == ':')
                        return p + n + 1 + strspn(p + n + 1, " \t");
        return NULL;
}

/* ---- capabilities ------------------------------------------------------ */

/* kept: the set's names; dropped: those of Docker's default set it lacks. */
static json_t *caps_json(uint64_t kept) {
        json_t *k = json_array(), *d = json_array();
        uint64_t dflt = cm_cap_docker_default();
        for (int c = 0; c < CM_CAP_COUNT; c++) {
                if (kept & ((uint64_t)1 << c))
                        (void)json_array_append_new(k, json_string(cm_cap_name(c)));
                else if (dflt & ((uint64_t)1 << c))
                        (void)json_array_append_new(d, json_string(cm_cap_name(c)));
        }
        return json_pack("{s:o, s:o}", "kept", k, "dropped", d);
}

/* ---- namespaces -------------------------------------------------------- */

/* In the order of the init's control socket ('n', init.c). */
static const char *const ns_names[INIT_N_NS] = {"user", "mnt", "uts", "ipc", "net", "pid", "cgroup"};

/* The init's namespaces: /proc/PID/ns as root; a server without
 * CAP_SYS_PTRACE over the init (rootless: the init is not dumpable) asks
 * the init for them, as exec does. */
static int ns_of_init(const nstate *s, struct stat ret[INIT_N_NS]) {
        int fds[INIT_N_NS];
        bool ok = true;
        for (int i = 0; i < INIT_N_NS && ok; i++) {
                cleanup_free char *path = xasprintf("/proc/%d/ns/%s", (int)s->init_pid, ns_names[i]);
                ok = stat(path, &ret[i]) == 0;
        }
        if (ok)
                return 0;
        if (init_ctl_fetch(s->dir, fds, NULL) < 0)
                return -1;
        ok = true;
        for (int i = 0; i < INIT_N_NS; i++) {
                if (fstat(fds[i], &ret[i]) < 0)
                        ok = false;
                (void)close(fds[i]);
        }
        return ok ? 0 : -1;
}

/* {own: [...], host: [...]}: the init's namespaces that differ from the
 * server's own and those it shares. */
static json_t *ns_json(const nstate *s) {
        struct stat init_ns[INIT_N_NS], ours;
        json_t *own = json_array(), *host = json_array();
        if (ns_of_init(s, init_ns) < 0) {
                json_decref(own);
                json_decref(host);
                return NULL;
        }
        for (int i = 0; i < INIT_N_NS; i++) {
                cleanup_free char *path = xasprintf("/proc/self/ns/%s", ns_names[i]);
                bool same = stat(path, &ours) == 0 && ours.st_dev == init_ns[i].st_dev &&
                            ours.st_ino == init_ns[i].st_ino;
                (void)json_array_append_new(same ? host : own, json_string(ns_names[i]));
        }
        return json_pack("{s:o, s:o}", "own", own, "host", host);
}

/* ---- mounts ------------------------------------------------------------- */

typedef struct mnt_ent {
        const char *target; /* into the mountinfo text */
        bool ro;
} mnt_ent;

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s) {
        char *o = s;
        for (; *s; s++)
                if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' &&
                    s[3] <= '7') {
                        *o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
                        s += 3;
                } else
                        *o++ = *s;
        *o = 0;
}

/* Each line's mount point (field 5) and whether its per-mount options
 * (field 6) start with "ro"; parsed in place. */
static size_t mountinfo_parse(char *text, mnt_ent **ret) {
        size_t n = 0, cap = 0;
        mnt_ent *v = NULL;
        char *save = NULL;
        for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *f[6] = {0}, *fs = NULL;
                int i = 0;
                for (char *w = strtok_r(line, " ", &fs); w && i < 6; w = strtok_r(NULL, " ", &fs))
                        f[i++] = w;
                if (i < 6)
                        continue;
                unescape(f[4]);
                if (n == cap)
                        v = xrealloc(v, (cap = cap ? cap * 2 : 64) * sizeof *v);
                v[n++] = (mnt_ent){f[4], strncmp(f[5], "ro", 2) == 0 && (f[5][2] == 0 || f[5][2] == ',')};
        }
        *ret = v;
        return n;
}

/* The topmost mount at `target` (later lines stack on earlier ones). */
static const mnt_ent *mount_at(const mnt_ent *v, size_t n, const char *target) {
        size_t len = strlen(target);
        while (len > 1 && target[len - 1] == '/')
                len--;
        for (size_t i = n; i-- > 0;)
                if (strncmp(v[i].target, target, len) == 0 && v[i].target[len] == 0)
                        return &v[i];
        return NULL;
}

/* The recorded mounts, each with ro/rw as mounted ("absent" when the
 * kernel has no mount there). */
static json_t *mounts_json(const nstate *s, const mnt_ent *v, size_t n) {
        json_t *a = json_array();
        for (size_t i = 0; i < s->n_mounts; i++) {
                const mnt_ent *e = v ? mount_at(v, n, s->mounts[i].target) : NULL;
                const char *mode = !v ? (s->mounts[i].readonly ? "ro" : "rw") : !e ? "absent" : e->ro ? "ro" : "rw";
                (void)json_array_append_new(a, json_pack("{s:s, s:s, s:s}", "source", s->mounts[i].source, "target",
                                                         s->mounts[i].target, "mode", mode));
        }
        return a;
}

/* Mount points right below /dev beyond the standard nodes: a host device
 * reachable from the sandbox (the runtime binds none; user mounts may not
 * go under /dev). */
static json_t *devices_json(const mnt_ent *v, size_t n) {
        static const char *const standard[] = {"null", "zero", "full", "random", "urandom", "tty", "pts", "shm", "mqueue"};
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++) {
                const char *name = v[i].target + 5;
                bool known = strncmp(v[i].target, "/dev/", 5) != 0 || !*name || strchr(name, '/');
                for (size_t j = 0; j < ARRAY_SIZE(standard) && !known; j++)
                        known = strcmp(name, standard[j]) == 0;
                for (size_t j = 0; j < json_array_size(a) && !known; j++)
                        known = strcmp(json_string_value(json_array_get(a, j)), v[i].target) == 0;
                if (!known)
                        (void)json_array_append_new(a, json_string(v[i].target));
        }
        return a;
}

/* ---- limits ------------------------------------------------------------- */

/* A cgroup file's number; -1 for "max" or a v1 "no limit"; -2 unreadable. */
static double cg_number(const char *dir, const char *file, int field) {
        cleanup_free char *path = dir ? xasprintf("%s/%s", dir, file) : NULL;
        cleanup_free char *text = path ? slurp(path) : NULL;
        char *p = text, *end;
        double v;
        if (!text)
                return -2;
        for (int i = 0; i < field && p; i++)
                p = strchr(p, ' ') ? strchr(p, ' ') + 1 : NULL;
        if (!p || strncmp(p, "max", 3) == 0)
                return -1;
        v = strtod(p, &end);
        return end == p ? -2 : v;
}

static json_t *limit_value(double v) { return v < 0 ? json_null() : json_integer((json_int_t)v); }

/* {cpus, memory, pids, enforced_by}: what the cgroup holds (null: no
 * limit); without a cgroup, the record's, which every process gets as
 * rlimits (RLIMIT_AS, RLIMIT_NPROC: per process, not in all). */
static json_t *limits_json(const nstate *s, bool kernel) {
        double mem, quota, period, pids;
        const char *by = s->cg.mode == CG_V2 ? "cgroup v2" : "cgroup v1";
        if (!kernel || s->cg.mode == CG_NONE) {
                json_t *cpus = s->limits.cpus > 0 && s->cg.mode != CG_NONE ? json_real(s->limits.cpus) : json_null();
                return json_pack("{s:o, s:o, s:o, s:s}", "cpus", cpus, "memory",
                                 limit_value(s->limits.memory_bytes > 0 ? (double)s->limits.memory_bytes : -1), "pids",
                                 limit_value(s->limits.pids > 0 ? (double)s->limits.pids : -1), "enforced_by",
                                 s->cg.mode == CG_NONE ? "rlimits" : by);
        }
        if (s->cg.mode == CG_V2) {
                mem = cg_number(s->cg.dir[0], "memory.max", 0);
                quota = cg_number(s->cg.dir[0], "cpu.max", 0);
                period = cg_number(s->cg.dir[0], "cpu.max", 1);
                pids = cg_number(s->cg.dir[0], "pids.max", 0);
        } else {
                mem = cg_number(s->cg.dir[CG_MEMORY], "memory.limit_in_bytes", 0);
                if (mem >= (double)((uint64_t)1 << 62))
                        mem = -1; /* v1's "no limit" is a huge page-aligned number */
                quota = cg_number(s->cg.dir[CG_CPU], "cpu.cfs_quota_us", 0);
                period = cg_number(s->cg.dir[CG_CPU], "cpu.cfs_period_us", 0);
                pids = cg_number(s->cg.dir[CG_PIDS], "pids.max", 0);
        }
        return json_pack("{s:o, s:o, s:o, s:s}", "cpus", quota > 0 && period > 0 ? json_real(quota / period) : json_null(),
                         "memory", limit_value(mem), "pids", limit_value(pids), "enforced_by", by);
}

/* /proc/PID/limits' "soft:hard" of the few that matter here.  Without a
 * cgroup the limits are rlimits the init sets on each process it starts,
 * not on itself: those two are the record's. */
static json_t *ulimits_json(const nstate *s, const char *text) {
        static const struct {
                const char *line, *name;
        } rows[] = {{"Max open files", "nofile"}, {"Max processes", "nproc"}, {"Max address space", "as"},
                    {"Max file size", "fsize"}};
        json_t *o = json_object();
        for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
                const char *p = text ? strstr(text, rows[i].line) : NULL;
                char soft[32], hard[32];
                if (!p || sscanf(p + strlen(rows[i].line), " %31s %31s", soft, hard) != 2)
                        continue;
                /* unlimited address space and file size are the norm: say
                 * only when they are limited */
                if (i >= 2 && strcmp(soft, "unlimited") == 0 && strcmp(hard, "unlimited") == 0)
                        continue;
                (void)json_object_set_new(o, rows[i].name, json_sprintf("%s:%s", soft, hard));
        }
        if (s->cg.mode == CG_NONE && s->limits.memory_bytes > 0)
                (void)json_object_set_new(o, "as", json_sprintf("%lld:%lld", (long long)s->limits.memory_bytes,
                                                                (long long)s->limits.memory_bytes));
        if (s->cg.mode == CG_NONE && s->limits.pids > 0)
                (void)json_object_set_new(o, "nproc", json_sprintf("%lld:%lld", (long long)s->limits.pids,
                                                                   (long long)s->limits.pids));
        return o;
}

/* ---- network ------------------------------------------------------------ */

/* Interfaces of the init's network namespace other than lo; -1 unknown. */
static int ifaces_beyond_lo(pid_t pid) {
        cleanup_free char *dev = proc_text(pid, "net/dev");
        int n = 0;
        if (!dev)
                return -1;
        for (const char *p = dev; (p = strchr(p, '\n')); p++) {
                const char *name = p + 1 + strspn(p + 1, " ");
                size_t len = strcspn(name, ":\n"); /* the headers have no ':' */
                if (name[len] == ':' && !(len == 2 && strncmp(name, "lo", 2) == 0))
                        n++;
        }
        return n;
}

/* {mode, ports}: "none" when the namespace has only lo (read from the
 * kernel when `kernel`), else the user-mode stack of the record. */
static json_t *network_json(const nstate *s, bool kernel) {
        int ifaces = kernel ? ifaces_beyond_lo(s->init_pid) : -1;
        bool on = ifaces < 0 ? s->net.stack != NET_NONE : ifaces > 0;
        const char *mode = !on ? "none" : s->net.stack != NET_NONE ? net_stack_name(s->net.stack) : "private";
        json_t *ports = json_array();
        for (size_t i = 0; on && i < s->net.n_ports; i++)
                (void)json_array_append_new(ports, json_sprintf("127.0.0.1:%u->%u/%s", s->net.ports[i].host_port,
                                                                s->net.ports[i].container_port,
                                                                s->net.ports[i].udp ? "udp" : "tcp"));
        return json_pack("{s:s, s:o}", "mode", mode, "ports", ports);
}

/* ---- the two views ------------------------------------------------------ */

static json_t *view_base(const nstate *s) {
        char user[32] = "0"; /* the image's User, in the sandbox's ids */
        if (s->set_ids)
                (void)snprintf(user, sizeof user, "%u:%u", (unsigned)s->run_uid, (unsigned)s->run_gid);
        return json_pack("{s:s, s:s, s:s, s:s, s:b, s:s, s:b}", "container", s->name, "id", s->id, "runtime", "native",
                         "state", s->state, "privileged", 0, "user", user, "userns", s->userns);
}

/* Host uid of the sandbox's first id (its root; rootless with an image's
 * user, that user in its nested namespace), from the init's uid_map as we
 * read it: relative to ours; -1 unknown. */
static long long host_uid(pid_t pid) {
        cleanup_free char *map = proc_text(pid, "uid_map");
        long long inside, outside, count;
        if (!map || sscanf(map, " %lld %lld %lld", &inside, &outside, &count) != 3)
                return -1;
        return outside;
}

static int view_kernel(const nstate *s, json_t *v) {
        cleanup_free char *status = proc_text(s->init_pid, "status");
        cleanup_free char *mountinfo = proc_text(s->init_pid, "mountinfo");
        cleanup_free char *limits = proc_text(s->init_pid, "limits");
        cleanup_free char *apparmor = proc_text(s->init_pid, "attr/apparmor/current");
        cleanup_free mnt_ent *ents = NULL;
        const char *capeff = status_field(status, "CapEff"), *nnp = status_field(status, "NoNewPrivs");
        const char *seccomp = status_field(status, "Seccomp");
        json_t *ns = ns_json(s);
        const mnt_ent *root;
        long long uid = host_uid(s->init_pid);
        size_t n_ents;

        if (!capeff || !nnp || !seccomp || !mountinfo || !ns) {
                json_decref(ns);
                return -1;
        }
        n_ents = mountinfo_parse(mountinfo, &ents);
        root = mount_at(ents, n_ents, "/");
        if (uid >= 0)
                (void)json_object_set_new(v, "host_uid", json_integer(uid));
        (void)json_object_set_new(v, "caps", caps_json(strtoull(capeff, NULL, 16)));
        (void)json_object_set_new(v, "namespaces", ns);
        (void)json_object_set_new(v, "devices", devices_json(ents, n_ents));
        (void)json_object_set_new(v, "mounts", mounts_json(s, ents, n_ents));
        (void)json_object_set_new(v, "readonly_root", json_boolean(root && root->ro));
        (void)json_object_set_new(v, "network", network_json(s, true));
        (void)json_object_set_new(v, "limits", limits_json(s, true));
        (void)json_object_set_new(v, "ulimits", ulimits_json(s, limits));
        (void)json_object_set_new(v, "seccomp", json_string(seccomp[0] == '2' ? "filter" : seccomp[0] == '1' ? "strict" : "off"));
        if (apparmor)
                apparmor[strcspn(apparmor, "\n")] = 0;
        (void)json_object_set_new(v, "apparmor", apparmor && *apparmor ? json_string(apparmor) : json_null());
        (void)json_object_set_new(v, "no_new_privs", json_boolean(nnp[0] == '1'));
        return 0;
}

/* What the record says, and what the runtime gives every sandbox. */
static void view_record(const native *n, const nstate *s, json_t *v) {
        json_t *own = json_array();
        for (int i = 0; i < INIT_N_NS; i++)
                (void)json_array_append_new(own, json_string(ns_names[i]));
        (void)json_object_set_new(v, "caps", caps_json(n->caps_keep));
        (void)json_object_set_new(v, "namespaces", json_pack("{s:o, s:[]}", "own", own, "host"));
        (void)json_object_set_new(v, "devices", json_array());
        (void)json_object_set_new(v, "mounts", mounts_json(s, NULL, 0));
        (void)json_object_set_new(v, "readonly_root", json_boolean(s->readonly_rootfs));
        (void)json_object_set_new(v, "network", network_json(s, false));
        (void)json_object_set_new(v, "limits", limits_json(s, false));
        (void)json_object_set_new(v, "ulimits", json_object());
        (void)json_object_set_new(v, "seccomp", json_string("filter"));
        (void)json_object_set_new(v, "apparmor", json_null());
        (void)json_object_set_new(v, "no_new_privs", json_true());
}

int native_isolation(cm_backend *b, const char *id, char **ret_json, cm_err *err) {
        native *n = (native *)b;
        nstate s = {0};
        json_t *v;
        bool kernel;

        if (state_load(n, id, &s, err) < 0)
                return -1;
        v = view_base(&s);
        kernel = strcmp(s.state, "running") == 0 && view_kernel(&s, v) == 0 && init_alive(&s);
        if (!kernel) {
                /* not running, or it ended while we read: the record */
                json_decref(v);
                v = view_base(&s);
                view_record(n, &s, v);
        }
        (void)json_object_set_new(v, "source", json_string(kernel ? "kernel" : "record"));
        *ret_json = cm_json_dump(v);
        json_decref(v);
        state_free(&s);
        return 0;
}
