/* The file system of a sandbox.
 *
 * The parent turns an image and the run spec into a plan: a flat list of
 * small steps (make a dir, bind a host path, mount a tmpfs, mask a /proc
 * file, make a mount read-only), each tagged with the set-up step it belongs
 * to.  The child only runs the plan, with its cwd at the new root, so it needs
 * no allocation and a failure names the exact step. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "backend/native/linux.h"
#include "util/cleanup.h"

/* ---- building a plan (parent) ------------------------------------------- */

static void mnt_add(mnt_plan *p, enum mnt_kind kind, const char *src, const char *dst, const char *data,
                    unsigned long flags, unsigned mode) {
        if (p->n == p->cap) {
                p->cap = p->cap ? p->cap * 2 : 64;
                p->ops = xrealloc(p->ops, p->cap * sizeof *p->ops);
        }
        p->ops[p->n++] = (mnt_op){
                .kind = kind,
                .step = p->step,
                .src = src ? xstrdup(src) : NULL,
                .dst = dst ? xstrdup(dst) : NULL,
                .data = data ? xstrdup(data) : NULL,
                .flags = flags,
                .mode = mode,
                .fd = -1,
        };
}

static void add_optional(mnt_plan *p, enum mnt_kind kind, const char *src, const char *dst) {
        mnt_add(p, kind, src, dst, NULL, 0, 0);
        p->ops[p->n - 1].optional = true;
}

void mnt_plan_free(mnt_plan *p) {
        for (size_t i = 0; i < p->n; i++) {
                if (p->ops[i].fd >= 0)
                        (void)close(p->ops[i].fd);
                free(p->ops[i].src);
                free(p->ops[i].dst);
                free(p->ops[i].data);
        }
        free(p->ops);
        *p = (mnt_plan){0};
}

/* Reproduce host entry /<rel> in the new root: a symlink stays a symlink
 * (Debian's /bin -> usr/bin), a dir becomes a recursive read-only bind, a
 * file a bind on an empty file.  Anything else, or a missing one, is
 * skipped. */
static void add_host_entry(mnt_plan *p, const char *rel) {
        cleanup_free char *host = xasprintf("/%s", rel);
        struct stat st;
        char link[4096];

        if (lstat(host, &st) < 0)
                return;
        if (S_ISLNK(st.st_mode)) {
                ssize_t n = readlink(host, link, sizeof link - 1);
                if (n <= 0)
                        return;
                link[n] = 0;
                mnt_add(p, MNT_SYMLINK, link, rel, NULL, 0, 0);
        } else if (S_ISDIR(st.st_mode)) {
                mnt_add(p, MNT_MKDIR, NULL, rel, NULL, 0, 0755);
                mnt_add(p, MNT_BIND, host, rel, NULL, 0, 0);
        } else if (S_ISREG(st.st_mode)) {
                mnt_add(p, MNT_TOUCH, NULL, rel, NULL, 0, 0644);
                mnt_add(p, MNT_BIND, host, rel, NULL, 0, 0);
        }
}

/* The image's root.  The built-in "host" image is the host's own /usr (and
 * the /bin, /lib… symlinks or dirs next to it) read-only, and a copy of the
 * safe part of its /etc (hostetc.c) read-only. */
static int plan_host_image(const rootfs_opts *o, mnt_plan *p) {
        static const char *const top[] = {"usr", "bin", "sbin", "lib", "lib64", "lib32", "libx32"};
        char text[512];

        for (size_t i = 0; i < ARRAY_SIZE(top); i++) {
                add_host_entry(p, top[i]);
                if (p->n && p->ops[p->n - 1].kind == MNT_BIND && strcmp(p->ops[p->n - 1].dst, top[i]) == 0)
                        mnt_add(p, MNT_RDONLY, NULL, top[i], NULL, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0);
        }
        mnt_add(p, MNT_MKDIR, NULL, "etc", NULL, 0, 0755);
        mnt_add(p, MNT_BIND, o->etc_dir, "etc", NULL, 0, 0);
        p->ops[p->n - 1].detach = true; /* in the state dir */
        mnt_add(p, MNT_RDONLY, NULL, "etc", NULL, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0);
        /* /etc/hosts, /etc/hostname and /etc/resolv.conf point here */
        mnt_add(p, MNT_MKDIR, NULL, "run", NULL, 0, 0755);
        mnt_add(p, MNT_MKDIR, NULL, "run/cm", NULL, 0, 0755);
        (void)snprintf(text, sizeof text, "127.0.0.1\tlocalhost %s\n::1\tlocalhost ip6-localhost ip6-loopback\n",
                       o->hostname);
        mnt_add(p, MNT_WRITE, NULL, "run/cm/hosts", text, 0, 0644);
        (void)snprintf(text, sizeof text, "%s\n", o->hostname);
        mnt_add(p, MNT_WRITE, NULL, "run/cm/hostname", text, 0, 0644);
        mnt_add(p, MNT_WRITE, NULL, "run/cm/resolv.conf", o->resolv, 0, 0644);
        return 0;
}

/* An image that is a root file system in a directory (what the image store
 * unpacks): an overlay, the image read-only below and the sandbox's changes
 * in the scratch tmpfs above, so the image is never written and the
 * changes go with the sandbox.  Without overlayfs (rootfs.c), a copy of the
 * image the parent makes in the container's own dir, bound in instead.
 * The host's /etc is not involved. */
static int plan_image_etc(const rootfs_opts *o, mnt_plan *p);

static int plan_dir_image(const rootfs_opts *o, mnt_plan *p, cm_err *err) {
        cleanup_free char *opts = NULL;
        struct stat st, host_root;

        /* The policy (CONTAINER_MCP_IMAGE_DIRS) chose the path; this is the
         * backend's own last word: never the host's root, whatever spelling
         * reached it ("/usr/..", "//"), and the child mounts exactly the
         * directory seen here (dev/ino, no symlink on the way). */
        if (stat(o->image, &st) < 0 || !S_ISDIR(st.st_mode))
                return cm_err_set(err, ENOENT, "image directory \"%s\" does not exist", o->image);
        if (stat("/", &host_root) == 0 && st.st_dev == host_root.st_dev && st.st_ino == host_root.st_ino)
                return cm_err_set(err, EPERM, "\"%s\" is the host's root directory and cannot be an image", o->image);
        /* Its own step: a failure there means "no overlay for this image"
         * (container.c falls back to a copy). */
        p->step = SB_STEP_OVERLAY;
        if (o->copy) {
                mnt_add(p, MNT_MKDIR, NULL, ".root", NULL, 0, 0755);
                mnt_add(p, MNT_BIND, o->copy, ".root", NULL, 0, 0);
                p->ops[p->n - 1].detach = true; /* in the state dir; owners shifted (rootfs.c) */
                mnt_add(p, MNT_RDONLY, NULL, ".root", NULL, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0);
                p->ops[p->n - 1].keep_rw = true;
        } else {
                /* Paths relative to the stage (the child's cwd).  A root
                 * server's child cannot walk to the image (its ids are not
                 * the host's root): the parent binds it on .lower, idmapped
                 * so that the image's root-owned files are the sandbox
                 * root's (copy-up needs their owner mapped).  A rootless
                 * child opens the image itself; its lowerdir is then the
                 * checked fd (overlay_checked). */
                if (o->n) {
                        mnt_add(p, MNT_MKDIR, NULL, ".lower", NULL, 0, 0755);
                        mnt_add(p, MNT_BIND, o->image, ".lower", NULL, 0, 0);
                        p->ops[p->n - 1].detach = true;
                        p->ops[p->n - 1].idmap = IDMAP_RANGE;
                        /* the directory checked above, not one swapped in */
                        p->ops[p->n - 1].dev = st.st_dev;
                        p->ops[p->n - 1].ino = st.st_ino;
                }
                opts = xasprintf("%supperdir=.upper,workdir=.work%s", o->n ? "lowerdir=.lower," : "",
                                 o->userns ? ",userxattr" : "");
                mnt_add(p, MNT_MKDIR, NULL, ".upper", NULL, 0, 0755);
                mnt_add(p, MNT_MKDIR, NULL, ".work", NULL, 0, 0700);
                mnt_add(p, MNT_MKDIR, NULL, ".root", NULL, 0, 0755);
                mnt_add(p, MNT_OVERLAY, o->n ? NULL : o->image, ".root", opts, MS_NOSUID | MS_NODEV, 0);
                p->ops[p->n - 1].check_id = !o->n;
                p->ops[p->n - 1].dev = st.st_dev;
                p->ops[p->n - 1].ino = st.st_ino;
        }
        return plan_image_etc(o, p);
}

/* After an image's root is set up at .root: into it, and its own /etc
 * with our names in it (in the upper layer). */
static int plan_image_etc(const rootfs_opts *o, mnt_plan *p) {
        char text[512];

        mnt_add(p, MNT_CHDIR, NULL, ".root", NULL, 0, 0);
        p->step = SB_STEP_ROOTFS;
        mnt_add(p, MNT_MKDIR, NULL, "etc", NULL, 0, 0755);
        (void)snprintf(text, sizeof text, "127.0.0.1\tlocalhost %s\n::1\tlocalhost ip6-localhost ip6-loopback\n",
                       o->hostname);
        mnt_add(p, MNT_WRITE, NULL, "etc/hosts", text, 0, 0644);
        p->ops[p->n - 1].optional = true; /* unless the image made it a symlink */
        (void)snprintf(text, sizeof text, "%s\n", o->hostname);
        mnt_add(p, MNT_WRITE, NULL, "etc/hostname", text, 0, 0644);
        p->ops[p->n - 1].optional = true;
        mnt_add(p, MNT_WRITE, NULL, "etc/resolv.conf", o->resolv, 0, 0644);
        p->ops[p->n - 1].optional = true;
        return 0;
}

/* A stored image (images.c): an overlay of its layers, each bound on
 * .l<i> (a root server's binds made by the parent: the child cannot walk
 * the state dir), the sandbox's changes in the scratch tmpfs above.  The
 * layers' owners are already the sandbox's (unpacked shifted into its
 * range, src/image/store.h), so no idmap is needed.  Without overlayfs, the
 * copy the parent made of them, as for a directory image. */
static int plan_store_image(const rootfs_opts *o, mnt_plan *p, cm_err *err) {
        size_t n = 0;
        char *lower;
        cleanup_free char *opts = NULL;

        while (o->layers[n])
                n++;
        if (n == 0)
                return cm_err_set(err, EINVAL, "image \"%s\" has no layers", o->image);
        p->step = SB_STEP_OVERLAY;
        if (o->copy) {
                mnt_add(p, MNT_MKDIR, NULL, ".root", NULL, 0, 0755);
                mnt_add(p, MNT_BIND, o->copy, ".root", NULL, 0, 0);
                p->ops[p->n - 1].detach = o->n != NULL;
                mnt_add(p, MNT_RDONLY, NULL, ".root", NULL, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0);
                p->ops[p->n - 1].keep_rw = true;
                return plan_image_etc(o, p);
        }
        lower = xstrdup("lowerdir=");
        for (size_t i = 0; i < n; i++) {
                cleanup_free char *name = xasprintf(".l%zu", i), *prev = lower;
                mnt_add(p, MNT_MKDIR, NULL, name, NULL, 0, 0755);
                mnt_add(p, MNT_BIND, o->layers[i], name, NULL, 0, 0);
                p->ops[p->n - 1].detach = o->n != NULL;
                lower = xasprintf("%s%s%s", prev, i ? ":" : "", name);
        }
        if (o->upper) {
                /* a build's RUN: its changes stay on the host (build.c) */
                mnt_add(p, MNT_MKDIR, NULL, ".build", NULL, 0, 0755);
                mnt_add(p, MNT_BIND, o->upper, ".build", NULL, 0, 0);
                p->ops[p->n - 1].detach = o->n != NULL;
                opts = xasprintf("%s,upperdir=.build/u,workdir=.build/w%s", lower, o->userns ? ",userxattr" : "");
        } else {
                opts = xasprintf("%s,upperdir=.upper,workdir=.work%s", lower, o->userns ? ",userxattr" : "");
                mnt_add(p, MNT_MKDIR, NULL, ".upper", NULL, 0, 0755);
                mnt_add(p, MNT_MKDIR, NULL, ".work", NULL, 0, 0700);
        }
        free(lower);
        mnt_add(p, MNT_MKDIR, NULL, ".root", NULL, 0, 0755);
        mnt_add(p, MNT_OVERLAY, NULL, ".root", opts, MS_NOSUID | MS_NODEV, 0);
        return plan_image_etc(o, p);
}

/* A policy mount may only land where the sandbox has its own directories,
 * never over the image, /proc, /sys or /dev. */
static int check_target(const char *t, cm_err *err) {
        static const char *const denied[] = {"/proc", "/sys",   "/dev",   "/usr",    "/bin", "/sbin",
                                             "/lib",  "/lib64", "/lib32", "/libx32", "/etc"};
        if (t[0] != '/' || strstr(t, "/../") || strstr(t, "//") || strcmp(t, "/") == 0 ||
            (strlen(t) >= 3 && strcmp(t + strlen(t) - 3, "/..") == 0) || strstr(t, "/./"))
                return cm_err_set(err, EINVAL, "mount target \"%s\" must be a normalised absolute path other than /",
                                  t);
        for (size_t i = 0; i < ARRAY_SIZE(denied); i++) {
                size_t n = strlen(denied[i]);
                if (strncmp(t, denied[i], n) == 0 && (t[n] == 0 || t[n] == '/'))
                        return cm_err_set(err, EPERM,
                                          "mount target \"%s\" is under %s, which belongs to the image or the "
                                          "kernel; mount under /workspace, /mnt or a new top-level dir",
                                          t, denied[i]);
        }
        return 0;
}

/* Every dir leading to a target, created in order. */
static void add_parents(mnt_plan *p, const char *rel) {
        cleanup_free char *buf = xstrdup(rel);
        for (char *s = strchr(buf, '/'); s; s = strchr(s + 1, '/')) {
                *s = 0;
                mnt_add(p, MNT_MKDIR, NULL, buf, NULL, 0, 0755);
                *s = '/';
        }
}

/* Policy mounts.  The source's identity (dev, ino) is taken now; the child
 * opens the path again without following any symlink and binds it only if
 * it is still the same object, so a symlink swapped in after the policy
 * check cannot redirect the bind.  (The parent's own fd cannot serve: a
 * bind source must be in the child's mount namespace.) */
static int plan_mounts(const rootfs_opts *o, mnt_plan *p, cm_err *err) {
        if (o->n_mounts > NATIVE_MAX_MOUNTS)
                return cm_err_set(err, E2BIG, "at most %d mounts per container", NATIVE_MAX_MOUNTS);
        for (size_t i = 0; i < o->n_mounts; i++) {
                const cm_mount *m = &o->mounts[i];
                const char *rel = m->target + 1;
                struct stat st;

                if (check_target(m->target, err) < 0)
                        return -1;
                if (m->source[0] != '/')
                        return cm_err_set(err, EINVAL, "mount source \"%s\" must be an absolute path", m->source);
                if (lstat(m->source, &st) < 0)
                        return cm_err_sys(err, errno, "mount source \"%s\"", m->source);
                if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
                        return cm_err_set(err, EINVAL,
                                          "mount source \"%s\" is not a directory or a regular file (a symlink "
                                          "is refused: give its canonical path)",
                                          m->source);
                add_parents(p, rel);
                mnt_add(p, S_ISDIR(st.st_mode) ? MNT_MKDIR : MNT_TOUCH, NULL, rel, NULL, 0,
                        S_ISDIR(st.st_mode) ? 0755 : 0644);
                mnt_add(p, MNT_BIND, m->source, rel, NULL, 0, 0);
                p->ops[p->n - 1].check_id = true;
                p->ops[p->n - 1].dev = st.st_dev;
                p->ops[p->n - 1].ino = st.st_ino;
                p->ops[p->n - 1].detach = true;
                /* read-write: the owner of the source is the sandbox's root
                 * there, unless it is the host's root (then plain: files
                 * belong to the range's ids); read-only: the range. */
                p->ops[p->n - 1].idmap = m->readonly ? IDMAP_RANGE : st.st_uid != 0 ? IDMAP_OWNER : IDMAP_NONE;
                mnt_add(p, MNT_RDONLY, NULL, rel, NULL,
                        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (m->readonly ? MOUNT_ATTR_RDONLY : 0), 0);
                p->ops[p->n - 1].keep_rw = !m->readonly;
        }
        return 0;
}

static bool has_mount_at(const rootfs_opts *o, const char *target) {
        for (size_t i = 0; i < o->n_mounts; i++)
                if (strcmp(o->mounts[i].target, target) == 0)
                        return true;
        return false;
}

/* /proc and /sys, with what Docker masks hidden and what it keeps read-only
 * made so.  Entries this kernel lacks are skipped. */
static void plan_proc(mnt_plan *p) {
        static const char *const masked[] = {"proc/kcore",
                                             "proc/keys",
                                             "proc/timer_list",
                                             "proc/timer_stats",
                                             "proc/sched_debug",
                                             "proc/latency_stats",
                                             "proc/acpi",
                                             "proc/scsi",
                                             "proc/asound",
                                             "sys/firmware",
                                             "sys/devices/virtual/powercap"};
        static const char *const readonly[] = {"proc/sys", "proc/sysrq-trigger", "proc/irq", "proc/bus", "proc/fs"};

        mnt_add(p, MNT_MKDIR, NULL, "proc", NULL, 0, 0555);
        mnt_add(p, MNT_PROC, NULL, "proc", NULL, MS_NOSUID | MS_NODEV | MS_NOEXEC, 0);
        for (size_t i = 0; i < ARRAY_SIZE(readonly); i++) {
                add_optional(p, MNT_BIND, readonly[i], readonly[i]);
                mnt_add(p, MNT_RDONLY, NULL, readonly[i], NULL, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0);
                p->ops[p->n - 1].optional = true;
        }
        /* A fresh sysfs has no debugfs or securityfs mounted in it. */
        mnt_add(p, MNT_MKDIR, NULL, "sys", NULL, 0, 0555);
        mnt_add(p, MNT_SYSFS, NULL, "sys", NULL, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, 0);
        for (size_t i = 0; i < ARRAY_SIZE(masked); i++)
                add_optional(p, MNT_MASK, NULL, masked[i]);
}

/* A minimal /dev.  As root the nodes are made (no mount each); in a user
 * namespace mknod is denied, so the host's are bound in. */
static void plan_dev(const rootfs_opts *o, mnt_plan *p) {
        static const struct {
                const char *name;
                unsigned major, minor;
        } nodes[] = {{"null", 1, 3},   {"zero", 1, 5},    {"full", 1, 7},
                     {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}};
        static const char *const links[][2] = {{"/proc/self/fd", "dev/fd"},
                                               {"/proc/self/fd/0", "dev/stdin"},
                                               {"/proc/self/fd/1", "dev/stdout"},
                                               {"/proc/self/fd/2", "dev/stderr"},
                                               {"pts/ptmx", "dev/ptmx"}};
        cleanup_free char *opts = xasprintf("size=%lld,mode=0755", (long long)o->tmpfs_bytes);

        mnt_add(p, MNT_MKDIR, NULL, "dev", NULL, 0, 0755);
        mnt_add(p, MNT_TMPFS, NULL, "dev", opts, MS_NOSUID | MS_NOEXEC | (o->userns ? MS_NODEV : 0), 0);
        for (size_t i = 0; i < ARRAY_SIZE(nodes); i++) {
                cleanup_free char *host = xasprintf("/dev/%s", nodes[i].name);
                cleanup_free char *rel = xasprintf("dev/%s", nodes[i].name);
                if (o->userns) {
                        mnt_add(p, MNT_TOUCH, NULL, rel, NULL, 0, 0666);
                        mnt_add(p, MNT_BIND, host, rel, NULL, 0, 0);
                } else
                        mnt_add(p, MNT_MKNOD, NULL, rel, NULL, makedev(nodes[i].major, nodes[i].minor), 0666);
        }
        for (size_t i = 0; i < ARRAY_SIZE(links); i++)
                mnt_add(p, MNT_SYMLINK, links[i][0], links[i][1], NULL, 0, 0);
        mnt_add(p, MNT_MKDIR, NULL, "dev/pts", NULL, 0, 0755);
        /* gid=5 (tty) only when it exists in the sandbox: not under a user
         * namespace mapping one id. */
        mnt_add(p, MNT_DEVPTS, NULL, "dev/pts",
                o->userns ? "newinstance,ptmxmode=0666,mode=0620" : "newinstance,ptmxmode=0666,mode=0620,gid=5",
                MS_NOSUID | MS_NOEXEC, 0);
        /* shm: a dir of /dev's tmpfs, which bounds its size */
        mnt_add(p, MNT_MKDIR, NULL, "dev/shm", NULL, 0, 01777);
}

/* ---- binds the parent makes (root server) -------------------------------- */

/* errnos of mount_setattr(MOUNT_ATTR_IDMAP) that mean "not here": a kernel
 * before 5.12, a file system without idmapped mounts (tmpfs before 6.3,
 * NFS...). */
static bool idmap_unsupported(int code) {
        return code == EINVAL || code == EOPNOTSUPP || code == ENOSYS || code == EPERM || code == ENOTSUP;
}

/* The group a read-write mount's owner writes as: the directory's, else
 * the owner's primary group; never the host's group 0. */
static gid_t owner_group(uid_t uid, gid_t gid) {
        struct passwd pw, *res = NULL;
        char buf[4096];
        if (gid != 0)
                return gid;
        if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res && pw.pw_gid != 0)
                return pw.pw_gid;
        return (gid_t)-1;
}

/* open_tree of the op's source; a checked source (a policy mount) is opened
 * without following any symlink and must still be the object planned (our
 * own paths, the state dir's and an image's, may lead through one). */
static int detach_open(const mnt_op *op, struct stat *ret_st, cm_err *err) {
        struct cm_open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS};
        cleanup_close int fd = op->check_id ? sys_openat2(AT_FDCWD, op->src, &how)
                                            : open(op->src, O_PATH | O_CLOEXEC);
        int tree;

        if (fd < 0 && op->check_id && errno == ENOSYS)
                fd = open(op->src, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return cm_err_sys(err, errno, "mount source \"%s\"", op->src);
        if (fstat(fd, ret_st) < 0)
                return cm_err_sys(err, errno, "mount source \"%s\"", op->src);
        if ((op->check_id || op->ino) && (ret_st->st_dev != op->dev || ret_st->st_ino != op->ino))
                return cm_err_set(err, EXDEV, "mount source \"%s\" changed (or became a symlink) after the policy check",
                                  op->src);
        tree = sys_open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
        if (tree < 0)
                return cm_err_sys(err, errno, "bind \"%s\" (open_tree, Linux 5.2 or newer)", op->src);
        return tree;
}

static int idmap_tree(const native *n, int tree, int userns) {
        struct cm_mount_attr a = {.attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns};
        if (n->no_idmap)
                return -EOPNOTSUPP; /* as a kernel without them */
        return sys_mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &a) < 0 ? -errno : 0;
}

static int detach_one(const rootfs_opts *o, mnt_plan *p, mnt_op *op, cm_err *err) {
        struct stat st;
        cleanup_close int tree = detach_open(op, &st, err), owner_ns = -1;
        int r = 0;

        if (tree < 0)
                return -1;
        if (op->idmap == IDMAP_OWNER) {
                gid_t g = owner_group(st.st_uid, st.st_gid);
                cm_err oe = CM_ERR_INIT;
                if (g == (gid_t)-1 || userns_for_owner(o->n, st.st_uid, g, &owner_ns, &oe) < 0)
                        op->idmap = IDMAP_NONE; /* plain: files get the range's ids */
        }
        if (op->idmap == IDMAP_RANGE && o->n->map_userns >= 0)
                r = idmap_tree(o->n, tree, o->n->map_userns);
        else if (op->idmap == IDMAP_OWNER)
                r = idmap_tree(o->n, tree, owner_ns);
        if (r < 0 && !idmap_unsupported(-r))
                return cm_err_sys(err, -r, "idmap the bind of \"%s\"", op->src);
        if ((r < 0 || (op->idmap == IDMAP_RANGE && o->n->map_userns < 0)) && strcmp(op->dst, ".lower") == 0) {
                /* A lower layer whose root-owned files are not the sandbox's
                 * root's: copy-up of any of them would fail. */
                p->lower_unmapped = true;
                return cm_err_set(err, r < 0 ? -r : EOPNOTSUPP,
                                  "the image \"%s\" cannot be idmapped for this sandbox", op->src);
        }
        op->fd = take_fd(&tree);
        return 0;
}

int mnt_plan_detach(const rootfs_opts *o, mnt_plan *p, cm_err *err) {
        if (!o->n)
                return 0;
        for (size_t i = 0; i < p->n; i++)
                if (p->ops[i].kind == MNT_BIND && p->ops[i].detach && detach_one(o, p, &p->ops[i], err) < 0)
                        return -1;
        return 0;
}

int mnt_plan_build(const rootfs_opts *o, mnt_plan *ret, cm_err *err) {
        mnt_plan p = {0};
        cleanup_free char *tmp_opts = xasprintf("size=%lld,mode=1777", (long long)o->tmpfs_bytes);
        cleanup_free char *ws_opts = xasprintf("size=%lld,mode=0755", (long long)o->tmpfs_bytes);

        p.step = SB_STEP_ROOTFS;
        if (o->layers) {
                if (plan_store_image(o, &p, err) < 0) {
                        mnt_plan_free(&p);
                        return -1;
                }
        } else if (strcmp(o->image, "host") == 0) {
                (void)plan_host_image(o, &p);
        } else if (o->image[0] == '/') {
                if (plan_dir_image(o, &p, err) < 0) {
                        mnt_plan_free(&p);
                        return -1;
                }
        } else {
                mnt_plan_free(&p);
                return cm_err_set(err, ENOENT,
                                  "image \"%s\" is not known to the native runtime; use \"host\" (the host's "
                                  "/usr, read-only), or pull or import the image first",
                                  o->image);
        }
        mnt_add(&p, MNT_MKDIR, NULL, "root", NULL, 0, 0700);
        mnt_add(&p, MNT_MKDIR, NULL, "var", NULL, 0, 0755);
        mnt_add(&p, MNT_SYMLINK, "../tmp", "var/tmp", NULL, 0, 0);
        /* /tmp and /workspace live in the root's tmpfs (or, for a copied
         * image, in the copy), unless the root is read-only. */
        mnt_add(&p, MNT_MKDIR, NULL, "tmp", NULL, 0, 01777);
        if (o->readonly_rootfs && !has_mount_at(o, "/tmp"))
                mnt_add(&p, MNT_TMPFS, NULL, "tmp", tmp_opts, MS_NOSUID | MS_NODEV, 0);
        mnt_add(&p, MNT_MKDIR, NULL, "workspace", NULL, 0, 0755);
        if (o->readonly_rootfs && !has_mount_at(o, NATIVE_WORKDIR))
                mnt_add(&p, MNT_TMPFS, NULL, "workspace", ws_opts, MS_NOSUID | MS_NODEV, 0);

        p.step = SB_STEP_MOUNTS;
        if (plan_mounts(o, &p, err) < 0) {
                mnt_plan_free(&p);
                return -1;
        }
        p.step = SB_STEP_PROC;
        plan_proc(&p);
        p.step = SB_STEP_DEV;
        plan_dev(o, &p);
        *ret = p;
        return 0;
}

/* ---- running a plan (child) --------------------------------------------- */

/* Read-only (and the other attribute bits) for the mount at path and every
 * mount below it.  Before mount_setattr (5.12) only the top mount changes. */
static int set_attr(const char *path, uint64_t attr, bool keep_rw) {
        struct cm_mount_attr a = {.attr_set = attr | (keep_rw ? 0 : MOUNT_ATTR_RDONLY)};
        struct statvfs sv;
        unsigned long flags = MS_REMOUNT | MS_BIND;

        if (sys_mount_setattr(AT_FDCWD, path, AT_RECURSIVE, &a) == 0)
                return 0;
        if (errno != ENOSYS)
                return -1;
        /* A remount must repeat the flags the kernel locked on the mount. */
        if (statvfs(path, &sv) < 0)
                return -1;
        flags |= sv.f_flag & (ST_NOSUID | ST_NODEV | ST_NOEXEC | ST_NOATIME | ST_NODIRATIME | ST_RELATIME);
        if (!keep_rw)
                flags |= MS_RDONLY;
        if (attr & MOUNT_ATTR_NOSUID)
                flags |= MS_NOSUID;
        if (attr & MOUNT_ATTR_NODEV)
                flags |= MS_NODEV;
        return mount(NULL, path, NULL, flags, NULL);
}

static int mask(const char *path) {
        struct stat st;
        if (stat(path, &st) < 0)
                return -1;
        if (S_ISDIR(st.st_mode))
                return mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555");
        return mount("/dev/null", path, NULL, MS_BIND, NULL);
}

static int touch(const char *path, unsigned mode) {
        int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0)
                return -1;
        (void)close(fd);
        return 0;
}

/* Open src with no symlink anywhere on the way (openat2, Linux 5.6; else
 * O_NOFOLLOW on the last component only) and check it is the object the
 * parent planned for.  EXDEV when it is not. */
static int open_checked(const mnt_op *op) {
        struct cm_open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS};
        struct stat st;
        int fd = sys_openat2(AT_FDCWD, op->src, &how);

        if (fd < 0 && errno == ENOSYS)
                fd = open(op->src, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -1;
        if (fstat(fd, &st) < 0 || st.st_dev != op->dev || st.st_ino != op->ino) {
                (void)close(fd);
                errno = EXDEV;
                return -1;
        }
        return fd;
}

/* Bind src through its checked fd. */
static int bind_checked(const mnt_op *op) {
        char fdpath[64];
        int fd = open_checked(op), r;

        if (fd < 0)
                return -1;
        (void)snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", fd);
        r = mount(fdpath, op->dst, NULL, MS_BIND | MS_REC, NULL);
        (void)close(fd);
        return r;
}

/* An overlay whose lower layer is the image directory through its checked
 * fd, so a path swapped after the policy check is never mounted. */
static int overlay_checked(const mnt_op *op) {
        char opts[8192];
        int fd = open_checked(op), r;

        if (fd < 0)
                return -1;
        if (snprintf(opts, sizeof opts, "lowerdir=/proc/self/fd/%d,%s", fd, op->data) >= (int)sizeof opts) {
                (void)close(fd);
                errno = ENAMETOOLONG;
                return -1;
        }
        r = mount("overlay", op->dst, "overlay", op->flags, opts);
        (void)close(fd);
        return r;
}

static int run_op(const mnt_op *op) {
        switch (op->kind) {
        case MNT_MKDIR: return mkdir(op->dst, op->mode) < 0 && errno != EEXIST ? -1 : 0;
        case MNT_SYMLINK: return symlink(op->src, op->dst) < 0 && errno != EEXIST ? -1 : 0;
        case MNT_TOUCH: return touch(op->dst, op->mode);
        case MNT_WRITE: return write_file_flags(op->dst, op->data, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, op->mode);
        case MNT_BIND:
                if (op->fd >= 0) {
                        /* our copy of the parent's fd: the init keeps none */
                        int r = sys_move_mount(op->fd, "", AT_FDCWD, op->dst, MOVE_MOUNT_F_EMPTY_PATH);
                        int saved = errno;
                        (void)close(op->fd);
                        errno = saved;
                        return r;
                }
                if (op->check_id)
                        return bind_checked(op);
                return mount(op->src, op->dst, NULL, MS_BIND | MS_REC, NULL);
        case MNT_TMPFS: return mount("tmpfs", op->dst, "tmpfs", op->flags, op->data);
        case MNT_PROC: return mount("proc", op->dst, "proc", op->flags, NULL);
        case MNT_SYSFS:
                /* Without a sysfs of our own (rootless on some kernels), the
                 * host's, read-only. */
                if (mount("sysfs", op->dst, "sysfs", op->flags, NULL) == 0)
                        return 0;
                if (mount("/sys", op->dst, NULL, MS_BIND | MS_REC, NULL) < 0)
                        return -1;
                return set_attr(op->dst, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, false);
        case MNT_DEVPTS: return mount("devpts", op->dst, "devpts", op->flags, op->data);
        case MNT_MKNOD: return mknod(op->dst, S_IFCHR | op->mode, (dev_t)op->flags) < 0 && errno != EEXIST ? -1 : 0;
        case MNT_MASK: return mask(op->dst);
        case MNT_RDONLY: return set_attr(op->dst, op->flags, op->keep_rw);
        case MNT_OVERLAY:
                if (op->check_id)
                        return overlay_checked(op);
                return mount("overlay", op->dst, "overlay", op->flags, op->data);
        case MNT_CHDIR: return chdir(op->dst);
        }
        errno = EINVAL;
        return -1;
}

static const char *op_name(enum mnt_kind k) {
        static const char *const names[] = {
                [MNT_MKDIR] = "mkdir",
                [MNT_SYMLINK] = "symlink",
                [MNT_TOUCH] = "create",
                [MNT_WRITE] = "write",
                [MNT_BIND] = "bind",
                [MNT_TMPFS] = "mount tmpfs on",
                [MNT_PROC] = "mount proc on",
                [MNT_SYSFS] = "mount sysfs on",
                [MNT_DEVPTS] = "mount devpts on",
                [MNT_MKNOD] = "mknod",
                [MNT_MASK] = "mask",
                [MNT_RDONLY] = "make read-only",
                [MNT_OVERLAY] = "mount overlay on",
                [MNT_CHDIR] = "enter",
        };
        return names[k];
}

int mnt_plan_run(const mnt_plan *p, int step, sb_err *e) {
        for (size_t i = 0; i < p->n; i++) {
                const mnt_op *op = &p->ops[i];
                if (op->step != step)
                        continue;
                if (run_op(op) == 0)
                        continue;
                if (op->optional && (errno == ENOENT || errno == EINVAL || errno == ELOOP))
                        continue;
                if ((op->kind == MNT_BIND || op->kind == MNT_OVERLAY) && errno == EXDEV)
                        return sb_fail(e, step, errno,
                                       "%s %s on /%s: it changed (or became a symlink) after the "
                                       "policy check",
                                       op->kind == MNT_BIND ? "bind" : "overlay of", op->src, op->dst);
                if (op->kind == MNT_BIND)
                        return sb_fail(e, step, errno, "bind %s on /%s", op->src, op->dst);
                return sb_fail(e, step, errno, "%s /%s", op_name(op->kind), op->dst);
        }
        return 0;
}

/* A root server's child cannot walk the state dir's path (its ids are not
 * the host's root): its stage is a tmpfs made with the new mount API,
 * stacked on / of its own mount namespace (lookups from the root still
 * start below it, so host paths resolve as before) and entered through its
 * fd; pivot_root takes it from there. */
static int enter_stage_on_root(const char *size, sb_err *e) {
        int fs = sys_fsopen("tmpfs", FSOPEN_CLOEXEC), mnt;

        if (fs < 0)
                return sb_fail(e, SB_STEP_ROOTFS, errno, "fsopen tmpfs (Linux 5.2 or newer)");
        if (sys_fsconfig(fs, FSCONFIG_SET_STRING, "size", size, 0) < 0 ||
            sys_fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0755", 0) < 0 ||
            sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return sb_fail(e, SB_STEP_ROOTFS, errno, "configure the stage's tmpfs");
        mnt = sys_fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        (void)close(fs);
        if (mnt < 0)
                return sb_fail(e, SB_STEP_ROOTFS, errno, "fsmount the stage's tmpfs");
        if (sys_move_mount(mnt, "", AT_FDCWD, "/", MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return sb_fail(e, SB_STEP_ROOTFS, errno, "attach the stage's tmpfs");
        if (fchdir(mnt) < 0)
                return sb_fail(e, SB_STEP_ROOTFS, errno, "enter the stage");
        (void)close(mnt);
        return 0;
}

int mnt_enter_stage(const char *stage, int64_t size, sb_err *e) {
        char opts[64];

        /* Modes in the plan are exact. */
        (void)umask(0);
        /* Nothing we mount may reach the host, nor host changes reach us. */
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return sb_fail(e, SB_STEP_MOUNTNS, errno, "make / private");
        if (!stage) {
                (void)snprintf(opts, sizeof opts, "%lld", (long long)size);
                return enter_stage_on_root(opts, e);
        }
        (void)snprintf(opts, sizeof opts, "size=%lld,mode=0755", (long long)size);
        if (mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
                return sb_fail(e, SB_STEP_ROOTFS, errno, "mount tmpfs on %s", stage);
        if (chdir(stage) < 0)
                return sb_fail(e, SB_STEP_ROOTFS, errno, "chdir %s", stage);
        return 0;
}

int mnt_pivot(bool readonly_root, sb_err *e) {
        struct cm_mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY};

        /* pivot_root(".", ".") stacks the old root on the new one; unmounting
         * "." then drops it, with no directory needed for it. */
        if (sys_pivot_root(".", ".") < 0)
                return sb_fail(e, SB_STEP_PIVOT, errno, "pivot_root");
        if (umount2(".", MNT_DETACH) < 0)
                return sb_fail(e, SB_STEP_PIVOT, errno, "detach the old root");
        /* A root server's stage is a tmpfs mounted over the host's "/", so
         * two mounts were stacked there (the stage, then the host's root):
         * detach until only the new root is left, which refuses (EINVAL:
         * the namespace's root cannot go).  Else the host's mounts stay in
         * the sandbox's mount table, out of reach but listed in
         * /proc/self/mountinfo with their host paths. */
        for (int i = 0; i < 8 && umount2(".", MNT_DETACH) == 0; i++)
                ;
        if (chdir("/") < 0)
                return sb_fail(e, SB_STEP_PIVOT, errno, "chdir /");
        (void)umask(022);
        if (readonly_root && sys_mount_setattr(AT_FDCWD, "/", 0, &a) < 0 &&
            mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
                return sb_fail(e, SB_STEP_PIVOT, errno, "make / read-only");
        return 0;
}
