/* dexec's run log (tools/runlog.c): file names from hostile ids, the
 * record as one JSON line, a file that is not ours refused, and appends of
 * concurrent processes that never interleave. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/runlog.h"

static char dir[] = "/tmp/cm-runlog-XXXXXX";

static bool name_ok(const char *n) {
        if (!*n || *n == '.' || *n == '-' || strlen(n) > CM_RUNLOG_NAME_MAX)
                return false;
        for (const char *p = n; *p; p++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-~", *p))
                        return false;
        return true;
}

static void test_safe_names(void **state) {
        static const struct {
                const char *id;
                size_t len;
        } ids[] = {
                {"../../x", 7}, {"/etc/passwd", 11}, {".", 1}, {"..", 2}, {"", 0}, {"-rf", 3}, {".hidden", 7},
                {"a/b", 3}, {"a:b", 3}, {"a_b", 3}, {"a\0b", 3}, {"a", 1}, {"a\nb", 3}, {"\xc3\x9c\xf0\x9f\x99\x82", 6},
                {"~", 1}, {"x~0123456789abcdef", 18}, {"0123456789012345678901234567890123456789~", 41},
        };
        char *names[sizeof ids / sizeof ids[0]];
        char big[10240];
        (void)state;
        for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
                names[i] = cm_runlog_safe_name(ids[i].id, ids[i].len);
                assert_true(name_ok(names[i]));
                for (size_t j = 0; j < i; j++)
                        assert_string_not_equal(names[i], names[j]);
        }
        /* what needs no change is kept, and only that has no '~' */
        assert_string_equal(names[9], "a_b");
        assert_string_equal(names[11], "a");
        for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
                assert_true((strchr(names[i], '~') == NULL) == (i == 9 || i == 11));
        for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
                free(names[i]);
        memset(big, 'a', sizeof big);
        char *b = cm_runlog_safe_name(big, sizeof big), *b2 = cm_runlog_safe_name(big, sizeof big - 1);
        assert_true(name_ok(b));
        assert_string_not_equal(b, b2);
        char *kept = cm_runlog_safe_name(big, CM_RUNLOG_NAME_MAX);
        assert_int_equal(strlen(kept), CM_RUNLOG_NAME_MAX);
        free(b), free(b2), free(kept);
        char *f = cm_runlog_file_name("t", 1764620443064);
        assert_string_equal(f, "t.2025-12-01.jsonl");
        free(f);
}

static void test_line(void **state) {
        cm_runlog_record r = {.time_ms = 1764620443064, .container = "c", .container_id = "0123", .command = "echo \"x\"",
                              .shell = "bash", .stdin_bytes = 5, .exit_code = 3, .exited = true, .duration_ms = 7,
                              .out = "a\nb", .out_len = 3, .err = "\xff", .err_len = 1, .out_bytes = 3, .err_bytes = 1};
        size_t len;
        char *line = cm_runlog_line(&r, &len);
        (void)state;
        assert_int_equal(strlen(line), len);
        assert_int_equal(line[len - 1], '\n');
        assert_null(memchr(line, '\n', len - 1)); /* one line */
        json_t *o = json_loads(line, 0, NULL);
        assert_non_null(o);
        assert_string_equal(json_string_value(json_object_get(o, "time")), "2025-12-01T20:20:43.064Z");
        assert_string_equal(json_string_value(json_object_get(o, "stdout")), "a\nb");
        assert_string_equal(json_string_value(json_object_get(o, "stderr")), "\xef\xbf\xbd");
        assert_int_equal(json_integer_value(json_object_get(o, "exit_code")), 3);
        assert_null(json_object_get(o, "thread_id"));
        json_decref(o);
        free(line);
        r.exited = false; /* cancelled */
        line = cm_runlog_line(&r, &len);
        o = json_loads(line, 0, NULL);
        assert_true(json_is_null(json_object_get(o, "exit_code")));
        json_decref(o);
        free(line);
}

static void test_open_refuses(void **state) {
        cm_err err = CM_ERR_INIT;
        char p[256];
        (void)state;
        (void)snprintf(p, sizeof p, "%s/link", dir);
        assert_int_equal(symlink("/tmp/somewhere-else", p), 0);
        assert_true(cm_runlog_open(dir, "link", &err) < 0);
        (void)snprintf(p, sizeof p, "%s/fifo", dir);
        assert_int_equal(mkfifo(p, 0600), 0);
        assert_true(cm_runlog_open(dir, "fifo", &err) < 0);
        if (geteuid() == 0) {
                (void)snprintf(p, sizeof p, "%s/theirs", dir);
                int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
                assert_true(fd >= 0 && fchown(fd, 65534, 65534) == 0);
                (void)close(fd);
                assert_int_equal(cm_runlog_open(dir, "theirs", &err), -EPERM);
                assert_non_null(strstr(err.msg, "not a regular file of the server's user"));
        }
        int fd = cm_runlog_open(dir, "mine", &err);
        struct stat st;
        assert_true(fd >= 0 && fstat(fd, &st) == 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        (void)close(fd);
}

#define WRITERS 6
#define RECORDS 20
#define OUT (200 * 1024)

/* Each writer process appends RECORDS records of OUT bytes of its own
 * letter; the file must then hold every record, whole. */
static void test_concurrent_appends(void **state) {
        (void)state;
        for (int w = 0; w < WRITERS; w++) {
                pid_t pid = fork();
                assert_true(pid >= 0);
                if (pid == 0) {
                        cm_err err = CM_ERR_INIT;
                        char *out = malloc(OUT);
                        int fd = cm_runlog_open(dir, "shared.jsonl", &err);
                        memset(out, 'a' + w, OUT);
                        for (int i = 0; i < RECORDS && fd >= 0; i++) {
                                cm_runlog_record r = {.container = "c", .container_id = "c", .command = "x", .shell = "bash",
                                                      .exit_code = i, .exited = true, .out = out, .out_len = OUT, .err = "",
                                                      .out_bytes = OUT};
                                size_t len;
                                char *line = cm_runlog_line(&r, &len);
                                if (cm_runlog_append(fd, line, len, &err) < 0)
                                        _exit(1);
                                free(line);
                        }
                        _exit(fd >= 0 ? 0 : 1);
                }
        }
        for (int w = 0, st; w < WRITERS; w++) {
                assert_true(wait(&st) > 0);
                assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        }
        char p[256];
        (void)snprintf(p, sizeof p, "%s/shared.jsonl", dir);
        FILE *f = fopen(p, "re");
        assert_non_null(f);
        char *line = NULL;
        size_t cap = 0;
        int seen[WRITERS] = {0}, n = 0;
        while (getline(&line, &cap, f) > 0) {
                json_t *o = json_loads(line, 0, NULL);
                assert_non_null(o); /* a whole record, nothing of another in it */
                const char *out = json_string_value(json_object_get(o, "stdout"));
                assert_int_equal(strlen(out), OUT);
                assert_true(out[0] >= 'a' && out[0] < 'a' + WRITERS);
                assert_int_equal(strspn(out, (char[]){out[0], 0}), OUT);
                seen[out[0] - 'a']++;
                n++;
                json_decref(o);
        }
        free(line);
        (void)fclose(f);
        assert_int_equal(n, WRITERS * RECORDS);
        for (int w = 0; w < WRITERS; w++)
                assert_int_equal(seen[w], RECORDS);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_safe_names),
                cmocka_unit_test(test_line),
                cmocka_unit_test(test_open_refuses),
                cmocka_unit_test(test_concurrent_appends),
        };
        TU_RUN_IN_TMP(dir, tests);
}
