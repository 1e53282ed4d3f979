/* The Docker Engine API backend (Docker or Podman): the table of
 * operations, status, and what ties a container to this server. */
#include "backend/docker/docker.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/docker/internal.h"
#include "util/cleanup.h"
#include "util/json.h"

unsigned long long dk_proc_start(pid_t pid) {
        char path[64], buf[1024], *p;
        unsigned long long start = 0;
        FILE *f;
        (void)snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        if (!(f = fopen(path, "re")))
                return 0;
        p = fgets(buf, sizeof buf, f);
        (void)fclose(f);
        /* after the command's closing parenthesis: state is field 3, start 22 */
        if (!p || !(p = strrchr(buf, ')')) ||
            sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                   &start) != 1)
                return 0;
        return start;
}

/* host/boot-id/pid/start-time (DK_LABEL_SERVER) */
static void make_server_tag(docker *d) {
        char host[128] = "?", boot[64] = "?";
        FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
        if (f) {
                if (!fgets(boot, sizeof boot, f))
                        (void)snprintf(boot, sizeof boot, "?");
                boot[strcspn(boot, "\n/")] = 0;
                (void)fclose(f);
        }
        if (gethostname(host, sizeof host) < 0)
                (void)snprintf(host, sizeof host, "?");
        host[strcspn(host, "/")] = 0;
        host[sizeof host - 1] = 0;
        (void)snprintf(d->server_tag, sizeof d->server_tag, "%s/%s/%d/%llu", host, boot, (int)getpid(),
                       dk_proc_start(getpid()));
}

/* Whether the engine answers now (status is asked long after the start). */
static int ping(docker *d, cm_err *err) {
        dk_req req = {.method = "GET", .path = "/_ping", .timeout_ms = 3000};
        dk_resp resp;
        int r = dk_request(&d->api, &req, &resp, err);
        if (r == 0 && resp.status != 200)
                r = dk_engine_error(&d->api, resp.status, resp.body, "answer a ping", err);
        dk_resp_clear(&resp);
        return r;
}

static void docker_status(cm_backend *b, cm_backend_status *ret) {
        docker *d = dk_of(b);
        cm_err err = CM_ERR_INIT;
        memset(ret, 0, sizeof *ret);
        if (d->api.problem) {
                (void)snprintf(ret->reason, sizeof ret->reason, "%.500s", d->api.problem);
                (void)snprintf(ret->fix, sizeof ret->fix,
                               "start an engine (dockerd, or `podman system service --time=0 "
                               "unix:///run/podman/podman.sock`) and set DOCKER_HOST=unix:///path/to/its.sock");
                return;
        }
        /* a negotiation made just now is the ping */
        bool fresh = d->api.minor == 0;
        if (dk_api_negotiate(&d->api, &err) < 0 || (!fresh && ping(d, &err) < 0) || dk_check_isolation(d, &err) < 0) {
                (void)snprintf(ret->reason, sizeof ret->reason, "%.500s", err.msg);
                (void)snprintf(ret->fix, sizeof ret->fix, "%s",
                               err.code == EPERM ? "start dockerd with --userns-remap=default, or use rootless "
                                                   "Docker or Podman"
                                                 : "start the engine, or set DOCKER_HOST to one that answers");
                return;
        }
        ret->available = true;
        (void)snprintf(ret->version, sizeof ret->version, "%s", d->api.version);
        cleanup_json json_t *det = json_pack("{s:s, s:s, s:b, s:b, s:b}", "engine", d->api.podman ? "podman" : "docker",
                                             "host", d->api.where, "tls", d->api.cert_dir != NULL, "userns",
                                             d->userns, "rootless", d->rootless);
        cleanup_free char *text = cm_json_dump(det);
        (void)snprintf(ret->details, sizeof ret->details, "%s", text);
}

static void docker_free(cm_backend *b) {
        docker *d = dk_of(b);
        dk_api_free(&d->api);
        (void)pthread_mutex_destroy(&d->lock);
        free(d);
}

static const cm_backend_ops docker_ops = {
        .name = "docker",
        .status = docker_status,
        .run = dk_run,
        .run_wait = dk_run_wait,
        .exec = dk_exec,
        .list = dk_list,
        .find = dk_find,
        .inspect = dk_inspect,
        .isolation = dk_isolation,
        .logs = dk_logs,
        .stats = dk_stats,
        .stop = dk_stop,
        .remove = dk_remove,
        .copy_in = dk_copy_in,
        .copy_out = dk_copy_out,
        .file_read = dk_file_read,
        .file_write = dk_file_write,
        .file_list = dk_file_list,
        .file_delete = dk_file_delete,
        .file_move = dk_file_move,
        .image_list = dk_image_list,
        .image_pull = dk_image_pull,
        .image_build = dk_image_build,
        .image_remove = dk_image_remove,
        .image_prune = dk_image_prune,
        .free = docker_free,
};

cm_backend *cm_docker_open(void) {
        docker *d = xcalloc(1, sizeof *d);
        d->base.ops = &docker_ops;
        d->base.priv = d;
        (void)pthread_mutex_init(&d->lock, NULL);
        dk_api_init(&d->api);
        make_server_tag(d);
        return &d->base;
}
