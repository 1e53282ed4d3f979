/* dinspect from Docker's inspect JSON (see dinspect_docker.h).
 *
 * What the engine's document says is reported as it says it; where it
 * leaves a namespace's mode empty (the daemon's default, which the document
 * does not name) the view says "host", the weaker claim, for the user and
 * cgroup namespaces, and "own" for the others, which Docker and Podman
 * always make unless told "host". */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend/dinspect_docker.h"
#include "util/capnames.h"
#include "util/cleanup.h"

static const char *str_or(const json_t *o, const char *key, const char *dflt) {
        const char *s = cm_json_str(o, key);
        return s && *s ? s : dflt;
}

static json_int_t int_of(const json_t *o, const char *key) { return json_integer_value(json_object_get(o, key)); }

static bool is_all(const char *name) { return name && strcasecmp(name, "ALL") == 0; }

/* A capability name as dinspect spells it: upper case, no CAP_ prefix. */
static json_t *cap_json(const char *name) {
        int c = cm_cap_from_name(name);
        cleanup_free char *up = NULL;
        if (c >= 0)
                return json_string(cm_cap_name(c));
        up = xstrdup(strncasecmp(name, "CAP_", 4) == 0 ? name + 4 : name);
        for (char *p = up; *p; p++)
                *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
        return json_string(up);
}

/* The mask of the named capabilities; *ret_all when "ALL" is among them. */
static uint64_t cap_mask(const json_t *names, bool *ret_all) {
        uint64_t m = 0;
        const json_t *x;
        size_t i;
        *ret_all = false;
        json_array_foreach(names, i, x) {
                int c = cm_cap_from_name(json_string_value(x));
                if (is_all(json_string_value(x)))
                        *ret_all = true;
                else if (c >= 0)
                        m |= (uint64_t)1 << c;
        }
        return m;
}

/* Docker's rule: ALL added is every capability less those dropped; ALL
 * dropped leaves only those added; else the default set less those dropped
 * plus those added. */
static json_t *caps_json(const json_t *hc) {
        const json_t *add = json_object_get(hc, "CapAdd"), *drop = json_object_get(hc, "CapDrop"), *x;
        json_t *kept = json_array(), *dropped = json_array();
        uint64_t dflt = cm_cap_docker_default(), every = ((uint64_t)1 << CM_CAP_COUNT) - 1, m;
        bool add_all, drop_all;
        uint64_t a = cap_mask(add, &add_all), d = cap_mask(drop, &drop_all);
        size_t i;

        if (json_is_true(json_object_get(hc, "Privileged"))) {
                (void)json_array_append_new(kept, json_string("ALL"));
                json_array_foreach(drop, i, x) if (json_string_value(x))
                        (void)json_array_append_new(dropped, cap_json(json_string_value(x)));
                return json_pack("{s:o, s:o}", "kept", kept, "dropped", dropped);
        }
        m = add_all ? every & ~d : drop_all ? a : (dflt & ~d) | a;
        for (int c = 0; c < CM_CAP_COUNT; c++)
                if (m & ((uint64_t)1 << c))
                        (void)json_array_append_new(kept, json_string(cm_cap_name(c)));
                else if (dflt & ((uint64_t)1 << c))
                        (void)json_array_append_new(dropped, json_string(cm_cap_name(c)));
        return json_pack("{s:o, s:o}", "kept", kept, "dropped", dropped);
}

static bool user_ns_own(const json_t *hc) {
        const char *m = str_or(hc, "UsernsMode", "host");
        return strcmp(m, "host") != 0;
}

static json_t *namespaces_json(const json_t *hc) {
        static const struct {
                const char *ns, *key;
        } modes[] = {{"mnt", NULL},          {"uts", "UTSMode"}, {"ipc", "IpcMode"},         {"net", "NetworkMode"},
                     {"pid", "PidMode"},     {"user", NULL},     {"cgroup", "CgroupnsMode"}};
        json_t *own = json_array(), *host = json_array();
        for (size_t i = 0; i < ARRAY_SIZE(modes); i++) {
                const char *m = modes[i].key ? str_or(hc, modes[i].key, "") : "";
                bool shared = strcmp(modes[i].ns, "user") == 0 ? !user_ns_own(hc)
                              : strcmp(modes[i].ns, "cgroup") == 0 ? strcmp(m, "private") != 0
                                                                  : strcmp(m, "host") == 0;
                (void)json_array_append_new(shared ? host : own, json_string(modes[i].ns));
        }
        return json_pack("{s:o, s:o}", "own", own, "host", host);
}

static json_t *devices_json(const json_t *hc) {
        const json_t *d;
        json_t *a = json_array();
        size_t i;
        if (json_is_true(json_object_get(hc, "Privileged")))
                (void)json_array_append_new(a, json_string("all"));
        json_array_foreach(json_object_get(hc, "Devices"), i, d) {
                const char *on_host = cm_json_str(d, "PathOnHost"), *inside = cm_json_str(d, "PathInContainer");
                if (!on_host)
                        continue;
                (void)json_array_append_new(a, inside && *inside && strcmp(inside, on_host) != 0
                                                       ? json_sprintf("%s:%s", on_host, inside)
                                                       : json_string(on_host));
        }
        return a;
}

/* Mounts, then the tmpfs mounts HostConfig.Tmpfs adds (writable space even
 * under a read-only root). */
static json_t *mounts_json(const json_t *doc, const json_t *hc) {
        const json_t *m, *opts;
        const char *target;
        json_t *a = json_array();
        size_t i;
        json_array_foreach(json_object_get(doc, "Mounts"), i, m) {
                (void)json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s}", "type", str_or(m, "Type", "bind"),
                                                         "source", str_or(m, "Source", ""), "target",
                                                         str_or(m, "Destination", ""), "mode",
                                                         json_is_false(json_object_get(m, "RW")) ? "ro" : "rw"));
        }
        json_object_foreach((json_t *)json_object_get(hc, "Tmpfs"), target, opts) {
                const char *o = json_string_value(opts) ? json_string_value(opts) : "";
                bool ro = strncmp(o, "ro", 2) == 0 && (o[2] == 0 || o[2] == ',');
                (void)json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s}", "type", "tmpfs", "source", "tmpfs",
                                                         "target", target, "mode", ro ? "ro" : "rw"));
        }
        return a;
}

/* "127.0.0.1:8080->80/tcp" for each published port. */
static json_t *ports_json(const json_t *doc) {
        const json_t *binds, *b;
        const char *port;
        json_t *a = json_array();
        size_t i;
        json_object_foreach((json_t *)json_object_get(json_object_get(doc, "NetworkSettings"), "Ports"), port, binds)
                json_array_foreach(binds, i, b) {
                        const char *hp = cm_json_str(b, "HostPort");
                        if (hp && *hp)
                                (void)json_array_append_new(a, json_sprintf("%s:%s->%s", str_or(b, "HostIp", "0.0.0.0"),
                                                                            hp, port));
                }
        return a;
}

static json_t *network_json(const json_t *doc, const json_t *hc) {
        const char *mode = str_or(hc, "NetworkMode", "default");
        return json_pack("{s:s, s:o}", "mode", strcmp(mode, "default") == 0 ? "bridge" : mode, "ports",
                         strcmp(mode, "none") == 0 ? json_array() : ports_json(doc));
}

static json_t *positive(json_int_t v) { return v > 0 ? json_integer(v) : json_null(); }

static json_t *limits_json(const json_t *hc) {
        json_int_t nano = int_of(hc, "NanoCpus"), quota = int_of(hc, "CpuQuota"), period = int_of(hc, "CpuPeriod");
        json_t *cpus = nano > 0 ? json_real((double)nano / 1e9)
                       : quota > 0 ? json_real((double)quota / (double)(period > 0 ? period : 100000))
                                   : json_null();
        return json_pack("{s:o, s:o, s:o, s:s}", "cpus", cpus, "memory", positive(int_of(hc, "Memory")), "pids",
                         positive(int_of(hc, "PidsLimit")), "enforced_by", "cgroup");
}

static json_t *limit_text(json_int_t v) { return v < 0 ? json_string("unlimited") : json_sprintf("%lld", (long long)v); }

/* Ulimits by their short names (Podman says RLIMIT_NOFILE, Docker nofile). */
static json_t *ulimits_json(const json_t *hc) {
        const json_t *u;
        json_t *o = json_object();
        size_t i;
        json_array_foreach(json_object_get(hc, "Ulimits"), i, u) {
                const char *name = cm_json_str(u, "Name");
                cleanup_free char *low = NULL;
                cleanup_json json_t *soft = NULL, *hard = NULL;
                if (!name)
                        continue;
                low = xstrdup(strncasecmp(name, "RLIMIT_", 7) == 0 ? name + 7 : name);
                for (char *p = low; *p; p++)
                        *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
                soft = limit_text(int_of(u, "Soft"));
                hard = limit_text(int_of(u, "Hard"));
                (void)json_object_set_new(o, low, json_sprintf("%s:%s", json_string_value(soft), json_string_value(hard)));
        }
        return o;
}

/* The value of SecurityOpt "key=value" / "key:value" / "key"; NULL absent. */
static const char *security_opt(const json_t *hc, const char *key) {
        const json_t *x;
        size_t i, n = strlen(key);
        json_array_foreach(json_object_get(hc, "SecurityOpt"), i, x) {
                const char *s = json_string_value(x);
                if (s && strncmp(s, key, n) == 0 && (s[n] == 0 || s[n] == '=' || s[n] == ':'))
                        return s[n] ? s + n + 1 : "";
        }
        return NULL;
}

static const char *seccomp_mode(const json_t *hc) {
        const char *v = security_opt(hc, "seccomp");
        if (json_is_true(json_object_get(hc, "Privileged")) || (v && strcmp(v, "unconfined") == 0))
                return "off";
        return v && *v ? "custom" : "filter";
}

static json_t *apparmor_json(const json_t *doc, const json_t *hc) {
        const char *v = security_opt(hc, "apparmor");
        if (v && *v)
                return json_string(v);
        v = cm_json_str(doc, "AppArmorProfile");
        return v && *v ? json_string(v) : json_null();
}

static bool no_new_privs(const json_t *hc) {
        const char *v = security_opt(hc, "no-new-privileges");
        return v && (!*v || strcmp(v, "true") == 0);
}

json_t *cm_dinspect_docker(const json_t *doc, const char *runtime) {
        const json_t *hc = json_object_get(doc, "HostConfig"), *cfg = json_object_get(doc, "Config");
        const char *name = str_or(doc, "Name", ""), *user = str_or(cfg, "User", "0");
        if (!cm_json_str(doc, "Id") || !json_is_object(hc))
                return NULL;
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:b, s:s, s:b, s:o, s:o, s:o, s:o, s:b, s:o, s:o, s:o, s:s, s:o, "
                         "s:b}",
                         "container", name[0] == '/' ? name + 1 : name, "id", cm_json_str(doc, "Id"), "runtime", runtime,
                         "state", str_or(json_object_get(doc, "State"), "Status", "unknown"), "source", "inspect",
                         "privileged", json_is_true(json_object_get(hc, "Privileged")), "user", user, "userns",
                         user_ns_own(hc), "caps", caps_json(hc), "namespaces", namespaces_json(hc), "devices",
                         devices_json(hc), "mounts", mounts_json(doc, hc), "readonly_root",
                         json_is_true(json_object_get(hc, "ReadonlyRootfs")), "network", network_json(doc, hc), "limits",
                         limits_json(hc), "ulimits", ulimits_json(hc), "seccomp", seccomp_mode(hc), "apparmor",
                         apparmor_json(doc, hc), "no_new_privs", no_new_privs(hc));
}
