/* What the schema checker's walks share: the path of the field being looked
 * at, errors that name it, count and type keywords, compiled patterns (see
 * schema_walk.h). */
#include "mcp/schema_walk.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/json.h"

void sch_strbuf_freep(strbuf *b) { free(b->s); }

void sch_check_freep(check *c) {
        regex_entry *e, *next;
        for (e = c->regexes; e; e = next) {
                next = e->next;
                regfree(&e->re);
                free(e);
        }
        free(c->path.s);
}

/* ---- text helpers ------------------------------------------------------ */

__attribute__((format(printf, 2, 3))) void sch_strbuf_printf(strbuf *b, const char *fmt, ...) {
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

const char *sch_strbuf_str(const strbuf *b) { return b->s ? b->s : ""; }

size_t sch_path_push_key(check *c, const char *key) {
        size_t mark = c->path.len;
        sch_strbuf_printf(&c->path, ".%s", key);
        return mark;
}

size_t sch_path_push_index(check *c, size_t i) {
        size_t mark = c->path.len;
        sch_strbuf_printf(&c->path, "[%zu]", i);
        return mark;
}

void sch_path_pop(check *c, size_t mark) {
        c->path.len = mark;
        if (c->path.s)
                c->path.s[mark] = 0;
}

/* The path as a message shows it: "memory" for a top-level property (no
 * root in front), "arguments[1]" below a root array, the root alone at the
 * root. */
const char *sch_path_text(const check *c) {
        const char *p = sch_strbuf_str(&c->path);
        return p[c->root_len] == '.' ? p + c->root_len + 1 : p;
}

bool sch_at_root(const check *c) { return c->path.len == c->root_len; }

/* The JSON text of v, cut to a length a message can quote. */
char *sch_json_excerpt(const json_t *v) {
        char *s = cm_json_dump(v);
        size_t cut = EXCERPT_MAX - 3;
        if (strlen(s) <= EXCERPT_MAX)
                return s;
        while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80)
                cut--; /* not inside a UTF-8 sequence */
        memcpy(s + cut, "...", 4);
        return s;
}

/* ---- errors ------------------------------------------------------------ */

/* "path: message"; with `named` false the path is left out at the root, for
 * messages that name the field themselves ("missing required field ..."). */
__attribute__((format(printf, 3, 4))) int sch_fail(check *c, bool named, const char *fmt, ...) {
        char msg[CM_ERR_MAX];
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (!named && sch_at_root(c))
                (void)cm_err_set(c->err, EINVAL, "%s", msg);
        else
                (void)cm_err_set(c->err, EINVAL, "%s: %s", sch_path_text(c), msg);
        return MISMATCH;
}

/* A schema that cannot be used.  From mcp_schema_valid it is the answer;
 * from mcp_schema_check it means the tool, not the call, is wrong. */
__attribute__((format(printf, 2, 3))) int sch_schema_error(check *c, const char *fmt, ...) {
        char msg[CM_ERR_MAX];
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (!c->schema_only)
                (void)cm_err_set(c->err, EINVAL, "%s: cannot be checked, the tool's schema is invalid: %s",
                                 sch_path_text(c), msg);
        else if (sch_at_root(c))
                (void)cm_err_set(c->err, EINVAL, "invalid schema: %s", msg);
        else
                (void)cm_err_set(c->err, EINVAL, "invalid schema at %s: %s", sch_path_text(c), msg);
        return FATAL;
}

/* ---- values ------------------------------------------------------------ */

/* 2^53: from here on every double is a whole number. */
#define EXACT_LIMIT 9007199254740992.0

bool sch_is_whole(double d) {
        if (d >= EXACT_LIMIT || d <= -EXACT_LIMIT)
                return true; /* and too large to convert to long long safely */
        return d == (double)(long long)d;
}

/* A count keyword (minLength, maxItems, ...): a non-negative whole number. */
bool sch_as_count(const json_t *j, size_t *ret) {
        if (json_is_integer(j) && json_integer_value(j) >= 0) {
                *ret = (size_t)json_integer_value(j);
                return true;
        }
        if (json_is_real(j) && json_real_value(j) >= 0 && json_real_value(j) < EXACT_LIMIT &&
            sch_is_whole(json_real_value(j))) {
                *ret = (size_t)json_real_value(j);
                return true;
        }
        return false;
}

/* ---- types ------------------------------------------------------------- */

const char *const sch_type_names[7] = {"string", "integer", "number", "boolean", "object", "array", "null"};

unsigned sch_type_bit(const char *name) {
        for (size_t i = 0; name && i < ARRAY_SIZE(sch_type_names); i++)
                if (strcmp(name, sch_type_names[i]) == 0)
                        return 1u << i;
        return 0;
}

/* ---- patterns ---------------------------------------------------------- */

/* The compiled form of a "pattern" string, compiled once per check. */
regex_t *sch_pattern_get(check *c, const json_t *pattern) {
        regex_entry *e;
        for (e = c->regexes; e; e = e->next)
                if (e->pattern == pattern)
                        return &e->re;
        cleanup_free regex_entry *fresh = xcalloc(1, sizeof *fresh);
        int rc = regcomp(&fresh->re, json_string_value(pattern), REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
                char why[128];
                (void)regerror(rc, &fresh->re, why, sizeof why);
                (void)sch_schema_error(c, "pattern \"%s\" is not a POSIX extended regular expression: %s",
                                   json_string_value(pattern), why);
                return NULL;
        }
        e = steal_pointer(&fresh);
        e->pattern = pattern;
        e->next = c->regexes;
        c->regexes = e;
        return &e->re;
}

