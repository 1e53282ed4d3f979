/* The apple backend's pure parts: the argv of each `container` command (as
 * the first seed verified them against the real CLI), the refusals that keep
 * agent values from becoming the CLI's own flags, the parsers of its JSON,
 * and the spawner (a real child process: exit code, streams, cap, stdin,
 * timeout, cancel). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "backend/apple/internal.h"
#include "util/cleanup.h"
#include "util/json.h"

#define CLI "/opt/container"
/* argv elements are char * (as execve takes them); these are never written. */
#define W(s) ((char *)(s))

static void assert_argv(const apple_argv *a, const char *const *want) {
        size_t n = 0;
        while (want[n])
                n++;
        for (size_t i = 0; i < a->n || i < n; i++) {
                const char *got = i < a->n ? a->v[i] : "(end)", *exp = i < n ? want[i] : "(end)";
                if (strcmp(got, exp) != 0)
                        fail_msg("argv[%zu]: got \"%s\", expected \"%s\"", i, got, exp);
        }
        assert_null(a->v[a->n]);
}

static const cm_kv LABELS[] = {{"dev.container-mcp.managed", "true"}, {"dev.container-mcp.client", "a = b\nc"}};

static void test_run_detached(void **state) {
        char *cmd[] = {W("sh"), W("-c"), W("echo hi; ls -la")};
        cm_kv env[] = {{"A", "x=y z"}};
        cm_mount mounts[] = {{"/home/u/p", "/work", false}, {"/data", "/ro", true}};
        cm_port ports[] = {{8080, 80, "tcp"}};
        cm_run_spec s = {.image = "python:3.12-alpine", .argv = cmd, .argc = 3, .env = env, .n_env = 1,
                         .workdir = "/work", .labels = LABELS, .n_labels = 2, .cpus = 1.5, .memory_bytes = (512 << 20) + 1,
                         .mounts = mounts, .n_mounts = 2, .ports = ports, .n_ports = 1};
        apple_argv a = {0};
        cm_err err = CM_ERR_INIT;
        (void)state;
        assert_int_equal(apple_run_argv(CLI, &s, "web", true, &a, &err), 0);
        assert_argv(&a, (const char *const[]){CLI, "run", "-d", "--name", "web", "--label", "dev.container-mcp.managed=true",
                                              "--label", "dev.container-mcp.client=a = b\nc", "--network", "none", "--cpus", "2",
                                              "--memory", "513M", "--env", "A=x=y z", "--workdir", "/work", "--volume",
                                              "/home/u/p:/work", "--volume", "/data:/ro:ro", "--publish",
                                              "127.0.0.1:8080:80/tcp", "python:3.12-alpine", "sh", "-c", "echo hi; ls -la",
                                              NULL});
        apple_argv_free(&a);
}

static void test_run_wait_network(void **state) {
        char *cmd[] = {W("true")};
        cm_run_spec s = {.image = "alpine", .argv = cmd, .argc = 1, .network = true, .cpus = 0.25, .readonly_rootfs = true};
        apple_argv a = {0};
        cm_err err = CM_ERR_INIT;
        (void)state;
        assert_int_equal(apple_run_argv(CLI, &s, "cm-1", false, &a, &err), 0);
        /* network allowed: no --network at all (Apple's default network) */
        assert_argv(&a, (const char *const[]){CLI, "run", "--rm", "--name", "cm-1", "--cpus", "1", "--read-only", "alpine",
                                              "true", NULL});
        apple_argv_free(&a);
}

/* Each refusal: nonzero, the message says why, *ret untouched. */
static void refused_run(cm_run_spec *s, const char *name, const char *why) {
        apple_argv a = {(char **)0x1, 7, 7};
        cm_err err = CM_ERR_INIT;
        assert_true(apple_run_argv(CLI, s, name, true, &a, &err) < 0);
        if (!strstr(err.msg, why))
                fail_msg("message \"%s\" lacks \"%s\"", err.msg, why);
        assert_true(a.v == (char **)0x1 && a.n == 7);
}

static void test_run_refusals(void **state) {
        char *dash[] = {W("--privileged")}, *it[] = {W("-it"), W("sh")}, *ok[] = {W("id")};
        cm_kv bad_env[] = {{"-e", "x"}};
        cm_mount colon[] = {{"/a:b", "/c", false}};
        cm_run_spec s = {.image = "alpine", .argv = dash, .argc = 1};
        (void)state;
        refused_run(&s, NULL, "command[0] \"--privileged\" starts with '-'");
        s.argv = it;
        s.argc = 2;
        refused_run(&s, NULL, "\"-it\" starts with '-'");
        s.argv = ok;
        s.argc = 1;
        refused_run(&s, "--rm", "name \"--rm\" starts with '-'");
        s.workdir = "-w";
        refused_run(&s, NULL, "workdir \"-w\"");
        s.workdir = NULL;
        s.env = bad_env;
        s.n_env = 1;
        refused_run(&s, NULL, "env \"-e=x\"");
        s.n_env = 0;
        s.mounts = colon;
        s.n_mounts = 1;
        refused_run(&s, NULL, "holds ':'");
        s.n_mounts = 0;
        s.image = "--privileged";
        refused_run(&s, NULL, "image \"--privileged\"");
}

static void test_exec(void **state) {
        char *cmd[] = {W("ls"), W("-la"), W("--"), W("/")};
        cm_kv env[] = {{"K", "v"}};
        cm_exec_spec s = {.argv = cmd, .argc = 4, .env = env, .n_env = 1, .workdir = "/tmp", .stdin_data = "x", .stdin_len = 1};
        apple_argv a = {0};
        cm_err err = CM_ERR_INIT;
        (void)state;
        assert_int_equal(apple_exec_argv(CLI, "box", &s, &a, &err), 0);
        /* no `--` of ours between the id and the command: Apple would run it */
        assert_argv(&a, (const char *const[]){CLI, "exec", "--interactive", "--env", "K=v", "--workdir", "/tmp", "box", "ls",
                                              "-la", "--", "/", NULL});
        apple_argv_free(&a);
        s.stdin_data = NULL;
        s.n_env = 0;
        s.workdir = NULL;
        assert_int_equal(apple_exec_argv(CLI, "box", &s, &a, &err), 0);
        assert_argv(&a, (const char *const[]){CLI, "exec", "box", "ls", "-la", "--", "/", NULL});
        apple_argv_free(&a);
}

static void test_exec_refusals(void **state) {
        char *priv[] = {W("--privileged")}, *it[] = {W("-it"), W("sh")}, *dd[] = {W("--"), W("sh")}, *ok[] = {W("id")};
        cm_kv env[] = {{"--env-file", "/etc/shadow"}};
        struct {
                cm_exec_spec s;
                const char *id, *why;
        } cases[] = {
                {{.argv = priv, .argc = 1}, "box", "command[0] \"--privileged\""},
                {{.argv = it, .argc = 2}, "box", "command[0] \"-it\""},
                {{.argv = dd, .argc = 2}, "box", "command[0] \"--\""},
                {{.argv = ok, .argc = 1, .workdir = "--user=root"}, "box", "workdir \"--user=root\""},
                {{.argv = ok, .argc = 1, .env = env, .n_env = 1}, "box", "env \"--env-file=/etc/shadow\""},
                {{.argv = ok, .argc = 1}, "-u", "container \"-u\""},
                {{.argv = ok, .argc = 0}, "box", "at least the program"},
        };
        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                apple_argv a = {(char **)0x1, 3, 3};
                cm_err err = CM_ERR_INIT;
                assert_true(apple_exec_argv(CLI, cases[i].id, &cases[i].s, &a, &err) < 0);
                if (!strstr(err.msg, cases[i].why))
                        fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err.msg, cases[i].why);
                assert_true(a.v == (char **)0x1 && a.n == 3);
        }
}

static void test_cp_and_id(void **state) {
        apple_argv a = {0};
        cm_err err = CM_ERR_INIT;
        (void)state;
        assert_int_equal(apple_cp_argv(CLI, "box", "/h/in.txt", "/data/in.txt", true, &a, &err), 0);
        assert_argv(&a, (const char *const[]){CLI, "cp", "/h/in.txt", "box:/data/in.txt", NULL});
        apple_argv_free(&a);
        assert_int_equal(apple_cp_argv(CLI, "box", "/h/out", "/data/x", false, &a, &err), 0);
        assert_argv(&a, (const char *const[]){CLI, "cp", "box:/data/x", "/h/out", NULL});
        apple_argv_free(&a);
        assert_true(apple_cp_argv(CLI, "box", "/h/a:b", "/x", true, &a, &err) < 0);
        assert_non_null(strstr(err.msg, "holds ':'"));
        assert_true(apple_cp_argv(CLI, "box", "/h/a", "/x:y", false, &a, &err) < 0);
        assert_int_equal(apple_id_argv(CLI, "stop", (const char *const[]){"-t", "10", NULL}, "box", &a, &err), 0);
        assert_argv(&a, (const char *const[]){CLI, "stop", "-t", "10", "box", NULL});
        apple_argv_free(&a);
        assert_true(apple_id_argv(CLI, "delete", NULL, "--all", &a, &err) < 0);
        assert_non_null(strstr(err.msg, "container \"--all\" starts with '-'"));
}

/* As `container ls --all --format json` prints them (the first seed's
 * shape: labels under configuration.labels; createdAt a Swift date). */
static const char LIST[] =
        "[{\"status\":\"running\",\"networks\":[],\"configuration\":{\"id\":\"web\",\"image\":{\"reference\":\"alpine:3.20\"},"
        "\"labels\":{\"dev.container-mcp.managed\":\"true\",\"k\":\"a=b c\"},\"metadata\":{\"createdAt\":786240000.5},"
        "\"initProcess\":{\"executable\":\"sleep\",\"arguments\":[\"60\"],\"environment\":[\"A=1\"],\"workingDirectory\":\"/w\"},"
        "\"resources\":{\"cpus\":2,\"memoryInBytes\":536870912},\"networks\":[],"
        "\"publishedPorts\":[{\"hostAddress\":\"127.0.0.1\",\"hostPort\":8080,\"containerPort\":80,\"proto\":\"tcp\"}]}},"
        "{\"status\":\"stopped\",\"configuration\":{\"id\":\"old\",\"image\":{\"reference\":\"busybox\"},\"labels\":[1,2],"
        "\"networks\":[{\"network\":\"default\"}]}},"
        "{\"status\":\"running\",\"configuration\":{\"image\":{\"reference\":\"no-id\"}}},"
        "{\"status\":\"running\",\"configuration\":{\"id\":\"odd\",\"labels\":{\"dev.container-mcp.managed\":true}}}]";

static void test_parse_list(void **state) {
        cm_container_info *v = NULL;
        size_t n = 0;
        cm_err err = CM_ERR_INIT;
        (void)state;
        assert_int_equal(apple_parse_list(LIST, strlen(LIST), true, &v, &n, &err), 0);
        assert_int_equal(n, 3); /* the one without an id is no container */
        assert_string_equal(v[0].id, "web");
        assert_string_equal(v[0].name, "web");
        assert_string_equal(v[0].image, "alpine:3.20");
        assert_string_equal(v[0].state, "running");
        assert_int_equal(v[0].created_at, 786240000 + 978307200); /* 2025-12-01, from 2001-01-01 */
        assert_int_equal(v[0].n_labels, 2);
        assert_string_equal(v[0].labels[1].value, "a=b c");
        assert_string_equal(v[1].state, "exited");
        assert_int_equal(v[1].n_labels, 0); /* labels not an object: none, so unmanaged */
        assert_int_equal(v[2].n_labels, 0); /* a non-string label value is not read as "true" */
        for (size_t i = 0; i < n; i++)
                cm_container_info_clear(&v[i]);
        free(v);
        assert_int_equal(apple_parse_list(LIST, strlen(LIST), false, &v, &n, &err), 0);
        assert_int_equal(n, 2); /* --format json lists all; the stopped one is left out */
        for (size_t i = 0; i < n; i++)
                cm_container_info_clear(&v[i]);
        free(v);
        assert_true(apple_parse_list("{\"a\":1}", 7, true, &v, &n, &err) < 0);
        assert_int_equal(err.code, EPROTO);
        assert_true(apple_parse_list("Error: x", 8, true, &v, &n, &err) < 0);
}

static void test_parse_inspect(void **state) {
        cleanup_free char *doc = NULL;
        cm_err err = CM_ERR_INIT;
        json_error_t jerr;
        (void)state;
        assert_int_equal(apple_parse_inspect(LIST, strlen(LIST), "web", &doc, &err), 0);
        cleanup_json json_t *j = json_loads(doc, 0, &jerr);
        assert_non_null(j);
        assert_string_equal(cm_json_str(j, "id"), "web");
        assert_string_equal(cm_json_str(j, "runtime"), "apple");
        assert_string_equal(cm_json_str(j, "workdir"), "/w");
        assert_true(json_is_false(json_object_get(j, "network")));
        assert_string_equal(cm_json_str(json_object_get(j, "labels"), "k"), "a=b c");
        assert_string_equal(cm_json_str(json_object_get(json_object_get(j, "configuration"), "labels"), "k"), "a=b c");
        assert_int_equal(json_array_size(json_object_get(j, "argv")), 2);
        assert_int_equal(json_integer_value(json_object_get(json_array_get(json_object_get(j, "ports"), 0), "host_port")),
                         8080);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "limits"), "memory_bytes")), 536870912);
        assert_int_equal(apple_parse_inspect("[]", 2, "web", &doc, &err), -ENOENT);
        assert_non_null(strstr(err.msg, "no container \"web\""));
        {
                cleanup_free char *d2 = NULL;
                assert_int_equal(apple_parse_inspect(LIST, strlen(LIST), "old", &d2, &err), 0);
                cleanup_json json_t *j2 = json_loads(d2, 0, NULL);
                assert_true(json_is_true(json_object_get(j2, "network")));
        }
}

static void test_parse_stats(void **state) {
        static const char s[] = "[{\"id\":\"web\",\"memoryUsageBytes\":1048576,\"memoryLimitBytes\":536870912,"
                                "\"cpuUsageUsec\":1234,\"blockReadBytes\":4096,\"blockWriteBytes\":8192,\"numProcesses\":3}]";
        cm_stats st;
        cm_err err = CM_ERR_INIT;
        (void)state;
        assert_int_equal(apple_parse_stats(s, strlen(s), &st, &err), 0);
        assert_int_equal(st.cpu_usec, 1234);
        assert_int_equal(st.memory_bytes, 1048576);
        assert_int_equal(st.memory_limit_bytes, 536870912);
        assert_int_equal(st.pids, 3);
        assert_int_equal(st.io_write_bytes, 8192);
        assert_true(apple_parse_stats("[]", 2, &st, &err) < 0);
}

static void test_time(void **state) {
        json_t *s = json_string("2025-12-01T00:00:00Z"), *d = json_real(0);
        (void)state;
        assert_int_equal(apple_unix_time(s), 1764547200);
        assert_int_equal(apple_unix_time(d), 978307200);
        assert_int_equal(apple_unix_time(NULL), 0);
        json_decref(s);
        json_decref(d);
}

static int spawn_sh(const char *script, const cm_spawn_io *io, cm_exec_result *r, cm_err *err) {
        char *argv[] = {W("/bin/sh"), W("-c"), W(script), NULL};
        return cm_spawn(argv, io, r, err);
}

static void test_spawn(void **state) {
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;
        cm_spawn_io io = {NULL, 0, 60000, NULL, 1 << 20};
        (void)state;
        assert_int_equal(spawn_sh("echo out; echo err >&2; exit 3", &io, &r, &err), 0);
        assert_int_equal(r.exit_code, 3);
        assert_string_equal(r.out, "out\n");
        assert_string_equal(r.err, "err\n");
        assert_false(r.truncated || r.timed_out);
        cm_exec_result_clear(&r);
        /* stdin fed, and closed after it (cat ends) */
        io.stdin_data = "fed\n";
        io.stdin_len = 4;
        assert_int_equal(spawn_sh("cat", &io, &r, &err), 0);
        assert_string_equal(r.out, "fed\n");
        cm_exec_result_clear(&r);
        io.stdin_data = NULL;
        io.cap = 10;
        assert_int_equal(spawn_sh("printf 0123456789abcdef", &io, &r, &err), 0);
        assert_int_equal(r.out_len, 10);
        assert_true(r.truncated);
        cm_exec_result_clear(&r);
        char *missing[] = {W("/nonexistent/container"), NULL};
        /* posix_spawn reports the failed exec (glibc, macOS), or the child
         * exits 127 (where it is fork and exec, as under valgrind) */
        if (cm_spawn(missing, &io, &r, &err) == 0) {
                assert_int_equal(r.exit_code, 127);
                cm_exec_result_clear(&r);
        } else
                assert_non_null(strstr(err.msg, "/nonexistent/container"));
}

/* A CLI that ignores SIGTERM and hangs: killed at the deadline (SIGKILL
 * after the grace), the whole group with it. */
static void test_spawn_timeout(void **state) {
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;
        cm_spawn_io io = {NULL, 0, 300, NULL, 1 << 20};
        (void)state;
        assert_int_equal(spawn_sh("trap '' TERM; echo $$; sleep 600 & echo $!; wait", &io, &r, &err), 0);
        assert_true(r.timed_out);
        assert_int_equal(r.exit_code, 128 + SIGKILL);
        {
                long sh, child;
                assert_int_equal(sscanf(r.out, "%ld\n%ld", &sh, &child), 2);
                /* the background sleep was in the group: gone too (a zombie
                 * reaped by init at most) */
                for (int i = 0; i < 600 && kill((pid_t)child, 0) == 0; i++)
                        (void)usleep(50000); /* bounded poll for init's reaping, not a sync sleep */
                assert_true(kill((pid_t)child, 0) < 0);
        }
        cm_exec_result_clear(&r);
}

static void test_spawn_cancel(void **state) {
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;
        int p[2];
        assert_int_equal(pipe(p), 0);
        cm_cancel c = {p[0]};
        cm_spawn_io io = {NULL, 0, 0, &c, 1 << 20};
        (void)state;
        assert_int_equal(write(p[1], "x", 1), 1); /* cancelled before it even started: still stopped */
        assert_int_equal(spawn_sh("sleep 600", &io, &r, &err), -ECANCELED);
        assert_non_null(strstr(err.msg, "cancelled"));
        (void)close(p[0]);
        (void)close(p[1]);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_run_detached),  cmocka_unit_test(test_run_wait_network),
                cmocka_unit_test(test_run_refusals),  cmocka_unit_test(test_exec),
                cmocka_unit_test(test_exec_refusals), cmocka_unit_test(test_cp_and_id),
                cmocka_unit_test(test_parse_list),    cmocka_unit_test(test_parse_inspect),
                cmocka_unit_test(test_parse_stats),   cmocka_unit_test(test_time),
                cmocka_unit_test(test_spawn),         cmocka_unit_test(test_spawn_timeout),
                cmocka_unit_test(test_spawn_cancel),
        };
        signal(SIGPIPE, SIG_IGN); /* as the server does */
        return cmocka_run_group_tests(tests, NULL, NULL);
}
