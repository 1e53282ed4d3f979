/* mcp_schema_valid: is a tool's schema one mcp_schema_check can use?  Each
 * known keyword must carry a value of the right kind; sub-schemas are
 * checked the same way, to the same depth limit. */
#include "mcp/schema.h"

#include <errno.h>
#include <string.h>

#include "mcp/schema_walk.h"
#include "util/cleanup.h"
#include "util/json.h"

static int valid_node(check *c, const json_t *schema);

static int valid_sub(check *c, const char *key, const json_t *schema) {
        size_t mark = sch_path_push_key(c, key);
        int r = valid_node(c, schema);
        sch_path_pop(c, mark);
        return r;
}

static int valid_type_name(check *c, const json_t *name) {
        if (sch_type_bit(json_string_value(name)))
                return OK;
        cleanup_free char *given = sch_json_excerpt(name);
        return sch_schema_error(c, "\"type\" %s is not one of %s", given,
                            "string, integer, number, boolean, object, array, null");
}

static int valid_type(check *c, const char *key, const json_t *type) {
        const json_t *name;
        size_t i;
        if (json_is_string(type))
                return valid_type_name(c, type);
        if (!json_is_array(type) || json_array_size(type) == 0)
                return sch_schema_error(c, "\"%s\" must be a type name or a non-empty array of them, got %s", key,
                                    cm_json_type_name(type));
        json_array_foreach(type, i, name) {
                int r = valid_type_name(c, name);
                if (r < 0)
                        return r;
        }
        return OK;
}

static int valid_properties(check *c, const char *key, const json_t *props) {
        const json_t *sub;
        const char *name;
        if (!json_is_object(props))
                return sch_schema_error(c, "\"%s\" must be an object of schemas, got %s", key,
                                    cm_json_type_name(props));
        size_t mark = sch_path_push_key(c, key);
        int r = OK;
        json_object_foreach(mut(props), name, sub) {
                if ((r = valid_sub(c, name, sub)) < 0)
                        break;
        }
        sch_path_pop(c, mark);
        return r;
}

static int valid_required(check *c, const char *key, const json_t *required) {
        const json_t *name;
        size_t i;
        if (!json_is_array(required))
                return sch_schema_error(c, "\"%s\" must be an array of field names, got %s", key,
                                    cm_json_type_name(required));
        json_array_foreach(required, i, name) {
                if (!json_is_string(name))
                        return sch_schema_error(c, "\"%s\"[%zu] must be a field name (a string), got %s", key, i,
                                            cm_json_type_name(name));
        }
        return OK;
}

static int valid_additional(check *c, const char *key, const json_t *extra) {
        return json_is_boolean(extra) ? OK : valid_sub(c, key, extra);
}

static int valid_enum(check *c, const char *key, const json_t *values) {
        if (json_is_array(values) && json_array_size(values) > 0)
                return OK;
        return sch_schema_error(c, "\"%s\" must be a non-empty array of the allowed values", key);
}

static int valid_number(check *c, const char *key, const json_t *n) {
        if (json_is_number(n))
                return OK;
        return sch_schema_error(c, "\"%s\" must be a number (JSON Schema 2020-12), got %s", key,
                            cm_json_type_name(n));
}

static int valid_count(check *c, const char *key, const json_t *n) {
        size_t unused;
        if (sch_as_count(n, &unused))
                return OK;
        cleanup_free char *given = sch_json_excerpt(n);
        return sch_schema_error(c, "\"%s\" must be a non-negative integer, got %s", key, given);
}

static int valid_pattern(check *c, const char *key, const json_t *pattern) {
        if (!json_is_string(pattern))
                return sch_schema_error(c, "\"%s\" must be a string, got %s", key, cm_json_type_name(pattern));
        return sch_pattern_get(c, pattern) ? OK : FATAL;
}

static int valid_alternatives(check *c, const char *key, const json_t *alts) {
        const json_t *alt;
        size_t i;
        int r = OK;
        if (!json_is_array(alts) || json_array_size(alts) == 0)
                return sch_schema_error(c, "\"%s\" must be a non-empty array of schemas", key);
        size_t mark = sch_path_push_key(c, key);
        json_array_foreach(alts, i, alt) {
                size_t item = sch_path_push_index(c, i);
                r = valid_node(c, alt);
                sch_path_pop(c, item);
                if (r < 0)
                        break;
        }
        sch_path_pop(c, mark);
        return r;
}

static const struct keyword {
        const char *name;
        int (*valid)(check *c, const char *key, const json_t *val);
} keywords[] = {
        {"type", valid_type},
        {"properties", valid_properties},
        {"required", valid_required},
        {"additionalProperties", valid_additional},
        {"items", valid_sub},
        {"enum", valid_enum},
        {"minimum", valid_number},
        {"maximum", valid_number},
        {"exclusiveMinimum", valid_number},
        {"exclusiveMaximum", valid_number},
        {"minLength", valid_count},
        {"maxLength", valid_count},
        {"minItems", valid_count},
        {"maxItems", valid_count},
        {"pattern", valid_pattern},
        {"anyOf", valid_alternatives},
        {"oneOf", valid_alternatives},
};

/* Keywords that constrain nothing, and "const", which the checker enforces
 * and whose value can be anything: accepted by mcp_schema_supported too. */
static const char *const annotations[] = {"description", "title", "default", "examples", "$comment", "const"};

static bool keyword_known(const char *key) {
        for (size_t i = 0; i < ARRAY_SIZE(keywords); i++)
                if (strcmp(key, keywords[i].name) == 0)
                        return true;
        for (size_t i = 0; i < ARRAY_SIZE(annotations); i++)
                if (strcmp(key, annotations[i]) == 0)
                        return true;
        return false;
}

static int strict_node(check *c, const json_t *schema) {
        const json_t *props = json_object_get(schema, "properties"), *name;
        const char *key;
        const json_t *unused;
        size_t i;
        json_object_foreach(mut(schema), key, unused) {
                if (!keyword_known(key))
                        return sch_schema_error(c, "keyword \"%s\" is not checked by this server's validator "
                                                   "(src/mcp/schema.h lists those it checks); drop it or add it there",
                                                key);
        }
        json_array_foreach(json_object_get(schema, "required"), i, name) {
                if (props && json_is_string(name) && !json_object_get(props, json_string_value(name)))
                        return sch_schema_error(c, "\"required\" names \"%s\", which is not in \"properties\"",
                                                json_string_value(name));
        }
        return OK;
}

static int valid_node(check *c, const json_t *schema) {
        int r = OK;
        if (!json_is_object(schema))
                return sch_schema_error(c, "expected a schema (an object), got %s", cm_json_type_name(schema));
        if (c->depth >= MAX_DEPTH)
                return sch_schema_error(c, "nested more than %d levels deep", MAX_DEPTH);
        c->depth++;
        if (c->strict)
                r = strict_node(c, schema);
        for (size_t i = 0; i < ARRAY_SIZE(keywords) && r == OK; i++) {
                const json_t *val = json_object_get(schema, keywords[i].name);
                if (val)
                        r = keywords[i].valid(c, keywords[i].name, val);
        }
        c->depth--;
        return r;
}

static int valid_root(const json_t *schema, bool strict, cm_err *err) {
        cleanup_check check c = {.err = err, .schema_only = true, .strict = strict};
        if (!schema) {
                (void)cm_err_set(err, EINVAL, "invalid schema: none given");
                return -1;
        }
        return valid_node(&c, schema) < 0 ? -1 : 0;
}

int mcp_schema_valid(const json_t *schema, cm_err *err) { return valid_root(schema, false, err); }
int mcp_schema_supported(const json_t *schema, cm_err *err) { return valid_root(schema, true, err); }
