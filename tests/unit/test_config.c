/* Configuration: parsing, precedence, and the safe defaults. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"

#include <errno.h>
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
                                           "CONTAINER_MCP_MAX_CONTAINERS", "CONTAINER_MCP_AGENT_NAME",
                                           "CONTAINER_MCP_DEFAULT_CPUS", "CONTAINER_MCP_MAX_MEMORY",
                                           "CONTAINER_MCP_MAX_CPUS", "CONTAINER_MCP_SHARE_CONTAINERS",
                                           "CONTAINER_MCP_SHARED_CONTAINERS", "CONTAINER_MCP_SANDBOX_IMAGE",
                                           "CONTAINER_MCP_SANDBOX_TTL", "CONTAINER_MCP_COMMAND_TIMEOUT_DEFAULT",
                                           "CONTAINER_MCP_COMMAND_TIMEOUT_MAX", "CONTAINER_MCP_PYTHON_MEMORY",
                                           "CONTAINER_MCP_ALLOWED_CONTAINERS"};
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
        /* What strtod would have read: hex, exponents, inf, nan, signs, space. */
        assert_true(cm_parse_size("0x10m", &v) < 0);
        assert_true(cm_parse_size("1e3", &v) < 0);
        assert_true(cm_parse_size("inf", &v) < 0);
        assert_true(cm_parse_size("nan", &v) < 0);
        assert_true(cm_parse_size("+1g", &v) < 0);
        assert_true(cm_parse_size(" 1g", &v) < 0);
        assert_true(cm_parse_size("1.g", &v) < 0);
        assert_true(cm_parse_size("1ib", &v) < 0);
        assert_true(cm_parse_size("1gg", &v) < 0);
        /* Overflow is a range error, never a wrapped or saturated value. */
        assert_int_equal(cm_parse_size("99999999999999999999t", &v), -ERANGE);
        assert_int_equal(cm_parse_size("99999999999999999999", &v), -ERANGE);
        assert_int_equal(cm_parse_size("8388608t", &v), -ERANGE); /* 2^63 exactly */
        assert_int_equal(cm_parse_size("8388607.99999999t", &v), 0);
        assert_true(v > 0);
        assert_int_equal(cm_parse_size("9223372036854775807", &v), 0);
        assert_int_equal(v, INT64_MAX);
        assert_int_equal(cm_parse_size("9223372036854775808", &v), -ERANGE);
        assert_int_equal(cm_parse_size("1t", &v), 0);
        assert_int_equal(v, 1ll << 40);
        assert_int_equal(cm_parse_size("0.5k", &v), 0);
        assert_int_equal(v, 512);
        (void)state;
}

static void test_format_size(void **state) {
        char b[32];
        cm_format_size(1000, b);
        assert_string_equal(b, "1000");
        cm_format_size(2ll << 30, b);
        assert_string_equal(b, "2g");
        cm_format_size(24683548ll * 1024, b);
        assert_string_equal(b, "23.5g");
        cm_format_size(1ll << 40, b);
        assert_string_equal(b, "1t");
        (void)state;
}

/* Ceilings default to the host; a default above an explicit ceiling is an
 * error at start, the built-in default shrinks to fit. */
static void test_ceilings(void **state) {
        cm_config c;
        cm_err err = CM_ERR_INIT;
        assert_int_equal(cm_config_load(&c, NULL, &err), 0);
        assert_int_equal(c.max_memory, (int64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE));
        assert_true(c.max_cpus == (double)sysconf(_SC_NPROCESSORS_ONLN));
        assert_true(c.default_cpus == (c.max_cpus < 2 ? c.max_cpus : 2));
        cm_config_free(&c);

        (void)setenv("CONTAINER_MCP_MAX_MEMORY", "1g", 1);
        (void)setenv("CONTAINER_MCP_MAX_CPUS", "0.5", 1);
        assert_int_equal(cm_config_load(&c, NULL, &err), 0);
        assert_int_equal(c.max_memory, 1ll << 30);
        assert_int_equal(c.default_memory, 1ll << 30); /* the built-in 2g, clamped */
        assert_true(c.max_cpus == 0.5);
        assert_true(c.default_cpus == 0.5);
        cm_config_free(&c);

        (void)setenv("CONTAINER_MCP_DEFAULT_MEMORY", "2g", 1);
        assert_true(cm_config_load(&c, NULL, &err) < 0);
        assert_non_null(strstr(err.msg, "CONTAINER_MCP_DEFAULT_MEMORY=2g is over the ceiling of 1g"));
        assert_non_null(strstr(err.msg, "CONTAINER_MCP_MAX_MEMORY"));
        cm_config_free(&c);
        (void)setenv("CONTAINER_MCP_DEFAULT_MEMORY", "1g", 1); /* at the ceiling: fine */
        (void)setenv("CONTAINER_MCP_DEFAULT_CPUS", "1", 1);
        assert_true(cm_config_load(&c, NULL, &err) < 0);
        assert_non_null(strstr(err.msg, "CONTAINER_MCP_DEFAULT_CPUS=1 is over the ceiling of 0.5"));
        assert_non_null(strstr(err.msg, "CONTAINER_MCP_MAX_CPUS"));
        cm_config_free(&c);
        (void)setenv("CONTAINER_MCP_DEFAULT_CPUS", "0.5", 1);
        assert_int_equal(cm_config_load(&c, NULL, &err), 0);
        cm_config_free(&c);

        static const char *const bad_mem[] = {"lots", "1m", "-1g", "99999999999999999999t", "0x40000000"};
        for (size_t i = 0; i < ARRAY_SIZE(bad_mem); i++) {
                (void)setenv("CONTAINER_MCP_MAX_MEMORY", bad_mem[i], 1);
                assert_true(cm_config_load(&c, NULL, &err) < 0);
                assert_non_null(strstr(err.msg, "CONTAINER_MCP_MAX_MEMORY"));
                cm_config_free(&c);
        }
        (void)unsetenv("CONTAINER_MCP_MAX_MEMORY");
        static const char *const bad_cpus[] = {"0", "0.001", "-1", "1025", "inf", "nan", "0x2", "1e2", "two"};
        for (size_t i = 0; i < ARRAY_SIZE(bad_cpus); i++) {
                (void)setenv("CONTAINER_MCP_MAX_CPUS", bad_cpus[i], 1);
                assert_true(cm_config_load(&c, NULL, &err) < 0);
                assert_non_null(strstr(err.msg, "CONTAINER_MCP_MAX_CPUS"));
                cm_config_free(&c);
        }
        (void)state;
}

static void test_sharing(void **state) {
        cm_config c;
        cm_err err = CM_ERR_INIT;
        assert_int_equal(cm_config_load(&c, NULL, &err), 0);
        assert_false(c.share_containers); /* sessions are separate by default */
        assert_null(c.shared_containers[0]);
        cm_config_free(&c);
        (void)setenv("CONTAINER_MCP_SHARE_CONTAINERS", "1", 1);
        (void)setenv("CONTAINER_MCP_SHARED_CONTAINERS", "db, cache,,3f2a", 1);
        assert_int_equal(cm_config_load(&c, NULL, &err), 0);
        assert_true(c.share_containers);
        assert_string_equal(c.shared_containers[0], "db");
        assert_string_equal(c.shared_containers[1], "cache");
        assert_string_equal(c.shared_containers[2], "3f2a");
        assert_null(c.shared_containers[3]);
        cm_config_free(&c);
        (void)setenv("CONTAINER_MCP_SHARE_CONTAINERS", "sometimes", 1);
        assert_true(cm_config_load(&c, NULL, &err) < 0);
        assert_non_null(strstr(err.msg, "CONTAINER_MCP_SHARE_CONTAINERS"));
        cm_config_free(&c);
        (void)state;
}

/* The codex tools' allowlist (issue 11): ids and names, comma- or
 * space-separated; an entry that cannot name a container (a flag, a path,
 * a shell word) stops the server, naming the variable. */
static void test_allowed_containers(void **state) {
        static const char *const bad[] = {"-x", "--privileged", "../x", "a b;c", "/etc", "web$(id)", ".hidden"};
        cm_config c;
        cm_err err = CM_ERR_INIT;
        assert_int_equal(cm_config_load(&c, NULL, &err), 0);
        assert_null(c.allowed_containers[0]);
        cm_config_free(&c);
        (void)setenv("CONTAINER_MCP_ALLOWED_CONTAINERS", "simjoin, 3f2a9c0d11e4,,my_db.1-a", 1);
        assert_int_equal(cm_config_load(&c, NULL, &err), 0);
        assert_string_equal(c.allowed_containers[0], "simjoin");
        assert_string_equal(c.allowed_containers[1], "3f2a9c0d11e4");
        assert_string_equal(c.allowed_containers[2], "my_db.1-a");
        assert_null(c.allowed_containers[3]);
        cm_config_free(&c);
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                cleanup_free char *v = xasprintf("ok,%s", bad[i]);
                (void)setenv("CONTAINER_MCP_ALLOWED_CONTAINERS", v, 1);
                err = (cm_err)CM_ERR_INIT;
                assert_true(cm_config_load(&c, NULL, &err) < 0);
                assert_non_null(strstr(err.msg, "CONTAINER_MCP_ALLOWED_CONTAINERS"));
                cm_config_free(&c);
                assert_false(cm_config_container_ref_ok(bad[i]));
        }
        (void)unsetenv("CONTAINER_MCP_ALLOWED_CONTAINERS");
        (void)state;
}

/* The session sandbox's settings (issue 10): the seed's defaults; the
 * Python memory as a size, a bare number being MiB as the seed's
 * PYTHON_MEMORY_LIMIT; a default timeout over the maximum refused. */
static void test_sandbox(void **state) {
        cm_config c;
        cm_err err = CM_ERR_INIT;
        static const char *const bad_mem[] = {"15m", "lots", "-1", "99999999999999999999"};
        assert_int_equal(cm_config_load(&c, NULL, &err), 0);
        assert_string_equal(c.sandbox_image, "host");
        assert_int_equal(c.sandbox_ttl_sec, 1800);
        assert_int_equal(c.command_timeout_sec, 30);
        assert_int_equal(c.command_timeout_max_sec, 120);
        assert_int_equal(c.python_memory, 256 << 20);
        cm_config_free(&c);
        (void)setenv("CONTAINER_MCP_SANDBOX_TTL", "0", 1);
        (void)setenv("CONTAINER_MCP_PYTHON_MEMORY", "512", 1);
        (void)setenv("CONTAINER_MCP_COMMAND_TIMEOUT_MAX", "10", 1);
        (void)setenv("CONTAINER_MCP_COMMAND_TIMEOUT_DEFAULT", "10", 1);
        assert_int_equal(cm_config_load(&c, NULL, &err), 0);
        assert_int_equal(c.sandbox_ttl_sec, 0);
        assert_int_equal(c.python_memory, 512 << 20);
        cm_config_free(&c);
        (void)setenv("CONTAINER_MCP_PYTHON_MEMORY", "1g", 1);
        assert_int_equal(cm_config_load(&c, NULL, &err), 0);
        assert_int_equal(c.python_memory, 1 << 30);
        cm_config_free(&c);
        for (size_t i = 0; i < ARRAY_SIZE(bad_mem); i++) {
                (void)setenv("CONTAINER_MCP_PYTHON_MEMORY", bad_mem[i], 1);
                assert_true(cm_config_load(&c, NULL, &err) < 0);
                assert_non_null(strstr(err.msg, "CONTAINER_MCP_PYTHON_MEMORY"));
                cm_config_free(&c);
        }
        (void)unsetenv("CONTAINER_MCP_PYTHON_MEMORY");
        (void)setenv("CONTAINER_MCP_COMMAND_TIMEOUT_DEFAULT", "11", 1);
        assert_true(cm_config_load(&c, NULL, &err) < 0);
        assert_non_null(strstr(err.msg, "CONTAINER_MCP_COMMAND_TIMEOUT_MAX"));
        cm_config_free(&c);
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
        assert_int_equal(c.default_memory, c.max_memory < (2ll << 30) ? c.max_memory : 2ll << 30);
        assert_true(c.default_cpus == (c.max_cpus < 2 ? c.max_cpus : 2.0));
        assert_true(cm_toolset_enabled(&c, "containers"));
        assert_false(cm_toolset_enabled(&c, "diagnostics"));
        /* The private scratch dir exists and is private; it holds the
         * server's own copies, so it is not an allowed root (issue 7). */
        struct stat st;
        assert_int_equal(stat(c.scratch_dir, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0700);
        /* the state dir the config made is private too */
        assert_int_equal(stat(c.state_dir, &st), 0);
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

/* CONTAINER_MCP_ALLOWED_COMMANDS: names only, each checked at start; a
 * bad one stops the server naming the variable and the entry. */
static void test_allowed_commands(void **state) {
        static const char *const bad[] = {"ls,/bin/rm", "ls,rm -rf", "ls,,cat", "ls,", ",ls", "ls;rm", "ls,$X",
                                          "ls,env",     "ls,bash",   "ls,if",   "-x", "ls,a*", "ls,{", " , "};
        cm_config c;
        cm_err err = CM_ERR_INIT;
        (void)unsetenv("CONTAINER_MCP_ALLOWED_COMMANDS");
        assert_int_equal(cm_config_load(&c, NULL, &err), 0);
        assert_null(c.allowed_commands); /* unset: no restriction */
        assert_int_equal(c.n_allowed_commands, 0);
        cm_config_free(&c);
        (void)setenv("CONTAINER_MCP_ALLOWED_COMMANDS", "ls,cat, grep ,[,python3.12,g++", 1);
        assert_int_equal(cm_config_load(&c, NULL, &err), 0);
        assert_int_equal(c.n_allowed_commands, 6);
        assert_string_equal(c.allowed_commands[0], "ls");
        assert_string_equal(c.allowed_commands[2], "grep");
        assert_string_equal(c.allowed_commands[3], "[");
        assert_string_equal(c.allowed_commands[5], "g++");
        assert_null(c.allowed_commands[6]);
        cm_config_free(&c);
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                cm_err e = CM_ERR_INIT;
                (void)setenv("CONTAINER_MCP_ALLOWED_COMMANDS", bad[i], 1);
                if (cm_config_load(&c, NULL, &e) == 0)
                        fail_msg("CONTAINER_MCP_ALLOWED_COMMANDS=%s was accepted", bad[i]);
                assert_non_null(strstr(e.msg, "CONTAINER_MCP_ALLOWED_COMMANDS"));
                cm_config_free(&c);
        }
        (void)unsetenv("CONTAINER_MCP_ALLOWED_COMMANDS");
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
                cmocka_unit_test(test_format_size),
                cmocka_unit_test_setup(test_ceilings, setup),
                cmocka_unit_test_setup(test_sharing, setup),
                cmocka_unit_test_setup(test_allowed_containers, setup),
                cmocka_unit_test_setup(test_defaults, setup),
                cmocka_unit_test_setup(test_launch_dir_home_or_root_not_allowed, setup),
                cmocka_unit_test_setup(test_env_and_errors, setup),
                cmocka_unit_test_setup(test_env_file, setup),
                cmocka_unit_test_setup(test_sandbox, setup),
                cmocka_unit_test_setup(test_allowed_commands, setup),
        };
        TU_RUN_IN_TMP(tmp, tests);
}
