#include "policy/policy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/ref.h"
#include "util/cleanup.h"
#include "util/netaddr.h"

bool cm_path_under(const char *path, const char *root) {
        size_t n = strlen(root);
        if (strcmp(root, "/") == 0)
                return path[0] == '/';
        return strncmp(path, root, n) == 0 && (path[n] == 0 || path[n] == '/');
}

int cm_policy_host_path(const cm_config *cfg, const char *path, char **ret_real, cm_err *err) {
        cleanup_free char *real = NULL;
        cleanup_free char *roots = cm_strv_join(cfg->allowed_mounts, ":");
        if (!path || !*path)
                return cm_err_set(err, EINVAL, "host path is empty; give an absolute path under %s", roots);
        real = realpath(path, NULL);
        if (!real)
                return cm_err_sys(err, errno, "host path %s cannot be resolved (it must exist)", path);
        if (cm_policy_state_overlap(cfg, real, err) < 0)
                return -1;
        for (size_t i = 0; cfg->allowed_mounts && cfg->allowed_mounts[i]; i++)
                if (cm_path_under(real, cfg->allowed_mounts[i])) {
                        *ret_real = steal_pointer(&real);
                        return 0;
                }
        if (strcmp(real, path) != 0)
                return cm_err_set(err, EACCES,
                                  "host path %s resolves to %s, which is not under CONTAINER_MCP_ALLOWED_MOUNTS (%s); "
                                  "use a path inside those directories, or add the directory to "
                                  "CONTAINER_MCP_ALLOWED_MOUNTS when you start the server",
                                  path, real, roots[0] ? roots : "empty");
        return cm_err_set(err, EACCES,
                          "host path %s is not under CONTAINER_MCP_ALLOWED_MOUNTS (%s); use a path inside those "
                          "directories, or add the directory to CONTAINER_MCP_ALLOWED_MOUNTS when you start the server",
                          path, roots[0] ? roots : "empty");
}

/* The longest allowed root that `real` lies under, or NULL. */
static const char *root_of(const cm_config *cfg, const char *real) {
        const char *best = NULL;
        for (size_t i = 0; cfg->allowed_mounts && cfg->allowed_mounts[i]; i++)
                if (cm_path_under(real, cfg->allowed_mounts[i]) &&
                    (!best || strlen(cfg->allowed_mounts[i]) > strlen(best)))
                        best = cfg->allowed_mounts[i];
        return best;
}

/* A destination: canonical parent + last name. */
static int dest_real(const cm_config *cfg, const char *path, char **ret, cm_err *err) {
        cleanup_free char *copy = xstrdup(path), *parent = NULL;
        char *slash = strrchr(copy, '/');
        const char *name = slash ? slash + 1 : copy;
        if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                return cm_err_set(err, EINVAL, "host path %s must end in a file or directory name", path);
        if (slash)
                *slash = 0;
        if (cm_policy_host_path(cfg, slash ? (copy[0] ? copy : "/") : ".", &parent, err) < 0)
                return -1;
        *ret = xasprintf("%s/%s", strcmp(parent, "/") == 0 ? "" : parent, name);
        return 0;
}

int cm_policy_host_split(const cm_config *cfg, const char *path, bool must_exist, char **ret_root, char **ret_rel,
                         cm_err *err) {
        cleanup_free char *real = NULL;
        const char *root;
        if (!path || !*path)
                return cm_err_set(err, EINVAL, "host path is empty");
        if (must_exist && cm_policy_host_path(cfg, path, &real, err) < 0)
                return -1;
        if (!must_exist && access(path, F_OK) == 0 && cm_policy_host_path(cfg, path, &real, err) < 0)
                return -1;
        if (!real && dest_real(cfg, path, &real, err) < 0)
                return -1;
        root = root_of(cfg, real);
        if (!root)
                return cm_err_set(err, EACCES, "host path %s is not under CONTAINER_MCP_ALLOWED_MOUNTS", path);
        *ret_root = xstrdup(root);
        /* root is never "/" (config refuses it), so rel is what follows "root/" */
        *ret_rel = xstrdup(real[strlen(root)] == '/' ? real + strlen(root) + 1 : "");
        return 0;
}

int cm_policy_name(const char *name, cm_err *err) {
        size_t n = strlen(name);
        if (n == 0 || n > 128 || name[0] == '-' || name[0] == '.')
                return cm_err_set(
                        err, EINVAL,
                        "name \"%s\": use 1-128 letters, digits, '_', '.' or '-', not starting with '-' or '.'", name);
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)name[i]) && !strchr("_.-", name[i]))
                        return cm_err_set(
                                err, EINVAL,
                                "name \"%s\": character '%c' not allowed; use letters, digits, '_', '.' or '-'", name,
                                name[i]);
        return 0;
}

static bool overlaps(const char *a, const char *b) { return b && (cm_path_under(a, b) || cm_path_under(b, a)); }

int cm_policy_state_overlap(const cm_config *cfg, const char *real, cm_err *err) {
        const char *st = cfg->state_real, *rl = cfg->runlog_dir;
        if (overlaps(real, st))
                return cm_err_set(err, EACCES,
                                  "host path %s %s the server's state dir %s (container records, control sockets, "
                                  "image copies), which no sandbox may reach; use a directory outside it",
                                  real, cm_path_under(real, st) ? "lies inside" : "contains", st);
        /* The run log holds every conversation's commands and output: no
         * sandbox may read or rewrite it. */
        if (overlaps(real, rl))
                return cm_err_set(err, EACCES,
                                  "host path %s %s the run log directory %s (--runlog-dir, "
                                  "CONTAINER_MCP_RUNLOG_DIR), which no sandbox may reach; use a directory outside it",
                                  real, cm_path_under(real, rl) ? "lies inside" : "contains", rl);
        return 0;
}

/* A directory image: canonical, a directory, under an image root, clear of
 * the state dir.  The backend opens exactly this path with no symlink on
 * the way and checks it found the same directory. */
static int image_dir(const cm_config *cfg, const char *image, char **ret_real, cm_err *err) {
        cleanup_free char *real = realpath(image, NULL);
        cleanup_free char *roots = cm_strv_join(cfg->image_dirs, ":");
        struct stat st;
        bool under = false;

        if (!roots[0])
                return cm_err_set(err, EACCES,
                                  "image \"%s\" refused: directory images are off (CONTAINER_MCP_IMAGE_DIRS is "
                                  "unset); use image \"host\", or start the server with "
                                  "CONTAINER_MCP_IMAGE_DIRS=<dir> naming a directory that holds root file systems",
                                  image);
        if (!real)
                return cm_err_sys(err, errno, "image directory %s cannot be resolved (it must exist)", image);
        for (size_t i = 0; cfg->image_dirs[i] && !under; i++)
                under = cm_path_under(real, cfg->image_dirs[i]) && strcmp(real, cfg->image_dirs[i]) != 0;
        if (!under)
                return cm_err_set(err, EACCES,
                                  "image \"%s\" refused: it resolves to %s, which is not a directory below "
                                  "CONTAINER_MCP_IMAGE_DIRS (%s); use a root file system inside those, or "
                                  "image \"host\"",
                                  image, real, roots);
        if (cm_policy_state_overlap(cfg, real, err) < 0)
                return -1;
        if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode))
                return cm_err_set(err, ENOTDIR, "image \"%s\" is not a directory holding a root file system", image);
        *ret_real = steal_pointer(&real);
        return 0;
}

int cm_policy_image(const cm_config *cfg, const char *image, char **ret_real, cm_err *err) {
        size_t n = strlen(image);
        *ret_real = NULL;
        if (n == 0 || n > 512)
                return cm_err_set(err, EINVAL, "image: give a reference of 1-512 characters, e.g. host or alpine:3.20");
        if (image[0] == '-')
                return cm_err_set(err, EINVAL, "image \"%s\" starts with '-': an image reference never does", image);
        for (size_t i = 0; i < n; i++)
                if (isspace((unsigned char)image[i]) || iscntrl((unsigned char)image[i]))
                        return cm_err_set(err, EINVAL, "image \"%s\": whitespace or control characters are not allowed",
                                          image);
        if (image[0] == '/' || image[0] == '.')
                return image_dir(cfg, image, ret_real, err);
        return 0;
}

int cm_policy_host_port(const cm_config *cfg, unsigned port, cm_err *err) {
        if (port == 0 || port >= cfg->min_host_port)
                return 0;
        return cm_err_set(err, EACCES,
                          "hostPort %u refused: host ports below %u are privileged (CONTAINER_MCP_MIN_HOST_PORT); "
                          "leave hostPort out (or 0) for a free port, pick one from %u up, or lower the setting",
                          port, cfg->min_host_port, cfg->min_host_port);
}

/* ---- registries ---------------------------------------------------------- */

static char *allowed_list(const cm_config *cfg) {
        char *list = xstrdup("");
        for (char *const *a = cfg->allowed_registries; a && *a; a++) {
                char *t = xasprintf("%s%s%s", list, *list ? "," : "", *a);
                free(list);
                list = t;
        }
        return list;
}

char *cm_policy_named_registries(const cm_config *cfg) {
        cleanup_free char *allowed = allowed_list(cfg);
        const char *insecure = getenv("CONTAINER_MCP_INSECURE_REGISTRIES");
        return xasprintf("%s,%s", allowed, insecure ? insecure : "");
}

int cm_policy_registry(const cm_config *cfg, const char *ref, cm_err *err) {
        cm_image_ref r;
        cleanup_free char *host = NULL, *allowed = NULL;
        int ret = 0;

        if (cm_image_ref_parse(ref, &r, err) < 0)
                return -1;
        host = cm_host_of(r.domain);
        if (cfg->allowed_registries && cfg->allowed_registries[0]) {
                allowed = allowed_list(cfg);
                if (!cm_host_listed(allowed, r.domain))
                        ret = cm_err_set(err, EPERM,
                                         "pulling from %s is not allowed: CONTAINER_MCP_ALLOWED_REGISTRIES names only "
                                         "%s (the operator can add it)",
                                         r.domain, allowed);
        } else if (cm_host_local(host) && !cm_host_listed(getenv("CONTAINER_MCP_INSECURE_REGISTRIES"), r.domain))
                ret = cm_err_set(err, EPERM,
                                 "%s is a local address: pull_image reaches a registry there only when the operator "
                                 "names it in CONTAINER_MCP_ALLOWED_REGISTRIES (or CONTAINER_MCP_INSECURE_REGISTRIES)",
                                 r.domain);
        cm_image_ref_free(&r);
        return ret;
}
