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
        cm_err err = CM_ERR_INIT;
        assert_int_equal(cm_policy_name("web-1.test_x", &err), 0);
        assert_true(cm_policy_name("-rf", &err) < 0);
        assert_true(cm_policy_name(".hidden", &err) < 0);
        assert_true(cm_policy_name("a b", &err) < 0);
        assert_true(cm_policy_name("a/b", &err) < 0);
        assert_true(cm_policy_name("", &err) < 0);
        assert_int_equal(cm_policy_image("host", &err), 0);
        assert_int_equal(cm_policy_image("registry.local:5000/alpine:3.20@sha256:abc", &err), 0);
        assert_true(cm_policy_image("--privileged", &err) < 0);
        assert_non_null(strstr(err.msg, "'-'"));
        assert_true(cm_policy_image("alpine --rm", &err) < 0);
        assert_true(cm_policy_image("alpine\n", &err) < 0);
        assert_true(cm_policy_image("", &err) < 0);
        (void)state;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_under),
                cmocka_unit_test_setup(test_host_paths, setup),
                cmocka_unit_test_setup(test_split, setup),
                cmocka_unit_test(test_names_and_images),
        };
        TU_RUN_IN_TMP(tmp, tests);
}
