/* The file tools on the engine: each operation is one exec of a small
 * POSIX sh script in the container (busybox is enough), with the paths as
 * its arguments, never part of the script text.  The container resolves
 * them in its own root and acts as its own root user, so `..` and symlinks
 * cannot leave it and what is written belongs to the container.  The
 * archive endpoints cannot serve here: they do not see the container's
 * tmpfs mounts (/tmp).  Exit codes carry errno (2 ENOENT, 13 EACCES for a
 * pseudo-filesystem, 20 ENOTDIR, 21 EISDIR, 27 EFBIG, 39 ENOTEMPTY). */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/docker/internal.h"
#include "util/cleanup.h"

/* The canonical path in the container must not be a pseudo-filesystem. */
#define DK_NOT_PSEUDO                                                                                              \
        "r=$(realpath -- \"$1\" 2>/dev/null || echo \"$1\"); case \"$r\" in /proc|/proc/*|/sys|/sys/*|/dev|/dev/*) " \
        "echo \"$r is on a pseudo-filesystem\" >&2; exit 13;; esac; "

static const char read_script[] = DK_NOT_PSEUDO
        "[ -e \"$1\" ] || exit 2; [ -d \"$1\" ] && exit 21; [ -f \"$1\" ] || { echo 'not a regular file' >&2; exit 22; }; "
        "set -- \"$1\" \"$2\" $(stat -L -c '%s %Y' -- \"$1\") || exit 5; "
        "printf '%s %s\\n' \"$3\" \"$4\"; [ \"$3\" -gt \"$2\" ] && exit 27; exec cat -- \"$1\"";

static const char write_script[] = DK_NOT_PSEUDO
        "[ -d \"$1\" ] && [ ! -L \"$1\" ] && exit 21; d=$(dirname -- \"$1\"); "
        "(umask 022; mkdir -p -- \"$d\") || exit 2; t=\"$d/.cm-write-$$\"; head -c \"$2\" >\"$t\" || exit 5; "
        "if [ -f \"$1\" ] && [ ! -L \"$1\" ]; then chmod \"$(stat -c %a -- \"$1\")\" \"$t\"; else chmod 644 \"$t\"; fi; "
        "[ -L \"$1\" ] && rm -f -- \"$1\"; mv -f -- \"$t\" \"$1\" || { rm -f -- \"$t\"; exit 5; }";

static const char list_script[] = DK_NOT_PSEUDO
        "[ -e \"$1\" ] || exit 2; [ -d \"$1\" ] || exit 20; "
        "if [ \"$2\" = 1 ]; then find \"$1\" -mindepth 1 -exec stat -c '%F|%s|%Y|%n' -- {} +; "
        "else find \"$1\" -mindepth 1 -maxdepth 1 -exec stat -c '%F|%s|%Y|%n' -- {} +; fi";

static const char delete_script[] = DK_NOT_PSEUDO
        "[ -e \"$1\" ] || [ -L \"$1\" ] || exit 2; "
        "if [ -d \"$1\" ] && [ ! -L \"$1\" ]; then rmdir -- \"$1\" 2>/dev/null || exit 39; else rm -f -- \"$1\"; fi";

static const char move_script[] = DK_NOT_PSEUDO "set -- \"$2\" \"$1\"; " DK_NOT_PSEUDO
        "[ -e \"$2\" ] || [ -L \"$2\" ] || exit 2; mv -- \"$2\" \"$1\"";

/* Run `script` with args; *ret holds its output.  A non-zero exit becomes
 * an errno-coded error about `path`. */
static int run_script(cm_backend *b, const char *id, const char *script, const char *const *args, size_t nargs,
                      const char *in, size_t in_len, size_t cap, cm_exec_result *ret, const char *path, cm_err *err) {
        char *argv[8] = {(char *)"/bin/sh", (char *)"-c", (char *)script, (char *)"cm-file"};
        cm_exec_spec spec = {.argv = argv, .argc = 4 + nargs, .stdin_data = in, .stdin_len = in_len,
                             .timeout_ms = 60000, .output_cap = cap};
        int code;
        for (size_t i = 0; i < nargs; i++)
                argv[4 + i] = (char *)args[i];
        if (dk_exec(b, id, &spec, NULL, ret, err) < 0)
                return -1;
        if ((code = ret->exit_code) == 0)
                return 0;
        if (code == 126 || code == 127)
                return cm_err_set(err, ENOTSUP,
                                  "the file tools need /bin/sh and busybox-style tools in the container: %.200s",
                                  ret->err);
        switch (code) {
        case 2: return cm_err_set(err, ENOENT, "%s does not exist in the container", path);
        case 13: return cm_err_set(err, EACCES, "%s: refused, a pseudo-filesystem of the container (read it with "
                                   "exec_in_container)", path);
        case 20: return cm_err_set(err, ENOTDIR, "%s is not a directory", path);
        case 21: return cm_err_set(err, EISDIR, "%s is a directory", path);
        case 27: return cm_err_set(err, EFBIG, "%s is larger than the cap", path);
        case 39: return cm_err_set(err, ENOTEMPTY, "%s is a directory that is not empty", path);
        default: return cm_err_set(err, EIO, "%s: %.300s (exit %d)", path, *ret->err ? ret->err : "failed", code);
        }
}

int dk_file_read(cm_backend *b, const char *id, const char *path, uint64_t max_bytes, cm_file_data *ret,
                 cm_err *err) {
        char maxs[32];
        cm_exec_result r = {0};
        unsigned long long size = 0;
        double mtime = 0;
        char *nl;
        int rc;
        (void)snprintf(maxs, sizeof maxs, "%llu", (unsigned long long)max_bytes);
        const char *args[] = {path, maxs};
        rc = run_script(b, id, read_script, args, 2, NULL, 0, (size_t)max_bytes + 64, &r, path, err);
        if (r.out && sscanf(r.out, "%llu %lf", &size, &mtime) == 2)
                ret->size = size;
        if (rc < 0 || !(nl = memchr(r.out, '\n', r.out_len))) {
                cm_exec_result_clear(&r);
                return rc < 0 ? rc : cm_err_set(err, EIO, "%s: no size from the container", path);
        }
        ret->len = r.out_len - (size_t)(nl + 1 - r.out);
        ret->data = xmalloc(ret->len + 1);
        memcpy(ret->data, nl + 1, ret->len);
        ret->data[ret->len] = 0;
        ret->modified = mtime;
        cm_exec_result_clear(&r);
        return 0;
}

int dk_file_write(cm_backend *b, const char *id, const char *path, const char *data, size_t len, cm_err *err) {
        cm_exec_result r = {0};
        char lens[32];
        int rc;
        /* head -c LEN rather than cat: over TLS the end of stdin cannot be
         * signalled (no half-close), the length can */
        (void)snprintf(lens, sizeof lens, "%zu", len);
        const char *args[] = {path, lens};
        rc = run_script(b, id, write_script, args, 2, len ? data : "", len, 4096, &r, path, err);
        cm_exec_result_clear(&r);
        return rc;
}

static int entry_cmp(const void *a, const void *b) {
        return strcmp(((const cm_file_entry *)a)->path, ((const cm_file_entry *)b)->path);
}

/* "%F|%s|%Y|%n" lines */
static int parse_entries(char *out, const cm_file_query *q, cm_file_entry **ret, size_t *ret_n, const char *path,
                         cm_err *err) {
        cm_file_entry *v = NULL;
        size_t n = 0;
        char *save = NULL;
        for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char type[64];
                unsigned long long size;
                long long mtime;
                int off = 0;
                const char *name;
                if (sscanf(line, "%63[^|]|%llu|%lld|%n", type, &size, &mtime, &off) != 3 || !off)
                        continue;
                name = strrchr(line + off, '/') ? strrchr(line + off, '/') + 1 : line + off;
                if (q->pattern && fnmatch(q->pattern, name, 0) != 0)
                        continue;
                if (q->max_entries && n >= q->max_entries) {
                        cm_file_entries_free(v, n);
                        return cm_err_set(err, E2BIG, "%s holds more than %zu entries; list a subdirectory or use "
                                          "a pattern", path, q->max_entries);
                }
                v = xrealloc(v, (n + 1) * sizeof *v);
                v[n] = (cm_file_entry){.name = xstrdup(name), .path = xstrdup(line + off),
                                       .is_directory = strcmp(type, "directory") == 0,
                                       .size = strcmp(type, "directory") == 0 ? 0 : size, .modified = (double)mtime};
                n++;
        }
        if (n)
                qsort(v, n, sizeof *v, entry_cmp);
        *ret = v;
        *ret_n = n;
        return 0;
}

int dk_file_list(cm_backend *b, const char *id, const char *path, const cm_file_query *q, cm_file_entry **ret,
                 size_t *ret_n, cm_err *err) {
        cm_exec_result r = {0};
        const char *args[] = {path, q->recursive ? "1" : "0"};
        int rc = run_script(b, id, list_script, args, 2, NULL, 0, 64u << 20, &r, path, err);
        if (rc == 0 && r.truncated)
                rc = cm_err_set(err, E2BIG, "%s: the listing passed 64 MiB; list a subdirectory", path);
        if (rc == 0)
                rc = parse_entries(r.out, q, ret, ret_n, path, err);
        cm_exec_result_clear(&r);
        return rc;
}

int dk_file_delete(cm_backend *b, const char *id, const char *path, cm_err *err) {
        cm_exec_result r = {0};
        const char *args[] = {path};
        int rc = run_script(b, id, delete_script, args, 1, NULL, 0, 4096, &r, path, err);
        cm_exec_result_clear(&r);
        return rc;
}

int dk_file_move(cm_backend *b, const char *id, const char *src, const char *dst, cm_err *err) {
        cm_exec_result r = {0};
        const char *args[] = {src, dst};
        int rc = run_script(b, id, move_script, args, 2, NULL, 0, 4096, &r, src, err);
        cm_exec_result_clear(&r);
        return rc;
}
