/* Limits: a fork bomb stops at the pids limit, a memory bomb dies at the
 * memory limit, a disk fill stops at the tmpfs size, a CPU hog gets its
 * share; the server (this process) survives each.  With cgroups (root here)
 * and with the rlimit fallback (unprivileged without a delegated cgroup, or
 * CONTAINER_MCP_NATIVE_CGROUP=none). */
#include "nt.h"

static bool root_without_cgroups(void) { return geteuid() == 0 && !nt_cgroups(); }

/* Processes are counted until fork fails: it must fail before the limit. */
static void test_pids_limit(void **state) {
        cm_run_spec spec = {.pids = 32, .timeout_ms = 20000};
        cm_exec_result r;
        if (root_without_cgroups())
                skip_because("root without cgroups: RLIMIT_NPROC, the fallback, does not bind real root");
        nt_py("import os, errno, time\n"
              "n = 0\n"
              "while n < 200:\n"
              "    try:\n"
              "        pid = os.fork()\n"
              "    except OSError as e:\n"
              "        print('fork failed', errno.errorcode[e.errno]); break\n"
              "    if pid == 0:\n"
              "        time.sleep(30); os._exit(0)\n"
              "    n += 1\n"
              "print('forked', n)\n",
              &spec, &r);
        assert_int_equal(r.exit_code, 0);
        assert_non_null(strstr(r.out, "fork failed EAGAIN"));
        {
                int n = atoi(strstr(r.out, "forked ") + 7);
                assert_true(n > 0 && n < 32);
        }
        cm_exec_result_clear(&r);
        (void)state;
}

/* The classic shell fork bomb: contained, then killed at the timeout with
 * everything it made. */
static void test_fork_bomb(void **state) {
        char *argv[] = {S("/bin/bash"), S("-c"), S("b() { b | b & }; b; sleep 30"), NULL};
        cm_run_spec spec = {.argv = argv, .pids = 64, .timeout_ms = 1500};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;
        if (root_without_cgroups())
                skip_because("root without cgroups: RLIMIT_NPROC, the fallback, does not bind real root");
        assert_int_equal(nt_run_spec(&spec, &r, &err), 0);
        assert_true(r.timed_out);
        assert_true(r.duration_ms < 10000);
        cm_exec_result_clear(&r);
        /* and the next sandbox works */
        nt_sh("echo alive", &r);
        assert_string_equal(r.out, "alive\n");
        cm_exec_result_clear(&r);
        (void)state;
}

static void test_memory_limit(void **state) {
        cm_run_spec spec = {.memory_bytes = 64 << 20, .timeout_ms = 20000};
        cm_exec_result r;
        nt_py("b = bytearray(512 << 20)\n"
              "for i in range(0, len(b), 4096): b[i] = 1\n"
              "print('allocated')\n",
              &spec, &r);
        assert_null(strstr(r.out, "allocated"));
        /* cgroup: the OOM killer's SIGKILL; rlimit: MemoryError */
        if (nt_cgroups())
                assert_int_equal(r.exit_code, 137);
        else
                assert_int_not_equal(r.exit_code, 0);
        cm_exec_result_clear(&r);
        /* within the limit, fine */
        spec = (cm_run_spec){.memory_bytes = 256 << 20, .timeout_ms = 20000};
        nt_py("b = bytearray(32 << 20)\nprint('ok')\n", &spec, &r);
        assert_string_equal(r.out, "ok\n");
        cm_exec_result_clear(&r);
        (void)state;
}

static void test_tmpfs_fill(void **state) {
        char *argv[] = {S("/bin/sh"), S("-c"),
                        S("for d in /tmp /workspace /dev/shm; do dd if=/dev/zero of=$d/fill bs=1M count=64 2>&1 | "
                          "grep -o 'No space left' ; stat -c %s $d/fill; rm $d/fill; done"),
                        NULL};
        cm_run_spec spec = {.argv = argv, .tmpfs_bytes = 8 << 20, .timeout_ms = 20000};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;
        char *p;
        assert_int_equal(nt_run_spec(&spec, &r, &err), 0);
        p = r.out;
        for (int i = 0; i < 3; i++) {
                long size;
                assert_int_equal(strncmp(p, "No space left\n", 14), 0);
                p += 14;
                size = strtol(p, &p, 10);
                assert_true(size > 0 && size <= (8 << 20));
                p++;
        }
        cm_exec_result_clear(&r);
        (void)state;
}

/* With cpus=0.5, a busy loop gets about half a CPU: measured as CPU time
 * over wall time, with room for scheduling noise. */
static void test_cpu_limit(void **state) {
        cm_run_spec spec = {.cpus = 0.5, .timeout_ms = 20000};
        cm_exec_result r;
        double ratio;
        if (!nt_cgroups())
                skip_because("no cgroups here, and no rlimit expresses a CPU share");
        nt_py("import time\n"
              "w0, c0 = time.monotonic(), time.process_time()\n"
              "while time.monotonic() - w0 < 1.0: pass\n"
              "print((time.process_time() - c0) / (time.monotonic() - w0))\n",
              &spec, &r);
        ratio = strtod(r.out, NULL);
        assert_true(ratio > 0.2 && ratio < 0.75);
        cm_exec_result_clear(&r);
        (void)state;
}

int main(int argc, char **argv) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_pids_limit),   cmocka_unit_test(test_fork_bomb),
                cmocka_unit_test(test_memory_limit), cmocka_unit_test(test_tmpfs_fill),
                cmocka_unit_test(test_cpu_limit),
        };
        int r;
        nt_setup(argc, argv);
        r = cmocka_run_group_tests(tests, NULL, NULL);
        nt_teardown();
        return r;
}
