/* A container's record is a file.  Were a sandbox ever to reach the state
 * dir (the policy refuses every mount that is, holds or lies in it), it
 * could rewrite its record to name a host process as its init: the server
 * would then copy that process's root, signal it, or read its /proc.  Here
 * the test rewrites the record itself, pointing it at a process of its own
 * with the right start time, and every operation must leave that process
 * and the host's files alone. */
#include "nt.h"

#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "backend/native/internal.h"

static unsigned long long start_time(pid_t pid) {
        char path[64], buf[1024];
        const char *p;
        unsigned long long start = 0;
        FILE *f;
        size_t n;

        (void)snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        f = fopen(path, "re");
        assert_non_null(f);
        n = fread(buf, 1, sizeof buf - 1, f);
        (void)fclose(f);
        buf[n] = 0;
        p = strrchr(buf, ')');
        assert_non_null(p);
        assert_int_equal(sscanf(p + 2, "%*c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu",
                                &start),
                         1);
        return start;
}

/* Point the record of `id` at pid/start; returns the old values. */
static void rewrite_init(const char *id, json_int_t pid, json_int_t start, json_int_t *old_pid, json_int_t *old_start) {
        cleanup_free char *path = xasprintf("%s/containers/%s/state.json", nt_state_dir, id);
        cleanup_free char *tmp = xasprintf("%s.forged", path);
        json_t *j = json_load_file(path, 0, NULL), *init;
        assert_non_null(j);
        init = json_object_get(j, "init");
        assert_non_null(init);
        if (old_pid)
                *old_pid = json_integer_value(json_object_get(init, "pid"));
        if (old_start)
                *old_start = json_integer_value(json_object_get(init, "start"));
        assert_int_equal(json_object_set_new(init, "pid", json_integer(pid)), 0);
        assert_int_equal(json_object_set_new(init, "start", json_integer(start)), 0);
        assert_int_equal(json_dump_file(j, tmp, JSON_COMPACT), 0);
        assert_int_equal(rename(tmp, path), 0);
        json_decref(j);
}

static bool alive(pid_t pid) {
        return waitpid(pid, NULL, WNOHANG) == 0 && kill(pid, 0) == 0;
}

static void test_forged_init_pid(void **state) {
        char *argv[] = {S("sleep"), S("1000"), NULL};
        cm_run_spec spec = {.image = "host", .argv = argv, .argc = 2, .memory_bytes = 128 << 20, .pids = 64};
        char host_dir[] = "/tmp/cm-records-XXXXXX";
        cm_host_path out = {host_dir, "got"};
        cleanup_free char *got = NULL;
        cm_copy_stats st = {0};
        cm_exec_result r = {0};
        char *true_argv[] = {S("/bin/sh"), S("-c"), S("cat /proc/1/cmdline"), NULL};
        cm_exec_spec es = {.argv = true_argv, .argc = 3, .timeout_ms = 10000};
        cm_err err = CM_ERR_INIT;
        json_int_t real_pid = 0, real_start = 0;
        char *id = NULL;
        pid_t victim;

        assert_non_null(mkdtemp(host_dir));
        assert_int_equal(chmod(host_dir, 0777), 0);
        got = xasprintf("%s/got", host_dir);
        if (nt_b->ops->run(nt_b, &spec, &id, &err) < 0)
                fail_msg("run: %s", err.msg);
        victim = fork();
        assert_true(victim >= 0);
        if (victim == 0) {
                /* gone with the test, whatever happens to it */
                (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
                (void)close(1), (void)close(2);
                for (;;)
                        (void)pause();
        }
        rewrite_init(id, victim, (json_int_t)start_time(victim), &real_pid, &real_start);

        /* copy out of the "container": not the victim's root (the host's) */
        if (nt_b->ops->copy_out(nt_b, id, "/etc/hostname", &out, &st, &err) == 0)
                fail_msg("copy_out through a forged init pid copied %s", got);
        assert_int_equal(access(got, F_OK), -1);
        /* exec: not in the victim's namespaces, and never reported as run */
        if (nt_b->ops->exec(nt_b, id, &es, NULL, &r, &err) == 0)
                assert_null(strstr(r.out ? r.out : "", "pause"));
        cm_exec_result_clear(&r);
        /* stop, stats, remove: the victim is never signalled */
        (void)nt_b->ops->stop(nt_b, id, 1, &err);
        assert_true(alive(victim));
        (void)nt_b->ops->remove(nt_b, id, true, &err);
        assert_true(alive(victim));

        /* the real init is still there: put it back and clean up */
        (void)kill(victim, SIGKILL);
        (void)waitpid(victim, NULL, 0);
        {
                cleanup_free char *dir = xasprintf("%s/containers/%s", nt_state_dir, id);
                if (access(dir, F_OK) == 0) {
                        rewrite_init(id, real_pid, real_start, NULL, NULL);
                        assert_int_equal(nt_b->ops->remove(nt_b, id, true, &err), 0);
                } else if (real_pid > 0) {
                        (void)kill((pid_t)real_pid, SIGKILL); /* reaped by its server, us */
                }
        }
        (void)rmdir(host_dir);
        free(id);
        (void)state;
}

int main(int argc, char **argv) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_forged_init_pid),
        };
        int r;
        nt_setup(argc, argv);
        r = cmocka_run_group_tests(tests, NULL, NULL);
        nt_teardown();
        return r;
}
