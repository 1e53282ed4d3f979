/* CONTAINER_MCP_ALLOWED_COMMANDS: the grammar of a bash line, as far as it
 * decides where a command word stands, and the checks of those words.
 *
 * A state machine over tokens (cmdline_lex.c) with an explicit stack of the
 * open compound commands, so neither the length nor the nesting of a line
 * can exhaust the C stack.  Anything it does not model is refused: a line it
 * accepts is one it has read completely. */
#include "policy/cmdline_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* What is open. */
enum { C_SUBSHELL, C_GROUP, C_IF_COND, C_IF_BODY, C_ELSE, C_LOOP_COND, C_DO, C_FOR };
/* Where the parser is: at a command's start, in its prefix (assignments and
 * redirections), in its arguments, after a compound command, in a for. */
enum { S_START, S_PREFIX, S_ARGS, S_AFTER, S_FOR_NAME, S_FOR_AFTER_NAME, S_FOR_WORDS, S_FOR_DO };
/* Allowed commands whose arguments can still run or evaluate code. */
enum { K_OTHER, K_FIND, K_PRINTF, K_TEST, K_BRACKET };

/* Refused as command words even when listed: each runs, or evaluates, what
 * this check cannot follow. */
static const struct {
        const char *name, *why;
} wrappers[] = {
#define RUNS "runs the command given in its arguments"
#define CODE "runs a string or file as shell code"
#define SUBS "assigns through names whose array subscripts bash evaluates, which can run commands"
        {"env", RUNS},
        {"xargs", RUNS},
        {"nice", RUNS},
        {"nohup", RUNS},
        {"timeout", RUNS},
        {"sudo", RUNS},
        {"doas", RUNS},
        {"su", RUNS},
        {"runuser", RUNS},
        {"setsid", RUNS},
        {"stdbuf", RUNS},
        {"chroot", RUNS},
        {"unshare", RUNS},
        {"nsenter", RUNS},
        {"flock", RUNS},
        {"watch", RUNS},
        {"strace", RUNS},
        {"ltrace", RUNS},
        {"time", RUNS},
        {"script", RUNS},
        {"parallel", RUNS},
        {"ionice", RUNS},
        {"chrt", RUNS},
        {"taskset", RUNS},
        {"fakeroot", RUNS},
        {"command", RUNS},
        {"builtin", RUNS},
        {"exec", RUNS},
        {"busybox", RUNS},
        {"jobs", RUNS},
        {"eval", CODE},
        {"source", CODE},
        {".", CODE},
        {"trap", CODE},
        {"bash", CODE},
        {"sh", CODE},
        {"dash", CODE},
        {"zsh", CODE},
        {"ksh", CODE},
        {"mksh", CODE},
        {"fish", CODE},
        {"csh", CODE},
        {"tcsh", CODE},
        {"fc", CODE},
        {"compgen", CODE},
        {"complete", CODE},
        {"mapfile", CODE},
        {"readarray", CODE},
        {"let", SUBS},
        {"declare", SUBS},
        {"typeset", SUBS},
        {"local", SUBS},
        {"readonly", SUBS},
        {"export", SUBS},
        {"unset", SUBS},
        {"read", SUBS},
        {"getopts", SUBS},
        {"wait", SUBS},
        {"hash", "makes a command name run another program"},
        {"enable", "loads builtins from a shared object or turns them off"},
        {"alias", "makes a command name run other commands"},
#undef RUNS
#undef CODE
#undef SUBS
};

/* Reserved words no allowlist may name. */
static const char *const reserved[] = {"!",    "case",  "coproc", "do",       "done", "elif", "else",
                                       "esac", "fi",    "for",    "function", "if",   "in",   "select",
                                       "then", "until", "while",  "{",        "}",    "[[",   "]]"};

int cm_cmdline_fail(cm_cmdline_parser *p, int code, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        p->err->code = code;
        (void)vsnprintf(p->err->msg, sizeof p->err->msg, fmt, ap);
        va_end(ap);
        return -1;
}

int cm_cmdline_too_deep(cm_cmdline_parser *p) {
        return cm_cmdline_fail(p, EPERM,
                               "nesting deeper than %d levels (subshells, groups, if, loops, quotes in ${...}) at "
                               "byte %zu" CM_CMDLINE_NOT_ALLOWED ": flatten the line",
                               CM_CMDLINE_MAX_DEPTH, p->pos);
}

/* A name as it may appear in a message: printable, at most 64 bytes. */
static const char *shown(const char *s, char out[72]) {
        size_t i = 0;
        for (; s[i] && i < 64; i++)
                out[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
        (void)strcpy(out + i, s[i] ? "..." : "");
        return out;
}

static const char *wrapper_why(const char *name) {
        for (size_t i = 0; i < sizeof wrappers / sizeof wrappers[0]; i++)
                if (strcmp(name, wrappers[i].name) == 0)
                        return wrappers[i].why;
        return NULL;
}

static bool is_reserved(const char *name) {
        for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
                if (strcmp(name, reserved[i]) == 0)
                        return true;
        return false;
}

static int push(cm_cmdline_parser *p, int kind, size_t at) {
        if (p->depth == CM_CMDLINE_MAX_DEPTH)
                return cm_cmdline_too_deep(p);
        p->ctx_pos[p->depth] = at;
        p->ctx[p->depth++] = (unsigned char)kind;
        p->need_cmd = true;
        p->state = S_START;
        return 0;
}

static bool alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool digit(char c) { return c >= '0' && c <= '9'; }

static int top(const cm_cmdline_parser *p) { return p->depth ? p->ctx[p->depth - 1] : -1; }

/* ---- the words of a simple command ---- */

static int not_listed(cm_cmdline_parser *p, const char *name) {
        char list[600] = "", buf[72];
        size_t used = 0;
        for (size_t i = 0; i < p->n && used + 4 < sizeof list; i++) {
                int k = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", p->allowed[i]);
                used = k < 0 ? used : used + (size_t)k;
        }
        return cm_cmdline_fail(p, EPERM,
                               "command \"%s\" is not in " CM_CMDLINE_VAR " (%s): use one of those, or ask the "
                               "operator to add it",
                               shown(name, buf), used >= sizeof list ? "..." : list);
}

static int word_form(cm_cmdline_parser *p, const cm_cmdline_word *w, const char *what, const char *fix) {
        return cm_cmdline_fail(p, EPERM, "%s (the command word at byte %zu)" CM_CMDLINE_NOT_ALLOWED ": %s", what,
                               w->start, fix);
}

/* The word that names the program: it must be a literal name, spelled
 * however it is quoted ("l"s is ls), listed, and not a wrapper. */
static int command_word(cm_cmdline_parser *p, const cm_cmdline_word *w) {
        const char *name = w->lit, *why;
        char buf[72];
        size_t k = 0;
        if (w->ansi)
                return word_form(p, w, "$'...' or $\"...\" quoting", "write the command name plainly");
        if (w->expanded)
                return word_form(p, w, "a command name built from a variable or expansion ($X, ${X})",
                                 "write the command name literally");
        if (w->tilde)
                return word_form(p, w, "~ (a home directory path)", "write the command name literally");
        while (alpha(name[k]) || (k && digit(name[k])))
                k++;
        if (w->glob && k && name[k] == '[')
                return word_form(p, w, "an array element assignment name[...]=",
                                 "bash evaluates the subscript, which can run commands; use a plain variable");
        if (w->glob && strcmp(name, "[") != 0) /* a lone [ matches nothing but itself */
                return word_form(p, w, "a glob (* ? [...])", "write the command name literally");
        if (w->brace)
                return word_form(p, w, "brace expansion {...}", "write the command name literally");
        if (w->trunc)
                return cm_cmdline_fail(p, EPERM, "a command name of over %d bytes is not in " CM_CMDLINE_VAR,
                                       CM_CMDLINE_LIT_MAX - 1);
        if (strchr(name, '/'))
                return cm_cmdline_fail(p, EPERM,
                                       "a command given by path (\"%s\")" CM_CMDLINE_NOT_ALLOWED
                                       ": use its name alone, which is looked up in PATH, if that name is allowed",
                                       shown(name, buf));
        if ((why = wrapper_why(name)))
                return cm_cmdline_fail(
                        p, EPERM,
                        "\"%s\" %s, which this check cannot follow; it is refused even when " CM_CMDLINE_VAR
                        " lists it: run the inner command directly",
                        shown(name, buf), why);
        for (size_t i = 0; i < p->n; i++)
                if (strcmp(p->allowed[i], name) == 0) {
                        p->kind = strcmp(name, "find") == 0     ? K_FIND
                                  : strcmp(name, "printf") == 0 ? K_PRINTF
                                  : strcmp(name, "test") == 0   ? K_TEST
                                  : strcmp(name, "[") == 0      ? K_BRACKET
                                                                : K_OTHER;
                        memcpy(p->cmd, name, strlen(name) + 1);
                        return 0;
                }
        return not_listed(p, name);
}

/* NAME=value before the command word.  A few names change which program a
 * command word runs, or hold code the shell runs later. */
static int assignment(cm_cmdline_parser *p, const cm_cmdline_word *w, size_t name_len) {
        static const char *const exact[] = {"PATH",           "ENV",       "SHELLOPTS", "BASHOPTS", "PS4",
                                            "PROMPT_COMMAND", "GCONV_PATH"};
        const char *name = p->s + w->start;
        char buf[72], copy[72];
        bool bad = (name_len >= 3 && memcmp(name, "LD_", 3) == 0) || (name_len >= 4 && memcmp(name, "BASH", 4) == 0);
        for (size_t i = 0; !bad && i < sizeof exact / sizeof exact[0]; i++)
                bad = strlen(exact[i]) == name_len && memcmp(name, exact[i], name_len) == 0;
        if (bad) {
                (void)snprintf(copy, sizeof copy, "%.*s", (int)(name_len < 64 ? name_len : 64), name);
                return cm_cmdline_fail(p, EPERM,
                                       "assigning %s (byte %zu)" CM_CMDLINE_NOT_ALLOWED
                                       " (it changes which program a command name runs, or holds code the shell "
                                       "runs): run the command without it",
                                       shown(copy, buf), w->start);
        }
        p->assign_end = p->s[w->end - 1] == '=' ? w->end : (size_t)-1;
        p->state = S_PREFIX;
        p->need_cmd = false;
        return 0;
}

/* A word before the command word: an assignment or the command word. */
static int prefix_word(cm_cmdline_parser *p, const cm_cmdline_word *w) {
        const char *s = p->s + w->start;
        size_t k = 0, len = w->end - w->start;
        if (alpha(s[0]))
                while (k < len && (alpha(s[k]) || digit(s[k])))
                        k++;
        if (k && k < len && (s[k] == '=' || (s[k] == '+' && k + 1 < len && s[k + 1] == '=')))
                return assignment(p, w, k);
        if (command_word(p, w) < 0)
                return -1;
        p->state = S_ARGS;
        p->need_cmd = false;
        p->argc = 0;
        p->test_pending = p->test_closed = p->test_prev_op = false;
        return 0;
}

static bool one_of(const char *s, const char *const *list) {
        for (; *list; list++)
                if (strcmp(s, *list) == 0)
                        return true;
        return false;
}

static const char *const test_binary[] = {"=",   "==",  "!=",  "<",   ">",   "-eq", "-ne", "-lt",
                                          "-le", "-gt", "-ge", "-nt", "-ot", "-ef", NULL};
static const char *const test_unary[] = {"-b", "-c", "-d", "-e", "-f", "-g", "-h", "-k", "-p", "-r", "-s", "-t",
                                         "-u", "-w", "-x", "-G", "-L", "-N", "-O", "-S", "-z", "-n", NULL};

static int test_refused(cm_cmdline_parser *p, const char *what) {
        return cm_cmdline_fail(p, EPERM,
                               "%s %s" CM_CMDLINE_NOT_ALLOWED
                               " (test -v evaluates the array subscript of the name it is given, which can run "
                               "commands): %s",
                               p->cmd, what,
                               "quote each expanded operand and put a literal operator beside it, like "
                               "[ -f \"$f\" ] or [ \"$a\" = \"$b\" ]");
}

/* test and [: -v and -R evaluate a subscript; an operand the check cannot
 * read could be -v, unless a literal operator beside it fixes its role. */
static int test_arg(cm_cmdline_parser *p, const cm_cmdline_word *w, bool literal) {
        bool op = literal && (one_of(w->lit, test_binary) || one_of(w->lit, test_unary));
        if (literal && (strcmp(w->lit, "-v") == 0 || strcmp(w->lit, "-R") == 0))
                return test_refused(p, w->lit);
        if (w->split)
                return test_refused(p, "with an unquoted expansion, glob or braces (any number of words, -v among "
                                       "them)");
        if (p->test_pending) {
                if (literal && one_of(w->lit, test_binary))
                        p->test_pending = false;
                else if (p->kind == K_BRACKET && literal && strcmp(w->lit, "]") == 0 && !p->test_closed)
                        p->test_closed = true;
                else
                        return test_refused(p, "with an expanded operand and no literal operator beside it");
        } else if (!literal && !p->test_prev_op)
                p->test_pending = true;
        p->test_prev_op = op;
        return 0;
}

/* An argument of an allowed command: most are anything; a few commands run
 * or evaluate what some arguments say. */
static int arg_word(cm_cmdline_parser *p, const cm_cmdline_word *w) {
        static const char *const find_exec[] = {"-exec", "-execdir", "-ok", "-okdir", NULL};
        bool literal = !w->expanded && !w->split && !w->ansi && !w->trunc;
        p->argc++;
        if (p->kind == K_FIND && !literal)
                return cm_cmdline_fail(p, EPERM,
                                       "find with an argument built from an expansion, glob, braces or $'...' (byte "
                                       "%zu)" CM_CMDLINE_NOT_ALLOWED " (it could become -exec): quote patterns and "
                                       "write arguments literally",
                                       w->start);
        if (p->kind == K_FIND && one_of(w->lit, find_exec))
                return cm_cmdline_fail(p, EPERM,
                                       "find %s (it runs another command)" CM_CMDLINE_NOT_ALLOWED
                                       ": list the files with find, then run the command on them in a command of "
                                       "its own",
                                       w->lit);
        if (p->kind == K_PRINTF && p->argc == 1 &&
            (!literal || (w->lit[0] == '-' && strcmp(w->lit, "--") != 0 && strchr(w->lit, 'v'))))
                return cm_cmdline_fail(
                        p, EPERM,
                        "printf -v, or a first printf argument that could be -v (byte %zu)" CM_CMDLINE_NOT_ALLOWED
                        " (it assigns through a name whose array subscript "
                        "bash evaluates, which can run commands): write the format literally",
                        w->start);
        if (p->kind == K_TEST || p->kind == K_BRACKET)
                return test_arg(p, w, literal);
        return 0;
}

/* The simple command being read ends. */
static int finish(cm_cmdline_parser *p) {
        if (p->state == S_ARGS && p->test_pending && p->argc - (p->test_closed ? 1 : 0) != 1)
                return test_refused(p, "with an expanded operand and no literal operator beside it");
        p->kind = K_OTHER;
        return 0;
}

/* ---- compound commands ---- */

static int unexpected(cm_cmdline_parser *p, const char *what, size_t at) {
        char buf[72];
        return cm_cmdline_fail(p, EINVAL, "unexpected %s at byte %zu" CM_CMDLINE_UNPARSED ": check the line's syntax",
                               shown(what, buf), at);
}

/* then elif else fi do done }: each closes or continues what is open. */
static int closer(cm_cmdline_parser *p, const char *k, size_t at) {
        static const struct {
                const char *word;
                int open, open2, then; /* then: -1 pops, else the new top */
        } t[] = {
                {"}", C_GROUP, -1, -1},          {"then", C_IF_COND, -1, C_IF_BODY}, {"elif", C_IF_BODY, -1, C_IF_COND},
                {"else", C_IF_BODY, -1, C_ELSE}, {"fi", C_IF_BODY, C_ELSE, -1},      {"do", C_LOOP_COND, -1, C_DO},
                {"done", C_DO, -1, -1}};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
                if (strcmp(k, t[i].word) != 0)
                        continue;
                if (p->need_cmd || !p->depth || (top(p) != t[i].open && top(p) != t[i].open2))
                        return unexpected(p, k, at);
                if (t[i].then < 0) {
                        p->depth--;
                        p->state = S_AFTER;
                        p->need_cmd = false;
                } else {
                        p->ctx[p->depth - 1] = (unsigned char)t[i].then;
                        p->need_cmd = true;
                        p->state = S_START;
                }
                return 1;
        }
        return 0;
}

static int refuse_keyword(cm_cmdline_parser *p, const char *k, size_t at) {
        const char *fix = strcmp(k, "[[") == 0         ? "it evaluates arithmetic and array subscripts, which can run "
                                                         "commands; use [ ... ] or test"
                          : strcmp(k, "function") == 0 ? "function definitions are not followed; run the commands "
                                                         "directly"
                                                       : "this check does not follow it; write it with if and "
                                                         "separate commands";
        return cm_cmdline_fail(p, EPERM, "%s (byte %zu)" CM_CMDLINE_NOT_ALLOWED ": %s", k, at, fix);
}

/* A reserved word where a command starts: 1 when it was one. */
static int keyword(cm_cmdline_parser *p, const cm_cmdline_word *w) {
        const char *k = w->lit;
        int r;
        if (w->quoted || w->expanded)
                return 0;
        if ((r = closer(p, k, w->start)) != 0 || p->state == S_AFTER)
                return r;
        if (strcmp(k, "!") == 0) {
                p->need_cmd = true;
                p->after = "!";
                return 1;
        }
        if (strcmp(k, "{") == 0 || strcmp(k, "if") == 0 || strcmp(k, "while") == 0 || strcmp(k, "until") == 0)
                return push(p, k[0] == '{' ? C_GROUP : k[0] == 'i' ? C_IF_COND : C_LOOP_COND, w->start) < 0 ? -1 : 1;
        if (strcmp(k, "for") == 0) {
                if (push(p, C_FOR, w->start) < 0)
                        return -1;
                p->state = S_FOR_NAME;
                return 1;
        }
        if (strcmp(k, "case") == 0 || strcmp(k, "select") == 0 || strcmp(k, "function") == 0 ||
            strcmp(k, "coproc") == 0 || strcmp(k, "[[") == 0 || strcmp(k, "esac") == 0)
                return refuse_keyword(p, k, w->start);
        return 0;
}

/* for NAME [in WORDS] ; do: the words are arguments, never commands. */
static int for_token(cm_cmdline_parser *p, int t, const cm_cmdline_word *w) {
        bool plain = t == T_WORD && !w->quoted && !w->expanded;
        if (p->state == S_FOR_NAME && t == T_LPAREN)
                return cm_cmdline_fail(p, EPERM,
                                       "the arithmetic loop for ((...)) at byte %zu" CM_CMDLINE_NOT_ALLOWED
                                       " (bash evaluates array subscripts in it, which can run commands): use "
                                       "for NAME in WORDS",
                                       p->pos);
        if (p->state == S_FOR_NAME && plain && w->lit_len &&
            strspn(w->lit, "_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLM"
                           "NOPQRSTUVWXYZ0123456789") == w->lit_len) {
                p->state = S_FOR_AFTER_NAME;
                return 0;
        }
        if (p->state == S_FOR_AFTER_NAME && plain && strcmp(w->lit, "in") == 0) {
                p->state = S_FOR_WORDS;
                return 0;
        }
        if ((p->state == S_FOR_AFTER_NAME || p->state == S_FOR_DO) && plain && strcmp(w->lit, "do") == 0) {
                p->ctx[p->depth - 1] = C_DO;
                p->state = S_START;
                p->need_cmd = true;
                return 0;
        }
        if (p->state == S_FOR_WORDS && t == T_WORD)
                return 0;
        if (p->state != S_FOR_NAME && (t == T_SEMI || t == T_NL) && !(p->state == S_FOR_DO && t == T_SEMI)) {
                p->state = S_FOR_DO;
                return 0;
        }
        return unexpected(p, t == T_WORD ? w->lit : "token in a for loop", t == T_WORD ? w->start : p->pos);
}

/* ---- the line ---- */

static int on_word(cm_cmdline_parser *p, const cm_cmdline_word *w) {
        int r;
        switch (p->state) {
        case S_START:
        case S_AFTER:
                if ((r = keyword(p, w)) != 0)
                        return r < 0 ? -1 : 0;
                if (p->state == S_AFTER)
                        return unexpected(p, w->lit, w->start);
                return prefix_word(p, w);
        case S_PREFIX: return prefix_word(p, w);
        default: return arg_word(p, w);
        }
}

static int separator(cm_cmdline_parser *p, int t, const char *what) {
        if (p->state == S_START && t != T_NL)
                return unexpected(p, what, p->pos - strlen(what)); /* ; or && with no command before it */
        if (p->state == S_START)
                return 0; /* an empty line, or a line break after && | || or an opener */
        if (finish(p) < 0)
                return -1;
        p->state = S_START;
        p->need_cmd = t == T_AND || t == T_OR || t == T_PIPE;
        p->after = what;
        return 0;
}

static int lparen(cm_cmdline_parser *p) {
        size_t at = p->pos - 1;
        if (p->state == S_START) {
                if (p->pos < p->len && p->s[p->pos] == '(')
                        return cm_cmdline_fail(p, EPERM,
                                               "the arithmetic command ((...)) at byte %zu" CM_CMDLINE_NOT_ALLOWED
                                               " (bash evaluates array subscripts in it, which can run commands): "
                                               "put a space between the parentheses of nested subshells",
                                               at);
                return push(p, C_SUBSHELL, at);
        }
        if (p->state == S_PREFIX && at == p->assign_end)
                return cm_cmdline_fail(p, EPERM,
                                       "an array assignment name=(...) at byte %zu" CM_CMDLINE_NOT_ALLOWED
                                       " (bash evaluates its subscripts, which can run commands): use plain variables",
                                       at);
        if (p->state == S_ARGS && p->argc == 0)
                return cm_cmdline_fail(p, EPERM,
                                       "a function definition %s() at byte %zu" CM_CMDLINE_NOT_ALLOWED
                                       " (the function would run under an allowed name): run the commands directly",
                                       p->cmd, at);
        return unexpected(p, "(", at);
}

static int rparen(cm_cmdline_parser *p) {
        if (top(p) != C_SUBSHELL || (p->state == S_START && p->need_cmd) || p->state >= S_FOR_NAME)
                return unexpected(p, ")", p->pos - 1);
        if (finish(p) < 0)
                return -1;
        p->depth--;
        p->state = S_AFTER;
        p->need_cmd = false;
        return 0;
}

static int at_end(cm_cmdline_parser *p) {
        static const char *const open[] = {
                [C_SUBSHELL] = "( without )",  [C_GROUP] = "{ without }",  [C_IF_COND] = "if without then",
                [C_IF_BODY] = "if without fi", [C_ELSE] = "if without fi", [C_LOOP_COND] = "while or until without do",
                [C_DO] = "loop without done",  [C_FOR] = "for without do"};
        if (p->depth)
                return cm_cmdline_fail(p, EINVAL, "unbalanced %s (opened at byte %zu)" CM_CMDLINE_UNPARSED ": close it",
                                       open[top(p)], p->ctx_pos[p->depth - 1]);
        if (p->state == S_START && p->need_cmd)
                return cm_cmdline_fail(p, EINVAL, "the line ends after %s" CM_CMDLINE_UNPARSED ": add the command",
                                       p->after ? p->after : "!");
        return finish(p);
}

static int on_token(cm_cmdline_parser *p, int t, const cm_cmdline_word *w) {
        if (p->state >= S_FOR_NAME && t != T_EOF)
                return for_token(p, t, w);
        switch (t) {
        case T_EOF: return at_end(p);
        case T_WORD: return on_word(p, w);
        case T_REDIR:
                if (p->state == S_START)
                        p->state = S_PREFIX, p->need_cmd = false, p->assign_end = (size_t)-1;
                return 0;
        case T_NL: return separator(p, t, "a newline");
        case T_SEMI: return separator(p, t, ";");
        case T_AMP: return separator(p, t, "&");
        case T_AND: return separator(p, t, "&&");
        case T_OR: return separator(p, t, "||");
        case T_PIPE: return separator(p, t, "|");
        case T_LPAREN: return lparen(p);
        default: return rparen(p);
        }
}

int cm_cmdline_allowed(const char *line, const char *const *allowed, size_t n, cm_err *err) {
        cm_cmdline_parser p;
        cm_cmdline_word w;
        cm_err scratch = CM_ERR_INIT;
        int t;
        memset(&p, 0, sizeof p);
        p.s = line ? line : "";
        p.len = strlen(p.s);
        p.allowed = allowed;
        p.n = allowed ? n : 0;
        p.err = err ? err : &scratch;
        p.assign_end = (size_t)-1;
        do {
                t = cm_cmdline_token(&p, &w);
                if (t < 0 || on_token(&p, t, &w) < 0)
                        return -1;
        } while (t != T_EOF);
        return 0;
}

int cm_cmdline_name_ok(const char *name, cm_err *err) {
        const char *why;
        size_t len = name ? strlen(name) : 0;
        if (!name || !len || len > CM_CMDLINE_NAME_MAX || name[0] == '-' ||
            (strcmp(name, "[") != 0 &&
             strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+-") != len))
                return cm_err_set(err, EINVAL,
                                  CM_CMDLINE_VAR
                                  " entry \"%.*s\" is not a command name (1 to %d of A-Z a-z 0-9 _ . "
                                  "+ -, not starting with -; no paths, spaces or shell characters): list names "
                                  "separated by commas, like ls,cat,grep",
                                  (int)(len > 64 ? 64 : len), name ? name : "", CM_CMDLINE_NAME_MAX);
        if (is_reserved(name))
                return cm_err_set(err, EINVAL,
                                  CM_CMDLINE_VAR " entry \"%s\" is a shell reserved word, not a command: "
                                                 "remove it",
                                  name);
        if ((why = wrapper_why(name)))
                return cm_err_set(err, EINVAL,
                                  CM_CMDLINE_VAR " entry \"%s\" %s, which the check cannot follow, so it is always "
                                                 "refused: remove it",
                                  name, why);
        return 0;
}
