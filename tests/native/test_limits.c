/* Limits: a fork bomb stops at the pids limit, a memory bomb dies at the
 * memory limit, a disk fill stops at the tmpfs size, a CPU hog gets its
 * share; the server (this process) survives each.  With cgroups (root here)
 * and with the rlimit fallback (unprivileged without a delegated cgroup, or
 * CONTAINER_MCP_NATIVE_CGROUP=none). */
#include <jansson.h>

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
        /* it returned at the timeout, not when the sleep 30 would end (a
           bound the command sets, not the machine's speed) */
        assert_true(r.duration_ms < 30000);
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

/* A cgroup file's contents, trimmed; NULL when it cannot be read. */
static char *cg_read(const char *dir, const char *file) {
        cleanup_free char *path = xasprintf("%s/%s", dir, file);
        char buf[512];
        FILE *f = fopen(path, "re");
        size_t n;
        if (!f)
                return NULL;
        n = fread(buf, 1, sizeof buf - 1, f);
        (void)fclose(f);
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
                n--;
        buf[n] = '\0';
        return xstrdup(buf);
}

/* "nr_throttled N" of cpu.stat (v1 and v2 alike). */
static long nr_throttled(const char *dir) {
        cleanup_free char *stat = cg_read(dir, "cpu.stat");
        const char *p = stat ? strstr(stat, "nr_throttled ") : NULL;
        return p ? strtol(p + 13, NULL, 10) : -1;
}

/* With cpus=0.5 the kernel holds the share: the cgroup's quota reads back
 * as half of its period, and a busy loop in it is throttled (cpu.stat's
 * nr_throttled grows).  Not a CPU/wall ratio, which a loaded machine can
 * push either way; the measured share is in bench_native's "cpu" mode. */
static void test_cpu_limit(void **state) {
        char *argv[] = {S("/bin/sh"), S("-c"), S("while :; do :; done"), NULL};
        cm_run_spec spec = {.image = "host", .argv = argv, .argc = 3, .cpus = 0.5};
        cm_err err = CM_ERR_INIT;
        cleanup_free char *id = NULL, *text = NULL, *max = NULL, *quota = NULL, *period = NULL;
        json_t *j, *cg, *dirs;
        const char *mode, *dir;
        long throttled = 0;

        if (!nt_cgroups())
                skip_because("no cgroups here, and no rlimit expresses a CPU share");
        if (nt_b->ops->run(nt_b, &spec, &id, &err) < 0 || nt_b->ops->inspect(nt_b, id, &text, &err) < 0)
                fail_msg("run or inspect: %s", err.msg);
        j = json_loads(text, 0, NULL);
        assert_non_null(j);
        cg = json_object_get(j, "cgroup");
        mode = json_string_value(json_object_get(cg, "mode"));
        dirs = json_object_get(cg, "dirs");
        dir = json_string_value(json_object_get(dirs, "cpu"));
        if (!dir) { /* v2: one directory for every controller */
                const char *k;
                json_t *v;
                json_object_foreach (dirs, k, v) {
                        dir = json_string_value(v);
                        break;
                }
        }
        if (!dir)
                fail_msg("no cgroup dir for the CPU share: %s", text);
        if (mode && strcmp(mode, "v1") == 0) {
                quota = cg_read(dir, "cpu.cfs_quota_us");
                period = cg_read(dir, "cpu.cfs_period_us");
                assert_non_null(quota);
                assert_non_null(period);
                assert_int_equal(strtol(quota, NULL, 10) * 2, strtol(period, NULL, 10));
        } else {
                max = cg_read(dir, "cpu.max");
                assert_non_null(max);
                assert_string_equal(max, "50000 100000");
        }
        /* the busy loop hits the quota: poll, with a generous deadline */
        for (int i = 0; i < 600 && (throttled = nr_throttled(dir)) <= 0; i++)
                (void)usleep(100 * 1000);
        if (throttled <= 0)
                fail_msg("the busy loop was never throttled in 60 s (%s/cpu.stat: nr_throttled %ld)", dir, throttled);
        json_decref(j);
        assert_int_equal(nt_b->ops->remove(nt_b, id, true, &err), 0);
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
