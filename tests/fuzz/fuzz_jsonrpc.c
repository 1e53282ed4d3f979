/* libFuzzer: arbitrary bytes as a JSON-RPC message to an initialized
 * session, and as tool arguments checked against a schema with every
 * keyword.  Nothing may crash, leak or hang. */
#include <stdint.h>
#include <string.h>

#include "mcp/mcp.h"
#include "mcp/schema.h"
#include "util/cleanup.h"

static int null_send(mcp_sink *self, const char *json, size_t len) {
        (void)self;
        (void)json;
        (void)len;
        return 0;
}

static mcp_sink sink = {null_send, NULL, NULL};

static int add_tool(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        mcp_call_progress(call, 1, 1, "done");
        mcp_call_log(call, "info", "adding");
        *ret = json_pack("{s:I}", "sum", json_integer_value(json_object_get(args, "a")));
        return 0;
}

#define SCHEMA                                                                                                         \
        "{\"type\":\"object\",\"properties\":{"                                                                        \
        "\"a\":{\"type\":\"integer\",\"minimum\":-5,\"maximum\":1000},"                                               \
        "\"s\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":8,\"pattern\":\"^[a-z]+$\"},"                      \
        "\"e\":{\"enum\":[\"x\",1,null]},"                                                                             \
        "\"l\":{\"type\":\"array\",\"items\":{\"type\":[\"string\",\"number\"]},\"maxItems\":4},"                     \
        "\"o\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"boolean\"}},"                                \
        "\"u\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}},"                                           \
        "\"required\":[\"a\"],\"additionalProperties\":false}"

static const mcp_tool tool = {"add", "Add", "Adds.", SCHEMA, NULL, 0, "t", add_tool};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static mcp_server *srv;
        static json_t *schema;
        cm_err err = CM_ERR_INIT;
        if (!srv) {
                srv = mcp_server_new(&(mcp_server_info){"fuzz", "0", "i", 1, 0}, NULL);
                if (mcp_server_add_tool(srv, &tool, &err) < 0)
                        __builtin_trap();
                schema = json_loads(SCHEMA, 0, NULL);
        }
        mcp_session *s = mcp_session_new(srv, &sink);
        json_t *init = json_loads("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
                                  "\"protocolVersion\":\"2025-03-26\"}}",
                                  0, NULL);
        mcp_session_handle(s, init, &sink);
        json_decref(init);

        json_t *m = mcp_parse((const char *)data, size, &sink);
        if (m) {
                mcp_session_handle(s, m, &sink);
                (void)mcp_schema_check(schema, m, "arguments", &err);
                json_decref(m);
        }
        mcp_session_unref(s);
        return 0;
}
