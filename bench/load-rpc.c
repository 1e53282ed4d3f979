/* load-rpc.c: JSON-RPC messages and the checks of a tools/call reply. */
#include <stdio.h>
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

/* text_json is the text already encoded as a JSON string, quotes included. */
void format_call(struct buf *out, long id, const char *text_json)
{
        char head[128];
        int n = snprintf(head, sizeof(head),
                         "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"tools/call\","
                         "\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":",
                         id);

        out->len = 0;
        buf_append(out, head, (size_t)n);
        buf_append(out, text_json, strlen(text_json));
        buf_append(out, "}}}", 3);
}

bool reply_has_id(json_t *msg, long id)
{
        json_t *jid = json_object_get(msg, "id");

        return json_is_integer(jid) && json_integer_value(jid) == id;
}

/* Classify a tools/call reply: 0 if it is a correct echo of text. */
int check_call_reply(json_t *msg, const char *text, struct tally *t)
{
        json_t *result = json_object_get(msg, "result");
        json_t *sc_text = json_object_get(json_object_get(result, "structuredContent"), "text");
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
        if (!json_is_string(sc_text) || strcmp(json_string_value(sc_text), text) ||
            !json_is_string(c0_text) || strcmp(json_string_value(c0_text), text)) {
                tally_error(t, ERR_REPLY, "content/structuredContent text is not the echoed text");
                return -1;
        }
        return 0;
}

/* Protocol version the server chose, for MCP-Protocol-Version. */
char *negotiated_version(json_t *msg)
{
        json_t *v = json_object_get(json_object_get(msg, "result"), "protocolVersion");

        return xstrdup(json_is_string(v) ? json_string_value(v) : PROTOCOL_VERSION);
}
