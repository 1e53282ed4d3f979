/* JSON-RPC 2.0 framing: parsing, classifying and answering messages. */
#include <string.h>

#include "mcp/internal.h"
#include "util/cleanup.h"
#include "util/json.h"

const char *const mcp_supported_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", NULL};

/* RFC 5424 severities, as MCP's logging/setLevel names them. */
const char *const mcp_log_levels[] = {"debug", "info",     "notice", "warning",
                                      "error", "critical", "alert",  "emergency", NULL};

int mcp_log_level_index(const char *name) {
        for (int i = 0; name && mcp_log_levels[i]; i++)
                if (strcmp(name, mcp_log_levels[i]) == 0)
                        return i;
        return -1;
}

bool mcp_version_supported(const char *v) {
        for (size_t i = 0; v && mcp_supported_versions[i]; i++)
                if (strcmp(v, mcp_supported_versions[i]) == 0)
                        return true;
        return false;
}

void mcp_sink_ref(mcp_sink *s) {
        if (s && s->ref)
                s->ref(s);
}

void mcp_sink_unref(mcp_sink *s) {
        if (s && s->unref)
                s->unref(s);
}

void mcp_send(mcp_sink *out, json_t *msg) {
        if (out && msg) {
                cleanup_free char *text = cm_json_dump(msg);
                (void)out->send(out, text, strlen(text));
        }
        json_decref(msg);
}

void mcp_send_result(mcp_sink *out, const json_t *id, json_t *result) {
        mcp_send(out, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "result", result));
}

void mcp_send_error(mcp_sink *out, const json_t *id, int code, const char *msg) {
        mcp_send(out, json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error",
                                "code", code, "message", msg));
}

json_t *mcp_parse(const char *buf, size_t len, mcp_sink *out) {
        json_error_t jerr;
        /* \u0000 parses, so the request keeps its id; session.c refuses
         * it, as tools take strings as C strings. */
        json_t *msg = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        if (!msg) {
                cleanup_free char *text = xasprintf(
                        "parse error: %s at line %d, column %d; send one JSON-RPC 2.0 message as valid JSON",
                        jerr.text, jerr.line, jerr.column);
                mcp_send_error(out, NULL, MCP_PARSE_ERROR, text);
        }
        return msg;
}

static bool is_request(const json_t *m) {
        return json_is_object(m) && json_object_get(m, "method") && json_object_get(m, "id");
}

static bool is_method(const json_t *m, const char *name) {
        const char *method = cm_json_str(m, "method");
        return method && strcmp(method, name) == 0;
}

bool mcp_json_has_nul(const json_t *v) {
        size_t i;
        const char *k;
        json_t *e;
        switch (json_typeof(v)) {
        case JSON_STRING: return strlen(json_string_value(v)) != json_string_length(v);
        case JSON_ARRAY:
                json_array_foreach(v, i, e) if (mcp_json_has_nul(e)) return true;
                return false;
        case JSON_OBJECT:
                json_object_foreach((json_t *)v, k, e) if (mcp_json_has_nul(e)) return true; /* keys never hold NUL */
                return false;
        default: return false;
        }
}

bool mcp_message_is_slow(const json_t *msg) {
        size_t i;
        json_t *m;
        if (json_is_array(msg)) {
                json_array_foreach(msg, i, m) if (is_request(m) && is_method(m, "tools/call")) return true;
                return false;
        }
        return is_request(msg) && is_method(msg, "tools/call");
}

bool mcp_message_has_request(const json_t *msg) {
        size_t i;
        json_t *m;
        if (json_is_array(msg)) {
                json_array_foreach(msg, i, m) if (is_request(m)) return true;
                return false;
        }
        /* Anything that is not a well-formed notification or response gets an
         * error reply, so it counts as a request here. */
        if (!json_is_object(msg))
                return true;
        if (json_object_get(msg, "method"))
                return json_object_get(msg, "id") != NULL;
        return !json_object_get(msg, "result") && !json_object_get(msg, "error");
}

bool mcp_message_is_initialize(const json_t *msg) {
        return is_request(msg) && is_method(msg, "initialize");
}

const json_t *mcp_message_progress_token(const json_t *msg) {
        const json_t *tok = json_object_get(json_object_get(json_object_get(msg, "params"), "_meta"), "progressToken");
        return (json_is_string(tok) || json_is_integer(tok)) ? tok : NULL;
}
