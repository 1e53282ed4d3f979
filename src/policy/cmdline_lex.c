/* The tokens of a shell line: operators, redirections (with their target
 * word, and the here-document bodies they announce), and words.  Comments
 * and blanks are skipped here. */
#include "policy/cmdline_int.h"

#include <errno.h>
#include <string.h>

static bool at_is(const cm_cmdline_parser *p, const char *op) {
        size_t n = strlen(op);
        return p->len - p->pos >= n && memcmp(p->s + p->pos, op, n) == 0;
}

/* The here-documents announced on the line just ended, in order.  Bash
 * finds each terminator by plain text comparison, so that is done first;
 * a body whose delimiter was unquoted is then checked like a double-quoted
 * string.  A missing terminator makes the body run to the end (bash warns
 * and does the same). */
static int heredoc_bodies(cm_cmdline_parser *p) {
        for (size_t k = 0; k < p->nhd; k++) {
                const cm_cmdline_heredoc *h = &p->hd[k];
                size_t dlen = strlen(h->delim), ls = p->pos, body = p->pos, body_end = p->len, next = p->len;
                while (ls < p->len) {
                        const char *nl = memchr(p->s + ls, '\n', p->len - ls);
                        size_t eol = nl ? (size_t)(nl - p->s) : p->len, cs = ls;
                        while (h->strip_tabs && cs < eol && p->s[cs] == '\t')
                                cs++;
                        if (eol - cs == dlen && memcmp(p->s + cs, h->delim, dlen) == 0) {
                                body_end = ls;
                                next = nl ? eol + 1 : eol;
                                break;
                        }
                        ls = eol + 1;
                }
                if (!h->quoted && cm_cmdline_heredoc_body(p, body, body_end) < 0)
                        return -1;
                p->pos = next;
        }
        p->nhd = 0;
        return 0;
}

static int heredoc(cm_cmdline_parser *p, const cm_cmdline_word *w, bool strip) {
        cm_cmdline_heredoc *h;
        if (w->expanded || w->ansi || w->trunc)
                return cm_cmdline_fail(
                        p, EPERM,
                        "a here-document delimiter with $, $'...' or over %d bytes (byte %zu)" CM_CMDLINE_NOT_ALLOWED
                        ": use a plain word like EOF",
                        CM_CMDLINE_LIT_MAX - 1, w->start);
        if (p->nhd == CM_CMDLINE_MAX_HEREDOCS)
                return cm_cmdline_fail(
                        p, EPERM, "more than %d here-documents on one line" CM_CMDLINE_NOT_ALLOWED ": split the line",
                        CM_CMDLINE_MAX_HEREDOCS);
        h = &p->hd[p->nhd++];
        memcpy(h->delim, w->lit, w->lit_len + 1);
        h->quoted = w->quoted;
        h->strip_tabs = strip;
        return 0;
}

/* A redirection operator at p->pos and the word it takes.  `<(` and `>(`
 * are process substitutions, which run a command. */
static int redirection(cm_cmdline_parser *p) {
        static const char *const ops[] = {"<<<", "<<-", "&>>", "<<", "<&", "<>", ">>", ">&", ">|", "&>", "<", ">"};
        const char *op = NULL;
        cm_cmdline_word w;
        if (at_is(p, "<(") || at_is(p, ">("))
                return cm_cmdline_fail(p, EPERM,
                                       "process substitution %c(...) at byte %zu" CM_CMDLINE_NOT_ALLOWED
                                       ": run the inner command on its own and use a file",
                                       p->s[p->pos], p->pos);
        for (size_t i = 0; !op && i < sizeof ops / sizeof ops[0]; i++)
                if (at_is(p, ops[i]))
                        op = ops[i];
        p->pos += strlen(op);
        while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t'))
                p->pos++;
        if (p->pos == p->len || cm_cmdline_meta(p->s[p->pos]) || p->s[p->pos] == '#')
                return cm_cmdline_fail(p, EINVAL,
                                       "the redirection %s at byte %zu has no file name" CM_CMDLINE_UNPARSED
                                       ": name the file (quote it if it starts with # or holds ( ) < > | & ;)",
                                       op, p->pos);
        if (cm_cmdline_scan_word(p, &w) < 0)
                return -1;
        if (strcmp(op, "<<") == 0 || strcmp(op, "<<-") == 0)
                return heredoc(p, &w, op[2] == '-');
        return 0;
}

/* Two-character operators that only `case` uses, where bash takes them. */
static int case_only(cm_cmdline_parser *p) {
        return cm_cmdline_fail(p, EINVAL,
                               "%.*s at byte %zu (a case terminator) outside case" CM_CMDLINE_UNPARSED
                               ": separate commands with one ;",
                               at_is(p, ";;&") ? 3 : 2, p->s + p->pos, p->pos);
}

static int op(cm_cmdline_parser *p, int tok, size_t n) {
        p->pos += n;
        return tok;
}

static int operator(cm_cmdline_parser *p) {
        switch (p->s[p->pos]) {
        case '\n': p->pos++; return heredoc_bodies(p) < 0 ? -1 : T_NL;
        case ';': return at_is(p, ";;") || at_is(p, ";&") ? case_only(p) : op(p, T_SEMI, 1);
        case '&':
                if (at_is(p, "&>"))
                        return redirection(p) < 0 ? -1 : T_REDIR;
                return at_is(p, "&&") ? op(p, T_AND, 2) : op(p, T_AMP, 1);
        case '|': return at_is(p, "||") ? op(p, T_OR, 2) : op(p, T_PIPE, at_is(p, "|&") ? 2 : 1);
        case '(': return op(p, T_LPAREN, 1);
        case ')': return op(p, T_RPAREN, 1);
        default: /* < > */ return redirection(p) < 0 ? -1 : T_REDIR;
        }
}

int cm_cmdline_token(cm_cmdline_parser *p, cm_cmdline_word *w) {
        for (;;) {
                while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t'))
                        p->pos++;
                if (p->pos == p->len)
                        return T_EOF;
                if (p->s[p->pos] != '#')
                        break;
                while (p->pos < p->len && p->s[p->pos] != '\n') /* a comment, up to the newline */
                        p->pos++;
        }
        if (cm_cmdline_meta(p->s[p->pos]))
                return operator(p);
        if (cm_cmdline_scan_word(p, w) < 0)
                return -1;
        /* 2>&1: digits right before < or > are the descriptor, not a word */
        if (!w->quoted && w->lit_len && strspn(w->lit, "0123456789") == w->lit_len && !w->expanded && p->pos < p->len &&
            (p->s[p->pos] == '<' || p->s[p->pos] == '>'))
                return redirection(p) < 0 ? -1 : T_REDIR;
        return T_WORD;
}
