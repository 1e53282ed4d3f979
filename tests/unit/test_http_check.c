/* The pure request checks of the HTTP transport: Accept and Content-Type
 * parsing, Host/Origin rules (DNS rebinding), bearer tokens, session ids,
 * --http specs and the message-shape scan. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"

#include <errno.h>
#include <string.h>

#include "transport/http_check.h"

static void test_accept(void **state) {
        const char *both = "application/json, text/event-stream";
        assert_true(cm_http_accepts(both, "application/json"));
        assert_true(cm_http_accepts(both, "text/event-stream"));
        assert_true(cm_http_accepts("text/event-stream,application/json", "application/json"));
        assert_true(cm_http_accepts("*/*", "text/event-stream"));
        assert_true(cm_http_accepts("application/*;q=0.5, text/*", "text/event-stream"));
        assert_true(cm_http_accepts("APPLICATION/JSON", "application/json"));
        assert_true(cm_http_accepts("  application/json ; q=1 ", "application/json"));
        assert_true(cm_http_accepts("application/json;q=0.001", "application/json"));
        assert_false(cm_http_accepts("application/json", "text/event-stream"));
        assert_false(cm_http_accepts("text/html", "application/json"));
        assert_false(cm_http_accepts("application/jsonx", "application/json"));
        assert_false(cm_http_accepts("application/json;q=0", "application/json"));
        assert_false(cm_http_accepts("application/json;q=0.000", "application/json"));
        /* the most specific range decides */
        assert_false(cm_http_accepts("text/*, text/event-stream;q=0", "text/event-stream"));
        assert_true(cm_http_accepts("*/*;q=0, text/event-stream", "text/event-stream"));
        assert_false(cm_http_accepts("", "application/json"));
        assert_false(cm_http_accepts(NULL, "application/json"));
        assert_false(cm_http_accepts(",,,;;;", "application/json"));
        assert_false(cm_http_accepts("application/*", "text/event-stream"));
}

static void test_content_type(void **state) {
        assert_true(cm_http_is_json_type("application/json"));
        assert_true(cm_http_is_json_type("application/json; charset=utf-8"));
        assert_true(cm_http_is_json_type("Application/JSON;charset=UTF-8"));
        assert_true(cm_http_is_json_type(" application/json "));
        assert_false(cm_http_is_json_type("text/plain"));
        assert_false(cm_http_is_json_type("application/json-seq"));
        assert_false(cm_http_is_json_type("application/x-www-form-urlencoded"));
        assert_false(cm_http_is_json_type(""));
        assert_false(cm_http_is_json_type(NULL));
}

static void test_host_name(void **state) {
        char n[CM_HTTP_NAME_MAX];
        assert_true(cm_http_host_name("LocalHost:8080", false, n, sizeof n));
        assert_string_equal(n, "localhost");
        assert_true(cm_http_host_name("[::1]:9", false, n, sizeof n));
        assert_string_equal(n, "::1");
        assert_true(cm_http_host_name("[::1]", false, n, sizeof n));
        assert_true(cm_http_host_name("127.0.0.1", false, n, sizeof n));
        assert_true(cm_http_host_name("localhost:", false, n, sizeof n)); /* empty port: RFC 3986 allows it */
        assert_false(cm_http_host_name("::1", false, n, sizeof n));
        assert_true(cm_http_host_name("::1", true, n, sizeof n));
        assert_string_equal(n, "::1");
        assert_false(cm_http_host_name("", false, n, sizeof n));
        assert_false(cm_http_host_name(":80", false, n, sizeof n));
        assert_false(cm_http_host_name("a b", false, n, sizeof n));
        assert_false(cm_http_host_name("evil.com/x", false, n, sizeof n));
        assert_false(cm_http_host_name("user@localhost", false, n, sizeof n));
        assert_false(cm_http_host_name("localhost:99999", false, n, sizeof n));
        assert_false(cm_http_host_name("localhost:80x", false, n, sizeof n));
        assert_false(cm_http_host_name("[localhost]", false, n, sizeof n));
        assert_false(cm_http_host_name("[::1", false, n, sizeof n));
        assert_false(cm_http_host_name("[::1]x", false, n, sizeof n));
        assert_false(cm_http_host_name("localhost", false, n, 4)); /* does not fit */
        assert_false(cm_http_host_name(NULL, false, n, sizeof n));
}

static void test_host_policy(void **state) {
        const char *const extra[] = {"mcp.example.test", "Other.Test:8443", "fe80::2", NULL};
        cm_http_hostpolicy loop = {true, "127.0.0.1", extra};
        cm_http_hostpolicy remote = {false, "10.1.2.3", NULL};
        cm_http_hostpolicy any = {false, "10.1.2.3", (const char *const[]){"*", NULL}};

        assert_true(cm_http_host_ok(&loop, "localhost"));
        assert_true(cm_http_host_ok(&loop, "localhost:1234"));
        assert_true(cm_http_host_ok(&loop, "127.0.0.1:1"));
        assert_true(cm_http_host_ok(&loop, "[::1]:1"));
        assert_true(cm_http_host_ok(&loop, "MCP.example.test:80"));
        assert_true(cm_http_host_ok(&loop, "other.test"));
        assert_true(cm_http_host_ok(&loop, "[fe80::2]:80"));
        assert_false(cm_http_host_ok(&loop, "evil.example"));
        assert_false(cm_http_host_ok(&loop, "evil.example:1234"));
        assert_false(cm_http_host_ok(&loop, "localhost.evil.example"));
        assert_false(cm_http_host_ok(&loop, "127.0.0.2"));
        assert_false(cm_http_host_ok(&loop, NULL));
        assert_false(cm_http_host_ok(&loop, ""));

        assert_true(cm_http_host_ok(&remote, "10.1.2.3:8080"));
        assert_false(cm_http_host_ok(&remote, "localhost"));
        assert_true(cm_http_host_ok(&any, "whatever.example"));
        assert_false(cm_http_host_ok(&any, "bad host"));
}

static void test_origin(void **state) {
        cm_http_hostpolicy loop = {true, NULL, (const char *const[]){"app.test", NULL}};
        assert_true(cm_http_origin_ok(&loop, "http://localhost:3000"));
        assert_true(cm_http_origin_ok(&loop, "https://127.0.0.1"));
        assert_true(cm_http_origin_ok(&loop, "HTTP://[::1]:6274"));
        assert_true(cm_http_origin_ok(&loop, "https://app.test"));
        assert_false(cm_http_origin_ok(&loop, "http://evil.example"));
        assert_false(cm_http_origin_ok(&loop, "null"));
        assert_false(cm_http_origin_ok(&loop, "file://"));
        assert_false(cm_http_origin_ok(&loop, "chrome-extension://localhost"));
        assert_false(cm_http_origin_ok(&loop, "http://localhost@evil.example"));
        assert_false(cm_http_origin_ok(&loop, "http://localhost/path"));
        assert_false(cm_http_origin_ok(&loop, "http://localhost.evil.example"));
        assert_false(cm_http_origin_ok(&loop, "localhost"));
        assert_false(cm_http_origin_ok(&loop, "http://"));
        assert_false(cm_http_origin_ok(&loop, NULL));
}

/* The origins of --allow-origin: compared whole (scheme, host, port), in
 * one canonical form; a listed origin passes the Origin check even when its
 * host is not one of the server's names, and nothing near it does. */
static void test_cors_origins(void **state) {
        const char *const list[] = {"http://localhost:6274", "HTTPS://Inspector.Example", "http://[::1]:8080", NULL};
        cm_http_hostpolicy remote = {false, "10.1.2.3", NULL, list};
        char canon[CM_HTTP_NAME_MAX + 16];
        (void)state;
        assert_true(cm_http_origin_canon("HTTP://LocalHost", canon, sizeof canon));
        assert_string_equal(canon, "http://localhost:80");
        assert_true(cm_http_origin_canon("https://[::1]:0443", canon, sizeof canon));
        assert_string_equal(canon, "https://[::1]:443");
        assert_true(cm_http_origin_canon("http://a.test:", canon, sizeof canon));
        assert_string_equal(canon, "http://a.test:80");
        assert_false(cm_http_origin_canon("*", canon, sizeof canon));
        assert_false(cm_http_origin_canon("http://a.test/", canon, sizeof canon));
        assert_false(cm_http_origin_canon("http://a.test:99999", canon, sizeof canon));
        assert_false(cm_http_origin_canon("null", canon, sizeof canon));
        assert_false(cm_http_origin_canon("http://localhost:6274", canon, 10));

        assert_true(cm_http_origin_listed(list, "http://localhost:6274"));
        assert_true(cm_http_origin_listed(list, "https://inspector.example"));
        assert_true(cm_http_origin_listed(list, "https://inspector.example:443"));
        assert_true(cm_http_origin_listed(list, "http://[::1]:8080"));
        assert_false(cm_http_origin_listed(list, "http://localhost:6275"));    /* another port */
        assert_false(cm_http_origin_listed(list, "https://localhost:6274"));   /* another scheme */
        assert_false(cm_http_origin_listed(list, "http://inspector.example")); /* another scheme and port */
        assert_false(cm_http_origin_listed(list, "https://inspector.example.evil"));
        assert_false(cm_http_origin_listed(list, "https://inspector.example@evil.test"));
        assert_false(cm_http_origin_listed(list, "null"));
        assert_false(cm_http_origin_listed(list, NULL));
        assert_false(cm_http_origin_listed(NULL, "http://localhost:6274"));
        assert_false(cm_http_origin_listed((const char *const[]){"*", NULL}, "http://localhost:6274"));

        assert_true(cm_http_origin_ok(&remote, "https://inspector.example"));
        assert_true(cm_http_origin_ok(&remote, "http://10.1.2.3:9"));
        assert_false(cm_http_origin_ok(&remote, "http://localhost:6275"));
        assert_false(cm_http_origin_ok(&remote, "http://evil.example"));
        /* the Host check is not the Origin list's business */
        assert_false(cm_http_host_ok(&remote, "inspector.example"));
}

static void test_bearer(void **state) {
        assert_true(cm_http_bearer_ok("Bearer s3cret", "s3cret"));
        assert_true(cm_http_bearer_ok("bearer   s3cret  ", "s3cret"));
        assert_true(cm_http_bearer_ok("BEARER\ts3cret", "s3cret"));
        assert_false(cm_http_bearer_ok("Bearer s3cre", "s3cret"));
        assert_false(cm_http_bearer_ok("Bearer s3crett", "s3cret"));
        assert_false(cm_http_bearer_ok("Bearer S3cret", "s3cret"));
        assert_false(cm_http_bearer_ok("s3cret", "s3cret"));
        assert_false(cm_http_bearer_ok("Bearers3cret", "s3cret"));
        assert_false(cm_http_bearer_ok("Basic czNjcmV0", "s3cret"));
        assert_false(cm_http_bearer_ok("Bearer ", "s3cret"));
        assert_false(cm_http_bearer_ok(NULL, "s3cret"));
        assert_false(cm_http_bearer_ok("Bearer ", "")); /* an empty token never matches */
}

static void test_session_id(void **state) {
        char id[200];
        assert_true(cm_http_session_id_ok("0123456789abcdef0123456789abcdef"));
        assert_true(cm_http_session_id_ok("!~"));
        assert_false(cm_http_session_id_ok(""));
        assert_false(cm_http_session_id_ok("has space"));
        assert_false(cm_http_session_id_ok("tab\t"));
        assert_false(cm_http_session_id_ok("\x7f"));
        assert_false(cm_http_session_id_ok("\xc3\xa9"));
        assert_false(cm_http_session_id_ok(NULL));
        memset(id, 'a', 128);
        id[128] = 0;
        assert_true(cm_http_session_id_ok(id));
        id[128] = 'a';
        id[129] = 0;
        assert_false(cm_http_session_id_ok(id));
}

static void test_length(void **state) {
        uint64_t n = 7;
        assert_true(cm_http_parse_length("0", &n));
        assert_int_equal(n, 0);
        assert_true(cm_http_parse_length("18446744073709551615", &n));
        assert_true(n == UINT64_MAX);
        assert_false(cm_http_parse_length("18446744073709551616", &n));
        assert_false(cm_http_parse_length("-5", &n));
        assert_false(cm_http_parse_length("+5", &n));
        assert_false(cm_http_parse_length("5 ", &n));
        assert_false(cm_http_parse_length("", &n));
        assert_false(cm_http_parse_length(NULL, &n));
}

static void test_listen(void **state) {
        char host[64];
        unsigned port = 1;
        assert_int_equal(cm_http_parse_listen("8080", host, sizeof host, &port), 0);
        assert_string_equal(host, "127.0.0.1");
        assert_int_equal(port, 8080);
        assert_int_equal(cm_http_parse_listen(":0", host, sizeof host, &port), 0);
        assert_string_equal(host, "127.0.0.1");
        assert_int_equal(port, 0);
        assert_int_equal(cm_http_parse_listen("0.0.0.0:80", host, sizeof host, &port), 0);
        assert_string_equal(host, "0.0.0.0");
        assert_int_equal(cm_http_parse_listen("localhost:65535", host, sizeof host, &port), 0);
        assert_int_equal(port, 65535);
        assert_int_equal(cm_http_parse_listen("[::1]:9", host, sizeof host, &port), 0);
        assert_string_equal(host, "::1");
        assert_int_equal(cm_http_parse_listen("[::]:0", host, sizeof host, &port), 0);
        assert_string_equal(host, "::");
        assert_int_equal(cm_http_parse_listen("::1:9", host, sizeof host, &port), -EINVAL);
        assert_int_equal(cm_http_parse_listen("[::1]", host, sizeof host, &port), -EINVAL);
        assert_int_equal(cm_http_parse_listen("[]:80", host, sizeof host, &port), -EINVAL);
        assert_int_equal(cm_http_parse_listen("[a]:80", host, sizeof host, &port), -EINVAL);
        assert_int_equal(cm_http_parse_listen("host:", host, sizeof host, &port), -EINVAL);
        assert_int_equal(cm_http_parse_listen("host:65536", host, sizeof host, &port), -EINVAL);
        assert_int_equal(cm_http_parse_listen("host:-1", host, sizeof host, &port), -EINVAL);
        assert_int_equal(cm_http_parse_listen("ho st:80", host, sizeof host, &port), -EINVAL);
        assert_int_equal(cm_http_parse_listen("", host, sizeof host, &port), -EINVAL);
        assert_int_equal(cm_http_parse_listen(NULL, host, sizeof host, &port), -EINVAL);
        assert_int_equal(cm_http_parse_listen("a-very-long-host-name.example:1", host, 8, &port), -EINVAL);
}

static enum cm_http_msg_kind kind(const char *s) { return cm_http_msg_kind(s, strlen(s)); }

static void test_msg_kind(void **state) {
        assert_int_equal(kind("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"), CM_HTTP_MSG_RESPONSE);
        assert_int_equal(kind("{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":1,\"message\":\"m\"}}"),
                         CM_HTTP_MSG_RESPONSE);
        assert_int_equal(kind("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"id\":1}}"),
                         CM_HTTP_MSG_NOTIFICATION);
        assert_int_equal(kind("{\"id\":3,\"method\":\"sampling/createMessage\"}"), CM_HTTP_MSG_REQUEST);
        /* keys inside strings and nested objects do not count */
        assert_int_equal(kind("{\"result\":{\"method\":\"x\"},\"id\":2}"), CM_HTTP_MSG_RESPONSE);
        assert_int_equal(kind("{\"a\":\"\\\"method\\\"\",\"id\":2}"), CM_HTTP_MSG_RESPONSE);
        assert_int_equal(kind("{\"params\":[\"id\",{\"id\":1}],\"method\":\"m\"}"), CM_HTTP_MSG_NOTIFICATION);
        assert_int_equal(kind(" [{\"id\":1}]"), CM_HTTP_MSG_BATCH);
        assert_int_equal(kind("42"), CM_HTTP_MSG_OTHER);
        assert_int_equal(kind("{\"id\":1"), CM_HTTP_MSG_OTHER);
        assert_int_equal(kind("{\"id"), CM_HTTP_MSG_OTHER);
        assert_int_equal(kind("{\"x\":\"\\"), CM_HTTP_MSG_OTHER);
        assert_int_equal(kind(""), CM_HTTP_MSG_OTHER);
        assert_int_equal(kind("{}"), CM_HTTP_MSG_OTHER);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_accept),    cmocka_unit_test(test_content_type),
                cmocka_unit_test(test_host_name), cmocka_unit_test(test_host_policy),
                cmocka_unit_test(test_origin),    cmocka_unit_test(test_cors_origins),
                cmocka_unit_test(test_bearer),    cmocka_unit_test(test_session_id),
                cmocka_unit_test(test_length),    cmocka_unit_test(test_listen),
                cmocka_unit_test(test_msg_kind),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
