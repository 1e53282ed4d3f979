/* copy_files through the archive endpoints: GET /containers/ID/archive
 * streamed into dk_untar beneath the host destination, PUT of a dk_tarw
 * stream of the host source.  Like `docker cp`: onto an existing directory
 * the copy lands inside it, else it takes the destination's name.
 *
 * The engine reads and writes the container's root file system as it is
 * below its mounts: the tmpfs /tmp is not seen (a file put there lands
 * under the mount, invisible), so /tmp is refused, with the way round. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/docker/internal.h"
#include "backend/docker/tar.h"
#include "util/cleanup.h"
#include "util/json.h"

#define DK_COPY_MAX_BYTES ((uint64_t)1 << 30)

static int container_path_ok(const char *path, cm_err *err) {
        static const char *const refused[] = {"/proc", "/sys", "/dev", "/tmp"};
        while (path[0] == '/' && path[1] == '/')
                path++;
        for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
                size_t n = strlen(refused[i]);
                if (strncmp(path, refused[i], n) == 0 && (path[n] == 0 || path[n] == '/'))
                        return cm_err_set(err, EACCES,
                                          "copy_files cannot reach %s on the docker backend (%s): copy to another "
                                          "directory, or use file_write / exec_in_container",
                                          path,
                                          i == 3 ? "a tmpfs the engine's archive calls do not see"
                                                 : "a pseudo-filesystem of the container");
        }
        if (path[0] != '/')
                return cm_err_set(err, EINVAL, "container path %s must be absolute", path);
        return 0;
}

/* The directory holding an allowed host path (root + rel), and its last
 * name; opened beneath the root, no symlink followed (copy.h). */
static int host_parent(const cm_host_path *hp, int *ret_fd, char **ret_name, cm_err *err) {
        cleanup_close int rfd = -1;
        if (!*hp->rel) {
                const char *slash = strrchr(hp->root, '/');
                if (!slash || !slash[1])
                        return cm_err_set(err, EINVAL, "cannot copy /");
                cleanup_free char *parent = slash != hp->root ? xstrndup(hp->root, (size_t)(slash - hp->root))
                                                               : xstrdup("/");
                if ((*ret_fd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
                        return cm_err_sys(err, errno, "cannot open %s", parent);
                *ret_name = xstrdup(slash + 1);
                return 0;
        }
        if ((rfd = open(hp->root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
                return cm_err_sys(err, errno, "cannot open %s", hp->root);
        return cm_open_parent_at(rfd, hp->rel, false, ret_fd, ret_name, err);
}

static const char *base_name(const char *path) {
        const char *s = strrchr(path, '/');
        return s && s[1] ? s + 1 : path;
}

static size_t untar_write(char *p, size_t size, size_t n, void *arg) {
        return dk_untar_feed(arg, p, size * n) < 0 ? 0 : size * n;
}

int dk_copy_out(cm_backend *b, const char *id, const char *container_path, const cm_host_path *dst,
                cm_copy_stats *ret, cm_err *err) {
        docker *d = dk_of(b);
        cleanup_close int dir = -1;
        cleanup_free char *name = NULL, *esc = NULL, *path = NULL;
        const char *top;
        dk_untar *u;
        dk_resp resp;
        int r;

        if (container_path_ok(container_path, err) < 0 || host_parent(dst, &dir, &name, err) < 0)
                return -1;
        top = name;
        if (cm_is_dir_at(dir, name)) { /* onto a directory: inside it, under the source's name */
                int in = openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (in < 0)
                        return cm_err_sys(err, errno, "cannot open directory %s", name);
                (void)close(dir);
                dir = in;
                top = base_name(container_path);
        }
        esc = dk_escape(container_path);
        path = xasprintf("/containers/%s/archive?path=%s", id, esc);
        u = dk_untar_new(dir, top, DK_COPY_MAX_BYTES);
        dk_req req = {.method = "GET", .path = path, .timeout_ms = -1, .write = untar_write, .write_arg = u};
        r = dk_request(&d->api, &req, &resp, err);
        if (r == 0 && resp.status == 404)
                r = cm_err_set(err, ENOENT, "%s does not exist in the container", container_path);
        else if (r == 0 && resp.status != 200)
                r = dk_engine_error(&d->api, resp.status, NULL, "read the container's files", err);
        else if (r == 0)
                r = dk_untar_end(u, ret, err);
        else
                (void)dk_untar_end(u, ret, err); /* a refused entry says more than the aborted transfer */
        dk_resp_clear(&resp);
        dk_untar_free(u);
        return r;
}

static size_t tarw_read(char *p, size_t size, size_t n, void *arg) {
        ssize_t k = dk_tarw_read(arg, p, size * n);
        return k < 0 ? CURL_READFUNC_ABORT : (size_t)k;
}

/* Whether `path` is a directory in the container, as the archive calls see
 * it (HEAD's X-Docker-Container-Path-Stat: mode has Go's ModeDir bit). */
static int is_container_dir(docker *d, const char *id, const char *path, bool *ret, cm_err *err) {
        cleanup_free char *esc = dk_escape(path), *p = NULL, *stat = NULL;
        dk_resp resp;
        p = xasprintf("/containers/%s/archive?path=%s", id, esc);
        dk_req req = {.method = "HEAD", .path = p, .want_header = "X-Docker-Container-Path-Stat"};
        if (dk_request(&d->api, &req, &resp, err) < 0)
                return -1;
        *ret = false;
        if (resp.status == 200 && resp.header) {
                cleanup_json json_t *j = NULL;
                size_t n = 0;
                stat = dk_base64_decode(resp.header, &n);
                j = stat ? json_loadb(stat, n, 0, NULL) : NULL;
                *ret = (json_integer_value(json_object_get(j, "mode")) & ((json_int_t)1 << 31)) != 0;
        }
        dk_resp_clear(&resp);
        return 0;
}

int dk_copy_in(cm_backend *b, const char *id, const cm_host_path *src, const char *container_path,
               cm_copy_stats *ret, cm_err *err) {
        docker *d = dk_of(b);
        cleanup_close int dir = -1;
        cleanup_free char *name = NULL, *target = NULL, *esc = NULL, *path = NULL;
        const char *top;
        bool into = false;
        dk_tarw *w;
        dk_resp resp;
        int r;

        if (container_path_ok(container_path, err) < 0 || host_parent(src, &dir, &name, err) < 0 ||
            is_container_dir(d, id, container_path, &into, err) < 0)
                return -1;
        if (into) {
                target = xstrdup(container_path);
                top = name;
        } else {
                const char *slash = strrchr(container_path, '/');
                target = slash == container_path ? xstrdup("/") : xstrndup(container_path, (size_t)(slash - container_path));
                top = base_name(container_path);
        }
        esc = dk_escape(target);
        path = xasprintf("/containers/%s/archive?path=%s", id, esc);
        w = dk_tarw_new(dir, name, top, DK_COPY_MAX_BYTES);
        dk_req req = {.method = "PUT", .path = path, .timeout_ms = -1, .read = tarw_read, .read_arg = w,
                      .content_type = "application/x-tar"};
        r = dk_request(&d->api, &req, &resp, err);
        if (dk_tarw_end(w, ret, err) < 0)
                r = -1;
        else if (r == 0 && resp.status == 404)
                r = cm_err_set(err, ENOENT, "%s does not exist in the container", target);
        else if (r == 0 && resp.status != 200)
                r = dk_engine_error(&d->api, resp.status, resp.body, "write the container's files", err);
        dk_resp_clear(&resp);
        dk_tarw_free(w);
        return r;
}
