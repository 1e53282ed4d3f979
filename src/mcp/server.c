/* The server: its identity, the tool registry, tools/list and tools/call. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/internal.h"
#include "mcp/schema.h"
#include "util/cleanup.h"
#include "util/json.h"

#define DEFAULT_PAGE_SIZE 100
#define DEFAULT_MAX_MESSAGE (16u << 20)

mcp_server *mcp_server_new(const mcp_server_info *info, void *userdata) {
        mcp_server *srv = xcalloc(1, sizeof *srv);
        srv->name = xstrdup(info->name);
        srv->version = xstrdup(info->version);
        srv->instructions = xstrdup(info->instructions);
        srv->page_size = info->page_size ? info->page_size : DEFAULT_PAGE_SIZE;
        srv->max_message = info->max_message_bytes ? info->max_message_bytes : DEFAULT_MAX_MESSAGE;
        srv->userdata = userdata;
        return srv;
}

void mcp_server_free(mcp_server *srv) {
        if (!srv)
                return;
        for (size_t i = 0; i < srv->n_tools; i++) {
                json_decref(srv->tools[i].listing);
        }
        free(srv->tools);
        free(srv->name);
        free(srv->version);
        free(srv->instructions);
        free(srv);
}

void *mcp_server_userdata(mcp_server *srv) { return srv->userdata; }
size_t mcp_server_max_message(mcp_server *srv) { return srv->max_message; }
size_t mcp_server_tool_count(mcp_server *srv) { return srv->n_tools; }

static json_t *parse_schema(const char *text, const char *tool, const char *which, cm_err *err) {
        json_error_t jerr;
        json_t *s = json_loads(text, 0, &jerr);
        if (!s)
                cm_err_set(err, EINVAL, "tool %s: %s is not JSON: %s", tool, which, jerr.text);
        return s;
}

/* The tools/list entry of a tool described in C. */
static json_t *listing_of(const mcp_tool *t, cm_err *err) {
        json_t *input = parse_schema(t->input_schema, t->name, "inputSchema", err), *output = NULL;
        if (!input)
                return NULL;
        if (t->output_schema && !(output = parse_schema(t->output_schema, t->name, "outputSchema", err))) {
                json_decref(input);
                return NULL;
        }
        json_t *ann = json_pack("{s:s, s:b, s:b, s:b, s:b}", "title", t->title, "readOnlyHint",
                                !!(t->hints & MCP_HINT_READ_ONLY), "destructiveHint",
                                !!(t->hints & MCP_HINT_DESTRUCTIVE), "idempotentHint",
                                !!(t->hints & MCP_HINT_IDEMPOTENT), "openWorldHint", !!(t->hints & MCP_HINT_OPEN_WORLD));
        json_t *e = json_pack("{s:s, s:s, s:s, s:o, s:o}", "name", t->name, "title", t->title, "description",
                              t->description, "inputSchema", input, "annotations", ann);
        if (output)
                json_object_set_new(e, "outputSchema", output);
        return e;
}

static int check_schema(const json_t *schema, const char *tool, const char *which, cm_err *err) {
        if (mcp_schema_valid(schema, err) < 0) {
                cm_err_prefix(err, "tool %s: %s", tool, which);
                return -EINVAL;
        }
        return 0;
}

/* Takes `listing`, the tool's tools/list entry. */
static int add_listing(mcp_server *srv, json_t *listing, mcp_tool_fn handler, bool quick, cm_err *err) {
        cleanup_json json_t *owned = listing;
        const char *name = cm_json_str(listing, "name");
        json_t *input = json_object_get(listing, "inputSchema"), *output = json_object_get(listing, "outputSchema");
        if (!name)
                return cm_err_set(err, EINVAL, "a tool definition without a \"name\" string");
        if (mcp_server_find_tool(srv, name))
                return cm_err_set(err, EEXIST, "tool %s registered twice", name);
        if (check_schema(input, name, "inputSchema", err) < 0 ||
            (output && check_schema(output, name, "outputSchema", err) < 0))
                return -EINVAL;
        srv->tools = xrealloc(srv->tools, (srv->n_tools + 1) * sizeof *srv->tools);
        srv->tools[srv->n_tools++] = (reg_tool){name, handler, quick, input, output, steal_pointer(&owned)};
        return 0;
}

int mcp_server_add_tool(mcp_server *srv, const mcp_tool *t, cm_err *err) {
        json_t *listing = listing_of(t, err);
        return listing ? add_listing(srv, listing, t->handler, t->quick, err) : -EINVAL;
}

int mcp_server_add_tool_def(mcp_server *srv, const json_t *def, mcp_tool_fn handler, bool quick, cm_err *err) {
        if (!json_is_object(def))
                return cm_err_set(err, EINVAL, "a tool definition must be a JSON object");
        return add_listing(srv, json_incref((json_t *)def), handler, quick, err);
}

const reg_tool *mcp_server_find_tool(mcp_server *srv, const char *name) {
        for (size_t i = 0; name && i < srv->n_tools; i++)
                if (strcmp(srv->tools[i].name, name) == 0)
                        return &srv->tools[i];
        return NULL;
}

bool mcp_message_is_quick_call(mcp_server *srv, const json_t *msg) {
        const char *method = json_string_value(json_object_get(msg, "method"));
        const reg_tool *t;
        if (!method || strcmp(method, "tools/call") != 0)
                return false;
        t = mcp_server_find_tool(srv, json_string_value(json_object_get(json_object_get(msg, "params"), "name")));
        return t && t->quick;
}

/* Cursors are opaque to clients; ours is the offset of the next page. */
static int parse_cursor(const json_t *params, size_t n, size_t *ret_off) {
        const json_t *c = json_object_get(params, "cursor");
        const char *s;
        char *end;
        unsigned long v;
        *ret_off = 0;
        if (!c || json_is_null(c))
                return 0;
        s = json_string_value(c);
        if (!s || strncmp(s, "tools:", 6) != 0)
                return -1;
        errno = 0;
        v = strtoul(s + 6, &end, 10);
        if (errno || *end || end == s + 6 || v == 0 || v >= n)
                return -1;
        *ret_off = v;
        return 0;
}

json_t *mcp_server_list_tools(mcp_server *srv, const json_t *params, int *ret_code, char **ret_msg) {
        size_t off, end;
        json_t *list, *res;
        if (params && !json_is_object(params)) {
                *ret_code = MCP_INVALID_PARAMS;
                *ret_msg = xstrdup("tools/list: params must be an object");
                return NULL;
        }
        if (parse_cursor(params, srv->n_tools, &off) < 0) {
                *ret_code = MCP_INVALID_PARAMS;
                *ret_msg = xstrdup("tools/list: invalid cursor; pass the nextCursor of the previous page "
                                   "unchanged, or no cursor for the first page");
                return NULL;
        }
        end = off + srv->page_size < srv->n_tools ? off + srv->page_size : srv->n_tools;
        list = json_array();
        for (size_t i = off; i < end; i++)
                json_array_append(list, srv->tools[i].listing);
        res = json_pack("{s:o}", "tools", list);
        if (end < srv->n_tools) {
                char cur[32];
                (void)snprintf(cur, sizeof cur, "tools:%zu", end);
                json_object_set_new(res, "nextCursor", json_string(cur));
        }
        return res;
}

static json_t *tool_error(const char *text) {
        return json_pack("{s:[{s:s, s:o}], s:b}", "content", "type", "text", "text", cm_json_bytes(text, strlen(text)),
                         "isError", 1);
}

static json_t *tool_success(json_t *structured, char *text) {
        cleanup_free char *owned = text ? text : cm_json_dump(structured);
        /* Text may carry a process's bytes: make it valid UTF-8 first. */
        json_t *r = json_pack("{s:[{s:s, s:o}], s:b}", "content", "type", "text", "text",
                              cm_json_bytes(owned, strlen(owned)), "isError", 0);
        if (structured)
                json_object_set_new(r, "structuredContent", structured);
        return r;
}

json_t *mcp_server_call_tool(mcp_server *srv, const reg_tool *t, mcp_call *call, json_t *args) {
        cm_err err = CM_ERR_INIT;
        json_t *structured = NULL;
        char *text = NULL;

        if (mcp_schema_check(t->input, args, "arguments", &err) < 0) {
                cleanup_free char *msg = xasprintf("invalid arguments for %s: %s", t->name, err.msg);
                return tool_error(msg);
        }
        if (t->handler(call, args, &structured, &text, &err) < 0) {
                json_decref(structured);
                free(text);
                return tool_error(err.msg[0] ? err.msg : "the tool failed without saying why");
        }
        /* Our own results must match what we promise; a mismatch is our bug,
         * and saying so beats handing the client something it will reject. */
        if (t->output && (!structured || mcp_schema_check(t->output, structured, "structuredContent", &err) < 0)) {
                if (!structured)
                        cm_err_set(&err, EINVAL, "no structuredContent");
                cleanup_free char *msg = xasprintf("internal error in %s: result does not match its outputSchema: %s",
                                                   t->name, err.msg);
                json_decref(structured);
                free(text);
                return tool_error(msg);
        }
        return tool_success(structured, text);
}
