/* Streaming tar, both ways (tar.h).  ustar headers; long names read from
 * pax ('x') and GNU ('L', 'K') records and written as pax. */
#include "backend/docker/tar.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "util/cleanup.h"

#define BLOCK 512
#define EXT_MAX (1u << 20) /* a pax or GNU long-name record */

/* ---- reading ---------------------------------------------------------------- */

struct dk_untar {
        int dir;
        char *top;
        uint64_t max_bytes;
        unsigned char hdr[BLOCK];
        size_t hdr_len;
        uint64_t left;  /* data bytes of the entry still to come */
        size_t pad;     /* padding after them */
        int out;        /* file being written, or -1 */
        char *ext;      /* collecting a 'x'/'L'/'K' record */
        size_t ext_len;
        char ext_type;
        char *long_name, *long_link;
        int zero_blocks;
        bool failed;
        cm_err err;
        cm_copy_stats st;
};

dk_untar *dk_untar_new(int dir_fd, const char *top, uint64_t max_bytes) {
        dk_untar *u = xcalloc(1, sizeof *u);
        u->dir = dir_fd;
        u->top = xstrdup(top);
        u->max_bytes = max_bytes;
        u->out = -1;
        return u;
}

void dk_untar_free(dk_untar *u) {
        if (!u)
                return;
        if (u->out >= 0)
                (void)close(u->out);
        free(u->top);
        free(u->ext);
        free(u->long_name);
        free(u->long_link);
        free(u);
}

__attribute__((format(printf, 3, 4))) static int fail(dk_untar *u, int code, const char *fmt, ...) {
        va_list ap;
        char msg[CM_ERR_MAX];
        if (!u->failed) {
                va_start(ap, fmt);
                (void)vsnprintf(msg, sizeof msg, fmt, ap);
                va_end(ap);
                cm_err_set(&u->err, code, "%s", msg);
        }
        u->failed = true;
        return -1;
}

static uint64_t octal(const unsigned char *p, size_t n) {
        uint64_t v = 0;
        for (size_t i = 0; i < n && p[i]; i++)
                if (p[i] >= '0' && p[i] <= '7')
                        v = v * 8 + (uint64_t)(p[i] - '0');
        return v;
}

static char *field(const unsigned char *p, size_t n) { return xstrndup((const char *)p, strnlen((const char *)p, n)); }

/* pax records "LEN key=value\n": path and linkpath. */
static void parse_pax(dk_untar *u) {
        size_t i = 0;
        while (i < u->ext_len) {
                char *end;
                unsigned long len = strtoul(u->ext + i, &end, 10);
                char *kv = end + 1, *eq;
                if (!len || i + len > u->ext_len || *end != ' ')
                        return;
                eq = memchr(kv, '=', len - (size_t)(kv - (u->ext + i)));
                if (eq) {
                        size_t vlen = (size_t)(u->ext + i + len - 1 - (eq + 1));
                        if ((size_t)(eq - kv) == 4 && strncmp(kv, "path", 4) == 0) {
                                free(u->long_name);
                                u->long_name = xstrndup(eq + 1, vlen);
                        } else if ((size_t)(eq - kv) == 8 && strncmp(kv, "linkpath", 8) == 0) {
                                free(u->long_link);
                                u->long_link = xstrndup(eq + 1, vlen);
                        }
                }
                i += len;
        }
}

/* The name below our directory: first component renamed, every component
 * a plain name. */
static char *local_name(dk_untar *u, const char *name) {
        cleanup_free char *copy = xstrdup(name);
        char *save = NULL, *out = NULL, *tmp;
        bool first = true;
        if (name[0] == '/')
                return NULL;
        for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                if (strcmp(c, ".") == 0 && first)
                        continue;
                if (strcmp(c, "..") == 0 || strcmp(c, ".") == 0) {
                        free(out);
                        return NULL;
                }
                tmp = out ? xasprintf("%s/%s", out, c) : xstrdup(first ? u->top : c);
                free(out);
                out = tmp;
                first = false;
        }
        return out;
}

/* Open the directory holding `path` (relative), every component a real
 * directory reached without following a symlink; creating missing ones. */
static int open_parent(dk_untar *u, const char *path, char **ret_name) {
        cleanup_free char *copy = xstrdup(path);
        char *slash = strrchr(copy, '/'), *save = NULL;
        int fd = fcntl(u->dir, F_DUPFD_CLOEXEC, 3);
        *ret_name = xstrdup(slash ? slash + 1 : copy);
        if (!slash)
                return fd;
        *slash = 0;
        for (char *c = strtok_r(copy, "/", &save); c && fd >= 0; c = strtok_r(NULL, "/", &save)) {
                int next;
                (void)mkdirat(fd, c, 0755);
                next = openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                (void)close(fd);
                fd = next;
        }
        return fd;
}

static int begin_entry(dk_untar *u) {
        const unsigned char *h = u->hdr;
        char type = (char)h[156];
        uint64_t size = octal(h + 124, 12);
        unsigned mode = (unsigned)octal(h + 100, 8) & 01777; /* no setuid, setgid */
        cleanup_free char *raw = NULL, *name = NULL, *link = NULL, *base = NULL;
        cleanup_close int parent = -1;

        if (h[124] & 0x80)
                return fail(u, EFBIG, "an archive entry is too large (%s)", "base-256 size");
        u->left = size;
        u->pad = (size_t)((BLOCK - size % BLOCK) % BLOCK);
        if (type == 'x' || type == 'L' || type == 'K') {
                if (size > EXT_MAX)
                        return fail(u, EFBIG, "an archive's %s record is too large", "long-name");
                u->ext_type = type;
                u->ext_len = 0;
                u->ext = xrealloc(u->ext, size + 1);
                return 0;
        }
        if (type == 'g')
                return 0; /* global pax settings: skipped with their data */
        if (u->long_name) {
                raw = steal_pointer(&u->long_name);
        } else if (h[345]) {
                cleanup_free char *prefix = field(h + 345, 155), *rest = field(h, 100);
                raw = xasprintf("%s/%s", prefix, rest); /* ustar prefix */
        } else {
                raw = field(h, 100);
        }
        link = u->long_link ? steal_pointer(&u->long_link) : field(h + 157, 100);
        if (!(name = local_name(u, raw)))
                return fail(u, EPERM, "refused an archive entry that leaves its directory: %s", raw);
        if ((parent = open_parent(u, name, &base)) < 0)
                return fail(u, EPERM, "refused an archive entry below something not a directory (a symlink?): %s",
                            raw);
        switch (type) {
        case '5':
                if (mkdirat(parent, base, mode | 0700) < 0 && errno != EEXIST)
                        return fail(u, errno, "cannot make directory %s", name);
                u->st.dirs++;
                return 0;
        case '2':
                (void)unlinkat(parent, base, 0);
                if (symlinkat(link, parent, base) < 0)
                        return fail(u, errno, "cannot make symlink %s", name);
                u->st.symlinks++;
                return 0;
        case '0':
        case '\0':
        case '7':
                if (u->st.bytes + size > u->max_bytes)
                        return fail(u, EFBIG, "the copy would pass its cap of bytes at %s", name);
                u->out = openat(parent, base, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
                if (u->out < 0 && errno == ELOOP && unlinkat(parent, base, 0) == 0)
                        u->out = openat(parent, base, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
                if (u->out < 0)
                        return fail(u, errno, "cannot write %s", name);
                (void)fchmod(u->out, mode);
                u->st.files++;
                return 0;
        default: /* hard links, devices, FIFOs: not copied */
                u->st.skipped++;
                return 0;
        }
}

static int entry_data(dk_untar *u, const char *p, size_t n) {
        if (u->ext_type) {
                memcpy(u->ext + u->ext_len, p, n);
                u->ext_len += n;
                return 0;
        }
        if (u->out >= 0) {
                while (n > 0) {
                        ssize_t k = write(u->out, p, n);
                        if (k < 0)
                                return fail(u, errno, "cannot write a copied file (%s)", strerror(errno));
                        p += k, n -= (size_t)k;
                        u->st.bytes += (uint64_t)k;
                }
        }
        return 0;
}

static void end_entry(dk_untar *u) {
        if (u->out >= 0)
                (void)close(u->out);
        u->out = -1;
        if (u->ext_type == 'x')
                parse_pax(u);
        else if (u->ext_type == 'L' || u->ext_type == 'K') {
                char **dst = u->ext_type == 'L' ? &u->long_name : &u->long_link;
                free(*dst);
                *dst = xstrndup(u->ext, u->ext_len);
        }
        u->ext_type = 0;
}

int dk_untar_feed(dk_untar *u, const char *p, size_t n) {
        while (n > 0 && !u->failed && u->zero_blocks < 2) {
                size_t take;
                if (u->left > 0) {
                        take = u->left < n ? (size_t)u->left : n;
                        if (entry_data(u, p, take) < 0)
                                return -1;
                        u->left -= take, p += take, n -= take;
                        if (u->left == 0 && u->pad == 0)
                                end_entry(u);
                        continue;
                }
                if (u->pad > 0) {
                        take = u->pad < n ? u->pad : n;
                        u->pad -= take, p += take, n -= take;
                        if (u->pad == 0)
                                end_entry(u);
                        continue;
                }
                take = BLOCK - u->hdr_len < n ? BLOCK - u->hdr_len : n;
                memcpy(u->hdr + u->hdr_len, p, take);
                u->hdr_len += take, p += take, n -= take;
                if (u->hdr_len < BLOCK)
                        continue;
                u->hdr_len = 0;
                if (u->hdr[0] == 0) {
                        u->zero_blocks++;
                        continue;
                }
                if (begin_entry(u) < 0)
                        return -1;
                if (u->left == 0 && u->pad == 0)
                        end_entry(u);
        }
        return u->failed ? -1 : 0;
}

int dk_untar_end(dk_untar *u, cm_copy_stats *ret, cm_err *err) {
        if (!u->failed && (u->left || u->hdr_len || u->pad))
                (void)fail(u, EIO, "the archive ended in the middle of %s", "an entry");
        if (u->failed) {
                *err = u->err;
                return -1;
        }
        *ret = u->st;
        return 0;
}

/* ---- writing ---------------------------------------------------------------- */

typedef struct frame {
        DIR *d;
        char *path; /* in the archive */
} frame;

struct dk_tarw {
        int dir;
        char *name, *top;
        bool started, finished;
        uint64_t max_bytes;
        frame *stack;
        size_t depth;
        char *buf; /* headers waiting to be read */
        size_t buf_len, buf_off;
        int file;
        uint64_t file_left;
        size_t pad;
        bool failed;
        cm_err err;
        cm_copy_stats st;
        dk_tar_filter filter;
        void *filter_arg;
};

void dk_tarw_set_filter(dk_tarw *w, dk_tar_filter fn, void *arg) {
        w->filter = fn;
        w->filter_arg = arg;
}

dk_tarw *dk_tarw_new(int dir_fd, const char *name, const char *top, uint64_t max_bytes) {
        dk_tarw *w = xcalloc(1, sizeof *w);
        w->dir = dir_fd;
        w->name = xstrdup(name);
        w->top = xstrdup(top);
        w->max_bytes = max_bytes;
        w->file = -1;
        return w;
}

void dk_tarw_free(dk_tarw *w) {
        if (!w)
                return;
        while (w->depth > 0) {
                frame *f = &w->stack[--w->depth];
                (void)closedir(f->d);
                free(f->path);
        }
        if (w->file >= 0)
                (void)close(w->file);
        free(w->stack);
        free(w->buf);
        free(w->name);
        free(w->top);
        free(w);
}

static int wfail(dk_tarw *w, int code, const char *what, const char *path) {
        if (!w->failed)
                cm_err_set(&w->err, code, "%s %s: %s", what, path, strerror(code));
        w->failed = true;
        return -1;
}

static void put_block(dk_tarw *w, const unsigned char *b, size_t n) {
        w->buf = xrealloc(w->buf, w->buf_len + n);
        memcpy(w->buf + w->buf_len, b, n);
        w->buf_len += n;
}

/* An octal field of w bytes: w-1 digits and the NUL (a size past 8 GiB
 * never gets here: the cap is smaller). */
static void octal_field(unsigned char *dst, size_t w, unsigned long long v) {
        char tmp[32];
        int n = snprintf(tmp, sizeof tmp, "%0*llo", (int)(w - 1), v);
        memcpy(dst, tmp + (size_t)n - (w - 1), w - 1);
        dst[w - 1] = 0;
}

static void header(dk_tarw *w, const char *name, char type, unsigned mode, uint64_t size, int64_t mtime,
                   const char *link) {
        unsigned char h[BLOCK] = {0};
        unsigned sum = 0;
        (void)snprintf((char *)h, 100, "%s", name);
        octal_field(h + 100, 8, mode & 01777);
        octal_field(h + 108, 8, 0);
        octal_field(h + 116, 8, 0);
        octal_field(h + 124, 12, size);
        octal_field(h + 136, 12, (unsigned long long)(mtime > 0 ? mtime : 0));
        memset(h + 148, ' ', 8);
        h[156] = (unsigned char)type;
        if (link)
                (void)snprintf((char *)h + 157, 100, "%s", link);
        memcpy(h + 257, "ustar", 6);
        memcpy(h + 263, "00", 2);
        for (size_t i = 0; i < BLOCK; i++)
                sum += h[i];
        octal_field(h + 148, 7, sum);
        h[155] = ' ';
        put_block(w, h, BLOCK);
}

/* "LEN key=value\n", LEN counting itself. */
static char *pax_record(const char *key, const char *value) {
        size_t base = strlen(key) + strlen(value) + 3, len = base + 1;
        while (snprintf(NULL, 0, "%zu", len) + base != len)
                len++;
        return xasprintf("%zu %s=%s\n", len, key, value);
}

static void entry_header(dk_tarw *w, const char *name, char type, unsigned mode, uint64_t size, int64_t mtime,
                         const char *link) {
        if (strlen(name) >= 100 || (link && strlen(link) >= 100)) {
                cleanup_free char *p = pax_record("path", name);
                cleanup_free char *l = link ? pax_record("linkpath", link) : xstrdup("");
                cleanup_free char *rec = xasprintf("%s%s", p, l);
                unsigned char zero[BLOCK] = {0};
                size_t n = strlen(rec);
                header(w, "././@PaxHeader", 'x', 0644, n, mtime, NULL);
                put_block(w, (const unsigned char *)rec, n);
                put_block(w, zero, (BLOCK - n % BLOCK) % BLOCK);
        }
        header(w, name, type, mode, size, mtime, link);
}

static int add_entry(dk_tarw *w, int parent, const char *name, const char *arcname) {
        enum dk_tar_verdict v = DK_TAR_KEEP;
        struct stat st;
        if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return wfail(w, errno, "cannot read", arcname);
        if (w->filter && *arcname)
                v = w->filter(w->filter_arg, arcname, S_ISDIR(st.st_mode));
        if (v == DK_TAR_SKIP || (v == DK_TAR_SKIP_ENTRY && !S_ISDIR(st.st_mode)))
                return 0;
        if (S_ISREG(st.st_mode)) {
                w->file = openat(parent, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
                if (w->file < 0 || fstat(w->file, &st) < 0 || !S_ISREG(st.st_mode))
                        return wfail(w, w->file < 0 ? errno : EINVAL, "cannot open", arcname);
                if (w->st.bytes + (uint64_t)st.st_size > w->max_bytes)
                        return wfail(w, EFBIG, "the copy would pass its cap at", arcname);
                entry_header(w, arcname, '0', st.st_mode, (uint64_t)st.st_size, st.st_mtime, NULL);
                w->file_left = (uint64_t)st.st_size;
                w->pad = (size_t)((BLOCK - (uint64_t)st.st_size % BLOCK) % BLOCK);
                w->st.files++;
        } else if (S_ISDIR(st.st_mode)) {
                int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
                cleanup_free char *dname = xasprintf("%s/", arcname);
                if (!d) {
                        if (fd >= 0)
                                (void)close(fd);
                        return wfail(w, errno, "cannot open directory", arcname);
                }
                /* the root of an unnamed top, and a directory left out
                 * whose insides may not be, have no entry */
                if (*arcname && v == DK_TAR_KEEP)
                        entry_header(w, dname, '5', st.st_mode, 0, st.st_mtime, NULL);
                w->stack = xrealloc(w->stack, (w->depth + 1) * sizeof *w->stack);
                w->stack[w->depth++] = (frame){d, xstrdup(arcname)};
                w->st.dirs++;
        } else if (S_ISLNK(st.st_mode)) {
                char target[4096];
                ssize_t n = readlinkat(parent, name, target, sizeof target - 1);
                if (n < 0)
                        return wfail(w, errno, "cannot read symlink", arcname);
                target[n] = 0;
                entry_header(w, arcname, '2', 0777, 0, st.st_mtime, target);
                w->st.symlinks++;
        } else {
                w->st.skipped++; /* devices, FIFOs, sockets */
        }
        return 0;
}

/* Queue the next entry's header (and open its file), or the end. */
static int next_entry(dk_tarw *w) {
        if (!w->started) {
                w->started = true;
                return add_entry(w, w->dir, w->name, w->top);
        }
        while (w->depth > 0) {
                frame *f = &w->stack[w->depth - 1];
                struct dirent *de = readdir(f->d);
                if (!de) {
                        (void)closedir(f->d);
                        free(f->path);
                        w->depth--;
                        continue;
                }
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                cleanup_free char *arc = *f->path ? xasprintf("%s/%s", f->path, de->d_name) : xstrdup(de->d_name);
                return add_entry(w, dirfd(f->d), de->d_name, arc);
        }
        unsigned char zero[2 * BLOCK] = {0};
        put_block(w, zero, sizeof zero);
        w->finished = true;
        return 0;
}

ssize_t dk_tarw_read(dk_tarw *w, char *p, size_t n) {
        while (!w->failed) {
                if (w->buf_off < w->buf_len) {
                        size_t take = w->buf_len - w->buf_off < n ? w->buf_len - w->buf_off : n;
                        memcpy(p, w->buf + w->buf_off, take);
                        w->buf_off += take;
                        if (w->buf_off == w->buf_len)
                                w->buf_off = w->buf_len = 0;
                        return (ssize_t)take;
                }
                if (w->file >= 0 && w->file_left > 0) {
                        ssize_t k = read(w->file, p, w->file_left < n ? (size_t)w->file_left : n);
                        if (k < 0)
                                return wfail(w, errno, "cannot read", "a copied file");
                        if (k == 0) /* the file shrank meanwhile: zeros keep the archive whole */
                                k = (ssize_t)(w->file_left < n ? w->file_left : n), memset(p, 0, (size_t)k);
                        w->file_left -= (uint64_t)k;
                        w->st.bytes += (uint64_t)k;
                        return k;
                }
                if (w->file >= 0) {
                        unsigned char zero[BLOCK] = {0};
                        (void)close(w->file);
                        w->file = -1;
                        put_block(w, zero, w->pad);
                        continue;
                }
                if (w->finished)
                        return 0;
                if (next_entry(w) < 0)
                        break;
        }
        return -1;
}

int dk_tarw_end(dk_tarw *w, cm_copy_stats *ret, cm_err *err) {
        if (w->failed) {
                *err = w->err;
                return -1;
        }
        *ret = w->st;
        return 0;
}
