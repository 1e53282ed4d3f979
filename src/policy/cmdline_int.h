/* Inside the CONTAINER_MCP_ALLOWED_COMMANDS parser: the grammar
 * (cmdline.c) and the word scanner (cmdline_word.c) share these. */
#ifndef CM_CMDLINE_INT_H
#define CM_CMDLINE_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "policy/cmdline.h"

#define CM_CMDLINE_VAR "CONTAINER_MCP_ALLOWED_COMMANDS"
#define CM_CMDLINE_NOT_ALLOWED " is not allowed while " CM_CMDLINE_VAR " is set"
#define CM_CMDLINE_UNPARSED ": the line does not parse, and with " CM_CMDLINE_VAR " set only a line that parses is run"
#define CM_CMDLINE_LIT_MAX 256
#define CM_CMDLINE_MAX_HEREDOCS 16

/* One word as the scanner saw it. */
typedef struct cm_cmdline_word {
        size_t start, end;            /* where it is in the line */
        char lit[CM_CMDLINE_LIT_MAX]; /* its text after quote removal (expansions left out) */
        size_t lit_len;
        bool trunc;    /* longer than lit holds */
        bool quoted;   /* a quote or backslash: never a reserved word */
        bool expanded; /* holds $name or ${...}: its value is not known here */
        bool split;    /* an unquoted expansion, "$@", a glob or braces: any number of words */
        bool ansi;     /* $'...' or $"...": escapes not decoded here */
        bool glob;     /* an unquoted * ? [ */
        bool brace;    /* an unquoted { */
        bool tilde;    /* starts with an unquoted ~ */
} cm_cmdline_word;

typedef struct cm_cmdline_heredoc {
        char delim[CM_CMDLINE_LIT_MAX];
        bool quoted, strip_tabs;
} cm_cmdline_heredoc;

typedef struct cm_cmdline_parser {
        const char *s;
        size_t len, pos;
        const char *const *allowed;
        size_t n;
        cm_err *err;
        int state;
        bool need_cmd;     /* a command must come next: after && || | ! and openers */
        const char *after; /* what need_cmd waits after, for messages */
        unsigned char ctx[CM_CMDLINE_MAX_DEPTH];
        size_t ctx_pos[CM_CMDLINE_MAX_DEPTH];
        size_t depth;
        cm_cmdline_heredoc hd[CM_CMDLINE_MAX_HEREDOCS];
        size_t nhd;
        size_t assign_end; /* just after a NAME= word: a ( there is an array */
        /* the simple command being read */
        int kind;
        char cmd[CM_CMDLINE_LIT_MAX];
        size_t argc;
        bool test_pending; /* test/[: a quoted expansion waits for an operator beside it */
        bool test_closed;  /* [: a ] came after it */
        bool test_prev_op; /* test/[: the previous argument was a literal operator other than -v/-R */
} cm_cmdline_parser;

__attribute__((format(printf, 3, 4))) int cm_cmdline_fail(cm_cmdline_parser *p, int code, const char *fmt, ...);
int cm_cmdline_too_deep(cm_cmdline_parser *p);
bool cm_cmdline_meta(char c);

/* Scan the word at p->pos (not a blank or metacharacter), leaving p->pos
 * after it; -1 with the error set when it holds what cannot be allowed. */
int cm_cmdline_scan_word(cm_cmdline_parser *p, cm_cmdline_word *w);
/* Check the unquoted here-document body [from, to). */
int cm_cmdline_heredoc_body(cm_cmdline_parser *p, size_t from, size_t to);

enum { T_EOF, T_NL, T_SEMI, T_AMP, T_AND, T_OR, T_PIPE, T_LPAREN, T_RPAREN, T_REDIR, T_WORD };
/* The next token; a word (T_WORD) is left in *w.  A redirection comes with
 * its target word already read (and checked); -1 on a refusal. */
int cm_cmdline_token(cm_cmdline_parser *p, cm_cmdline_word *w);

#endif
