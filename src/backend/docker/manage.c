/* A container after its start: list, find, inspect, logs, stats, stop,
 * remove, and the reaping of a crashed server's orphans. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "backend/dinspect_docker.h"
#include "backend/docker/internal.h"
#include "util/cleanup.h"
#include "util/json.h"

/* ---- output kept up to a cap ---------------------------------------------- */

void dk_out_emit(int stream, const char *p, size_t n, void *arg) {
        dk_out *o = arg;
        size_t room = o->len[stream] < o->cap ? o->cap - o->len[stream] : 0, take = n < room ? n : room;
        if (take < n)
                o->truncated = true;
        if (!take)
                return;
        o->buf[stream] = xrealloc(o->buf[stream], o->len[stream] + take + 1);
        memcpy(o->buf[stream] + o->len[stream], p, take);
        o->len[stream] += take;
        o->buf[stream][o->len[stream]] = 0;
}

void dk_out_to_result(dk_out *o, cm_exec_result *r) {
        r->out = o->buf[1] ? steal_pointer(&o->buf[1]) : xstrdup("");
        r->out_len = o->len[1];
        r->err = o->buf[2] ? steal_pointer(&o->buf[2]) : xstrdup("");
        r->err_len = o->len[2];
        r->truncated = r->truncated || o->truncated;
}

static size_t demux_write(char *p, size_t size, size_t n, void *arg) {
        dk_demux_feed(arg, p, size * n);
        return size * n;
}

int dk_fetch_logs(docker *d, const char *id, const char *query, dk_out *o, cm_err *err) {
        cleanup_free char *path = xasprintf("/containers/%s/logs?%s", id, query);
        dk_demux dm = {.emit = dk_out_emit, .arg = o};
        dk_req req = {.method = "GET", .path = path, .write = demux_write, .write_arg = &dm};
        dk_resp resp;
        int r = 0;
        if (dk_request(&d->api, &req, &resp, err) < 0)
                return -1;
        if (resp.status != 200)
                r = dk_engine_error(&d->api, resp.status, NULL, "read the container's logs", err);
        dk_resp_clear(&resp);
        return r;
}

/* ---- one container -------------------------------------------------------- */

static cm_kv *labels_of(const json_t *obj, size_t *ret_n) {
        size_t n = json_object_size(obj), i = 0;
        cm_kv *kv = xcalloc(n ? n : 1, sizeof *kv);
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)obj, k, v) {
                if (!json_is_string(v))
                        continue;
                kv[i].key = xstrdup(k);
                kv[i].value = xstrdup(json_string_value(v));
                i++;
        }
        *ret_n = i;
        return kv;
}

static int64_t parse_time(const char *s) {
        struct tm tm = {0};
        if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
                return 0;
        return (int64_t)timegm(&tm);
}

/* From GET /containers/json (a list entry). */
static void info_from_list(const json_t *c, cm_container_info *ret) {
        const char *name = json_string_value(json_array_get(json_object_get(c, "Names"), 0));
        const char *status = cm_json_str(c, "Status");
        int code = 0;
        ret->id = xstrdup(cm_json_str(c, "Id") ? cm_json_str(c, "Id") : "");
        ret->name = xstrdup(name ? name + (*name == '/') : ret->id);
        ret->image = xstrdup(cm_json_str(c, "Image") ? cm_json_str(c, "Image") : "");
        ret->state = xstrdup(cm_json_str(c, "State") ? cm_json_str(c, "State") : "unknown");
        if (status && sscanf(status, "Exited (%d)", &code) == 1)
                ret->exit_code = code;
        ret->created_at = json_integer_value(json_object_get(c, "Created"));
        ret->labels = labels_of(json_object_get(c, "Labels"), &ret->n_labels);
}

/* From GET /containers/ID/json (inspect). */
static void info_from_inspect(const json_t *c, cm_container_info *ret) {
        const json_t *cfg = json_object_get(c, "Config"), *st = json_object_get(c, "State");
        const char *name = cm_json_str(c, "Name");
        ret->id = xstrdup(cm_json_str(c, "Id") ? cm_json_str(c, "Id") : "");
        ret->name = xstrdup(name ? name + (*name == '/') : ret->id);
        ret->image = xstrdup(cm_json_str(cfg, "Image") ? cm_json_str(cfg, "Image") : "");
        ret->state = xstrdup(cm_json_str(st, "Status") ? cm_json_str(st, "Status") : "unknown");
        ret->exit_code = (int)json_integer_value(json_object_get(st, "ExitCode"));
        ret->created_at = parse_time(cm_json_str(c, "Created"));
        ret->labels = labels_of(json_object_get(cfg, "Labels"), &ret->n_labels);
}

static int get_inspect(docker *d, const char *ref, json_t **ret, cm_err *err) {
        cleanup_free char *esc = dk_escape(ref);
        cleanup_free char *path = xasprintf("/containers/%s/json", esc);
        int r = dk_call(&d->api, "GET", path, NULL, ret, err);
        if (r == -ENOENT)
                return cm_err_set(err, ENOENT, "no container %s", ref), -ENOENT;
        return r;
}

int dk_list(cm_backend *b, bool all, cm_container_info **ret, size_t *ret_n, cm_err *err) {
        cleanup_json json_t *v = NULL;
        cm_container_info *out;
        size_t i, n;
        const json_t *c;
        if (dk_call(&dk_of(b)->api, "GET", all ? "/containers/json?all=1" : "/containers/json", NULL, &v, err) < 0)
                return -1;
        n = json_array_size(v);
        out = xcalloc(n + 1, sizeof *out);
        json_array_foreach(v, i, c) info_from_list(c, &out[i]);
        *ret = out;
        *ret_n = n;
        return 0;
}

int dk_find(cm_backend *b, const char *ref, cm_container_info *ret, cm_err *err) {
        cleanup_json json_t *c = NULL;
        int r = get_inspect(dk_of(b), ref, &c, err);
        if (r < 0)
                return r;
        info_from_inspect(c, ret);
        return 0;
}

/* The ports as the engine bound them (a host port it picked included). */
static json_t *ports_of(const json_t *c) {
        json_t *ports = json_array();
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)json_object_get(json_object_get(c, "NetworkSettings"), "Ports"), key, v) {
                unsigned port = 0;
                char proto[8] = "tcp";
                const json_t *bnd = json_array_get(v, 0);
                const char *hp = cm_json_str(bnd, "HostPort");
                if (!bnd || sscanf(key, "%u/%7s", &port, proto) < 1)
                        continue;
                (void)json_array_append_new(ports, json_pack("{s:s, s:I, s:I, s:s}", "host_ip", "127.0.0.1",
                                                             "host_port", (json_int_t)(hp ? atoi(hp) : 0),
                                                             "container_port", (json_int_t)port, "protocol",
                                                             strcmp(proto, "udp") == 0 ? "udp" : "tcp"));
        }
        return ports;
}

static void set_strings(json_t *doc, const char *key, const json_t *v) {
        json_t *a = json_array();
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e) if (json_is_string(e)) (void)json_array_append(a, (json_t *)e);
        (void)json_object_set_new(doc, key, a);
}

/* Our inspect document, in the native backend's terms. */
static json_t *inspect_doc(const docker *d, const json_t *c) {
        const json_t *cfg = json_object_get(c, "Config"), *host = json_object_get(c, "HostConfig");
        const char *mode = cm_json_str(host, "NetworkMode"), *wd = cm_json_str(cfg, "WorkingDir");
        cm_container_info info = {0};
        json_t *doc, *labels = json_object();

        info_from_inspect(c, &info);
        for (size_t i = 0; i < info.n_labels; i++)
                (void)json_object_set_new(labels, info.labels[i].key, json_string(info.labels[i].value));
        doc = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:i, s:o}", "id", info.id, "name", info.name, "image",
                        info.image, "state", info.state, "runtime", d->api.podman ? "podman" : "docker",
                        "created_at", (json_int_t)info.created_at, "exit_code", info.exit_code, "labels", labels);
        set_strings(doc, "argv", json_object_get(cfg, "Cmd"));
        set_strings(doc, "env", json_object_get(cfg, "Env"));
        (void)json_object_set_new(doc, "workdir", json_string(wd && *wd ? wd : "/"));
        (void)json_object_set_new(doc, "network", json_boolean(!(mode && strcmp(mode, "none") == 0)));
        (void)json_object_set_new(doc, "readonly_rootfs",
                                  json_boolean(json_is_true(json_object_get(host, "ReadonlyRootfs"))));
        (void)json_object_set_new(doc, "userns", json_boolean(d->userns));
        (void)json_object_set_new(
                doc, "limits",
                json_pack("{s:I, s:f, s:I}", "memory_bytes", json_integer_value(json_object_get(host, "Memory")),
                          "cpus", (double)json_integer_value(json_object_get(host, "NanoCpus")) / 1e9, "pids",
                          json_integer_value(json_object_get(host, "PidsLimit"))));
        (void)json_object_set_new(doc, "ports", ports_of(c));
        cm_container_info_clear(&info);
        return doc;
}

int dk_inspect(cm_backend *b, const char *id, char **ret_json, cm_err *err) {
        cleanup_json json_t *c = NULL, *doc = NULL;
        docker *d = dk_of(b);
        if (get_inspect(d, id, &c, err) < 0 || (!d->checked && dk_check_isolation(d, err) < 0 && !d->checked))
                return -1;
        doc = inspect_doc(d, c);
        *ret_json = cm_json_dump(doc);
        return 0;
}

/* dinspect's view: the engine's own inspect document mapped by
 * cm_dinspect_docker (what the engine says it enforces; the kernel's view
 * of a container on another machine is not ours to read). */
int dk_isolation(cm_backend *b, const char *id, char **ret_json, cm_err *err) {
        cleanup_json json_t *c = NULL, *v = NULL;
        docker *d = dk_of(b);
        if (get_inspect(d, id, &c, err) < 0)
                return -1;
        if (!(v = cm_dinspect_docker(c, d->api.podman ? "podman" : "docker")))
                return cm_err_set(err, EIO, "the engine's inspect of %s could not be read", id);
        *ret_json = cm_json_dump(v);
        return 0;
}

/* Both streams of the main process, in the order written, as one text. */
static void emit_merged(int stream, const char *p, size_t n, void *arg) {
        (void)stream;
        dk_out_emit(1, p, n, arg);
}

int dk_logs(cm_backend *b, const char *id, size_t tail, int64_t since_ms, char **ret, size_t *ret_len,
            cm_err *err) {
        docker *d = dk_of(b);
        cleanup_free char *path = NULL;
        dk_out o = {.cap = 16u << 20};
        dk_demux dm = {.emit = emit_merged, .arg = &o};
        char q[96];
        dk_resp resp;
        int r = 0;

        (void)snprintf(q, sizeof q, "stdout=1&stderr=1&tail=%zu&since=%lld", tail, (long long)(since_ms / 1000));
        if (!tail)
                (void)snprintf(q, sizeof q, "stdout=1&stderr=1&since=%lld", (long long)(since_ms / 1000));
        path = xasprintf("/containers/%s/logs?%s", id, q);
        dk_req req = {.method = "GET", .path = path, .write = demux_write, .write_arg = &dm};
        if (dk_request(&d->api, &req, &resp, err) < 0)
                return -1;
        if (resp.status != 200)
                r = dk_engine_error(&d->api, resp.status, NULL, "read the container's logs", err);
        dk_resp_clear(&resp);
        if (r < 0) {
                free(o.buf[1]);
                return r;
        }
        *ret = o.buf[1] ? o.buf[1] : xstrdup("");
        *ret_len = o.len[1];
        return 0;
}

static uint64_t u64(const json_t *obj, const char *key) {
        json_int_t v = json_integer_value(json_object_get(obj, key));
        return v > 0 ? (uint64_t)v : 0;
}

/* blkio_stats.io_service_bytes_recursive: entries by op, Read and Write. */
static void io_of(const json_t *s, cm_stats *ret) {
        const json_t *v = json_object_get(json_object_get(s, "blkio_stats"), "io_service_bytes_recursive"), *e;
        size_t i;
        json_array_foreach(v, i, e) {
                const char *op = cm_json_str(e, "op");
                if (op && strcasecmp(op, "read") == 0)
                        ret->io_read_bytes += u64(e, "value");
                else if (op && strcasecmp(op, "write") == 0)
                        ret->io_write_bytes += u64(e, "value");
        }
}

int dk_stats(cm_backend *b, const char *id, cm_stats *ret, cm_err *err) {
        cleanup_free char *path = xasprintf("/containers/%s/stats?stream=false", id);
        cleanup_json json_t *s = NULL;
        const json_t *mem, *cpu;
        if (dk_call(&dk_of(b)->api, "GET", path, NULL, &s, err) < 0)
                return -1;
        mem = json_object_get(s, "memory_stats");
        cpu = json_object_get(json_object_get(s, "cpu_stats"), "cpu_usage");
        memset(ret, 0, sizeof *ret);
        ret->cpu_usec = u64(cpu, "total_usage") / 1000; /* nanoseconds */
        ret->memory_bytes = u64(mem, "usage");
        ret->memory_peak_bytes = u64(mem, "max_usage");
        ret->memory_limit_bytes = u64(mem, "limit");
        ret->pids = u64(json_object_get(s, "pids_stats"), "current");
        io_of(s, ret);
        ret->source = "engine stats (stream=false)";
        if (!json_object_get(s, "memory_stats") || (!ret->pids && !ret->memory_bytes && !ret->cpu_usec))
                return cm_err_set(err, ESRCH, "container %s is not running: no stats", id);
        return 0;
}

int dk_stop(cm_backend *b, const char *id, int grace_sec, cm_err *err) {
        cleanup_free char *path = xasprintf("/containers/%s/stop?t=%d", id, grace_sec);
        docker *d = dk_of(b);
        dk_req req = {.method = "POST", .path = path, .timeout_ms = d->api.timeout_ms + grace_sec * 1000LL};
        dk_resp resp;
        int r = 0;
        if (dk_request(&d->api, &req, &resp, err) < 0)
                return -1;
        /* 304: already stopped, which is what was asked */
        if (resp.status != 204 && resp.status != 304)
                r = dk_engine_error(&d->api, resp.status, resp.body, "stop the container", err);
        dk_resp_clear(&resp);
        return r;
}

int dk_remove(cm_backend *b, const char *id, bool force, cm_err *err) {
        cleanup_free char *path = xasprintf("/containers/%s?v=1%s", id, force ? "&force=1" : "");
        int r = dk_call(&dk_of(b)->api, "DELETE", path, NULL, NULL, err);
        if (r == -EEXIST)
                return cm_err_set(err, EBUSY, "container %s is running: stop it first, or remove it with force", id);
        return r;
}

/* ---- orphans -------------------------------------------------------------- */

/* DK_LABEL_SERVER is host/boot-id/pid/start-time: a server of this host
 * (same name) is gone when its boot id differs (a reboot) or its pid is no
 * longer the process that started then.  Servers of other hosts sharing the
 * engine are left alone: nothing here can tell whether they live. */
static bool server_gone(const docker *d, const char *tag) {
        char host[128], boot[64], me_host[128], me_boot[64];
        unsigned long long pid, start, me_pid, me_start;
        if (!tag || sscanf(tag, "%127[^/]/%63[^/]/%llu/%llu", host, boot, &pid, &start) != 4 ||
            sscanf(d->server_tag, "%127[^/]/%63[^/]/%llu/%llu", me_host, me_boot, &me_pid, &me_start) != 4)
                return false;
        if (strcmp(host, me_host) != 0)
                return false;
        if (strcmp(boot, me_boot) != 0)
                return true;
        if (pid == me_pid)
                return start != me_start;
        return dk_proc_start((pid_t)pid) != start;
}

void dk_reap_orphans(docker *d) {
        cleanup_json json_t *v = NULL;
        cleanup_free char *filter =
                dk_escape("{\"label\":[\"" DK_LABEL_SERVER "\",\"" DK_LABEL_MANAGED "=true\"]}");
        cleanup_free char *path = xasprintf("/containers/json?all=1&filters=%s", filter);
        cm_err err = CM_ERR_INIT;
        const json_t *c;
        size_t i;

        (void)pthread_mutex_lock(&d->lock);
        if (d->reaped) {
                (void)pthread_mutex_unlock(&d->lock);
                return;
        }
        d->reaped = true;
        (void)pthread_mutex_unlock(&d->lock);
        if (dk_call(&d->api, "GET", path, NULL, &v, &err) < 0)
                return;
        json_array_foreach(v, i, c) {
                const char *tag = cm_json_str(json_object_get(c, "Labels"), DK_LABEL_SERVER);
                if (server_gone(d, tag) && cm_json_str(c, "Id"))
                        (void)dk_remove(&d->base, cm_json_str(c, "Id"), true, &err);
        }
}
