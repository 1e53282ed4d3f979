/* copy_in / copy_out: the container's files are reached through
 * /proc/<init>/root, and every path inside it resolves as if that were /
 * (util/copy.c), so a symlink in the container cannot point the copy at the
 * host. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "util/cleanup.h"

#define COPY_MAX_BYTES ((uint64_t)1 << 30)

/* The root of a running container (native_root_fd: through
 * /proc/<init>/root as root; from the init itself without CAP_SYS_PTRACE,
 * since the init is not dumpable). */
static int open_root(native *n, const char *id, int *ret_fd, pid_t *ret_init, cm_err *err) {
        nstate s = {0};
        int r;
        if (state_load(n, id, &s, err) < 0)
                return -1;
        if (strcmp(s.state, "running") != 0)
                r = cm_err_set(err, ESRCH, "container %s is not running; copy_files needs a running container "
                               "(start one with run_container)", id);
        else
                r = native_root_fd(&s, ret_fd, err);
        *ret_init = s.init_pid;
        state_free(&s);
        return r;
}

/* The host id that is 0 inside, from one of the init's id maps; -1 when
 * 0 is not mapped (or the map cannot be read). */
static long outer_root(pid_t init, const char *which) {
        char path[64], buf[512];
        long inside, outside, count;
        int n;
        (void)snprintf(path, sizeof path, "/proc/%d/%s", (int)init, which);
        n = read_file(path, buf, sizeof buf);
        for (char *line = n > 0 ? buf : NULL; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
                if (sscanf(line, "%ld %ld %ld", &inside, &outside, &count) == 3 && inside == 0 && count > 0)
                        return outside;
        return -1;
}

/* Files copied in belong to the container's root, as `docker cp` makes
 * them: with a user namespace that is a host id other than ours. */
static bool container_root_owner(pid_t init, cm_copy_owner *ret) {
        long uid = outer_root(init, "uid_map"), gid = outer_root(init, "gid_map");
        if (uid < 0 || gid < 0 || ((uid_t)uid == geteuid() && (gid_t)gid == getegid()))
                return false;
        *ret = (cm_copy_owner){(uid_t)uid, (gid_t)gid};
        return true;
}

int native_copy_in(cm_backend *b, const char *id, const cm_host_path *src, const char *container_path,
                   cm_copy_stats *ret, cm_err *err) {
        cleanup_close int root = -1;
        cm_copy_owner owner;
        pid_t init = 0;
        if (open_root((native *)b, id, &root, &init, err) < 0)
                return -1;
        return cm_copy_host_to_root(src->root, src->rel, root, container_path, COPY_MAX_BYTES,
                                    container_root_owner(init, &owner) ? &owner : NULL, ret, err);
}

int native_copy_out(cm_backend *b, const char *id, const char *container_path, const cm_host_path *dst,
                    cm_copy_stats *ret, cm_err *err) {
        cleanup_close int root = -1;
        pid_t init = 0;
        if (open_root((native *)b, id, &root, &init, err) < 0)
                return -1;
        return cm_copy_root_to_host(root, container_path, dst->root, dst->rel, COPY_MAX_BYTES, ret, err);
}
