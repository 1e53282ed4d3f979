/* Copying files and trees between directories that do not trust each other
 * (a container's root and an allowed host directory).
 *
 * Everything is opened relative to directory fds with O_NOFOLLOW: a symlink
 * in the source is copied as a symlink, never followed, and a symlink in the
 * destination is never written through.  setuid/setgid bits are dropped,
 * device nodes, FIFOs and sockets are skipped (and counted). */
#ifndef CM_COPY_H
#define CM_COPY_H

#include <stdbool.h>
#include <stdint.h>

#include "util/err.h"

typedef struct cm_copy_stats {
        uint64_t files, dirs, symlinks, skipped, bytes;
} cm_copy_stats;

/* Copy `src_name` (an entry of src_dir: file, directory or symlink) to
 * `dst_name` in dst_dir, like `cp -a` without owners.  An existing
 * destination file or symlink is replaced; an existing directory is merged
 * into.  Stops with an error once more than `max_bytes` would be written. */
int cm_copy_tree(int src_dir, const char *src_name, int dst_dir, const char *dst_name, uint64_t max_bytes,
                 cm_copy_stats *stats, cm_err *err);

/* cm_copy_tree's flags. */
enum {
        CM_COPY_OWNERS = 1 << 0,     /* keep each entry's owner and group (needs
                                        CAP_CHOWN: root copying an image) */
        CM_COPY_SRC_REAL = 1 << 1,   /* the source side is a container's: no
                                        pseudo-filesystem (cm_fd_is_pseudo) */
        CM_COPY_DST_REAL = 1 << 2,   /* the same for the destination side */
};

/* True when fd lies on a pseudo-filesystem (procfs, sysfs, devtmpfs,
 * cgroupfs, debugfs, tracefs, securityfs, bpf, ...): files that describe
 * the kernel or a process rather than hold data, and that the server must
 * never read or write with its own credentials on a container's behalf. */
bool cm_fd_is_pseudo(int fd);

/* cm_copy_tree with flags. */
int cm_copy_tree_flags(int src_dir, const char *src_name, int dst_dir, const char *dst_name, uint64_t max_bytes,
                       unsigned flags, cm_copy_stats *stats, cm_err *err);

/* Open the directory holding `path` (its last component goes to
 * *ret_name, owned by the caller).  in_root: resolve `path` as if root_fd
 * were "/" (RESOLVE_IN_ROOT: symlinks and .. cannot leave it; for a
 * container, root_fd is /proc/PID/root).  Otherwise `path` is relative and
 * canonical below root_fd, and any symlink met (one swapped in since the
 * policy check) is refused (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS). */
int cm_open_parent_at(int root_fd, const char *path, bool in_root, int *ret_fd, char **ret_name, cm_err *err);

/* Copy between an allowed host path (root + rel below it, as policy gives
 * it) and `path` inside the root directory root_fd (a container's
 * /proc/PID/root), like `docker cp`: onto an existing directory the copy
 * lands inside it.  The container side never touches a pseudo-filesystem:
 * a path on one is refused, and one met inside a copied tree (the
 * container's /proc under /) is skipped and counted.  What a copy makes
 * belongs to the caller's fs ids (the native backend takes the sandbox
 * root's for a copy in). */
int cm_copy_host_to_root(const char *host_root, const char *host_rel, int root_fd, const char *path,
                         uint64_t max_bytes, cm_copy_stats *st, cm_err *err);
int cm_copy_root_to_host(int root_fd, const char *path, const char *host_root, const char *host_rel,
                         uint64_t max_bytes, cm_copy_stats *st, cm_err *err);

/* Whether `name` exists in `dir` as a directory (not through a symlink). */
int cm_is_dir_at(int dir, const char *name);

#endif
