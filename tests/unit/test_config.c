/* Configuration: parsing, precedence, and the safe defaults. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/config.h"
#include "util/cleanup.h"

static char tmp[] = "/tmp/cm-config-XXXXXX";

static int setup(void **state) {
        static const char *const vars[] = {"CONTAINER_MCP_TOOLSETS", "CONTAINER_MCP_ALLOWED_MOUNTS",
                                           "CONTAINER_MCP_DEFAULT_MEMORY", "CONTAINER_MCP_READONLY",
                                           "CONTAINER_MCP_MAX_CONTAINERS", "CONTAINER_MCP_AGENT_NAME"};
        for (size_t i = 0; i < ARRAY_SIZE(vars); i++)
                (void)unsetenv(vars[i]);
        cleanup_free char *st = xasprintf("%s/state", tmp);
        (void)setenv("CONTAINER_MCP_STATE_DIR", st, 1);
        (void)unsetenv("CONTAINER_MCP_IMAGE_DIRS");
        (void)state;
        return 0;
}

static void test_sizes(void **state) {
        int64_t v;
        assert_int_equal(cm_parse_size("2g", &v), 0);
        assert_int_equal(v, 2ll << 30);
        assert_int_equal(cm_parse_size("512m", &v), 0);
        assert_int_equal(v, 512ll << 20);
        assert_int_equal(cm_parse_size("1.5G", &v), 0);
        assert_int_equal(v, 3ll << 29);
        assert_int_equal(cm_parse_size("100MiB", &v), 0);
        assert_int_equal(v, 100ll << 20);
        assert_int_equal(cm_parse_size("1024", &v), 0);
        assert_int_equal(v, 1024);
        assert_true(cm_parse_size("lots", &v) < 0);
        assert_true(cm_parse_size("-1g", &v) < 0);
        assert_true(cm_parse_size("1x", &v) < 0);
        assert_true(cm_parse_size("", &v) < 0);
        assert_true(cm_parse_size("1e30g", &v) < 0);
        (void)state;
}

static void test_bools(void **state) {
        bool b;
        assert_int_equal(cm_parse_bool("TRUE", &b), 0);
        assert_true(b);
        assert_int_equal(cm_parse_bool("off", &b), 0);
        assert_false(b);
        assert_true(cm_parse_bool("maybe", &b) < 0);
        (void)state;
}

static void test_defaults(void **state) {
        cm_config c;
        cm_err err = CM_ERR_INIT;
        assert_int_equal(cm_config_load(&c, NULL, &err), 0);
        assert_false(c.readonly);
        assert_false(c.allow_network);
        assert_false(c.allow_unmanaged);
        assert_int_equal(c.max_containers, 10);
        assert_int_equal(c.default_memory, 2ll << 30);
        assert_true(c.default_cpus == 2.0);
        assert_true(cm_toolset_enabled(&c, "containers"));
        assert_false(cm_toolset_enabled(&c, "diagnostics"));
        /* The private scratch dir exists and is private; it holds the
         * server's own copies, so it is not an allowed root (issue 7). */
        struct stat st;
        assert_int_equal(stat(c.scratch_dir, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0700);
        for (size_t i = 0; c.allowed_mounts[i]; i++) {
                assert_string_not_equal(c.allowed_mounts[i], "/");
                assert_null(strstr(c.allowed_mounts[i], "/scratch"));
                assert_null(strstr(c.allowed_mounts[i], c.state_real));
        }
        assert_null(c.image_dirs[0]); /* no directory images unless configured */
        assert_int_equal(c.min_host_port, 1024);
        cm_config_free(&c);
        (void)state;
}

static void test_launch_dir_home_or_root_not_allowed(void **state) {
        cm_config c;
        cm_err err = CM_ERR_INIT;
        char cwd[PATH_MAX];
        assert_non_null(getcwd(cwd, sizeof cwd));
        assert_int_equal(chdir("/"), 0);
        assert_int_equal(cm_config_load(&c, NULL, &err), 0);
        assert_null(c.allowed_mounts[0]);
        cm_config_free(&c);
        (void)setenv("HOME", tmp, 1);
        assert_int_equal(chdir(tmp), 0);
        assert_int_equal(cm_config_load(&c, NULL, &err), 0);
        assert_null(c.allowed_mounts[0]);
        cm_config_free(&c);
        /* nor the state dir or anything in it */
        cleanup_free char *inside = xasprintf("%s/state/scratch", tmp);
        assert_int_equal(chdir(inside), 0);
        assert_int_equal(cm_config_load(&c, NULL, &err), 0);
        assert_null(c.allowed_mounts[0]);
        cm_config_free(&c);
        assert_int_equal(chdir(cwd), 0);
        (void)state;
}

static void test_env_and_errors(void **state) {
        cm_config c;
        cm_err err = CM_ERR_INIT;
        cleanup_free char *link = xasprintf("%s/link", tmp);
        (void)unlink(link);
        assert_int_equal(symlink(tmp, link), 0);
        (void)setenv("CONTAINER_MCP_ALLOWED_MOUNTS", link, 1);
        (void)setenv("CONTAINER_MCP_TOOLSETS", "containers,diagnostics", 1);
        (void)setenv("CONTAINER_MCP_READONLY", "yes", 1);
        assert_int_equal(cm_config_load(&c, NULL, &err), 0);
        assert_string_equal(c.allowed_mounts[0], tmp); /* canonical: the symlink resolved */
        assert_true(c.readonly);
        assert_true(cm_toolset_enabled(&c, "diagnostics"));
        assert_false(cm_toolset_enabled(&c, "web"));
        cm_config_free(&c);

        /* a root inside the state dir is refused at start; so is one for images */
        cleanup_free char *scratch = xasprintf("%s/state/scratch", tmp);
        (void)setenv("CONTAINER_MCP_ALLOWED_MOUNTS", scratch, 1);
        assert_true(cm_config_load(&c, NULL, &err) < 0);
        assert_non_null(strstr(err.msg, "state dir"));
        cm_config_free(&c);
        (void)unsetenv("CONTAINER_MCP_ALLOWED_MOUNTS");
        (void)setenv("CONTAINER_MCP_IMAGE_DIRS", scratch, 1);
        assert_true(cm_config_load(&c, NULL, &err) < 0);
        assert_non_null(strstr(err.msg, "CONTAINER_MCP_IMAGE_DIRS"));
        cm_config_free(&c);
        (void)setenv("CONTAINER_MCP_IMAGE_DIRS", "/", 1);
        assert_true(cm_config_load(&c, NULL, &err) < 0);
        cm_config_free(&c);
        (void)setenv("CONTAINER_MCP_IMAGE_DIRS", link, 1);
        assert_int_equal(cm_config_load(&c, NULL, &err), 0);
        assert_string_equal(c.image_dirs[0], tmp);
        assert_null(c.image_dirs[1]);
        cm_config_free(&c);
        (void)unsetenv("CONTAINER_MCP_IMAGE_DIRS");
        (void)setenv("CONTAINER_MCP_MIN_HOST_PORT", "0", 1);
        assert_true(cm_config_load(&c, NULL, &err) < 0);
        cm_config_free(&c);
        (void)setenv("CONTAINER_MCP_MIN_HOST_PORT", "80", 1);
        assert_int_equal(cm_config_load(&c, NULL, &err), 0);
        assert_int_equal(c.min_host_port, 80);
        cm_config_free(&c);
        (void)unsetenv("CONTAINER_MCP_MIN_HOST_PORT");

        (void)setenv("CONTAINER_MCP_ALLOWED_MOUNTS", "/", 1);
        assert_true(cm_config_load(&c, NULL, &err) < 0);
        assert_non_null(strstr(err.msg, "CONTAINER_MCP_ALLOWED_MOUNTS"));
        cm_config_free(&c);
        (void)setenv("CONTAINER_MCP_ALLOWED_MOUNTS", "/does/not/exist", 1);
        assert_true(cm_config_load(&c, NULL, &err) < 0);
        assert_non_null(strstr(err.msg, "/does/not/exist"));
        cm_config_free(&c);
        (void)unsetenv("CONTAINER_MCP_ALLOWED_MOUNTS");

        (void)setenv("CONTAINER_MCP_TOOLSETS", "containers,bogus", 1);
        assert_true(cm_config_load(&c, NULL, &err) < 0);
        assert_non_null(strstr(err.msg, "bogus"));
        cm_config_free(&c);
        (void)unsetenv("CONTAINER_MCP_TOOLSETS");

        (void)setenv("CONTAINER_MCP_DEFAULT_MEMORY", "lots", 1);
        assert_true(cm_config_load(&c, NULL, &err) < 0);
        assert_non_null(strstr(err.msg, "512m"));
        cm_config_free(&c);
        (void)unsetenv("CONTAINER_MCP_DEFAULT_MEMORY");
        (void)unsetenv("CONTAINER_MCP_READONLY");
        (void)unlink(link);
        (void)state;
}

static void test_env_file(void **state) {
        cm_config c;
        cm_err err = CM_ERR_INIT;
        cleanup_free char *path = xasprintf("%s/env", tmp);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs("# comment\nCONTAINER_MCP_MAX_CONTAINERS=3\nexport CONTAINER_MCP_AGENT_NAME=\"from-file\"\n", f);
        assert_int_equal(fclose(f), 0);
        (void)setenv("CONTAINER_MCP_AGENT_NAME", "from-env", 1); /* the environment wins */
        assert_int_equal(cm_config_load(&c, path, &err), 0);
        assert_int_equal(c.max_containers, 3);
        assert_string_equal(c.agent_name, "from-env");
        cm_config_free(&c);
        f = fopen(path, "w");
        assert_non_null(f);
        fputs("PATH=/evil\n", f); /* only CONTAINER_MCP_* may be set from a file */
        assert_int_equal(fclose(f), 0);
        assert_true(cm_config_load(&c, path, &err) < 0);
        assert_non_null(strstr(err.msg, "line 1"));
        cm_config_free(&c);
        (void)unsetenv("CONTAINER_MCP_MAX_CONTAINERS");
        (void)state;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sizes),
                cmocka_unit_test(test_bools),
                cmocka_unit_test_setup(test_defaults, setup),
                cmocka_unit_test_setup(test_launch_dir_home_or_root_not_allowed, setup),
                cmocka_unit_test_setup(test_env_and_errors, setup),
                cmocka_unit_test_setup(test_env_file, setup),
        };
        TU_RUN_IN_TMP(tmp, tests);
}
