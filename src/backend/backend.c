#include "backend/backend.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "backend/apple/apple.h"
#include "backend/docker/docker.h"
#include "backend/native/native.h"
#include "util/cleanup.h"
#include "util/copy.h"

static cm_backend *open_native(void) { return cm_native_open(); }
static cm_backend *open_docker(void) { return cm_docker_open(); }
static cm_backend *open_apple(void) { return cm_apple_open(); }

static const cm_backend_entry native_entry = {
        "native", "built-in Linux runtime: namespaces, cgroups, seccomp; no daemon", open_native};
static const cm_backend_entry docker_entry = {
        "docker", "Docker Engine API (Docker or Podman) over a Unix socket or TCP with TLS", open_docker};

/* Built everywhere (its tests run here against a fake CLI), picked by
 * default only on macOS, where Apple's CLI exists. */
static const cm_backend_entry apple_entry = {
        "apple", "Apple's container CLI (macOS 26, Apple silicon): one VM per container", open_apple,
#ifdef __APPLE__
        false,
#else
        true,
#endif
};

const cm_backend_entry *const cm_backends[] = {&native_entry, &docker_entry, &apple_entry, NULL};

const cm_backend_entry *cm_backend_find(const char *name) {
        for (size_t i = 0; name && cm_backends[i]; i++)
                if (strcmp(cm_backends[i]->name, name) == 0)
                        return cm_backends[i];
        return NULL;
}

bool cm_cancelled(const cm_cancel *c) {
        struct pollfd p;
        if (!c || c->fd < 0)
                return false;
        p = (struct pollfd){c->fd, POLLIN, 0};
        return poll(&p, 1, 0) > 0;
}

void cm_exec_result_clear(cm_exec_result *r) {
        free(r->out);
        free(r->err);
        memset(r, 0, sizeof *r);
}

void cm_container_info_clear(cm_container_info *c) {
        free(c->id);
        free(c->name);
        free(c->image);
        free(c->state);
        for (size_t i = 0; i < c->n_labels; i++) {
                free((char *)c->labels[i].key);
                free((char *)c->labels[i].value);
        }
        free(c->labels);
        memset(c, 0, sizeof *c);
}

void cm_file_entries_free(cm_file_entry *v, size_t n) {
        for (size_t i = 0; v && i < n; i++) {
                free(v[i].name);
                free(v[i].path);
        }
        free(v);
}

void cm_image_info_clear(cm_image_info *i) {
        free(i->id);
        for (size_t k = 0; k < i->n_names; k++)
                free(i->names[k]);
        free(i->names);
        free(i->digest);
        memset(i, 0, sizeof *i);
}

void cm_image_infos_free(cm_image_info *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                cm_image_info_clear(&v[i]);
        free(v);
}

void cm_file_data_clear(cm_file_data *d) {
        free(d->data);
        memset(d, 0, sizeof *d);
}

/* The context directory, opened beneath its allowed root. */
int cm_build_context_open(const cm_host_path *hp, cm_err *err) {
        cleanup_close int root = open(hp->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), dir = -1;
        cleanup_free char *name = NULL;
        int fd;
        if (root < 0)
                return cm_err_sys(err, errno, "cannot open %s", hp->root);
        if (!*hp->rel)
                return take_fd(&root);
        if (cm_open_parent_at(root, hp->rel, false, &dir, &name, err) < 0)
                return -1;
        fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return cm_err_sys(err, errno, "build context %s/%s must be a directory", hp->root, hp->rel);
        return fd;
}
