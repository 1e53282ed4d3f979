/* The user namespace.  Every sandbox has one, so that its root is never the
 * host's.
 *
 * Rootless server: the caller's uid and gid become root inside, nothing else
 * is mapped.  The child writes its own maps (allowed for a single line
 * mapping its own id), so the parent need not wait for it.
 *
 * Root server: sandbox ids 0..65535 map onto an unprivileged host range
 * [BASE, BASE + 65536), uid and gid alike.  Only a privileged process may
 * write such a map, so the parent writes /proc/<child>/{uid,gid}_map while
 * the child waits (sync point #0, sandbox.c), and the child then becomes
 * uid 0 of its namespace (host BASE).  BASE is the server user's range in
 * /etc/subuid and /etc/subgid when it has one of 65536 ids or more, else
 * CONTAINER_MCP_USERNS_BASE, else USERNS_DEFAULT_BASE.  Every sandbox of
 * a server uses the same range: they are kept apart by their pid, mount,
 * ipc and network namespaces, not by their ids.
 *
 * The same map, held by a namespace of its own (userns_make), serves to
 * idmap mounts (mount.c): an image's lower layer shows its host-root files
 * as owned by the sandbox's root. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "backend/native/linux.h"
#include "util/cleanup.h"

/* ---- rootless: the child maps itself ------------------------------------ */

int userns_map(uid_t outer_uid, gid_t outer_gid, sb_err *e) {
        char map[64];

        /* setgroups must be denied before an unprivileged gid_map. */
        if (write_file("/proc/self/setgroups", "deny") < 0 && errno != ENOENT)
                return sb_fail(e, SB_STEP_USERNS, errno, "deny setgroups");
        (void)snprintf(map, sizeof map, "0 %u 1\n", (unsigned)outer_uid);
        if (write_file("/proc/self/uid_map", map) < 0)
                return sb_fail(e, SB_STEP_USERNS, errno, "write uid_map \"0 %u 1\"", (unsigned)outer_uid);
        (void)snprintf(map, sizeof map, "0 %u 1\n", (unsigned)outer_gid);
        if (write_file("/proc/self/gid_map", map) < 0)
                return sb_fail(e, SB_STEP_USERNS, errno, "write gid_map \"0 %u 1\"", (unsigned)outer_gid);
        return 0;
}

/* ---- rootless: the image's user ------------------------------------------ */

/* A rootless sandbox maps one id, ours, as its root: an image's User
 * cannot be a second id there.  It can be a namespace of its own, nested
 * in the sandbox's, whose only id is uid:gid mapped onto that root: from
 * here on the init and everything it starts are uid:gid, and every file
 * (all of the one id) looks like theirs, as if the image's files were
 * chowned to its user.  Nothing on the host changes; capabilities in the
 * nested namespace reach nothing outside it (the mounts, the network
 * belong to the outer one, which is why this comes after them). */
int sb_outer_userns = -1;

int userns_nest(uid_t uid, gid_t gid, sb_err *e) {
        char map[64];
        int r = 0;

        sb_outer_userns = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
        if (sb_outer_userns < 0)
                return sb_fail(e, SB_STEP_USERNS, errno, "open the sandbox's user namespace");
        if (unshare(CLONE_NEWUSER) < 0)
                return sb_fail(e, SB_STEP_USERNS, errno, "unshare a user namespace for the image's user");
        /* our /proc/self files must be ours to write (see the caller's
         * note on dumpable) */
        (void)prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
        if (write_file("/proc/self/setgroups", "deny") < 0 && errno != ENOENT)
                r = sb_fail(e, SB_STEP_USERNS, errno, "deny setgroups (nested)");
        (void)snprintf(map, sizeof map, "%u 0 1\n", (unsigned)uid);
        if (r == 0 && write_file("/proc/self/uid_map", map) < 0)
                r = sb_fail(e, SB_STEP_USERNS, errno, "write uid_map \"%u 0 1\" (nested)", (unsigned)uid);
        (void)snprintf(map, sizeof map, "%u 0 1\n", (unsigned)gid);
        if (r == 0 && write_file("/proc/self/gid_map", map) < 0)
                r = sb_fail(e, SB_STEP_USERNS, errno, "write gid_map \"%u 0 1\" (nested)", (unsigned)gid);
        (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        return r;
}

/* ---- root: the range ------------------------------------------------------ */

/* The first range of at least USERNS_SIZE ids for `name` (or its numeric
 * id) in an /etc/subuid-style file; false when there is none. */
static bool sub_range(const char *file, const char *name, unsigned id, unsigned *ret_base) {
        FILE *f = fopen(file, "re");
        char line[512], idtext[16];
        bool found = false;

        if (!f)
                return false;
        (void)snprintf(idtext, sizeof idtext, "%u", id);
        while (fgets(line, sizeof line, f)) {
                char *save = NULL;
                char *who = strtok_r(line, ":\n", &save), *start = strtok_r(NULL, ":\n", &save),
                     *count = strtok_r(NULL, ":\n", &save);
                char *end1, *end2;
                unsigned long s, c;
                if (!who || !start || !count || (strcmp(who, name) != 0 && strcmp(who, idtext) != 0))
                        continue;
                s = strtoul(start, &end1, 10);
                c = strtoul(count, &end2, 10);
                if (*end1 || *end2 || c < USERNS_SIZE || s > 0xffffffffUL)
                        continue;
                *ret_base = (unsigned)s;
                found = true;
                break;
        }
        (void)fclose(f);
        return found;
}

static int check_base(unsigned long base, const char *from, cm_err *err) {
        /* Ids below 65536 are the host's own users (and nobody, 65534);
         * uid (uid_t)-1 means "no change" to chown and setresuid. */
        if (base < USERNS_SIZE || base + USERNS_SIZE - 1 > 0xfffffffeUL)
                return cm_err_set(err, ERANGE,
                                  "user namespace base %lu (%s) refused: sandbox ids 0-65535 must map to host ids "
                                  "from 65536 up to 4294967294; set CONTAINER_MCP_USERNS_BASE to a base in "
                                  "65536..4294901759 (default %u) or fix the server user's /etc/subuid range",
                                  base, from, USERNS_DEFAULT_BASE);
        return 0;
}

int userns_pick_range(uid_t euid, uid_t *ret_uid, gid_t *ret_gid, char *ret_from, size_t from_size, cm_err *err) {
        const char *env = getenv("CONTAINER_MCP_USERNS_BASE");
        struct passwd pw, *res = NULL;
        char buf[4096];
        unsigned ub = 0, gb = 0;
        unsigned long base = USERNS_DEFAULT_BASE;
        const char *name = getpwuid_r(euid, &pw, buf, sizeof buf, &res) == 0 && res ? pw.pw_name : "";

        if (sub_range("/etc/subuid", name, euid, &ub) && sub_range("/etc/subgid", name, euid, &gb)) {
                (void)snprintf(ret_from, from_size, "/etc/subuid and /etc/subgid (%s)", name[0] ? name : "root");
                if (check_base(ub, "/etc/subuid", err) < 0 || check_base(gb, "/etc/subgid", err) < 0)
                        return -1;
                *ret_uid = ub;
                *ret_gid = gb;
                return 0;
        }
        if (env && *env) {
                char *end;
                errno = 0;
                base = strtoul(env, &end, 10);
                if (errno || *end || *env == '-')
                        return cm_err_set(err, EINVAL,
                                          "CONTAINER_MCP_USERNS_BASE=%s: expected a whole number (the first host "
                                          "id of the sandboxes' 65536), default %u",
                                          env, USERNS_DEFAULT_BASE);
                (void)snprintf(ret_from, from_size, "CONTAINER_MCP_USERNS_BASE");
        } else
                (void)snprintf(ret_from, from_size, "the default; set CONTAINER_MCP_USERNS_BASE to change it");
        if (check_base(base, "CONTAINER_MCP_USERNS_BASE", err) < 0)
                return -1;
        *ret_uid = (uid_t)base;
        *ret_gid = (gid_t)base;
        return 0;
}

/* ---- root: the parent writes the maps (#0) -------------------------------- */

static int write_map(pid_t pid, const char *which, const char *text) {
        char path[64];
        (void)snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, which);
        return write_file_flags(path, text, O_WRONLY, 0) < 0 ? -errno : 0;
}

int userns_write_maps(pid_t pid, const char *uid_map, const char *gid_map, cm_err *err) {
        int r = write_map(pid, "uid_map", uid_map);
        if (r < 0)
                return cm_err_sys(err, -r, "write the sandbox's uid_map (%.40s)", uid_map);
        r = write_map(pid, "gid_map", gid_map);
        if (r < 0)
                return cm_err_sys(err, -r, "write the sandbox's gid_map (%.40s)", gid_map);
        return 0;
}

void userns_range_maps(uid_t ubase, gid_t gbase, char uid_map[64], char gid_map[64]) {
        (void)snprintf(uid_map, 64, "0 %u %u\n", (unsigned)ubase, USERNS_SIZE);
        (void)snprintf(gid_map, 64, "0 %u %u\n", (unsigned)gbase, USERNS_SIZE);
}

/* child: #0, wait until the parent has written our maps (EOF: it failed). */
int userns_wait_maps(int fd, sb_err *e) {
        char b = 0;
        ssize_t k;
        do
                k = read(fd, &b, 1);
        while (k < 0 && errno == EINTR);
        (void)close(fd);
        if (k != 1)
                return sb_fail(e, SB_STEP_USERNS, k < 0 ? errno : EPIPE, "wait for the server to write the id maps");
        return 0;
}

/* child: from the host's root (unmapped here) to the namespace's root, with
 * no supplementary group of the host's.  Raw syscalls: glibc's wrappers
 * would try to signal the server's other threads, which this copy of its
 * memory still lists. */
int userns_become_root(sb_err *e) {
        if (syscall(SYS_setgroups, 0, NULL) < 0)
                return sb_fail(e, SB_STEP_USERNS, errno, "drop the host's supplementary groups");
        if (syscall(SYS_setresgid, 0, 0, 0) < 0)
                return sb_fail(e, SB_STEP_USERNS, errno, "setresgid 0");
        if (syscall(SYS_setresuid, 0, 0, 0) < 0)
                return sb_fail(e, SB_STEP_USERNS, errno, "setresuid 0");
        return 0;
}

/* ---- namespaces that only hold a map (for idmapped mounts) --------------- */

int userns_make(const char *uid_map, const char *gid_map, int *ret_fd, cm_err *err) {
        cleanup_close int go_r = -1, go_w = -1;
        int p[2], fd = -1, r = 0;
        sigset_t all, old;
        char path[64];
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return cm_err_sys(err, errno, "pipe");
        go_r = p[0];
        go_w = p[1];
        (void)sigfillset(&all);
        (void)pthread_sigmask(SIG_SETMASK, &all, &old);
        pid = (pid_t)syscall(SYS_clone, (unsigned long)(CLONE_NEWUSER | SIGCHLD), NULL, NULL, NULL, 0);
        if (pid == 0) {
                /* only holds the namespace open until we have its fd */
                char b;
                (void)close(go_w);
                (void)!read(go_r, &b, 1);
                _exit(0);
        }
        (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (pid < 0)
                return cm_err_sys(err, errno, "clone a user namespace for an idmapped mount");
        r = userns_write_maps(pid, uid_map, gid_map, err);
        if (r == 0) {
                (void)snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        r = cm_err_sys(err, errno, "open %s", path);
        }
        (void)close(take_fd(&go_w));
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        if (r < 0)
                return -1;
        *ret_fd = fd;
        return 0;
}

/* The namespace an idmapped read-write mount owned by host uid:gid uses:
 * that owner <-> the sandbox's root, nothing else.  Cached: a server mounts
 * the same few directories again and again.  Returns a new fd. */
int userns_for_owner(native *n, uid_t uid, gid_t gid, int *ret_fd, cm_err *err) {
        char um[64], gm[64];
        int fd = -1;

        (void)pthread_mutex_lock(&n->lock);
        for (size_t i = 0; i < n->n_owner_ns; i++)
                if (n->owner_ns[i].uid == uid && n->owner_ns[i].gid == gid)
                        fd = fcntl(n->owner_ns[i].fd, F_DUPFD_CLOEXEC, 3);
        (void)pthread_mutex_unlock(&n->lock);
        if (fd >= 0) {
                *ret_fd = fd;
                return 0;
        }
        (void)snprintf(um, sizeof um, "%u %u 1\n", (unsigned)uid, (unsigned)n->map_uid);
        (void)snprintf(gm, sizeof gm, "%u %u 1\n", (unsigned)gid, (unsigned)n->map_gid);
        if (userns_make(um, gm, &fd, err) < 0)
                return -1;
        (void)pthread_mutex_lock(&n->lock);
        if (n->n_owner_ns < ARRAY_SIZE(n->owner_ns)) {
                n->owner_ns[n->n_owner_ns].uid = uid;
                n->owner_ns[n->n_owner_ns].gid = gid;
                n->owner_ns[n->n_owner_ns++].fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        }
        (void)pthread_mutex_unlock(&n->lock);
        *ret_fd = fd;
        return 0;
}

void userns_free(native *n) {
        for (size_t i = 0; i < n->n_owner_ns; i++)
                if (n->owner_ns[i].fd >= 0)
                        (void)close(n->owner_ns[i].fd);
        n->n_owner_ns = 0;
        if (n->map_userns >= 0)
                (void)close(n->map_userns);
        n->map_userns = -1;
}
