/* An update's hunks applied to a file's bytes, in memory, as Codex's
 * apply_patch computes its replacements (codex-rs/apply-patch/src/lib.rs,
 * compute_replacements), with two things of our own: a CRLF file is
 * matched without its \r and written back with CRLF, and a file without a
 * final newline stays without one (Codex adds one).  A hunk that does not
 * apply is reported with the closest lines the file holds. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "patch/seek.h"

/* A file cut into lines. */
typedef struct text {
        linevec l;
        bool crlf;     /* every newline is a CRLF: lines are without the \r */
        bool final_nl; /* ends in a newline (or is empty) */
} text;

static void split_text(const char *data, size_t len, text *t) {
        size_t nl = 0, crlf = 0;
        const char *s = data, *e = data + len;
        for (size_t i = 0; i < len; i++)
                if (data[i] == '\n') {
                        nl++;
                        crlf += i > 0 && data[i - 1] == '\r';
                }
        t->crlf = nl > 0 && crlf == nl;
        t->final_nl = len == 0 || data[len - 1] == '\n';
        while (s < e) {
                const char *end = memchr(s, '\n', (size_t)(e - s));
                size_t n = (size_t)((end ? end : e) - s);
                linevec_push(&t->l, s, t->crlf && end ? n - 1 : n);
                s = end ? end + 1 : e;
        }
}

/* Replace old_len lines at `start` with `n` new ones. */
typedef struct repl {
        size_t start, old_len;
        const cm_patch_line *lines;
        const size_t *ctx; /* cm_patch_chunk.new_ctx */
        size_t n;
        size_t order; /* the hunk's place, to keep equal starts in order */
} repl;

static int by_start(const void *a, const void *b) {
        const repl *x = a, *y = b;
        if (x->start != y->start)
                return x->start < y->start ? -1 : 1;
        return x->order < y->order ? -1 : x->order > y->order;
}

/* ---- the report of a hunk that does not apply ---------------------------- */

#define SHOW_LINES 3
#define SHOW_BYTES 100
#define CLOSE_LINES 64 /* pattern lines that vote for the closest place */

static void quote_lines(FILE *o, const cm_patch_line *v, size_t n, size_t first_no) {
        for (size_t i = 0; i < n && i < SHOW_LINES; i++) {
                cm_patch_line l = v[i];
                if (first_no)
                        fprintf(o, "\n  %zu| ", first_no + i);
                else
                        fprintf(o, "\n  | ");
                fprintf(o, "%.*s%s", (int)(l.n < SHOW_BYTES ? l.n : SHOW_BYTES), l.p, l.n > SHOW_BYTES ? "..." : "");
        }
        if (n > SHOW_LINES)
                fprintf(o, "\n  ... (%zu more)", n - SHOW_LINES);
}

static size_t common_prefix(cm_patch_line a, cm_patch_line b) {
        size_t k = 0;
        while (k < a.n && k < b.n && a.p[k] == b.p[k])
                k++;
        return k;
}

/* The window of the file most like the pattern: the most pattern lines
 * found (whitespace around them ignored) in their places, nearest to
 * `from` on a tie; else where the first non-blank pattern line's longest
 * start is.  false: nothing alike. */
static bool closest(cm_seek_file *f, const cm_patch_line *pat, size_t m, size_t from, size_t *ret, size_t *ret_score) {
        size_t km = m < CLOSE_LINES ? m : CLOSE_LINES, best = 0, best_at = 0, dist = (size_t)-1, k0 = m, plen = 0;
        cleanup_free size_t *score = xcalloc(f->n + km, sizeof *score);
        const uint64_t *fh = cm_seek_hashes(f, CM_SEEK_TRIM);
        for (size_t k = 0; k < km; k++) {
                uint64_t h;
                if (line_trim(pat[k]).n == 0)
                        continue; /* blank lines are everywhere */
                h = cm_seek_hash(CM_SEEK_TRIM, pat[k]);
                for (size_t i = 0; i < f->n; i++)
                        if (fh[i] == h && cm_seek_line_eq(CM_SEEK_TRIM, f->lines[i], pat[k]))
                                score[i + km - k]++;
        }
        for (size_t s = 0; s < f->n + km; s++) {
                size_t at = s >= km ? s - km : 0, d = at >= from ? at - from : from - at;
                if (score[s] > best || (score[s] == best && best && d < dist)) {
                        best = score[s];
                        best_at = at;
                        dist = d;
                }
        }
        *ret_score = best;
        if (best) {
                *ret = best_at;
                return true;
        }
        for (size_t k = 0; k < m && k0 == m; k++)
                if (line_trim(pat[k]).n)
                        k0 = k;
        for (size_t i = 0; k0 < m && i < f->n; i++) {
                size_t c = common_prefix(line_trim(f->lines[i]), line_trim(pat[k0]));
                if (c > plen) {
                        plen = c;
                        best_at = i >= k0 ? i - k0 : 0;
                }
        }
        *ret = best_at;
        return plen >= 3;
}

static int not_found(const cm_patch_file *f, size_t j, cm_seek_file *sf, const cm_patch_line *pat, size_t m,
                     size_t from, bool context, cm_err *err) {
        const cm_patch_chunk *c = &f->chunks[j];
        cleanup_free char *msg = NULL;
        size_t len = 0, at = 0, score = 0;
        FILE *o = open_memstream(&msg, &len);
        if (!o)
                abort(); /* out of memory, as x* allocators do */
        fprintf(o, "%.200s: hunk %zu of %zu (line %zu of the patch", f->path, j + 1, f->n_chunks, c->line);
        if (c->has_context && !context)
                fprintf(o, ", after '@@ %.*s%s'", QUOTE(c->context));
        if (context)
                fprintf(o, ") does not apply: its '@@' line was not found%s:", from ? " after the previous hunk" : "");
        else
                fprintf(o, ") does not apply: these lines were not found%s:",
                        c->eof ? " at the end of the file"
                        : from ? " after the previous hunk"
                               : "");
        quote_lines(o, pat, m, 0);
        if (closest(sf, pat, m, from, &at, &score)) {
                size_t show = m < sf->n - at ? m : sf->n - at;
                if (score)
                        fprintf(o, "\nclosest: line %zu of the file (%zu of %zu lines alike):", at + 1, score, m);
                else
                        fprintf(o, "\nclosest: line %zu of the file (a line that starts alike):", at + 1);
                quote_lines(o, sf->lines + at, show, at + 1);
                if (!context && c->eof && score == m)
                        fprintf(o, "\nthe hunk ends in '*** End of File', so its lines must be the file's last; drop "
                                   "that line to change them where they are");
        } else {
                fprintf(o, "\nnothing alike in the file (%zu lines)", sf->n);
        }
        fprintf(o, "\nNo file was changed; read the file again and send a patch whose lines match it");
        (void)fclose(o);
        return cm_err_set(err, ENOENT, "%s", msg);
}

/* ---- the replacements ---------------------------------------------------- */

static int too_much_work(const cm_patch_file *f, size_t j, cm_err *err) {
        return cm_err_set(err, E2BIG,
                          "%.200s: hunk %zu of %zu: finding the hunks took too many line comparisons; no file was "
                          "changed. Split the patch, or give hunks lines that match the file exactly",
                          f->path, j + 1, f->n_chunks);
}

static int plan_chunk(const cm_patch_file *f, size_t j, cm_seek_file *sf, size_t *line, repl *ret, cm_err *err) {
        const cm_patch_chunk *c = &f->chunks[j];
        size_t at, m = c->n_old, nn = c->n_new;
        if (c->has_context) {
                if (!cm_seek(sf, &c->context, 1, *line, false, &at))
                        return sf->exhausted ? too_much_work(f, j, err)
                                             : not_found(f, j, sf, &c->context, 1, *line, true, err);
                *line = at + 1;
        }
        if (m == 0) {
                /* Only additions: at the end of the file (before a last
                 * empty line), wherever the '@@' line was, as Codex does. */
                at = sf->n && sf->lines[sf->n - 1].n == 0 ? sf->n - 1 : sf->n;
                *ret = (repl){at, 0, c->new_lines, c->new_ctx, nn, j};
                return 0;
        }
        if (!cm_seek(sf, c->old_lines, m, *line, c->eof, &at)) {
                /* A last empty line often stands for the file's final
                 * newline, which is not a line here: try without it. */
                bool retry = c->old_lines[m - 1].n == 0;
                if (retry) {
                        m--;
                        nn -= nn && c->new_lines[nn - 1].n == 0;
                }
                if (!retry || !cm_seek(sf, c->old_lines, m, *line, c->eof, &at))
                        return sf->exhausted ? too_much_work(f, j, err)
                                             : not_found(f, j, sf, c->old_lines, c->n_old, *line, false, err);
        }
        *ret = (repl){at, m, c->new_lines, c->new_ctx, nn, j};
        *line = at + m;
        return 0;
}

static void emit_line(FILE *o, cm_patch_line l, const char *eol, bool *first) {
        if (!*first)
                fputs(eol, o);
        *first = false;
        fwrite(l.p, 1, l.n, o);
}

static void emit(FILE *o, const cm_patch_line *v, size_t n, const char *eol, bool *first) {
        for (size_t i = 0; i < n; i++)
                emit_line(o, v[i], eol, first);
}

/* A replacement's lines; a context line as the file has it, so a match
 * that ignored whitespace or typographic quotes does not rewrite it. */
static void emit_repl(FILE *o, const text *t, const repl *r, const char *eol, bool *first) {
        for (size_t i = 0; i < r->n; i++) {
                size_t k = r->ctx ? r->ctx[i] : 0;
                emit_line(o, k && k - 1 < r->old_len ? t->l.v[r->start + k - 1] : r->lines[i], eol, first);
        }
}

/* The file's lines with the replacements (sorted) made. */
static void build(const text *t, const repl *r, size_t nr, char **ret, size_t *ret_len) {
        const char *eol = t->crlf ? "\r\n" : "\n";
        size_t pos = 0;
        bool first = true;
        FILE *o = open_memstream(ret, ret_len);
        if (!o)
                abort();
        for (size_t i = 0; i < nr; i++) {
                if (r[i].start > pos) {
                        emit(o, t->l.v + pos, r[i].start - pos, eol, &first);
                        pos = r[i].start;
                }
                emit_repl(o, t, &r[i], eol, &first);
                if (r[i].start + r[i].old_len > pos)
                        pos = r[i].start + r[i].old_len;
        }
        if (pos < t->l.n)
                emit(o, t->l.v + pos, t->l.n - pos, eol, &first);
        if (!first && t->final_nl)
                fputs(eol, o);
        (void)fclose(o);
}

int cm_patch_apply(const cm_patch_file *f, const char *data, size_t len, uint64_t budget, char **ret, size_t *ret_len,
                   cm_err *err) {
        text t = {0};
        cm_seek_file sf;
        cleanup_free repl *r = xcalloc(f->n_chunks ? f->n_chunks : 1, sizeof *r);
        size_t line = 0;
        int rc = 0;
        split_text(data, len, &t);
        cm_seek_index(&sf, t.l.v, t.l.n, budget ? budget : CM_PATCH_BUDGET);
        for (size_t j = 0; rc == 0 && j < f->n_chunks; j++)
                rc = plan_chunk(f, j, &sf, &line, &r[j], err);
        if (rc == 0) {
                qsort(r, f->n_chunks, sizeof *r, by_start);
                build(&t, r, f->n_chunks, ret, ret_len);
        }
        cm_seek_free(&sf);
        free(t.l.v);
        return rc < 0 ? -1 : 0;
}
