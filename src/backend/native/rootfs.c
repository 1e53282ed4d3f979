/* A directory image without overlayfs: the fallback of mount.c's overlay.
 *
 * A directory image normally gets an overlay: the image read-only below,
 * the sandbox's changes in its scratch tmpfs above.  Where overlayfs cannot
 * be mounted (no module: ENODEV; an old kernel in a user namespace: EPERM;
 * a lower file system it refuses: EINVAL), the parent copies the image into
 * a directory of the container's own before clone, and the child only binds
 * that copy where the overlay would have been; the rest of the set-up
 * (read-only root, mounts, /proc, /dev) is the same.  The copy keeps modes
 * and symlinks (as symlinks, never followed), drops setuid/setgid bits,
 * skips device nodes, keeps owners when we are root, and stops at
 * NATIVE_COPY_MAX_BYTES.
 *
 * Whether overlays work is found once, at open, by the namespace probe's
 * child (rootfs_probe_overlay).  A detached container's copy lives in its
 * state dir (<state>/containers/<id>/rootfs, removed with it); a run to
 * completion's in <state>/scratch/srv-<pid>-<start>/<id>, removed when it
 * ends, or by the next server when this one dies first.
 *
 * CONTAINER_MCP_NATIVE_OVERLAY=0 turns overlays off (directory images are
 * always copied): tests force the fallback with it, and it is the way out
 * on a machine where overlays mount but misbehave. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "backend/native/linux.h"
#include "util/cleanup.h"
#include "util/copy.h"

#define REMOVE_MAX_DEPTH 1024
#define SCAN_MAX_DEPTH 256 /* as deep as the copier goes */

/* ---- is there an overlay? ----------------------------------------------- */

/* child (of a raw clone, in new user and mount namespaces like a
 * sandbox's): a tmpfs on the stage, and an overlay of its dirs on it.
 * self_map: a rootless server's child maps itself; else the parent has
 * mapped it and stage is NULL (see mnt_enter_stage). */
int rootfs_probe_overlay(const char *stage, bool self_map, uid_t uid, gid_t gid) {
        sb_err e;

        if (self_map) {
                (void)prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
                if (userns_map(uid, gid, &e) < 0)
                        return -1;
        }
        if (mnt_enter_stage(stage, 65536, &e) < 0 || mkdir("l", 0755) < 0 || mkdir("u", 0755) < 0 ||
            mkdir("w", 0700) < 0 || mkdir("r", 0755) < 0)
                return -1;
        return mount("overlay", "r", "overlay", MS_NOSUID | MS_NODEV, "lowerdir=l,upperdir=u,workdir=w,userxattr") < 0
                       ? errno
                       : 0;
}

bool rootfs_overlay_unavailable(int code) { return code == ENODEV || code == EINVAL || code == EPERM; }

void rootfs_detect(native *n, int probe) {
        const char *force = getenv("CONTAINER_MCP_NATIVE_OVERLAY");

        n->overlay = true;
        n->overlay_why[0] = 0;
        if (force && strcmp(force, "0") == 0) {
                n->overlay = false;
                (void)snprintf(n->overlay_why, sizeof n->overlay_why, "turned off by CONTAINER_MCP_NATIVE_OVERLAY=0");
        } else if (probe > 0 && rootfs_overlay_unavailable(probe)) {
                n->overlay = false;
                (void)snprintf(n->overlay_why, sizeof n->overlay_why, "mounting an overlay failed: %s%s",
                               strerror(probe),
                               probe == ENODEV  ? " (no overlay module: modprobe overlay)"
                               : probe == EPERM ? " (in a user namespace: Linux 5.11 or newer is needed)"
                                                : "");
        }
        /* Any other failure: the probe could not tell; a real mount will
         * say what is wrong. */
}

/* ---- the copy ------------------------------------------------------------ */

char *rootfs_scratch_path(const native *n, const char *id) {
        return xasprintf("%s/scratch/%s/%s", n->state_dir, n->srv_tag, id);
}

/* Remove name in dir and everything below, never following a symlink.
 * Dirs are made writable first: a rootless container's files are ours,
 * whatever modes it left them with. */
static void remove_at(int dir, const char *name, int depth) {
        int fd = depth < REMOVE_MAX_DEPTH ? openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
        DIR *d;
        struct dirent *de;

        if (fd >= 0) {
                (void)fchmod(fd, 0700);
                if ((d = fdopendir(fd))) {
                        while ((de = readdir(d)))
                                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                                        remove_at(dirfd(d), de->d_name, depth + 1);
                        (void)closedir(d);
                } else
                        (void)close(fd);
        }
        if (unlinkat(dir, name, AT_REMOVEDIR) < 0)
                (void)unlinkat(dir, name, 0);
}

static void remove_path(const char *path) {
        const char *slash = strrchr(path, '/');
        cleanup_free char *parent = slash && slash != path ? xstrndup(path, (size_t)(slash - path)) : NULL;
        cleanup_close int fd = parent ? open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
        if (fd >= 0)
                remove_at(fd, slash + 1, 0);
}

void rootfs_remove(const char *path) {
        const char *slash;
        cleanup_free char *parent = NULL;

        if (!path)
                return;
        remove_path(path);
        /* A scratch copy: its server's dir and scratch/ go once empty. */
        slash = strrchr(path, '/');
        parent = xstrndup(path, (size_t)(slash - path));
        if (strstr(parent, "/scratch/srv-") && rmdir(parent) == 0 && (slash = strrchr(parent, '/'))) {
                parent[slash - parent] = 0;
                (void)rmdir(parent);
        }
}

/* The bytes of the regular files below dir (not following symlinks), up
 * to past cap: a too-big image fails before anything is written.  The
 * copier checks again as it goes (the image may grow meanwhile). */
static uint64_t tree_bytes(int dir, uint64_t cap, int depth) {
        DIR *d;
        struct dirent *de;
        uint64_t sum = 0;
        int fd = depth < SCAN_MAX_DEPTH ? openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;

        if (fd < 0 || !(d = fdopendir(fd))) {
                if (fd >= 0)
                        (void)close(fd);
                return 0; /* the copy will say what is wrong */
        }
        while (sum <= cap && (de = readdir(d))) {
                struct stat st;
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
                    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (S_ISREG(st.st_mode))
                        sum += (uint64_t)st.st_size;
                else if (S_ISDIR(st.st_mode)) {
                        cleanup_close int sub =
                                openat(dirfd(d), de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0)
                                sum += tree_bytes(sub, cap - sum, depth + 1);
                }
        }
        (void)closedir(d);
        return sum;
}

/* A root server's copy, owners moved into the sandboxes' range (host id k
 * becomes BASE + k; ids past the range become its nobody), so the
 * sandbox's root owns what the image's root owned.  Never follows a
 * symlink. */
static uid_t shifted(unsigned id, unsigned base) { return (uid_t)(base + (id < USERNS_SIZE ? id : 65534u)); }

static int shift_owners(int dir, const char *name, const native *n, int depth) {
        struct stat st;
        int fd, r = 0;
        DIR *d;
        struct dirent *de;

        if (depth > SCAN_MAX_DEPTH)
                return -ELOOP;
        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (fchownat(dir, name, shifted(st.st_uid, n->map_uid), (gid_t)shifted(st.st_gid, n->map_gid),
                     AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return 0;
        /* chown dropped nothing a directory needs; its mode is unchanged */
        if ((fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                return -errno;
        if (!(d = fdopendir(fd))) {
                (void)close(fd);
                return -errno;
        }
        while (r == 0 && (de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        r = shift_owners(dirfd(d), de->d_name, n, depth + 1);
        (void)closedir(d);
        return r;
}

int rootfs_copy(const native *n, const char *image, const char *dst, const char *why, cm_err *err) {
        const char *slash = strrchr(dst, '/');
        cleanup_free char *parent = xstrndup(dst, (size_t)(slash - dst));
        cleanup_close int src = -1, dfd = -1;
        cm_copy_stats st = {0};
        cm_err e = CM_ERR_INIT;

        /* the scratch dirs (a state dir's own are there already) */
        if (strstr(parent, "/scratch/srv-")) {
                cleanup_free char *scratch = xstrndup(parent, (size_t)(strrchr(parent, '/') - parent));
                (void)mkdir(scratch, 0700);
                (void)mkdir(parent, 0700);
        }
        /* the policy's canonical path, with no symlink on the way now */
        src = sys_openat2(AT_FDCWD, image,
                          &(struct cm_open_how){.flags = O_PATH | O_DIRECTORY | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS});
        if (src < 0 && errno == ENOSYS)
                src = open(image, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        dfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (src < 0)
                return cm_err_sys(err, errno, "image directory \"%s\"", image);
        if (dfd < 0)
                return cm_err_sys(err, errno, "state: cannot open %s", parent);
        if (tree_bytes(src, NATIVE_COPY_MAX_BYTES, 0) > NATIVE_COPY_MAX_BYTES)
                e.code = EFBIG;
        else if (mkdirat(dfd, slash + 1, 0700) < 0)
                return cm_err_sys(err, errno, "state: cannot create %s", dst);
        else if (cm_copy_tree_flags(src, ".", dfd, slash + 1, NATIVE_COPY_MAX_BYTES, n->rootless ? 0 : CM_COPY_OWNERS,
                                    &st, &e) == 0) {
                int r = n->rootless ? 0 : shift_owners(dfd, slash + 1, n, 0);
                if (r == 0)
                        return 0;
                (void)cm_err_sys(&e, -r, "moving the copy's owners into the sandbox's id range");
        }
        rootfs_remove(dst);
        if (e.code == EFBIG)
                return cm_err_set(err, EFBIG,
                                  "image \"%s\" is too big to copy for the container's root (more than %llu MiB); "
                                  "it is copied because overlayfs is not in use here (%s).  Enable overlayfs "
                                  "(load the overlay module, and unset CONTAINER_MCP_NATIVE_OVERLAY=0 for the "
                                  "server), or use a smaller image",
                                  image, (unsigned long long)(NATIVE_COPY_MAX_BYTES >> 20), why);
        return cm_err_set(err, e.code,
                          "copying image \"%s\" for the container's root (overlayfs is not in use: %s): %s", image, why,
                          e.msg);
}

/* scratch/srv-<pid>-<start>: a dead server's runs to completion. */
void rootfs_reap(native *n) {
        cleanup_free char *dir = xasprintf("%s/scratch", n->state_dir);
        DIR *d = opendir(dir);
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d))) {
                int pid = 0;
                unsigned long long start = 0;
                if (sscanf(de->d_name, "srv-%d-%llu", &pid, &start) != 2 ||
                    (pid == n->self_pid && start == n->self_start) || proc_alive(pid, start))
                        continue;
                remove_at(dirfd(d), de->d_name, 0);
        }
        (void)closedir(d);
        (void)rmdir(dir);
}
