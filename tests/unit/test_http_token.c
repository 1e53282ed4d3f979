/* The generated HTTP token file (issue 7, point 8): what it accepts, how it
 * is created, and what it refuses to use. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transport/http_token.h"

static char dir[64];
static char file[96];

static int setup(void **state) {
        (void)state;
        (void)snprintf(dir, sizeof dir, "/tmp/cm-token-XXXXXX");
        if (!mkdtemp(dir))
                return -1;
        (void)snprintf(file, sizeof file, "%s/%s", dir, CM_HTTP_TOKEN_FILE);
        return 0;
}

static int teardown(void **state) {
        char cmd[128];
        (void)state;
        (void)snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        return system(cmd) == 0 ? 0 : -1;
}

static int load(char **token, bool *created, cm_err *err) {
        char *path = NULL;
        int rc = cm_http_token_load(dir, token, &path, created, err);
        if (rc == 0) {
                assert_string_equal(path, file);
                free(path);
        }
        return rc;
}

static void write_file(const char *text, mode_t mode) {
        int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        assert_int_equal(fchmod(fd, mode), 0);
        (void)close(fd);
}

static void test_valid(void **state) {
        (void)state;
        assert_true(cm_http_token_valid("0123456789abcdef0123456789abcdef", 32));
        assert_true(cm_http_token_valid("0123456789abcdef0123456789abcdef\n", 33));
        assert_true(cm_http_token_valid("AbC-._~+/0123456789abcdef01234567==", 35));
        assert_false(cm_http_token_valid("short", 5));
        assert_false(cm_http_token_valid("", 0));
        assert_false(cm_http_token_valid("0123456789abcdef 123456789abcdef0", 33));
        assert_false(cm_http_token_valid("0123456789abcdef\n123456789abcdef0", 33));
        assert_false(cm_http_token_valid("=123456789abcdef0123456789abcdef0", 33));
        assert_false(cm_http_token_valid("0123456789abcdef0123456789abcde=f", 33));
}

static void test_create_then_reuse(void **state) {
        char *t1 = NULL, *t2 = NULL;
        bool created = false;
        struct stat st;
        cm_err err = CM_ERR_INIT;
        (void)state;
        assert_int_equal(load(&t1, &created, &err), 0);
        assert_true(created);
        assert_int_equal(strlen(t1), 2 * CM_HTTP_TOKEN_BYTES);
        assert_int_equal(lstat(file, &st), 0);
        assert_true(S_ISREG(st.st_mode));
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(st.st_uid, geteuid());
        assert_int_equal(load(&t2, &created, &err), 0);
        assert_false(created);
        assert_string_equal(t1, t2);
        free(t1);
        free(t2);
}

static void test_symlink_refused(void **state) {
        char *t = NULL, target[128];
        bool created;
        cm_err err = CM_ERR_INIT;
        struct stat st;
        (void)state;
        (void)snprintf(target, sizeof target, "%s/target", dir);
        assert_int_equal(symlink(target, file), 0);
        assert_true(load(&t, &created, &err) < 0);
        assert_non_null(strstr(err.msg, "symbolic link"));
        assert_int_equal(lstat(target, &st), -1); /* nothing written through it */
        assert_null(t);
}

static void test_loose_file_refused(void **state) {
        char *t = NULL;
        bool created;
        cm_err err = CM_ERR_INIT;
        (void)state;
        write_file("0123456789abcdef0123456789abcdef\n", 0640);
        assert_true(load(&t, &created, &err) < 0);
        assert_non_null(strstr(err.msg, "mode 0640"));
        write_file("too short\n", 0600);
        assert_true(load(&t, &created, &err) < 0);
        assert_non_null(strstr(err.msg, "no valid token"));
        assert_int_equal(unlink(file), 0);
        assert_int_equal(mkdir(file, 0700), 0);
        assert_true(load(&t, &created, &err) < 0);
        assert_non_null(strstr(err.msg, "not a regular file"));
        assert_null(t);
}

static void test_open_state_dir_refused(void **state) {
        char *t = NULL;
        bool created;
        cm_err err = CM_ERR_INIT;
        (void)state;
        assert_int_equal(chmod(dir, 0777), 0);
        assert_true(load(&t, &created, &err) < 0);
        assert_non_null(strstr(err.msg, "CONTAINER_MCP_STATE_DIR"));
        assert_int_equal(access(file, F_OK), -1);
        assert_null(t);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_valid),
                cmocka_unit_test_setup_teardown(test_create_then_reuse, setup, teardown),
                cmocka_unit_test_setup_teardown(test_symlink_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_loose_file_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_open_state_dir_refused, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
