/* Policy checks: host paths under the allowlist (symlinks resolved first),
 * names and image references that can never become flags. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/policy.h"
#include "util/cleanup.h"

static char tmp[] = "/tmp/cm-policy-XXXXXX";

static void test_under(void **state) {
        assert_true(cm_path_under("/a/b", "/a/b"));
        assert_true(cm_path_under("/a/b/c", "/a/b"));
        assert_false(cm_path_under("/a/bc", "/a/b"));
        assert_false(cm_path_under("/a", "/a/b"));
        assert_true(cm_path_under("/x", "/"));
        (void)state;
}

/* allowed/{f, escape -> outside}, outside/, allowedX/: made afresh for each test. */
static int setup(void **state) {
        cleanup_free char *allowed = xasprintf("%s/allowed", tmp), *outside = xasprintf("%s/outside", tmp);
        cleanup_free char *file = xasprintf("%s/allowed/f", tmp), *escape = xasprintf("%s/allowed/escape", tmp);
        cleanup_free char *sib = xasprintf("%s/allowedX", tmp);
        tu_rm_rf(tmp, 1);
        assert_int_equal(mkdir(allowed, 0700), 0);
        assert_int_equal(mkdir(outside, 0700), 0);
        assert_int_equal(mkdir(sib, 0700), 0);
        assert_int_equal(close(open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0600)), 0);
        assert_int_equal(symlink(outside, escape), 0);
        (void)state;
        return 0;
}

static void test_host_paths(void **state) {
        cleanup_free char *allowed = xasprintf("%s/allowed", tmp), *outside = xasprintf("%s/outside", tmp);
        cleanup_free char *file = xasprintf("%s/allowed/f", tmp), *escape = xasprintf("%s/allowed/escape", tmp);
        cleanup_free char *dotdot = xasprintf("%s/allowed/../outside", tmp), *sib = xasprintf("%s/allowedX", tmp);
        char *list[] = {allowed, NULL}, *real = NULL;
        cm_config cfg = {.allowed_mounts = list};
        cm_err err = CM_ERR_INIT;

        assert_int_equal(cm_policy_host_path(&cfg, file, &real, &err), 0);
        assert_string_equal(real, file);
        free(real);
        /* A symlink inside the allowed dir that points outside is refused. */
        assert_true(cm_policy_host_path(&cfg, escape, &real, &err) < 0);
        assert_non_null(strstr(err.msg, "resolves to"));
        assert_non_null(strstr(err.msg, "CONTAINER_MCP_ALLOWED_MOUNTS"));
        assert_true(cm_policy_host_path(&cfg, dotdot, &real, &err) < 0);
        assert_true(cm_policy_host_path(&cfg, sib, &real, &err) < 0); /* a prefix is not a parent */
        assert_true(cm_policy_host_path(&cfg, "/etc", &real, &err) < 0);
        assert_true(cm_policy_host_path(&cfg, "/no/such/path", &real, &err) < 0);
        assert_non_null(strstr(err.msg, "must exist"));
        assert_true(cm_policy_host_path(&cfg, "", &real, &err) < 0);
        (void)state;
}

static void test_split(void **state) {
        cleanup_free char *allowed = xasprintf("%s/allowed", tmp);
        cleanup_free char *newfile = xasprintf("%s/allowed/new.txt", tmp), *esc = xasprintf("%s/allowed/escape", tmp);
        cleanup_free char *deep = xasprintf("%s/allowed/nodir/x", tmp), *file = xasprintf("%s/allowed/f", tmp);
        char *list[] = {allowed, NULL}, *root = NULL, *rel = NULL;
        cm_config cfg = {.allowed_mounts = list};
        cm_err err = CM_ERR_INIT;
        assert_int_equal(cm_policy_host_split(&cfg, file, true, &root, &rel, &err), 0);
        assert_string_equal(root, allowed);
        assert_string_equal(rel, "f");
        free(root), free(rel);
        assert_int_equal(cm_policy_host_split(&cfg, allowed, true, &root, &rel, &err), 0);
        assert_string_equal(rel, "");
        free(root), free(rel);
        /* a destination need not exist; its parent must */
        assert_int_equal(cm_policy_host_split(&cfg, newfile, false, &root, &rel, &err), 0);
        assert_string_equal(rel, "new.txt");
        free(root), free(rel);
        assert_true(cm_policy_host_split(&cfg, newfile, true, &root, &rel, &err) < 0);
        assert_true(cm_policy_host_split(&cfg, deep, false, &root, &rel, &err) < 0);
        /* an existing destination that is a symlink out is refused */
        assert_true(cm_policy_host_split(&cfg, esc, false, &root, &rel, &err) < 0);
        assert_non_null(strstr(err.msg, "resolves to"));
        (void)state;
}

static void test_names_and_images(void **state) {
        cm_config cfg = {0};
        char *real = NULL;
        cm_err err = CM_ERR_INIT;
        assert_int_equal(cm_policy_name("web-1.test_x", &err), 0);
        assert_true(cm_policy_name("-rf", &err) < 0);
        assert_true(cm_policy_name(".hidden", &err) < 0);
        assert_true(cm_policy_name("a b", &err) < 0);
        assert_true(cm_policy_name("a/b", &err) < 0);
        assert_true(cm_policy_name("", &err) < 0);
        assert_int_equal(cm_policy_image(&cfg, "host", &real, &err), 0);
        assert_int_equal(cm_policy_image(&cfg, "registry.local:5000/alpine:3.20@sha256:abc", &real, &err), 0);
        assert_true(cm_policy_image(&cfg, "--privileged", &real, &err) < 0);
        assert_non_null(strstr(err.msg, "'-'"));
        assert_true(cm_policy_image(&cfg, "alpine --rm", &real, &err) < 0);
        assert_true(cm_policy_image(&cfg, "alpine\n", &real, &err) < 0);
        assert_true(cm_policy_image(&cfg, "", &real, &err) < 0);
        assert_null(real);
        (void)state;
}

/* A directory image is a directory strictly below CONTAINER_MCP_IMAGE_DIRS,
 * after symlinks and "..": the review ran the host's / as an image with
 * "/usr/..", "/etc/..", "//" and a symlink. */
static void test_image_dirs(void **state) {
        cleanup_free char *allowed = xasprintf("%s/allowed", tmp), *rootfs = xasprintf("%s/allowed/rootfs", tmp);
        cleanup_free char *escape = xasprintf("%s/allowed/escape", tmp), *file = xasprintf("%s/allowed/f", tmp);
        cleanup_free char *up = xasprintf("%s/allowed/rootfs/..", tmp), *outside = xasprintf("%s/outside", tmp);
        char *none[] = {NULL}, *list[] = {allowed, NULL}, *real = NULL;
        cm_config cfg = {.image_dirs = none};
        cm_err err = CM_ERR_INIT;
        static const char *const host_roots[] = {"/", "//", "/usr/..", "/etc/..", "/usr", "/proc", "/./"};

        assert_int_equal(mkdir(rootfs, 0755), 0);
        /* unset: no directory image at all, and the message says so */
        assert_true(cm_policy_image(&cfg, rootfs, &real, &err) < 0);
        assert_non_null(strstr(err.msg, "CONTAINER_MCP_IMAGE_DIRS is unset"));
        for (size_t i = 0; i < ARRAY_SIZE(host_roots); i++)
                assert_true(cm_policy_image(&cfg, host_roots[i], &real, &err) < 0);
        cfg.image_dirs = list;
        assert_int_equal(cm_policy_image(&cfg, rootfs, &real, &err), 0);
        assert_string_equal(real, rootfs);
        free(real);
        for (size_t i = 0; i < ARRAY_SIZE(host_roots); i++) {
                assert_true(cm_policy_image(&cfg, host_roots[i], &real, &err) < 0);
                assert_non_null(strstr(err.msg, "not a directory below CONTAINER_MCP_IMAGE_DIRS"));
                assert_null(real);
        }
        assert_true(cm_policy_image(&cfg, escape, &real, &err) < 0); /* symlink out */
        assert_true(cm_policy_image(&cfg, up, &real, &err) < 0);     /* the root itself */
        assert_true(cm_policy_image(&cfg, allowed, &real, &err) < 0);
        assert_true(cm_policy_image(&cfg, outside, &real, &err) < 0);
        assert_true(cm_policy_image(&cfg, file, &real, &err) < 0); /* not a directory */
        assert_true(cm_policy_image(&cfg, "./rootfs", &real, &err) < 0);
        (void)state;
}

/* Nothing that is, contains or lies in the state dir passes as a host path. */
static void test_state_dir_refused(void **state) {
        cleanup_free char *allowed = xasprintf("%s/allowed", tmp), *st = xasprintf("%s/allowed/state", tmp);
        cleanup_free char *rec = xasprintf("%s/allowed/state/rec", tmp), *img = xasprintf("%s/allowed/state/img", tmp);
        cleanup_free char *sib = xasprintf("%s/allowed/f", tmp);
        char *list[] = {allowed, NULL}, *real = NULL, *root = NULL, *rel = NULL;
        cm_config cfg = {.allowed_mounts = list, .image_dirs = list, .state_real = st};
        cm_err err = CM_ERR_INIT;

        assert_int_equal(mkdir(st, 0700), 0);
        assert_int_equal(mkdir(rec, 0700), 0);
        assert_int_equal(mkdir(img, 0700), 0);
        assert_true(cm_policy_host_path(&cfg, st, &real, &err) < 0);
        assert_non_null(strstr(err.msg, "state dir"));
        assert_true(cm_policy_host_path(&cfg, rec, &real, &err) < 0);
        assert_true(cm_policy_host_path(&cfg, allowed, &real, &err) < 0); /* contains it */
        assert_non_null(strstr(err.msg, "contains"));
        assert_true(cm_policy_host_split(&cfg, rec, true, &root, &rel, &err) < 0);
        assert_true(cm_policy_image(&cfg, img, &real, &err) < 0);
        assert_int_equal(cm_policy_host_path(&cfg, sib, &real, &err), 0);
        free(real);
        (void)state;
}

static void test_host_ports(void **state) {
        cm_config cfg = {.min_host_port = 1024};
        cm_err err = CM_ERR_INIT;
        assert_int_equal(cm_policy_host_port(&cfg, 0, &err), 0);
        assert_int_equal(cm_policy_host_port(&cfg, 1024, &err), 0);
        assert_int_equal(cm_policy_host_port(&cfg, 8080, &err), 0);
        assert_true(cm_policy_host_port(&cfg, 25, &err) < 0);
        assert_non_null(strstr(err.msg, "CONTAINER_MCP_MIN_HOST_PORT"));
        assert_true(cm_policy_host_port(&cfg, 1023, &err) < 0);
        cfg.min_host_port = 1;
        assert_int_equal(cm_policy_host_port(&cfg, 25, &err), 0);
        (void)state;
}

/* Which registries an agent's pull may reach: any but local addresses by
 * default; the operator's list when there is one. */
static void test_registries(void **state) {
        static const char *const ok_default[] = {
                "busybox",          "docker.io/library/alpine:3.20",
                "ghcr.io/o/r:1",    "registry.example.com:5000/team/app",
                "8.8.8.8:5000/x",   "[2001:db8::1]:5000/x",
                "172.32.0.1/x",     "100.128.0.1/x",
                "localhostx.com/x",
        };
        static const char *const local[] = {
                "localhost/x",          "localhost:5000/x", "127.0.0.1:5000/x", "127.1.2.3/x",       "10.0.0.1:5000/x",
                "172.16.0.1/x",         "172.31.255.255/x", "192.168.1.1/x",    "169.254.169.254/x", "0.0.0.0:80/x",
                "100.64.0.1/x",         "[::1]:5000/x",     "[::]:5000/x",      "[fe80::1]:5000/x",  "[fd00::1]:5000/x",
                "registry.localhost/x", "LOCALHOST:5000/x",
        };
        char *list[] = {(char *)"ghcr.io", (char *)"127.0.0.1:5000", NULL};
        char *none[] = {NULL};
        char *ranges[] = {(char *)"10.0.0.0/8", NULL};
        cm_config cfg = {.allowed_registries = none};
        cm_err err = CM_ERR_INIT;
        (void)state;

        (void)unsetenv("CONTAINER_MCP_INSECURE_REGISTRIES");
        for (size_t i = 0; i < ARRAY_SIZE(ok_default); i++)
                if (cm_policy_registry(&cfg, ok_default[i], &err) < 0)
                        fail_msg("%s refused: %s", ok_default[i], err.msg);
        for (size_t i = 0; i < ARRAY_SIZE(local); i++) {
                if (cm_policy_registry(&cfg, local[i], &err) == 0)
                        fail_msg("%s allowed by default", local[i]);
                assert_non_null(strstr(err.msg, "CONTAINER_MCP_ALLOWED_REGISTRIES"));
        }
        /* a reference that is not one is refused as such */
        assert_true(cm_policy_registry(&cfg, "--all", &err) < 0);
        assert_true(cm_policy_registry(&cfg, "[::ffff:127.0.0.1]:5000/x", &err) < 0);
        /* the operator named it as an insecure registry: allowed */
        (void)setenv("CONTAINER_MCP_INSECURE_REGISTRIES", "registry.lan, 127.0.0.1:5000", 1);
        assert_int_equal(cm_policy_registry(&cfg, "127.0.0.1:5000/x", &err), 0);
        assert_true(cm_policy_registry(&cfg, "127.0.0.1:5001/x", &err) < 0);
        /* a range names the registries addressed in it */
        (void)setenv("CONTAINER_MCP_INSECURE_REGISTRIES", "10.0.0.0/8", 1);
        assert_int_equal(cm_policy_registry(&cfg, "10.1.2.3:5000/x", &err), 0);
        assert_true(cm_policy_registry(&cfg, "192.168.1.1:5000/x", &err) < 0);
        assert_true(cm_policy_registry(&cfg, "localhost:5000/x", &err) < 0);
        (void)unsetenv("CONTAINER_MCP_INSECURE_REGISTRIES");

        /* a list: only what it names, local or not */
        cfg.allowed_registries = ranges;
        assert_int_equal(cm_policy_registry(&cfg, "10.9.9.9:443/x", &err), 0);
        assert_true(cm_policy_registry(&cfg, "ghcr.io/o/r", &err) < 0);
        cfg.allowed_registries = list;
        assert_int_equal(cm_policy_registry(&cfg, "ghcr.io/o/r", &err), 0);
        assert_int_equal(cm_policy_registry(&cfg, "127.0.0.1:5000/x", &err), 0);
        assert_true(cm_policy_registry(&cfg, "busybox", &err) < 0);
        assert_non_null(strstr(err.msg, "docker.io"));
        assert_non_null(strstr(err.msg, "ghcr.io,127.0.0.1:5000"));
        assert_true(cm_policy_registry(&cfg, "127.0.0.1:5001/x", &err) < 0);
        assert_true(cm_policy_registry(&cfg, "ghcr.io.evil.com/x", &err) < 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_under),
                cmocka_unit_test_setup(test_host_paths, setup),
                cmocka_unit_test_setup(test_split, setup),
                cmocka_unit_test(test_names_and_images),
                cmocka_unit_test_setup(test_image_dirs, setup),
                cmocka_unit_test_setup(test_state_dir_refused, setup),
                cmocka_unit_test(test_host_ports),
                cmocka_unit_test(test_registries),
        };
        TU_RUN_IN_TMP(tmp, tests);
}
