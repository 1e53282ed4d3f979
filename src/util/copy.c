#include "util/copy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/cleanup.h"

#define MAX_DEPTH 256

typedef struct copier {
        uint64_t max_bytes;
        unsigned flags;
        cm_copy_stats *st;
        cm_err *err;
} copier;

bool cm_fd_is_pseudo(int fd) {
        static const unsigned long pseudo[] = {
                PROC_SUPER_MAGIC,  SYSFS_MAGIC,       DEVPTS_SUPER_MAGIC, CGROUP_SUPER_MAGIC,  CGROUP2_SUPER_MAGIC,
                DEBUGFS_MAGIC,     TRACEFS_MAGIC,     SECURITYFS_MAGIC,   BPF_FS_MAGIC,        SELINUX_MAGIC,
                SMACK_MAGIC,       EFIVARFS_MAGIC,    PSTOREFS_MAGIC,     BINFMTFS_MAGIC,      0x62656570 /* configfs */,
                0x65735543 /* fusectl */, 0x19800202 /* mqueue */, NSFS_MAGIC,
        };
        /* devtmpfs reports tmpfs's magic; what it holds are device nodes,
         * which a copy never opens (skipped). */
        struct statfs sf;
        if (fstatfs(fd, &sf) < 0)
                return true; /* cannot tell: treat as not ours to read */
        for (size_t i = 0; i < sizeof pseudo / sizeof pseudo[0]; i++)
                if ((unsigned long)sf.f_type == pseudo[i])
                        return true;
        return false;
}

/* A directory or file of the container side on a pseudo-filesystem: the
 * path the caller named is refused; one met deeper in a tree is skipped. */
static int pseudo_side(copier *c, int fd, bool src_side, const char *name, int depth, bool *ret_skip) {
        *ret_skip = false;
        if (!(c->flags & (src_side ? CM_COPY_SRC_REAL : CM_COPY_DST_REAL)) || !cm_fd_is_pseudo(fd))
                return 0;
        if (depth > 0) {
                c->st->skipped++;
                *ret_skip = true;
                return 0;
        }
        return cm_err_set(c->err, EPERM,
                          "copy: %s is on a pseudo-filesystem (/proc, /sys, /dev or the like) of the container; "
                          "those describe the kernel, not files, and are never copied. Read it with "
                          "exec_in_container (e.g. cat) instead",
                          name);
}


static int copy_entry(copier *c, int src_dir, const char *src, int dst_dir, const char *dst, int depth);

/* Remove what stands at dst unless it is a directory (merged into). */
static int clear_dst(copier *c, int dst_dir, const char *dst, bool want_dir) {
        struct stat st;
        if (fstatat(dst_dir, dst, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : cm_err_sys(c->err, errno, "copy: %s", dst);
        if (S_ISDIR(st.st_mode)) {
                if (want_dir)
                        return 0;
                return cm_err_set(c->err, EISDIR, "copy: %s is a directory at the destination; remove it first",
                                  dst);
        }
        if (unlinkat(dst_dir, dst, 0) < 0)
                return cm_err_sys(c->err, errno, "copy: replacing %s", dst);
        return 0;
}

static int copy_data(copier *c, int in, int out, const char *name) {
        char buf[64 * 1024];
        for (;;) {
                ssize_t n = read(in, buf, sizeof buf), w = 0;
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return cm_err_sys(c->err, errno, "copy: reading %s", name);
                if (n == 0)
                        return 0;
                if (c->st->bytes + (uint64_t)n > c->max_bytes)
                        return cm_err_set(c->err, EFBIG,
                                          "copy: more than %llu MiB; copy less at a time (a subdirectory, or an "
                                          "archive made with exec_in_container)",
                                          (unsigned long long)(c->max_bytes >> 20));
                while (w < n) {
                        ssize_t k = write(out, buf + w, (size_t)(n - w));
                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k < 0)
                                return cm_err_sys(c->err, errno, "copy: writing %s", name);
                        w += k;
                }
                c->st->bytes += (uint64_t)n;
        }
}

static int copy_file(copier *c, int src_dir, const char *src, int dst_dir, const char *dst, mode_t mode, uid_t uid,
                     gid_t gid, int depth) {
        cleanup_close int in = openat(src_dir, src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        cleanup_close int out = -1;
        bool skip;
        if (in < 0)
                return cm_err_sys(c->err, errno, "copy: opening %s", src);
        if (pseudo_side(c, in, true, src, depth, &skip) < 0 || skip)
                return skip ? 0 : -1;
        if (pseudo_side(c, dst_dir, false, dst, depth, &skip) < 0 || skip)
                return skip ? 0 : -1;
        if (clear_dst(c, dst_dir, dst, false) < 0)
                return -1;
        /* O_EXCL|O_NOFOLLOW: a symlink raced in after clear_dst fails here. */
        out = openat(dst_dir, dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return cm_err_sys(c->err, errno, "copy: creating %s", dst);
        if (copy_data(c, in, out, src) < 0)
                return -1;
        if ((c->flags & CM_COPY_OWNERS) && fchown(out, uid, gid) < 0)
                return cm_err_sys(c->err, errno, "copy: chown %s", dst);
        if (fchmod(out, mode & 0777 & ~(mode_t)(S_ISUID | S_ISGID)) < 0)
                return cm_err_sys(c->err, errno, "copy: chmod %s", dst);
        c->st->files++;
        return 0;
}

static int copy_symlink(copier *c, int src_dir, const char *src, int dst_dir, const char *dst, uid_t uid, gid_t gid) {
        char target[PATH_MAX];
        ssize_t n = readlinkat(src_dir, src, target, sizeof target - 1);
        if (n < 0)
                return cm_err_sys(c->err, errno, "copy: reading link %s", src);
        target[n] = 0;
        if (clear_dst(c, dst_dir, dst, false) < 0)
                return -1;
        if (symlinkat(target, dst_dir, dst) < 0)
                return cm_err_sys(c->err, errno, "copy: creating link %s", dst);
        if ((c->flags & CM_COPY_OWNERS) && fchownat(dst_dir, dst, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
                return cm_err_sys(c->err, errno, "copy: chown link %s", dst);
        c->st->symlinks++;
        return 0;
}

static int copy_dir(copier *c, int src_dir, const char *src, int dst_dir, const char *dst, const struct stat *sst,
                    int depth) {
        cleanup_close int sd = -1, dd = -1;
        DIR *d;
        struct dirent *e;
        bool skip;
        int r = 0;
        if (depth > MAX_DEPTH)
                return cm_err_set(c->err, ELOOP, "copy: directories nested more than %d deep", MAX_DEPTH);
        sd = openat(src_dir, src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sd < 0)
                return cm_err_sys(c->err, errno, "copy: opening directory %s", src);
        if (pseudo_side(c, sd, true, src, depth, &skip) < 0 || skip)
                return skip ? 0 : -1;
        if (pseudo_side(c, dst_dir, false, dst, depth, &skip) < 0 || skip)
                return skip ? 0 : -1;
        if (clear_dst(c, dst_dir, dst, true) < 0)
                return -1;
        if (mkdirat(dst_dir, dst, 0700) < 0 && errno != EEXIST)
                return cm_err_sys(c->err, errno, "copy: creating directory %s", dst);
        dd = openat(dst_dir, dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dd < 0)
                return cm_err_sys(c->err, errno, "copy: opening directory %s", dst);
        /* a pseudo-filesystem mounted on an existing directory */
        if (pseudo_side(c, dd, false, dst, depth, &skip) < 0 || skip)
                return skip ? 0 : -1;
        d = fdopendir(take_fd(&sd));
        if (!d)
                return cm_err_sys(c->err, errno, "copy: reading directory %s", src);
        while (r == 0 && (errno = 0, e = readdir(d))) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                r = copy_entry(c, dirfd(d), e->d_name, dd, e->d_name, depth + 1);
        }
        if (r == 0 && errno)
                r = cm_err_sys(c->err, errno, "copy: reading directory %s", src);
        (void)closedir(d);
        if (r == 0 && (c->flags & CM_COPY_OWNERS) && fchown(dd, sst->st_uid, sst->st_gid) < 0)
                r = cm_err_sys(c->err, errno, "copy: chown %s", dst);
        if (r == 0 && fchmod(dd, sst->st_mode & 01777) < 0)
                r = cm_err_sys(c->err, errno, "copy: chmod %s", dst);
        c->st->dirs += r == 0;
        return r;
}

static int copy_entry(copier *c, int src_dir, const char *src, int dst_dir, const char *dst, int depth) {
        struct stat st;
        if (fstatat(src_dir, src, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return cm_err_sys(c->err, errno, "copy: %s", src);
        if (S_ISREG(st.st_mode))
                return copy_file(c, src_dir, src, dst_dir, dst, st.st_mode, st.st_uid, st.st_gid, depth);
        if (S_ISLNK(st.st_mode))
                return copy_symlink(c, src_dir, src, dst_dir, dst, st.st_uid, st.st_gid);
        if (S_ISDIR(st.st_mode))
                return copy_dir(c, src_dir, src, dst_dir, dst, &st, depth);
        c->st->skipped++; /* devices, FIFOs, sockets */
        return 0;
}

int cm_copy_tree_flags(int src_dir, const char *src_name, int dst_dir, const char *dst_name, uint64_t max_bytes,
                       unsigned flags, cm_copy_stats *stats, cm_err *err) {
        copier c = {max_bytes, flags, stats, err};
        return copy_entry(&c, src_dir, src_name, dst_dir, dst_name, 0);
}

/* A copy with one side in a container: the directories holding both ends
 * are checked too (/proc/self is a symlink in one). */
static int copy_tree_real(int src_dir, const char *src_name, int dst_dir, const char *dst_name, uint64_t max_bytes,
                          unsigned flags, cm_copy_stats *stats, cm_err *err) {
        copier c = {max_bytes, flags, stats, err};
        bool skip;
        if (pseudo_side(&c, src_dir, true, src_name, 0, &skip) < 0 ||
            pseudo_side(&c, dst_dir, false, dst_name, 0, &skip) < 0)
                return -1;
        return copy_entry(&c, src_dir, src_name, dst_dir, dst_name, 0);
}

int cm_copy_tree(int src_dir, const char *src_name, int dst_dir, const char *dst_name, uint64_t max_bytes,
                 cm_copy_stats *stats, cm_err *err) {
        return cm_copy_tree_flags(src_dir, src_name, dst_dir, dst_name, max_bytes, 0, stats, err);
}

int cm_is_dir_at(int dir, const char *name) {
        struct stat st;
        return fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

static int openat2_dir(int root, const char *path, uint64_t resolve) {
        struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC, .resolve = resolve};
        return (int)syscall(SYS_openat2, root, path, &how, sizeof how);
}

/* Without openat2 (Linux < 5.6): walk the components with O_NOFOLLOW, which
 * refuses any symlink on the way: stricter, never looser. */
static int walk_nofollow(int root, const char *path) {
        cleanup_free char *copy = xstrdup(path);
        char *save = NULL;
        int fd = fcntl(root, F_DUPFD_CLOEXEC, 3);
        for (char *p = strtok_r(copy, "/", &save); p && fd >= 0; p = strtok_r(NULL, "/", &save)) {
                int next;
                if (strcmp(p, "..") == 0) {
                        (void)close(fd);
                        errno = EXDEV;
                        return -1;
                }
                next = openat(fd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                (void)close(fd);
                fd = next;
        }
        return fd;
}

int cm_open_parent_at(int root_fd, const char *path, bool in_root, int *ret_fd, char **ret_name, cm_err *err) {
        cleanup_free char *dir = NULL;
        const char *slash, *name;
        int fd;
        while (path[0] == '/' && path[1] == '/')
                path++;
        slash = strrchr(path, '/');
        name = slash ? slash + 1 : path;
        if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                return cm_err_set(err, EINVAL, "path \"%s\" must name a file or directory (not end in /, . or ..)",
                                  path);
        dir = slash ? xstrndup(path, (size_t)(slash - path)) : xstrdup(".");
        if (!*dir) {
                free(dir);
                dir = xstrdup("/");
        }
        /* In a container: resolve as if root_fd were /.  On the host: the
         * path is canonical, so any symlink now is one swapped in since the
         * policy check, and is refused. */
        fd = openat2_dir(root_fd, dir,
                         in_root ? RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS : RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
        if (fd < 0 && errno == ENOSYS)
                fd = walk_nofollow(root_fd, dir);
        if (fd < 0)
                return cm_err_sys(err, errno, "cannot open directory %s", dir);
        *ret_fd = fd;
        *ret_name = xstrdup(name);
        return 0;
}

/* The directory holding an allowed host path, and the path's last name.
 * The root itself (rel "") is taken from its parent. */
static int open_host_parent(const char *root, const char *rel, int *ret_fd, char **ret_name, cm_err *err) {
        cleanup_close int rfd = -1;
        if (!*rel) {
                const char *slash = strrchr(root, '/');
                cleanup_free char *parent = slash && slash != root ? xstrndup(root, (size_t)(slash - root)) : xstrdup("/");
                if (!slash || !slash[1])
                        return cm_err_set(err, EINVAL, "cannot copy /");
                *ret_fd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (*ret_fd < 0)
                        return cm_err_sys(err, errno, "cannot open %s", parent);
                *ret_name = xstrdup(slash + 1);
                return 0;
        }
        rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rfd < 0)
                return cm_err_sys(err, errno, "cannot open %s", root);
        return cm_open_parent_at(rfd, rel, false, ret_fd, ret_name, err);
}

/* Onto an existing directory, a copy lands inside it under its own name. */
static int into_dir(int *dst_dir, char **dst_name, const char *src_name, cm_err *err) {
        int fd;
        if (!cm_is_dir_at(*dst_dir, *dst_name))
                return 0;
        fd = openat(*dst_dir, *dst_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return cm_err_sys(err, errno, "cannot open directory %s", *dst_name);
        (void)close(*dst_dir);
        *dst_dir = fd;
        free(*dst_name);
        *dst_name = xstrdup(src_name);
        return 0;
}

int cm_copy_host_to_root(const char *host_root, const char *host_rel, int root_fd, const char *path,
                         uint64_t max_bytes, cm_copy_stats *st, cm_err *err) {
        cleanup_close int sdir = -1, ddir = -1;
        cleanup_free char *sname = NULL, *dname = NULL;
        if (open_host_parent(host_root, host_rel, &sdir, &sname, err) < 0 ||
            cm_open_parent_at(root_fd, path, true, &ddir, &dname, err) < 0 || into_dir(&ddir, &dname, sname, err) < 0)
                return -1;
        return copy_tree_real(sdir, sname, ddir, dname, max_bytes, CM_COPY_DST_REAL, st, err);
}

int cm_copy_root_to_host(int root_fd, const char *path, const char *host_root, const char *host_rel,
                         uint64_t max_bytes, cm_copy_stats *st, cm_err *err) {
        cleanup_close int sdir = -1, ddir = -1;
        cleanup_free char *sname = NULL, *dname = NULL;
        if (cm_open_parent_at(root_fd, path, true, &sdir, &sname, err) < 0)
                return -1;
        if (!*host_rel) {
                ddir = open(host_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (ddir < 0)
                        return cm_err_sys(err, errno, "cannot open %s", host_root);
                dname = xstrdup(sname);
        } else if (open_host_parent(host_root, host_rel, &ddir, &dname, err) < 0 ||
                   into_dir(&ddir, &dname, sname, err) < 0) {
                return -1;
        }
        return copy_tree_real(sdir, sname, ddir, dname, max_bytes, CM_COPY_SRC_REAL, st, err);
}
