/* Dockerfiles (dockerfile.h), read as moby/buildkit reads them: the line
 * handling of frontend/dockerfile/parser/parser.go and directives.go, the
 * splitting of split_command.go and line_parsers.go, the checks of
 * instructions/parse.go and bflag.go, and shell/lex.go for df_word.
 *
 * Where Docker decodes UTF-8 (unicode.IsSpace, unicode.IsLetter), this
 * works on bytes: blanks are the ASCII ones, a variable name is
 * [A-Za-z0-9_]. */
#include "image/dockerfile.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "util/cleanup.h"

#define SUBSET "FROM, RUN, COPY, ADD, ENV, ARG, WORKDIR, USER, CMD, ENTRYPOINT, LABEL, EXPOSE, SHELL"
#define ELSEWHERE "build this Dockerfile on Docker or Podman (a server with --backend docker)"
#define MAX_NESTING 64
#define TEXT_MAX 256

static const char *const names[] = {"FROM", "RUN", "COPY",       "ADD",   "ENV",    "ARG",  "WORKDIR",
                                    "USER", "CMD", "ENTRYPOINT", "LABEL", "EXPOSE", "SHELL"};
static const char *const docker_only[] = {"VOLUME", "HEALTHCHECK", "ONBUILD", "STOPSIGNAL", "MAINTAINER"};

/* The flags an instruction takes, as its error message lists them ("=":
 * takes a value), then after "|" the other flags Docker has. */
static const char *const flag_spec[] = {
        [DF_FROM] = "--platform=|",
        [DF_RUN] = "--network=|--mount= --security=",
        [DF_COPY] = "--from=, --chown=, --chmod=, --link|--exclude= --parents",
        [DF_ADD] = "--chown=, --chmod=, --link, --checksum=|--keep-git-dir --unpack --exclude=",
};

const char *df_cmd_name(enum df_cmd c) { return (size_t)c < ARRAY_SIZE(names) ? names[c] : "?"; }

__attribute__((format(printf, 3, 4))) static int fail(cm_err *err, unsigned line, const char *fmt, ...) {
        char msg[CM_ERR_MAX];
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        return cm_err_set(err, EINVAL, "Dockerfile line %u: %s", line, msg);
}

/* ---- containers ----------------------------------------------------------- */

typedef struct buf {
        char *p;
        size_t n, cap;
} buf;

static void buf_add(buf *b, const char *s, size_t n) {
        if (b->n + n + 1 > b->cap)
                b->p = xrealloc(b->p, b->cap = (b->n + n + 1) * 2);
        memcpy(b->p + b->n, s, n);
        b->n += n;
        b->p[b->n] = 0;
}

/* An array of n elements with room for n + 2: it grows at powers of two. */
static void *grow(void *v, size_t n, size_t size) { return (n & (n + 1)) ? v : xrealloc(v, 2 * (n + 1) * size); }

static void add_arg(df_inst *in, char *s) {
        in->args = grow(in->args, in->n_args, sizeof *in->args);
        in->args[in->n_args++] = s;
        in->args[in->n_args] = NULL;
}

static void inst_clear(df_inst *in) {
        for (size_t i = 0; i < in->n_args; i++)
                free(in->args[i]);
        for (size_t i = 0; i < in->n_flags; i++)
                free(in->flags[i].name), free(in->flags[i].value);
        free(in->args);
        free(in->flags);
        free(in->text);
}

void df_file_clear(df_file *f) {
        for (size_t i = 0; i < f->n; i++)
                inst_clear(&f->v[i]);
        free(f->v);
        f->v = NULL;
        f->n = 0;
}

/* ---- an instruction's arguments ------------------------------------------- */

static bool blank(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static void trim(const char **s, size_t *n) {
        while (*n > 0 && blank(**s))
                (*s)++, (*n)--;
        while (*n > 0 && blank((*s)[*n - 1]))
                (*n)--;
}

/* Blank-separated words, quotes meaning nothing (FROM, COPY, EXPOSE). */
static void split_blanks(df_inst *in, const char *s, size_t n) {
        for (size_t i = 0, j; i < n; i = j) {
                while (i < n && blank(s[i]))
                        i++;
                for (j = i; j < n && !blank(s[j]);)
                        j++;
                if (j > i)
                        add_arg(in, xstrndup(s + i, j - i));
        }
}

/* Words whose quotes may hold blanks, quotes and escapes kept for df_word
 * (line_parsers.go's parseWords: ENV, LABEL, ARG).  An unterminated quote
 * runs to the end; an escape character last is dropped. */
static void split_words(df_inst *in, const char *s, size_t n, char esc) {
        buf w = {0};
        char q = 0;
        for (size_t i = 0; i <= n; i++) {
                char c = i < n ? s[i] : ' ';
                if (i == n || (!q && blank(c))) {
                        if (w.n)
                                add_arg(in, xstrndup(w.p, w.n));
                        w.n = 0;
                        continue;
                }
                if (q && c == q)
                        q = 0;
                else if (!q && (c == '\'' || c == '"'))
                        q = c;
                else if (c == esc && q != '\'') {
                        if (i + 1 == n)
                                continue;
                        buf_add(&w, &c, 1);
                        c = s[++i];
                }
                buf_add(&w, &c, 1);
        }
        free(w.p);
}

/* Leading `--name[=value]` words, quotes and escapes removed, `--` alone
 * ending them (split_command.go's extractBuilderFlags): where the
 * arguments start. */
static size_t extract_flags(df_inst *in, const char *s, size_t n, char esc) {
        size_t i = 0;
        buf w = {0};
        for (;;) {
                char q = 0, *eq;
                while (i < n && blank(s[i]))
                        i++;
                if (i + 1 >= n || s[i] != '-' || s[i + 1] != '-')
                        break;
                for (w.n = 0; i < n && (q || !blank(s[i])); i++) {
                        char c = s[i];
                        if (c == q || (!q && (c == '\'' || c == '"'))) {
                                q = q ? 0 : c;
                                continue;
                        }
                        if (c == esc && i + 1 == n) /* dropped */
                                continue;
                        buf_add(&w, c == esc ? &s[++i] : &c, 1);
                }
                if (w.n == 2)
                        break;
                in->flags = grow(in->flags, in->n_flags, sizeof *in->flags);
                eq = memchr(w.p, '=', w.n);
                in->flags[in->n_flags++] = (df_flag){xstrndup(w.p + 2, (eq ? (size_t)(eq - w.p) : w.n) - 2),
                                                     eq ? xstrndup(eq + 1, w.n - (size_t)(eq - w.p) - 1) : NULL};
        }
        free(w.p);
        return i;
}

/* Where [spec, end) lists --name: 2 when it takes a value, 1 when not. */
static int flag_kind(const char *spec, const char *end, const char *name) {
        size_t k = strlen(name);
        if (!k || strspn(name, "abcdefghijklmnopqrstuvwxyz-") != k)
                return 0;
        for (const char *p = spec; (p = strstr(p, "--")) && p < end; p += 2)
                if (!strncmp(p + 2, name, k) && strchr("=, |", p[2 + k]))
                        return p[2 + k] == '=' ? 2 : 1;
        return 0;
}

static int check_flags(const df_inst *in, cm_err *err) {
        const char *cmd = names[in->cmd], *spec = (size_t)in->cmd < ARRAY_SIZE(flag_spec) ? flag_spec[in->cmd] : NULL;
        const char *bar = spec ? strchr(spec, '|') : NULL;
        int ours = bar ? (int)(bar - spec) : 0;
        for (size_t i = 0; i < in->n_flags; i++) {
                const df_flag *f = &in->flags[i];
                int kind = spec ? flag_kind(spec, bar, f->name) : 0;
                if (!kind && spec && flag_kind(bar, bar + strlen(bar), f->name))
                        return fail(err, in->line,
                                    "%s --%s is not in the native builder's subset (%s takes %.*s); " ELSEWHERE, cmd,
                                    f->name, cmd, ours, spec);
                if (!kind)
                        return fail(err, in->line, "%s --%.64s: an unknown flag; %s takes %.*s", cmd, f->name, cmd,
                                    spec ? ours : 8, spec ? spec : "no flags");
                for (size_t j = 0; j < i; j++)
                        if (!strcmp(in->flags[j].name, f->name))
                                return fail(err, in->line, "%s --%s is given twice; keep one", cmd, f->name);
                if (kind == 2 && !f->value)
                        return fail(err, in->line, "%s --%s needs a value: --%s=VALUE", cmd, f->name, f->name);
                if (kind == 1 && f->value && strcasecmp(f->value, "true") && strcasecmp(f->value, "false"))
                        return fail(err, in->line, "%s --%s takes no value, or =true or =false", cmd, f->name);
        }
        return 0;
}

/* The exec form (line_parsers.go's parseJSON): 1 when the text is a JSON
 * array of strings, 0 when it is no JSON array (the shell form), -1 for an
 * array holding something else. */
static int parse_json(df_inst *in, const char *s, size_t n) {
        json_t *a = n && s[0] == '[' ? json_loadb(s, n, 0, NULL) : NULL, *v;
        size_t i;
        int r = json_is_array(a);
        json_array_foreach(a, i, v) {
                if (!json_is_string(v))
                        r = -1;
        }
        for (i = 0; r == 1 && i < json_array_size(a); i++)
                add_arg(in, xstrdup(json_string_value(json_array_get(a, i))));
        if (r == 1 && !in->args)
                in->args = xcalloc(1, sizeof *in->args);
        in->json = r == 1;
        json_decref(a);
        return r;
}

/* A word starting `<<NAME` (or `2<<-NAME`) outside quotes: a heredoc to
 * Docker (parser.go's reHeredoc over the line's words). */
static bool has_heredoc(const char *s, size_t n, char esc) {
        char q = 0;
        for (size_t i = 0, j; i < n; i++) {
                if (s[i] == esc && q != '\'')
                        i++;
                else if (q)
                        q = s[i] == q ? 0 : q;
                else if (s[i] == '\'' || s[i] == '"')
                        q = s[i];
                else if (i == 0 || blank(s[i - 1])) {
                        for (j = i; j < n && isdigit((unsigned char)s[j]);)
                                j++;
                        if (j + 1 >= n || s[j] != '<' || s[j + 1] != '<')
                                continue;
                        for (j += 2 + (j + 2 < n && s[j + 2] == '-'); j < n && blank(s[j]);)
                                j++;
                        if (j < n && s[j] != '<')
                                return true;
                }
        }
        return false;
}

/* ENV and LABEL: `k=v k2="a b"`, or the legacy `k the rest` (parseNameVal). */
static int name_vals(df_inst *in, const char *s, size_t n, char esc, cm_err *err) {
        const char *cmd = names[in->cmd];
        df_inst w = {0};
        size_t k = 0, v;
        int r = 0;
        split_words(&w, s, n, esc);
        if (w.n_args == 0) {
                r = fail(err, in->line, "%s needs name=value", cmd);
        } else if (!strchr(w.args[0], '=')) {
                while (k < n && !blank(s[k]))
                        k++;
                for (v = k; v < n && blank(s[v]);)
                        v++;
                if (v == n)
                        r = fail(err, in->line, "%s %.64s has no value; write %s %.64s=value", cmd, w.args[0], cmd,
                                 w.args[0]);
                else
                        add_arg(in, xstrndup(s, k)), add_arg(in, xstrndup(s + v, n - v));
        } else {
                for (size_t i = 0; i < w.n_args && r == 0; i++) {
                        char *eq = strchr(w.args[i], '=');
                        if (!eq || eq == w.args[i])
                                r = fail(err, in->line, "%s: %s in \"%.64s\"; write name=value", cmd,
                                         eq ? "no name" : "no =", w.args[i]);
                        else
                                add_arg(in, xstrndup(w.args[i], (size_t)(eq - w.args[i]))),
                                        add_arg(in, xstrdup(eq + 1));
                }
        }
        inst_clear(&w);
        return r;
}

static int parse_args(df_inst *in, const char *s, size_t n, char esc, cm_err *err) {
        const char *cmd = names[in->cmd];
        int j;
        switch (in->cmd) {
        case DF_FROM:
                split_blanks(in, s, n);
                if (in->n_args == 3 && !strcasecmp(in->args[1], "as")) {
                        char *name = in->args[2]; /* Docker's stage names are lower case */
                        for (char *p = name; *p; p++)
                                *p = (char)tolower((unsigned char)*p);
                        if (!islower((unsigned char)*name) ||
                            name[strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-_.")])
                                return fail(err, in->line,
                                            "FROM ... AS %.64s: a stage name is a letter, then letters, digits, '-', "
                                            "'_' or '.'",
                                            name);
                        free(in->args[1]);
                        in->args[1] = name, in->args[2] = NULL, in->n_args = 2;
                } else if (in->n_args != 1) {
                        return fail(err, in->line,
                                    "FROM takes an image and an optional stage name: FROM image [AS name]");
                }
                return 0;
        case DF_RUN:
        case DF_CMD:
        case DF_ENTRYPOINT:
        case DF_SHELL:
        case DF_COPY:
        case DF_ADD:
                if ((j = parse_json(in, s, n)) < 0)
                        return fail(err, in->line, "%s [...]: the JSON array must hold only strings", cmd);
                if (j == 0 && in->cmd == DF_SHELL)
                        return fail(err, in->line, "SHELL takes a JSON array, as in SHELL [\"/bin/bash\", \"-c\"]");
                if (j == 0 && in->cmd != DF_CMD && in->cmd != DF_ENTRYPOINT && has_heredoc(s, n, esc))
                        return fail(err, in->line,
                                    "%s: heredocs (<<EOF) are not supported by the native builder; put the text in a "
                                    "file and COPY it, or " ELSEWHERE,
                                    cmd);
                if (in->cmd == DF_COPY || in->cmd == DF_ADD) {
                        if (j == 0)
                                split_blanks(in, s, n);
                        if (in->n_args < 2)
                                return fail(err, in->line, "%s needs a source and a destination: %s src... dest", cmd,
                                            cmd);
                } else if (j == 0 && n > 0) {
                        add_arg(in, xstrndup(s, n));
                } else if (in->n_args == 0 && (j == 0 || in->cmd == DF_RUN || in->cmd == DF_SHELL)) {
                        return fail(err, in->line, "%s has no command; write %s [\"prog\", \"arg\"] or %s prog arg",
                                    cmd, cmd, cmd);
                }
                return 0;
        case DF_ENV:
        case DF_LABEL: return name_vals(in, s, n, esc, err);
        case DF_ARG:
                split_words(in, s, n, esc);
                if (in->n_args == 0)
                        return fail(err, in->line, "ARG needs a name: ARG name or ARG name=default");
                for (size_t i = 0; i < in->n_args; i++)
                        if (in->args[i][0] == '=')
                                return fail(err, in->line, "ARG %.64s has no name; write ARG name=default",
                                            in->args[i]);
                return 0;
        case DF_WORKDIR:
        case DF_USER:
                if (n == 0)
                        return fail(err, in->line, "%s needs a value", cmd);
                add_arg(in, xstrndup(s, n));
                return 0;
        case DF_EXPOSE:
                split_blanks(in, s, n);
                return in->n_args ? 0 : fail(err, in->line, "EXPOSE needs a port: EXPOSE 80 or EXPOSE 53/udp");
        }
        return fail(err, in->line, "internal: no parser for %s", cmd);
}

/* One instruction, its continuations joined: the keyword, the flags, then
 * the keyword's own parser (parser.go's newNodeFromLine). */
static int parse_inst(df_inst *in, const char *s, size_t n, char esc, cm_err *err) {
        size_t k = 0, a;
        trim(&s, &n);
        while (k < n && !blank(s[k]))
                k++;
        for (size_t c = 0; c < ARRAY_SIZE(names); c++) {
                if (strlen(names[c]) != k || strncasecmp(s, names[c], k))
                        continue;
                in->cmd = (enum df_cmd)c;
                a = k + extract_flags(in, s + k, n - k, esc);
                if (check_flags(in, err) < 0)
                        return -1;
                s += a, n -= a;
                trim(&s, &n);
                return parse_args(in, s, n, esc, err);
        }
        for (size_t c = 0; c < ARRAY_SIZE(docker_only); c++)
                if (strlen(docker_only[c]) == k && !strncasecmp(s, docker_only[c], k))
                        return fail(err, in->line, "%s is not in the native builder's subset (" SUBSET "); " ELSEWHERE,
                                    docker_only[c]);
        return fail(err, in->line, "unknown instruction \"%.*s\"; the native builder takes " SUBSET,
                    (int)(k < 32 ? k : 32), s);
}

/* ---- lines ------------------------------------------------------------------ */

/* The escape character last on the line, then only spaces and tabs, and
 * not itself escaped (parser.go's lineContinuationRegex): *n is cut before
 * it. */
static bool continues(const char *s, size_t *n, char esc) {
        size_t k = *n;
        while (k > 0 && (s[k - 1] == ' ' || s[k - 1] == '\t'))
                k--;
        if (k == 0 || s[k - 1] != esc || (k >= 2 && s[k - 2] == esc))
                return false;
        *n = k - 1;
        return true;
}

/* A parser directive (directives.go: `#` key `=` value, the key escape,
 * syntax or check): 1, or 0 for a line that ends the directives. */
static int directive(const char *s, size_t n, df_file *f, unsigned *seen, unsigned line, cm_err *err) {
        static const char *const keys[] = {"escape", "syntax", "check"};
        size_t i = 1, k0, k1, v0, v1;
        if (n == 0 || s[0] != '#')
                return 0;
        while (i < n && blank(s[i]))
                i++;
        for (k0 = i; i < n && (isalpha((unsigned char)s[i]) || (i > k0 && isdigit((unsigned char)s[i])));)
                i++;
        for (k1 = i; i < n && blank(s[i]);)
                i++;
        if (k1 == k0 || i + 1 >= n || s[i] != '=')
                return 0;
        for (v0 = i + 1; v0 + 1 < n && blank(s[v0]);) /* the regexp's (.+?) takes a blank rather than nothing */
                v0++;
        for (v1 = n; v1 > v0 + 1 && blank(s[v1 - 1]);)
                v1--;
        for (unsigned key = 0; key < ARRAY_SIZE(keys); key++) {
                if (strlen(keys[key]) != k1 - k0 || strncasecmp(s + k0, keys[key], k1 - k0))
                        continue;
                if (*seen & (1u << key))
                        return fail(err, line, "a second `# %s=` directive; keep one", keys[key]);
                *seen |= 1u << key;
                if (key == 0 && (v1 - v0 != 1 || (s[v0] != '\\' && s[v0] != '`')))
                        return fail(err, line, "`# escape=%.*s`: the escape character is \\ or `", (int)(v1 - v0),
                                    s + v0);
                if (key == 0)
                        f->escape = s[v0];
                return 1;
        }
        return 0;
}

/* The next line of the text without its end (\n, and \r before it). */
static size_t next_line(const char *text, size_t len, size_t *pos, const char **ret) {
        const char *s = text + *pos, *nl = memchr(s, '\n', len - *pos);
        size_t n = nl ? (size_t)(nl - s) : len - *pos;
        *pos += n + (nl != NULL);
        while (n > 0 && s[n - 1] == '\r')
                n--;
        *ret = s;
        return n;
}

/* A piece of the instruction for `text`: blanks trimmed, control
 * characters as spaces, pieces joined by a space, cut at TEXT_MAX. */
static void show(buf *b, const char *s, size_t n) {
        trim(&s, &n);
        if (n > 0 && b->n)
                buf_add(b, " ", 1);
        for (size_t i = 0; i < n && b->n <= TEXT_MAX; i++) {
                char c = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? ' ' : s[i];
                buf_add(b, &c, 1);
        }
}

static char *shown(const buf *b) {
        size_t cut = TEXT_MAX - strlen("…");
        if (b->n <= TEXT_MAX)
                return xstrndup(b->n ? b->p : "", b->n);
        while (cut > 0 && ((unsigned char)b->p[cut] & 0xC0) == 0x80) /* not inside a UTF-8 character */
                cut--;
        return xasprintf("%.*s…", (int)cut, b->p);
}

/* The instruction collected, parsed and added. */
static int add_inst(df_file *f, unsigned line, const buf *inst, const buf *txt, bool *from, cm_err *err) {
        df_inst *in;
        if (f->n == DF_MAX_INSTRUCTIONS)
                return fail(err, line, "more than %d instructions; " ELSEWHERE, DF_MAX_INSTRUCTIONS);
        f->v = grow(f->v, f->n, sizeof *f->v);
        in = &f->v[f->n++];
        *in = (df_inst){.line = line, .text = shown(txt)};
        if (parse_inst(in, inst->p, inst->n, f->escape, err) < 0)
                return -EINVAL;
        if (!*from && in->cmd != DF_ARG && in->cmd != DF_FROM)
                return fail(err, line, "%s before the first FROM; only ARG may come before FROM", names[in->cmd]);
        *from = *from || in->cmd == DF_FROM;
        return 0;
}

int df_parse(const char *text, size_t len, df_file *ret, cm_err *err) {
        df_file f = {.escape = '\\'};
        const char *nul = memchr(text, 0, len), *s, *t;
        buf inst = {0}, txt = {0};
        size_t pos = len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3) ? 3 : 0, n, tn;
        unsigned line = 0, start = 0, seen = 0;
        bool directives = true, from = false, more = false;
        int r = 0;

        if (len > DF_MAX_BYTES)
                return cm_err_set(err, EFBIG,
                                  "Dockerfile: %zu bytes, more than the native builder's %d KiB; " ELSEWHERE, len,
                                  DF_MAX_BYTES / 1024);
        if (nul) {
                for (const char *p = text; p < nul; p++)
                        line += *p == '\n';
                return fail(err, line + 1, "a NUL byte; a Dockerfile is text");
        }
        while (pos < len && r == 0) {
                bool first = !more;
                n = next_line(text, len, &pos, &s);
                line++;
                if (first) { /* its leading blanks go; it may be a directive, or a comment */
                        while (n > 0 && blank(*s))
                                s++, n--;
                        if (directives) {
                                int d = directive(s, n, &f, &seen, line, err);
                                if (d < 0) /* nothing is held yet: directives come first */
                                        return d;
                                directives = d > 0;
                        }
                        if (n > 0 && *s == '#')
                                continue;
                        start = line, inst.n = txt.n = 0;
                } else { /* inside an instruction, empty lines and comments go */
                        t = s, tn = n;
                        trim(&t, &tn);
                        if (tn == 0 || *t == '#')
                                continue;
                }
                more = continues(s, &n, f.escape);
                if (first && !more && n == 0)
                        continue;
                buf_add(&inst, s, n);
                show(&txt, s, n);
                if (!more)
                        r = add_inst(&f, start, &inst, &txt, &from, err);
        }
        if (r == 0 && more)
                r = add_inst(&f, start, &inst, &txt, &from, err);
        if (r == 0 && f.n == 0)
                r = cm_err_set(err, EINVAL, "Dockerfile: no instructions; a Dockerfile starts with FROM image");
        else if (r == 0 && !from)
                r = cm_err_set(err, EINVAL, "Dockerfile: no FROM; add FROM image after the ARG lines");
        free(inst.p);
        free(txt.p);
        if (r < 0)
                df_file_clear(&f);
        else
                *ret = f;
        return r < 0 ? r : 0;
}

/* ---- df_word: shell/lex.go's ProcessWord ------------------------------------ */

typedef struct lexer {
        const char *s;
        size_t i;
        char esc;
        bool quotes;
        unsigned depth;
        unsigned discard; /* inside a ${...} word that is not used */
        df_lookup_fn lookup;
        void *arg;
        cm_err *err;
} lexer;

__attribute__((format(printf, 2, 3))) static int lex_fail(lexer *l, const char *fmt, ...) {
        char msg[CM_ERR_MAX / 2];
        size_t n = strlen(l->s);
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        return cm_err_set(l->err, EINVAL, "%s in `%.*s%s`", msg, (int)(n > 80 ? 80 : n), l->s, n > 80 ? "…" : "");
}

static int put(lexer *l, buf *b, const char *s, size_t n) {
        if (n == 0 || l->discard)
                return 0;
        if (b->n + n > DF_MAX_WORD)
                return lex_fail(l, "a word expanding to more than %d KiB", DF_MAX_WORD / 1024);
        buf_add(b, s, n);
        return 0;
}

/* A variable's value; not even measured in a word thrown away, so that
 * `${set:-$big$big...}` costs no more than its length. */
static int put_value(lexer *l, buf *b, const char *v) {
        return v && !l->discard ? put(l, b, v, strnlen(v, DF_MAX_WORD + 1)) : 0;
}

static const char *get(lexer *l, const char *name, size_t n) {
        cleanup_free char *z = xstrndup(name, n);
        return l->lookup ? l->lookup(l->arg, z) : NULL;
}

/* processName: digits, or one of sh's special parameters, or a name. */
static size_t name_len(const char *s) {
        bool digits = isdigit((unsigned char)s[0]);
        size_t k = 0;
        if (s[0] && strchr("@*#?-$!", s[0]))
                return 1;
        while (isdigit((unsigned char)s[k]) || (!digits && (isalpha((unsigned char)s[k]) || s[k] == '_')))
                k++;
        return k;
}

static int lex_until(lexer *l, char stop, buf *out);

/* After `$`: a name, `{name}`, or `{name` then :- - :+ + :? ? and a word. */
static int lex_dollar(lexer *l, buf *out) {
        const char *name = l->s + ++l->i, *v;
        bool colon = false, unset, used;
        buf word = {0};
        unsigned saved;
        size_t k;
        char op;
        int r;

        if (*name != '{') {
                k = name_len(name);
                l->i += k;
                return put_value(l, out, k ? get(l, name, k) : "$"); /* `$` before no name is itself */
        }
        name = l->s + ++l->i;
        if (*name == '{' || *name == '}' || *name == ':')
                return lex_fail(l, "a bad substitution");
        k = name_len(name);
        l->i += k;
        if ((op = l->s[l->i]) == ':')
                colon = true, op = l->s[++l->i];
        if (!op)
                return lex_fail(l, "no closing '}'");
        l->i++;
        v = get(l, name, k);
        if (op == '}' && !colon)
                return put_value(l, out, v);
        if (strchr("#%/", op))
                return lex_fail(l, "${name%c...} is not supported by the native builder; " ELSEWHERE, op);
        if (op != '-' && op != '+' && op != '?')
                return lex_fail(l,
                                "a bad substitution: ${name%s%c...} (the native builder takes ${name:-word}, "
                                "${name:+word}, ${name:?message} and the same without ':')",
                                colon ? ":" : "", op);
        if (l->depth >= MAX_NESTING)
                return lex_fail(l, "${...} nested more than %d deep", MAX_NESTING);
        /* The word is read whether or not it is used, as Docker does (an
         * error inside it counts either way), but an unused one is not
         * built; a `?` message is, even inside one: it ends the word. */
        unset = !v || (colon && !*v);
        used = op == '+' ? !unset : unset;
        saved = l->discard;
        l->discard = !used ? saved + 1 : op == '?' ? 0 : saved;
        l->depth++;
        r = lex_until(l, '}', &word);
        l->depth--;
        l->discard = saved;
        if (r == 0 && op == '?' && unset)
                r = lex_fail(l, "%.*s: %s", (int)(k < 64 ? k : 64), name,
                             word.n ? word.p
                             : v    ? "is not allowed to be empty"
                                    : "is not allowed to be unset");
        else if (r == 0)
                r = used ? put(l, out, word.p, word.n) : op != '+' ? put_value(l, out, v) : 0;
        free(word.p);
        return r;
}

static int lex_single(lexer *l, buf *out) {
        const char *s = l->s + l->i + 1, *e = strchr(s, '\'');
        if (!e)
                return lex_fail(l, "no closing single quote");
        l->i += (size_t)(e - s) + 2;
        return put(l, out, s, (size_t)(e - s));
}

/* Inside "...": `$` expands; the escape character escapes only `"`, `$` and
 * itself, and is kept before anything else. */
static int lex_double(lexer *l, buf *out) {
        for (l->i++;;) {
                char c = l->s[l->i], next;
                if (!c)
                        return lex_fail(l, "no closing double quote");
                if (c == '$') {
                        if (lex_dollar(l, out) < 0)
                                return -1;
                        continue;
                }
                next = l->s[++l->i];
                if (c == '"')
                        return 0;
                if (c == l->esc && !next)
                        continue;
                if (c == l->esc && (next == '"' || next == '$' || next == l->esc))
                        c = next, l->i++;
                if (put(l, out, &c, 1) < 0)
                        return -1;
        }
}

/* Up to `stop` (0: the end), which is consumed. */
static int lex_until(lexer *l, char stop, buf *out) {
        for (;;) {
                char c = l->s[l->i];
                int r;
                if (!c)
                        return stop ? lex_fail(l, "no closing '}'") : 0;
                if (c == stop) {
                        l->i++;
                        return 0;
                }
                if (c == '$')
                        r = lex_dollar(l, out);
                else if (l->quotes && c == '\'')
                        r = lex_single(l, out);
                else if (l->quotes && c == '"')
                        r = lex_double(l, out);
                else if (c == l->esc && !l->s[l->i + 1]) /* last, it is dropped */
                        return stop ? lex_fail(l, "no closing '}'") : 0;
                else {
                        l->i += c == l->esc ? 2 : 1;
                        r = put(l, out, &l->s[l->i - 1], 1);
                }
                if (r < 0)
                        return -1;
        }
}

int df_word(const char *raw, char escape, bool quotes, df_lookup_fn lookup, void *arg, char **ret, cm_err *err) {
        lexer l = {.s = raw, .esc = escape, .quotes = quotes, .lookup = lookup, .arg = arg, .err = err};
        buf out = {0};
        if (lex_until(&l, 0, &out) < 0) {
                free(out.p);
                return -EINVAL;
        }
        *ret = out.p ? out.p : xstrdup("");
        return 0;
}
