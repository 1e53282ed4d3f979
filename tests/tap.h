/* Every cmocka test program speaks TAP to meson (protocol 'tap'), one line
 * per case, so a skipped case counts as a skip and not as a pass.
 *
 * Why not cmocka's own TAP output: cmocka 1.1.5 (Debian 12) writes a
 * skipped case as "not ok N # SKIP", which meson counts as a failure, and
 * it has no way to say why a case skipped.  And under the TAP protocol
 * meson takes exit status 77 for an error, so a program that cannot run
 * here says "1..0 # SKIP why" and exits 0 instead.
 *
 * How: before main, the real stdout is kept for the TAP lines only and
 * stdout becomes stderr, so whatever the tests and cmocka print (failure
 * messages, progress) still reaches the log without confusing the parser.
 * Each case runs as a one-case cmocka group; skip_because("why", ...) notes
 * the reason, which lands after "# SKIP".  A bare skip() does not compile:
 * every skip says why. */
#ifndef CM_TESTS_TAP_H
#define CM_TESTS_TAP_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static FILE *tap_out;    /* the program's real stdout */
static pid_t tap_pid;    /* forked children must not close the plan */
static bool tap_running; /* inside tap_run: a skip is one case's */
static bool tap_done;    /* the plan is complete */
static char tap_reason[400];

__attribute__((format(printf, 1, 0))) static inline void tap_vnote_skip(const char *fmt, va_list ap) {
        (void)vsnprintf(tap_reason, sizeof tap_reason, fmt, ap);
        for (char *p = tap_reason; *p; p++)
                if (*p == '\n' || *p == '\r')
                        *p = ' '; /* a TAP directive is one line */
        if (!tap_reason[0])
                (void)snprintf(tap_reason, sizeof tap_reason, "(no reason given)");
        fprintf(stderr, "SKIP: %s\n", tap_reason);
}

__attribute__((format(printf, 1, 2))) static inline void tap_note_skip(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        tap_vnote_skip(fmt, ap);
        va_end(ap);
}

/* Skip the running case, saying why (printf-style). */
#define skip_because(...)                                                                                              \
        do {                                                                                                           \
                tap_note_skip(__VA_ARGS__);                                                                            \
                _skip(__FILE__, __LINE__);                                                                             \
        } while (0)

#undef skip
#define skip() _Static_assert(0, "say why: skip_because(\"reason\")")

/* The whole program cannot run on this machine: one skip, with its reason.
 * Called from inside a case (a backend reopened mid-test), it skips that
 * case instead. */
#define skip_all_because(...)                                                                                          \
        do {                                                                                                           \
                if (tap_running)                                                                                       \
                        skip_because(__VA_ARGS__);                                                                     \
                tap_note_skip(__VA_ARGS__);                                                                            \
                fprintf(tap_out, "1..0 # SKIP %s\n", tap_reason);                                                      \
                (void)fflush(tap_out);                                                                                 \
                tap_done = true;                                                                                       \
                exit(0);                                                                                               \
        } while (0)

/* A program that ends without its plan (an early exit(0) before the cases)
 * must not pass for "no tests, all skipped". */
static inline void tap_at_exit(void) {
        if (tap_done || getpid() != tap_pid)
                return;
        fprintf(tap_out, "Bail out! the program ended before its tests ran\n");
        (void)fflush(tap_out);
}

__attribute__((constructor)) static inline void tap_init(void) {
        int fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
        if (fd < 0 || !(tap_out = fdopen(fd, "w")) || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
                perror("tap: keeping stdout for TAP");
                abort();
        }
        setvbuf(stdout, NULL, _IOLBF, 0);
        tap_pid = getpid();
        (void)atexit(tap_at_exit);
}

/* The group's setup runs once, inside cmocka (its asserts need a running
 * test), in the first one-case group, and its state goes to every case, as
 * cmocka would hand it; the teardown runs in the last group. */
static CMFixtureFunction tap_user_setup, tap_user_teardown;
static void *tap_group_state;
static bool tap_setup_ran;
static int tap_setup_rc;

static inline int tap_group_setup(void **state) {
        if (!tap_setup_ran) {
                tap_setup_ran = true;
                tap_setup_rc = -1; /* stays so if an assert jumps out of it */
                tap_setup_rc = tap_user_setup ? tap_user_setup(&tap_group_state) : 0;
        }
        *state = tap_group_state;
        return tap_setup_rc;
}

static inline int tap_group_teardown(void **state) {
        (void)state;
        return tap_user_teardown ? tap_user_teardown(&tap_group_state) : 0;
}

static inline int tap_run(const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                          CMFixtureFunction teardown) {
        int failed = 0;

        tap_user_setup = setup;
        tap_user_teardown = teardown;
        fprintf(tap_out, "1..%zu\n", n);
        (void)fflush(tap_out);
        tap_running = true;
        for (size_t i = 0; i < n; i++) {
                tap_reason[0] = '\0';
                if (_cmocka_run_group_tests(tests[i].name, &tests[i], 1, tap_group_setup,
                                            i + 1 == n && teardown ? tap_group_teardown : NULL) != 0) {
                        failed++;
                        fprintf(tap_out, "not ok %zu - %s\n", i + 1, tests[i].name);
                } else if (tap_reason[0])
                        fprintf(tap_out, "ok %zu - %s # SKIP %s\n", i + 1, tests[i].name, tap_reason);
                else
                        fprintf(tap_out, "ok %zu - %s\n", i + 1, tests[i].name);
                (void)fflush(tap_out);
        }
        tap_running = false;
        tap_done = true;
        return failed;
}

/* cmocka_run_group_tests, in TAP: test files call it as before. */
#undef cmocka_run_group_tests
#define cmocka_run_group_tests(tests, setup, teardown)                                                                 \
        tap_run(tests, sizeof(tests) / sizeof((tests)[0]), setup, teardown)

#endif
