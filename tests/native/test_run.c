/* Run-to-completion on the built-in "host" image: the seed's aha, exit
 * codes, streams, env, workdir, errors that say what to do, the output cap,
 * timeouts and cancellation killing the whole tree. */
#include "nt.h"

#include <sys/timerfd.h>

static void test_python_sum(void **state) {
        cm_exec_result r;
        nt_py("print(sum(range(1000)))", NULL, &r);
        assert_int_equal(r.exit_code, 0);
        assert_string_equal(r.out, "499500\n");
        assert_int_equal(r.err_len, 0);
        assert_false(r.truncated);
        assert_false(r.timed_out);
        cm_exec_result_clear(&r);
        (void)state;
}

static void test_exit_codes_and_streams(void **state) {
        cm_exec_result r;
        nt_sh("echo out; echo err >&2; exit 3", &r);
        assert_int_equal(r.exit_code, 3);
        assert_string_equal(r.out, "out\n");
        assert_string_equal(r.err, "err\n");
        cm_exec_result_clear(&r);
        nt_sh("kill -TERM $$", &r);
        assert_int_equal(r.exit_code, 128 + 15);
        cm_exec_result_clear(&r);
        (void)state;
}

static void test_identity_env_workdir(void **state) {
        cm_kv env[] = {{"FOO", "bar baz"}, {"PATH", "/usr/bin:/bin"}};
        char *argv[] = {S("/bin/sh"), S("-c"), S("echo $FOO; echo $PATH; pwd; id -u; hostname; echo $HOME"), NULL};
        cm_run_spec spec = {.argv = argv, .env = env, .n_env = 2, .name = "box-1", .workdir = "/tmp"};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;
        assert_int_equal(nt_run_spec(&spec, &r, &err), 0);
        assert_string_equal(r.out, "bar baz\n/usr/bin:/bin\n/tmp\n0\nbox-1\n/root\n");
        cm_exec_result_clear(&r);
        (void)state;
}

static void test_errors_say_what_to_do(void **state) {
        char *argv[] = {S("no-such-command"), NULL};
        char *argv2[] = {S("true"), NULL};
        cm_run_spec spec = {.argv = argv};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;

        assert_true(nt_run_spec(&spec, &r, &err) < 0);
        assert_int_equal(err.code, ENOENT);
        assert_non_null(strstr(err.msg, "no-such-command"));
        assert_non_null(strstr(err.msg, "not in the image"));

        spec = (cm_run_spec){.argv = argv2, .workdir = "/no/such/dir"};
        assert_true(nt_run_spec(&spec, &r, &err) < 0);
        assert_non_null(strstr(err.msg, "working directory"));

        spec = (cm_run_spec){.argv = argv2, .image = "nonexistent-image"};
        assert_true(nt_run_spec(&spec, &r, &err) < 0);
        assert_non_null(strstr(err.msg, "host"));

        spec = (cm_run_spec){.argv = argv2, .name = "-rf"};
        assert_true(nt_run_spec(&spec, &r, &err) < 0);
        assert_non_null(strstr(err.msg, "not valid"));
        (void)state;
}

static void test_output_cap(void **state) {
        cm_run_spec spec = {.output_cap = 1000, .timeout_ms = 20000};
        cm_exec_result r;
        nt_py("import sys; sys.stdout.write('x' * 5000000); sys.stderr.write('y' * 10)", &spec, &r);
        assert_int_equal(r.exit_code, 0);
        assert_int_equal(r.out_len, 1000);
        assert_int_equal(strlen(r.out), 1000);
        assert_int_equal(r.err_len, 10);
        assert_true(r.truncated);
        cm_exec_result_clear(&r);
        /* the default cap: 1 MiB */
        nt_py("import sys; sys.stdout.write('x' * 3000000)", NULL, &r);
        assert_int_equal(r.out_len, 1 << 20);
        assert_true(r.truncated);
        cm_exec_result_clear(&r);
        (void)state;
}

/* A sleep past its timeout is killed with its children: the run returns
 * at the timeout, not when the grandchildren would have finished.  The
 * timeout leaves the shell 3 s to print "started" (300 ms was not enough
 * in the qemu VM on a loaded host); the sleeps' 60 s stay far beyond it. */
static void test_timeout_kills_tree(void **state) {
        char *argv[] = {S("/bin/sh"), S("-c"), S("(sleep 60; echo late) & sleep 60 & echo started; wait"), NULL};
        cm_run_spec spec = {.argv = argv, .timeout_ms = 3000};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;
        assert_int_equal(nt_run_spec(&spec, &r, &err), 0);
        assert_true(r.timed_out);
        assert_int_equal(r.exit_code, 137);
        assert_string_equal(r.out, "started\n");
        /* not before the timeout, and without waiting for the sleeps of 60 s
           (a bound the command sets, not the machine's speed) */
        assert_true(r.duration_ms >= 3000 && r.duration_ms < 60000);
        cm_exec_result_clear(&r);
        (void)state;
}

static void test_cancel(void **state) {
        char *argv[] = {S("sleep"), S("60"), NULL};
        cm_run_spec spec = {.image = "host", .argv = argv, .argc = 2};
        int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
        struct itimerspec its = {.it_value = {0, 200 * 1000000L}};
        cm_cancel cancel = {tfd};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;

        assert_true(tfd >= 0);
        assert_int_equal(timerfd_settime(tfd, 0, &its, NULL), 0); /* "cancelled" in 200 ms */
        assert_true(nt_b->ops->run_wait(nt_b, &spec, &cancel, &r, &err) < 0);
        assert_int_equal(err.code, ECANCELED);
        (void)close(tfd);
        (void)state;
}

static void test_stdin_is_empty_and_no_leaked_fds(void **state) {
        cm_exec_result r;
        /* only 0, 1, 2 (and ls's own directory fd) are open */
        nt_sh("cat; ls /proc/self/fd | tr '\\n' ' '", &r);
        assert_int_equal(r.exit_code, 0);
        assert_string_equal(r.out, "0 1 2 3 ");
        cm_exec_result_clear(&r);
        (void)state;
}

/* An image that is a root file system in a directory: the sandbox writes
 * to an overlay, never to the image. */
static void test_dir_image(void **state) {
        cleanup_free char *img = xasprintf("%s/img", nt_state_dir);
        cleanup_free char *make = xasprintf(
                "set -e; mkdir -p %s/bin; cp /bin/dash %s/bin/sh; cp /bin/cat %s/bin/cat; "
                "for f in $(ldd /bin/dash /bin/cat | grep -o '/[^ ]*\\.so[^ ]*'); do cp --parents $f %s; done",
                img, img, img, img);
        cleanup_free char *probe = xasprintf("%s/x", img);
        char *argv[] = {S("sh"), S("-c"),
                        S("echo hi > /x; cat /x; cat /etc/hostname; echo w > /workspace/w; "
                          "cat /workspace/w; test -e /usr/bin/python3 || echo no-host-usr"),
                        NULL};
        cm_run_spec spec = {.image = img, .argv = argv, .name = "imgbox"};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;

        assert_int_equal(system(make), 0);
        if (nt_run_spec(&spec, &r, &err) < 0)
                fail_msg("run_wait on a directory image: %s", err.msg);
        assert_string_equal(r.out, "hi\nimgbox\nw\nno-host-usr\n");
        assert_int_equal(access(probe, F_OK), -1); /* the image is untouched */
        cm_exec_result_clear(&r);

        spec.image = "/";
        assert_true(nt_run_spec(&spec, &r, &err) < 0);
        assert_non_null(strstr(err.msg, "cannot be an image"));
        (void)state;
}

static void test_nothing_left_behind(void **state) {
        cm_container_info *v = NULL;
        size_t n = 99;
        cm_err err = CM_ERR_INIT;
        cleanup_free char *dir = xasprintf("%s/containers", nt_state_dir);
        cleanup_free char *cmd = xasprintf("test ! -e %s || test -z \"$(ls -A %s)\"", dir, dir);
        assert_int_equal(nt_b->ops->list(nt_b, true, &v, &n, &err), 0);
        assert_int_equal(n, 0);
        free(v);
        assert_int_equal(system(cmd), 0);
        (void)state;
}

int main(int argc, char **argv) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_python_sum),
                cmocka_unit_test(test_exit_codes_and_streams),
                cmocka_unit_test(test_identity_env_workdir),
                cmocka_unit_test(test_errors_say_what_to_do),
                cmocka_unit_test(test_output_cap),
                cmocka_unit_test(test_timeout_kills_tree),
                cmocka_unit_test(test_cancel),
                cmocka_unit_test(test_stdin_is_empty_and_no_leaked_fds),
                cmocka_unit_test(test_dir_image),
                cmocka_unit_test(test_nothing_left_behind),
        };
        int r;
        nt_setup(argc, argv);
        r = cmocka_run_group_tests(tests, NULL, NULL);
        nt_teardown();
        return r;
}
