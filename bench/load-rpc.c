/* load-rpc.c: JSON-RPC messages and the checks of a tools/call reply. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load.h"

const char *const err_names[ERR_KINDS] = { "io", "http", "rpc", "tool", "reply" };

void tally_error(struct tally *t, enum err_kind k, const char *msg)
{
        long total = 0;

        for (int i = 0; i < ERR_KINDS; i++)
                total += t->errors[i];
        if (!total)
                (void)snprintf(t->first_err, sizeof(t->first_err), "%s: %s", err_names[k], msg);
        t->errors[k]++;
}

void format_initialize(struct buf *out, long id)
{
        char tmp[512];
        int n = snprintf(tmp, sizeof(tmp),
                         "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"initialize\",\"params\":"
                         "{\"protocolVersion\":\"" PROTOCOL_VERSION "\",\"capabilities\":{},"
                         "\"clientInfo\":{\"name\":\"bench\",\"version\":\"1\"}}}",
                         id);

        out->len = 0;
        buf_append(out, tmp, (size_t)n);
}

void format_initialized(struct buf *out)
{
        static const char msg[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";

        out->len = 0;
        buf_append(out, msg, sizeof(msg) - 1);
}

/* The part of a tools/call request after its id, for format_call:
 * ,"method":"tools/call","params":{"name":TOOL,"arguments":ARGS}} */
char *call_tail(const char *tool, json_t *args)
{
        static const char method[] = ",\"method\":\"tools/call\",\"params\":";
        json_t *params = json_pack("{s:s, s:O}", "name", tool, "arguments", args);
        char *p = params ? json_dumps(params, JSON_COMPACT) : NULL;
        struct buf tail = { 0 };

        if (!p)
                die("tool name or arguments not valid JSON");
        json_decref(params);
        buf_append(&tail, method, sizeof(method) - 1);
        buf_append(&tail, p, strlen(p));
        buf_append(&tail, "}", 1);
        free(p);
        return tail.data;
}

void format_call(struct buf *out, long id, const char *tail)
{
        char head[64];
        int n = snprintf(head, sizeof(head), "{\"jsonrpc\":\"2.0\",\"id\":%ld", id);

        out->len = 0;
        buf_append(out, head, (size_t)n);
        buf_append(out, tail, strlen(tail));
}

bool reply_has_id(json_t *msg, long id)
{
        json_t *jid = json_object_get(msg, "id");

        return json_is_integer(jid) && json_integer_value(jid) == id;
}

/* Classify a tools/call reply: 0 if it succeeded.  With text, it must echo
 * that text; without, a structuredContent.exitCode, if any, must be 0 (a
 * command that failed measures nothing). */
int check_call_reply(json_t *msg, const char *text, struct tally *t)
{
        json_t *result = json_object_get(msg, "result");
        json_t *sc = json_object_get(result, "structuredContent");
        json_t *sc_text = json_object_get(sc, "text");
        json_t *exit_code = json_object_get(sc, "exitCode");
        json_t *content = json_object_get(result, "content");
        json_t *c0_text = json_object_get(json_array_get(content, 0), "text");
        char msgbuf[ERR_LEN];

        if (json_object_get(msg, "error")) {
                json_t *m = json_object_get(json_object_get(msg, "error"), "message");

                set_err(msgbuf, "JSON-RPC error: %s", json_is_string(m) ? json_string_value(m) : "?");
                tally_error(t, ERR_RPC, msgbuf);
                return -1;
        }
        if (!json_is_object(result)) {
                tally_error(t, ERR_REPLY, "reply has neither result nor error");
                return -1;
        }
        if (json_is_true(json_object_get(result, "isError"))) {
                set_err(msgbuf, "tool returned isError: %s",
                        json_is_string(c0_text) ? json_string_value(c0_text) : "?");
                tally_error(t, ERR_TOOL, msgbuf);
                return -1;
        }
        if (!text) {
                if (json_is_integer(exit_code) && json_integer_value(exit_code) != 0) {
                        set_err(msgbuf, "exitCode %lld: %s", (long long)json_integer_value(exit_code),
                                json_is_string(c0_text) ? json_string_value(c0_text) : "?");
                        tally_error(t, ERR_TOOL, msgbuf);
                        return -1;
                }
                return 0;
        }
        if (!json_is_string(sc_text) || strcmp(json_string_value(sc_text), text) ||
            !json_is_string(c0_text) || strcmp(json_string_value(c0_text), text)) {
                tally_error(t, ERR_REPLY, "content/structuredContent text is not the echoed text");
                return -1;
        }
        return 0;
}

/* --expect: every member of expect must be in the reply's
 * structuredContent with an equal value (a reply that says the wrong thing
 * measures nothing). */
int check_expect(json_t *msg, json_t *expect, struct tally *t)
{
        json_t *sc = json_object_get(json_object_get(msg, "result"), "structuredContent");
        const char *key;
        json_t *want;
        char msgbuf[ERR_LEN];

        json_object_foreach(expect, key, want) {
                if (!json_equal(json_object_get(sc, key), want)) {
                        char *got = json_dumps(json_object_get(sc, key), JSON_COMPACT | JSON_ENCODE_ANY);

                        set_err(msgbuf, "structuredContent.%s is %.80s, not the expected value", key,
                                got ? got : "absent");
                        free(got);
                        tally_error(t, ERR_REPLY, msgbuf);
                        return -1;
                }
        }
        return 0;
}

/* structuredContent.id of a reply (run_container's container), or NULL. */
const char *reply_result_id(json_t *msg)
{
        json_t *id = json_object_get(json_object_get(json_object_get(msg, "result"), "structuredContent"), "id");

        return json_is_string(id) ? json_string_value(id) : NULL;
}

/* Protocol version the server chose, for MCP-Protocol-Version. */
char *negotiated_version(json_t *msg)
{
        json_t *v = json_object_get(json_object_get(msg, "result"), "protocolVersion");

        return xstrdup(json_is_string(v) ? json_string_value(v) : PROTOCOL_VERSION);
}
