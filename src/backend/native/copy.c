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
static int open_root(native *n, const char *id, int *ret_fd, cm_err *err) {
        nstate s = {0};
        int r;
        if (state_load(n, id, &s, err) < 0)
                return -1;
        if (strcmp(s.state, "running") != 0)
                r = cm_err_set(err, ESRCH, "container %s is not running; copy_files needs a running container "
                               "(start one with run_container)", id);
        else
                r = native_root_fd(&s, ret_fd, err);
        state_free(&s);
        return r;
}

int native_copy_in(cm_backend *b, const char *id, const cm_host_path *src, const char *container_path,
                   cm_copy_stats *ret, cm_err *err) {
        cleanup_close int root = -1;
        if (open_root((native *)b, id, &root, err) < 0)
                return -1;
        return cm_copy_host_to_root(src->root, src->rel, root, container_path, COPY_MAX_BYTES, ret, err);
}

int native_copy_out(cm_backend *b, const char *id, const char *container_path, const cm_host_path *dst,
                    cm_copy_stats *ret, cm_err *err) {
        cleanup_close int root = -1;
        if (open_root((native *)b, id, &root, err) < 0)
                return -1;
        return cm_copy_root_to_host(root, container_path, dst->root, dst->rel, COPY_MAX_BYTES, ret, err);
}
