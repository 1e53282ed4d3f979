/* Internals shared by the schema checker's files (schema.c checks values,
 * schema_valid.c checks schemas, schema_walk.c holds what both walk with):
 * the walk's state, the path of the field being looked at, and errors that
 * name it.  Not for use outside src/mcp/. */
#ifndef CM_MCP_SCHEMA_WALK_H
#define CM_MCP_SCHEMA_WALK_H

#include <jansson.h>
#include <regex.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

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

void sch_strbuf_freep(strbuf *b);
#define cleanup_strbuf __attribute__((cleanup(sch_strbuf_freep)))

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
        bool strict;       /* mcp_schema_supported: no keyword the checker skips */
        regex_entry *regexes;
        cm_err *err;
} check;

void sch_check_freep(check *c);
#define cleanup_check __attribute__((cleanup(sch_check_freep)))

/* jansson's object iterator takes a mutable object though it changes nothing. */
static inline json_t *mut(const json_t *j) { return (json_t *)j; }

/* In the order messages list them; type_bit gives 1 << index. */
extern const char *const sch_type_names[7];
enum {
        T_STRING = 1u << 0,
        T_INTEGER = 1u << 1,
        T_NUMBER = 1u << 2,
        T_BOOLEAN = 1u << 3,
        T_OBJECT = 1u << 4,
        T_ARRAY = 1u << 5,
        T_NULL = 1u << 6,
};

__attribute__((format(printf, 2, 3))) void sch_strbuf_printf(strbuf *b, const char *fmt, ...);
const char *sch_strbuf_str(const strbuf *b);
/* ".key" or "[i]" onto the path; returns the mark sch_path_pop goes back to */
size_t sch_path_push_key(check *c, const char *key);
size_t sch_path_push_index(check *c, size_t i);
void sch_path_pop(check *c, size_t mark);
const char *sch_path_text(const check *c);
bool sch_at_root(const check *c);
/* The JSON text of v, cut to a length a message can quote. */
char *sch_json_excerpt(const json_t *v);
/* A value that does not fit: MISMATCH, with the message in c->err. */
__attribute__((format(printf, 3, 4))) int sch_fail(check *c, bool named, const char *fmt, ...);
/* A schema that cannot be used: FATAL. */
__attribute__((format(printf, 2, 3))) int sch_schema_error(check *c, const char *fmt, ...);
bool sch_is_whole(double d);
bool sch_as_count(const json_t *j, size_t *ret);
unsigned sch_type_bit(const char *name);
/* The compiled "pattern", once per check; NULL (and FATAL said) if bad. */
regex_t *sch_pattern_get(check *c, const json_t *pattern);

#endif
