/* The MCP session: lifecycle, version negotiation, errors, tools/list paging,
 * tools/call with schema checks, progress, logging, cancellation, batches. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"

#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <pthread.h>
#include <string.h>

#include "mcp/mcp.h"
#include "util/cleanup.h"
#include "util/json.h"

/* A sink that keeps every message, for assertions. */
typedef struct collect {
        mcp_sink base;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        json_t *msgs;
} collect;

static int collect_send(mcp_sink *self, const char *json, size_t len) {
        collect *c = (collect *)self;
        json_t *m = json_loadb(json, len, 0, NULL);
        assert_non_null(m);
        (void)pthread_mutex_lock(&c->lock);
        json_array_append_new(c->msgs, m);
        (void)pthread_cond_broadcast(&c->cond);
        (void)pthread_mutex_unlock(&c->lock);
        return 0;
}

static void collect_init(collect *c) {
        c->base = (mcp_sink){collect_send, NULL, NULL};
        (void)pthread_mutex_init(&c->lock, NULL);
        (void)pthread_cond_init(&c->cond, NULL);
        c->msgs = json_array();
}

static void collect_clear(collect *c) { json_array_clear(c->msgs); }

/* ---- test tools --------------------------------------------------------- */

static int add_tool(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        json_int_t a = json_integer_value(json_object_get(args, "a")), b = json_integer_value(json_object_get(args, "b"));
        mcp_call_progress(call, 1, 2, "half");
        mcp_call_log(call, "debug", "adding %lld", (long long)a);
        mcp_call_log(call, "warning", "careful");
        mcp_call_progress(call, 2, 2, NULL);
        *ret = json_pack("{s:I}", "sum", a + b);
        return 0;
}

static int fail_tool(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        return cm_err_set(err, 1, "it broke; try again with less");
}

static int bad_output_tool(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        *ret = json_pack("{s:s}", "sum", "not a number");
        return 0;
}

static atomic_int block_started, block_runs;

static int block_tool(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        struct pollfd p = {mcp_call_cancel_fd(call), POLLIN, 0};
        atomic_fetch_add(&block_runs, 1);
        atomic_store(&block_started, 1);
        assert_int_equal(poll(&p, 1, 10000), 1); /* woken by the cancellation, not the timeout */
        assert_true(mcp_call_cancelled(call));
        *ret = json_object();
        return 0;
}

#define ADD_IN                                                                                                         \
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},"           \
        "\"required\":[\"a\",\"b\"],\"additionalProperties\":false}"
#define ADD_OUT "{\"type\":\"object\",\"properties\":{\"sum\":{\"type\":\"integer\"}},\"required\":[\"sum\"]}"

static const mcp_tool tools[] = {
        {"add", "Add", "Adds.", ADD_IN, ADD_OUT, MCP_HINT_READ_ONLY, "t", add_tool},
        {"fail", "Fail", "Fails.", "{\"type\":\"object\"}", NULL, MCP_HINT_DESTRUCTIVE, "t", fail_tool},
        {"bad_output", "Bad", "Breaks its promise.", "{\"type\":\"object\"}", ADD_OUT, 0, "t", bad_output_tool},
        {"block", "Block", "Waits for cancellation.", "{\"type\":\"object\"}", NULL, 0, "t", block_tool},
};

typedef struct fixture {
        mcp_server *srv;
        mcp_session *s;
        collect out;
} fixture;

static int setup(void **state) {
        fixture *f = xcalloc(1, sizeof *f);
        cm_err err = CM_ERR_INIT;
        f->srv = mcp_server_new(&(mcp_server_info){"test", "1.0", "Use it.", 2, 0}, NULL);
        for (size_t i = 0; i < ARRAY_SIZE(tools); i++)
                assert_int_equal(mcp_server_add_tool(f->srv, &tools[i], &err), 0);
        collect_init(&f->out);
        f->s = mcp_session_new(f->srv, &f->out.base);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        fixture *f = *state;
        mcp_session_unref(f->s);
        mcp_server_free(f->srv);
        json_decref(f->out.msgs);
        free(f);
        return 0;
}

/* Send one message (JSON text); return the last reply (borrowed) or NULL. */
static json_t *send_msg(fixture *f, const char *text) {
        json_t *m = mcp_parse(text, strlen(text), &f->out.base);
        if (m) {
                mcp_session_handle(f->s, m, &f->out.base);
                json_decref(m);
        }
        size_t n = json_array_size(f->out.msgs);
        return n ? json_array_get(f->out.msgs, n - 1) : NULL;
}

static json_t *init_version(fixture *f, const char *version) {
        char buf[512];
        snprintf(buf, sizeof buf,
                 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"%s\","
                 "\"capabilities\":{},\"clientInfo\":{\"name\":\"unit\",\"version\":\"0\"}}}",
                 version);
        return send_msg(f, buf);
}

static void init(fixture *f) {
        assert_non_null(json_object_get(init_version(f, "2025-11-25"), "result"));
        send_msg(f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
        collect_clear(&f->out);
}

static int err_code(const json_t *reply) {
        return (int)json_integer_value(json_object_get(json_object_get(reply, "error"), "code"));
}

static const char *err_msg(const json_t *reply) {
        return cm_json_str(json_object_get(reply, "error"), "message");
}

/* ---- tests -------------------------------------------------------------- */

static void test_negotiation(void **state) {
        static const char *const ok[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};
        for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
                fixture *f;
                setup((void **)&f);
                json_t *r = json_object_get(init_version(f, ok[i]), "result");
                assert_string_equal(cm_json_str(r, "protocolVersion"), ok[i]);
                assert_string_equal(cm_json_str(json_object_get(r, "serverInfo"), "name"), "test");
                assert_string_equal(cm_json_str(r, "instructions"), "Use it.");
                assert_non_null(json_object_get(json_object_get(r, "capabilities"), "tools"));
                assert_string_equal(mcp_session_client(f->s), "unit");
                teardown((void **)&f);
        }
        /* An unknown version gets our latest, per the spec. */
        fixture *f;
        setup((void **)&f);
        json_t *r = json_object_get(init_version(f, "1999-01-01"), "result");
        assert_string_equal(cm_json_str(r, "protocolVersion"), MCP_LATEST_VERSION);
        /* A second initialize is refused. */
        assert_int_equal(err_code(init_version(f, "2025-11-25")), MCP_INVALID_REQUEST);
        teardown((void **)&f);
        (void)state;
}

static void test_before_initialize(void **state) {
        fixture *f = *state;
        json_t *r = send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\"}");
        assert_int_equal(err_code(r), MCP_INVALID_REQUEST);
        assert_non_null(strstr(err_msg(r), "initialize"));
        assert_int_equal(json_integer_value(json_object_get(r, "id")), 7);
        /* ping works at any time */
        r = send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}");
        assert_true(json_is_object(json_object_get(r, "result")));
        assert_string_equal(cm_json_str(r, "id"), "p");
}

static void test_bad_messages(void **state) {
        fixture *f = *state;
        json_t *r;
        init(f);
        r = send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":1,");
        assert_int_equal(err_code(r), MCP_PARSE_ERROR);
        assert_true(json_is_null(json_object_get(r, "id")));
        r = send_msg(f, "42");
        assert_int_equal(err_code(r), MCP_INVALID_REQUEST);
        r = send_msg(f, "{\"id\":3,\"method\":\"ping\"}");
        assert_int_equal(err_code(r), MCP_INVALID_REQUEST);
        assert_int_equal(json_integer_value(json_object_get(r, "id")), 3);
        r = send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":5}");
        assert_int_equal(err_code(r), MCP_INVALID_REQUEST);
        r = send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}");
        assert_int_equal(err_code(r), MCP_INVALID_REQUEST);
        assert_true(json_is_null(json_object_get(r, "id")));
        r = send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\",\"params\":[1]}");
        assert_int_equal(err_code(r), MCP_INVALID_PARAMS);
        r = send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"resources/read\"}");
        assert_int_equal(err_code(r), MCP_METHOD_NOT_FOUND);
        assert_int_equal(json_integer_value(json_object_get(r, "id")), 6);
        /* Notifications and responses get no reply. */
        collect_clear(&f->out);
        send_msg(f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\",\"params\":7}");
        send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{}}");
        assert_int_equal(json_array_size(f->out.msgs), 0);
}

static void test_list_paging(void **state) {
        fixture *f = *state;
        json_t *r, *res;
        char buf[256];
        size_t seen = 0;
        const char *cursor = NULL;
        init(f);
        do {
                if (cursor)
                        snprintf(buf, sizeof buf,
                                 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"cursor\":\"%s\"}}",
                                 cursor);
                else
                        snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
                r = send_msg(f, buf);
                res = json_object_get(r, "result");
                assert_non_null(res);
                assert_true(json_array_size(json_object_get(res, "tools")) <= 2);
                seen += json_array_size(json_object_get(res, "tools"));
                cursor = cm_json_str(res, "nextCursor");
        } while (cursor);
        assert_int_equal(seen, ARRAY_SIZE(tools));
        r = send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{\"cursor\":\"bogus\"}}");
        assert_int_equal(err_code(r), MCP_INVALID_PARAMS);
        r = send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{\"cursor\":\"tools:99\"}}");
        assert_int_equal(err_code(r), MCP_INVALID_PARAMS);
}

static void test_listing_shape(void **state) {
        fixture *f = *state;
        init(f);
        json_t *t = json_array_get(
                json_object_get(json_object_get(send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}"),
                                                "result"),
                                "tools"),
                0);
        assert_string_equal(cm_json_str(t, "name"), "add");
        assert_string_equal(cm_json_str(t, "title"), "Add");
        assert_non_null(json_object_get(t, "inputSchema"));
        assert_non_null(json_object_get(t, "outputSchema"));
        assert_true(json_is_true(json_object_get(json_object_get(t, "annotations"), "readOnlyHint")));
        assert_true(json_is_false(json_object_get(json_object_get(t, "annotations"), "destructiveHint")));
}

static void test_call(void **state) {
        fixture *f = *state;
        json_t *r, *res;
        init(f);
        r = send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"add\","
                        "\"arguments\":{\"a\":2,\"b\":40}}}");
        res = json_object_get(r, "result");
        assert_true(json_is_false(json_object_get(res, "isError")));
        assert_int_equal(json_integer_value(json_object_get(json_object_get(res, "structuredContent"), "sum")), 42);
        assert_string_equal(cm_json_str(json_array_get(json_object_get(res, "content"), 0), "text"), "{\"sum\":42}");
        /* Without a progressToken, no progress; the debug log is below "info". */
        for (size_t i = 0; i + 1 < json_array_size(f->out.msgs); i++) {
                const char *m = cm_json_str(json_array_get(f->out.msgs, i), "method");
                assert_string_equal(m, "notifications/message");
                assert_string_equal(cm_json_str(json_object_get(json_array_get(f->out.msgs, i), "params"), "level"),
                                    "warning");
        }
}

static const char *call_error_text(fixture *f, const char *args) {
        char buf[512];
        snprintf(buf, sizeof buf,
                 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"add\","
                 "\"arguments\":%s}}",
                 args);
        json_t *res = json_object_get(send_msg(f, buf), "result");
        assert_true(json_is_true(json_object_get(res, "isError")));
        return cm_json_str(json_array_get(json_object_get(res, "content"), 0), "text");
}

static void test_call_schema_errors(void **state) {
        fixture *f = *state;
        json_t *r;
        init(f);
        assert_non_null(strstr(call_error_text(f, "{\"a\":\"x\",\"b\":1}"), "expected integer"));
        assert_non_null(strstr(call_error_text(f, "{\"a\":1}"), "\"b\""));
        assert_non_null(strstr(call_error_text(f, "{\"a\":1,\"b\":2,\"c\":3}"), "\"c\""));
        r = send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":\"add\","
                        "\"arguments\":[1]}}");
        assert_int_equal(err_code(r), MCP_INVALID_PARAMS); /* not an object: the request itself is malformed */
        assert_non_null(strstr(err_msg(r), "arguments"));
        r = send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":5}}");
        assert_int_equal(err_code(r), MCP_INVALID_PARAMS);
        r = send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"nope\"}}");
        assert_int_equal(err_code(r), MCP_INVALID_PARAMS);
        assert_non_null(strstr(err_msg(r), "nope"));
        r = send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"fail\"}}");
        assert_true(json_is_true(json_object_get(json_object_get(r, "result"), "isError")));
        assert_non_null(strstr(cm_json_str(json_array_get(json_object_get(json_object_get(r, "result"), "content"), 0),
                                           "text"),
                               "it broke"));
        r = send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"bad_output\"}}");
        assert_true(json_is_true(json_object_get(json_object_get(r, "result"), "isError")));
}

static void test_progress_and_log_level(void **state) {
        fixture *f = *state;
        init(f);
        send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"logging/setLevel\",\"params\":{\"level\":\"debug\"}}");
        assert_non_null(json_object_get(json_array_get(f->out.msgs, 0), "result"));
        collect_clear(&f->out);
        send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"add\","
                    "\"arguments\":{\"a\":1,\"b\":1},\"_meta\":{\"progressToken\":\"tok\"}}}");
        /* progress 1, debug log, warning log, progress 2, result */
        assert_int_equal(json_array_size(f->out.msgs), 5);
        json_t *p = json_object_get(json_array_get(f->out.msgs, 0), "params");
        assert_string_equal(cm_json_str(json_array_get(f->out.msgs, 0), "method"), "notifications/progress");
        assert_string_equal(cm_json_str(p, "progressToken"), "tok");
        assert_true(json_number_value(json_object_get(p, "progress")) == 1.0);
        assert_true(json_number_value(json_object_get(p, "total")) == 2.0);
        assert_string_equal(cm_json_str(json_array_get(f->out.msgs, 1), "method"), "notifications/message");
        assert_non_null(json_object_get(json_array_get(f->out.msgs, 4), "result"));
        json_t *r = send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"logging/setLevel\",\"params\":{\"level\":\"loud\"}}");
        assert_int_equal(err_code(r), MCP_INVALID_PARAMS);
}

typedef struct call_thread {
        fixture *f;
        pthread_t t;
} call_thread;

static void *run_block(void *arg) {
        fixture *f = arg;
        json_t *m = json_loads("{\"jsonrpc\":\"2.0\",\"id\":\"slow\",\"method\":\"tools/call\",\"params\":{\"name\":"
                               "\"block\"}}",
                               0, NULL);
        mcp_session_handle(f->s, m, &f->out.base);
        json_decref(m);
        return NULL;
}

static void test_cancel(void **state) {
        fixture *f = *state;
        pthread_t t;
        init(f);
        atomic_store(&block_started, 0);
        assert_int_equal(pthread_create(&t, NULL, run_block, f), 0);
        /* Cancel only once the call is in flight (registered before the tool runs). */
        while (!atomic_load(&block_started))
                sched_yield();
        send_msg(f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"slow\"}}");
        assert_int_equal(pthread_join(t, NULL), 0);
        /* No reply for a cancelled request. */
        for (size_t i = 0; i < json_array_size(f->out.msgs); i++)
                assert_null(json_object_get(json_array_get(f->out.msgs, i), "id"));
        /* The session still serves. */
        assert_non_null(json_object_get(send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}"), "result"));
}

#define BLOCK_CALL(id) "{\"jsonrpc\":\"2.0\",\"id\":\"" id "\",\"method\":\"tools/call\",\"params\":{\"name\":\"block\"}}"

static mcp_job *accept_text(fixture *f, const char *text) {
        cleanup_json json_t *m = json_loads(text, 0, NULL);
        assert_non_null(m);
        return mcp_session_accept(f->s, m, &f->out.base);
}

/* The replies (not notifications) collected so far with this id. */
static size_t replies_to(fixture *f, const char *id) {
        size_t n = 0;
        for (size_t i = 0; i < json_array_size(f->out.msgs); i++) {
                const json_t *m = json_array_get(f->out.msgs, i);
                n += json_is_string(json_object_get(m, "id")) && strcmp(cm_json_str(m, "id"), id) == 0;
        }
        return n;
}

/* A cancel read after the call but before any thread runs it still finds it:
 * the call never runs and gets no reply.  A second call with an id of its
 * own is untouched by it. */
static void test_cancel_before_run(void **state) {
        fixture *f = *state;
        init(f);
        atomic_store(&block_runs, 0);
        mcp_job *j = accept_text(f, BLOCK_CALL("early"));
        mcp_job *k = accept_text(f, "{\"jsonrpc\":\"2.0\",\"id\":\"other\",\"method\":\"tools/call\",\"params\":"
                                    "{\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":2}}}");
        send_msg(f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"early\"}}");
        mcp_job_run(j);
        mcp_job_run(k);
        assert_int_equal(atomic_load(&block_runs), 0);
        assert_int_equal(replies_to(f, "early"), 0);
        assert_int_equal(replies_to(f, "other"), 1);
        const json_t *last = json_array_get(f->out.msgs, json_array_size(f->out.msgs) - 1);
        assert_int_equal(
                json_integer_value(json_object_get(json_object_get(json_object_get(last, "result"), "structuredContent"), "sum")),
                3);
}

static void *run_job(void *arg) {
        mcp_job_run(arg);
        return NULL;
}

/* The server gives up: a running call and a waiting one each get the error,
 * the tool of the waiting one never runs, and a call the client cancelled
 * first stays silent. */
static void test_abandon(void **state) {
        fixture *f = *state;
        pthread_t t;
        init(f);
        atomic_store(&block_started, 0);
        atomic_store(&block_runs, 0);
        mcp_job *running = accept_text(f, BLOCK_CALL("running"));
        mcp_job *waiting = accept_text(f, BLOCK_CALL("waiting"));
        mcp_job *cancelled = accept_text(f, BLOCK_CALL("cancelled"));
        assert_int_equal(pthread_create(&t, NULL, run_job, running), 0);
        while (!atomic_load(&block_started))
                sched_yield();
        send_msg(f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":"
                    "\"cancelled\"}}");
        mcp_session_abandon(f->s, MCP_INTERNAL_ERROR, "server shutting down: a test");
        assert_int_equal(pthread_join(t, NULL), 0);
        mcp_job_run(waiting);
        mcp_job_run(cancelled);
        assert_int_equal(atomic_load(&block_runs), 1);
        assert_int_equal(replies_to(f, "cancelled"), 0);
        assert_int_equal(json_array_size(f->out.msgs), 2);
        for (size_t i = 0; i < 2; i++) {
                const json_t *r = json_array_get(f->out.msgs, i);
                assert_string_equal(cm_json_str(r, "id"), i ? "waiting" : "running");
                assert_int_equal(err_code(r), MCP_INTERNAL_ERROR);
                assert_string_equal(err_msg(r), "server shutting down: a test");
        }
        /* A call that starts afterwards is not affected. */
        assert_non_null(json_object_get(send_msg(f, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":"
                                                    "{\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":2}}}"),
                                        "result"));
}

/* A transport that cannot take a call refuses it: the error, and no run. */
static void test_refuse(void **state) {
        fixture *f = *state;
        init(f);
        atomic_store(&block_runs, 0);
        mcp_job_refuse(accept_text(f, BLOCK_CALL("late")), MCP_INTERNAL_ERROR, "too busy");
        assert_int_equal(atomic_load(&block_runs), 0);
        assert_int_equal(json_array_size(f->out.msgs), 1);
        assert_int_equal(err_code(json_array_get(f->out.msgs, 0)), MCP_INTERNAL_ERROR);
        assert_string_equal(err_msg(json_array_get(f->out.msgs, 0)), "too busy");
}

/* In a batch, each call is registered: cancelling one leaves the others. */
static void test_batch_job(void **state) {
        fixture *f = *state;
        const json_t *r;
        init_version(f, "2025-03-26");
        collect_clear(&f->out);
        atomic_store(&block_runs, 0);
        mcp_job *j = accept_text(f, "[" BLOCK_CALL("b1") ",{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"},"
                                    "{\"jsonrpc\":\"2.0\",\"id\":\"b2\",\"method\":\"tools/call\",\"params\":"
                                    "{\"name\":\"add\",\"arguments\":{\"a\":2,\"b\":2}}}]");
        send_msg(f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"b1\"}}");
        mcp_job_run(j);
        assert_int_equal(atomic_load(&block_runs), 0);
        r = json_array_get(f->out.msgs, json_array_size(f->out.msgs) - 1); /* after add's log message */
        assert_true(json_is_array(r));
        assert_int_equal(json_array_size(r), 2);
        assert_string_equal(cm_json_str(json_array_get(r, 0), "id"), "p");
        assert_string_equal(cm_json_str(json_array_get(r, 1), "id"), "b2");
}

static void test_batches(void **state) {
        fixture *f = *state;
        json_t *r;
        init(f); /* 2025-11-25: no batches */
        r = send_msg(f, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]");
        assert_int_equal(err_code(r), MCP_INVALID_REQUEST);
        teardown(state);
        setup(state);
        f = *state;
        init_version(f, "2025-03-26");
        collect_clear(&f->out);
        r = send_msg(f, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},{\"jsonrpc\":\"2.0\",\"method\":\"x\"},"
                        "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"nope\"}]");
        assert_true(json_is_array(r));
        assert_int_equal(json_array_size(r), 2);
        r = send_msg(f, "[]");
        assert_int_equal(err_code(r), MCP_INVALID_REQUEST);
}

static void test_slow_classification(void **state) {
        json_t *call = json_loads("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\"}", 0, NULL);
        json_t *ping = json_loads("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", 0, NULL);
        json_t *note = json_loads("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", 0, NULL);
        json_t *batch = json_pack("[O,O]", ping, call);
        json_t *tok = json_loads("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"_meta\":{"
                                 "\"progressToken\":7}}}",
                                 0, NULL);
        assert_true(mcp_message_is_slow(call));
        assert_false(mcp_message_is_slow(ping));
        assert_true(mcp_message_is_slow(batch));
        assert_true(mcp_message_has_request(ping));
        assert_false(mcp_message_has_request(note));
        assert_null(mcp_message_progress_token(call));
        assert_int_equal(json_integer_value(mcp_message_progress_token(tok)), 7);
        json_decref(call);
        json_decref(ping);
        json_decref(note);
        json_decref(batch);
        json_decref(tok);
        (void)state;
}

/* Per-session attachments (the tools' sandbox): created once per key,
 * destroyed exactly once, and only when the session's last reference
 * goes (a call in flight holds one). */
static int attach_creates, attach_destroys;
static void *attach_create(void *arg) {
        attach_creates++;
        return arg;
}
static void attach_destroy(void *data) {
        assert_ptr_equal(data, &attach_creates);
        attach_destroys++;
}

static void test_attach(void **state) {
        fixture *f = *state;
        mcp_session *s = mcp_session_new(f->srv, NULL);
        static const char key, other;
        attach_creates = attach_destroys = 0;
        assert_null(mcp_session_attached(s, &key));
        assert_ptr_equal(mcp_session_attach(s, &key, attach_create, &attach_creates, attach_destroy), &attach_creates);
        assert_ptr_equal(mcp_session_attach(s, &key, attach_create, NULL, attach_destroy), &attach_creates);
        assert_ptr_equal(mcp_session_attached(s, &key), &attach_creates);
        assert_null(mcp_session_attached(s, &other));
        assert_int_equal(attach_creates, 1);
        mcp_session_ref(s); /* as a call in flight does */
        mcp_session_unref(s); /* the transport drops it */
        assert_int_equal(attach_destroys, 0);
        mcp_session_unref(s); /* the call returns */
        assert_int_equal(attach_destroys, 1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_negotiation),
                cmocka_unit_test_setup_teardown(test_before_initialize, setup, teardown),
                cmocka_unit_test_setup_teardown(test_bad_messages, setup, teardown),
                cmocka_unit_test_setup_teardown(test_list_paging, setup, teardown),
                cmocka_unit_test_setup_teardown(test_listing_shape, setup, teardown),
                cmocka_unit_test_setup_teardown(test_call, setup, teardown),
                cmocka_unit_test_setup_teardown(test_call_schema_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_progress_and_log_level, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
                cmocka_unit_test_setup_teardown(test_batches, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel_before_run, setup, teardown),
                cmocka_unit_test_setup_teardown(test_abandon, setup, teardown),
                cmocka_unit_test_setup_teardown(test_refuse, setup, teardown),
                cmocka_unit_test_setup_teardown(test_batch_job, setup, teardown),
                cmocka_unit_test(test_slow_classification),
                cmocka_unit_test_setup_teardown(test_attach, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
