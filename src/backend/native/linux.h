/* Linux specifics in one place: raw syscall wrappers glibc lacks (or that
 * must be callable from a raw clone child without touching libc state) and
 * constants older headers miss. */
#ifndef CM_NATIVE_LINUX_H
#define CM_NATIVE_LINUX_H

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

#ifndef __NR_clone3
#define __NR_clone3 435
#endif
#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434
#endif
#ifndef __NR_pidfd_send_signal
#define __NR_pidfd_send_signal 424
#endif
#ifndef __NR_close_range
#define __NR_close_range 436
#endif
#ifndef __NR_mount_setattr
#define __NR_mount_setattr 442
#endif
#ifndef __NR_openat2
#define __NR_openat2 437
#endif
#ifndef RESOLVE_NO_SYMLINKS
#define RESOLVE_NO_SYMLINKS 0x04
#endif
#ifndef __NR_open_tree
#define __NR_open_tree 428
#endif
#ifndef __NR_move_mount
#define __NR_move_mount 429
#endif
#ifndef __NR_fsopen
#define __NR_fsopen 430
#endif
#ifndef __NR_fsconfig
#define __NR_fsconfig 431
#endif
#ifndef __NR_fsmount
#define __NR_fsmount 432
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef MOVE_MOUNT_T_EMPTY_PATH
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif
#ifndef FSCONFIG_SET_STRING
#define FSCONFIG_SET_STRING 1
#define FSCONFIG_CMD_CREATE 6
#endif
#ifndef FSOPEN_CLOEXEC
#define FSOPEN_CLOEXEC 0x00000001
#endif
#ifndef FSMOUNT_CLOEXEC
#define FSMOUNT_CLOEXEC 0x00000001
#endif
#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif
#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH 0x1000
#endif
#ifndef __NR_pivot_root
#define __NR_pivot_root 155
#endif

#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
#define MOUNT_ATTR_NOEXEC 0x00000008
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* The kernel's struct clone_args, version 2 (with .cgroup). */
struct cm_clone_args {
        uint64_t flags;
        uint64_t pidfd;
        uint64_t child_tid;
        uint64_t parent_tid;
        uint64_t exit_signal;
        uint64_t stack;
        uint64_t stack_size;
        uint64_t tls;
        uint64_t set_tid;
        uint64_t set_tid_size;
        uint64_t cgroup;
};

struct cm_mount_attr {
        uint64_t attr_set;
        uint64_t attr_clr;
        uint64_t propagation;
        uint64_t userns_fd;
};

struct cm_open_how {
        uint64_t flags;
        uint64_t mode;
        uint64_t resolve;
};

/* All of these return -1 with errno set, like libc. */
static inline pid_t sys_clone3(struct cm_clone_args *args) { return (pid_t)syscall(__NR_clone3, args, sizeof *args); }

static inline int sys_pidfd_open(pid_t pid, unsigned flags) { return (int)syscall(__NR_pidfd_open, pid, flags); }

static inline int sys_pidfd_send_signal(int pidfd, int sig) {
        return (int)syscall(__NR_pidfd_send_signal, pidfd, sig, NULL, 0);
}

static inline int sys_close_range(unsigned first, unsigned last, unsigned flags) {
        return (int)syscall(__NR_close_range, first, last, flags);
}

static inline int sys_mount_setattr(int dfd, const char *path, unsigned flags, struct cm_mount_attr *attr) {
        return (int)syscall(__NR_mount_setattr, dfd, path, flags, attr, sizeof *attr);
}

static inline int sys_openat2(int dfd, const char *path, struct cm_open_how *how) {
        return (int)syscall(__NR_openat2, dfd, path, how, sizeof *how);
}

/* The new mount API (Linux 5.2): a mount made (and idmapped, 5.12) by the
 * server, detached, then attached by the sandbox's child in its own mount
 * namespace. */
static inline int sys_open_tree(int dfd, const char *path, unsigned flags) {
        return (int)syscall(__NR_open_tree, dfd, path, flags);
}

static inline int sys_move_mount(int from_dfd, const char *from, int to_dfd, const char *to, unsigned flags) {
        return (int)syscall(__NR_move_mount, from_dfd, from, to_dfd, to, flags);
}

static inline int sys_fsopen(const char *fs, unsigned flags) { return (int)syscall(__NR_fsopen, fs, flags); }

static inline int sys_fsconfig(int fd, unsigned cmd, const char *key, const void *value, int aux) {
        return (int)syscall(__NR_fsconfig, fd, cmd, key, value, aux);
}

static inline int sys_fsmount(int fd, unsigned flags, unsigned attr) {
        return (int)syscall(__NR_fsmount, fd, flags, attr);
}

static inline int sys_pivot_root(const char *new_root, const char *put_old) {
        return (int)syscall(__NR_pivot_root, new_root, put_old);
}

/* The errno-preserving write of a whole small buffer, for the child. */
static inline int write_all(int fd, const void *buf, size_t len) {
        const char *p = buf;
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return -1;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

#endif
