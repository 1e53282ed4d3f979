/* One word of a shell line, or one here-document body, read as bash reads
 * it: quotes, escapes and expansions, without running anything.  What
 * could run a command (substitutions, arithmetic, evaluating parameter
 * expansions) is refused here, wherever it sits in the word; the grammar
 * (cmdline.c) judges the word by the flags it gets.
 *
 * The quote contexts of one word nest (a "..." inside ${x:-...} inside
 * "..."), so they are kept on an explicit stack, not the C stack. */
#include "policy/cmdline_int.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

/* Where the scanner is inside the word. */
enum { Q_TOP, Q_SQ, Q_ANSI, Q_DQ, Q_PARAM_U, Q_PARAM_D, Q_HEREDOC };

typedef struct scanner {
        cm_cmdline_parser *p;
        cm_cmdline_word *w;
        size_t i, end;
        int base; /* Q_TOP: a word; Q_HEREDOC: a body */
        unsigned char q[CM_CMDLINE_MAX_DEPTH];
        size_t qpos[CM_CMDLINE_MAX_DEPTH];
        size_t qd, params; /* open contexts; how many of them are ${...} */
} scanner;

static char at(const scanner *sc, size_t k) { return k < sc->end ? sc->p->s[k] : 0; }

static bool name1(char c) { return c == '_' || isalpha((unsigned char)c); }
static bool namec(char c) { return c == '_' || isalnum((unsigned char)c); }
/* $@ $* $# $? $$ $! $- $0 */
static bool special(char c) { return c && strchr("@*#?$!-0", c); }

bool cm_cmdline_meta(char c) { return c && strchr(" \t\n;&|()<>", c); }

static void lit_add(scanner *sc, char c) {
        cm_cmdline_word *w = sc->w;
        if (sc->params || sc->base != Q_TOP)
                return; /* inside ${...}: not part of a literal value */
        if (w->lit_len + 1 < sizeof w->lit) {
                w->lit[w->lit_len++] = c;
                w->lit[w->lit_len] = 0;
        } else
                w->trunc = true;
}

static int push(scanner *sc, int ctx, size_t pos) {
        if (sc->qd == CM_CMDLINE_MAX_DEPTH)
                return cm_cmdline_too_deep(sc->p);
        sc->q[sc->qd] = (unsigned char)ctx;
        sc->qpos[sc->qd++] = pos;
        if (ctx == Q_PARAM_U || ctx == Q_PARAM_D)
                sc->params++;
        return 0;
}

static void pop(scanner *sc) {
        int ctx = sc->q[--sc->qd];
        if (ctx == Q_PARAM_U || ctx == Q_PARAM_D)
                sc->params--;
}

static int unterminated(scanner *sc) {
        static const char *const what[] = {[Q_SQ] = "single quote '",
                                           [Q_ANSI] = "$'...' quote",
                                           [Q_DQ] = "double quote \"",
                                           [Q_PARAM_U] = "${...}",
                                           [Q_PARAM_D] = "${...}"};
        return cm_cmdline_fail(sc->p, EINVAL, "unbalanced %s opened at byte %zu" CM_CMDLINE_UNPARSED ": close it",
                               what[sc->q[sc->qd - 1]], sc->qpos[sc->qd - 1]);
}

static int continuation(scanner *sc) {
        return cm_cmdline_fail(sc->p, EPERM,
                               "a line continuation (\\ at the end of a line, byte %zu)" CM_CMDLINE_NOT_ALLOWED
                               ": write the command on one line",
                               sc->i);
}

static int cmdsub(scanner *sc, const char *form) {
        return cm_cmdline_fail(sc->p, EPERM,
                               "command substitution %s at byte %zu" CM_CMDLINE_NOT_ALLOWED
                               ": run the inner command on its own and pass its output as text",
                               form, sc->i);
}

static int arith(scanner *sc, const char *form) {
        return cm_cmdline_fail(sc->p, EPERM,
                               "arithmetic %s at byte %zu" CM_CMDLINE_NOT_ALLOWED
                               " (bash evaluates array subscripts in it, which can run commands): compute the "
                               "value another way",
                               form, sc->i);
}

static int badparam(scanner *sc, const char *form, const char *why) {
        return cm_cmdline_fail(sc->p, EPERM,
                               "the parameter expansion %s at byte %zu" CM_CMDLINE_NOT_ALLOWED " (%s): %s", form, sc->i,
                               why, "use a plain $name or ${name}, or ${name:-word} and the like");
}

/* The name of ${...} and the operator after it; then the word up to the
 * closing } is scanned in a context of its own.  What evaluates an array
 * subscript or an arithmetic expression is refused: a variable's value can
 * hold a[$(cmd)], and bash runs cmd while evaluating it. */
static int param(scanner *sc, int ctx) {
        size_t j = sc->i + 2;
        char c = at(sc, j);
        size_t name;
        bool length = false;
        sc->w->expanded = true;
        if (ctx == Q_TOP || ctx == Q_PARAM_U)
                sc->w->split = true;
        if ((c == '!' || c == '#') && at(sc, j + 1) == '}') {
                sc->i = j + 2; /* ${!} ${#}: $! $# */
                return 0;
        }
        if (c == '!')
                return badparam(sc, "${!...}", "indirection evaluates array subscripts in the name it finds");
        if (c == '#')
                length = true, c = at(sc, ++j);
        name = j;
        if (name1(c))
                while (namec(at(sc, j)))
                        j++;
        else if (isdigit((unsigned char)c))
                while (isdigit((unsigned char)at(sc, j)))
                        j++;
        else if (special(c))
                j++;
        else if (!c)
                return cm_cmdline_fail(sc->p, EINVAL, "unbalanced ${ at byte %zu" CM_CMDLINE_UNPARSED ": close it",
                                       sc->i);
        else
                return badparam(sc, "${...}", "it is not a parameter bash knows");
        if (at(sc, name) == '@')
                sc->w->split = true; /* "$@" is as many words as there are arguments */
        c = at(sc, j);
        if (c == '}') {
                sc->i = j + 1;
                return 0;
        }
        if (c == '[')
                return badparam(sc, "${name[...]}", "bash evaluates the subscript, which can run commands");
        if (length || c == '@')
                return badparam(sc, length ? "${#name...}" : "${name@...}",
                                "a transformation like @P runs command substitutions in the value");
        if (c == ':' && at(sc, j + 1) && strchr("-=+?", at(sc, j + 1)))
                j += 2;
        else if (c == ':')
                return badparam(sc, "${name:offset}",
                                "bash evaluates the offset as arithmetic, which can run commands");
        else if (c && strchr("-=+?#%/^,", c))
                j++;
        else if (!c)
                return cm_cmdline_fail(sc->p, EINVAL, "unbalanced ${ at byte %zu" CM_CMDLINE_UNPARSED ": close it",
                                       sc->i);
        else
                return badparam(sc, "${...}", "it is not an operator bash knows");
        if (push(sc, ctx == Q_TOP || ctx == Q_PARAM_U ? Q_PARAM_U : Q_PARAM_D, sc->i) < 0)
                return -1;
        sc->i = j;
        return 0;
}

/* Bash finds the end of a ${...} and expands it by two different sets of
 * rules: a `$'` is no quote to the first (a } inside ends the ${), and a
 * `'` inside "${...}" is a quote to the first but not to the second (a
 * $(...) inside it runs).  Whichever reading this check took, bash could
 * take the other: refused. */
static int quote_in_param(scanner *sc, const char *what) {
        return cm_cmdline_fail(sc->p, EPERM,
                               "%s at byte %zu" CM_CMDLINE_NOT_ALLOWED
                               " (bash reads its end and its value by different rules): put the default value in a "
                               "variable first, or quote the whole word differently",
                               what, sc->i);
}

static int dollar(scanner *sc, int ctx) {
        char n = at(sc, sc->i + 1);
        bool outside_dq = ctx == Q_TOP || ctx == Q_PARAM_U;
        if (n == '(')
                return at(sc, sc->i + 2) == '(' ? arith(sc, "expansion $((...))") : cmdsub(sc, "$(...)");
        if (n == '[')
                return arith(sc, "expansion $[...]");
        if (n == '{')
                return param(sc, ctx);
        if (n == '\'' && (ctx == Q_PARAM_U || ctx == Q_PARAM_D))
                return quote_in_param(sc, "$'...' inside ${...}");
        if ((n == '\'' || n == '"') && outside_dq) {
                sc->w->ansi = sc->w->quoted = true; /* $'...' decodes escapes, $"..." translates */
                if (push(sc, n == '\'' ? Q_ANSI : Q_DQ, sc->i) < 0)
                        return -1;
                sc->i += 2;
                return 0;
        }
        if (name1(n) || isdigit((unsigned char)n) || special(n)) {
                sc->w->expanded = true;
                if (outside_dq || n == '@')
                        sc->w->split = true;
                sc->i += 2;
                if (name1(n))
                        while (namec(at(sc, sc->i)))
                                sc->i++;
                return 0;
        }
        lit_add(sc, '$'); /* a lone $ is itself */
        sc->i++;
        return 0;
}

/* A backslash: what it escapes depends on the context (bash's rules).  A
 * backslash-newline joins two lines, which could join `$` and `(rm)`: it is
 * refused wherever it is not inside single quotes. */
static int backslash(scanner *sc, int ctx) {
        char n = at(sc, sc->i + 1);
        if (n == '\n')
                return continuation(sc);
        if (ctx == Q_TOP) {
                sc->w->quoted = true;
                lit_add(sc, n ? n : '\\');
                sc->i += n ? 2 : 1;
        } else if ((ctx == Q_DQ || ctx == Q_HEREDOC) && !(n && strchr(ctx == Q_DQ ? "$`\"\\" : "$`\\", n))) {
                lit_add(sc, '\\'); /* kept, and the next character is read as usual */
                sc->i++;
        } else {
                if (n)
                        lit_add(sc, n);
                sc->i += n ? 2 : 1;
        }
        return 0;
}

/* Characters outside quotes that matter to a command word. */
static void top_char(scanner *sc, char c, size_t start) {
        if (c == '*' || c == '?' || c == '[')
                sc->w->glob = true;
        else if (c == '{')
                sc->w->brace = true;
        else if (c == '~' && sc->i == start)
                sc->w->tilde = true;
}

/* One character in a context that is not single-quoted. */
static int step(scanner *sc, int ctx, size_t start) {
        char c = sc->p->s[sc->i];
        if (c == '\\')
                return backslash(sc, ctx);
        if (c == '$')
                return dollar(sc, ctx);
        if (c == '`')
                return cmdsub(sc, "`...`");
        if ((c == '<' || c == '>') && ctx == Q_PARAM_U && at(sc, sc->i + 1) == '(')
                return cm_cmdline_fail(sc->p, EPERM, /* bash runs it inside an unquoted ${x:-...} too */
                                       "process substitution %c(...) at byte %zu" CM_CMDLINE_NOT_ALLOWED
                                       ": run the inner command on its own and use a file",
                                       c, sc->i);
        if ((c == '"' && ctx == Q_DQ) || (c == '}' && (ctx == Q_PARAM_U || ctx == Q_PARAM_D))) {
                pop(sc);
                sc->i++;
                return 0;
        }
        if (c == '\'' && ctx == Q_PARAM_D)
                return quote_in_param(sc, "a single quote inside a double-quoted ${...}");
        if ((c == '"' && ctx != Q_HEREDOC) || (c == '\'' && (ctx == Q_TOP || ctx == Q_PARAM_U))) {
                if (ctx == Q_TOP)
                        sc->w->quoted = true;
                if (push(sc, c == '"' ? Q_DQ : Q_SQ, sc->i) < 0)
                        return -1;
                sc->i++;
                return 0;
        }
        if (ctx == Q_TOP)
                top_char(sc, c, start);
        lit_add(sc, c);
        sc->i++;
        return 0;
}

static int scan(scanner *sc) {
        size_t start = sc->i;
        for (;;) {
                int ctx = sc->qd ? sc->q[sc->qd - 1] : sc->base;
                char c;
                if (sc->i >= sc->end)
                        return sc->qd ? unterminated(sc) : 0;
                c = sc->p->s[sc->i];
                if (ctx == Q_TOP && cm_cmdline_meta(c))
                        return 0;
                if (ctx == Q_SQ || ctx == Q_ANSI) {
                        if (c == '\\' && ctx == Q_ANSI && sc->i + 1 < sc->end)
                                sc->i++; /* \' does not close $'...' */
                        else if (c == '\'')
                                pop(sc);
                        else
                                lit_add(sc, c);
                        sc->i++;
                        continue;
                }
                if (step(sc, ctx, start) < 0)
                        return -1;
        }
}

int cm_cmdline_scan_word(cm_cmdline_parser *p, cm_cmdline_word *w) {
        scanner sc = {.p = p, .w = w, .i = p->pos, .end = p->len, .base = Q_TOP};
        memset(w, 0, sizeof *w);
        w->start = p->pos;
        if (scan(&sc) < 0)
                return -1;
        w->end = p->pos = sc.i;
        if (w->glob || w->brace)
                w->split = true;
        return 0;
}

/* An unquoted here-document's body is expanded like a double-quoted
 * string (without the quotes): the same substitutions are refused. */
int cm_cmdline_heredoc_body(cm_cmdline_parser *p, size_t from, size_t to) {
        cm_cmdline_word w;
        scanner sc = {.p = p, .w = &w, .i = from, .end = to, .base = Q_HEREDOC};
        memset(&w, 0, sizeof w);
        return scan(&sc);
}
