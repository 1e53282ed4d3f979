/* cm_parse_when: the three forms logs `since` takes, and what it refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"
#include <string.h>

#include "util/when.h"

#define NOW ((int64_t)1764421200000) /* 2025-11-29T13:00:00Z */

static int64_t when(const char *s) {
        cm_err err = CM_ERR_INIT;
        int64_t ms = -1;
        if (cm_parse_when(s, NOW, &ms, &err) < 0)
                fail_msg("\"%s\": %s", s, err.msg);
        return ms;
}

static void test_unix_seconds(void **state) {
        (void)state;
        assert_int_equal(when("0"), 0);
        assert_int_equal(when("1764421200"), NOW);
        assert_int_equal(when("1764421200.25"), NOW + 250);
}

static void test_rfc3339(void **state) {
        (void)state;
        assert_int_equal(when("2025-11-29T13:00:00Z"), NOW);
        assert_int_equal(when("2025-11-29t13:00:00z"), NOW);
        assert_int_equal(when("2025-11-29T13:00:00"), NOW); /* no zone: UTC */
        assert_int_equal(when("2025-11-29 13:00:00.5Z"), NOW + 500);
        assert_int_equal(when("2025-11-29T14:30:00+01:30"), NOW);
        assert_int_equal(when("2025-11-29T11:00:00-02:00"), NOW);
        assert_int_equal(when("2025-11-29"), NOW - 13 * 3600 * 1000);
        assert_int_equal(when("1970-01-01T00:00:00Z"), 0);
        assert_int_equal(when("2000-02-29T00:00:00Z"), (int64_t)951782400 * 1000); /* a leap day */
}

static void test_durations(void **state) {
        (void)state;
        assert_int_equal(when("10m"), NOW - 600000);
        assert_int_equal(when("1h30m"), NOW - 5400000);
        assert_int_equal(when("45s"), NOW - 45000);
        assert_int_equal(when("500ms"), NOW - 500);
        assert_int_equal(when("1.5h"), NOW - 5400000);
        assert_int_equal(when("2d"), NOW - 2 * 86400000LL);
}

static void test_refused(void **state) {
        static const char *const bad[] = {"",         "now",       "-10m",      "10",         "10 m",
                                          "1h-5m",    "m",         "2025-13-01", "2025-02-30", "2025-11-29T25:00:00Z",
                                          "2025-11-29T13:00Z", "2025-11-29T13:00:00+0100", "2025-11-29T13:00:00Zjunk",
                                          "1764421200x", "99999999999999999999", "--since=1"};
        (void)state;
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                cm_err err = CM_ERR_INIT;
                int64_t ms;
                /* "10" alone is unix seconds, the rest is refused */
                if (strcmp(bad[i], "10") == 0) {
                        assert_int_equal(cm_parse_when(bad[i], NOW, &ms, &err), 0);
                        assert_int_equal(ms, 10000);
                        continue;
                }
                if (cm_parse_when(bad[i], NOW, &ms, &err) == 0)
                        fail_msg("\"%s\" was read as %lld", bad[i], (long long)ms);
                assert_non_null(strstr(err.msg, "RFC 3339"));
        }
        {
                cm_err err = CM_ERR_INIT;
                int64_t ms;
                assert_true(cm_parse_when(NULL, NOW, &ms, &err) < 0);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_unix_seconds),
                cmocka_unit_test(test_rfc3339),
                cmocka_unit_test(test_durations),
                cmocka_unit_test(test_refused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
