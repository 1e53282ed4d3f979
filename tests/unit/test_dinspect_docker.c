/* dinspect from Docker's inspect JSON (src/backend/dinspect_docker.c).
 *
 * The fixtures are real: tests/unit/fixtures/podman-inspect-*.json are the
 * Engine API's answer (GET /v1.41/containers/NAME/json, Podman 4.3.1's
 * compatible API, runtime runc, cgroup v1) for two containers of a busybox
 * image (`podman import` of a tarball of busybox-static), made with
 *
 *   podman run -d --name dinspect-fixture --cpus 0.5 --memory 64m
 *     --pids-limit 50 -v /tmp/dinsp-pod/ro:/data/ro:ro -v /tmp/dinsp-pod/rw:/data/rw
 *     --cap-drop NET_RAW --cap-drop MKNOD --cap-add SYS_PTRACE
 *     -p 127.0.0.1:18089:80 --read-only --security-opt no-new-privileges
 *     --device /dev/fuse --user 1000:1000 IMAGE /bin/sleep 3600
 *   podman run -d --name dinspect-priv --privileged --network host --pid host
 *     --security-opt seccomp=unconfined IMAGE /bin/sleep 3600
 *
 * and `curl --unix-socket` on `podman system service`.  The expected values
 * below are what the kernel showed for each container's process at the
 * time, not what the mapping computes: /proc/PID/status (CapBnd 800c05fb,
 * NoNewPrivs 1, Seccomp 2; privileged: CapEff 1fffeffffff, every
 * capability but SYS_RESOURCE, which this machine withholds, NoNewPrivs 0,
 * Seccomp 0), /proc/PID/mountinfo (/data/ro ro, /data/rw rw), its
 * namespaces against the host's (own mnt, uts, ipc, net, pid; the host's
 * user and cgroup; privileged: the host's net and pid), the memory
 * cgroup's limit_in_bytes (67108864) and /proc/PID/limits (nofile and
 * nproc 1024:1024, containers.conf's default_ulimits). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"

#include <stdlib.h>
#include <string.h>

#include "backend/dinspect_docker.h"
#include "util/cleanup.h"

static json_t *fixture(const char *name) {
        const char *dir = getenv("CM_FIXTURES");
        cleanup_free char *path = xasprintf("%s/%s", dir ? dir : "tests/unit/fixtures", name);
        json_error_t e;
        json_t *j = json_load_file(path, 0, &e);
        if (!j)
                fail_msg("cannot read the fixture %s: %s", path, e.text);
        return j;
}

/* The array `a` holds exactly these strings, in this order. */
static void assert_strings(const json_t *a, const char *const *want, size_t n) {
        assert_true(json_is_array(a));
        if (json_array_size(a) != n)
                fail_msg("%zu items, want %zu: %s", json_array_size(a), n, cm_json_dump(a));
        for (size_t i = 0; i < n; i++)
                assert_string_equal(json_string_value(json_array_get(a, i)), want[i]);
}

#define ASSERT_STRINGS(a, ...)                                                                                         \
        do {                                                                                                           \
                static const char *const w_[] = {__VA_ARGS__};                                                         \
                assert_strings(a, w_, ARRAY_SIZE(w_));                                                                 \
        } while (0)

static const json_t *at(const json_t *o, const char *path) {
        cleanup_free char *p = xstrdup(path);
        char *save = NULL;
        for (char *k = strtok_r(p, ".", &save); k && o; k = strtok_r(NULL, ".", &save))
                o = json_object_get(o, k);
        if (!o)
                fail_msg("no %s", path);
        return o;
}

static void test_limits_mounts_caps_ports(void **state) {
        cleanup_json json_t *doc = fixture("podman-inspect-limits.json");
        cleanup_json json_t *v = cm_dinspect_docker(doc, "docker");
        const json_t *m;
        assert_non_null(v);
        assert_string_equal(json_string_value(at(v, "container")), "dinspect-fixture");
        assert_string_equal(json_string_value(at(v, "id")), "877fd7ea4aca013dc39387cde5d16f37265a0fcc320f366e51d332e638177788");
        assert_string_equal(json_string_value(at(v, "runtime")), "docker");
        assert_string_equal(json_string_value(at(v, "state")), "running");
        assert_string_equal(json_string_value(at(v, "source")), "inspect");
        assert_true(json_is_false(at(v, "privileged")));
        assert_string_equal(json_string_value(at(v, "user")), "1000:1000");
        assert_true(json_is_false(at(v, "userns")));
        ASSERT_STRINGS(at(v, "caps.kept"), "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
                       "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "SYS_PTRACE", "SETFCAP");
        ASSERT_STRINGS(at(v, "caps.dropped"), "NET_RAW", "MKNOD", "AUDIT_WRITE");
        ASSERT_STRINGS(at(v, "namespaces.own"), "mnt", "uts", "ipc", "net", "pid");
        ASSERT_STRINGS(at(v, "namespaces.host"), "user", "cgroup");
        ASSERT_STRINGS(at(v, "devices"), "/dev/fuse");
        m = at(v, "mounts");
        assert_int_equal(json_array_size(m), 5);
        assert_string_equal(json_string_value(at(json_array_get(m, 0), "target")), "/data/ro");
        assert_string_equal(json_string_value(at(json_array_get(m, 0), "source")), "/tmp/dinsp-pod/ro");
        assert_string_equal(json_string_value(at(json_array_get(m, 0), "mode")), "ro");
        assert_string_equal(json_string_value(at(json_array_get(m, 0), "type")), "bind");
        assert_string_equal(json_string_value(at(json_array_get(m, 1), "target")), "/data/rw");
        assert_string_equal(json_string_value(at(json_array_get(m, 1), "mode")), "rw");
        /* the tmpfs mounts: writable space under the read-only root */
        assert_string_equal(json_string_value(at(json_array_get(m, 2), "type")), "tmpfs");
        assert_string_equal(json_string_value(at(json_array_get(m, 3), "target")), "/tmp");
        assert_string_equal(json_string_value(at(json_array_get(m, 3), "mode")), "rw");
        assert_true(json_is_true(at(v, "readonly_root")));
        assert_string_equal(json_string_value(at(v, "network.mode")), "bridge");
        ASSERT_STRINGS(at(v, "network.ports"), "127.0.0.1:18089->80/tcp");
        assert_true(json_real_value(at(v, "limits.cpus")) == 0.5);
        assert_int_equal(json_integer_value(at(v, "limits.memory")), 67108864);
        assert_int_equal(json_integer_value(at(v, "limits.pids")), 50);
        assert_string_equal(json_string_value(at(v, "ulimits.nofile")), "1024:1024");
        assert_string_equal(json_string_value(at(v, "ulimits.nproc")), "1024:1024");
        assert_string_equal(json_string_value(at(v, "seccomp")), "filter");
        assert_true(json_is_null(at(v, "apparmor")));
        assert_true(json_is_true(at(v, "no_new_privs")));
        (void)state;
}

static void test_privileged_host_network(void **state) {
        cleanup_json json_t *doc = fixture("podman-inspect-privileged.json");
        cleanup_json json_t *v = cm_dinspect_docker(doc, "docker");
        assert_non_null(v);
        assert_string_equal(json_string_value(at(v, "container")), "dinspect-priv");
        assert_true(json_is_true(at(v, "privileged")));
        ASSERT_STRINGS(at(v, "caps.kept"), "ALL");
        ASSERT_STRINGS(at(v, "caps.dropped"), "SYS_RESOURCE");
        ASSERT_STRINGS(at(v, "namespaces.own"), "mnt", "uts", "ipc");
        ASSERT_STRINGS(at(v, "namespaces.host"), "net", "pid", "user", "cgroup");
        ASSERT_STRINGS(at(v, "devices"), "all");
        assert_string_equal(json_string_value(at(v, "network.mode")), "host");
        ASSERT_STRINGS(at(v, "network.ports"));
        assert_true(json_is_null(at(v, "limits.cpus")));
        assert_true(json_is_null(at(v, "limits.memory")));
        assert_string_equal(json_string_value(at(v, "seccomp")), "off");
        assert_true(json_is_false(at(v, "no_new_privs")));
        assert_true(json_is_false(at(v, "readonly_root")));
        (void)state;
}

/* Docker's own spellings where Podman's differ, and Docker's capability
 * rules, on the first fixture changed. */
static void test_docker_spellings(void **state) {
        cleanup_json json_t *doc = fixture("podman-inspect-limits.json");
        json_t *hc = json_object_get(doc, "HostConfig");
        json_t *v;

        (void)json_object_set_new(hc, "CapDrop", json_pack("[s]", "ALL"));
        (void)json_object_set_new(hc, "CapAdd", json_pack("[s, s]", "CAP_NET_BIND_SERVICE", "cap_chown"));
        (void)json_object_set_new(hc, "Ulimits", json_pack("[{s:s, s:i, s:i}]", "Name", "nofile", "Soft", 64, "Hard", -1));
        (void)json_object_set_new(hc, "NanoCpus", json_integer(0));
        (void)json_object_set_new(hc, "CpuQuota", json_integer(150000));
        (void)json_object_set_new(hc, "PidsLimit", json_integer(-1));
        (void)json_object_set_new(hc, "UsernsMode", json_string("private"));
        (void)json_object_set_new(hc, "CgroupnsMode", json_string("private"));
        (void)json_object_set_new(hc, "SecurityOpt", json_pack("[s, s]", "no-new-privileges:false", "apparmor=docker-default"));
        (void)json_array_set_new(json_object_get(json_object_get(json_object_get(doc, "NetworkSettings"), "Ports"), "80/tcp"),
                                 0, json_pack("{s:s, s:s}", "HostIp", "", "HostPort", "8080"));
        v = cm_dinspect_docker(doc, "docker");
        assert_non_null(v);
        ASSERT_STRINGS(at(v, "caps.kept"), "CHOWN", "NET_BIND_SERVICE");
        ASSERT_STRINGS(at(v, "caps.dropped"), "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
                       "NET_RAW", "SYS_CHROOT", "MKNOD", "AUDIT_WRITE", "SETFCAP");
        assert_string_equal(json_string_value(at(v, "ulimits.nofile")), "64:unlimited");
        assert_true(json_real_value(at(v, "limits.cpus")) == 1.5);
        assert_true(json_is_null(at(v, "limits.pids")));
        assert_true(json_is_true(at(v, "userns")));
        ASSERT_STRINGS(at(v, "namespaces.host"));
        assert_true(json_is_false(at(v, "no_new_privs")));
        assert_string_equal(json_string_value(at(v, "apparmor")), "docker-default");
        ASSERT_STRINGS(at(v, "network.ports"), "0.0.0.0:8080->80/tcp");
        json_decref(v);

        /* every capability added, one dropped */
        (void)json_object_set_new(hc, "CapAdd", json_pack("[s]", "ALL"));
        (void)json_object_set_new(hc, "CapDrop", json_pack("[s]", "SYS_ADMIN"));
        v = cm_dinspect_docker(doc, "docker");
        assert_int_equal(json_array_size(at(v, "caps.kept")), 40);
        ASSERT_STRINGS(at(v, "caps.dropped"));
        json_decref(v);
        (void)state;
}

static void test_not_inspect(void **state) {
        cleanup_json json_t *a = json_pack("{s:s}", "Id", "x");
        cleanup_json json_t *b = json_pack("{s:{}}", "HostConfig");
        assert_null(cm_dinspect_docker(a, "docker"));
        assert_null(cm_dinspect_docker(b, "docker"));
        (void)state;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_limits_mounts_caps_ports),
                cmocka_unit_test(test_privileged_host_network),
                cmocka_unit_test(test_docker_spellings),
                cmocka_unit_test(test_not_inspect),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
