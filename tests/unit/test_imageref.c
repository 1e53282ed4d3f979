/* cm_image_ref_parse against Docker's own answers (docker pull / the
 * distribution/reference tests): what each good reference normalises to,
 * and that each bad one is refused with a message naming the reference. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"
#include <string.h>

#include "image/ref.h"
#include "util/cleanup.h"

#define D64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static const struct {
        const char *in, *full, *domain, *path;
} good[] = {
        {"alpine", "docker.io/library/alpine:latest", "docker.io", "library/alpine"},
        {"alpine:3.20", "docker.io/library/alpine:3.20", "docker.io", "library/alpine"},
        {"library/alpine", "docker.io/library/alpine:latest", "docker.io", "library/alpine"},
        {"docker.io/alpine", "docker.io/library/alpine:latest", "docker.io", "library/alpine"},
        {"index.docker.io/alpine", "docker.io/library/alpine:latest", "docker.io", "library/alpine"},
        {"docker.io/library/alpine:edge", "docker.io/library/alpine:edge", "docker.io", "library/alpine"},
        {"user/app", "docker.io/user/app:latest", "docker.io", "user/app"},
        {"user/app:1.2.3", "docker.io/user/app:1.2.3", "docker.io", "user/app"},
        {"a/b/c/d", "docker.io/a/b/c/d:latest", "docker.io", "a/b/c/d"},
        {"localhost/x", "localhost/x:latest", "localhost", "x"},
        {"localhost:5000/x", "localhost:5000/x:latest", "localhost:5000", "x"},
        {"127.0.0.1:5000/busybox:v2s2", "127.0.0.1:5000/busybox:v2s2", "127.0.0.1:5000", "busybox"},
        {"[::1]:5000/busybox", "[::1]:5000/busybox:latest", "[::1]:5000", "busybox"},
        {"[fe80::1]/a", "[fe80::1]/a:latest", "[fe80::1]", "a"},
        {"ghcr.io/o/r:t", "ghcr.io/o/r:t", "ghcr.io", "o/r"},
        {"Registry.Example.COM/a", "Registry.Example.COM/a:latest", "Registry.Example.COM", "a"},
        {"Foo/bar", "Foo/bar:latest", "Foo", "bar"}, /* upper case first part: a host, as Docker says */
        {"my-host/x", "docker.io/my-host/x:latest", "docker.io", "my-host/x"},
        {"a.b-c/x", "a.b-c/x:latest", "a.b-c", "x"},
        {"python:3.12-slim", "docker.io/library/python:3.12-slim", "docker.io", "library/python"},
        {"a_b/c__d/e--f/g.h", "docker.io/a_b/c__d/e--f/g.h:latest", "docker.io", "a_b/c__d/e--f/g.h"},
        {"x:_tag", "docker.io/library/x:_tag", "docker.io", "library/x"},
        {"x:A.b-C", "docker.io/library/x:A.b-C", "docker.io", "library/x"},
        {"alpine@sha256:" D64, "docker.io/library/alpine@sha256:" D64, "docker.io", "library/alpine"},
        {"alpine:3@sha256:" D64, "docker.io/library/alpine:3@sha256:" D64, "docker.io", "library/alpine"},
        {"h:1/r@sha256:" D64, "h:1/r@sha256:" D64, "h:1", "r"},
        {"host:5000", "docker.io/library/host:5000", "docker.io", "library/host"}, /* a tag, not a port */
        {"0/1", "docker.io/0/1:latest", "docker.io", "0/1"},
};

static const char *const bad[] = {
        "",
        "Alpine",
        "alpine:",
        "alpine:.x",
        "alpine:-x",
        "alpine:a/b",
        "alpine@",
        "alpine@sha256:abc",
        "alpine@sha256:" D64 "0",
        "alpine@sha512:" D64,
        "alpine@SHA256:" D64,
        "alpine@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
        D64,
        "/alpine",
        "alpine/",
        "a//b",
        "-a/b",
        "a/-b",
        "a/b-",
        "a/b_",
        "a/b___c",
        "a/.b",
        "localhost:/x",
        "localhost:port/x",
        "-host.com/x",
        "host-.com/x",
        "host..com/x",
        "[::1/x",
        "[]:5000/x",
        "[zz::1]/x",
        "h:5000/UPPER",
        "user/App",
        "a b",
        "a\tb",
        "--help",
        "a;rm -rf /",
        "x:" /* 129 characters of tag follow */
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        "aaaaaaaaaaaaaaaaaaaa",
        "alpine:3.20:x",
        "alpine@sha256:" D64 "@sha256:" D64,
        "ALPINE",
};

static void test_good(void **state) {
        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
                cm_image_ref r;
                cm_err err = CM_ERR_INIT;
                if (cm_image_ref_parse(good[i].in, &r, &err) < 0)
                        fail_msg("\"%s\" refused: %s", good[i].in, err.msg);
                cleanup_free char *full = cm_image_ref_format(&r);
                if (strcmp(full, good[i].full) != 0 || strcmp(r.domain, good[i].domain) != 0 ||
                    strcmp(r.path, good[i].path) != 0)
                        fail_msg("\"%s\" -> %s (domain %s, path %s), want %s", good[i].in, full, r.domain, r.path,
                                 good[i].full);
                /* normalised is a fixed point */
                cm_image_ref again;
                assert_int_equal(cm_image_ref_parse(full, &again, &err), 0);
                cleanup_free char *full2 = cm_image_ref_format(&again);
                assert_string_equal(full, full2);
                cm_image_ref_free(&again);
                cm_image_ref_free(&r);
        }
}

static void test_bad(void **state) {
        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                cm_image_ref r = {0};
                cm_err err = CM_ERR_INIT;
                if (cm_image_ref_parse(bad[i], &r, &err) == 0) {
                        cleanup_free char *full = cm_image_ref_format(&r);
                        fail_msg("\"%s\" accepted as %s", bad[i], full);
                }
                assert_non_null(strstr(err.msg, "image reference"));
                assert_null(r.domain);
        }
}

static void test_long_names(void **state) {
        char name[300];
        cm_image_ref r;
        cm_err err = CM_ERR_INIT;
        (void)state;
        /* "docker.io/library/" is 18; 237 more is exactly 255 */
        memset(name, 'a', 237), name[237] = 0;
        assert_int_equal(cm_image_ref_parse(name, &r, &err), 0);
        cm_image_ref_free(&r);
        memset(name, 'a', 238), name[238] = 0;
        assert_true(cm_image_ref_parse(name, &r, &err) < 0);
        assert_non_null(strstr(err.msg, "255"));
}

static void test_reference(void **state) {
        cm_image_ref r;
        cm_err err = CM_ERR_INIT;
        (void)state;
        assert_int_equal(cm_image_ref_parse("a:1@sha256:" D64, &r, &err), 0);
        assert_string_equal(cm_image_ref_reference(&r), "sha256:" D64); /* the digest wins over the tag */
        assert_null(strstr(cm_image_ref_reference(&r), ":1"));
        cm_image_ref_free(&r);
        assert_int_equal(cm_image_ref_parse("a", &r, &err), 0);
        assert_string_equal(cm_image_ref_reference(&r), "latest");
        cm_image_ref_free(&r);
        assert_int_equal(cm_image_ref_parse("a@sha256:" D64, &r, &err), 0);
        assert_null(r.tag); /* Docker adds no :latest beside a digest */
        cm_image_ref_free(&r);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_good),
                cmocka_unit_test(test_bad),
                cmocka_unit_test(test_long_names),
                cmocka_unit_test(test_reference),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
