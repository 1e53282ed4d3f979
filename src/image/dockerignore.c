/* .dockerignore patterns (dockerignore.h).
 *
 * Docker turns each pattern into a regular expression; here each becomes a
 * list of tokens run as an NFA over the path's characters, one set of live
 * states per character: linear in the path for every pattern, so a hostile
 * .dockerignore (`**` + `*` ... a thousand times) cannot make a build hang.
 * Characters are UTF-8 code points (a `?` takes one, as Go's does); a byte
 * that is not UTF-8 is a character of its own. */
#include "image/dockerignore.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"

enum tok_kind {
        T_LIT,   /* one character */
        T_ONE,   /* ?: any character but / */
        T_CLASS, /* [...] */
        T_STAR,  /* *: any run of characters but / */
        T_ANY,   /* ** at the end: any run of characters */
        T_GROUP, /* ** before more: (.* /)? as three tokens: this, T_ANY, T_LIT '/' */
};

typedef struct range {
        uint32_t lo, hi;
} range;

typedef struct tok {
        enum tok_kind kind;
        uint32_t ch;
        range *ranges; /* T_CLASS */
        size_t n_ranges;
        bool negate;
} tok;

typedef struct pattern {
        char *text; /* cleaned, without the `!` */
        bool exception;
        tok *toks;
        size_t n;
} pattern;

struct cm_dockerignore {
        pattern *pats;
        size_t n;
        bool has_exceptions;
};

cm_dockerignore *cm_dockerignore_new(void) { return xcalloc(1, sizeof(cm_dockerignore)); }

static void pattern_clear(pattern *p) {
        for (size_t i = 0; i < p->n; i++)
                free(p->toks[i].ranges);
        free(p->toks);
        free(p->text);
}

void cm_dockerignore_free(cm_dockerignore *d) {
        if (!d)
                return;
        for (size_t i = 0; i < d->n; i++)
                pattern_clear(&d->pats[i]);
        free(d->pats);
        free(d);
}

/* ---- characters --------------------------------------------------------- */

#define NOT_UTF8 0x110000u /* + the byte: a byte that starts no character */

/* The code point at s[*i] (of n bytes), and *i moved past it. */
static uint32_t next_cp(const char *s, size_t n, size_t *i) {
        const unsigned char *u = (const unsigned char *)s + *i;
        size_t left = n - *i, need;
        uint32_t cp;
        if (u[0] < 0x80) {
                (*i)++;
                return u[0];
        }
        need = u[0] >= 0xF0 && u[0] < 0xF5 ? 4 : u[0] >= 0xE0 ? 3 : u[0] >= 0xC2 && u[0] < 0xE0 ? 2 : 0;
        if (need == 0 || left < need)
                goto bad;
        cp = u[0] & (need == 2 ? 0x1F : need == 3 ? 0x0F : 0x07);
        for (size_t k = 1; k < need; k++) {
                if ((u[k] & 0xC0) != 0x80)
                        goto bad;
                cp = cp << 6 | (u[k] & 0x3F);
        }
        if ((need == 3 && cp < 0x800) || (need == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
                goto bad;
        *i += need;
        return cp;
bad:
        (*i)++;
        return NOT_UTF8 + u[0];
}

/* ---- cleaning: Go's filepath.Clean on /-separated text ----------------- */

static char *clean(const char *p) {
        size_t n = strlen(p), out_len = 0;
        bool rooted = p[0] == '/';
        char *out = xmalloc(n + 2);
        size_t i = 0;
        if (rooted)
                out[out_len++] = '/';
        size_t base = out_len; /* where ".." can no longer go back */
        while (i < n) {
                size_t j = i;
                while (j < n && p[j] != '/')
                        j++;
                size_t len = j - i;
                if (len == 0 || (len == 1 && p[i] == '.')) {
                        /* nothing */
                } else if (len == 2 && p[i] == '.' && p[i + 1] == '.') {
                        if (out_len > base) {
                                while (out_len > base && out[out_len - 1] != '/')
                                        out_len--;
                                if (out_len > base)
                                        out_len--; /* the slash before it */
                        } else if (!rooted) {
                                if (out_len > 0)
                                        out[out_len++] = '/';
                                memcpy(out + out_len, "..", 2);
                                out_len += 2;
                                base = out_len;
                        }
                } else {
                        if (out_len > (rooted ? 1u : 0u))
                                out[out_len++] = '/';
                        memcpy(out + out_len, p + i, len);
                        out_len += len;
                }
                i = j + 1;
        }
        if (out_len == 0)
                out[out_len++] = '.';
        out[out_len] = 0;
        return out;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

static char *trim(const char *s, size_t n) {
        while (n && is_space(*s))
                s++, n--;
        while (n && is_space(s[n - 1]))
                n--;
        return xstrndup(s, n);
}

/* ---- compiling ---------------------------------------------------------- */

static void push(pattern *p, tok t) {
        p->toks = xrealloc(p->toks, (p->n + 1) * sizeof *p->toks);
        p->toks[p->n++] = t;
}

/* [...] from s[*i] (just past the '['). */
static int compile_class(const char *s, size_t n, size_t *i, tok *ret) {
        tok t = {.kind = T_CLASS};
        bool first = true;
        if (*i < n && s[*i] == '^')
                t.negate = true, (*i)++;
        for (;;) {
                uint32_t lo, hi;
                if (*i >= n)
                        goto bad;
                if (s[*i] == ']' && !first)
                        break;
                first = false;
                if (s[*i] == '\\' && ++*i >= n)
                        goto bad;
                lo = hi = next_cp(s, n, i);
                if (*i + 1 < n && s[*i] == '-' && s[*i + 1] != ']') {
                        (*i)++;
                        if (s[*i] == '\\' && ++*i >= n)
                                goto bad;
                        hi = next_cp(s, n, i);
                        if (hi < lo)
                                goto bad;
                }
                t.ranges = xrealloc(t.ranges, (t.n_ranges + 1) * sizeof *t.ranges);
                t.ranges[t.n_ranges++] = (range){lo, hi};
        }
        (*i)++; /* the ']' */
        *ret = t;
        return 0;
bad:
        free(t.ranges);
        return -1;
}

static int compile(pattern *p) {
        const char *s = p->text;
        size_t n = strlen(s), i = 0;
        while (i < n) {
                char c = s[i];
                if (c == '*' && i + 1 < n && s[i + 1] == '*') {
                        i += 2;
                        if (i < n && s[i] == '/')
                                i++; /* "**" + "/" is "**" */
                        if (i >= n) {
                                push(p, (tok){.kind = T_ANY});
                        } else {
                                push(p, (tok){.kind = T_GROUP});
                                push(p, (tok){.kind = T_ANY});
                                push(p, (tok){.kind = T_LIT, .ch = '/'});
                        }
                } else if (c == '*') {
                        i++;
                        push(p, (tok){.kind = T_STAR});
                } else if (c == '?') {
                        i++;
                        push(p, (tok){.kind = T_ONE});
                } else if (c == '[') {
                        tok t;
                        i++;
                        if (compile_class(s, n, &i, &t) < 0)
                                return -1;
                        push(p, t);
                } else if (c == '\\') {
                        i++;
                        /* a trailing backslash stands for itself */
                        push(p, (tok){.kind = T_LIT, .ch = i < n ? next_cp(s, n, &i) : '\\'});
                } else {
                        push(p, (tok){.kind = T_LIT, .ch = next_cp(s, n, &i)});
                }
        }
        return 0;
}

/* One pattern as Docker's matcher takes it: trimmed, cleaned, `!` split. */
static int add_clean(cm_dockerignore *d, const char *text, cm_err *err) {
        cleanup_free char *t = trim(text, strlen(text));
        cleanup_free char *c = NULL;
        pattern p = {0};
        if (!*t)
                return 0;
        c = clean(t);
        if (c[0] == '!') {
                if (!c[1])
                        return cm_err_set(err, EINVAL, "a lone \"!\" excepts nothing; write !PATH");
                p.exception = true;
        }
        if (d->n >= CM_DOCKERIGNORE_MAX_PATTERNS)
                return cm_err_set(err, E2BIG, "more than %d patterns; fewer, broader ones do the same",
                                  CM_DOCKERIGNORE_MAX_PATTERNS);
        p.text = xstrdup(c + (p.exception ? 1 : 0));
        if (compile(&p) < 0) {
                pattern_clear(&p);
                return cm_err_set(err, EINVAL, "pattern \"%.200s\" has a [ without its ]: close the class, or "
                                  "write \\[ for a bracket", c);
        }
        d->pats = xrealloc(d->pats, (d->n + 1) * sizeof *d->pats);
        d->pats[d->n++] = p;
        d->has_exceptions |= p.exception;
        return 0;
}

/* One line of the file, as Docker's reader takes it. */
int cm_dockerignore_add(cm_dockerignore *d, const char *line, cm_err *err) {
        cleanup_free char *t = NULL, *rest = NULL, *c = NULL, *full = NULL;
        bool invert;
        if (strlen(line) > CM_DOCKERIGNORE_MAX_PATTERN)
                return cm_err_set(err, E2BIG, "a pattern of more than %d bytes", CM_DOCKERIGNORE_MAX_PATTERN);
        if (line[0] == '#')
                return 0;
        t = trim(line, strlen(line));
        if (!*t)
                return 0;
        invert = t[0] == '!';
        rest = invert ? trim(t + 1, strlen(t + 1)) : xstrdup(t);
        if (*rest) {
                c = clean(rest);
                if (c[0] == '/' && c[1]) /* relative to the context */
                        memmove(c, c + 1, strlen(c));
        } else {
                c = xstrdup("");
        }
        full = xasprintf("%s%s", invert ? "!" : "", c);
        return add_clean(d, full, err);
}

int cm_dockerignore_parse(cm_dockerignore *d, const char *text, size_t len, cm_err *err) {
        size_t i = 0, line = 0;
        if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
                i = 3; /* a UTF-8 byte order mark */
        while (i < len) {
                const char *nl = memchr(text + i, '\n', len - i);
                size_t end = nl ? (size_t)(nl - text) : len, n = end - i;
                cleanup_free char *l = NULL;
                line++;
                if (n && text[i + n - 1] == '\r')
                        n--;
                if (memchr(text + i, 0, n))
                        return cm_err_set(err, EINVAL, ".dockerignore line %zu holds a NUL byte: it is not text",
                                          line);
                l = xstrndup(text + i, n);
                if (cm_dockerignore_add(d, l, err) < 0) {
                        cm_err_prefix(err, ".dockerignore line %zu", line);
                        return -1;
                }
                i = end + 1;
        }
        return 0;
}

/* ---- matching ----------------------------------------------------------- */

static bool class_has(const tok *t, uint32_t c) {
        bool in = false;
        for (size_t i = 0; i < t->n_ranges && !in; i++)
                in = c >= t->ranges[i].lo && c <= t->ranges[i].hi;
        return in != t->negate;
}

/* Add the states reached without a character (all forward, so one pass). */
static void closure(const pattern *p, unsigned char *live) {
        for (size_t i = 0; i < p->n; i++) {
                if (!live[i])
                        continue;
                if (p->toks[i].kind == T_STAR || p->toks[i].kind == T_ANY)
                        live[i + 1] = 1;
                else if (p->toks[i].kind == T_GROUP)
                        live[i + 1] = live[i + 3] = 1; /* into the group, or past it */
        }
}

static bool match_n(const pattern *p, const char *s, size_t n) {
        cleanup_free unsigned char *live = xcalloc(p->n + 1, 1);
        cleanup_free unsigned char *next = xcalloc(p->n + 1, 1);
        size_t i = 0;
        bool any = true;
        live[0] = 1;
        closure(p, live);
        while (i < n && any) {
                uint32_t c = next_cp(s, n, &i);
                memset(next, 0, p->n + 1);
                for (size_t k = 0; k < p->n; k++) {
                        const tok *t = &p->toks[k];
                        if (!live[k])
                                continue;
                        switch (t->kind) {
                        case T_LIT: next[k + 1] |= c == t->ch; break;
                        case T_ONE: next[k + 1] |= c != '/'; break;
                        case T_CLASS: next[k + 1] |= class_has(t, c); break;
                        case T_STAR: next[k] |= c != '/'; break;
                        case T_ANY: next[k] = 1; break;
                        case T_GROUP: break;
                        }
                }
                closure(p, next);
                memcpy(live, next, p->n + 1);
                any = memchr(live, 1, p->n + 1) != NULL;
        }
        return any && i >= n && live[p->n];
}

/* The pattern matches the path, or one of its parent directories. */
static bool match_or_parent(const pattern *p, const char *path) {
        size_t n = strlen(path);
        if (match_n(p, path, n))
                return true;
        for (size_t i = 0; i < n; i++)
                if (path[i] == '/' && match_n(p, path, i))
                        return true;
        return false;
}

bool cm_dockerignore_excluded(const cm_dockerignore *d, const char *path) {
        bool excluded = false;
        for (size_t i = 0; i < d->n; i++) {
                const pattern *p = &d->pats[i];
                /* only a pattern that could change the answer is tried */
                if (p->exception != excluded)
                        continue;
                if (match_or_parent(p, path))
                        excluded = !p->exception;
        }
        return excluded;
}

bool cm_dockerignore_enter(const cm_dockerignore *d, const char *dir) {
        size_t n = strlen(dir);
        if (!d->has_exceptions)
                return false;
        for (size_t i = 0; i < d->n; i++) {
                const pattern *p = &d->pats[i];
                if (p->exception && strncmp(p->text, dir, n) == 0 && (p->text[n] == '/' || !p->text[n]))
                        return true;
        }
        return false;
}

/* ---- a build context's file ------------------------------------------------ */

int cm_dockerignore_read(int ctx, const char *dockerfile, cm_dockerignore **ret, cm_err *err) {
        cleanup_close int fd = openat(ctx, ".dockerignore", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        cleanup_free char *buf = NULL, *keep = NULL;
        cm_dockerignore *d = cm_dockerignore_new();
        size_t len = 0;
        struct stat st;
        if (fd >= 0) {
                ssize_t k;
                if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > CM_DOCKERIGNORE_MAX_FILE) {
                        cm_dockerignore_free(d);
                        return cm_err_set(err, EINVAL, "the context's .dockerignore is not a regular file of at "
                                          "most 1 MiB");
                }
                buf = xmalloc((size_t)st.st_size + 1);
                while (len < (size_t)st.st_size && (k = read(fd, buf + len, (size_t)st.st_size - len)) > 0)
                        len += (size_t)k;
                if (cm_dockerignore_parse(d, buf, len, err) < 0) {
                        cm_dockerignore_free(d);
                        return -1;
                }
        } else if (errno != ENOENT) {
                cm_dockerignore_free(d);
                return cm_err_sys(err, errno, "cannot open the context's .dockerignore");
        }
        keep = xasprintf("!%s", dockerfile);
        if (cm_dockerignore_add(d, keep, err) < 0 || cm_dockerignore_add(d, "!.dockerignore", err) < 0) {
                cm_dockerignore_free(d);
                return -1;
        }
        *ret = d;
        return 0;
}
