/* A server killed with SIGKILL while its sandboxes run: they die with it
 * (the lifeline) and the next server to open the state dir removes what is
 * left (records, cgroups); with CONTAINER_MCP_ORPHANS=adopt they keep
 * running and the next server takes them over.  Nothing may leak: no
 * process, no cgroup, no record. */
#include "nt.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* Every server A, killed at the end whatever happened. */
static pid_t servers[8];
static size_t n_servers;

typedef struct server_a {
        pid_t pid;
        int from; /* what it reports, one line */
} server_a;

/* Fork "server A": it opens the backend on the shared state dir, calls fn,
 * writes fn's one-line report to the pipe, and waits to be killed. */
static server_a start_server(void (*fn)(cm_backend *b, FILE *out)) {
        int p[2];
        server_a a;
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        a.pid = fork();
        assert_true(a.pid >= 0);
        if (a.pid == 0) {
                cm_backend *b = cm_native_open();
                FILE *out = fdopen(p[1], "w");
                fn(b, out);
                (void)fflush(out);
                for (;;)
                        (void)pause();
        }
        (void)close(p[1]);
        a.from = p[0];
        if (n_servers < ARRAY_SIZE(servers))
                servers[n_servers++] = a.pid;
        return a;
}

static void read_line(int fd, char *buf, size_t size) {
        size_t n = 0;
        while (n + 1 < size && read(fd, buf + n, 1) == 1 && buf[n] != '\n')
                n++;
        buf[n] = 0;
}

static void kill_server(server_a *a) {
        assert_int_equal(kill(a->pid, SIGKILL), 0);
        assert_int_equal(waitpid(a->pid, NULL, 0), a->pid);
        (void)close(a->from);
}

static void wait_gone(int pidfd) {
        struct pollfd p = {pidfd, POLLIN, 0};
        assert_int_equal(poll(&p, 1, 10000), 1);
        (void)close(pidfd);
}

static void run_sleeper(cm_backend *b, FILE *out) {
        char *argv[] = {S("sleep"), S("1000"), NULL};
        cm_run_spec spec = {.image = "host", .argv = argv, .argc = 2, .memory_bytes = 128 << 20, .pids = 64};
        cm_err err = CM_ERR_INIT;
        char *id = NULL, *json = NULL;
        json_t *j;
        if (b->ops->run(b, &spec, &id, &err) < 0 || b->ops->inspect(b, id, &json, &err) < 0) {
                fprintf(out, "error %s\n", err.msg);
                return;
        }
        j = json_loads(json, 0, NULL);
        fprintf(out, "%s %lld\n", id,
                (long long)json_integer_value(json_object_get(json_object_get(j, "init"), "pid")));
}

/* The cgroup dirs a record names, read straight from the state dir. */
static size_t record_cgroups(const char *id, char **ret, size_t max) {
        cleanup_free char *path = xasprintf("%s/containers/%s/state.json", nt_state_dir, id);
        json_t *j = json_load_file(path, 0, NULL), *d;
        const char *k;
        size_t n = 0;
        assert_non_null(j);
        json_object_foreach(json_object_get(json_object_get(j, "cgroup"), "dirs"), k, d) if (n < max) ret[n++] =
                xstrdup(json_string_value(d));
        json_decref(j);
        return n;
}

/* What a reaping server `b2` must have left of `id`: nothing listed, no
 * record, none of its cgroups (freed here). */
static void assert_reaped(cm_backend *b2, const char *id, char **cg, size_t ncg) {
        cm_container_info *v = NULL;
        size_t n = 9;
        cm_err err = CM_ERR_INIT;
        cleanup_free char *dir = xasprintf("%s/containers/%s", nt_state_dir, id);
        assert_int_equal(b2->ops->list(b2, true, &v, &n, &err), 0);
        assert_int_equal(n, 0);
        free(v);
        assert_int_equal(access(dir, F_OK), -1);
        for (size_t i = 0; i < ncg; i++) {
                if (access(cg[i], F_OK) == 0)
                        fail_msg("cgroup %s of reaped %s is still there", cg[i], id);
                free(cg[i]);
        }
}

static void test_reaped_after_kill(void **state) {
        server_a a = start_server(run_sleeper);
        char line[256], id[64], *cg[8];
        long long init_pid = 0;
        size_t ncg;
        cm_backend *b2;
        int fd;

        read_line(a.from, line, sizeof line);
        assert_int_equal(sscanf(line, "%63s %lld", id, &init_pid), 2);
        fd = nt_pidfd((pid_t)init_pid);
        ncg = record_cgroups(id, cg, 8);
        assert_true(!nt_cgroups() || ncg > 0);
        kill_server(&a);
        wait_gone(fd); /* the sandbox died with its server */

        b2 = nt_open_fresh(); /* a new server reaps what is left */
        assert_reaped(b2, id, cg, ncg);
        b2->ops->free(b2);
        (void)state;
}

/* A run to completion in flight when its server dies: its processes go at
 * once, its cgroup with the next server. */
static char fifo_dir[128];

static void run_wait_forever(cm_backend *b, FILE *out) {
        /* the process that reports is the one that stays: no race with an
         * exec after the report */
        char *argv[] = {S("python3"), S("-c"),
                        S("import time; f = open('/shared/fifo', 'w'); f.write('started\\n'); f.close(); "
                          "time.sleep(100123)"),
                        NULL};
        cm_mount m = {fifo_dir, "/shared", false};
        cm_run_spec spec = {.image = "host",
                            .argv = argv,
                            .argc = 3,
                            .mounts = &m,
                            .n_mounts = 1,
                            .memory_bytes = 128 << 20,
                            .pids = 64};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;
        (void)out;
        (void)b->ops->run_wait(b, &spec, NULL, &r, &err); /* never returns: killed */
}

/* The pid (in our namespace) of the sandbox's python, whose argv holds
 * "time.sleep(100123)". */
static pid_t find_sleeper(void) {
        DIR *d = opendir("/proc");
        struct dirent *de;
        pid_t found = 0;
        while (d && (de = readdir(d)) && !found) {
                char path[64], buf[256];
                int fd;
                ssize_t len;
                if (de->d_name[0] < '0' || de->d_name[0] > '9')
                        continue;
                (void)snprintf(path, sizeof path, "/proc/%.20s/cmdline", de->d_name);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                len = read(fd, buf, sizeof buf);
                (void)close(fd);
                if (len > 0 && memmem(buf, (size_t)len, "time.sleep(100123)", 18))
                        found = atoi(de->d_name);
        }
        if (d)
                (void)closedir(d);
        return found;
}

static void test_run_wait_orphan(void **state) {
        cleanup_free char *fifo = NULL;
        char buf[16] = {0};
        server_a a;
        pid_t sleeper;
        int fd, sfd;
        cm_backend *b2;

        (void)snprintf(fifo_dir, sizeof fifo_dir, "%s/fifo", nt_state_dir);
        fifo = xasprintf("%s/fifo", fifo_dir);
        assert_int_equal(mkdir(fifo_dir, 0777), 0);
        /* root-owned: writable to the sandbox's root (host BASE, not 0) only
           when the mode says so, whatever the umask */
        assert_int_equal(chmod(fifo_dir, 0777), 0);
        assert_int_equal(mkfifo(fifo, 0666), 0);
        assert_int_equal(chmod(fifo, 0666), 0);
        a = start_server(run_wait_forever);
        fd = open(fifo, O_RDONLY | O_CLOEXEC);
        assert_true(read(fd, buf, sizeof buf - 1) > 0); /* the sandbox runs */
        assert_string_equal(buf, "started\n");
        (void)close(fd);
        sleeper = find_sleeper();
        assert_true(sleeper > 0);
        sfd = nt_pidfd(sleeper);
        kill_server(&a);
        wait_gone(sfd);
        b2 = nt_open_fresh();
        {
                /* the dead server's srv- cgroup dir went with the reaping */
                cm_backend_status st;
                const char *under;
                b2->ops->status(b2, &st);
                under = strstr(st.details, " under ");
                if (under && nt_cgroups()) {
                        char base[512];
                        cleanup_free char *srv = NULL;
                        DIR *d;
                        struct dirent *de;
                        size_t len = strcspn(under + 7, ";\"");
                        memcpy(base, under + 7, len < sizeof base ? len : sizeof base - 1);
                        base[len < sizeof base ? len : sizeof base - 1] = 0;
                        srv = xasprintf("srv-%d-", (int)a.pid);
                        d = opendir(base);
                        assert_non_null(d);
                        while ((de = readdir(d)))
                                assert_int_not_equal(strncmp(de->d_name, srv, strlen(srv)), 0);
                        (void)closedir(d);
                }
        }
        assert_int_equal(find_sleeper(), 0);
        b2->ops->free(b2);
        (void)state;
}

/* Exited, within a deadline generous enough for a loaded machine. */
static bool gone_within(int pidfd, int ms) {
        struct pollfd p = {pidfd, POLLIN, 0};
        bool gone = poll(&p, 1, ms) == 1;
        (void)close(pidfd);
        return gone;
}

/* Nothing mounted anywhere in the state dir (the host's mount table). */
static void no_mounts_in_state_dir(void) {
        FILE *f = fopen("/proc/self/mountinfo", "re");
        char line[4096];
        assert_non_null(f);
        while (fgets(line, sizeof line, f))
                if (strstr(line, nt_state_dir))
                        fail_msg("still mounted: %s", line);
        (void)fclose(f);
}

/* A sandbox still running when the next server starts: its server had
 * CONTAINER_MCP_ORPHANS=adopt (so no lifeline), the next one reaps.  The
 * reaping kills it, init and main process, and removes its cgroups and its
 * record; deleting only the record would leave a sandbox nobody manages. */
static void test_reaped_while_running(void **state) {
        server_a a;
        char line[256], id[64], *cg[8];
        long long init = 0;
        size_t ncg;
        int ifd, mfd;
        cm_backend *b2;
        struct pollfd p;

        (void)setenv("CONTAINER_MCP_ORPHANS", "adopt", 1);
        a = start_server(run_sleeper);
        (void)unsetenv("CONTAINER_MCP_ORPHANS"); /* for the next server */
        read_line(a.from, line, sizeof line);
        assert_int_equal(sscanf(line, "%63s %lld", id, &init), 2);
        ifd = nt_pidfd((pid_t)init);
        mfd = nt_pidfd(nt_main_pid((pid_t)init));
        ncg = record_cgroups(id, cg, 8);
        kill_server(&a);
        p = (struct pollfd){ifd, POLLIN, 0};
        assert_int_equal(poll(&p, 1, 0), 0); /* no lifeline: it runs on */

        b2 = nt_open_fresh(); /* CONTAINER_MCP_ORPHANS unset: reap */
        p = (struct pollfd){ifd, POLLIN, 0};
        if (poll(&p, 1, 60000) != 1) {
                (void)syscall(SYS_pidfd_send_signal, ifd, SIGKILL, NULL, 0); /* leave nothing behind */
                fail_msg("the init (%lld) of reaped %s still runs", init, id);
        }
        (void)close(ifd);
        assert_true(gone_within(mfd, 60000));
        (void)waitpid((pid_t)init, NULL, WNOHANG); /* ours now (subreaper): no zombie either */
        assert_reaped(b2, id, cg, ncg);
        no_mounts_in_state_dir();
        b2->ops->free(b2);
        (void)state;
}

/* A new server reaps only dead servers' sandboxes: one whose server lives
 * keeps running, and the new server can exec in it. */
static void test_live_servers_kept(void **state) {
        server_a a = start_server(run_sleeper);
        char line[256], id[64];
        long long init = 0;
        cm_backend *b2, *b3;
        char *argv[] = {S("echo"), S("still here"), NULL};
        cm_exec_spec es = {.argv = argv, .argc = 2, .timeout_ms = 20000};
        cm_exec_result r;
        cm_container_info *v = NULL;
        size_t n = 0;
        cm_err err = CM_ERR_INIT;
        int ifd;
        struct pollfd p;

        read_line(a.from, line, sizeof line);
        assert_int_equal(sscanf(line, "%63s %lld", id, &init), 2);
        ifd = nt_pidfd((pid_t)init);
        b2 = nt_open_fresh(); /* server A still runs */
        p = (struct pollfd){ifd, POLLIN, 0};
        assert_int_equal(poll(&p, 1, 0), 0);
        if (b2->ops->exec(b2, id, &es, NULL, &r, &err) < 0)
                fail_msg("exec in server A's %s after a second server started: %s", id, err.msg);
        assert_string_equal(r.out, "still here\n");
        cm_exec_result_clear(&r);
        kill_server(&a);
        assert_true(gone_within(ifd, 60000)); /* the lifeline */
        (void)waitpid((pid_t)init, NULL, WNOHANG);
        b2->ops->free(b2);
        b3 = nt_open_fresh(); /* reaps A's record */
        assert_int_equal(b3->ops->list(b3, true, &v, &n, &err), 0);
        assert_int_equal(n, 0);
        free(v);
        b3->ops->free(b3);
        (void)state;
}

/* CONTAINER_MCP_ORPHANS=adopt: the sandbox outlives its server and the next
 * server lists it, execs in it and removes it. */
static void test_adopted(void **state) {
        server_a a;
        char line[256], id[64];
        long long init_pid = 0;
        cm_backend *b2;
        cm_container_info *v = NULL;
        size_t n = 0;
        cm_err err = CM_ERR_INIT;
        char *argv[] = {S("echo"), S("adopted"), NULL};
        cm_exec_spec es = {.argv = argv, .argc = 2};
        cm_exec_result r;
        int fd;

        (void)setenv("CONTAINER_MCP_ORPHANS", "adopt", 1);
        a = start_server(run_sleeper);
        read_line(a.from, line, sizeof line);
        assert_int_equal(sscanf(line, "%63s %lld", id, &init_pid), 2);
        kill_server(&a);
        fd = nt_pidfd((pid_t)init_pid);
        b2 = nt_open_fresh();
        assert_int_equal(b2->ops->list(b2, false, &v, &n, &err), 0);
        assert_int_equal(n, 1);
        assert_string_equal(v[0].id, id);
        cm_container_info_clear(&v[0]);
        free(v);
        assert_int_equal(b2->ops->exec(b2, id, &es, NULL, &r, &err), 0);
        assert_string_equal(r.out, "adopted\n");
        cm_exec_result_clear(&r);
        /* stop reaches it: the init really goes */
        assert_int_equal(b2->ops->stop(b2, id, 10, &err), 0);
        wait_gone(fd);
        assert_int_equal(b2->ops->remove(b2, id, false, &err), 0);
        b2->ops->free(b2);
        (void)unsetenv("CONTAINER_MCP_ORPHANS");
        (void)state;
}

int main(int argc, char **argv) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_reaped_after_kill), cmocka_unit_test(test_run_wait_orphan),
                cmocka_unit_test(test_adopted),           cmocka_unit_test(test_reaped_while_running),
                cmocka_unit_test(test_live_servers_kept),
        };
        int r;
        /* Sandboxes orphaned by a killed server A come to us, not to the
         * host's init, so we can reap them. */
        (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        nt_setup(argc, argv);
        r = cmocka_run_group_tests(tests, NULL, NULL);
        for (size_t i = 0; i < n_servers; i++)
                (void)kill(servers[i], SIGKILL);
        while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
                ;
        nt_teardown();
        return r;
}
