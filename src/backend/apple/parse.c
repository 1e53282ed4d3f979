/* The CLI's JSON: `container ls --format json` and `container inspect` print
 * arrays of {status, configuration, networks} (Swift's JSONEncoder of the
 * CLI's PrintableContainer); labels live in configuration.labels (the first
 * seed checked this against the real CLI).  Parsed tolerantly (a missing or
 * odd field is left empty), and failing closed: a container whose labels
 * cannot be read has none, so it is unmanaged and refused. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/apple/internal.h"
#include "util/cleanup.h"
#include "util/json.h"

/* Swift's reference date, 2001-01-01T00:00:00Z, in unix seconds. */
#define SWIFT_EPOCH 978307200

static int64_t days_from_civil(int y, unsigned m, unsigned d) {
        y -= m <= 2;
        const int era = (y >= 0 ? y : y - 399) / 400;
        const unsigned yoe = (unsigned)(y - era * 400);
        const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
        const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        return (int64_t)era * 146097 + (int64_t)doe - 719468;
}

int64_t apple_unix_time(const void *value) {
        const json_t *v = value;
        int y, mo, d, h, mi, s, n = 0;
        if (json_is_number(v))
                return (int64_t)json_number_value(v) + SWIFT_EPOCH;
        if (!json_is_string(v) ||
            sscanf(json_string_value(v), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &s, &n) != 6 || mo < 1 ||
            mo > 12 || d < 1 || d > 31)
                return 0;
        /* UTC ("Z") as the CLI writes it; a fraction is dropped. */
        return days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + s;
}

static const json_t *path(const json_t *v, const char *a, const char *b) {
        v = json_object_get(v, a);
        return b ? json_object_get(v, b) : v;
}

static const char *state_of(const json_t *c) {
        const char *st = cm_json_str(c, "status");
        if (!st)
                return "unknown";
        /* Apple says stopped where the other backends say exited. */
        return strcmp(st, "stopped") == 0 ? "exited" : st;
}

static void labels_of(const json_t *labels, cm_container_info *ret) {
        const char *k;
        const json_t *v;
        size_t n = 0;
        if (!json_is_object(labels))
                return;
        ret->labels = xcalloc(json_object_size(labels) + 1, sizeof *ret->labels);
        json_object_foreach((json_t *)labels, k, v) {
                if (!json_is_string(v))
                        continue; /* not a label the CLI would write: ignored, never guessed */
                ret->labels[n++] = (cm_kv){xstrdup(k), xstrdup(json_string_value(v))};
        }
        ret->n_labels = n;
}

/* One element of the arrays; -EINVAL when it has no id. */
static int info_of(const json_t *c, cm_container_info *ret) {
        const json_t *conf = json_object_get(c, "configuration");
        const char *id = cm_json_str(conf, "id"), *image = cm_json_str(path(conf, "image", NULL), "reference");
        if (!id || !id[0])
                return -EINVAL;
        memset(ret, 0, sizeof *ret);
        ret->id = xstrdup(id);
        ret->name = xstrdup(id); /* Apple's container id is its name (run --name) */
        ret->image = xstrdup(image ? image : "");
        ret->state = xstrdup(state_of(c));
        ret->created_at = apple_unix_time(path(conf, "metadata", "createdAt"));
        labels_of(json_object_get(conf, "labels"), ret);
        return 0;
}

static json_t *load_array(const char *text, size_t len, const char *what, cm_err *err) {
        json_error_t jerr;
        json_t *v = json_loadb(text, len, 0, &jerr);
        if (!json_is_array(v)) {
                json_decref(v);
                cm_err_set(err, EPROTO,
                           "`container %s` printed no JSON array (%s); is this Apple's container CLI 1.0 or later? "
                           "Check `container --version`",
                           what, v ? "another JSON value" : jerr.text);
                return NULL;
        }
        return v;
}

int apple_parse_list(const char *text, size_t len, bool all, cm_container_info **ret, size_t *ret_n, cm_err *err) {
        cleanup_json json_t *arr = load_array(text, len, "ls --format json", err);
        cm_container_info *v;
        const json_t *c;
        size_t i, n = 0;
        if (!arr)
                return -EPROTO;
        v = xcalloc(json_array_size(arr) + 1, sizeof *v);
        json_array_foreach(arr, i, c) {
                if (info_of(c, &v[n]) < 0)
                        continue;
                if (!all && strcmp(v[n].state, "running") != 0) {
                        cm_container_info_clear(&v[n]);
                        continue;
                }
                n++;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

static json_t *argv_of(const json_t *proc) {
        json_t *a = json_array();
        const json_t *w;
        size_t i;
        if (cm_json_str(proc, "executable"))
                (void)json_array_append_new(a, json_string(cm_json_str(proc, "executable")));
        json_array_foreach(json_object_get(proc, "arguments"), i, w) if (json_is_string(w))
                (void)json_array_append(a, (json_t *)w);
        return a;
}

static json_t *strings_of(const json_t *arr) {
        json_t *a = json_array();
        const json_t *w;
        size_t i;
        json_array_foreach(arr, i, w) if (json_is_string(w))(void) json_array_append(a, (json_t *)w);
        return a;
}

/* With --network none the container has no attachment, or only to "none". */
static bool has_network(const json_t *conf) {
        const json_t *n;
        size_t i;
        json_array_foreach(json_object_get(conf, "networks"), i, n) {
                const char *id = json_is_string(n) ? json_string_value(n) : cm_json_str(n, "network");
                if (!id || strcmp(id, "none") != 0)
                        return true;
        }
        return false;
}

static json_t *ports_of(const json_t *conf) {
        json_t *a = json_array();
        const json_t *p;
        size_t i;
        json_array_foreach(json_object_get(conf, "publishedPorts"), i, p) {
                const char *ip = cm_json_str(p, "hostAddress"), *proto = cm_json_str(p, "proto");
                if (!proto)
                        proto = cm_json_str(p, "protocol");
                (void)json_array_append_new(
                        a, json_pack("{s:s, s:I, s:I, s:s}", "host_ip", ip ? ip : "127.0.0.1", "host_port",
                                     json_integer_value(json_object_get(p, "hostPort")), "container_port",
                                     json_integer_value(json_object_get(p, "containerPort")), "protocol",
                                     proto && strcmp(proto, "udp") == 0 ? "udp" : "tcp"));
        }
        return a;
}

static json_t *labels_json(const cm_container_info *c) {
        json_t *o = json_object();
        for (size_t i = 0; i < c->n_labels; i++)
                (void)json_object_set_new(o, c->labels[i].key, json_string(c->labels[i].value));
        return o;
}

/* The common fields, next to the CLI's own. */
static void add_common(json_t *doc, const cm_container_info *c) {
        const json_t *conf = json_object_get(doc, "configuration"), *proc = json_object_get(conf, "initProcess");
        const json_t *res = json_object_get(conf, "resources");
        const char *wd = cm_json_str(proc, "workingDirectory");
        (void)json_object_set_new(doc, "id", json_string(c->id));
        (void)json_object_set_new(doc, "name", json_string(c->name));
        (void)json_object_set_new(doc, "image", json_string(c->image));
        (void)json_object_set_new(doc, "state", json_string(c->state));
        (void)json_object_set_new(doc, "runtime", json_string("apple"));
        (void)json_object_set_new(doc, "created_at", json_integer(c->created_at));
        (void)json_object_set_new(doc, "labels", labels_json(c));
        (void)json_object_set_new(doc, "argv", argv_of(proc));
        (void)json_object_set_new(doc, "env", strings_of(json_object_get(proc, "environment")));
        if (wd)
                (void)json_object_set_new(doc, "workdir", json_string(wd));
        (void)json_object_set_new(doc, "network", json_boolean(has_network(conf)));
        (void)json_object_set_new(doc, "limits",
                                  json_pack("{s:I, s:f}", "memory_bytes",
                                            json_integer_value(json_object_get(res, "memoryInBytes")), "cpus",
                                            json_number_value(json_object_get(res, "cpus"))));
        (void)json_object_set_new(doc, "ports", ports_of(conf));
}

int apple_parse_inspect(const char *text, size_t len, const char *id, char **ret_json, cm_err *err) {
        cleanup_json json_t *arr = load_array(text, len, "inspect", err);
        const json_t *c;
        size_t i;
        if (!arr)
                return -EPROTO;
        json_array_foreach(arr, i, c) {
                const char *cid = cm_json_str(json_object_get(c, "configuration"), "id");
                cm_container_info info;
                if (!cid || strcmp(cid, id) != 0 || info_of(c, &info) < 0)
                        continue;
                cleanup_json json_t *doc = json_deep_copy(c);
                add_common(doc, &info);
                cm_container_info_clear(&info);
                *ret_json = cm_json_dump(doc);
                return 0;
        }
        return cm_err_set(err, ENOENT, "no container \"%s\"", id);
}

static uint64_t u64(const json_t *o, const char *key) {
        const json_t *v = json_object_get(o, key);
        return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

int apple_parse_stats(const char *text, size_t len, cm_stats *ret, cm_err *err) {
        cleanup_json json_t *arr = load_array(text, len, "stats --format json", err);
        const json_t *s;
        if (!arr)
                return -EPROTO;
        s = json_array_get(arr, 0);
        if (!json_is_object(s))
                return cm_err_set(err, ENOENT, "`container stats` reported nothing for the container (is it running?)");
        memset(ret, 0, sizeof *ret);
        ret->cpu_usec = u64(s, "cpuUsageUsec");
        ret->memory_bytes = u64(s, "memoryUsageBytes");
        ret->memory_limit_bytes = u64(s, "memoryLimitBytes");
        ret->pids = u64(s, "numProcesses");
        ret->io_read_bytes = u64(s, "blockReadBytes");
        ret->io_write_bytes = u64(s, "blockWriteBytes");
        ret->source = "container stats";
        return 0;
}
