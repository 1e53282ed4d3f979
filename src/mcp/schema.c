/* A JSON Schema checker for the subset tool schemas use (see schema.h).
 *
 * One walk over schema and value together.  The path of the field being
 * checked is kept in a buffer that grows and shrinks with the walk, so an
 * error can name the field ("mounts[2].source") without building strings on
 * the way down.  The first error found wins: keywords of a node are checked in
 * the order of the `steps` table, required fields before properties (in
 * schema order) before additional properties (in object order). */
#include "mcp/schema.h"

#include <errno.h>
#include <regex.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/json.h"

/* Deep enough for any real tool argument, shallow enough that hostile input
 * cannot exhaust the stack of a worker thread. */
#define MAX_DEPTH 64
/* How much of a value a message quotes. */
#define EXCERPT_MAX 60

enum {
        OK = 0,
        MISMATCH = -1, /* the value does not fit; another alternative may */
        FATAL = -2,    /* stop the whole check: broken schema, too deep */
};

typedef struct strbuf {
        char *s;
        size_t len, cap;
} strbuf;

static void strbuf_freep(strbuf *b) { free(b->s); }
#define cleanup_strbuf __attribute__((cleanup(strbuf_freep)))

typedef struct regex_entry {
        struct regex_entry *next;
        const json_t *pattern; /* the schema's string, borrowed */
        regex_t re;
} regex_entry;

typedef struct check {
        strbuf path;       /* root, then ".key" and "[index]" per level */
        size_t root_len;
        unsigned depth;
        bool schema_only;  /* mcp_schema_valid: the path is a schema path */
        regex_entry *regexes;
        cm_err *err;
} check;

static void check_freep(check *c) {
        regex_entry *e, *next;
        for (e = c->regexes; e; e = next) {
                next = e->next;
                regfree(&e->re);
                free(e);
        }
        free(c->path.s);
}
#define cleanup_check __attribute__((cleanup(check_freep)))

/* jansson's object iterator takes a mutable object though it changes nothing. */
static json_t *mut(const json_t *j) { return (json_t *)j; }

/* ---- text helpers ------------------------------------------------------ */

__attribute__((format(printf, 2, 3))) static void strbuf_printf(strbuf *b, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (n < 0)
                return;
        if (b->len + (size_t)n + 1 > b->cap) {
                b->cap = 2 * (b->len + (size_t)n + 1);
                b->s = xrealloc(b->s, b->cap);
        }
        va_start(ap, fmt);
        (void)vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        b->len += (size_t)n;
}

static const char *strbuf_str(const strbuf *b) { return b->s ? b->s : ""; }

static size_t path_push_key(check *c, const char *key) {
        size_t mark = c->path.len;
        strbuf_printf(&c->path, ".%s", key);
        return mark;
}

static size_t path_push_index(check *c, size_t i) {
        size_t mark = c->path.len;
        strbuf_printf(&c->path, "[%zu]", i);
        return mark;
}

static void path_pop(check *c, size_t mark) {
        c->path.len = mark;
        if (c->path.s)
                c->path.s[mark] = 0;
}

/* The path as a message shows it: "memory" for a top-level property (no
 * root in front), "arguments[1]" below a root array, the root alone at the
 * root. */
static const char *path_text(const check *c) {
        const char *p = strbuf_str(&c->path);
        return p[c->root_len] == '.' ? p + c->root_len + 1 : p;
}

static bool at_root(const check *c) { return c->path.len == c->root_len; }

/* The JSON text of v, cut to a length a message can quote. */
static char *json_excerpt(const json_t *v) {
        char *s = cm_json_dump(v);
        size_t cut = EXCERPT_MAX - 3;
        if (strlen(s) <= EXCERPT_MAX)
                return s;
        while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80)
                cut--; /* not inside a UTF-8 sequence */
        memcpy(s + cut, "...", 4);
        return s;
}

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

/* ---- errors ------------------------------------------------------------ */

/* "path: message"; with `named` false the path is left out at the root, for
 * messages that name the field themselves ("missing required field ..."). */
__attribute__((format(printf, 3, 4))) static int fail(check *c, bool named, const char *fmt, ...) {
        char msg[CM_ERR_MAX];
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (!named && at_root(c))
                (void)cm_err_set(c->err, EINVAL, "%s", msg);
        else
                (void)cm_err_set(c->err, EINVAL, "%s: %s", path_text(c), msg);
        return MISMATCH;
}

/* A schema that cannot be used.  From mcp_schema_valid it is the answer;
 * from mcp_schema_check it means the tool, not the call, is wrong. */
__attribute__((format(printf, 2, 3))) static int schema_error(check *c, const char *fmt, ...) {
        char msg[CM_ERR_MAX];
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (!c->schema_only)
                (void)cm_err_set(c->err, EINVAL, "%s: cannot be checked, the tool's schema is invalid: %s",
                                 path_text(c), msg);
        else if (at_root(c))
                (void)cm_err_set(c->err, EINVAL, "invalid schema: %s", msg);
        else
                (void)cm_err_set(c->err, EINVAL, "invalid schema at %s: %s", path_text(c), msg);
        return FATAL;
}

/* ---- values ------------------------------------------------------------ */

/* 2^53: from here on every double is a whole number. */
#define EXACT_LIMIT 9007199254740992.0

static bool is_whole(double d) {
        if (d >= EXACT_LIMIT || d <= -EXACT_LIMIT)
                return true; /* and too large to convert to long long safely */
        return d == (double)(long long)d;
}

/* A count keyword (minLength, maxItems, ...): a non-negative whole number. */
static bool as_count(const json_t *j, size_t *ret) {
        if (json_is_integer(j) && json_integer_value(j) >= 0) {
                *ret = (size_t)json_integer_value(j);
                return true;
        }
        if (json_is_real(j) && json_real_value(j) >= 0 && json_real_value(j) < EXACT_LIMIT &&
            is_whole(json_real_value(j))) {
                *ret = (size_t)json_real_value(j);
                return true;
        }
        return false;
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

/* ---- types ------------------------------------------------------------- */

/* In the order messages list them. */
static const char *const type_names[] = {"string", "integer", "number", "boolean", "object", "array", "null"};
enum {
        T_STRING = 1u << 0,
        T_INTEGER = 1u << 1,
        T_NUMBER = 1u << 2,
        T_BOOLEAN = 1u << 3,
        T_OBJECT = 1u << 4,
        T_ARRAY = 1u << 5,
        T_NULL = 1u << 6,
};

static unsigned type_bit(const char *name) {
        for (size_t i = 0; name && i < ARRAY_SIZE(type_names); i++)
                if (strcmp(name, type_names[i]) == 0)
                        return 1u << i;
        return 0;
}

/* The "type" keyword as a set of bits; 0 when absent or unusable. */
static unsigned type_mask(const json_t *type) {
        const json_t *t;
        unsigned mask = 0;
        size_t i;
        if (json_is_string(type))
                return type_bit(json_string_value(type));
        json_array_foreach(type, i, t) mask |= type_bit(json_string_value(t));
        return mask;
}

static bool type_accepts(unsigned mask, const json_t *v) {
        switch (json_typeof(v)) {
        case JSON_OBJECT: return mask & T_OBJECT;
        case JSON_ARRAY: return mask & T_ARRAY;
        case JSON_STRING: return mask & T_STRING;
        case JSON_INTEGER: return mask & (T_INTEGER | T_NUMBER);
        case JSON_REAL: return (mask & T_NUMBER) || ((mask & T_INTEGER) && is_whole(json_real_value(v)));
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
        for (size_t i = 0; i < ARRAY_SIZE(type_names); i++) {
                if (!(left & 1u << i))
                        continue;
                left &= ~(1u << i);
                strbuf_printf(&b, "%s%s", b.len == 0 ? "" : left ? ", " : " or ", type_names[i]);
        }
        return xstrdup(strbuf_str(&b));
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

/* ---- patterns ---------------------------------------------------------- */

/* The compiled form of a "pattern" string, compiled once per check. */
static regex_t *pattern_get(check *c, const json_t *pattern) {
        regex_entry *e;
        for (e = c->regexes; e; e = e->next)
                if (e->pattern == pattern)
                        return &e->re;
        cleanup_free regex_entry *fresh = xcalloc(1, sizeof *fresh);
        int rc = regcomp(&fresh->re, json_string_value(pattern), REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
                char why[128];
                (void)regerror(rc, &fresh->re, why, sizeof why);
                (void)schema_error(c, "pattern \"%s\" is not a POSIX extended regular expression: %s",
                                   json_string_value(pattern), why);
                return NULL;
        }
        e = steal_pointer(&fresh);
        e->pattern = pattern;
        e->next = c->regexes;
        c->regexes = e;
        return &e->re;
}

/* ---- checking a value -------------------------------------------------- */

static int check_node(check *c, const json_t *schema, const json_t *v);

static int check_field(check *c, const char *key, const json_t *schema, const json_t *v) {
        size_t mark = path_push_key(c, key);
        int r = check_node(c, schema, v);
        path_pop(c, mark);
        return r;
}

static int check_type(check *c, const json_t *s, const json_t *v) {
        unsigned mask = type_mask(json_object_get(s, "type"));
        if (mask == 0 || type_accepts(mask, v))
                return OK;
        cleanup_free char *want = type_text(mask);
        cleanup_free char *given = given_text(v);
        return fail(c, true, "expected %s, got %s", want, given);
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
                cleanup_free char *text = json_excerpt(a);
                strbuf_printf(&list, "%s%s", i ? ", " : "", text);
        }
        cleanup_free char *given = json_excerpt(v);
        return fail(c, true, "%s is not one of %s", given, strbuf_str(&list));
}

static int check_const(check *c, const json_t *s, const json_t *v) {
        const json_t *want = json_object_get(s, "const");
        if (!want || same_json(want, v, 0))
                return OK;
        cleanup_free char *want_text = json_excerpt(want);
        cleanup_free char *given = json_excerpt(v);
        return fail(c, true, "expected %s, got %s", want_text, given);
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
                return fail(c, true, "%s %s %s", given, bounds[i].text, limit_text);
        }
        return OK;
}

/* minLength/maxLength and minItems/maxItems: `n` things of `unit`. */
static int check_count(check *c, const json_t *s, size_t n, const char *const keys[2], const char *unit) {
        size_t limit;
        const char *plural = n == 1 ? "" : "s";
        if (as_count(json_object_get(s, keys[0]), &limit) && n < limit)
                return fail(c, true, "%zu %s%s is fewer than the minimum %zu", n, unit, plural, limit);
        if (as_count(json_object_get(s, keys[1]), &limit) && n > limit)
                return fail(c, true, "%zu %s%s is more than the maximum %zu", n, unit, plural, limit);
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
        if (!(re = pattern_get(c, pattern)))
                return FATAL;
        /* regexec stops at a NUL; what follows it must not slip past the pattern. */
        bool has_nul = strlen(json_string_value(v)) != json_string_length(v);
        if (!has_nul && regexec(re, json_string_value(v), 0, NULL, 0) == 0)
                return OK;
        cleanup_free char *given = json_excerpt(v);
        if (has_nul)
                return fail(c, true, "%s contains a NUL character, which the pattern %s does not allow", given,
                            json_string_value(pattern));
        return fail(c, true, "%s does not match the pattern %s", given, json_string_value(pattern));
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
                size_t mark = path_push_index(c, i);
                int r = check_node(c, items, item);
                path_pop(c, mark);
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
                        return fail(c, false, "missing required field \"%s\"", key);
                cleanup_free char *want = type_text(mask);
                return fail(c, false, "missing required field \"%s\" (%s)", key, want);
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
                strbuf_printf(&names, "%s%s", names.len ? ", " : "", name);
        }
        if (at_root(c))
                return fail(c, false, "unknown field \"%s\": this tool takes %s", key,
                            names.len ? names.s : "no arguments");
        return fail(c, false, "unknown field \"%s\": the fields allowed here are %s", key,
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
        return fail(c, true, "expected %s, got %s", want, given);
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
                return fail(c, true,
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
                return fail(c, true, "no value is allowed here; leave this field out");
        if (!json_is_object(schema))
                return OK; /* true, or something mcp_schema_valid would refuse */
        if (c->depth >= MAX_DEPTH) {
                (void)fail(c, true, "nested more than %d levels deep; send a flatter value", MAX_DEPTH);
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
        strbuf_printf(&c.path, "%s", root ? root : "value");
        c.root_len = c.path.len;
        return check_node(&c, schema, value) < 0 ? -1 : 0;
}

/* ---- checking a schema ------------------------------------------------- */

static int valid_node(check *c, const json_t *schema);

static int valid_sub(check *c, const char *key, const json_t *schema) {
        size_t mark = path_push_key(c, key);
        int r = valid_node(c, schema);
        path_pop(c, mark);
        return r;
}

static int valid_type_name(check *c, const json_t *name) {
        if (type_bit(json_string_value(name)))
                return OK;
        cleanup_free char *given = json_excerpt(name);
        return schema_error(c, "\"type\" %s is not one of %s", given,
                            "string, integer, number, boolean, object, array, null");
}

static int valid_type(check *c, const char *key, const json_t *type) {
        const json_t *name;
        size_t i;
        if (json_is_string(type))
                return valid_type_name(c, type);
        if (!json_is_array(type) || json_array_size(type) == 0)
                return schema_error(c, "\"%s\" must be a type name or a non-empty array of them, got %s", key,
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
                return schema_error(c, "\"%s\" must be an object of schemas, got %s", key,
                                    cm_json_type_name(props));
        size_t mark = path_push_key(c, key);
        int r = OK;
        json_object_foreach(mut(props), name, sub) {
                if ((r = valid_sub(c, name, sub)) < 0)
                        break;
        }
        path_pop(c, mark);
        return r;
}

static int valid_required(check *c, const char *key, const json_t *required) {
        const json_t *name;
        size_t i;
        if (!json_is_array(required))
                return schema_error(c, "\"%s\" must be an array of field names, got %s", key,
                                    cm_json_type_name(required));
        json_array_foreach(required, i, name) {
                if (!json_is_string(name))
                        return schema_error(c, "\"%s\"[%zu] must be a field name (a string), got %s", key, i,
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
        return schema_error(c, "\"%s\" must be a non-empty array of the allowed values", key);
}

static int valid_number(check *c, const char *key, const json_t *n) {
        if (json_is_number(n))
                return OK;
        return schema_error(c, "\"%s\" must be a number (JSON Schema 2020-12), got %s", key,
                            cm_json_type_name(n));
}

static int valid_count(check *c, const char *key, const json_t *n) {
        size_t unused;
        if (as_count(n, &unused))
                return OK;
        cleanup_free char *given = json_excerpt(n);
        return schema_error(c, "\"%s\" must be a non-negative integer, got %s", key, given);
}

static int valid_pattern(check *c, const char *key, const json_t *pattern) {
        if (!json_is_string(pattern))
                return schema_error(c, "\"%s\" must be a string, got %s", key, cm_json_type_name(pattern));
        return pattern_get(c, pattern) ? OK : FATAL;
}

static int valid_alternatives(check *c, const char *key, const json_t *alts) {
        const json_t *alt;
        size_t i;
        int r = OK;
        if (!json_is_array(alts) || json_array_size(alts) == 0)
                return schema_error(c, "\"%s\" must be a non-empty array of schemas", key);
        size_t mark = path_push_key(c, key);
        json_array_foreach(alts, i, alt) {
                size_t item = path_push_index(c, i);
                r = valid_node(c, alt);
                path_pop(c, item);
                if (r < 0)
                        break;
        }
        path_pop(c, mark);
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

static int valid_node(check *c, const json_t *schema) {
        int r = OK;
        if (!json_is_object(schema))
                return schema_error(c, "expected a schema (an object), got %s", cm_json_type_name(schema));
        if (c->depth >= MAX_DEPTH)
                return schema_error(c, "nested more than %d levels deep", MAX_DEPTH);
        c->depth++;
        for (size_t i = 0; i < ARRAY_SIZE(keywords) && r == OK; i++) {
                const json_t *val = json_object_get(schema, keywords[i].name);
                if (val)
                        r = keywords[i].valid(c, keywords[i].name, val);
        }
        c->depth--;
        return r;
}

int mcp_schema_valid(const json_t *schema, cm_err *err) {
        cleanup_check check c = {.err = err, .schema_only = true};
        if (!schema) {
                (void)cm_err_set(err, EINVAL, "invalid schema: none given");
                return -1;
        }
        return valid_node(&c, schema) < 0 ? -1 : 0;
}
