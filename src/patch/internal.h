/* What the parts of src/patch/ share. */
#ifndef CM_PATCH_INTERNAL_H
#define CM_PATCH_INTERNAL_H

#include <string.h>

#include "patch/patch.h"
#include "util/cleanup.h"

/* A growing array of lines. */
typedef struct linevec {
        cm_patch_line *v;
        size_t n, cap;
} linevec;

static inline void linevec_push(linevec *l, const char *p, size_t n) {
        if (l->n == l->cap) {
                l->cap = l->cap ? 2 * l->cap : 16;
                l->v = xrealloc(l->v, l->cap * sizeof *l->v);
        }
        l->v[l->n++] = (cm_patch_line){p, n};
}

static inline bool is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* The line without the whitespace at its start and/or end. */
static inline cm_patch_line line_rstrip(cm_patch_line l) {
        while (l.n && is_space((unsigned char)l.p[l.n - 1]))
                l.n--;
        return l;
}

static inline cm_patch_line line_trim(cm_patch_line l) {
        l = line_rstrip(l);
        while (l.n && is_space((unsigned char)*l.p)) {
                l.p++;
                l.n--;
        }
        return l;
}

static inline bool line_eq(cm_patch_line a, cm_patch_line b) { return a.n == b.n && memcmp(a.p, b.p, a.n) == 0; }

static inline bool line_is(cm_patch_line l, const char *s) { return line_eq(l, (cm_patch_line){s, strlen(s)}); }

static inline bool line_starts(cm_patch_line l, const char *s) {
        size_t k = strlen(s);
        return l.n >= k && memcmp(l.p, s, k) == 0;
}

/* How many bytes of a line an error message quotes. */
#define QUOTE_MAX 80
#define QUOTE(l) (int)((l).n < QUOTE_MAX ? (l).n : QUOTE_MAX), (l).p, ((l).n > QUOTE_MAX ? "..." : "")

#endif
