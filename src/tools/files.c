/* file_read, file_write, file_list, file_delete, file_move: files inside a
 * container (the session's sandbox, or the one `container` names) through
 * the backend's file operations, which keep every path inside the
 * container's root.  Here: paths (relative ones are under /workspace),
 * encodings, CONTAINER_MCP_FILE_MAX_SIZE_MB and
 * CONTAINER_MCP_FILE_ALLOWED_EXTENSIONS, read-only mode. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/common.h"
#include "tools/filetext.h"
#include "tools/workbench.h"
#include "util/cleanup.h"

#define LIST_MAX_ENTRIES 10000

static const cm_config *cfg_of(mcp_call *call) { return cm_call_app(call)->cfg; }

static uint64_t max_bytes(mcp_call *call) { return (uint64_t)cfg_of(call)->file_max_size_mb << 20; }

static int too_big(mcp_call *call, const char *tool, const char *what, uint64_t size, cm_err *err) {
        unsigned mb = cfg_of(call)->file_max_size_mb;
        return cm_err_set(err, EFBIG,
                          "%s refused: %s is %llu bytes, over the limit of %u MiB (%llu bytes, "
                          "CONTAINER_MCP_FILE_MAX_SIZE_MB=%u); split it, or raise CONTAINER_MCP_FILE_MAX_SIZE_MB",
                          tool, what, (unsigned long long)size, mb, (unsigned long long)max_bytes(call), mb);
}

/* A path argument as a container path (filetext.c). */
static int arg_path(const json_t *args, const char *key, const char *dflt, char **ret, cm_err *err) {
        const json_t *v = json_object_get(args, key);
        const char *s = v ? json_string_value(v) : dflt;
        if (cm_file_path(s, v ? json_string_length(v) : strlen(dflt), ret, err) < 0) {
                cm_err_prefix(err, "%s", key);
                return -1;
        }
        return 0;
}

static int ext_allowed(mcp_call *call, const char *tool, const char *path, cm_err *err) {
        char *const *exts = cfg_of(call)->file_allowed_extensions;
        cleanup_free char *list = NULL;
        if (cm_file_ext_allowed(exts, path))
                return 0;
        list = cm_strv_join(exts, ", ");
        return cm_err_set(err, EPERM,
                          "%s refused: %s does not end in an extension CONTAINER_MCP_FILE_ALLOWED_EXTENSIONS allows "
                          "(%s); use a name with one of them, or ask the operator to add it there",
                          tool, path, list);
}

static const char *arg_encoding(const json_t *args, cm_err *err) {
        const char *e = cm_json_str(args, "encoding");
        e = e ? e : "utf-8";
        if (!cm_text_encoding_known(e)) {
                cm_err_set(err, EINVAL, "encoding \"%s\" is not supported; use one of: %s", e, cm_text_encodings);
                return NULL;
        }
        return e;
}

static size_t arg_size(const json_t *args, const char *key) {
        const json_t *v = json_object_get(args, key);
        return v ? (size_t)json_integer_value(v) : 0;
}

static int file_read(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        const char *enc = arg_encoding(args, err);
        cleanup_free char *path = NULL, *text = NULL;
        cm_container_info info = {0};
        cm_file_data d = {0};
        size_t start, len, tlen;
        cm_backend *b;
        int r;
        if (!enc || arg_path(args, "path", NULL, &path, err) < 0 || ext_allowed(call, "file_read", path, err) < 0 ||
            !(b = CM_TOOL_WORKBENCH(call, cm_json_str(args, "container"), file_read, "read files", &info, err)))
                return -1;
        r = b->ops->file_read(b, info.id, path, max_bytes(call), &d, err);
        if (r < 0 && err->code == EFBIG && d.size)
                r = too_big(call, "file_read", path, d.size, err);
        if (r == 0) {
                /* Lines of the file's bytes: '\n' is the same byte in every
                 * encoding offered, and never inside a UTF-8 sequence. */
                cm_text_lines(d.data, d.len, arg_size(args, "offset"), arg_size(args, "limit"), &start, &len);
                r = cm_text_decode(enc, d.data + start, len, &text, &tlen, err);
        }
        if (r == 0) {
                *ret = json_pack("{s:o, s:I, s:f, s:b, s:s, s:s}", "content", json_stringn(text, tlen), "size",
                                 (json_int_t)d.size, "modified", d.modified, "success", 1, "path", path, "encoding",
                                 enc);
                *ret_text = cm_text_of_bytes(text, tlen);
        }
        cm_file_data_clear(&d);
        cm_container_info_clear(&info);
        return r < 0 ? -1 : 0;
}

static int file_write(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        const char *enc = arg_encoding(args, err);
        const json_t *content = json_object_get(args, "content");
        cleanup_free char *path = NULL, *bytes = NULL;
        cm_container_info info = {0};
        size_t n;
        cm_backend *b;
        int r;
        if (cm_tool_writable(call, "file_write", err) < 0 || !enc || arg_path(args, "path", NULL, &path, err) < 0 ||
            ext_allowed(call, "file_write", path, err) < 0)
                return -1;
        if (cm_text_encode(enc, json_string_value(content), json_string_length(content), &bytes, &n, err) < 0)
                return -1;
        if (n > max_bytes(call))
                return too_big(call, "file_write", "content", n, err);
        if (!(b = CM_TOOL_WORKBENCH(call, cm_json_str(args, "container"), file_write, "write files", &info, err)))
                return -1;
        r = b->ops->file_write(b, info.id, path, bytes, n, err);
        if (r == 0) {
                *ret = json_pack("{s:b, s:s, s:I}", "success", 1, "path", path, "size", (json_int_t)n);
                *ret_text = xasprintf("wrote %zu bytes to %s", n, path);
        }
        cm_container_info_clear(&info);
        return r < 0 ? -1 : 0;
}

static json_t *entry_json(const cm_file_entry *e) {
        return json_pack("{s:s, s:s, s:b, s:o, s:f}", "name", e->name, "path", e->path, "is_directory", e->is_directory,
                         "size", e->is_directory ? json_null() : json_integer((json_int_t)e->size), "modified",
                         e->modified);
}

static void list_result(mcp_call *call, const char *path, const cm_file_entry *v, size_t n, json_t **ret,
                        char **ret_text) {
        char *const *exts = cfg_of(call)->file_allowed_extensions;
        json_t *entries = json_array();
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                abort(); /* out of memory, as x* allocators do */
        fprintf(f, "%s:\n", path);
        for (size_t i = 0; i < n; i++) {
                if (!v[i].is_directory && !cm_file_ext_allowed(exts, v[i].name))
                        continue; /* what the tools may not touch is not shown either */
                (void)json_array_append_new(entries, entry_json(&v[i]));
                if (v[i].is_directory)
                        fprintf(f, "%s/\n", v[i].path);
                else
                        fprintf(f, "%s  %llu bytes\n", v[i].path, (unsigned long long)v[i].size);
        }
        fprintf(f, "[%zu entries]", json_array_size(entries));
        (void)fclose(f);
        *ret = json_pack("{s:o, s:s, s:b}", "entries", entries, "path", path, "success", 1);
        *ret_text = text;
}

static int file_list(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        cleanup_free char *path = NULL;
        cm_container_info info = {0};
        cm_file_query q = {cm_json_str(args, "pattern"), json_is_true(json_object_get(args, "recursive")),
                           LIST_MAX_ENTRIES};
        cm_file_entry *v = NULL;
        size_t n = 0;
        cm_backend *b;
        int r;
        if (arg_path(args, "path", CM_FILE_WORKDIR, &path, err) < 0 ||
            !(b = CM_TOOL_WORKBENCH(call, cm_json_str(args, "container"), file_list, "list files", &info, err)))
                return -1;
        r = b->ops->file_list(b, info.id, path, &q, &v, &n, err);
        if (r == 0)
                list_result(call, path, v, n, ret, ret_text);
        cm_file_entries_free(v, n);
        cm_container_info_clear(&info);
        return r < 0 ? -1 : 0;
}

static int file_delete(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        cleanup_free char *path = NULL;
        cm_container_info info = {0};
        cm_backend *b;
        int r;
        if (cm_tool_writable(call, "file_delete", err) < 0 || arg_path(args, "path", NULL, &path, err) < 0 ||
            ext_allowed(call, "file_delete", path, err) < 0 ||
            !(b = CM_TOOL_WORKBENCH(call, cm_json_str(args, "container"), file_delete, "delete files", &info, err)))
                return -1;
        r = b->ops->file_delete(b, info.id, path, err);
        if (r == 0) {
                *ret = json_pack("{s:b, s:s}", "success", 1, "path", path);
                *ret_text = xasprintf("deleted %s", path);
        }
        cm_container_info_clear(&info);
        return r < 0 ? -1 : 0;
}

static int file_move(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        cleanup_free char *src = NULL, *dst = NULL;
        cm_container_info info = {0};
        cm_backend *b;
        int r;
        if (cm_tool_writable(call, "file_move", err) < 0 || arg_path(args, "source", NULL, &src, err) < 0 ||
            arg_path(args, "destination", NULL, &dst, err) < 0 || ext_allowed(call, "file_move", src, err) < 0 ||
            ext_allowed(call, "file_move", dst, err) < 0 ||
            !(b = CM_TOOL_WORKBENCH(call, cm_json_str(args, "container"), file_move, "move files", &info, err)))
                return -1;
        r = b->ops->file_move(b, info.id, src, dst, err);
        if (r == 0) {
                *ret = json_pack("{s:b, s:s, s:s}", "success", 1, "source", src, "destination", dst);
                *ret_text = xasprintf("moved %s to %s", src, dst);
        }
        cm_container_info_clear(&info);
        return r < 0 ? -1 : 0;
}

/* Name, description and schemas of each: src/tools/defs/files.json. */
static const cm_tool_handler handlers[] = {
        {"file_read", file_read},     {"file_write", file_write}, {"file_list", file_list},
        {"file_delete", file_delete}, {"file_move", file_move},
};

const cm_tool_family cm_tools_files = {__FILE__, handlers, ARRAY_SIZE(handlers)};
