#include "util/cleanup.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void oom(void) {
        static const char msg[] = "container-mcp: out of memory\n";
        (void)!write(2, msg, sizeof msg - 1);
        abort();
}

void *xmalloc(size_t n) {
        void *p = malloc(n ? n : 1);
        if (!p)
                oom();
        return p;
}

void *xcalloc(size_t n, size_t size) {
        void *p = calloc(n ? n : 1, size ? size : 1);
        if (!p)
                oom();
        return p;
}

void *xrealloc(void *p, size_t n) {
        p = realloc(p, n ? n : 1);
        if (!p)
                oom();
        return p;
}

char *xstrdup(const char *s) {
        char *p = strdup(s ? s : "");
        if (!p)
                oom();
        return p;
}

char *xstrndup(const char *s, size_t n) {
        char *p = strndup(s, n);
        if (!p)
                oom();
        return p;
}

char *xasprintf(const char *fmt, ...) {
        va_list ap;
        char *s = NULL;
        va_start(ap, fmt);
        int r = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (r < 0)
                oom();
        return s;
}
