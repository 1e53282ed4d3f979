/* Promises checked by their effect with a compiled probe (nt_probe, built
 * next to this test and mounted read-only at /probe), so no interpreter is
 * involved: the seccomp rules answer what the filter says (and the calls a
 * sandbox needs still work); stop kills a main process that ignores
 * SIGTERM once the grace is over; the log file stops at its cap while the
 * writer runs on; exec output stops at its cap; a detached sandbox's limits
 * are the ones in its cgroup (or its rlimits), its read-only root holds
 * for every exec; no fd or environment of the server reaches a sandbox. */
#include "nt.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <libgen.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define LOG_CAP ((size_t)4 << 20)    /* README: logs (4 MiB) */
#define OUTPUT_CAP ((size_t)1 << 20) /* README: output (1 MiB a stream) */

static char probe_dir[PATH_MAX];

/* The directory this test was built in, which holds nt_probe too. */
static void find_probe(void) {
        char self[PATH_MAX], path[PATH_MAX + 16];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) {
                perror("readlink /proc/self/exe");
                exit(1);
        }
        self[n] = 0;
        (void)snprintf(probe_dir, sizeof probe_dir, "%s", dirname(self));
        (void)snprintf(path, sizeof path, "%s/nt_probe", probe_dir);
        if (access(path, X_OK) < 0) {
                /* a helper that was not built is a failure, not a skip */
                printf("FAIL: %s: %s (the build makes it with this test)\n", path, strerror(errno));
                exit(1);
        }
}

static const cm_mount probe_mount = {probe_dir, "/probe", true};

static char *run_detached(char **argv, int64_t memory, int64_t pids, double cpus) {
        cm_run_spec spec = {.image = "host",
                            .argv = argv,
                            .mounts = &probe_mount,
                            .n_mounts = 1,
                            .memory_bytes = memory,
                            .pids = pids,
                            .cpus = cpus};
        cm_err err = CM_ERR_INIT;
        char *id = NULL;
        for (spec.argc = 0; argv[spec.argc];)
                spec.argc++;
        if (nt_b->ops->run(nt_b, &spec, &id, &err) < 0)
                fail_msg("run %s: %s", argv[0], err.msg);
        return id;
}

static pid_t init_pid(const char *id) {
        json_t *j = nt_inspect(id);
        pid_t pid = (pid_t)json_integer_value(json_object_get(json_object_get(j, "init"), "pid"));
        json_decref(j);
        assert_true(pid > 0);
        return pid;
}

/* Has the process exited?  Waits up to ms for it. */
static bool exited(int pidfd, int ms) {
        struct pollfd p = {pidfd, POLLIN, 0};
        return poll(&p, 1, ms) == 1;
}

static void remove_container(const char *id) {
        cm_err err = CM_ERR_INIT;
        if (nt_b->ops->remove(nt_b, id, true, &err) < 0)
                fail_msg("remove %s: %s", id, err.msg);
}

/* ---- seccomp ------------------------------------------------------------ */

/* Each refused call gets the filter's answer: EPERM, clone3 ENOSYS (so
 * libc falls back to clone, whose flags the filter reads); each call a
 * program needs works.  The probe makes every call so that, without its
 * rule, the kernel would answer otherwise (see nt_probe.c). */
static void test_seccomp_rules(void **state) {
        char *argv[] = {S("/probe/nt_probe"), S("syscalls"), NULL};
        cm_run_spec spec = {.argv = argv, .mounts = &probe_mount, .n_mounts = 1, .timeout_ms = 60000};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;
        if (nt_run_spec(&spec, &r, &err) < 0)
                fail_msg("run nt_probe: %s", err.msg);
        if (r.exit_code != 0)
                fail_msg("nt_probe exited %d: %s", r.exit_code, r.err);
        assert_string_equal(r.out, "clone-newuser EPERM\n"
                                   "clone-newuser-newnet EPERM\n"
                                   "clone-newuser-newns EPERM\n"
                                   "clone-newuser-newpid EPERM\n"
                                   "clone3-newuser ENOSYS\n"
                                   "unshare-newuser EPERM\n"
                                   "unshare-newuser-newnet EPERM\n"
                                   "unshare-newuser-newuts EPERM\n"
                                   "unshare-newuser-newipc EPERM\n"
                                   "unshare-newuser-newcgroup EPERM\n"
                                   "io_uring_setup EPERM\n"
                                   "io_uring_enter EPERM\n"
                                   "io_uring_register EPERM\n"
                                   "add_key EPERM\n"
                                   "request_key EPERM\n"
                                   "keyctl EPERM\n"
                                   "ioctl-TIOCSTI EPERM\n"
                                   "ioctl-TIOCSTI-high-bits EPERM\n"
                                   "ioctl-TIOCLINUX EPERM\n"
                                   "ptrace EPERM\n"
                                   "process_vm_readv EPERM\n"
                                   "kcmp EPERM\n"
                                   "pidfd_getfd EPERM\n"
                                   "bpf EPERM\n"
                                   "perf_event_open EPERM\n"
                                   "userfaultfd EPERM\n"
                                   "mount EPERM\n"
                                   "fsopen EPERM\n"
                                   "open_tree EPERM\n"
                                   "setns EPERM\n"
                                   "set_mempolicy EPERM\n"
                                   "move_pages EPERM\n"
                                   "kexec_load EPERM\n"
                                   "init_module EPERM\n"
                                   "reboot EPERM\n"
                                   "control-getpid ok\n"
                                   "control-fork ok\n"
                                   "control-unshare-0 ok\n"
                                   "control-ioctl-FIONREAD ok\n"
                                   "control-pthread_create ok\n"
                                   "control-socket-AF_UNIX ok\n");
        cm_exec_result_clear(&r);
        (void)state;
}

/* ---- stop --------------------------------------------------------------- */

/* The cgroup of a container holds no process (or is gone). */
static void cgroup_empty(const char *id) {
        json_t *j = nt_inspect(id), *d;
        const char *k;
        json_object_foreach(json_object_get(json_object_get(j, "cgroup"), "dirs"), k, d) {
                cleanup_free char *procs = xasprintf("%s/cgroup.procs", json_string_value(d));
                char buf[64];
                int fd = open(procs, O_RDONLY | O_CLOEXEC);
                ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf) : 0;
                if (fd >= 0)
                        (void)close(fd);
                if (n != 0)
                        fail_msg("%s still holds processes after stop", procs);
        }
        json_decref(j);
}

/* stop with this grace on a main process that ignores SIGTERM: when stop
 * has returned, the init and the main process have exited (their pidfds
 * say so; the wait is generous for a loaded machine, but a process that
 * ignores TERM and is never killed would not exit at all), and the cgroup
 * is empty. */
static void stop_kills(int grace) {
        char *argv[] = {S("/probe/nt_probe"), S("ignore-term"), NULL};
        cleanup_free char *id = run_detached(argv, 128 << 20, 64, 0);
        pid_t init = init_pid(id), main = nt_main_pid(init);
        int ifd = nt_pidfd(init), mfd = nt_pidfd(main);
        cm_err err = CM_ERR_INIT;

        assert_int_equal(nt_b->ops->stop(nt_b, id, grace, &err), 0);
        if (!exited(mfd, 60000) || !exited(ifd, 60000))
                fail_msg("stop with grace %d returned, but %s still runs", grace, id);
        (void)waitpid(init, NULL, WNOHANG); /* ours, should stop not have reaped it */
        cgroup_empty(id);
        (void)close(ifd);
        (void)close(mfd);
        remove_container(id);
}

/* SIGTERM, then SIGKILL once the grace (the shortest: 1 s) is over; with
 * no grace, SIGKILL at once. */
static void test_stop_escalates_to_sigkill(void **state) {
        stop_kills(1);
        stop_kills(0);
        (void)state;
}

/* ---- the log cap -------------------------------------------------------- */

/* A detached container writes three times the cap: it runs to its end (the
 * log is drained past the cap, nobody blocks), the file on disk stops at
 * the cap plus the note that says so, and logs returns the output itself,
 * byte for byte, up to the cap. */
static void test_log_capped(void **state) {
        char *argv[] = {S("/probe/nt_probe"), S("spew"), S("12582912"), NULL};
        cleanup_free char *id = run_detached(argv, 128 << 20, 64, 0);
        int ifd = nt_pidfd(init_pid(id));
        cm_err err = CM_ERR_INIT;
        char *logs = NULL;
        size_t len = 0;
        struct stat st;
        json_t *j;
        cleanup_free char *path = NULL;

        assert_true(exited(ifd, 120000));
        (void)close(ifd);
        j = nt_inspect(id);
        assert_string_equal(json_string_value(json_object_get(j, "state")), "exited");
        assert_int_equal(json_integer_value(json_object_get(j, "exit_code")), 0); /* it wrote it all */
        path = xasprintf("%s/log", json_string_value(json_object_get(j, "dir")));
        json_decref(j);
        assert_int_equal(stat(path, &st), 0);
        if ((size_t)st.st_size < LOG_CAP || (size_t)st.st_size > LOG_CAP + 128)
                fail_msg("log file %s is %lld bytes; the cap is %zu", path, (long long)st.st_size, LOG_CAP);

        assert_int_equal(nt_b->ops->logs(nt_b, id, 0, 0, &logs, &len, &err), 0);
        assert_true(len >= LOG_CAP && len <= LOG_CAP + 128);
        for (size_t line = 0; line < LOG_CAP / 10; line += 4099) {
                char want[16];
                (void)snprintf(want, sizeof want, "%09zu\n", line);
                assert_memory_equal(logs + line * 10, want, 10);
        }
        free(logs);
        /* tail still answers from the capped file */
        assert_int_equal(nt_b->ops->logs(nt_b, id, 1, 0, &logs, &len, &err), 0);
        assert_true(len > 0 && len < 128);
        free(logs);
        remove_container(id);
        (void)state;
}

/* ---- the exec output cap ------------------------------------------------ */

static void exec_spew(const char *id, const char *bytes, size_t cap, cm_exec_result *r) {
        char *argv[] = {S("/probe/nt_probe"), S("spew"), S(bytes), NULL};
        cm_exec_spec es = {.argv = argv, .argc = 3, .timeout_ms = 60000, .output_cap = cap};
        cm_err err = CM_ERR_INIT;
        if (nt_b->ops->exec(nt_b, id, &es, NULL, r, &err) < 0)
                fail_msg("exec spew: %s", err.msg);
}

/* An exec's output stops at the cap (1 MiB a stream by default), the
 * command still runs to its end, and what is kept is its output's start. */
static void test_exec_output_capped(void **state) {
        char *argv[] = {S("/probe/nt_probe"), S("ignore-term"), NULL};
        cleanup_free char *id = run_detached(argv, 128 << 20, 64, 0);
        cm_exec_result r;

        exec_spew(id, "5000000", 0, &r);
        assert_int_equal(r.exit_code, 0);
        assert_false(r.timed_out);
        assert_int_equal(r.out_len, OUTPUT_CAP);
        assert_true(r.truncated);
        assert_memory_equal(r.out, "000000000\n000000001\n", 20);
        cm_exec_result_clear(&r);
        exec_spew(id, "50000", 1000, &r);
        assert_int_equal(r.exit_code, 0);
        assert_int_equal(r.out_len, 1000);
        assert_true(r.truncated);
        cm_exec_result_clear(&r);
        exec_spew(id, "500", 0, &r); /* under the cap: whole */
        assert_int_equal(r.out_len, 500);
        assert_false(r.truncated);
        cm_exec_result_clear(&r);
        remove_container(id);
        (void)state;
}

/* ---- a detached sandbox's limits ---------------------------------------- */

static void read_text(const char *path, char *buf, size_t size) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n;
        if (fd < 0)
                fail_msg("open %s: %s", path, strerror(errno));
        n = read(fd, buf, size - 1);
        (void)close(fd);
        assert_true(n >= 0);
        buf[n] = 0;
}

/* The limit line of /proc/<pid>/limits, e.g. "Max address space". */
static unsigned long long rlimit_of(pid_t pid, const char *name) {
        char path[64], buf[4096];
        const char *p;
        (void)snprintf(path, sizeof path, "/proc/%d/limits", (int)pid);
        read_text(path, buf, sizeof buf);
        p = strstr(buf, name);
        if (!p)
                fail_msg("%s has no %s", path, name);
        return strtoull(p + 26, NULL, 10); /* the soft limit's column */
}

/* memory, pids and cpus of a detached run are what the kernel enforces on
 * its main process: the cgroup's memory.max, pids.max and cpu.max (v2), or
 * without a cgroup the rlimits the fallback promises. */
static void test_detached_limits(void **state) {
        char *argv[] = {S("/probe/nt_probe"), S("ignore-term"), NULL};
        cleanup_free char *id = run_detached(argv, 96 << 20, 40, 0.5);
        pid_t main = nt_main_pid(init_pid(id));
        char buf[256], cg[512];
        json_t *j = nt_inspect(id), *dirs = json_object_get(json_object_get(j, "cgroup"), "dirs");
        const char *mode = json_string_value(json_object_get(json_object_get(j, "cgroup"), "mode"));
        /* v2: one dir, under the first controller's name */
        const char *v2 = mode && strcmp(mode, "v2") == 0 ? json_string_value(json_object_get(dirs, "memory")) : NULL;

        if (!nt_cgroups()) {
                assert_int_equal(rlimit_of(main, "Max address space"), 96 << 20);
                if (geteuid() != 0) /* real root ignores RLIMIT_NPROC: not set */
                        assert_int_equal(rlimit_of(main, "Max processes"), 40);
        } else if (v2) {
                /* the main process is in that cgroup, and it has the limits */
                (void)snprintf(buf, sizeof buf, "/proc/%d/cgroup", (int)main);
                read_text(buf, cg, sizeof cg);
                assert_non_null(strstr(cg, strrchr(v2, '/')));
                (void)snprintf(buf, sizeof buf, "%s/memory.max", v2);
                read_text(buf, cg, sizeof cg);
                assert_string_equal(cg, "100663296\n");
                (void)snprintf(buf, sizeof buf, "%s/pids.max", v2);
                read_text(buf, cg, sizeof cg);
                assert_string_equal(cg, "40\n");
                (void)snprintf(buf, sizeof buf, "%s/cpu.max", v2);
                read_text(buf, cg, sizeof cg);
                assert_string_equal(cg, "50000 100000\n");
        } else {
                /* v1: a dir per controller, the main process in each */
                static const struct {
                        const char *ctrl, *file, *want;
                } v1[] = {{"memory", "memory.limit_in_bytes", "100663296\n"},
                          {"pids", "pids.max", "40\n"},
                          {"cpu", "cpu.cfs_quota_us", "50000\n"},
                          {"cpu", "cpu.cfs_period_us", "100000\n"}};
                (void)snprintf(buf, sizeof buf, "/proc/%d/cgroup", (int)main);
                read_text(buf, cg, sizeof cg);
                for (size_t i = 0; i < ARRAY_SIZE(v1); i++) {
                        const char *dir = json_string_value(json_object_get(dirs, v1[i].ctrl));
                        char val[64];
                        if (!dir)
                                fail_msg("no %s cgroup: %s", v1[i].ctrl, mode);
                        assert_non_null(strstr(cg, strrchr(dir, '/')));
                        (void)snprintf(buf, sizeof buf, "%s/%s", dir, v1[i].file);
                        read_text(buf, val, sizeof val);
                        assert_string_equal(val, v1[i].want);
                }
        }
        json_decref(j);
        remove_container(id);
        (void)state;
}

/* ---- a detached sandbox's file systems ---------------------------------- */

static void exec_sh(const char *id, const char *script, cm_exec_result *r) {
        char *argv[] = {S("/bin/sh"), S("-c"), S(script), NULL};
        cm_exec_spec es = {.argv = argv, .argc = 3, .timeout_ms = 20000};
        cm_err err = CM_ERR_INIT;
        if (nt_b->ops->exec(nt_b, id, &es, NULL, r, &err) < 0)
                fail_msg("exec %s: %s", script, err.msg);
}

static char *run_fs(bool readonly) {
        char *argv[] = {S("/probe/nt_probe"), S("ignore-term"), NULL};
        cm_run_spec spec = {.image = "host",
                            .argv = argv,
                            .argc = 2,
                            .mounts = &probe_mount,
                            .n_mounts = 1,
                            .readonly_rootfs = readonly,
                            .tmpfs_bytes = 16 << 20};
        cm_err err = CM_ERR_INIT;
        char *id = NULL;
        if (nt_b->ops->run(nt_b, &spec, &id, &err) < 0)
                fail_msg("run: %s", err.msg);
        return id;
}

/* readonlyRootfs holds for every exec in a detached container, not only
 * for its main process; /tmp stays writable and has the size asked for;
 * without readonlyRootfs the root takes writes (so the refusal is the
 * setting's doing). */
static void test_detached_readonly_rootfs(void **state) {
        cleanup_free char *ro = run_fs(true), *rw = run_fs(false);
        cm_exec_result r;

        exec_sh(ro, "touch /x 2>&1; touch /root/x 2>&1; touch /tmp/x && echo tmp-ok; stat -f -c '%b %S' /tmp", &r);
        assert_non_null(strstr(r.out, "touch: cannot touch '/x': Read-only file system\n"));
        assert_non_null(strstr(r.out, "touch: cannot touch '/root/x': Read-only file system\n"));
        assert_non_null(strstr(r.out, "tmp-ok\n"));
        {
                unsigned long long blocks = 0, bsize = 0;
                const char *p = strstr(r.out, "tmp-ok\n") + 7;
                assert_int_equal(sscanf(p, "%llu %llu", &blocks, &bsize), 2);
                assert_int_equal(blocks * bsize, 16 << 20);
        }
        cm_exec_result_clear(&r);
        exec_sh(rw, "touch /x /root/x && echo root-ok", &r);
        assert_string_equal(r.out, "root-ok\n");
        cm_exec_result_clear(&r);
        remove_container(ro);
        remove_container(rw);
        (void)state;
}

/* ---- nothing of the host ------------------------------------------------ */

#define SERVER_SECRET "cm-server-secret-4c1d"
#define LEAK_NAME "cm-guards-leak"

/* A host fd without O_CLOEXEC, and a secret in the server's environment,
 * both there before the backend opens (so warm sandboxes have them too). */
static void plant_host_state(void) {
        (void)setenv("CM_GUARDS_SECRET", SERVER_SECRET, 1);
        if (syscall(SYS_memfd_create, LEAK_NAME, 0) < 0) {
                perror("memfd_create");
                exit(1);
        }
}

/* Every fd of pid, by the host's /proc: none may be the planted one, and
 * the main process has only its stdio. */
static void check_fds(pid_t pid, bool only_stdio) {
        char path[64];
        DIR *d;
        struct dirent *de;
        (void)snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
        d = opendir(path);
        if (!d && errno == EACCES && !only_stdio && geteuid() != 0) {
                /* a rootless server cannot look into its non-dumpable init;
                 * the root run checks the same code */
                printf("note: %s: %s, not checked here\n", path, strerror(errno));
                return;
        }
        if (!d)
                fail_msg("%s: %s", path, strerror(errno));
        while ((de = readdir(d))) {
                char link[PATH_MAX], target[PATH_MAX] = "";
                ssize_t n;
                if (de->d_name[0] == '.')
                        continue;
                (void)snprintf(link, sizeof link, "%s/%s", path, de->d_name);
                n = readlink(link, target, sizeof target - 1);
                if (n > 0)
                        target[n] = 0;
                if (strstr(target, LEAK_NAME))
                        fail_msg("pid %d holds the server's fd %s -> %s", (int)pid, de->d_name, target);
                if (only_stdio && atoi(de->d_name) > 2)
                        fail_msg("main process %d holds fd %s -> %s", (int)pid, de->d_name, target);
        }
        (void)closedir(d);
}

static void check_environ(pid_t pid) {
        char path[64], buf[65536];
        int fd;
        ssize_t n;
        (void)snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                fail_msg("%s: %s", path, strerror(errno));
        n = read(fd, buf, sizeof buf - 1);
        (void)close(fd);
        assert_true(n >= 0);
        buf[n] = 0;
        for (ssize_t i = 0; i < n; i++)
                if (!buf[i])
                        buf[i] = '\n';
        if (strstr(buf, SERVER_SECRET))
                fail_msg("pid %d has the server's environment: %s", (int)pid, buf);
}

/* "It holds nothing of the host": no fd and no environment of the server
 * reaches the init, the main process or an exec's command. */
static void test_nothing_of_the_host(void **state) {
        char *argv[] = {S("/probe/nt_probe"), S("ignore-term"), NULL};
        char *envv[] = {S("/bin/sh"), S("-c"), S("env; ls -l /proc/self/fd/"), NULL};
        cleanup_free char *id = run_detached(argv, 128 << 20, 64, 0);
        pid_t init = init_pid(id), main = nt_main_pid(init);
        cm_exec_spec es = {.argv = envv, .argc = 3, .timeout_ms = 20000};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;

        check_fds(init, false);
        check_fds(main, true);
        check_environ(main);
        if (nt_b->ops->exec(nt_b, id, &es, NULL, &r, &err) < 0)
                fail_msg("exec: %s", err.msg);
        assert_int_equal(r.exit_code, 0);
        assert_non_null(strstr(r.out, "PATH="));
        assert_null(strstr(r.out, SERVER_SECRET));
        assert_null(strstr(r.out, LEAK_NAME));
        cm_exec_result_clear(&r);
        remove_container(id);
        nt_sh("env; ls -l /proc/self/fd/", &r); /* and a run to completion */
        assert_non_null(strstr(r.out, "PATH="));
        assert_null(strstr(r.out, SERVER_SECRET));
        assert_null(strstr(r.out, LEAK_NAME));
        cm_exec_result_clear(&r);
        (void)state;
}

int main(int argc, char **argv) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_seccomp_rules),
                cmocka_unit_test(test_stop_escalates_to_sigkill),
                cmocka_unit_test(test_log_capped),
                cmocka_unit_test(test_exec_output_capped),
                cmocka_unit_test(test_detached_limits),
                cmocka_unit_test(test_nothing_of_the_host),
                cmocka_unit_test(test_detached_readonly_rootfs),
        };
        int r;
        find_probe();
        plant_host_state();
        nt_setup(argc, argv);
        r = cmocka_run_group_tests(tests, NULL, NULL);
        nt_teardown();
        return r;
}
