/* tooldefs-check: the build's check of the tool definitions against the code.
 *
 *     tooldefs-check STAMP [DEFS.json]
 *
 * Run by meson after it links the library (src/meson.build); a
 * failure fails the build, naming the file and the tool.  It checks what
 * embed.py cannot see: that each schema is one the server's own validator
 * enforces in full (mcp_schema_supported), that each outputSchema describes
 * its fields, that each toolset is one CONTAINER_MCP_TOOLSETS knows, that
 * every definition has a handler and every handler a definition, and that the
 * server accepts every tool exactly as `serve` registers them.  On success it
 * writes STAMP, the file meson waits for.  DEFS.json (embed.py --json)
 * replaces the embedded definitions: tests/build/ checks this check with it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mcp/schema.h"
#include "policy/config.h"
#include "tools/defs.h"
#include "tools/tools.h"
#include "util/cleanup.h"
#include "util/json.h"

#define DEFS_DIR "src/tools/defs/"

static int fail(const char *file, const char *tool, const char *what, const char *msg) {
        fprintf(stderr, "tool definitions: %s%s: tool %s: %s%s%s\n", DEFS_DIR, file, tool, what, *what ? ": " : "",
                msg);
        return -1;
}

static bool toolset_known(const char *name) {
        for (size_t i = 0; name && cm_all_toolsets[i]; i++)
                if (strcmp(cm_all_toolsets[i], name) == 0)
                        return true;
        return false;
}

/* A non-empty "required", or alternatives (anyOf, oneOf) that each give one:
 * a schema every object passes, {} included, describes nothing. */
static bool states_required(const json_t *schema) {
        static const char *const alternatives[] = {"anyOf", "oneOf"};
        const json_t *alt;
        size_t i;
        if (json_array_size(json_object_get(schema, "required")) > 0)
                return true;
        for (size_t k = 0; k < ARRAY_SIZE(alternatives); k++) {
                const json_t *alts = json_object_get(schema, alternatives[k]);
                bool all = json_array_size(alts) > 0;
                json_array_foreach(alts, i, alt) all = all && json_array_size(json_object_get(alt, "required")) > 0;
                if (all)
                        return true;
        }
        return false;
}

static int check_schemas(const char *file, const char *name, const json_t *def) {
        static const char *const which[] = {"inputSchema", "outputSchema"};
        const json_t *out = json_object_get(def, "outputSchema");
        for (size_t k = 0; k < ARRAY_SIZE(which); k++) {
                cm_err err = CM_ERR_INIT;
                if (mcp_schema_supported(json_object_get(def, which[k]), &err) < 0)
                        return fail(file, name, which[k], err.msg);
        }
        /* A real output schema: the fields structuredContent has, and which
         * of them are always there. */
        if (!json_is_object(json_object_get(out, "properties")) || !states_required(out))
                return fail(file, name, "outputSchema",
                            "give \"properties\" (each field of structuredContent with its type) and a non-empty "
                            "\"required\" (the fields every result has; or, for results of several shapes, an "
                            "anyOf of schemas that each give \"required\")");
        return 0;
}

static int check_tool(const char *file, const json_t *def) {
        const char *name = cm_json_str(def, "name");
        if (!name) /* embed.py refuses it first */
                return fail(file, "?", "", "no \"name\"");
        if (!cm_tool_handler_find(name))
                return fail(file, name, "",
                            "no handler; add {\"<name>\", <function>} to a cm_tool_handler table in src/tools/, "
                            "or remove the definition");
        return check_schemas(file, name, def);
}

/* The other way round: a handler nobody can call is a definition missing. */
static bool defined(const json_t *defs, const char *name) {
        const json_t *file, *def;
        size_t i, j;
        json_array_foreach(defs, i, file) {
                json_array_foreach(json_object_get(file, "tools"), j, def) {
                        const char *n = cm_json_str(def, "name");
                        if (n && strcmp(n, name) == 0)
                                return true;
                }
        }
        return false;
}

static int check_handlers(const json_t *defs) {
        int r = 0;
        for (size_t i = 0; cm_tool_families[i]; i++) {
                const cm_tool_family *f = cm_tool_families[i];
                for (size_t j = 0; j < f->n_handlers; j++) {
                        const char *name = f->handlers[j].name;
                        if (!defined(defs, name)) {
                                fprintf(stderr,
                                        "tool definitions: tool %s: a handler in %s but no definition in "
                                        "%s*.json; add one (name, title, description, annotations, inputSchema, "
                                        "outputSchema) or remove the handler\n",
                                        name, f->file, DEFS_DIR);
                                r = -1;
                        } else if (cm_tool_handler_find(name) != &f->handlers[j]) {
                                fprintf(stderr, "tool definitions: tool %s: two handlers (one in %s); keep one\n", name,
                                        f->file);
                                r = -1;
                        }
                }
        }
        return r;
}

static int check_files(const json_t *defs) {
        const json_t *file, *def;
        size_t i, j;
        int r = 0;
        json_array_foreach(defs, i, file) {
                const char *name = cm_json_str(file, "file"), *toolset = cm_json_str(file, "toolset");
                if (!toolset_known(toolset)) {
                        cleanup_free char *all = cm_strv_join((char *const *)cm_all_toolsets, ", ");
                        fprintf(stderr, "tool definitions: %s%s: toolset \"%s\" is not one of %s (policy/config.c)\n",
                                DEFS_DIR, name, toolset ? toolset : "", all);
                        r = -1;
                }
                json_array_foreach(json_object_get(file, "tools"), j, def) {
                        if (check_tool(name, def) < 0)
                                r = -1;
                }
        }
        return r;
}

/* What `serve` does with every toolset on: the server must take each tool. */
static int check_register(const json_t *defs) {
        mcp_server_info info = {.name = "tooldefs-check", .version = "0", .instructions = ""};
        mcp_server *srv = mcp_server_new(&info, NULL);
        cm_config cfg = {0};
        cm_err err = CM_ERR_INIT;
        int r = cm_config_set_toolsets(&cfg, "all", &err);
        if (r == 0)
                r = cm_tools_register_defs(srv, &cfg, defs, &err);
        if (r < 0)
                fprintf(stderr, "tool definitions: the server refuses them: %s\n", err.msg);
        cm_strv_free(cfg.toolsets);
        mcp_server_free(srv);
        return r;
}

static json_t *load_file(const char *path, cm_err *err) {
        cleanup_free char *text = NULL;
        size_t len = 0;
        FILE *f = fopen(path, "re");
        if (!f) {
                (void)cm_err_sys(err, errno, "%s", path);
                return NULL;
        }
        ssize_t n = getdelim(&text, &len, '\0', f);
        (void)fclose(f);
        if (n < 0) {
                (void)cm_err_set(err, EIO, "%s: cannot read it", path);
                return NULL;
        }
        return cm_tooldefs_parse(text, err);
}

int main(int argc, char **argv) {
        cm_err err = CM_ERR_INIT;
        cleanup_json json_t *defs = NULL;
        FILE *stamp;
        int r;
        if (argc != 2 && argc != 3) {
                fprintf(stderr, "usage: tooldefs-check STAMP [DEFS.json]\n");
                return 2;
        }
        if (!(defs = argc == 3 ? load_file(argv[2], &err) : cm_tooldefs_load(&err))) {
                fprintf(stderr, "tool definitions: %s\n", err.msg);
                return 1;
        }
        /* Both lists in full, then what the server says. */
        r = check_files(defs);
        r = check_handlers(defs) < 0 ? -1 : r;
        if (r < 0 || check_register(defs) < 0)
                return 1;
        if (!(stamp = fopen(argv[1], "we")) ||
            fprintf(stamp, "%zu tool definition files checked\n", json_array_size(defs)) < 0 || fclose(stamp) != 0) {
                perror(argv[1]);
                return 1;
        }
        return 0;
}
