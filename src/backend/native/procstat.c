/* Stats from /proc, where the cgroup has none: io on cgroup v1 (cgroup.c
 * leaves blkio out, its join costs every start), and everything when the
 * sandbox has no cgroup at all (rootless without a delegated one).
 *
 * Every process of a sandbox descends from its init, so the walk starts
 * there and follows each thread's children file.  A process's cutime,
 * cstime and io include what it reaped, so live processes sum to the whole
 * sandbox's history but for unreaped zombies.  Memory is the sum of
 * resident sets (shared pages count twice: an upper bound); no peak is
 * known.  The server may read these: it owns the sandbox's user namespace,
 * or is root. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "backend/native/linux.h"
#include "util/cleanup.h"

#define WALK_MAX 4096 /* processes: a pids limit is lower */

typedef struct walk {
        int proc; /* /proc */
        const nstate *s;
        cm_stats *st;
        bool io_only;
        long ticks; /* clock ticks per second */
        long page;
} walk;

static uint64_t field_after(const char *buf, const char *key) {
        const char *p = strstr(buf, key);
        return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

static void add_process(walk *w, pid_t pid, int pdir, bool init) {
        char buf[2048];
        unsigned long long ut = 0, stm = 0, cut = 0, cst = 0, rss = 0;
        uint64_t rd, wr;
        long long cut_s = 0, cst_s = 0;
        DIR *tasks;

        const char *f;

        if (read_file_at(pdir, "io", buf, sizeof buf) >= 0) {
                w->st->io_read_bytes += field_after(buf, "\nread_bytes: ");
                w->st->io_write_bytes += field_after(buf, "\nwrite_bytes: ");
        } else if (init && w->s->dir && init_ctl_io(w->s->dir, &rd, &wr) == 0) {
                /* not dumpable, so not ours to read rootless: it tells us */
                w->st->io_read_bytes += rd;
                w->st->io_write_bytes += wr;
        }
        if (w->io_only)
                return;
        if ((f = proc_stat_fields(w->proc, pid, buf, sizeof buf))) {
                /* fields 14-17: utime stime cutime cstime */
                if (sscanf(f, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld", &ut, &stm,
                                &cut_s, &cst_s) == 4) {
                        cut = cut_s > 0 ? (unsigned long long)cut_s : 0;
                        cst = cst_s > 0 ? (unsigned long long)cst_s : 0;
                        w->st->cpu_usec += (ut + stm + cut + cst) * 1000000ull / (unsigned long long)w->ticks;
                }
        }
        if (read_file_at(pdir, "statm", buf, sizeof buf) >= 0 && sscanf(buf, "%*u %llu", &rss) == 1)
                w->st->memory_bytes += rss * (unsigned long long)w->page;
        /* pids, as pids.current counts them: tasks */
        tasks = fdopendir(openat(pdir, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (tasks) {
                for (struct dirent *d; (d = readdir(tasks));)
                        if (d->d_name[0] >= '0' && d->d_name[0] <= '9')
                                w->st->pids++;
                (void)closedir(tasks);
        }
}

typedef struct queue {
        pid_t *v;
        size_t tail;
} queue;

static void enqueue(pid_t child, void *ctx) {
        queue *q = ctx;
        if (q->tail < WALK_MAX)
                q->v[q->tail++] = child;
}

/* Breadth first, from a queue on the heap: a sandbox can nest its
 * processes as deep as its pids limit lets it, deeper than a worker
 * thread's stack would take a recursion. */
static void walk_from(walk *w, pid_t init) {
        cleanup_free pid_t *v = xmalloc(WALK_MAX * sizeof *v);
        queue q = {v, 0};
        char path[32];

        v[q.tail++] = init;
        for (size_t head = 0; head < q.tail; head++) {
                pid_t pid = v[head];
                int pdir;

                (void)snprintf(path, sizeof path, "%d", (int)pid);
                pdir = openat(w->proc, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (pdir < 0)
                        continue;
                add_process(w, pid, pdir, pid == init);
                (void)close(pdir);
                proc_each_child(w->proc, pid, enqueue, &q);
        }
}

int proc_stats(const nstate *s, bool io_only, cm_stats *ret) {
        walk w = {-1, s, ret, io_only, sysconf(_SC_CLK_TCK), sysconf(_SC_PAGESIZE)};

        if (!init_alive(s))
                return -ESRCH;
        w.proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (w.proc < 0)
                return -errno;
        if (w.ticks <= 0)
                w.ticks = 100;
        walk_from(&w, s->init_pid);
        (void)close(w.proc);
        return 0;
}
