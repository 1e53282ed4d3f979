/* The file tools' pure parts (src/tools/filetext.c): paths as container
 * paths, extensions, line ranges, and the conversions between a file's
 * bytes and a tool's text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"
#include <stdlib.h>
#include <string.h>

#include "tools/filetext.h"
#include "util/cleanup.h"

static void path_is(const char *in, size_t len, const char *want) {
        cm_err err = CM_ERR_INIT;
        char *out = NULL;
        if (cm_file_path(in, len, &out, &err) < 0)
                fail_msg("\"%s\": %s", in, err.msg);
        assert_string_equal(out, want);
        free(out);
}

static void test_paths(void **state) {
        (void)state;
        path_is("a.txt", 5, "/workspace/a.txt");
        path_is("./d//e/./f.txt", 14, "/workspace/d/e/f.txt");
        path_is("/etc/passwd", 11, "/etc/passwd");
        path_is("/", 1, "/");
        path_is("//x//", 5, "/x");
        path_is(".", 1, "/workspace");
        /* .. stays: the backend resolves it inside the container's root */
        path_is("../../etc/passwd", 16, "/workspace/../../etc/passwd");
        path_is("/a/../b", 7, "/a/../b");
}

static void test_paths_refused(void **state) {
        char long_name[300];
        cm_err err = CM_ERR_INIT;
        char *out = NULL;
        (void)state;
        assert_true(cm_file_path("", 0, &out, &err) < 0);
        assert_true(cm_file_path("a\0b", 3, &out, &err) < 0);
        assert_non_null(strstr(err.msg, "NUL"));
        memset(long_name, 'n', sizeof long_name);
        assert_true(cm_file_path(long_name, 256, &out, &err) < 0);
        assert_non_null(strstr(err.msg, "NAME_MAX"));
        {
                char want[300] = "/workspace/";
                memset(want + 11, 'n', 255);
                want[11 + 255] = 0;
                path_is(long_name, 255, want);
        }
        assert_null(out);
}

static void test_extensions(void **state) {
        char txt[] = "txt", md[] = "md";
        char *exts[] = {txt, md, NULL};
        (void)state;
        assert_true(cm_file_ext_allowed(NULL, "/x/run.sh"));
        assert_true(cm_file_ext_allowed(exts, "/x/a.txt"));
        assert_true(cm_file_ext_allowed(exts, "/x/A.TXT"));
        assert_true(cm_file_ext_allowed(exts, "b.tar.md"));
        assert_false(cm_file_ext_allowed(exts, "/x/a.txt.sh"));
        assert_false(cm_file_ext_allowed(exts, "/x.txt/noext"));
        assert_false(cm_file_ext_allowed(exts, "/x/.txt"));
        assert_false(cm_file_ext_allowed(exts, "/x/a."));
}

static void lines_are(const char *p, size_t off, size_t lim, const char *want) {
        size_t start, len;
        cm_text_lines(p, strlen(p), off, lim, &start, &len);
        assert_int_equal(len, strlen(want));
        assert_memory_equal(p + start, want, len);
}

static void test_lines(void **state) {
        (void)state;
        lines_are("a\nb\nc\n", 0, 0, "a\nb\nc\n");
        lines_are("a\nb\nc\n", 1, 1, "b\n");
        lines_are("a\nb\nc", 2, 5, "c");
        lines_are("a\nb\nc\n", 3, 0, "");
        lines_are("a\nb\nc\n", 9, 2, "");
        lines_are("", 0, 1, "");
        lines_are("\n\n\n", 1, 1, "\n");
}

static char *decode(const char *enc, const char *p, size_t n, size_t *ret_len, cm_err *err) {
        char *out = NULL;
        return cm_text_decode(enc, p, n, &out, ret_len, err) < 0 ? NULL : out;
}

static char *encode(const char *enc, const char *p, size_t n, size_t *ret_len, cm_err *err) {
        char *out = NULL;
        return cm_text_encode(enc, p, n, &out, ret_len, err) < 0 ? NULL : out;
}

static void test_utf8(void **state) {
        static const char *bad[] = {"\xff", "\xc0\xaf" /* overlong / */, "\xed\xa0\x80" /* surrogate */,
                                    "\xf4\x90\x80\x80" /* over U+10FFFF */, "ok\xe2\x82" /* cut */};
        cm_err err = CM_ERR_INIT;
        size_t n;
        char *out;
        (void)state;
        out = decode("utf-8",
                     "gr\xc3\xbc\xc3\x9f"
                     "e\0x",
                     9, &n, &err);
        assert_non_null(out);
        assert_int_equal(n, 9); /* a NUL is kept */
        assert_memory_equal(out,
                            "gr\xc3\xbc\xc3\x9f"
                            "e\0x",
                            9);
        free(out);
        out = decode("UTF8", "\xf0\x9f\x8e\x89", 4, &n, &err);
        assert_non_null(out);
        free(out);
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                assert_null(decode("utf-8", bad[i], strlen(bad[i]), &n, &err));
                assert_non_null(strstr(err.msg, "base64"));
        }
}

static void test_base64(void **state) {
        static const struct {
                const char *raw, *b64;
        } v[] = {{"", ""},
                 {"f", "Zg=="},
                 {"fo", "Zm8="},
                 {"foo", "Zm9v"},
                 {"foob", "Zm9vYg=="},
                 {"fooba", "Zm9vYmE="},
                 {"foobar", "Zm9vYmFy"}};
        static const char *bad[] = {"Zg=a", "Z", "Zm9v!", "Zg===", "=Zg=", "Zm9vY"};
        unsigned char all[256];
        cm_err err = CM_ERR_INIT;
        size_t n, m;
        char *out, *back;
        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(v); i++) {
                out = decode("base64", v[i].raw, strlen(v[i].raw), &n, &err);
                assert_string_equal(out, v[i].b64);
                back = encode("base64", v[i].b64, strlen(v[i].b64), &m, &err);
                assert_int_equal(m, strlen(v[i].raw));
                assert_memory_equal(back, v[i].raw, m);
                free(out);
                free(back);
        }
        /* padding may be left out, white space is skipped */
        back = encode("base64", "Zm9v\nYg", 7, &m, &err);
        assert_non_null(back);
        assert_int_equal(m, 4);
        assert_memory_equal(back, "foob", 4);
        free(back);
        for (int i = 0; i < 256; i++)
                all[i] = (unsigned char)i;
        out = decode("base64", (const char *)all, 256, &n, &err);
        back = encode("base64", out, n, &m, &err);
        assert_int_equal(m, 256);
        assert_memory_equal(back, all, 256);
        free(out);
        free(back);
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                if (encode("base64", bad[i], strlen(bad[i]), &m, &err))
                        fail_msg("\"%s\" was taken as base64", bad[i]);
}

static void test_single_byte(void **state) {
        cm_err err = CM_ERR_INIT;
        size_t n;
        char *out;
        (void)state;
        out = decode("latin-1", "caf\xe9", 4, &n, &err);
        assert_string_equal(out, "caf\xc3\xa9");
        free(out);
        out = encode("ISO-8859-1", "caf\xc3\xa9", 5, &n, &err);
        assert_int_equal(n, 4);
        assert_memory_equal(out, "caf\xe9", 4);
        free(out);
        out = decode("cp1252", "\x80", 1, &n, &err); /* the euro sign */
        assert_string_equal(out, "\xe2\x82\xac");
        free(out);
        /* what the encoding cannot hold, or a byte it does not define */
        assert_null(encode("latin-1", "\xe2\x82\xac", 3, &n, &err));
        assert_non_null(strstr(err.msg, "cannot hold"));
        assert_null(decode("ascii", "\xe9", 1, &n, &err));
        assert_null(decode("ebcdic", "x", 1, &n, &err));
        assert_non_null(strstr(err.msg, "not supported"));
        assert_false(cm_text_encoding_known("utf-16"));
        assert_true(cm_text_encoding_known("Latin-1"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_paths),       cmocka_unit_test(test_paths_refused),
                cmocka_unit_test(test_extensions),  cmocka_unit_test(test_lines),
                cmocka_unit_test(test_utf8),        cmocka_unit_test(test_base64),
                cmocka_unit_test(test_single_byte),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
