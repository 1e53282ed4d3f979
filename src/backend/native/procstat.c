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
        const nstate *s;
        cm_stats *st;
        bool io_only;
        long ticks; /* clock ticks per second */
        long page;
} walk;

static int read_at(int dir, const char *name, char *buf, size_t size) {
        int fd = openat(dir, name, O_RDONLY | O_CLOEXEC);
        ssize_t n;
        if (fd < 0)
                return -1;
        n = read(fd, buf, size - 1);
        (void)close(fd);
        if (n < 0)
                return -1;
        buf[n] = 0;
        return 0;
}

static uint64_t field_after(const char *buf, const char *key) {
        const char *p = strstr(buf, key);
        return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

static void add_process(walk *w, int pdir, bool init) {
        char buf[2048];
        unsigned long long ut = 0, stm = 0, cut = 0, cst = 0, rss = 0;
        uint64_t rd, wr;
        long long cut_s = 0, cst_s = 0;
        DIR *tasks;

        if (read_at(pdir, "io", buf, sizeof buf) == 0) {
                w->st->io_read_bytes += field_after(buf, "\nread_bytes: ");
                w->st->io_write_bytes += field_after(buf, "\nwrite_bytes: ");
        } else if (init && w->s->dir && init_ctl_io(w->s->dir, &rd, &wr) == 0) {
                /* not dumpable, so not ours to read rootless: it tells us */
                w->st->io_read_bytes += rd;
                w->st->io_write_bytes += wr;
        }
        if (w->io_only)
                return;
        if (read_at(pdir, "stat", buf, sizeof buf) == 0) {
                const char *p = strrchr(buf, ')');
                /* fields 14-17: utime stime cutime cstime */
                if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld", &ut, &stm,
                                &cut_s, &cst_s) == 4) {
                        cut = cut_s > 0 ? (unsigned long long)cut_s : 0;
                        cst = cst_s > 0 ? (unsigned long long)cst_s : 0;
                        w->st->cpu_usec += (ut + stm + cut + cst) * 1000000ull / (unsigned long long)w->ticks;
                }
        }
        if (read_at(pdir, "statm", buf, sizeof buf) == 0 && sscanf(buf, "%*u %llu", &rss) == 1)
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

/* Breadth first, from a queue on the heap: a sandbox can nest its
 * processes as deep as its pids limit lets it, deeper than a worker
 * thread's stack would take a recursion. */
static void walk_from(walk *w, int proc, pid_t init) {
        cleanup_free pid_t *queue = xmalloc(WALK_MAX * sizeof *queue);
        size_t head = 0, tail = 0;
        char path[300], buf[4096];

        queue[tail++] = init;
        while (head < tail) {
                pid_t pid = queue[head++];
                int pdir;
                DIR *tasks;

                (void)snprintf(path, sizeof path, "%d", (int)pid);
                pdir = openat(proc, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (pdir < 0)
                        continue;
                add_process(w, pdir, pid == init);
                tasks = fdopendir(openat(pdir, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
                for (struct dirent *d; tasks && (d = readdir(tasks));) {
                        if (d->d_name[0] < '0' || d->d_name[0] > '9')
                                continue;
                        (void)snprintf(path, sizeof path, "task/%s/children", d->d_name);
                        if (read_at(pdir, path, buf, sizeof buf) < 0)
                                continue;
                        for (char *p = buf, *end; *p; p = end) {
                                long c = strtol(p, &end, 10);
                                if (end == p)
                                        break;
                                if (c > 0 && tail < WALK_MAX)
                                        queue[tail++] = (pid_t)c;
                        }
                }
                if (tasks)
                        (void)closedir(tasks);
                (void)close(pdir);
        }
}

int proc_stats(const nstate *s, bool io_only, cm_stats *ret) {
        walk w = {s, ret, io_only, sysconf(_SC_CLK_TCK), sysconf(_SC_PAGESIZE)};
        int proc;

        if (s->init_pid <= 0 || proc_start_time(s->init_pid) != s->init_start)
                return -ESRCH;
        proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (proc < 0)
                return -errno;
        if (w.ticks <= 0)
                w.ticks = 100;
        walk_from(&w, proc, s->init_pid);
        (void)close(proc);
        return 0;
}
