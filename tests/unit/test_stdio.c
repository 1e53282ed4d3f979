/* The stdio transport: line framing, the message cap, a slow call not
 * holding up quick ones, a cancel right behind its call, reading on with
 * every thread busy, and EOF handling. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mcp/mcp.h"
#include "transport/transport.h"
#include "util/cleanup.h"
#include "util/json.h"

#define INIT "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\"}}\n"

static int gate[2]; /* the slow tool waits until the test writes here */

static atomic_int slow_runs;

static int slow_tool(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        char c;
        struct pollfd p = {gate[0], POLLIN, 0};
        atomic_fetch_add(&slow_runs, 1);
        assert_int_equal(poll(&p, 1, 10000), 1);
        assert_int_equal(read(gate[0], &c, 1), 1);
        *ret = json_object();
        return 0;
}

/* Runs until cancelled (by the client or the server). */
static int block_tool(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        struct pollfd p = {mcp_call_cancel_fd(call), POLLIN, 0};
        assert_int_equal(poll(&p, 1, 10000), 1); /* woken by the cancellation, not the timeout */
        *ret = json_object();
        return 0;
}

static const mcp_tool slow = {"slow", "Slow", "Waits for the test.", "{\"type\":\"object\"}", NULL, 0, "t", slow_tool};
static const mcp_tool block = {"block", "Block", "Waits for a cancel.", "{\"type\":\"object\"}", NULL, 0, "t",
                               block_tool};

/* Calls the stdio transport runs at once, and more it holds waiting. */
#define RUNNING 64
#define WAITING 1024

typedef struct server {
        mcp_server *srv;
        int in[2], out[2];
        pthread_t t;
        FILE *reader;
} server;

static void *serve_thread(void *arg) {
        server *s = arg;
        cm_err err = CM_ERR_INIT;
        assert_int_equal(cm_stdio_serve(s->srv, s->in[0], s->out[1], &err), 0);
        (void)close(s->out[1]);
        return NULL;
}

static void start(server *s, size_t max_message) {
        cm_err err = CM_ERR_INIT;
        s->srv = mcp_server_new(&(mcp_server_info){"t", "1", "i", 0, max_message}, NULL);
        assert_int_equal(mcp_server_add_tool(s->srv, &slow, &err), 0);
        assert_int_equal(mcp_server_add_tool(s->srv, &block, &err), 0);
        assert_int_equal(pipe2(s->in, O_CLOEXEC), 0);
        assert_int_equal(pipe2(s->out, O_CLOEXEC), 0);
        assert_int_equal(pthread_create(&s->t, NULL, serve_thread, s), 0);
        s->reader = fdopen(s->out[0], "r");
        assert_non_null(s->reader);
}

static void put(server *s, const char *text) {
        size_t n = strlen(text);
        assert_int_equal(write(s->in[1], text, n), (ssize_t)n);
}

/* The next reply line, parsed. */
static json_t *next(server *s) {
        char *line = NULL;
        size_t cap = 0;
        assert_true(getline(&line, &cap, s->reader) > 0);
        json_t *m = json_loads(line, 0, NULL);
        free(line);
        assert_non_null(m);
        return m;
}

static json_int_t next_id(server *s) {
        cleanup_json json_t *m = next(s);
        return json_integer_value(json_object_get(m, "id"));
}

static void stop(server *s) {
        char *line = NULL;
        size_t cap = 0;
        (void)close(s->in[1]);
        assert_int_equal(getline(&line, &cap, s->reader), -1); /* nothing more after EOF */
        free(line);
        assert_int_equal(pthread_join(s->t, NULL), 0);
        (void)fclose(s->reader);
        (void)close(s->in[0]);
        mcp_server_free(s->srv);
}

static void test_framing(void **state) {
        server s;
        start(&s, 0);
        /* Two messages in one write, then one split across writes, CRLF, blanks. */
        put(&s, INIT "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\n\r\n");
        assert_int_equal(next_id(&s), 0);
        assert_int_equal(next_id(&s), 1);
        put(&s, "{\"jsonrpc\":\"2.0\",");
        put(&s, "\"id\":2,\"method\":\"ping\"}\r\n");
        assert_int_equal(next_id(&s), 2);
        /* A last line without a newline is still served at EOF. */
        put(&s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}");
        (void)close(s.in[1]);
        assert_int_equal(next_id(&s), 3);
        s.in[1] = open("/dev/null", O_WRONLY | O_CLOEXEC);
        stop(&s);
        (void)state;
}

static void test_cap(void **state) {
        server s;
        cleanup_free char *big = xmalloc(5000);
        start(&s, 1024);
        put(&s, INIT);
        assert_int_equal(next_id(&s), 0);
        memset(big, 'x', 4999);
        big[4999] = 0;
        put(&s, big); /* over the cap, in pieces, then the end of the line */
        put(&s, big);
        put(&s, "\n{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}\n");
        cleanup_json json_t *e = next(&s);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(e, "error"), "code")), MCP_INVALID_REQUEST);
        assert_non_null(strstr(cm_json_str(json_object_get(e, "error"), "message"), "1024"));
        assert_true(json_is_null(json_object_get(e, "id")));
        assert_int_equal(next_id(&s), 5); /* the next line is served normally */
        /* exactly at the cap is fine */
        char line[1025];
        int n = snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\",\"params\":{\"_meta\":{\"pad\":\"");
        memset(line + n, 'y', 1024 - (size_t)n - 4);
        memcpy(line + 1024 - 4, "\"}}}", 4);
        line[1024] = 0;
        put(&s, line);
        put(&s, "\n");
        assert_int_equal(next_id(&s), 6);
        stop(&s);
        (void)state;
}

static void test_slow_call_does_not_block(void **state) {
        server s;
        assert_int_equal(pipe2(gate, O_CLOEXEC), 0);
        start(&s, 0);
        put(&s, INIT);
        assert_int_equal(next_id(&s), 0);
        put(&s, "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\",\"params\":{\"name\":\"slow\"}}\n");
        put(&s, "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"ping\"}\n");
        assert_int_equal(next_id(&s), 11); /* answered while the call still waits */
        assert_int_equal(write(gate[1], "g", 1), 1);
        assert_int_equal(next_id(&s), 10);
        /* At EOF a call in flight still finishes and answers. */
        put(&s, "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/call\",\"params\":{\"name\":\"slow\"}}\n");
        (void)close(s.in[1]);
        assert_int_equal(write(gate[1], "g", 1), 1);
        assert_int_equal(next_id(&s), 12);
        s.in[1] = open("/dev/null", O_WRONLY | O_CLOEXEC);
        stop(&s);
        (void)close(gate[0]);
        (void)close(gate[1]);
        (void)state;
}

#define CALL(tool, id) "{\"jsonrpc\":\"2.0\",\"id\":" id ",\"method\":\"tools/call\",\"params\":{\"name\":\"" tool "\"}}\n"

static void put_calls(server *s, const char *tool, int from, int to) {
        char line[256];
        for (int i = from; i < to; i++) {
                (void)snprintf(line, sizeof line, CALL("%s", "%d"), i, tool);
                put(s, line);
        }
}

/* A call and its cancel in one write, again and again: each cancel finds its
 * call (the tool would wait 10 s and fail the test), none is answered, and at
 * EOF nothing is left to abandon (an abandoned call would be answered). */
static void test_cancel_right_behind(void **state) {
        server s;
        start(&s, 0);
        put(&s, INIT);
        assert_int_equal(next_id(&s), 0);
        for (int i = 1; i <= 200; i++) {
                char two[512];
                (void)snprintf(two, sizeof two,
                               CALL("block", "%d") "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                                                   "\"params\":{\"requestId\":%d}}\n",
                               i, i);
                put(&s, two);
        }
        put(&s, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}\n");
        cleanup_json json_t *p = next(&s);
        assert_string_equal(cm_json_str(p, "id"), "p");
        stop(&s);
        (void)state;
}

/* Every thread busy and the queue full: ping is still answered, one call more
 * is refused at once (and never runs), and every queued call runs once a
 * thread is free. */
static void test_reading_never_stops(void **state) {
        server s;
        atomic_store(&slow_runs, 0);
        assert_int_equal(pipe2(gate, O_CLOEXEC), 0);
        start(&s, 0);
        put(&s, INIT);
        assert_int_equal(next_id(&s), 0);
        put_calls(&s, "slow", 1, 1 + RUNNING + WAITING);
        put(&s, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}\n");
        cleanup_json json_t *p = next(&s);
        assert_string_equal(cm_json_str(p, "id"), "p");
        put(&s, CALL("slow", "\"over\""));
        cleanup_json json_t *e = next(&s);
        assert_string_equal(cm_json_str(e, "id"), "over");
        assert_int_equal(json_integer_value(json_object_get(json_object_get(e, "error"), "code")), MCP_INTERNAL_ERROR);
        assert_non_null(strstr(cm_json_str(json_object_get(e, "error"), "message"), "refused"));
        for (int i = 0; i < RUNNING + WAITING; i++) {
                assert_int_equal(write(gate[1], "g", 1), 1);
                cleanup_json json_t *r = next(&s);
                assert_non_null(json_object_get(r, "result"));
        }
        assert_int_equal(atomic_load(&slow_runs), RUNNING + WAITING);
        stop(&s);
        (void)close(gate[0]);
        (void)close(gate[1]);
        (void)state;
}

/* At EOF a call that does not finish within the grace period is answered
 * with the shutdown error, not left without a reply. */
static void test_eof_abandons(void **state) {
        server s;
        start(&s, 0);
        put(&s, INIT);
        assert_int_equal(next_id(&s), 0);
        put(&s, CALL("block", "7"));
        (void)close(s.in[1]);
        cleanup_json json_t *e = next(&s);
        assert_int_equal(json_integer_value(json_object_get(e, "id")), 7);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(e, "error"), "code")), MCP_INTERNAL_ERROR);
        assert_non_null(strstr(cm_json_str(json_object_get(e, "error"), "message"), "server shutting down"));
        s.in[1] = open("/dev/null", O_WRONLY | O_CLOEXEC);
        stop(&s);
        (void)state;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_framing),
                cmocka_unit_test(test_cap),
                cmocka_unit_test(test_slow_call_does_not_block),
                cmocka_unit_test(test_cancel_right_behind),
                cmocka_unit_test(test_reading_never_stops),
                cmocka_unit_test(test_eof_abandons),
        };
        (void)cm_stop_fd();
        return cmocka_run_group_tests(tests, NULL, NULL);
}
