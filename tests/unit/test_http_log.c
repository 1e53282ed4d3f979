/* The event log of a request stream (issue 8, point 2): the ids it hands
 * out and takes back, what it counts as answered, and that nothing is
 * logged once it is finished. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"

#include <string.h>

#include "transport/http_log.h"

static void test_parse_id(void **state) {
        uint64_t stream = 0, seq = 0;
        (void)state;
        assert_true(http_log_parse_id("r12-0", &stream, &seq));
        assert_int_equal(stream, 12);
        assert_int_equal(seq, 0);
        assert_true(http_log_parse_id("r1-18446744", &stream, &seq));
        assert_int_equal(seq, 18446744);
        /* the session stream's ids, and anything malformed, are not ours */
        const char *bad[] = {"s12", "r12", "r-1", "r1-", "r1-2x", "r1--2", "R1-2", "r 1-2", "", "r12345678901234567890-1",
                             NULL};
        for (size_t i = 0; bad[i]; i++)
                assert_false(http_log_parse_id(bad[i], &stream, &seq));
        assert_false(http_log_parse_id(NULL, &stream, &seq));
}

static void test_streams_differ(void **state) {
        http_log *a = http_log_new(), *b = http_log_new();
        (void)state;
        assert_true(http_log_stream(a) != http_log_stream(b));
        http_log_unref(a);
        http_log_unref(b);
}

static void test_responded_and_finished(void **state) {
        http_log *g = http_log_new();
        mcp_sink *s = http_log_sink(g);
        const char *note = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}";
        const char *resp = "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}";
        int64_t at = -1;
        (void)state;
        assert_int_equal(s->send(s, note, strlen(note)), 0);
        assert_false(http_log_responded(g));
        assert_false(http_log_finished_at(g, &at));
        assert_int_equal(s->send(s, resp, strlen(resp)), 0);
        assert_true(http_log_responded(g));
        http_log_finish(g);
        assert_true(http_log_finished_at(g, &at));
        assert_true(at > 0);
        /* finished: a late message is refused, never logged */
        assert_true(s->send(s, note, strlen(note)) < 0);
        http_log_unref(g);
}

/* A log far over its byte cap keeps working (its oldest events go). */
static void test_bounded(void **state) {
        http_log *g = http_log_new();
        mcp_sink *s = http_log_sink(g);
        static char big[64 * 1024];
        (void)state;
        memset(big, 'x', sizeof big - 1);
        for (int i = 0; i < 200; i++) /* 12.8 MiB */
                assert_int_equal(s->send(s, big, strlen(big)), 0);
        http_log_finish(g);
        http_log_unref(g);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_id),
                cmocka_unit_test(test_streams_differ),
                cmocka_unit_test(test_responded_and_finished),
                cmocka_unit_test(test_bounded),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
