/* Detached containers: run, list, inspect, exec (stdin, env, workdir,
 * timeouts killing the exec's tree, background processes outliving it),
 * logs, stats, stop, remove, and what the state dir and cgroups hold
 * afterwards.  Waiting is on pidfds and FIFOs, never on sleeps. */
#include "nt.h"

#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <inttypes.h>
#include <sys/sysmacros.h>
#include <sys/timerfd.h>
#include <time.h>

static char *run_detached(const char *name, char **argv, const cm_kv *labels, size_t n_labels) {
        cm_run_spec spec = {.image = "host",
                            .name = name,
                            .argv = argv,
                            .labels = labels,
                            .n_labels = n_labels,
                            .memory_bytes = 256 << 20,
                            .pids = 128};
        cm_err err = CM_ERR_INIT;
        char *id = NULL;
        for (spec.argc = 0; argv && argv[spec.argc];)
                spec.argc++;
        if (nt_b->ops->run(nt_b, &spec, &id, &err) < 0)
                fail_msg("run: %s", err.msg);
        return id;
}

static void exec_ok(const char *id, const char *script, const char *stdin_data, cm_exec_result *r) {
        char *argv[] = {S("/bin/sh"), S("-c"), S(script), NULL};
        cm_exec_spec spec = {.argv = argv,
                             .argc = 3,
                             .stdin_data = stdin_data,
                             .stdin_len = stdin_data ? strlen(stdin_data) : 0,
                             .timeout_ms = 20000};
        cm_err err = CM_ERR_INIT;
        if (nt_b->ops->exec(nt_b, id, &spec, NULL, r, &err) < 0)
                fail_msg("exec %s: %s", script, err.msg);
}

/* Block until the container's init has exited. */
static void wait_init_exit(const char *id) {
        json_t *j = nt_inspect(id);
        int pid = (int)json_integer_value(json_object_get(json_object_get(j, "init"), "pid"));
        int fd = (int)syscall(SYS_pidfd_open, pid, 0);
        struct pollfd p = {fd, POLLIN, 0};
        if (fd >= 0) {
                assert_int_equal(poll(&p, 1, 10000), 1);
                (void)close(fd);
        }
        json_decref(j);
}

static void test_run_exec_stop_remove(void **state) {
        char *argv[] = {S("/bin/sh"), S("-c"), S("echo hello; echo oops >&2; exec sleep 1000"), NULL};
        cm_kv labels[] = {{"dev.container-mcp.managed", "true"}, {"dev.container-mcp.session", "s1"}};
        cleanup_free char *id = run_detached("web-1", argv, labels, 2);
        cm_container_info *v = NULL;
        size_t n = 0;
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;
        json_t *j;
        char *logs = NULL;
        size_t logs_len;
        cm_stats st;

        /* list and inspect */
        assert_int_equal(nt_b->ops->list(nt_b, false, &v, &n, &err), 0);
        assert_int_equal(n, 1);
        assert_string_equal(v[0].id, id);
        assert_string_equal(v[0].name, "web-1");
        assert_string_equal(v[0].state, "running");
        assert_int_equal(v[0].n_labels, 2);
        cm_container_info_clear(&v[0]);
        free(v);
        j = nt_inspect("web-1"); /* by name */
        assert_string_equal(json_string_value(json_object_get(j, "state")), "running");
        assert_string_equal(json_string_value(json_object_get(j, "image")), "host");
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(j, "labels"), "dev.container-mcp.session")), "s1");
        json_decref(j);

        /* exec: same sandbox (sees the main process), stdin, env, workdir */
        exec_ok(id, "hostname; cat /proc/*/comm | grep -c '^sleep$'", NULL, &r);
        assert_string_equal(r.out, "web-1\n1\n");
        cm_exec_result_clear(&r);
        exec_ok(id, "tr a-z A-Z", "hello stdin", &r);
        assert_string_equal(r.out, "HELLO STDIN");
        cm_exec_result_clear(&r);
        {
                char *av[] = {S("/bin/sh"), S("-c"), S("echo $X; pwd; exit 5"), NULL};
                cm_kv env[] = {{"X", "42"}};
                cm_exec_spec es = {.argv = av, .argc = 3, .env = env, .n_env = 1, .workdir = "/tmp"};
                assert_int_equal(nt_b->ops->exec(nt_b, id, &es, NULL, &r, &err), 0);
                assert_string_equal(r.out, "42\n/tmp\n");
                assert_int_equal(r.exit_code, 5);
                cm_exec_result_clear(&r);
        }
        /* files persist between execs */
        exec_ok(id, "echo data > /workspace/f", NULL, &r);
        cm_exec_result_clear(&r);
        exec_ok(id, "cat /workspace/f", NULL, &r);
        assert_string_equal(r.out, "data\n");
        cm_exec_result_clear(&r);

        /* stats from the cgroup, or from /proc without one */
        assert_int_equal(nt_b->ops->stats(nt_b, id, &st, &err), 0);
        assert_true(st.pids >= 2);
        assert_true(st.memory_bytes > 0);
        assert_int_equal(st.memory_limit_bytes, 256 << 20);
        assert_non_null(strstr(st.source, nt_cgroups() ? "cgroup" : "/proc"));

        /* remove refuses a running container without force */
        assert_true(nt_b->ops->remove(nt_b, id, false, &err) < 0);
        assert_non_null(strstr(err.msg, "force"));

        /* stop: SIGTERM reaches sleep through the init */
        assert_int_equal(nt_b->ops->stop(nt_b, id, 10, &err), 0);
        j = nt_inspect(id);
        assert_string_equal(json_string_value(json_object_get(j, "state")), "exited");
        assert_int_equal(json_integer_value(json_object_get(j, "exit_code")), 143);
        json_decref(j);
        assert_true(nt_b->ops->exec(nt_b, id, &(cm_exec_spec){.argv = argv, .argc = 1}, NULL, &r, &err) < 0);
        assert_non_null(strstr(err.msg, "not running"));

        /* logs: both streams, then only the last line */
        assert_int_equal(nt_b->ops->logs(nt_b, id, 0, 0, &logs, &logs_len, &err), 0);
        assert_string_equal(logs, "hello\noops\n");
        free(logs);
        assert_int_equal(nt_b->ops->logs(nt_b, id, 1, 0, &logs, &logs_len, &err), 0);
        assert_string_equal(logs, "oops\n");
        free(logs);

        /* list: not running, so only with all */
        assert_int_equal(nt_b->ops->list(nt_b, false, &v, &n, &err), 0);
        assert_int_equal(n, 0);
        free(v);
        assert_int_equal(nt_b->ops->list(nt_b, true, &v, &n, &err), 0);
        assert_int_equal(n, 1);
        assert_string_equal(v[0].state, "exited");
        assert_int_equal(v[0].exit_code, 143);
        cm_container_info_clear(&v[0]);
        free(v);

        /* remove: gone from the list, the state dir and the cgroups */
        j = nt_inspect(id);
        {
                json_t *dirs = json_object_get(json_object_get(j, "cgroup"), "dirs"), *d;
                const char *k;
                const char *sdir = json_string_value(json_object_get(j, "dir"));
                cleanup_free char *sdir_copy = xstrdup(sdir);
                char **cg = xcalloc(8, sizeof *cg);
                size_t ncg = 0;
                json_object_foreach(dirs, k, d) cg[ncg++] = xstrdup(json_string_value(d));
                assert_int_equal(nt_b->ops->remove(nt_b, id, false, &err), 0);
                assert_int_equal(access(sdir_copy, F_OK), -1);
                for (size_t i = 0; i < ncg; i++) {
                        assert_int_equal(access(cg[i], F_OK), -1);
                        free(cg[i]);
                }
                free(cg);
        }
        json_decref(j);
        assert_int_equal(nt_b->ops->list(nt_b, true, &v, &n, &err), 0);
        assert_int_equal(n, 0);
        free(v);
        assert_true(nt_b->ops->inspect(nt_b, id, &logs, &err) < 0);
        assert_int_equal(err.code, ENOENT);
        (void)state;
}

/* An exec past its timeout is killed with its children; a background
 * process an exec leaves behind (nohup-style) outlives it. */
static void test_exec_timeout_and_background(void **state) {
        cleanup_free char *id = run_detached(NULL, NULL, NULL, 0); /* an idle sandbox */
        char *argv[] = {S("/bin/sh"), S("-c"), S("sleep 100 & sleep 100 & sleep 100"), NULL};
        cm_exec_spec es = {.argv = argv, .argc = 3, .timeout_ms = 300};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;

        assert_int_equal(nt_b->ops->exec(nt_b, id, &es, NULL, &r, &err), 0);
        assert_true(r.timed_out);
        assert_int_equal(r.exit_code, 137);
        cm_exec_result_clear(&r);
        exec_ok(id, "cat /proc/*/comm | grep -c '^sleep$'", NULL, &r);
        assert_string_equal(r.out, "0\n");
        cm_exec_result_clear(&r);

        /* the exec returns while its background sleep runs on (counted below) */
        exec_ok(id, "sleep 1000 >/dev/null 2>&1 &", NULL, &r);
        assert_int_equal(r.exit_code, 0);
        cm_exec_result_clear(&r);
        exec_ok(id, "cat /proc/*/comm | grep -c '^sleep$'", NULL, &r);
        assert_string_equal(r.out, "1\n");
        cm_exec_result_clear(&r);

        /* an idle sandbox stops at once and takes the background sleep along */
        assert_int_equal(nt_b->ops->remove(nt_b, id, true, &err), 0);
        (void)state;
}

/* The sleep processes alive in the sandbox, a line each.  A zombie is dead,
 * only not reaped yet by the init. */
static void live_sleeps(const char *id, cm_exec_result *r) {
        exec_ok(id,
                "for p in /proc/[0-9]*; do read -r c < $p/comm && [ $c = sleep ] && "
                "[ $(cut -d' ' -f3 $p/stat) != Z ] && cut -d' ' -f1-8 $p/stat; done; true",
                NULL, r);
}

/* What a killed exec leaves must be nothing: processes that left its
 * session (setsid), its parent chain (a double fork) or both, and the
 * command itself after an exec of its own.  "started" in the output shows
 * the forks happened before the kill.  `pad` > 0 makes the request too big
 * for the init, so the setns path (a waiter) runs it instead. */
static void kill_escapees(const char *id, size_t pad, const cm_cancel *cancel) {
        cleanup_free char *big = xcalloc(pad + 1, 1);
        char *argv[] = {S("/bin/sh"), S("-c"),
                        S("setsid sleep 301 & (sh -c 'setsid sleep 302 &'); setsid sh -c 'sleep 303 & exec sleep 304' & "
                          "echo started; exec sleep 300"),
                        big, NULL};
        cm_exec_spec es = {.argv = argv, .argc = 4, .timeout_ms = cancel ? 60000 : 1000};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;

        memset(big, 'x', pad);
        if (cancel) {
                assert_true(nt_b->ops->exec(nt_b, id, &es, cancel, &r, &err) < 0);
                assert_int_equal(err.code, ECANCELED);
        } else {
                if (nt_b->ops->exec(nt_b, id, &es, NULL, &r, &err) < 0)
                        fail_msg("exec: %s", err.msg);
                assert_true(r.timed_out);
                assert_int_equal(r.exit_code, 137);
                assert_string_equal(r.out, "started\n");
                cm_exec_result_clear(&r);
        }
        live_sleeps(id, &r);
        if (r.out[0])
                fail_msg("left running after a kill (pad %zu, %s): %s", pad, cancel ? "cancel" : "timeout", r.out);
        cm_exec_result_clear(&r);
}

static void test_exec_kill_escapees(void **state) {
        cleanup_free char *id = run_detached(NULL, NULL, NULL, 0);
        int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
        cm_cancel cancel = {tfd};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;

        kill_escapees(id, 0, NULL);          /* the init kills the tree */
        kill_escapees(id, 100 * 1024, NULL); /* the waiter (or its sub-cgroup) does */
        assert_true(tfd >= 0);
        assert_int_equal(timerfd_settime(tfd, 0, &(struct itimerspec){.it_value = {1, 0}}, NULL), 0);
        kill_escapees(id, 0, &cancel);
        (void)close(tfd);

        /* an exec that ends on its own leaves its background running, as
         * docker exec does */
        exec_ok(id, "setsid sleep 1000 >/dev/null 2>&1 & until grep -qx sleep /proc/$!/comm; do :; done", NULL, &r);
        assert_int_equal(r.exit_code, 0);
        cm_exec_result_clear(&r);
        live_sleeps(id, &r);
        assert_int_equal(strchr(r.out, '\n') - r.out + 1, (long)strlen(r.out)); /* one line */
        cm_exec_result_clear(&r);
        assert_int_equal(nt_b->ops->remove(nt_b, id, true, &err), 0);
        (void)state;
}

/* A main process that exits on its own: the container is "exited" with its
 * code.  It waits on a FIFO the test opens through a bind mount. */
static void test_main_exits(void **state) {
        cleanup_free char *dir = xasprintf("%s/fifo-dir", nt_state_dir);
        cleanup_free char *fifo = xasprintf("%s/go", dir);
        char *argv[] = {S("/bin/sh"), S("-c"), S("read x < /shared/go; echo got $x; exit 7"), NULL};
        cm_mount m = {dir, "/shared", false};
        cm_run_spec spec = {.image = "host", .argv = argv, .argc = 3, .mounts = &m, .n_mounts = 1};
        cm_err err = CM_ERR_INIT;
        char *id = NULL, *logs = NULL;
        size_t len;
        int fd;
        json_t *j;

        assert_int_equal(mkdir(dir, 0777), 0);
        /* root-owned: writable to the sandbox's root (host BASE, not 0) only
           when the mode says so, whatever the umask */
        assert_int_equal(chmod(dir, 0777), 0);
        assert_int_equal(mkfifo(fifo, 0666), 0);
        if (nt_b->ops->run(nt_b, &spec, &id, &err) < 0)
                fail_msg("run: %s", err.msg);
        fd = open(fifo, O_WRONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "go\n", 3), 3);
        (void)close(fd);
        wait_init_exit(id);
        j = nt_inspect(id);
        assert_string_equal(json_string_value(json_object_get(j, "state")), "exited");
        assert_int_equal(json_integer_value(json_object_get(j, "exit_code")), 7);
        json_decref(j);
        assert_int_equal(nt_b->ops->logs(nt_b, id, 0, 0, &logs, &len, &err), 0);
        assert_string_equal(logs, "got go\n");
        free(logs);
        assert_int_equal(nt_b->ops->remove(nt_b, id, false, &err), 0);
        free(id);
        (void)state;
}

/* The logs once `want` is in them: woken by inotify each time the init
 * writes the log file, bounded by a 20 s wait for the next write. */
static char *logs_with(const char *id, int64_t since, const char *want) {
        json_t *j = nt_inspect(id);
        cleanup_free char *log = xasprintf("%s/log", json_string_value(json_object_get(j, "dir")));
        int in = inotify_init1(IN_CLOEXEC);
        cm_err err = CM_ERR_INIT;
        char *logs = NULL, ev[4096];
        size_t len;

        json_decref(j);
        assert_true(in >= 0);
        assert_true(inotify_add_watch(in, log, IN_MODIFY) >= 0); /* before the first look: no write is missed */
        for (;;) {
                struct pollfd p = {in, POLLIN, 0};
                assert_int_equal(nt_b->ops->logs(nt_b, id, 0, since, &logs, &len, &err), 0);
                if (strstr(logs, want))
                        break;
                free(logs);
                logs = NULL;
                if (poll(&p, 1, 20000) != 1)
                        fail_msg("\"%s\" never reached the logs of %s", want, id);
                (void)read(in, ev, sizeof ev);
        }
        (void)close(in);
        return logs;
}

/* logs since: what was written from that second on.  "early" and "late"
 * are written in different seconds: the test waits for the clock between
 * them, since `since` counts in seconds. */
static void test_logs_since(void **state) {
        cleanup_free char *dir = xasprintf("%s/since-dir", nt_state_dir);
        cleanup_free char *fifo = xasprintf("%s/go", dir);
        char *argv[] = {S("/bin/sh"), S("-c"), S("echo early; echo early2; read x < /shared/go; echo late; exec sleep 300"),
                        NULL};
        cm_mount m = {dir, "/shared", false};
        cm_run_spec spec = {.image = "host", .argv = argv, .argc = 3, .mounts = &m, .n_mounts = 1};
        cm_err err = CM_ERR_INIT;
        struct timespec now, next;
        char *id = NULL, *logs;
        size_t len;
        int64_t late_s;
        int fd;

        assert_int_equal(mkdir(dir, 0777), 0);
        /* root-owned: writable to the sandbox's root (host BASE, not 0) only
           when the mode says so, whatever the umask */
        assert_int_equal(chmod(dir, 0777), 0);
        assert_int_equal(mkfifo(fifo, 0666), 0);
        if (nt_b->ops->run(nt_b, &spec, &id, &err) < 0)
                fail_msg("run: %s", err.msg);
        free(logs_with(id, 0, "early2\n"));
        assert_int_equal(clock_gettime(CLOCK_REALTIME, &now), 0);
        next = (struct timespec){now.tv_sec + 1, 0};
        while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &next, NULL) == EINTR)
                ;
        late_s = next.tv_sec;
        fd = open(fifo, O_WRONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "go\n", 3), 3);
        (void)close(fd);

        logs = logs_with(id, 0, "late\n");
        assert_string_equal(logs, "early\nearly2\nlate\n");
        free(logs);
        assert_int_equal(nt_b->ops->logs(nt_b, id, 0, late_s * 1000, &logs, &len, &err), 0);
        assert_string_equal(logs, "late\n");
        free(logs);
        assert_int_equal(nt_b->ops->logs(nt_b, id, 0, (late_s + 3600) * 1000, &logs, &len, &err), 0);
        assert_string_equal(logs, ""); /* nothing from the future */
        free(logs);
        assert_int_equal(nt_b->ops->logs(nt_b, id, 2, (late_s - 3600) * 1000, &logs, &len, &err), 0);
        assert_string_equal(logs, "early2\nlate\n"); /* tail of since */
        free(logs);
        assert_int_equal(nt_b->ops->remove(nt_b, id, true, &err), 0);
        free(id);
        (void)state;
}

static void test_names(void **state) {
        char *argv[] = {S("sleep"), S("1000"), NULL};
        cleanup_free char *id = run_detached("same", argv, NULL, 0);
        cm_run_spec spec = {.image = "host", .name = "same", .argv = argv, .argc = 2};
        cm_err err = CM_ERR_INIT;
        char *id2 = NULL;
        assert_true(nt_b->ops->run(nt_b, &spec, &id2, &err) < 0);
        assert_int_equal(err.code, EEXIST);
        /* a unique prefix of the id works as well as the name */
        {
                char prefix[7];
                char *text = NULL;
                memcpy(prefix, id, 6);
                prefix[6] = 0;
                assert_int_equal(nt_b->ops->inspect(nt_b, prefix, &text, &err), 0);
                free(text);
        }
        assert_true(nt_b->ops->inspect(nt_b, "../etc", &id2, &err) < 0);
        assert_int_equal(nt_b->ops->remove(nt_b, "same", true, &err), 0);
        (void)state;
}

/* Policy mounts: read-only and read-write binds; targets over the image are
 * refused; a symlink as source is refused (it could have been swapped after
 * the policy check). */
/* CPU time, processes and block I/O.  The writes must reach a disk to
 * count (tmpfs has no I/O), so they go to a host dir, fsync'd; where that
 * dir is not on a block device, I/O is not checked. */
static void test_stats(void **state) {
        cleanup_free char *dir = xasprintf("%s/io", nt_state_dir);
        cm_mount m = {dir, "/io", false};
        cm_run_spec spec = {.image = "host", .mounts = &m, .n_mounts = 1, .memory_bytes = 256 << 20, .pids = 128};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;
        char *id = NULL;
        struct stat sb;
        cm_stats st;

        assert_int_equal(mkdir(dir, 0777), 0);
        /* root-owned: writable to the sandbox's root (host BASE, not 0) only
           when the mode says so, whatever the umask */
        assert_int_equal(chmod(dir, 0777), 0);
        if (nt_b->ops->run(nt_b, &spec, &id, &err) < 0)
                fail_msg("run: %s", err.msg);
        exec_ok(id,
                "i=0; while [ $i -lt 50000 ]; do i=$((i+1)); done; "
                "dd if=/dev/zero of=/io/f bs=1M count=4 conv=fsync 2>/dev/null; "
                "sleep 1000 >/dev/null 2>&1 & until grep -qx sleep /proc/$!/comm; do :; done",
                NULL, &r);
        assert_int_equal(r.exit_code, 0);
        cm_exec_result_clear(&r);
        assert_int_equal(nt_b->ops->stats(nt_b, id, &st, &err), 0);
        printf("stats (%s): cpu %" PRIu64 " us, memory %" PRIu64 ", pids %" PRIu64 ", io r %" PRIu64 " w %" PRIu64
               "\n",
               st.source, st.cpu_usec, st.memory_bytes, st.pids, st.io_read_bytes, st.io_write_bytes);
        assert_true(st.cpu_usec >= 10000); /* the loop: tens of ms */
        assert_true(st.pids >= 2);         /* the init, the sleep */
        assert_true(st.memory_bytes > 0);
        assert_int_equal(st.memory_limit_bytes, 256 << 20);
        assert_int_equal(stat(dir, &sb), 0);
        if (major(sb.st_dev) != 0)
                assert_true(st.io_write_bytes >= 4 << 20);
        else
                printf("note: %s is not on a block device: I/O not checked\n", dir);
        assert_int_equal(nt_b->ops->remove(nt_b, id, true, &err), 0);
        free(id);
        (void)state;
}

static void test_mounts(void **state) {
        cleanup_free char *ro = xasprintf("%s/ro", nt_state_dir);
        cleanup_free char *rw = xasprintf("%s/rw", nt_state_dir);
        cleanup_free char *link = xasprintf("%s/link", nt_state_dir);
        cleanup_free char *out = xasprintf("%s/rw/out", nt_state_dir);
        cleanup_free char *in = xasprintf("%s/ro/in", nt_state_dir);
        char *argv[] = {S("/bin/sh"), S("-c"),
                        S("cat /data/in/in; echo x > /data/in/y 2>/dev/null || echo ro-denied; echo w > /out/out"),
                        NULL};
        cm_mount m[] = {{ro, "/data/in", true}, {rw, "/out", false}};
        cm_run_spec spec = {.argv = argv, .mounts = m, .n_mounts = 2};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;
        char buf[8] = {0};
        int fd;

        assert_int_equal(mkdir(ro, 0755), 0);
        assert_int_equal(mkdir(rw, 0777), 0);
        /* root-owned: writable to the sandbox's root (host BASE, not 0) only
           when the mode says so, whatever the umask */
        assert_int_equal(chmod(rw, 0777), 0);
        fd = open(in, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        assert_int_equal(write(fd, "in\n", 3), 3);
        (void)close(fd);
        if (nt_run_spec(&spec, &r, &err) < 0)
                fail_msg("run_wait: %s", err.msg);
        assert_string_equal(r.out, "in\nro-denied\n");
        cm_exec_result_clear(&r);
        fd = open(out, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(read(fd, buf, sizeof buf - 1), 2);
        assert_string_equal(buf, "w\n");
        (void)close(fd);

        m[0] = (cm_mount){ro, "/usr/local/x", true};
        spec.n_mounts = 1;
        assert_true(nt_run_spec(&spec, &r, &err) < 0);
        assert_non_null(strstr(err.msg, "/usr"));
        assert_int_equal(symlink(ro, link), 0);
        m[0] = (cm_mount){link, "/data", true};
        assert_true(nt_run_spec(&spec, &r, &err) < 0);
        assert_non_null(strstr(err.msg, "symlink"));
        m[0] = (cm_mount){ro, "/data/../etc", true};
        assert_true(nt_run_spec(&spec, &r, &err) < 0);
        (void)state;
}

/* A container path cannot climb out of the container: "/../../..<dir>/f"
 * names the container's <dir>/f, never the host's, though both exist. */
static void assert_copy_stays_inside(const char *id, const char *host, cm_host_path *out) {
        cleanup_free char *dir = xasprintf("%s/planted", nt_state_dir);
        cleanup_free char *plant = xasprintf("mkdir -p %s && echo HOST > %s/f", dir, dir);
        cleanup_free char *inside = xasprintf("mkdir -p %s && echo inside > %s/f", dir, dir);
        cleanup_free char *climb = xasprintf("/../../../..%s/f", dir);
        cleanup_free char *copied = xasprintf("%s/out/f", host);
        char text[64] = {0};
        cm_copy_stats st = {0};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;
        int fd;

        assert_int_equal(system(plant), 0);
        exec_ok(id, inside, NULL, &r);
        cm_exec_result_clear(&r);
        if (nt_b->ops->copy_out(nt_b, id, climb, out, &st, &err) < 0)
                fail_msg("copy_out of %s: %s", climb, err.msg);
        fd = open(copied, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_true(read(fd, text, sizeof text - 1) >= 0);
        (void)close(fd);
        assert_string_equal(text, "inside\n");
}

/* copy_files: a host tree into a running container and back out. */
static void test_copy(void **state) {
        cleanup_free char *id = run_detached(NULL, NULL, NULL, 0);
        cleanup_free char *host = xasprintf("%s/copy", nt_state_dir);
        cleanup_free char *make = xasprintf("mkdir -p %s/in/sub && echo one > %s/in/a && echo two > %s/in/sub/b && "
                                            "ln -s /etc/shadow %s/in/link && mkdir %s/out",
                                            host, host, host, host, host);
        cleanup_free char *check =
                xasprintf("test \"$(cat %s/out/sub/made)\" = made && test -L %s/out/in/link", host, host);
        cm_host_path in = {host, "in"}, out = {host, "out"};
        cm_copy_stats st = {0};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;

        assert_int_equal(system(make), 0);
        if (nt_b->ops->copy_in(nt_b, id, &in, "/workspace", &st, &err) < 0)
                fail_msg("copy_in: %s", err.msg);
        assert_int_equal(st.files, 2);
        assert_int_equal(st.symlinks, 1);
        exec_ok(id,
                "cat /workspace/in/a /workspace/in/sub/b; readlink /workspace/in/link; mkdir /workspace/sub; "
                "echo made > /workspace/sub/made",
                NULL, &r);
        assert_string_equal(r.out, "one\ntwo\n/etc/shadow\n");
        cm_exec_result_clear(&r);
        if (nt_b->ops->copy_out(nt_b, id, "/workspace/sub", &out, &st, &err) < 0 ||
            nt_b->ops->copy_out(nt_b, id, "/workspace/in", &out, &st, &err) < 0)
                fail_msg("copy_out: %s", err.msg);
        assert_int_equal(system(check), 0);
        assert_copy_stays_inside(id, host, &out);
        assert_int_equal(nt_b->ops->remove(nt_b, id, true, &err), 0);
        (void)state;
}

int main(int argc, char **argv) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_run_exec_stop_remove),
                cmocka_unit_test(test_exec_timeout_and_background),
                cmocka_unit_test(test_exec_kill_escapees),
                cmocka_unit_test(test_main_exits),
                cmocka_unit_test(test_logs_since),
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_stats),
                cmocka_unit_test(test_mounts),
                cmocka_unit_test(test_copy),
        };
        int r;
        nt_setup(argc, argv);
        r = cmocka_run_group_tests(tests, NULL, NULL);
        nt_teardown();
        return r;
}
