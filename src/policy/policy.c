#include "policy/policy.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

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

int cm_policy_name(const char *name, cm_err *err) {
        size_t n = strlen(name);
        if (n == 0 || n > 128 || name[0] == '-' || name[0] == '.')
                return cm_err_set(err, EINVAL,
                                  "name \"%s\": use 1-128 letters, digits, '_', '.' or '-', not starting with '-' or '.'",
                                  name);
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)name[i]) && !strchr("_.-", name[i]))
                        return cm_err_set(err, EINVAL,
                                          "name \"%s\": character '%c' not allowed; use letters, digits, '_', '.' or '-'",
                                          name, name[i]);
        return 0;
}

int cm_policy_image(const char *image, cm_err *err) {
        size_t n = strlen(image);
        if (n == 0 || n > 512)
                return cm_err_set(err, EINVAL, "image: give a reference of 1-512 characters, e.g. host or alpine:3.20");
        if (image[0] == '-')
                return cm_err_set(err, EINVAL, "image \"%s\" starts with '-': an image reference never does", image);
        for (size_t i = 0; i < n; i++)
                if (isspace((unsigned char)image[i]) || iscntrl((unsigned char)image[i]))
                        return cm_err_set(err, EINVAL, "image \"%s\": whitespace or control characters are not allowed",
                                          image);
        return 0;
}
