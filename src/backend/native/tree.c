/* Killing an exec's whole process tree.
 *
 * A process group is not a tree: `setsid sleep 300 &` leaves it, and a
 * double fork leaves the parent chain too (the orphan goes to pid 1).  So
 * the command of an exec is made a child subreaper before its exec (the
 * attribute survives execve): whatever it starts, however it detaches,
 * stays below it while it runs.  What it leaves behind when it exits on
 * its own goes to the sandbox's init, as with docker exec.
 *
 * To kill the tree: stop the command (a stopped process forks no more),
 * SIGKILL every process below it, each before its own children are read (a
 * process with SIGKILL pending cannot fork either), again until only
 * zombies are left (what a killed process leaves reparents to the command),
 * then the command itself, whose zombies go to its parent with it.
 *
 * `proc` is a directory fd of a /proc that shows `cmd` by that pid: the
 * init's own, or the host's for a waiter outside the sandbox's pid
 * namespace.  Child-safe and async-signal-safe: syscalls and stack buffers
 * only.  It runs in the init and in an exec waiter's SIGTERM handler. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/native/internal.h"

#define TREE_DEPTH 8 /* deeper ones are found a round later, reparented */
#define TREE_ROUNDS 2000

/* A process that is dead but not reaped: state Z (or X, on its way out). */
static bool is_dead(int proc, pid_t pid) {
        char buf[512];
        const char *f = proc_stat_fields(proc, pid, buf, sizeof buf);
        return !f || *f == 'Z' || *f == 'X';
}

/* Each pid listed in one children file, read to its end in chunks: the
 * list of a stopped subreaper grows with zombies past any one buffer. */
static void each_listed(int proc, const char *path, void (*fn)(pid_t child, void *ctx), void *ctx) {
        char buf[1024];
        size_t have = 0;
        int fd = openat(proc, path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return;
        for (;;) {
                ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
                size_t used = 0;
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                have += (size_t)n;
                /* whole numbers only: one cut at the end waits for the rest */
                for (size_t i = 0; i < have; i++) {
                        if (buf[i] != ' ' && buf[i] != '\n')
                                continue;
                        pid_t c = 0;
                        for (size_t k = used; k < i; k++)
                                c = c * 10 + (buf[k] - '0');
                        used = i + 1;
                        if (c > 0)
                                fn(c, ctx);
                }
                have -= used;
                for (size_t k = 0; k < have; k++)
                        buf[k] = buf[used + k];
        }
        (void)close(fd);
}

/* Every thread's children: a child of a thread other than the main one is
 * listed under that thread, and an orphan reparents to any live thread. */
void proc_each_child(int proc, pid_t pid, void (*fn)(pid_t child, void *ctx), void *ctx) {
        char path[320], dbuf[1024];
        int dfd;
        ssize_t n;

        (void)snprintf(path, sizeof path, "%d/task", (int)pid);
        dfd = openat(proc, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return;
        while ((n = getdents64(dfd, dbuf, sizeof dbuf)) > 0)
                for (ssize_t off = 0; off < n;) {
                        struct dirent64 *d = (struct dirent64 *)(dbuf + off);
                        off += d->d_reclen;
                        if (d->d_name[0] < '0' || d->d_name[0] > '9')
                                continue;
                        (void)snprintf(path, sizeof path, "%d/task/%s/children", (int)pid, d->d_name);
                        each_listed(proc, path, fn, ctx);
                }
        (void)close(dfd);
}

typedef struct sweep {
        int proc;
        int depth;
        int alive; /* found not yet dead */
} sweep;

/* SIGKILL a child, then what is below it (read after the kill: a process
 * with SIGKILL pending forks no more). */
static void kill_child(pid_t c, void *ctx) {
        sweep *s = ctx;
        (void)kill(c, SIGKILL);
        if (is_dead(s->proc, c))
                return;
        s->alive++;
        if (s->depth < TREE_DEPTH) {
                sweep below = {s->proc, s->depth + 1, 0};
                proc_each_child(s->proc, c, kill_child, &below);
                s->alive += below.alive;
        }
}

/* One sweep below pid: how many were still alive. */
static int kill_below(int proc, pid_t pid) {
        sweep s = {proc, 0, 0};
        proc_each_child(proc, pid, kill_child, &s);
        return s.alive;
}

static void pause_round(int round) {
        if (round < 50)
                (void)sched_yield();
        else
                (void)nanosleep(&(struct timespec){0, 1000000L}, NULL);
}

void tree_kill(int proc, pid_t cmd) {
        siginfo_t si;

        if (kill(cmd, SIGSTOP) < 0)
                return;
        /* until it stops, or ends (then what it left is no longer its) */
        for (int round = 0; round < TREE_ROUNDS; round++) {
                si.si_pid = 0;
                if (waitid(P_PID, (id_t)cmd, &si, WSTOPPED | WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid)
                        break;
                pause_round(round);
        }
        if (si.si_pid && si.si_code == CLD_STOPPED)
                for (int round = 0; round < TREE_ROUNDS && kill_below(proc, cmd) > 0; round++)
                        pause_round(round);
        (void)kill(-cmd, SIGKILL); /* its group too, should /proc lack children files */
        (void)kill(cmd, SIGKILL);
}
