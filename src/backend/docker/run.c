/* run and run_wait: the create request that carries every limit and every
 * isolation setting, then start (and for run_wait: wait, logs, remove). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/docker/internal.h"
#include "util/cleanup.h"
#include "util/clock.h"
#include "util/json.h"

/* What the native runtime drops from Docker's default capability set. */
static const char *const cap_drop[] = {"MKNOD", "NET_RAW", "AUDIT_WRITE"};

static bool has_option(const json_t *opts, const char *name) {
        size_t i;
        const json_t *o;
        json_array_foreach(opts, i, o) {
                const char *s = json_string_value(o);
                if (s && strstr(s, name))
                        return true;
        }
        return false;
}

/* Rootless Podman's socket belongs to its user; rootful Podman's to root. */
static bool podman_rootless(const docker *d) {
        struct stat st;
        return d->api.socket && stat(d->api.socket, &st) == 0 && st.st_uid != 0;
}

/* Docker says in /info whether it remaps users or runs rootless.  Podman
 * needs no question (its /info is slow): rootless, every container is in
 * the user's namespace; rootful, we ask for one per container (UsernsMode
 * auto). */
int dk_check_isolation(docker *d, cm_err *err) {
        cleanup_json json_t *info = NULL;
        const json_t *opts;
        int r = 0;
        (void)pthread_mutex_lock(&d->lock);
        if (!d->checked && d->api.podman) {
                d->rootless = podman_rootless(d);
                d->userns = d->checked = true;
        } else if (!d->checked && (r = dk_call(&d->api, "GET", "/info", NULL, &info, err)) == 0) {
                opts = json_object_get(info, "SecurityOptions");
                d->rootless = has_option(opts, "name=rootless");
                d->userns = has_option(opts, "name=userns") || d->rootless;
                d->checked = true;
        }
        (void)pthread_mutex_unlock(&d->lock);
        if (r < 0)
                return r;
        if (!d->userns)
                return cm_err_set(err, EPERM,
                                  "the engine at %s runs containers without a user namespace (root in a container "
                                  "would be root on the host); start dockerd with --userns-remap=default, or use "
                                  "rootless Docker or Podman",
                                  d->api.where);
        return 0;
}

static json_t *str_array(char *const *v, size_t n) {
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++)
                (void)json_array_append_new(a, json_string(v[i]));
        return a;
}

static json_t *kv_array(const cm_kv *kv, size_t n) {
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++) {
                cleanup_free char *s = xasprintf("%s=%s", kv[i].key, kv[i].value);
                (void)json_array_append_new(a, json_string(s));
        }
        return a;
}

/* Mounts rather than Binds: a path holding ':' or ',' cannot be misread. */
static json_t *mounts_json(const cm_run_spec *s) {
        json_t *a = json_array();
        for (size_t i = 0; i < s->n_mounts; i++)
                (void)json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:b}", "Type", "bind", "Source",
                                                         s->mounts[i].source, "Target", s->mounts[i].target,
                                                         "ReadOnly", s->mounts[i].readonly));
        return a;
}

static void add_ports(json_t *cfg, json_t *host, const cm_run_spec *s) {
        json_t *exposed = json_object(), *bind = json_object();
        for (size_t i = 0; i < s->n_ports; i++) {
                const cm_port *p = &s->ports[i];
                cleanup_free char *key = xasprintf("%u/%s", p->container_port, p->protocol ? p->protocol : "tcp");
                cleanup_free char *hp = p->host_port ? xasprintf("%u", p->host_port) : xstrdup("");
                (void)json_object_set_new(exposed, key, json_object());
                (void)json_object_set_new(bind, key,
                                          json_pack("[{s:s, s:s}]", "HostIp", "127.0.0.1", "HostPort", hp));
        }
        (void)json_object_set_new(cfg, "ExposedPorts", exposed);
        (void)json_object_set_new(host, "PortBindings", bind);
}

static json_t *host_config(const docker *d, const cm_run_spec *s) {
        json_t *h = json_object(), *caps = json_array();
        int64_t tmpfs = s->tmpfs_bytes > 0 ? s->tmpfs_bytes : 64 << 20;
        cleanup_free char *tmp = xasprintf("rw,nosuid,nodev,size=%lld", (long long)tmpfs);
        for (size_t i = 0; i < ARRAY_SIZE(cap_drop); i++)
                (void)json_array_append_new(caps, json_string(cap_drop[i]));
        (void)json_object_set_new(h, "CapDrop", caps);
        (void)json_object_set_new(h, "SecurityOpt", json_pack("[s]", "no-new-privileges"));
        (void)json_object_set_new(h, "Tmpfs", json_pack("{s:s}", "/tmp", tmp));
        (void)json_object_set_new(h, "ReadonlyRootfs", json_boolean(s->readonly_rootfs));
        if (!s->network)
                (void)json_object_set_new(h, "NetworkMode", json_string("none"));
        if (s->cpus > 0)
                (void)json_object_set_new(h, "NanoCpus", json_integer((json_int_t)(s->cpus * 1e9)));
        if (s->memory_bytes > 0) {
                (void)json_object_set_new(h, "Memory", json_integer(s->memory_bytes));
                (void)json_object_set_new(h, "MemorySwap", json_integer(s->memory_bytes)); /* no swap on top */
        }
        if (s->pids > 0)
                (void)json_object_set_new(h, "PidsLimit", json_integer(s->pids));
        if (s->n_mounts)
                (void)json_object_set_new(h, "Mounts", mounts_json(s));
        if (d->api.podman && !d->rootless)
                (void)json_object_set_new(h, "UsernsMode", json_string("auto:size=65536"));
        return h;
}

static json_t *create_body(const docker *d, const cm_run_spec *s) {
        json_t *body = json_object(), *labels = json_object(), *host = host_config(d, s);
        for (size_t i = 0; i < s->n_labels; i++)
                (void)json_object_set_new(labels, s->labels[i].key, json_string(s->labels[i].value));
        (void)json_object_set_new(labels, DK_LABEL_SERVER, json_string(d->server_tag));
        (void)json_object_set_new(body, "Image", json_string(s->image));
        if (s->argc)
                (void)json_object_set_new(body, "Cmd", str_array(s->argv, s->argc));
        (void)json_object_set_new(body, "Env", kv_array(s->env, s->n_env));
        if (s->workdir)
                (void)json_object_set_new(body, "WorkingDir", json_string(s->workdir));
        (void)json_object_set_new(body, "Labels", labels);
        if (s->n_ports)
                add_ports(body, host, s);
        (void)json_object_set_new(body, "HostConfig", host);
        return body;
}

/* The engine's "no such image" as the agent's next step. */
static int create_error(const docker *d, const cm_run_spec *s, long status, const char *body, cm_err *err) {
        if (status == 404 && body && strstr(body, "image"))
                return cm_err_set(err, ENOENT,
                                  "image %s is not present on the engine at %s: pull it first (pull_image, or "
                                  "`docker pull %s` on the engine's host)",
                                  s->image, d->api.where, s->image);
        if (status == 409)
                return cm_err_set(err, EEXIST, "a container named %s already exists on the engine; choose another name",
                                  s->name ? s->name : "(generated)");
        return dk_engine_error(&d->api, status, body, "create the container", err);
}

static int create(docker *d, const cm_run_spec *s, char **ret_id, cm_err *err) {
        cleanup_json json_t *body = NULL, *out = NULL;
        cleanup_free char *path = NULL, *name = NULL;
        dk_resp resp;
        const char *id;

        if (dk_check_isolation(d, err) < 0)
                return -1;
        dk_reap_orphans(d);
        body = create_body(d, s);
        name = s->name ? dk_escape(s->name) : NULL;
        path = name ? xasprintf("/containers/create?name=%s", name) : xstrdup("/containers/create");
        dk_req req = {.method = "POST", .path = path, .json = body};
        if (dk_request(&d->api, &req, &resp, err) < 0)
                return -1;
        if (resp.status != 201) {
                int r = create_error(d, s, resp.status, resp.body, err);
                dk_resp_clear(&resp);
                return r;
        }
        out = json_loadb(resp.body ? resp.body : "", resp.len, 0, NULL);
        dk_resp_clear(&resp);
        if (!(id = cm_json_str(out, "Id")))
                return cm_err_set(err, EIO, "the engine at %s created a container but gave no id", d->api.where);
        *ret_id = xstrdup(id);
        return 0;
}

static int start(docker *d, const char *id, cm_err *err) {
        cleanup_free char *path = xasprintf("/containers/%s/start", id);
        if (dk_call(&d->api, "POST", path, NULL, NULL, err) < 0) {
                cm_err_prefix(err, "start");
                (void)dk_remove(&d->base, id, true, &(cm_err)CM_ERR_INIT);
                return -1;
        }
        return 0;
}

int dk_run(cm_backend *b, const cm_run_spec *spec, char **ret_id, cm_err *err) {
        docker *d = dk_of(b);
        cleanup_free char *id = NULL;
        if (create(d, spec, &id, err) < 0 || start(d, id, err) < 0)
                return -1;
        *ret_id = steal_pointer(&id);
        return 0;
}

/* POST /wait blocks until the container stops: its deadline is the run's
 * timeout, its cancellation the call's.  Either kills the container.
 *
 * Podman's compatible /wait polls every 250 ms and then waits on the
 * container's lock, which the exit command (`podman container cleanup`, a
 * whole podman process) holds: it answered 350 to 1200 ms after a `true`
 * exited, slower than `podman run` itself.  Its own /libpod/…/wait takes the
 * poll interval and returns the code as a bare number; 50 ms halved the run
 * (bench/engines, issue 12's notes). */
static int wait_exit(docker *d, const char *id, const cm_run_spec *s, const cm_cancel *cancel, cm_exec_result *ret,
                     cm_err *err) {
        cleanup_free char *path =
                d->api.podman ? xasprintf("/libpod/containers/%s/wait?condition=stopped&condition=exited&interval=50ms",
                                          id)
                              : xasprintf("/containers/%s/wait", id);
        cleanup_json json_t *j = NULL;
        dk_req req = {.method = "POST", .path = path, .timeout_ms = s->timeout_ms > 0 ? s->timeout_ms : -1,
                      .cancel = cancel};
        dk_resp resp;
        cm_err lerr = CM_ERR_INIT;

        if (dk_request(&d->api, &req, &resp, &lerr) < 0) {
                if (!resp.timed_out) {
                        *err = lerr;
                        return -1;
                }
                /* The run's own timeout: kill it and wait for the exit the kill causes. */
                cleanup_free char *kill = xasprintf("/containers/%s/kill?signal=KILL", id);
                (void)dk_call(&d->api, "POST", kill, NULL, NULL, &lerr);
                ret->timed_out = true;
                req.timeout_ms = 0;
                req.cancel = NULL;
                if (dk_request(&d->api, &req, &resp, err) < 0)
                        return -1;
        }
        if (resp.status != 200) {
                int r = dk_engine_error(&d->api, resp.status, resp.body, "wait for the container", err);
                dk_resp_clear(&resp);
                return r;
        }
        j = json_loadb(resp.body ? resp.body : "", resp.len, JSON_DECODE_ANY, NULL);
        dk_resp_clear(&resp);
        if (json_is_integer(j))
                ret->exit_code = (int)json_integer_value(j);
        else if (json_is_integer(json_object_get(j, "StatusCode")))
                ret->exit_code = (int)json_integer_value(json_object_get(j, "StatusCode"));
        else
                return cm_err_set(err, EIO, "the engine at %s answered a wait without an exit code", d->api.where);
        return 0;
}

int dk_run_wait(cm_backend *b, const cm_run_spec *spec, const cm_cancel *cancel, cm_exec_result *ret, cm_err *err) {
        docker *d = dk_of(b);
        cleanup_free char *id = NULL;
        dk_out out = {.cap = spec->output_cap ? spec->output_cap : 1u << 20};
        int64_t t0 = cm_now_ms();
        int r;

        memset(ret, 0, sizeof *ret);
        if (create(d, spec, &id, err) < 0 || start(d, id, err) < 0)
                return -1;
        r = wait_exit(d, id, spec, cancel, ret, err);
        if (r == 0)
                r = dk_fetch_logs(d, id, "stdout=1&stderr=1", &out, err);
        (void)dk_remove(b, id, true, &(cm_err)CM_ERR_INIT);
        dk_out_to_result(&out, ret);
        ret->duration_ms = cm_now_ms() - t0;
        if (r < 0)
                cm_exec_result_clear(ret);
        return r;
}
