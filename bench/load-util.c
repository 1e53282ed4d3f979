/* load-util.c: allocation, clocks, buffers, latency samples, /proc figures. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "load.h"

void die(const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        fputs("mcp-load: ", stderr);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        exit(2);
}

void *xrealloc(void *p, size_t n)
{
        void *q = realloc(p, n ? n : 1);

        if (!q)
                die("out of memory");
        return q;
}

void *xcalloc(size_t n, size_t size)
{
        void *p = calloc(n ? n : 1, size ? size : 1);

        if (!p)
                die("out of memory");
        return p;
}

char *xstrdup(const char *s)
{
        char *p = strdup(s);

        if (!p)
                die("out of memory");
        return p;
}

uint64_t now_ns(void)
{
        struct timespec ts;

        if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
                die("clock_gettime: %s", strerror(errno));
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void sleep_ms(long ms)
{
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

void set_err(char *err, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        (void)vsnprintf(err, ERR_LEN, fmt, ap);
        va_end(ap);
}

int write_all(int fd, const char *p, size_t n, char *err)
{
        while (n) {
                ssize_t w = write(fd, p, n);

                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0) {
                        set_err(err, "write: %s", strerror(errno));
                        return -1;
                }
                p += w;
                n -= (size_t)w;
        }
        return 0;
}

long parse_long(const char *s, const char *what, long min)
{
        char *end;
        long v;

        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || end == s || *end || v < min)
                die("bad %s: %s", what, s);
        return v;
}

void buf_reserve(struct buf *b, size_t extra)
{
        if (b->len + extra + 1 <= b->cap)
                return;
        while (b->len + extra + 1 > b->cap)
                b->cap = b->cap ? b->cap * 2 : 4096;
        b->data = xrealloc(b->data, b->cap);
}

void buf_append(struct buf *b, const char *p, size_t n)
{
        buf_reserve(b, n);
        memcpy(b->data + b->len, p, n);
        b->len += n;
        b->data[b->len] = '\0';
}

void buf_consume(struct buf *b, size_t n)
{
        memmove(b->data, b->data + n, b->len - n);
        b->len -= n;
        b->data[b->len] = '\0';
}

void buf_free(struct buf *b)
{
        free(b->data);
        *b = (struct buf){ 0 };
}

void samples_add(struct samples *s, uint64_t ns)
{
        if (s->n == s->cap) {
                s->cap = s->cap ? s->cap * 2 : 65536;
                s->ns = xrealloc(s->ns, s->cap * sizeof(*s->ns));
        }
        s->ns[s->n++] = ns;
}

void samples_merge(struct samples *into, const struct samples *from)
{
        for (size_t i = 0; i < from->n; i++)
                samples_add(into, from->ns[i]);
}

int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return (x > y) - (x < y);
}

/* Nearest-rank percentile in microseconds; samples must be sorted. */
double percentile_us(const struct samples *s, double q)
{
        size_t rank;

        if (!s->n)
                return 0;
        rank = (size_t)(q * (double)s->n + 0.999999);
        if (rank < 1)
                rank = 1;
        if (rank > s->n)
                rank = s->n;
        return (double)s->ns[rank - 1] / 1000.0;
}

/* VmRSS of a process in KiB, or -1. */
long rss_kib(pid_t pid)
{
        char path[64], line[256];
        long kib = -1;
        FILE *f;

        (void)snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "VmRSS: %ld", &kib) == 1)
                        break;
        (void)fclose(f);
        return kib;
}

/* utime + stime of a process in clock ticks, or -1. */
long long cpu_ticks(pid_t pid)
{
        char path[64], data[1024];
        unsigned long long ut, st;
        const char *p;
        ssize_t n;
        int fd;

        (void)snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        n = read(fd, data, sizeof(data) - 1);
        (void)close(fd);
        if (n <= 0)
                return -1;
        data[n] = '\0';
        /* Fields after the ")" that ends comm: state is field 3, utime 14. */
        p = strrchr(data, ')');
        if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                         &ut, &st) != 2)
                return -1;
        return (long long)(ut + st);
}

double self_cpu_s(void)
{
        struct rusage ru;

        if (getrusage(RUSAGE_SELF, &ru) < 0)
                die("getrusage: %s", strerror(errno));
        return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
               (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}
