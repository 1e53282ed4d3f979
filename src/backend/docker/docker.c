/* The Docker Engine API backend.  So far it finds the engine and reports
 * its version; the container operations arrive with the Docker backend
 * issue, and until then the tools report that this backend cannot run
 * containers yet. */
#include "backend/docker/docker.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/cleanup.h"
#include "util/json.h"
#include "util/lazy.h"

typedef struct docker {
        cm_backend base;
        char *socket; /* NULL: none found */
} docker;

static bool is_socket(const char *path) {
        struct stat st;
        return path && stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

static char *find_socket(void) {
        const char *env = getenv("CONTAINER_MCP_DOCKER_HOST");
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        cleanup_free char *user = xdg ? xasprintf("%s/podman/podman.sock", xdg) : NULL;
        const char *candidates[] = {"/var/run/docker.sock", "/run/podman/podman.sock", user};

        if (!env)
                env = getenv("DOCKER_HOST");
        if (env)
                return strncmp(env, "unix://", 7) == 0 ? xstrdup(env + 7) : NULL;
        for (size_t i = 0; i < ARRAY_SIZE(candidates); i++)
                if (is_socket(candidates[i]))
                        return xstrdup(candidates[i]);
        return NULL;
}

typedef struct body {
        char *data;
        size_t len;
} body;

static size_t collect(char *p, size_t size, size_t n, void *arg) {
        body *b = arg;
        size_t add = size * n;
        if (b->len + add > (1u << 20))
                return 0; /* a /version answer is small; refuse anything huge */
        b->data = xrealloc(b->data, b->len + add + 1);
        memcpy(b->data + b->len, p, add);
        b->len += add;
        b->data[b->len] = 0;
        return add;
}

static void docker_status(cm_backend *be, cm_backend_status *ret) {
        docker *d = (docker *)be;
        body b = {NULL, 0};
        CURL *c;
        CURLcode rc;
        long code = 0;
        cm_err lerr = CM_ERR_INIT;

        memset(ret, 0, sizeof *ret);
        if (!d->socket) {
                (void)snprintf(ret->reason, sizeof ret->reason,
                               "no Docker or Podman API socket found (DOCKER_HOST unset or not unix://, and none of "
                               "/var/run/docker.sock, /run/podman/podman.sock, $XDG_RUNTIME_DIR/podman/podman.sock)");
                (void)snprintf(ret->fix, sizeof ret->fix,
                               "start one (e.g. `podman system service --time=0 unix:///run/podman/podman.sock`) "
                               "and set DOCKER_HOST=unix:///run/podman/podman.sock");
                return;
        }
        if (cm_curl_load(&lerr) < 0) {
                (void)snprintf(ret->reason, sizeof ret->reason, "%.500s", lerr.msg);
                (void)snprintf(ret->fix, sizeof ret->fix, "apt-get install libcurl4");
                return;
        }
        c = curl_easy_init();
        if (!c)
                return (void)snprintf(ret->reason, sizeof ret->reason, "libcurl failed to initialise");
        (void)curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, d->socket);
        (void)curl_easy_setopt(c, CURLOPT_URL, "http://d/version");
        (void)curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 3000L);
        (void)curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        (void)curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
        (void)curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
        rc = curl_easy_perform(c);
        (void)curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_cleanup(c);
        if (rc != CURLE_OK || code != 200) {
                (void)snprintf(ret->reason, sizeof ret->reason, "the engine at %s does not answer: %s", d->socket,
                               rc != CURLE_OK ? curl_easy_strerror(rc) : "HTTP error from /version");
                (void)snprintf(ret->fix, sizeof ret->fix,
                               "start the engine (dockerd, or `podman system service --time=0 unix://%s`)", d->socket);
        } else {
                cleanup_json json_t *v = json_loadb(b.data, b.len, 0, NULL);
                const char *ver = cm_json_str(v, "Version"), *api = cm_json_str(v, "ApiVersion");
                (void)snprintf(ret->version, sizeof ret->version, "%s (API %s)", ver ? ver : "?", api ? api : "?");
                /* Reachable, but the container operations are the next issue's. */
                (void)snprintf(ret->reason, sizeof ret->reason,
                               "the engine at %s answers, but container-mcp cannot drive it yet (the Docker "
                               "backend's container operations are still to be written)",
                               d->socket);
                (void)snprintf(ret->fix, sizeof ret->fix, "use the native backend for now");
                cleanup_json json_t *det = json_pack("{s:s, s:b}", "socket", d->socket, "reachable", 1);
                cleanup_free char *text = cm_json_dump(det);
                (void)snprintf(ret->details, sizeof ret->details, "%s", text);
        }
        free(b.data);
}

static void docker_free(cm_backend *be) {
        docker *d = (docker *)be;
        free(d->socket);
        free(d);
}

static const cm_backend_ops docker_ops = {
        .name = "docker",
        .status = docker_status,
        .free = docker_free,
};

cm_backend *cm_docker_open(void) {
        docker *d = xcalloc(1, sizeof *d);
        d->base.ops = &docker_ops;
        d->base.priv = d;
        d->socket = find_socket();
        return &d->base;
}
