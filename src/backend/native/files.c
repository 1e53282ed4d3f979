/* The file tools on the native backend.  The server does them itself,
 * without starting a process: every path is opened through the
 * container's root (native_root_fd) and resolved as if that root were /
 * (openat2 RESOLVE_IN_ROOT, as copy_files does, util/copy.c), so `..`, an
 * absolute symlink or one swapped in between two calls cannot lead out of
 * it, and magic links (/proc/N/root) are refused.  Pseudo-filesystems are
 * never touched (cm_fd_is_pseudo).
 *
 * A root server acts as the sandbox's root for the whole operation (fs
 * ids, no supplementary groups, no DAC capability): what it writes belongs
 * to the sandbox, and what the sandbox may not read, it does not read
 * either.  A rootless server already is the sandbox's root. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <grp.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "util/cleanup.h"

#define LIST_MAX_DEPTH 64

/* What an operation holds: the container's root, and the server's groups
 * to give back when it acted as the sandbox. */
typedef struct fop {
        native *n;
        int root;
        bool as_sandbox;
        gid_t *groups;
        int n_groups;
} fop;

/* Root server: this thread becomes the sandbox's root on the host (fs ids
 * = the range's base) with no supplementary group and no capability over
 * files.  Per thread: raw syscalls, undone by fop_end. */
static int as_sandbox(fop *f, cm_err *err) {
        int n = getgroups(0, NULL), e;
        if (n < 0)
                return cm_err_sys(err, errno, "file: reading the server's groups");
        f->groups = xcalloc((size_t)n + 1, sizeof *f->groups);
        if ((f->n_groups = getgroups(n, f->groups)) < 0)
                return cm_err_sys(err, errno, "file: reading the server's groups");
        if (syscall(SYS_setgroups, 0, NULL) < 0)
                return cm_err_sys(err, errno, "file: cannot drop the server's groups");
        f->as_sandbox = true;
        if ((e = native_fs_ids(f->n->map_uid, f->n->map_gid, false)) < 0)
                return cm_err_sys(err, -e, "file: cannot act as the sandbox's root (host uid %u)",
                                  (unsigned)f->n->map_uid);
        return 0;
}

static void fop_end(fop *f) {
        if (f->as_sandbox && (native_fs_ids(0, 0, true) < 0 || syscall(SYS_setgroups, f->n_groups, f->groups) < 0))
                abort(); /* a server thread stuck with the sandbox's ids must not go on */
        free(f->groups);
        if (f->root >= 0)
                (void)close(f->root);
        *f = (fop){.root = -1};
}

#define cleanup_fop __attribute__((cleanup(fop_end)))

static int fop_begin(cm_backend *b, const char *id, const char *tool, fop *f, cm_err *err) {
        *f = (fop){.n = (native *)b, .root = -1};
        if (native_open_root(f->n, id, tool, &f->root, err) < 0)
                return -1;
        return f->n->rootless ? 0 : as_sandbox(f, err);
}

static int pseudo_refused(int fd, const char *path, cm_err *err) {
        if (!cm_fd_is_pseudo(fd))
                return 0;
        return cm_err_set(err, EPERM,
                          "%s is on a pseudo-filesystem (/proc, /sys or the like) of the container; those describe "
                          "the kernel, not files, and the file tools never touch them. Read it with "
                          "system_run_command (e.g. cat) instead",
                          path);
}

/* `path` (absolute in the container) opened as if root were /.  Without
 * openat2 (Linux < 5.6): the parent walked with O_NOFOLLOW (any symlink
 * refused, cm_open_parent_at) and the last name not followed. */
static int open_in_root(int root, const char *path, int flags, cm_err *err) {
        struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
                               .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
        cleanup_close int dir = -1;
        cleanup_free char *name = NULL;
        int fd = (int)syscall(SYS_openat2, root, path, &how, sizeof how);
        if (fd >= 0 || errno != ENOSYS)
                return fd >= 0 ? fd : cm_err_sys(err, errno, "%s", path);
        if (strspn(path, "/") == strlen(path))
                return fcntl(root, F_DUPFD_CLOEXEC, 3);
        if (cm_open_parent_at(root, path, true, &dir, &name, err) < 0)
                return -1;
        fd = openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC);
        return fd >= 0 ? fd : cm_err_sys(err, errno, "%s", path);
}

static double mtime_of(const struct stat *st) { return (double)st->st_mtim.tv_sec + st->st_mtim.tv_nsec / 1e9; }

static int read_all(int fd, uint64_t max, cm_file_data *ret, const char *path, cm_err *err) {
        size_t cap = 4096, len = 0;
        cleanup_free char *buf = xmalloc(cap + 1);
        for (;;) {
                ssize_t k;
                if (len == cap) {
                        cap *= 2;
                        buf = xrealloc(buf, cap + 1);
                }
                k = read(fd, buf + len, cap - len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return cm_err_sys(err, errno, "reading %s", path);
                if (k == 0)
                        break;
                len += (size_t)k;
                if (len > max) { /* it grew since fstat */
                        ret->size = len;
                        return cm_err_set(err, EFBIG, "%s is over the limit of %llu bytes", path,
                                          (unsigned long long)max);
                }
        }
        buf[len] = 0;
        ret->data = steal_pointer(&buf);
        ret->len = len;
        return 0;
}

int native_file_read(cm_backend *b, const char *id, const char *path, uint64_t max_bytes, cm_file_data *ret,
                     cm_err *err) {
        cleanup_fop fop f;
        cleanup_close int pfd = -1, fd = -1;
        char self[64];
        struct stat st;
        if (fop_begin(b, id, "file_read", &f, err) < 0 || (pfd = open_in_root(f.root, path, O_PATH, err)) < 0)
                return -1;
        if (fstat(pfd, &st) < 0)
                return cm_err_sys(err, errno, "%s", path);
        if (S_ISDIR(st.st_mode))
                return cm_err_set(err, EISDIR, "%s is a directory; list it with file_list", path);
        if (pseudo_refused(pfd, path, err) < 0)
                return -1;
        if (!S_ISREG(st.st_mode))
                return cm_err_set(err, EINVAL,
                                  "%s is not a regular file (a device, FIFO or socket); file_read reads "
                                  "files only",
                                  path);
        if ((uint64_t)st.st_size > max_bytes) {
                ret->size = (uint64_t)st.st_size;
                return cm_err_set(err, EFBIG, "%s is %llu bytes, over the limit of %llu", path,
                                  (unsigned long long)st.st_size, (unsigned long long)max_bytes);
        }
        /* Reopen the very inode checked above (no second path walk), with
         * the access check of the sandbox's root. */
        (void)snprintf(self, sizeof self, "/proc/self/fd/%d", pfd);
        fd = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return cm_err_sys(err, errno, "opening %s", path);
        if (read_all(fd, max_bytes, ret, path, err) < 0)
                return -1;
        ret->size = ret->len;
        ret->modified = mtime_of(&st);
        return 0;
}

/* Each missing directory above `path`, made (0755) in its parent as
 * resolved in the root, one at a time. */
static int make_parents(int root, const char *path, cm_err *err) {
        cleanup_free char *dir = xstrdup(path);
        cleanup_close int prev = -1;
        char *slash = strrchr(dir, '/'), *p;
        if (!slash || slash == dir)
                return 0;
        *slash = 0;
        if ((prev = fcntl(root, F_DUPFD_CLOEXEC, 3)) < 0)
                return cm_err_sys(err, errno, "file: dup");
        for (p = dir + 1; p;) {
                char *end = strchr(p, '/');
                cm_err quiet = CM_ERR_INIT;
                int fd;
                if (end)
                        *end = 0;
                fd = open_in_root(root, dir, O_PATH | O_DIRECTORY, &quiet);
                if (fd < 0 && quiet.code == ENOENT && *p) {
                        if (pseudo_refused(prev, dir, err) < 0)
                                return -1;
                        if (mkdirat(prev, p, 0755) < 0 && errno != EEXIST)
                                return cm_err_sys(err, errno, "creating directory %s", dir);
                        fd = open_in_root(root, dir, O_PATH | O_DIRECTORY, err);
                } else if (fd < 0) {
                        *err = quiet;
                }
                if (fd < 0)
                        return -1;
                (void)close(prev);
                prev = fd;
                if (end)
                        *end = '/';
                p = end ? end + 1 : NULL;
        }
        return 0;
}

/* The parent of `path` (resolved in the root, not a pseudo-filesystem)
 * and its last name. */
static int open_parent(int root, const char *path, int *ret_fd, char **ret_name, cm_err *err) {
        if (cm_open_parent_at(root, path, true, ret_fd, ret_name, err) < 0)
                return -1;
        if (pseudo_refused(*ret_fd, path, err) < 0) {
                (void)close(take_fd(ret_fd));
                free(steal_pointer(ret_name));
                return -1;
        }
        return 0;
}

static int write_all(int fd, const char *data, size_t len) {
        while (len) {
                ssize_t k = write(fd, data, len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                data += k;
                len -= (size_t)k;
        }
        return 0;
}

/* The mode the new file takes: the replaced file's (without setuid and
 * setgid), else 0644. */
static int mode_for(int dir, const char *name, const char *path, mode_t *ret, cm_err *err) {
        struct stat st;
        *ret = 0644;
        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : cm_err_sys(err, errno, "%s", path);
        if (S_ISDIR(st.st_mode))
                return cm_err_set(err, EISDIR, "%s is a directory; give a file's path", path);
        if (S_ISREG(st.st_mode))
                *ret = st.st_mode & 01777;
        return 0;
}

static int write_tmp(int dir, const char *tmp, const char *data, size_t len, mode_t mode, const char *path,
                     cm_err *err) {
        cleanup_close int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        int e;
        if (fd < 0)
                return cm_err_sys(err, errno, "writing %s (its temporary file)", path);
        if ((e = write_all(fd, data, len)) < 0 || (fchmod(fd, mode) < 0 && (e = -errno)))
                return cm_err_sys(err, -e, "writing %s", path);
        e = close(take_fd(&fd)) < 0 ? -errno : 0;
        return e < 0 && e != -EINTR ? cm_err_sys(err, -e, "writing %s", path) : 0;
}

int native_file_write(cm_backend *b, const char *id, const char *path, const char *data, size_t len, cm_err *err) {
        cleanup_fop fop f;
        cleanup_close int dir = -1;
        cleanup_free char *name = NULL;
        char rnd[17], tmp[32];
        mode_t mode;
        if (fop_begin(b, id, "file_write", &f, err) < 0 || make_parents(f.root, path, err) < 0 ||
            open_parent(f.root, path, &dir, &name, err) < 0 || mode_for(dir, name, path, &mode, err) < 0)
                return -1;
        /* Written beside the file, then renamed over it: a reader sees the
         * old file or the new one, never a part. */
        native_random_id(rnd);
        (void)snprintf(tmp, sizeof tmp, ".cm-write-%s", rnd);
        if (write_tmp(dir, tmp, data, len, mode, path, err) < 0) {
                (void)unlinkat(dir, tmp, 0);
                return -1;
        }
        if (renameat(dir, tmp, dir, name) < 0) {
                int e = errno;
                (void)unlinkat(dir, tmp, 0);
                return cm_err_sys(err, e, "writing %s", path);
        }
        return 0;
}

/* ---- file_list ----------------------------------------------------------- */

typedef struct lister {
        const cm_file_query *q;
        cm_file_entry *v;
        size_t n, cap;
        cm_err *err;
} lister;

static int add_entry(lister *l, const char *dir, const char *name, const struct stat *st) {
        if (l->q->pattern && fnmatch(l->q->pattern, name, FNM_PERIOD) != 0)
                return 0;
        if (l->n == l->q->max_entries)
                return cm_err_set(l->err, E2BIG,
                                  "more than %zu entries; list a subdirectory, or narrow it with "
                                  "pattern or without recursive",
                                  l->q->max_entries);
        if (l->n == l->cap) {
                l->cap = l->cap ? 2 * l->cap : 64;
                l->v = xrealloc(l->v, l->cap * sizeof *l->v);
        }
        l->v[l->n++] = (cm_file_entry){
                .name = xstrdup(name),
                .path = xasprintf("%s%s%s", dir, strcmp(dir, "/") == 0 ? "" : "/", name),
                .is_directory = S_ISDIR(st->st_mode),
                .size = S_ISDIR(st->st_mode) ? 0 : (uint64_t)st->st_size,
                .modified = mtime_of(st),
        };
        return 0;
}

static int list_dir(lister *l, int fd, const char *path, int depth) {
        DIR *d = fdopendir(fd);
        struct dirent *e;
        int r = 0;
        if (!d) {
                (void)close(fd);
                return cm_err_sys(l->err, errno, "reading directory %s", path);
        }
        while (r == 0 && (errno = 0, e = readdir(d))) {
                struct stat st;
                cleanup_free char *sub = NULL;
                int sfd;
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue; /* gone meanwhile */
                r = add_entry(l, path, e->d_name, &st);
                if (r < 0 || !l->q->recursive || !S_ISDIR(st.st_mode) || depth >= LIST_MAX_DEPTH)
                        continue;
                sfd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sfd < 0)
                        continue;           /* not readable by the sandbox, or swapped for a symlink */
                if (cm_fd_is_pseudo(sfd)) { /* the container's /proc under / */
                        (void)close(sfd);
                        continue;
                }
                sub = xasprintf("%s%s%s", path, strcmp(path, "/") == 0 ? "" : "/", e->d_name);
                r = list_dir(l, sfd, sub, depth + 1);
        }
        if (r == 0 && errno)
                r = cm_err_sys(l->err, errno, "reading directory %s", path);
        (void)closedir(d);
        return r;
}

static int by_path(const void *a, const void *b) {
        return strcmp(((const cm_file_entry *)a)->path, ((const cm_file_entry *)b)->path);
}

int native_file_list(cm_backend *b, const char *id, const char *path, const cm_file_query *q, cm_file_entry **ret,
                     size_t *ret_n, cm_err *err) {
        cleanup_fop fop f;
        lister l = {q, NULL, 0, 0, err};
        int fd;
        if (fop_begin(b, id, "file_list", &f, err) < 0 ||
            (fd = open_in_root(f.root, path, O_RDONLY | O_DIRECTORY, err)) < 0)
                return -1;
        if (pseudo_refused(fd, path, err) < 0) {
                (void)close(fd);
                return -1;
        }
        if (list_dir(&l, fd, path, 0) < 0) {
                cm_file_entries_free(l.v, l.n);
                return -1;
        }
        if (l.n) /* an empty directory: no array at all */
                qsort(l.v, l.n, sizeof *l.v, by_path);
        *ret = l.v;
        *ret_n = l.n;
        return 0;
}

/* ---- file_delete, file_move ---------------------------------------------- */

int native_file_delete(cm_backend *b, const char *id, const char *path, cm_err *err) {
        cleanup_fop fop f;
        cleanup_close int dir = -1;
        cleanup_free char *name = NULL;
        struct stat st;
        if (fop_begin(b, id, "file_delete", &f, err) < 0 || open_parent(f.root, path, &dir, &name, err) < 0)
                return -1;
        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return cm_err_sys(err, errno, "%s", path);
        if (unlinkat(dir, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) == 0)
                return 0;
        if (errno == ENOTEMPTY || errno == EEXIST)
                return cm_err_set(err, ENOTEMPTY,
                                  "%s is a directory that is not empty; delete what it holds first "
                                  "(or system_run_command rm -r)",
                                  path);
        return cm_err_sys(err, errno, "deleting %s", path);
}

int native_file_move(cm_backend *b, const char *id, const char *src, const char *dst, cm_err *err) {
        cleanup_fop fop f;
        cleanup_close int sdir = -1, ddir = -1;
        cleanup_free char *sname = NULL, *dname = NULL;
        if (fop_begin(b, id, "file_move", &f, err) < 0 || open_parent(f.root, src, &sdir, &sname, err) < 0 ||
            open_parent(f.root, dst, &ddir, &dname, err) < 0)
                return -1;
        /* Onto an existing directory (not a symlink to one), as mv does. */
        if (cm_is_dir_at(ddir, dname)) {
                int fd = openat(ddir, dname, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return cm_err_sys(err, errno, "%s", dst);
                (void)close(ddir);
                ddir = fd;
                if (pseudo_refused(ddir, dst, err) < 0)
                        return -1;
                free(dname);
                dname = xstrdup(sname);
        }
        if (renameat(sdir, sname, ddir, dname) == 0)
                return 0;
        if (errno == EXDEV)
                return cm_err_set(err, EXDEV,
                                  "%s and %s are on different file systems of the container; copy it "
                                  "(file_read then file_write) and delete the source",
                                  src, dst);
        return cm_err_sys(err, errno, "moving %s to %s", src, dst);
}
