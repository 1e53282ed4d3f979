/* The /etc of the built-in "host" image: a copy of the safe part of the
 * host's /etc, kept in the state dir and bound into each sandbox with one
 * mount (fifty binds of single files cost a millisecond per sandbox, to set
 * up and again to tear down).
 *
 * The copy follows the host: an inotify watch on what was copied tells when
 * to sync again, so checking costs one read() per sandbox.  Files are
 * replaced by rename, so running sandboxes see the new version, as they
 * would through a bind.
 *
 * Left out on purpose: shadow, gshadow, ssh host keys, sudoers, machine-id,
 * subuid/subgid, /etc/ssl/private, and any service's own configuration
 * (which may hold credentials): so are the tools' configs that often hold
 * tokens or proxy passwords (npmrc, pip.conf, gitconfig, wgetrc,
 * environment).  Inside allowed entries, a file or directory that not every
 * host user may read (root-only), and any *.key, "private" or "secret"
 * name, stays out too: the copy never holds what the host keeps private.  /etc/hosts, /etc/hostname and
 * /etc/resolv.conf are symlinks to /run/cm/, which each sandbox fills with
 * its own name and DNS (netstack.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "backend/native/linux.h"
#include "util/cleanup.h"

static const char *const etc_allow[] = {
        "passwd",
        "group",
        "nsswitch.conf",
        "host.conf",
        "gai.conf",
        "networks",
        "protocols",
        "services",
        "ethertypes",
        "rpc",
        "ld.so.cache",
        "ld.so.conf",
        "ld.so.conf.d",
        "alternatives",
        "ssl/certs",
        "ssl/openssl.cnf",
        "ca-certificates",
        "ca-certificates.conf",
        "localtime",
        "timezone",
        "os-release",
        "debian_version",
        "lsb-release",
        "issue",
        "shells",
        "profile",
        "profile.d",
        "bash.bashrc",
        "inputrc",
        "locale.alias",
        "locale.gen",
        "default/locale",
        "mime.types",
        "magic",
        "magic.mime",
        "mailcap",
        "terminfo",
        "fonts",
        "python3",
        "python3.11",
        "python3.12",
        "python3.13",
        "perl",
        "vim",
        "java-17-openjdk",
        "java-21-openjdk",
        "gdb",
        "ssh/ssh_config",
        "ssh/ssh_config.d",
        "xdg",
        "R",
        "login.defs",
        "gnutls",
        "crypto-policies",
        "fpc.cfg",
        "fpc-3.2.2.cfg",
};

/* Bounds on what one entry may bring along, against a pathological /etc. */
#define MAX_FILE_BYTES ((off_t)16 << 20)
#define MAX_DEPTH 8

static int copy_file(int sfd, const struct stat *st, int ddir, const char *name) {
        cleanup_free char *tmp = xasprintf(".%s.cm-tmp", name);
        cleanup_close int dfd = -1;
        struct timespec times[2] = {st->st_atim, st->st_mtim};
        char buf[65536];
        ssize_t n;

        if (st->st_size > MAX_FILE_BYTES)
                return 0;
        dfd = openat(ddir, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, st->st_mode & 0755);
        if (dfd < 0)
                return -errno;
        while ((n = read(sfd, buf, sizeof buf)) > 0)
                if (write_all(dfd, buf, (size_t)n) < 0)
                        return -errno;
        if (n < 0)
                return -errno;
        (void)fchmod(dfd, st->st_mode & 0755);
        (void)futimens(dfd, times);
        if (renameat(ddir, tmp, ddir, name) < 0)
                return -errno;
        return 0;
}

static void remove_tree(int dir, const char *name) {
        int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *d;
        struct dirent *de;

        if (fd >= 0 && (d = fdopendir(fd))) {
                while ((de = readdir(d)))
                        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                                remove_tree(dirfd(d), de->d_name);
                (void)closedir(d);
        } else if (fd >= 0)
                (void)close(fd);
        if (unlinkat(dir, name, AT_REMOVEDIR) < 0)
                (void)unlinkat(dir, name, 0);
}

static int sync_entry(int sdir, int ddir, const char *name, int depth);

/* Make dst a copy of src: entries added or changed are copied, entries gone
 * are removed. */
static int sync_dir(int sfd, int ddir, const char *name, int depth) {
        cleanup_close int dfd = -1;
        DIR *d, *dd;
        struct dirent *de;

        if (depth > MAX_DEPTH)
                return 0;
        if (mkdirat(ddir, name, 0755) < 0 && errno != EEXIST)
                return -errno;
        dfd = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        d = fdopendir(dup(sfd));
        if (!d)
                return -errno;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        (void)sync_entry(dirfd(d), dfd, de->d_name, depth + 1);
        (void)closedir(d);
        /* what the host no longer has */
        dd = fdopendir(dup(dfd));
        if (!dd)
                return -errno;
        while ((de = readdir(dd))) {
                struct stat st;
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                if (fstatat(sfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
                        remove_tree(dfd, de->d_name);
        }
        (void)closedir(dd);
        return 0;
}

/* Watching every copied subdirectory, to the depth we copy. */
static void watch_tree(int ino, const char *path, int depth) {
        DIR *d;
        struct dirent *de;
        if (depth > MAX_DEPTH ||
            inotify_add_watch(ino, path,
                              IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM |
                                      IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF) < 0)
                return;
        if (!(d = opendir(path)))
                return;
        while ((de = readdir(d)))
                if (de->d_type == DT_DIR && strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
                        cleanup_free char *sub = xasprintf("%s/%s", path, de->d_name);
                        watch_tree(ino, sub, depth + 1);
                }
        (void)closedir(d);
}

/* What the host keeps from its other users, or what looks like a key,
 * never enters the copy. */
static bool private_entry(const char *name, const struct stat *st) {
        size_t n = strlen(name);
        if (S_ISREG(st->st_mode) && !(st->st_mode & S_IROTH))
                return true;
        if (S_ISDIR(st->st_mode) && (st->st_mode & (S_IROTH | S_IXOTH)) != (S_IROTH | S_IXOTH))
                return true;
        if (strstr(name, "private") || strstr(name, "secret"))
                return true;
        /* certificates (*.pem, *.crt) are public; keys are not */
        return n > 4 && strcmp(name + n - 4, ".key") == 0;
}

static int sync_entry(int sdir, int ddir, const char *name, int depth) {
        struct stat st, dst;
        char link[4096], old[4096];
        cleanup_close int fd = -1;
        ssize_t n, m;

        if (fstatat(sdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno == ENOENT)
                        remove_tree(ddir, name);
                return 0;
        }
        if (private_entry(name, &st)) {
                remove_tree(ddir, name); /* it may have been readable once */
                return 0;
        }
        if (S_ISLNK(st.st_mode)) {
                n = readlinkat(sdir, name, link, sizeof link - 1);
                if (n < 0)
                        return 0;
                link[n] = 0;
                m = readlinkat(ddir, name, old, sizeof old - 1);
                if (m == n && memcmp(link, old, (size_t)n) == 0)
                        return 0;
                remove_tree(ddir, name);
                return symlinkat(link, ddir, name) < 0 ? -errno : 0;
        }
        if (S_ISDIR(st.st_mode)) {
                fd = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return 0; /* not ours to read */
                if (fstatat(ddir, name, &dst, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(dst.st_mode))
                        remove_tree(ddir, name);
                return sync_dir(fd, ddir, name, depth);
        }
        if (!S_ISREG(st.st_mode))
                return 0;
        if (fstatat(ddir, name, &dst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(dst.st_mode) && dst.st_size == st.st_size &&
            dst.st_mtim.tv_sec == st.st_mtim.tv_sec && dst.st_mtim.tv_nsec == st.st_mtim.tv_nsec)
                return 0;
        fd = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return 0; /* unreadable (rootless): left out */
        if (fstatat(ddir, name, &dst, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(dst.st_mode))
                remove_tree(ddir, name);
        return copy_file(fd, &st, ddir, name);
}

/* Is etc/<path> part of the copy (an allowed entry, or a dir leading to
 * one)? */
static bool allowed(const char *path) {
        static const char *const ours[] = {"hosts", "hostname", "resolv.conf", "mtab"};
        size_t n = strlen(path);
        for (size_t i = 0; i < ARRAY_SIZE(ours); i++)
                if (strcmp(path, ours[i]) == 0)
                        return true;
        for (size_t i = 0; i < ARRAY_SIZE(etc_allow); i++)
                if (strcmp(etc_allow[i], path) == 0 || (strncmp(etc_allow[i], path, n) == 0 && etc_allow[i][n] == '/'))
                        return true;
        return false;
}

/* Drop what an older allowlist copied. */
static void prune(int dir, const char *prefix) {
        DIR *d = fdopendir(dup(dir));
        struct dirent *de;
        if (!d)
                return;
        while ((de = readdir(d))) {
                cleanup_free char *path = NULL;
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || strncmp(de->d_name, ".", 1) == 0)
                        continue;
                path = prefix ? xasprintf("%s/%s", prefix, de->d_name) : xstrdup(de->d_name);
                if (!allowed(path))
                        remove_tree(dir, de->d_name);
                else if (!prefix && de->d_type == DT_DIR) {
                        bool whole = false;
                        for (size_t i = 0; i < ARRAY_SIZE(etc_allow) && !whole; i++)
                                whole = strcmp(etc_allow[i], path) == 0;
                        if (!whole) {
                                cleanup_close int sub = openat(dir, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                                if (sub >= 0)
                                        prune(sub, path);
                        }
                }
        }
        (void)closedir(d);
}

static int write_link(int dir, const char *target, const char *name) {
        char old[256];
        ssize_t n = readlinkat(dir, name, old, sizeof old - 1);
        if (n >= 0 && (size_t)n == strlen(target) && memcmp(old, target, (size_t)n) == 0)
                return 0;
        (void)unlinkat(dir, name, 0);
        return symlinkat(target, dir, name) < 0 ? -errno : 0;
}

static int rebuild(native *n, cm_err *err) {
        cleanup_free char *lock_path = xasprintf("%s/hostetc.lock", n->state_dir);
        cleanup_close int lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        cleanup_close int src = open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cleanup_close int dst = -1;
        int r = 0;

        if (src < 0)
                return cm_err_sys(err, errno, "cannot read the host's /etc");
        if (lock >= 0)
                (void)flock(lock, LOCK_EX); /* other servers on this state dir */
        if (mkdir(n->etc_dir, 0755) < 0 && errno != EEXIST)
                return cm_err_sys(err, errno, "cannot create %s", n->etc_dir);
        dst = open(n->etc_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dst < 0)
                return cm_err_sys(err, errno, "cannot open %s", n->etc_dir);
        (void)mkdirat(dst, "default", 0755);
        (void)mkdirat(dst, "ssl", 0755);
        (void)mkdirat(dst, "ssh", 0755);
        for (size_t i = 0; i < ARRAY_SIZE(etc_allow); i++) {
                const char *slash = strrchr(etc_allow[i], '/');
                cleanup_free char *parent = slash ? xstrndup(etc_allow[i], (size_t)(slash - etc_allow[i])) : NULL;
                cleanup_close int sp = parent ? openat(src, parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
                cleanup_close int dp = parent ? openat(dst, parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
                if (parent && (sp < 0 || dp < 0))
                        continue;
                if (sync_entry(parent ? sp : src, parent ? dp : dst, slash ? slash + 1 : etc_allow[i], 0) < 0)
                        r = -1;
        }
        prune(dst, NULL);
        /* Per-sandbox names, filled by each sandbox in its own /run. */
        if (write_link(dst, "../run/cm/hosts", "hosts") < 0 || write_link(dst, "../run/cm/hostname", "hostname") < 0 ||
            write_link(dst, "../run/cm/resolv.conf", "resolv.conf") < 0 ||
            write_link(dst, "../proc/self/mounts", "mtab") < 0)
                r = -1;
        if (r < 0)
                return cm_err_sys(err, errno ? errno : EIO, "cannot copy the host's /etc into %s", n->etc_dir);
        return 0;
}

static void watch_all(native *n) {
        (void)inotify_add_watch(n->etc_inotify, "/etc",
                                IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM |
                                        IN_MOVED_TO);
        for (size_t i = 0; i < ARRAY_SIZE(etc_allow); i++) {
                cleanup_free char *p = xasprintf("/etc/%s", etc_allow[i]);
                struct stat st;
                if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
                        watch_tree(n->etc_inotify, p, 0);
                else if (strchr(etc_allow[i], '/')) {
                        *strrchr(p, '/') = 0;
                        (void)inotify_add_watch(n->etc_inotify, p,
                                                IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE |
                                                        IN_MOVED_FROM | IN_MOVED_TO);
                }
        }
}

/* Events since the last look?  Without inotify, always "yes". */
static bool changed(native *n) {
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        bool any = false;
        if (n->etc_inotify < 0)
                return true;
        while (read(n->etc_inotify, buf, sizeof buf) > 0)
                any = true;
        return any;
}

int hostetc_sync(native *n, cm_err *err) {
        int r = 0;
        (void)pthread_mutex_lock(&n->lock);
        if (!n->etc_ready) {
                n->etc_inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
                if (n->etc_inotify >= 0)
                        watch_all(n); /* before copying: no change slips between */
                r = rebuild(n, err);
                n->etc_ready = r == 0;
        } else if (changed(n)) {
                r = rebuild(n, err);
                if (n->etc_inotify >= 0)
                        watch_all(n); /* new subdirectories */
        }
        (void)pthread_mutex_unlock(&n->lock);
        return r;
}

void hostetc_close(native *n) {
        if (n->etc_inotify >= 0)
                (void)close(n->etc_inotify);
        n->etc_inotify = -1;
}
