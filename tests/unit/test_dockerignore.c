/* The .dockerignore matcher against Docker's own rules: the cases of
 * moby/patternmatcher's tests and of the builder's context walk. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"
#include <string.h>

#include "image/dockerignore.h"

static cm_dockerignore *parse(const char *text) {
        cm_dockerignore *d = cm_dockerignore_new();
        cm_err err = CM_ERR_INIT;
        if (cm_dockerignore_parse(d, text, strlen(text), &err) < 0)
                fail_msg("\"%s\": %s", text, err.msg);
        return d;
}

/* Each path's answer under the file's patterns: "+path" kept, "-path" left out. */
static void expect(const char *text, const char *const *cases, size_t n) {
        cm_dockerignore *d = parse(text);
        for (size_t i = 0; i < n; i++) {
                bool want = cases[i][0] == '-';
                if (cm_dockerignore_excluded(d, cases[i] + 1) != want)
                        fail_msg("patterns \"%s\": %s should be %s", text, cases[i] + 1, want ? "excluded" : "kept");
        }
        cm_dockerignore_free(d);
}
#define EXPECT(text, ...)                                                                                              \
        do {                                                                                                           \
                static const char *const c_[] = {__VA_ARGS__};                                                         \
                expect(text, c_, sizeof c_ / sizeof c_[0]);                                                            \
        } while (0)

static void test_plain_and_dirs(void **state) {
        (void)state;
        EXPECT("", "+a", "+a/b");
        EXPECT("secret.txt", "-secret.txt", "+sub/secret.txt", "+secret.txt.bak");
        /* a directory takes everything below it */
        EXPECT("build", "-build", "-build/x", "-build/a/b/c", "+builder", "+src/build");
        EXPECT("build/", "-build/x");
        EXPECT("/abs/x", "-abs/x", "+x");
        EXPECT("a//b/./c/../d", "-a/b/d", "+a/b/c");
}

static void test_wildcards(void **state) {
        (void)state;
        EXPECT("*.log", "-a.log", "-.log", "+dir/a.log", "-x.log/inner");
        EXPECT("*/*.log", "-dir/a.log", "+a.log", "+a/b/c.log");
        EXPECT("a?c", "-abc", "+a/c", "+abbc");
        EXPECT("[a-c]x", "-ax", "-cx", "+dx");
        EXPECT("[^a-c]x", "+ax", "-dx");
        EXPECT("\\*x", "-*x", "+ax");
        EXPECT("a.b", "-a.b", "+axb"); /* . is no regular expression here */
}

static void test_double_star(void **state) {
        (void)state;
        EXPECT("**/*.log", "-a.log", "-d/a.log", "-d/e/f/a.log", "+a.txt");
        EXPECT("**", "-a", "-a/b");
        EXPECT("a/**", "-a/b", "-a/b/c", "+b");
        EXPECT("a/**/b", "-a/b", "-a/x/b", "-a/x/y/b", "+a/xb", "+ab");
        EXPECT("**/x", "-x", "-q/x", "+qx");
        EXPECT("dir/**/*.go", "-dir/a.go", "-dir/p/q/a.go", "+other/a.go");
}

static void test_exceptions(void **state) {
        (void)state;
        /* last match wins */
        EXPECT("*.md\n!README.md", "-a.md", "+README.md");
        EXPECT("!README.md\n*.md", "-README.md");
        EXPECT("docs\n!docs/keep.txt", "-docs/a", "+docs/keep.txt");
        EXPECT("docs\n!docs/keep.txt\ndocs/keep.txt", "-docs/keep.txt");
        EXPECT("*\n!src\nsrc/*.tmp", "-x", "+src", "+src/a.c", "-src/a.tmp");
}

static void test_file_syntax(void **state) {
        (void)state;
        EXPECT("# a comment\n\n  spaced.txt  \r\n#x.txt\n", "-spaced.txt", "+#x.txt", "+a comment");
        EXPECT("\xEF\xBB\xBF" "bom.txt", "-bom.txt");
        EXPECT(" # not a comment", "-# not a comment", "+x"); /* only a # in the first column is */
        EXPECT("!  spaced", "+spaced");
        EXPECT("caf\xC3\xA9", "-caf\xC3\xA9", "+cafe");
        EXPECT("caf?", "-caf\xC3\xA9"); /* ? takes one character, not one byte */
        EXPECT("../up", "-../up", "+up");
}

static void test_enter(void **state) {
        cm_dockerignore *d = parse("docs\n!docs/keep/file\nbuild\n!*/x");
        (void)state;
        assert_true(cm_dockerignore_enter(d, "docs"));
        assert_true(cm_dockerignore_enter(d, "docs/keep"));
        assert_false(cm_dockerignore_enter(d, "build")); /* no exception starts with build/ */
        assert_false(cm_dockerignore_enter(d, "doc"));
        cm_dockerignore_free(d);
        d = parse("docs");
        assert_false(cm_dockerignore_enter(d, "docs"));
        cm_dockerignore_free(d);
}

static void test_refused(void **state) {
        static const char *const bad[] = {"!", "a[b", "[", "[z-a]", "ok\n!\n", "x\\[y\n[\n"};
        (void)state;
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                cm_dockerignore *d = cm_dockerignore_new();
                cm_err err = CM_ERR_INIT;
                if (cm_dockerignore_parse(d, bad[i], strlen(bad[i]), &err) == 0)
                        fail_msg("\"%s\" was taken", bad[i]);
                assert_non_null(strstr(err.msg, ".dockerignore line"));
                cm_dockerignore_free(d);
        }
        {
                cm_dockerignore *d = cm_dockerignore_new();
                cm_err err = CM_ERR_INIT;
                assert_true(cm_dockerignore_parse(d, "a\0b", 3, &err) < 0);
                assert_non_null(strstr(err.msg, "NUL"));
                cm_dockerignore_free(d);
        }
}

/* A pattern that would take a backtracking matcher exponential time. */
static void test_no_blowup(void **state) {
        char pat[2048], path[4096];
        size_t n = 0;
        (void)state;
        for (int i = 0; i < 300; i++)
                n += (size_t)snprintf(pat + n, sizeof pat - n, "**a*");
        pat[n - 1] = 'b';
        memset(path, 'a', sizeof path - 1);
        path[sizeof path - 1] = 0;
        cm_dockerignore *d = parse(pat);
        assert_false(cm_dockerignore_excluded(d, path));
        cm_dockerignore_free(d);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_plain_and_dirs), cmocka_unit_test(test_wildcards),
                cmocka_unit_test(test_double_star),    cmocka_unit_test(test_exceptions),
                cmocka_unit_test(test_file_syntax),    cmocka_unit_test(test_enter),
                cmocka_unit_test(test_refused),        cmocka_unit_test(test_no_blowup),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
