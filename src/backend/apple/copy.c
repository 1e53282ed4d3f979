/* copy_files through `container cp`.  The CLI opens host paths by name, so
 * the best this side can do is check the path just before: every directory
 * below the allowed root opened with O_NOFOLLOW (no symlink on the way), the
 * final entry not a symlink.  A symlink swapped in between this check and
 * the CLI's own open is the limit of driving a CLI (README). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/apple/internal.h"
#include "util/cleanup.h"

/* root/rel with no symlink below root; *ret_exists, *ret_dir: the final
 * entry.  -ELOOP when a component is a symlink. */
static int checked_path(const cm_host_path *h, char **ret, bool *ret_exists, bool *ret_dir, cm_err *err) {
        cleanup_free char *rel = xstrdup(h->rel ? h->rel : "");
        cleanup_close int fd = open(h->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char *save = NULL, *next;
        struct stat st;
        if (fd < 0)
                return cm_err_sys(err, errno, "cannot open the allowed root %s", h->root);
        for (char *c = strtok_r(rel, "/", &save); c; c = next) {
                next = strtok_r(NULL, "/", &save);
                if (strcmp(c, "..") == 0)
                        return cm_err_set(err, EACCES, "host path %s/%s: '..' is not allowed", h->root, h->rel);
                if (!next) { /* the final entry */
                        if (fstatat(fd, c, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                                if (errno != ENOENT)
                                        return cm_err_sys(err, errno, "host path %s/%s", h->root, h->rel);
                                *ret_exists = *ret_dir = false;
                        } else if (S_ISLNK(st.st_mode)) {
                                return cm_err_set(err, ELOOP,
                                                  "host path %s/%s is a symlink; the apple backend copies only real "
                                                  "files and directories (give the path it points to)",
                                                  h->root, h->rel);
                        } else {
                                *ret_exists = true;
                                *ret_dir = S_ISDIR(st.st_mode);
                        }
                        break;
                }
                int sub = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0)
                        return cm_err_sys(err, errno == ELOOP ? ELOOP : errno,
                                          "host path %s/%s: component \"%s\" is not a directory (or is a symlink)",
                                          h->root, h->rel, c);
                (void)close(fd);
                fd = sub;
        }
        if (!h->rel || !h->rel[0]) {
                *ret_exists = *ret_dir = true;
        }
        *ret = h->rel && h->rel[0] ? xasprintf("%s/%s", h->root, h->rel) : xstrdup(h->root);
        return 0;
}

/* What a copy moved, counted on the host side (the CLI does not say). */
static _Thread_local cm_copy_stats *counting;

static int count_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void)path, (void)ftw;
        if (flag == FTW_SL)
                counting->symlinks++;
        else if (flag == FTW_D || flag == FTW_DP)
                counting->dirs++;
        else if (S_ISREG(st->st_mode)) {
                counting->files++;
                counting->bytes += (uint64_t)st->st_size;
        } else
                counting->skipped++;
        return 0;
}

static void count_tree(const char *path, cm_copy_stats *ret) {
        memset(ret, 0, sizeof *ret);
        counting = ret;
        (void)nftw(path, count_one, 16, FTW_PHYS);
        counting = NULL;
}

static int cp(apple *a, const char *id, const char *host, const char *container_path, bool to, cm_err *err) {
        cleanup_free char *cli = apple_find_cli(err);
        apple_argv argv = {0};
        cm_exec_result r = {0};
        int rc;
        if (!cli || apple_cp_argv(cli, id, host, container_path, to, &argv, err) < 0)
                return -1;
        rc = apple_run_cli(a, &argv, "cp", 1 << 16, NULL, 0, &r, err);
        cm_exec_result_clear(&r);
        apple_argv_free(&argv);
        return rc;
}

int apple_copy_in(cm_backend *b, const char *id, const cm_host_path *src, const char *container_path,
                  cm_copy_stats *ret, cm_err *err) {
        cleanup_free char *host = NULL;
        bool exists = false, dir = false;
        if (checked_path(src, &host, &exists, &dir, err) < 0)
                return -1;
        if (!exists)
                return cm_err_set(err, ENOENT, "source %s does not exist on the host", host);
        count_tree(host, ret);
        return cp((apple *)b, id, host, container_path, true, err);
}

int apple_copy_out(cm_backend *b, const char *id, const char *container_path, const cm_host_path *dst,
                   cm_copy_stats *ret, cm_err *err) {
        cleanup_free char *host = NULL, *base = xstrdup(container_path), *landed = NULL;
        bool exists = false, dir = false;
        if (checked_path(dst, &host, &exists, &dir, err) < 0 || cp((apple *)b, id, host, container_path, false, err) < 0)
                return -1;
        /* Like docker cp: onto an existing directory it lands inside. */
        landed = exists && dir ? xasprintf("%s/%s", host, basename(base)) : xstrdup(host);
        count_tree(landed, ret);
        return 0;
}
