/* copy_in / copy_out: the container's files are reached through
 * /proc/<init>/root, and every path inside it resolves as if that were /
 * (util/copy.c), so a symlink in the container cannot point the copy at the
 * host. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "util/cleanup.h"

#define COPY_MAX_BYTES ((uint64_t)1 << 30)

/* The root of a running container (native_root_fd: through
 * /proc/<init>/root as root; from the init itself without CAP_SYS_PTRACE,
 * since the init is not dumpable). */
int native_open_root(native *n, const char *id, const char *tool, int *ret_fd, cm_err *err) {
        nstate s = {0};
        int r;
        if (state_load(n, id, &s, err) < 0)
                return -1;
        if (strcmp(s.state, "running") != 0)
                r = cm_err_set(err, ESRCH, "container %s is not running; %s needs a running container "
                               "(start one with run_container)", id, tool);
        else
                r = native_root_fd(&s, ret_fd, err);
        state_free(&s);
        return r;
}

/* A root server's sandbox belongs to its range's root (host BASE, not 0,
 * which its file systems cannot even store: EOVERFLOW), so what copy_in
 * creates there must too: this thread's fs ids become BASE for the copy.
 * setfsuid drops the file capabilities; the two that let the server read
 * any host source and write anywhere in the sandbox come back (capset).
 * Both are per thread (raw syscalls: no glibc broadcast), and fsuid 0
 * restores the rest.  Without `dac` (the file tools, which read and write
 * only the sandbox's own files) no capability comes back: the kernel then
 * checks each access as it would for the sandbox's root seen from the
 * host, so a host file the sandbox cannot read stays unread. */
int native_fs_ids(uid_t uid, gid_t gid, bool dac) {
        struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
        struct __user_cap_data_struct d[2];
        const unsigned keep = (1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH);

        (void)syscall(SYS_setfsgid, gid);
        (void)syscall(SYS_setfsuid, uid);
        if ((uid_t)syscall(SYS_setfsuid, -1) != uid || (gid_t)syscall(SYS_setfsgid, -1) != gid)
                return -EPERM;
        if (uid == 0 || !dac)
                return 0;
        if (syscall(SYS_capget, &h, d) < 0)
                return -errno;
        d[0].effective |= keep & d[0].permitted;
        return syscall(SYS_capset, &h, d) < 0 ? -errno : 0;
}

int native_copy_in(cm_backend *b, const char *id, const cm_host_path *src, const char *container_path,
                   cm_copy_stats *ret, cm_err *err) {
        native *n = (native *)b;
        cleanup_close int root = -1;
        int r, e;
        if (native_open_root(n, id, "copy_files", &root, err) < 0)
                return -1;
        if (n->rootless)
                return cm_copy_host_to_root(src->root, src->rel, root, container_path, COPY_MAX_BYTES, ret, err);
        if ((e = native_fs_ids(n->map_uid, n->map_gid, true)) < 0) {
                (void)native_fs_ids(0, 0, true);
                return cm_err_sys(err, -e, "copy: cannot act as the sandbox's root (host uid %u)",
                                  (unsigned)n->map_uid);
        }
        r = cm_copy_host_to_root(src->root, src->rel, root, container_path, COPY_MAX_BYTES, ret, err);
        if ((e = native_fs_ids(0, 0, true)) < 0)
                abort(); /* a server thread stuck with the sandbox's ids must not go on */
        return r;
}

int native_copy_out(cm_backend *b, const char *id, const char *container_path, const cm_host_path *dst,
                    cm_copy_stats *ret, cm_err *err) {
        cleanup_close int root = -1;
        if (native_open_root((native *)b, id, "copy_files", &root, err) < 0)
                return -1;
        return cm_copy_root_to_host(root, container_path, dst->root, dst->rel, COPY_MAX_BYTES, ret, err);
}
