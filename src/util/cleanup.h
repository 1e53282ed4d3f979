/* Allocation that aborts on failure, and cleanup attributes so every exit
 * path of a function releases what it holds.  Ownership moves explicitly with
 * steal_pointer() and take_fd(). */
#ifndef CM_CLEANUP_H
#define CM_CLEANUP_H

#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
__attribute__((format(printf, 1, 2))) char *xasprintf(const char *fmt, ...);

static inline void freep(void *p) { free(*(void **)p); }
static inline void closep(int *fd) {
        if (*fd >= 0)
                (void)close(*fd);
}

#define cleanup_free __attribute__((cleanup(freep)))
#define cleanup_close __attribute__((cleanup(closep)))

static inline void *steal_ptr(void *pp) {
        void **p = pp, *v = *p;
        *p = NULL;
        return v;
}
#define steal_pointer(pp) steal_ptr(pp)

static inline int take_fd(int *fd) {
        int v = *fd;
        *fd = -1;
        return v;
}

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
