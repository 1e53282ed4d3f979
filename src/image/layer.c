/* Reading layer tarballs (and image archives) into a directory.
 *
 * Two libarchive readers are stacked: the outer one only decompresses
 * (gzip, zstd or nothing: "raw" format), and its bytes are hashed and
 * counted on their way to the inner one, which reads tar.  So the diff-id
 * is the digest of exactly what was unpacked, and a decompression bomb
 * stops at the cap however it is built (big files or many headers).
 *
 * Nothing an entry says is trusted: names are split into components, ".."
 * is refused, a leading "/" is dropped (the entry stays inside), every
 * directory on the way is opened with O_NOFOLLOW (a symlink made by an
 * earlier entry cannot be written through), hard links must name an
 * earlier entry of the same archive by the same rules, device nodes are
 * skipped, and owners are shifted (store.h, img_owner).
 *
 * Whiteouts: in the store (UNPACK_LAYER) `.wh.NAME` becomes a character
 * device 0/0 named NAME and `.wh..wh..opq` the xattr user.overlay.opaque=y
 * on its directory: what overlayfs mounted with `userxattr` (the native
 * runtime always mounts in a user namespace) reads, and what an
 * unprivileged process may create (a 0/0 whiteout needs no CAP_MKNOD since
 * Linux 5.8).  Applied onto lower layers (UNPACK_APPLY) they delete. */
#include "image/layer.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "util/cleanup.h"

#define IO_BLOCK (64 * 1024)
#define MAX_DEPTH 256
#define HEADER_COST 512 /* what each entry counts against the cap */
#define WH_PREFIX ".wh."
#define WH_OPAQUE ".wh..wh..opq"

typedef struct reader {
        struct archive *outer;
        cm_sha256_ctx sha;
        uint64_t bytes, cap;
        bool over;    /* the cap was passed */
        bool failed;  /* the outer reader failed */
        char buf[IO_BLOCK];
        char why[256];
} reader;

/* A directory whose mode and mtime are set at the end, once nothing more
 * is written in it (a 0555 directory would refuse its own entries). */
typedef struct dir_fix {
        char *path;
        mode_t mode;
        struct timespec mtime;
} dir_fix;

typedef struct unpack {
        const img_unpack_opts *o;
        int dst;
        reader r;
        dir_fix *fix;
        size_t n_fix, cap_fix;
        img_unpack_result *res;
} unpack;

static la_ssize_t inner_read(struct archive *a, void *arg, const void **ret) {
        reader *r = arg;
        la_ssize_t n = archive_read_data(r->outer, r->buf, sizeof r->buf);
        if (n < 0) {
                r->failed = true;
                (void)snprintf(r->why, sizeof r->why, "%s", archive_error_string(r->outer));
                archive_set_error(a, EIO, "%s", r->why);
                return -1;
        }
        r->bytes += (uint64_t)n;
        if (r->bytes > r->cap) {
                r->over = true;
                archive_set_error(a, EFBIG, "over the size cap");
                return -1;
        }
        cm_sha256_update(&r->sha, r->buf, (size_t)n);
        *ret = r->buf;
        return n;
}

/* ---- paths ---------------------------------------------------------------- */

/* The entry's name as components joined by '/', without "", "." and a
 * leading '/'; NULL (errno EPERM) when a component is "..". */
static char *clean_path(const char *raw) {
        size_t n = strlen(raw);
        char *out = xmalloc(n + 1), *o = out;
        const char *p = raw;

        while (*p) {
                const char *end = strchr(p, '/');
                size_t len = end ? (size_t)(end - p) : strlen(p);
                if (len == 2 && p[0] == '.' && p[1] == '.') {
                        free(out);
                        errno = EPERM;
                        return NULL;
                }
                if (len > 0 && !(len == 1 && p[0] == '.')) {
                        if (o != out)
                                *o++ = '/';
                        memcpy(o, p, len);
                        o += len;
                }
                p += len;
                if (*p == '/')
                        p++;
        }
        *o = 0;
        return out;
}

/* Walk the directories of `path` but the last beneath dst; create those
 * missing when `create` (0700: their fixups come later if an entry names
 * them).  Returns an fd of the parent and points *ret_name at the last
 * component; -1 with errno (ELOOP/ENOTDIR: a symlink or a file on the way). */
static int open_parent(int dst, char *path, bool create, const img_owner *own, const char **ret_name) {
        char *slash = strrchr(path, '/');
        int fd = dup(dst);
        char *p = path;

        if (fd < 0)
                return -1;
        *ret_name = slash ? slash + 1 : path;
        if (!slash)
                return fd;
        *slash = 0;
        while (p) {
                char *next = strchr(p, '/');
                int sub;
                if (next)
                        *next = 0;
                sub = openat(fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0 && errno == ENOENT && create) {
                        if (mkdirat(fd, p, 0755) < 0 && errno != EEXIST) {
                                (void)close(fd);
                                return -1;
                        }
                        sub = openat(fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0 && own->chown)
                                (void)fchown(sub, own->uid_base, own->gid_base);
                }
                if (next)
                        *next = '/';
                (void)close(fd);
                if (sub < 0)
                        return -1;
                fd = sub;
                p = next ? next + 1 : NULL;
        }
        *slash = '/';
        return fd;
}

int img_open_beneath(int dir, const char *rel, int flags) {
        cleanup_free char *path = clean_path(rel);
        const char *name;
        cleanup_close int parent = -1;

        if (!path)
                return -1;
        if (!path[0])
                return openat(dir, ".", flags | O_CLOEXEC);
        parent = open_parent(dir, path, false, &(img_owner){0}, &name);
        if (parent < 0)
                return -1;
        return openat(parent, name, flags | O_NOFOLLOW | O_CLOEXEC);
}

/* ---- removing ------------------------------------------------------------- */

static void remove_depth(int dir, const char *name, int depth) {
        int fd = depth < MAX_DEPTH ? openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
        DIR *d;
        struct dirent *de;
        struct stat st;

        /* a rootless server's dir of mode 0 (overlayfs makes its work/work
         * so): ours, so opened once made readable */
        if (fd < 0 && errno == EACCES && fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
            fchmodat(dir, name, 0700, 0) == 0)
                fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
                (void)fchmod(fd, 0700); /* ours, whatever mode it came with */
                if ((d = fdopendir(fd))) {
                        while ((de = readdir(d)))
                                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                                        remove_depth(dirfd(d), de->d_name, depth + 1);
                        (void)closedir(d);
                } else
                        (void)close(fd);
        }
        if (unlinkat(dir, name, AT_REMOVEDIR) < 0)
                (void)unlinkat(dir, name, 0);
}

void img_remove_at(int dir, const char *name) { remove_depth(dir, name, 0); }

static uint64_t bytes_depth(int dir, const char *name, int depth) {
        struct stat st;
        uint64_t sum = 0;
        int fd;
        DIR *d;
        struct dirent *de;

        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return 0;
        if (!S_ISDIR(st.st_mode))
                return S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
        if (depth >= MAX_DEPTH || (fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                return 0;
        if (!(d = fdopendir(fd))) {
                (void)close(fd);
                return 0;
        }
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        sum += bytes_depth(dirfd(d), de->d_name, depth + 1);
        (void)closedir(d);
        return sum;
}

uint64_t img_tree_bytes(int dir, const char *name) { return bytes_depth(dir, name, 0); }

/* ---- entries -------------------------------------------------------------- */

static uid_t shift(int64_t id, unsigned base) { return (uid_t)(base + (id >= 0 && id < 65536 ? (unsigned)id : 65534u)); }

/* e NULL: the image's root owns it */
static void set_owner(const unpack *u, int dir, const char *name, struct archive_entry *e) {
        const img_owner *own = &u->o->owner;
        if (u->o->mode == UNPACK_PLAIN || !own->chown)
                return;
        (void)fchownat(dir, name, shift(e ? archive_entry_uid(e) : 0, own->uid_base),
                       (gid_t)shift(e ? archive_entry_gid(e) : 0, own->gid_base), AT_SYMLINK_NOFOLLOW);
}

static mode_t entry_mode(const unpack *u, struct archive_entry *e) {
        mode_t m = archive_entry_perm(e) & 07777;
        /* an archive's files are only read by us */
        return u->o->mode == UNPACK_PLAIN ? (m & 0755) | 0600 : m;
}

static void add_fix(unpack *u, const char *path, mode_t mode, struct archive_entry *e) {
        if (u->n_fix == u->cap_fix) {
                u->cap_fix = u->cap_fix ? u->cap_fix * 2 : 64;
                u->fix = xrealloc(u->fix, u->cap_fix * sizeof *u->fix);
        }
        u->fix[u->n_fix++] = (dir_fix){xstrdup(path), mode,
                                       {archive_entry_mtime(e), archive_entry_mtime_nsec(e)}};
}

/* Make room for a new entry at dir/name: what an earlier entry (or a
 * lower layer, applied) left there goes, unless both are directories. */
static int clear_for(int dir, const char *name, bool is_dir) {
        struct stat st;
        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -1;
        if (is_dir && S_ISDIR(st.st_mode))
                return 1;
        img_remove_at(dir, name);
        return 0;
}

static int write_data(unpack *u, struct archive *a, int fd, cm_err *err) {
        const void *buf;
        size_t len;
        la_int64_t off, pos = 0;
        int r;

        while ((r = archive_read_data_block(a, &buf, &len, &off)) == ARCHIVE_OK) {
                if (off > pos && lseek(fd, off, SEEK_SET) < 0) /* sparse */
                        return cm_err_sys(err, errno, "layer: seek");
                for (size_t done = 0; done < len;) {
                        ssize_t w = write(fd, (const char *)buf + done, len - done);
                        if (w < 0 && errno == EINTR)
                                continue;
                        if (w < 0)
                                return cm_err_sys(err, errno, "layer: write");
                        done += (size_t)w;
                }
                pos = off + (la_int64_t)len;
                u->res->file_bytes += len;
        }
        if (r != ARCHIVE_EOF)
                return -1; /* the caller reads the archive's error */
        if (pos > 0 && ftruncate(fd, pos) < 0)
                return cm_err_sys(err, errno, "layer: truncate");
        return 0;
}

static int do_whiteout(unpack *u, int parent, const char *name, const char *path, cm_err *err) {
        const char *target = name + strlen(WH_PREFIX);

        if (strcmp(name, WH_OPAQUE) == 0) {
                if (u->o->mode == UNPACK_APPLY) {
                        /* the directory is this entry's parent: empty it of
                         * what the lower layers put there */
                        cleanup_close int self = openat(parent, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        DIR *d = self >= 0 ? fdopendir(take_fd(&self)) : NULL;
                        struct dirent *de;
                        if (d) {
                                while ((de = readdir(d)))
                                        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                                                img_remove_at(dirfd(d), de->d_name);
                                (void)closedir(d);
                        }
                        return 0;
                }
                if (fsetxattr(parent, "user.overlay.opaque", "y", 1, 0) < 0)
                        return cm_err_sys(err, errno, "layer: cannot mark \"%s\" opaque (user.overlay.opaque)", path);
                return 0;
        }
        if (strncmp(target, WH_PREFIX, strlen(WH_PREFIX)) == 0 || !target[0] || strcmp(target, ".") == 0)
                return 0; /* .wh..wh.plnk and the like: aufs bookkeeping */
        img_remove_at(parent, target);
        if (u->o->mode == UNPACK_APPLY)
                return 0;
        if (mknodat(parent, target, S_IFCHR | 0600, makedev(0, 0)) < 0)
                return cm_err_sys(err, errno, "layer: cannot make the whiteout of \"%s\"", path);
        set_owner(u, parent, target, NULL);
        return 0;
}

static int do_hardlink(unpack *u, int parent, const char *name, const char *raw_target, const char *path,
                       cm_err *err) {
        cleanup_free char *target = clean_path(raw_target);
        cleanup_close int tparent = -1;
        const char *tname;
        struct stat st;

        if (!target || !target[0])
                return cm_err_set(err, EPERM, "layer entry \"%s\": hard link to \"%s\" leaves the layer; refused", path,
                                  raw_target);
        tparent = open_parent(u->dst, target, false, &u->o->owner, &tname);
        if (tparent < 0 || fstatat(tparent, tname, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return cm_err_set(err, EPERM,
                                  "layer entry \"%s\": hard link to \"%s\", which is not an earlier entry of the "
                                  "layer (or lies behind a symlink); refused",
                                  path, raw_target);
        if (S_ISDIR(st.st_mode))
                return cm_err_set(err, EPERM, "layer entry \"%s\": hard link to the directory \"%s\"; refused", path,
                                  raw_target);
        if (clear_for(parent, name, false) < 0 || linkat(tparent, tname, parent, name, 0) < 0)
                return cm_err_sys(err, errno, "layer entry \"%s\": hard link to \"%s\"", path, raw_target);
        return 0;
}

static int do_entry(unpack *u, struct archive *a, struct archive_entry *e, cm_err *err) {
        const char *raw = archive_entry_pathname(e), *name, *hl = archive_entry_hardlink(e);
        cleanup_free char *path = raw ? clean_path(raw) : NULL;
        cleanup_close int parent = -1;
        mode_t type = archive_entry_filetype(e), mode = entry_mode(u, e);
        struct timespec times[2] = {{archive_entry_atime(e), archive_entry_atime_nsec(e)},
                                    {archive_entry_mtime(e), archive_entry_mtime_nsec(e)}};

        if (!raw)
                return cm_err_set(err, EINVAL, "layer: an entry without a name");
        if (!path)
                return cm_err_set(err, EPERM, "layer entry \"%s\" leaves the layer (\"..\"); refused", raw);
        if (!path[0]) {
                /* the root itself ("./"): its mode, later */
                if (type == AE_IFDIR && u->o->mode != UNPACK_PLAIN)
                        add_fix(u, ".", mode, e);
                return 0;
        }
        {
                cleanup_free char *copy = xstrdup(path);
                parent = open_parent(u->dst, copy, true, &u->o->owner, &name);
                if (parent < 0)
                        return cm_err_set(err, EPERM,
                                          "layer entry \"%s\" goes through a symlink or a file (%s); refused", raw,
                                          strerror(errno));
                name = path + (name - copy);
        }
        if (u->o->mode != UNPACK_PLAIN && strncmp(name, WH_PREFIX, strlen(WH_PREFIX)) == 0)
                return do_whiteout(u, parent, name, raw, err);
        if (hl)
                return do_hardlink(u, parent, name, hl, raw, err);

        switch (type) {
        case AE_IFDIR:
                if (clear_for(parent, name, true) == 0 && mkdirat(parent, name, 0700) < 0)
                        return cm_err_sys(err, errno, "layer entry \"%s\": mkdir", raw);
                set_owner(u, parent, name, e);
                /* an archive's directories: we walk them all */
                add_fix(u, path, u->o->mode == UNPACK_PLAIN ? mode | 0700 : mode, e);
                return 0;
        case AE_IFREG: {
                cleanup_close int fd = -1;
                if (clear_for(parent, name, false) < 0)
                        return cm_err_sys(err, errno, "layer entry \"%s\"", raw);
                fd = openat(parent, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0)
                        return cm_err_sys(err, errno, "layer entry \"%s\": create", raw);
                if (write_data(u, a, fd, err) < 0)
                        return -1;
                set_owner(u, parent, name, e);
                /* after chown, which drops setuid and setgid */
                (void)fchmod(fd, mode);
                (void)futimens(fd, times);
                return 0;
        }
        case AE_IFLNK: {
                const char *to = archive_entry_symlink(e);
                if (!to)
                        return cm_err_set(err, EINVAL, "layer entry \"%s\": a symlink without a target", raw);
                if (clear_for(parent, name, false) < 0 || symlinkat(to, parent, name) < 0)
                        return cm_err_sys(err, errno, "layer entry \"%s\": symlink", raw);
                set_owner(u, parent, name, e);
                (void)utimensat(parent, name, times, AT_SYMLINK_NOFOLLOW);
                return 0;
        }
        case AE_IFIFO:
                if (clear_for(parent, name, false) < 0 || mkfifoat(parent, name, mode) < 0)
                        return cm_err_sys(err, errno, "layer entry \"%s\": mkfifo", raw);
                set_owner(u, parent, name, e);
                return 0;
        default:
                /* device nodes and sockets: never created */
                u->res->skipped++;
                return 0;
        }
}

/* Deepest first (the reverse of the archive's order); apply: false only
 * frees them (a failed unpack, whose directory goes). */
static void finish_fixes(unpack *u, bool apply) {
        for (size_t i = u->n_fix; i-- > 0;) {
                cleanup_close int fd = apply ? img_open_beneath(u->dst, u->fix[i].path, O_RDONLY | O_DIRECTORY) : -1;
                if (fd >= 0) {
                        (void)fchmod(fd, u->fix[i].mode);
                        (void)futimens(fd, (struct timespec[]){u->fix[i].mtime, u->fix[i].mtime});
                }
                free(u->fix[i].path);
        }
        free(u->fix);
        u->fix = NULL;
        u->n_fix = 0;
}

static int read_error(const unpack *u, struct archive *a, cm_err *err) {
        if (u->r.over)
                return cm_err_set(err, EFBIG,
                                  "layer is bigger than %llu bytes unpacked (CONTAINER_MCP_IMAGE_MAX_SIZE): stopped; "
                                  "raise the setting if the image is meant to be this big",
                                  (unsigned long long)u->r.cap);
        if (u->r.failed)
                return cm_err_set(err, EINVAL, "layer: cannot decompress: %s", u->r.why);
        return cm_err_set(err, EINVAL, "layer: not a valid tar archive: %s",
                          archive_error_string(a) ? archive_error_string(a) : "unknown error");
}

static int run(unpack *u, struct archive *inner, cm_err *err) {
        struct archive_entry *e;
        int r;

        while ((r = archive_read_next_header(inner, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
                if (cm_cancelled(u->o->cancel))
                        return cm_err_set(err, ECANCELED, "cancelled");
                u->r.bytes += HEADER_COST; /* so a flood of empty entries is a bomb too */
                if (do_entry(u, inner, e, err) < 0)
                        return err->code ? -1 : read_error(u, inner, err);
        }
        if (r != ARCHIVE_EOF)
                return read_error(u, inner, err);
        /* what follows the end of the tar counts for the digest */
        for (;;) {
                la_ssize_t n = archive_read_data(u->r.outer, u->r.buf, sizeof u->r.buf);
                if (n == 0)
                        break;
                if (n < 0) {
                        u->r.failed = true;
                        (void)snprintf(u->r.why, sizeof u->r.why, "%s", archive_error_string(u->r.outer));
                        return read_error(u, inner, err);
                }
                if ((u->r.bytes += (uint64_t)n) > u->r.cap) {
                        u->r.over = true;
                        return read_error(u, inner, err);
                }
                cm_sha256_update(&u->r.sha, u->r.buf, (size_t)n);
        }
        return 0;
}

int img_unpack(int src, int dst, const img_unpack_opts *o, img_unpack_result *ret, cm_err *err) {
        unpack u = {.o = o, .dst = dst, .res = ret};
        struct archive *inner = NULL;
        struct archive_entry *e;
        int r = -1;

        *ret = (img_unpack_result){0};
        cm_sha256_init(&u.r.sha);
        u.r.cap = o->max_bytes ? o->max_bytes : UINT64_MAX;
        u.r.outer = archive_read_new();
        (void)archive_read_support_filter_gzip(u.r.outer);
        (void)archive_read_support_filter_zstd(u.r.outer);
        (void)archive_read_support_format_raw(u.r.outer);
        if (archive_read_open_fd(u.r.outer, src, IO_BLOCK) != ARCHIVE_OK ||
            archive_read_next_header(u.r.outer, &e) != ARCHIVE_OK) {
                const char *why = archive_error_string(u.r.outer);
                /* an empty file is an empty layer, tar-wise: not valid */
                (void)cm_err_set(err, EINVAL, "layer: cannot read: %s", why ? why : "empty or not an archive");
                goto out;
        }
        inner = archive_read_new();
        (void)archive_read_support_format_tar(inner);
        if (archive_read_open(inner, &u.r, NULL, inner_read, NULL) != ARCHIVE_OK) {
                (void)read_error(&u, inner, err);
                goto out;
        }
        r = run(&u, inner, err);
        if (r == 0) {
                cm_sha256_final(&u.r.sha, ret->diff_id);
                ret->stream_bytes = u.r.bytes;
        }
out:
        finish_fixes(&u, r == 0);
        if (inner)
                (void)archive_read_free(inner);
        (void)archive_read_free(u.r.outer);
        return r < 0 ? -1 : 0;
}
