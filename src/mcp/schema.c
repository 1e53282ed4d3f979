/* A JSON Schema checker for the subset tool schemas use (see schema.h).
 *
 * One walk over schema and value together.  The path of the field being
 * checked is kept in a buffer that grows and shrinks with the walk, so an
 * error can name the field ("mounts[2].source") without building strings on
 * the way down.  The first error found wins: keywords of a node are checked in
 * the order of the `steps` table, required fields before properties (in
 * schema order) before additional properties (in object order).  Checking a
 * schema itself is schema_valid.c; what both walks share, schema_walk.c. */
#include "mcp/schema.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/schema_walk.h"
#include "util/cleanup.h"
#include "util/json.h"

/* Shortest text that reads back as the same double: 0.1, not 0.10000000000000001. */
static void number_text(const json_t *v, char *buf, size_t size) {
        if (json_is_integer(v)) {
                (void)snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
                return;
        }
        double d = json_real_value(v);
        (void)snprintf(buf, size, "%.15g", d);
        if (strtod(buf, NULL) != d)
                (void)snprintf(buf, size, "%.17g", d);
}

static size_t utf8_length(const char *s, size_t n) {
        size_t count = 0;
        for (size_t i = 0; i < n; i++)
                count += ((unsigned char)s[i] & 0xC0) != 0x80; /* skip continuation bytes */
        return count;
}

/* long double holds every int64 exactly on the platforms we build for, so
 * mixed integer/real comparisons do not round. */
static long double number_value(const json_t *v) {
        return json_is_integer(v) ? (long double)json_integer_value(v) : (long double)json_real_value(v);
}

static int number_cmp(const json_t *a, const json_t *b) {
        if (json_is_integer(a) && json_is_integer(b)) {
                json_int_t x = json_integer_value(a), y = json_integer_value(b);
                return (x > y) - (x < y);
        }
        long double x = number_value(a), y = number_value(b);
        return (x > y) - (x < y);
}

/* json_equal, except that numbers compare by value (1 == 1.0), as JSON
 * Schema's enum and const want. */
static bool same_json(const json_t *a, const json_t *b, unsigned depth) {
        const json_t *x;
        if (json_is_number(a) && json_is_number(b))
                return number_cmp(a, b) == 0;
        if (json_typeof(a) != json_typeof(b) || depth > MAX_DEPTH)
                return false;
        if (json_is_array(a)) {
                size_t i;
                if (json_array_size(a) != json_array_size(b))
                        return false;
                json_array_foreach(a, i, x) {
                        if (!same_json(x, json_array_get(b, i), depth + 1))
                                return false;
                }
                return true;
        }
        if (json_is_object(a)) {
                const char *key;
                if (json_object_size(a) != json_object_size(b))
                        return false;
                json_object_foreach(mut(a), key, x) {
                        const json_t *y = json_object_get(b, key);
                        if (!y || !same_json(x, y, depth + 1))
                                return false;
                }
                return true;
        }
        return json_equal(a, b);
}

/* The "type" keyword as a set of bits; 0 when absent or unusable. */
static unsigned type_mask(const json_t *type) {
        const json_t *t;
        unsigned mask = 0;
        size_t i;
        if (json_is_string(type))
                return sch_type_bit(json_string_value(type));
        json_array_foreach(type, i, t) mask |= sch_type_bit(json_string_value(t));
        return mask;
}

static bool type_accepts(unsigned mask, const json_t *v) {
        switch (json_typeof(v)) {
        case JSON_OBJECT: return mask & T_OBJECT;
        case JSON_ARRAY: return mask & T_ARRAY;
        case JSON_STRING: return mask & T_STRING;
        case JSON_INTEGER: return mask & (T_INTEGER | T_NUMBER);
        case JSON_REAL: return (mask & T_NUMBER) || ((mask & T_INTEGER) && sch_is_whole(json_real_value(v)));
        case JSON_TRUE:
        case JSON_FALSE: return mask & T_BOOLEAN;
        case JSON_NULL: return mask & T_NULL;
        }
        return false;
}

/* "string", "string or null", "string, integer or null". */
static char *type_text(unsigned mask) {
        cleanup_strbuf strbuf b = {0};
        unsigned left = mask;
        for (size_t i = 0; i < ARRAY_SIZE(sch_type_names); i++) {
                if (!(left & 1u << i))
                        continue;
                left &= ~(1u << i);
                sch_strbuf_printf(&b, "%s%s", b.len == 0 ? "" : left ? ", " : " or ", sch_type_names[i]);
        }
        return xstrdup(sch_strbuf_str(&b));
}

/* What a type error says was given: the type, and the value of a number,
 * since "expected integer, got number" alone does not say what is wrong. */
static char *given_text(const json_t *v) {
        char num[64];
        if (!json_is_real(v))
                return xstrdup(cm_json_type_name(v));
        number_text(v, num, sizeof num);
        return xasprintf("number %s", num);
}

/* Could this alternative of anyOf/oneOf be the one the caller meant? */
static bool type_fits(const json_t *schema, const json_t *v) {
        unsigned mask = type_mask(json_object_get(schema, "type"));
        return mask == 0 || type_accepts(mask, v);
}

/* ---- checking a value -------------------------------------------------- */

static int check_node(check *c, const json_t *schema, const json_t *v);

static int check_field(check *c, const char *key, const json_t *schema, const json_t *v) {
        size_t mark = sch_path_push_key(c, key);
        int r = check_node(c, schema, v);
        sch_path_pop(c, mark);
        return r;
}

static int check_type(check *c, const json_t *s, const json_t *v) {
        unsigned mask = type_mask(json_object_get(s, "type"));
        if (mask == 0 || type_accepts(mask, v))
                return OK;
        cleanup_free char *want = type_text(mask);
        cleanup_free char *given = given_text(v);
        return sch_fail(c, true, "expected %s, got %s", want, given);
}

static int check_enum(check *c, const json_t *s, const json_t *v) {
        const json_t *allowed = json_object_get(s, "enum"), *a;
        cleanup_strbuf strbuf list = {0};
        size_t i;
        if (!json_is_array(allowed))
                return OK;
        json_array_foreach(allowed, i, a) {
                if (same_json(a, v, 0))
                        return OK;
        }
        json_array_foreach(allowed, i, a) {
                cleanup_free char *text = sch_json_excerpt(a);
                sch_strbuf_printf(&list, "%s%s", i ? ", " : "", text);
        }
        cleanup_free char *given = sch_json_excerpt(v);
        return sch_fail(c, true, "%s is not one of %s", given, sch_strbuf_str(&list));
}

static int check_const(check *c, const json_t *s, const json_t *v) {
        const json_t *want = json_object_get(s, "const");
        if (!want || same_json(want, v, 0))
                return OK;
        cleanup_free char *want_text = sch_json_excerpt(want);
        cleanup_free char *given = sch_json_excerpt(v);
        return sch_fail(c, true, "expected %s, got %s", want_text, given);
}

static const struct bound {
        const char *key;
        const char *text; /* "<value> <text> <limit>" */
        unsigned fails;   /* bit 1 + number_cmp(value, limit): 0 below, 1 equal, 2 above */
} bounds[] = {
        {"minimum", "is below the minimum", 1u << 0},
        {"maximum", "is above the maximum", 1u << 2},
        {"exclusiveMinimum", "must be greater than", 1u << 0 | 1u << 1},
        {"exclusiveMaximum", "must be less than", 1u << 1 | 1u << 2},
};

static int check_bounds(check *c, const json_t *s, const json_t *v) {
        char given[64], limit_text[64];
        if (!json_is_number(v))
                return OK;
        for (size_t i = 0; i < ARRAY_SIZE(bounds); i++) {
                const json_t *limit = json_object_get(s, bounds[i].key);
                if (!json_is_number(limit) || !(bounds[i].fails & 1u << (1 + number_cmp(v, limit))))
                        continue;
                number_text(v, given, sizeof given);
                number_text(limit, limit_text, sizeof limit_text);
                return sch_fail(c, true, "%s %s %s", given, bounds[i].text, limit_text);
        }
        return OK;
}

/* minLength/maxLength and minItems/maxItems: `n` things of `unit`. */
static int check_count(check *c, const json_t *s, size_t n, const char *const keys[2], const char *unit) {
        size_t limit;
        const char *plural = n == 1 ? "" : "s";
        if (sch_as_count(json_object_get(s, keys[0]), &limit) && n < limit)
                return sch_fail(c, true, "%zu %s%s is fewer than the minimum %zu", n, unit, plural, limit);
        if (sch_as_count(json_object_get(s, keys[1]), &limit) && n > limit)
                return sch_fail(c, true, "%zu %s%s is more than the maximum %zu", n, unit, plural, limit);
        return OK;
}

static int check_length(check *c, const json_t *s, const json_t *v) {
        static const char *const keys[2] = {"minLength", "maxLength"};
        if (!json_is_string(v))
                return OK;
        return check_count(c, s, utf8_length(json_string_value(v), json_string_length(v)), keys, "character");
}

static int check_pattern(check *c, const json_t *s, const json_t *v) {
        const json_t *pattern = json_object_get(s, "pattern");
        regex_t *re;
        if (!json_is_string(v) || !json_is_string(pattern))
                return OK;
        if (!(re = sch_pattern_get(c, pattern)))
                return FATAL;
        /* regexec stops at a NUL; what follows it must not slip past the pattern. */
        bool has_nul = strlen(json_string_value(v)) != json_string_length(v);
        if (!has_nul && regexec(re, json_string_value(v), 0, NULL, 0) == 0)
                return OK;
        cleanup_free char *given = sch_json_excerpt(v);
        if (has_nul)
                return sch_fail(c, true, "%s contains a NUL character, which the pattern %s does not allow", given,
                            json_string_value(pattern));
        return sch_fail(c, true, "%s does not match the pattern %s", given, json_string_value(pattern));
}

static int check_item_count(check *c, const json_t *s, const json_t *v) {
        static const char *const keys[2] = {"minItems", "maxItems"};
        if (!json_is_array(v))
                return OK;
        return check_count(c, s, json_array_size(v), keys, "item");
}

static int check_items(check *c, const json_t *s, const json_t *v) {
        const json_t *items = json_object_get(s, "items"), *item;
        size_t i;
        if (!json_is_array(v) || !items)
                return OK;
        json_array_foreach(v, i, item) {
                size_t mark = sch_path_push_index(c, i);
                int r = check_node(c, items, item);
                sch_path_pop(c, mark);
                if (r < 0)
                        return r;
        }
        return OK;
}

static int check_required(check *c, const json_t *s, const json_t *v) {
        const json_t *required = json_object_get(s, "required"), *name;
        const json_t *props = json_object_get(s, "properties");
        size_t i;
        if (!json_is_object(v))
                return OK;
        json_array_foreach(required, i, name) {
                const char *key = json_string_value(name);
                if (!key || json_object_get(v, key))
                        continue;
                unsigned mask = type_mask(json_object_get(json_object_get(props, key), "type"));
                if (mask == 0)
                        return sch_fail(c, false, "missing required field \"%s\"", key);
                cleanup_free char *want = type_text(mask);
                return sch_fail(c, false, "missing required field \"%s\" (%s)", key, want);
        }
        return OK;
}

static int check_properties(check *c, const json_t *s, const json_t *v) {
        const json_t *props = json_object_get(s, "properties"), *sub;
        const char *key;
        if (!json_is_object(v) || !json_is_object(props))
                return OK;
        json_object_foreach(mut(props), key, sub) {
                const json_t *field = json_object_get(v, key);
                int r = field ? check_field(c, key, sub, field) : OK;
                if (r < 0)
                        return r;
        }
        return OK;
}

/* additionalProperties: false.  The message lists what is allowed, so the
 * caller can fix a misspelt name in one go. */
static int unknown_field(check *c, const char *key, const json_t *props) {
        cleanup_strbuf strbuf names = {0};
        const json_t *sub;
        const char *name;
        json_object_foreach(mut(props), name, sub) {
                sch_strbuf_printf(&names, "%s%s", names.len ? ", " : "", name);
        }
        if (sch_at_root(c))
                return sch_fail(c, false, "unknown field \"%s\": this tool takes %s", key,
                            names.len ? names.s : "no arguments");
        return sch_fail(c, false, "unknown field \"%s\": the fields allowed here are %s", key,
                    names.len ? names.s : "none");
}

static int check_additional(check *c, const json_t *s, const json_t *v) {
        const json_t *extra = json_object_get(s, "additionalProperties"), *field;
        const json_t *props = json_object_get(s, "properties");
        const char *key;
        if (!json_is_object(v) || !extra || json_is_true(extra))
                return OK;
        json_object_foreach(mut(v), key, field) {
                int r;
                if (json_object_get(props, key))
                        continue;
                if (json_is_false(extra))
                        return unknown_field(c, key, props);
                if ((r = check_field(c, key, extra, field)) < 0)
                        return r;
        }
        return OK;
}

/* No alternative fits and none has the value's type: say which types would. */
static int no_alternative(check *c, const json_t *alts, const json_t *v) {
        const json_t *alt;
        unsigned mask = 0;
        size_t i;
        json_array_foreach(alts, i, alt) mask |= type_mask(json_object_get(alt, "type"));
        cleanup_free char *want = type_text(mask);
        cleanup_free char *given = given_text(v);
        return sch_fail(c, true, "expected %s, got %s", want, given);
}

/* anyOf (exactly_one false) and oneOf.  When nothing matches, the error of
 * the first alternative whose type fits the value is the useful one: the
 * caller meant that form and got a detail wrong. */
static int check_alternatives(check *c, const json_t *alts, const json_t *v, bool exactly_one) {
        cleanup_free cm_err *scratch = xcalloc(1, sizeof *scratch);
        cleanup_free cm_err *nearest = xcalloc(1, sizeof *nearest);
        cm_err *outer = c->err;
        size_t i, matches = 0, first = 0;
        const json_t *alt;
        int r = OK;

        if (!json_is_array(alts) || json_array_size(alts) == 0)
                return OK;
        c->err = scratch;
        json_array_foreach(alts, i, alt) {
                if ((r = check_node(c, alt, v)) == FATAL)
                        break;
                if (r == OK && matches++ == 0)
                        first = i;
                if (r == OK && (!exactly_one || matches > 1))
                        break;
                if (r != OK && !nearest->code && type_fits(alt, v))
                        *nearest = *scratch;
        }
        c->err = outer;
        if (r == FATAL || (matches == 0 && nearest->code)) {
                if (outer)
                        *outer = r == FATAL ? *scratch : *nearest;
                return r == FATAL ? FATAL : MISMATCH;
        }
        if (matches == 0)
                return no_alternative(c, alts, v);
        if (matches > 1 && exactly_one)
                return sch_fail(c, true,
                            "matches both alternative %zu and %zu of oneOf but must match exactly one; "
                            "change it so that only one fits",
                            first + 1, i + 1);
        return OK;
}

static int check_any_of(check *c, const json_t *s, const json_t *v) {
        return check_alternatives(c, json_object_get(s, "anyOf"), v, false);
}

static int check_one_of(check *c, const json_t *s, const json_t *v) {
        return check_alternatives(c, json_object_get(s, "oneOf"), v, true);
}

/* In this order; the first failing step gives the error. */
static int (*const steps[])(check *c, const json_t *s, const json_t *v) = {
        check_type,     check_enum,       check_const,      /* any value */
        check_bounds,                                       /* numbers */
        check_length,   check_pattern,                      /* strings */
        check_item_count, check_items,                      /* arrays */
        check_required, check_properties, check_additional, /* objects */
        check_any_of,   check_one_of,
};

static int check_node(check *c, const json_t *schema, const json_t *v) {
        int r = OK;
        if (json_is_false(schema))
                return sch_fail(c, true, "no value is allowed here; leave this field out");
        if (!json_is_object(schema))
                return OK; /* true, or something mcp_schema_valid would refuse */
        if (c->depth >= MAX_DEPTH) {
                (void)sch_fail(c, true, "nested more than %d levels deep; send a flatter value", MAX_DEPTH);
                return FATAL;
        }
        c->depth++;
        for (size_t i = 0; i < ARRAY_SIZE(steps) && r == OK; i++)
                r = steps[i](c, schema, v);
        c->depth--;
        return r;
}

int mcp_schema_check(const json_t *schema, const json_t *value, const char *root, cm_err *err) {
        cleanup_check check c = {.err = err};
        if (!schema || !value) {
                (void)cm_err_set(err, EINVAL, "%s: nothing to check", root ? root : "value");
                return -1;
        }
        sch_strbuf_printf(&c.path, "%s", root ? root : "value");
        c.root_len = c.path.len;
        return check_node(&c, schema, value) < 0 ? -1 : 0;
}

