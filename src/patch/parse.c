/* The patch text to a cm_patch, as Codex's apply_patch parser reads it
 * (codex-rs/apply-patch/src/parser.rs, lenient mode), plus one rule of our
 * own: paths are absolute container paths without "." or "..". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "patch/internal.h"

#define BEGIN "*** Begin Patch"
#define END "*** End Patch"
#define ADD "*** Add File: "
#define DELETE "*** Delete File: "
#define UPDATE "*** Update File: "
#define MOVE "*** Move to: "
#define EOF_MARK "*** End of File"
#define PATH_MAX_LEN 4096

/* The parser's position: the patch's lines and the next one to read. */
typedef struct parser {
        const cm_patch_line *l;
        size_t i, end; /* [i, end): the lines still to parse */
        cm_patch *p;
        cm_err *err;
} parser;

/* The text without the whitespace around it, cut into lines; a "\r"
 * before each "\n" goes with the line end (a CRLF patch reads as LF). */
static void split_lines(const char *text, size_t len, linevec *ret) {
        cm_patch_line all = line_trim((cm_patch_line){text, len});
        const char *s = all.p, *e = all.p + all.n;
        while (s < e) {
                const char *nl = memchr(s, '\n', (size_t)(e - s)), *stop = nl ? nl : e;
                size_t n = (size_t)(stop - s);
                if (n && s[n - 1] == '\r')
                        n--;
                linevec_push(ret, s, n);
                s = nl ? nl + 1 : e;
        }
}

static int boundaries_strict(const linevec *lines, size_t from, size_t to, cm_err *err) {
        cm_patch_line first = line_trim(lines->v[from]), last = line_trim(lines->v[to - 1]);
        if (!line_is(first, BEGIN))
                return cm_err_set(err, EINVAL,
                                  "the first line of the patch must be '" BEGIN "', not '%.*s%s'; wrap the "
                                  "changes in '" BEGIN "' ... '" END "'",
                                  QUOTE(first));
        if (to - from < 2 || !line_is(last, END))
                return cm_err_set(err, EINVAL,
                                  "the last line of the patch must be '" END "'; was the patch cut short? End it "
                                  "with '" END "'");
        return 0;
}

/* Begin/End, or a heredoc around them (<<'EOF' ... EOF), which Codex
 * accepts because models write apply_patch calls that way.  *from, *to:
 * the lines between the markers. */
static int boundaries(const linevec *lines, size_t *from, size_t *to, cm_err *err) {
        cm_err strict = CM_ERR_INIT; /* err stays untouched on success */
        cm_patch_line first, last;
        if (lines->n == 0)
                return cm_err_set(err, EINVAL, "the patch is empty; send '" BEGIN "', the changes, '" END "'");
        if (boundaries_strict(lines, 0, lines->n, &strict) == 0) {
                *from = 1;
                *to = lines->n - 1;
                return 0;
        }
        first = lines->v[0];
        last = lines->v[lines->n - 1];
        if ((line_is(first, "<<EOF") || line_is(first, "<<'EOF'") || line_is(first, "<<\"EOF\"")) && last.n >= 3 &&
            memcmp(last.p + last.n - 3, "EOF", 3) == 0 && lines->n >= 4) {
                if (boundaries_strict(lines, 1, lines->n - 1, err) < 0)
                        return -1;
                *from = 2;
                *to = lines->n - 2;
                return 0;
        }
        *err = strict; /* the strict reading's reason */
        return -1;
}

static int bad_path(parser *ps, const char *path, const char *why) {
        return cm_err_set(ps->err, EINVAL,
                          "line %zu: the path '%.200s' %s; paths are absolute paths in the container, without '.' "
                          "or '..' (e.g. /workspace/src/main.c)",
                          ps->i + 1, path, why);
}

/* An absolute path with "//" collapsed; "." and ".." components, a NUL, a
 * trailing "/" or more than PATH_MAX_LEN bytes refused. */
static int parse_path(parser *ps, cm_patch_line l, char **ret) {
        cleanup_free char *path = xmalloc(l.n + 1);
        size_t n = 0;
        memcpy(path, l.p, l.n);
        path[l.n] = 0;
        if (memchr(l.p, 0, l.n))
                return bad_path(ps, path, "holds a NUL byte");
        if (l.n == 0 || l.p[0] != '/')
                return bad_path(ps, path, l.n ? "is not absolute" : "is empty");
        if (l.n > PATH_MAX_LEN)
                return bad_path(ps, path, "is longer than 4096 bytes");
        for (size_t i = 0; i < l.n; i++) {
                if (l.p[i] == '/' && n && path[n - 1] == '/')
                        continue;
                path[n++] = l.p[i];
        }
        path[n] = 0;
        if (n == 1 || path[n - 1] == '/')
                return bad_path(ps, path, "names a directory, not a file");
        for (char *c = path + 1; c; c = strchr(c, '/') ? strchr(c, '/') + 1 : NULL)
                if (strncmp(c, ".", 1) == 0 && (c[1] == '/' || !c[1] || (c[1] == '.' && (c[2] == '/' || !c[2]))))
                        return bad_path(ps, path, "has a '.' or '..' component");
        *ret = steal_pointer(&path);
        return 0;
}

static cm_patch_file *new_file(parser *ps, cm_patch_kind kind) {
        cm_patch *p = ps->p;
        p->files = xrealloc(p->files, (p->n_files + 1) * sizeof *p->files);
        p->files[p->n_files] = (cm_patch_file){.kind = kind, .line = ps->i + 1};
        return &p->files[p->n_files++];
}

static void parse_add(parser *ps, cm_patch_file *f) {
        linevec add = {0};
        for (; ps->i < ps->end && line_starts(ps->l[ps->i], "+"); ps->i++)
                linevec_push(&add, ps->l[ps->i].p + 1, ps->l[ps->i].n - 1);
        f->add = add.v;
        f->n_add = add.n;
}

/* The lines of one hunk after its "@@" line: " " both sides, "-" old,
 * "+" new, an empty line an empty context line; "*** End of File" ends
 * it.  Anything else ends it too, or is an error when it comes first. */
static void push_new(linevec *new, size_t **ctx, cm_patch_line l, size_t from_old) {
        linevec_push(new, l.p, l.n);
        *ctx = xrealloc(*ctx, new->cap * sizeof **ctx);
        (*ctx)[new->n - 1] = from_old;
}

static int parse_chunk_lines(parser *ps, cm_patch_chunk *c) {
        linevec old = {0}, new = {0};
        size_t parsed = 0, first = ps->i, *ctx = NULL;
        for (; ps->i < ps->end; ps->i++, parsed++) {
                cm_patch_line l = ps->l[ps->i], rest = {l.p + 1, l.n ? l.n - 1 : 0};
                if (line_is(l, EOF_MARK)) {
                        c->eof = true;
                        if (parsed)
                                ps->i++;
                        break;
                }
                if (l.n == 0 || l.p[0] == ' ') {
                        linevec_push(&old, rest.p, rest.n);
                        push_new(&new, &ctx, rest, old.n);
                } else if (l.p[0] == '-') {
                        linevec_push(&old, rest.p, rest.n);
                } else if (l.p[0] == '+') {
                        push_new(&new, &ctx, rest, 0);
                } else {
                        break;
                }
        }
        c->old_lines = old.v;
        c->n_old = old.n;
        c->new_lines = new.v;
        c->new_ctx = ctx;
        c->n_new = new.n;
        if (parsed)
                return 0;
        /* A line that is no hunk line at all, rather than the next header */
        if (ps->i < ps->end && !c->eof && !line_starts(ps->l[ps->i], "*") && !line_starts(ps->l[ps->i], "@@"))
                return cm_err_set(ps->err, EINVAL,
                                  "line %zu: unexpected line '%.*s%s' in a hunk; every line of a hunk starts "
                                  "with ' ' (context), '-' (removed) or '+' (added)",
                                  first + 1, QUOTE(ps->l[first]));
        return cm_err_set(ps->err, EINVAL,
                          "line %zu: the hunk has no lines; give its ' ', '-' and '+' lines after the '@@' line",
                          c->line);
}

static int parse_chunk(parser *ps, cm_patch_file *f) {
        cm_patch_line l = ps->l[ps->i];
        cm_patch_chunk *c;
        f->chunks = xrealloc(f->chunks, (f->n_chunks + 1) * sizeof *f->chunks);
        c = &f->chunks[f->n_chunks++];
        *c = (cm_patch_chunk){.line = ps->i + 1};
        if (line_is(l, "@@")) {
                ps->i++;
        } else if (line_starts(l, "@@ ")) {
                c->has_context = true;
                c->context = (cm_patch_line){l.p + 3, l.n - 3};
                ps->i++;
        } else if (f->n_chunks > 1) { /* only the first hunk may start without "@@" */
                return cm_err_set(ps->err, EINVAL,
                                  "line %zu: expected '@@' or '@@ CONTEXT' to start the next hunk of %s, got "
                                  "'%.*s%s'",
                                  ps->i + 1, f->path, QUOTE(l));
        }
        return parse_chunk_lines(ps, c);
}

static int parse_update(parser *ps, cm_patch_file *f) {
        if (ps->i < ps->end && line_starts(ps->l[ps->i], MOVE)) {
                cm_patch_line l = ps->l[ps->i];
                if (parse_path(ps, (cm_patch_line){l.p + strlen(MOVE), l.n - strlen(MOVE)}, &f->move_to) < 0)
                        return -1;
                ps->i++;
        }
        while (ps->i < ps->end) {
                cm_patch_line l = ps->l[ps->i];
                if (line_trim(l).n == 0) { /* blank lines between hunks */
                        ps->i++;
                        continue;
                }
                if (l.p[0] == '*')
                        break;
                if (parse_chunk(ps, f) < 0)
                        return -1;
        }
        if (f->n_chunks == 0)
                return cm_err_set(ps->err, EINVAL,
                                  "line %zu: '" UPDATE "%.200s' has no hunk; give its change as '@@' followed by "
                                  "' ', '-' and '+' lines, or leave the file out",
                                  f->line, f->path);
        if (f->move_to && strcmp(f->move_to, f->path) == 0)
                free(steal_pointer(&f->move_to)); /* a move onto itself is an update */
        return 0;
}

static int parse_hunk(parser *ps) {
        cm_patch_line h = line_trim(ps->l[ps->i]);
        static const struct {
                const char *marker;
                cm_patch_kind kind;
        } kinds[] = {{ADD, CM_PATCH_ADD}, {DELETE, CM_PATCH_DELETE}, {UPDATE, CM_PATCH_UPDATE}};
        for (size_t k = 0; k < ARRAY_SIZE(kinds); k++) {
                size_t m = strlen(kinds[k].marker);
                cm_patch_file *f;
                if (!line_starts(h, kinds[k].marker))
                        continue;
                if (ps->p->n_files == CM_PATCH_MAX_FILES)
                        return cm_err_set(ps->err, E2BIG,
                                          "line %zu: the patch names more than %d files; split it into smaller "
                                          "patches",
                                          ps->i + 1, CM_PATCH_MAX_FILES);
                f = new_file(ps, kinds[k].kind);
                if (parse_path(ps, (cm_patch_line){h.p + m, h.n - m}, &f->path) < 0)
                        return -1;
                ps->i++;
                if (f->kind == CM_PATCH_ADD)
                        parse_add(ps, f);
                return f->kind == CM_PATCH_UPDATE ? parse_update(ps, f) : 0;
        }
        return cm_err_set(ps->err, EINVAL,
                          "line %zu: '%.*s%s' is not a valid file header; each file starts with '" ADD "PATH', '" DELETE
                          "PATH' or '" UPDATE "PATH'",
                          ps->i + 1, QUOTE(h));
}

int cm_patch_parse(const char *text, size_t len, cm_patch *ret, cm_err *err) {
        cm_patch p = {.text = xmalloc(len + 1)};
        linevec lines = {0};
        parser ps = {.p = &p, .err = err};
        int r;
        memcpy(p.text, text, len);
        p.text[len] = 0;
        split_lines(p.text, len, &lines);
        ps.l = lines.v;
        r = boundaries(&lines, &ps.i, &ps.end, err);
        while (r == 0 && ps.i < ps.end)
                r = parse_hunk(&ps);
        free(lines.v);
        if (r < 0) {
                cm_patch_clear(&p);
                return -1;
        }
        *ret = p;
        return 0;
}

void cm_patch_clear(cm_patch *p) {
        for (size_t i = 0; i < p->n_files; i++) {
                cm_patch_file *f = &p->files[i];
                for (size_t j = 0; j < f->n_chunks; j++) {
                        free(f->chunks[j].old_lines);
                        free(f->chunks[j].new_lines);
                        free(f->chunks[j].new_ctx);
                }
                free(f->chunks);
                free(f->add);
                free(f->path);
                free(f->move_to);
        }
        free(p->files);
        free(p->text);
        *p = (cm_patch){0};
}
