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
        char path[32], buf[512];
        ssize_t n;
        int fd;

        (void)snprintf(path, sizeof path, "%d/stat", (int)pid);
        fd = openat(proc, path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return true; /* reaped */
        n = read(fd, buf, sizeof buf - 1);
        (void)close(fd);
        if (n <= 0)
                return true;
        /* "pid (comm) S ...": comm may hold ") ", so the last ')' */
        for (ssize_t i = n - 1; i > 0; i--)
                if (buf[i] == ')')
                        return i + 2 < n && (buf[i + 2] == 'Z' || buf[i + 2] == 'X');
        return false;
}

static int kill_below(int proc, pid_t pid, int depth);

/* Kill each pid listed in one thread's children file (read to its end:
 * the list of a stopped subreaper grows with zombies) and what is below it.
 * Returns how many were still alive. */
static int kill_listed(int proc, const char *path, int depth) {
        char buf[1024];
        size_t have = 0;
        int alive = 0, fd = openat(proc, path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return 0;
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
                        if (c <= 0)
                                continue;
                        (void)kill(c, SIGKILL);
                        if (is_dead(proc, c))
                                continue;
                        alive++;
                        if (depth < TREE_DEPTH)
                                alive += kill_below(proc, c, depth + 1);
                }
                have -= used;
                for (size_t k = 0; k < have; k++)
                        buf[k] = buf[used + k];
        }
        (void)close(fd);
        return alive;
}

/* Every thread's children: a child of a thread other than the main one is
 * listed under that thread, and an orphan reparents to any live thread. */
static int kill_below(int proc, pid_t pid, int depth) {
        char path[320], dbuf[1024];
        int alive = 0, dfd;
        ssize_t n;

        (void)snprintf(path, sizeof path, "%d/task", (int)pid);
        dfd = openat(proc, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return 0;
        while ((n = getdents64(dfd, dbuf, sizeof dbuf)) > 0)
                for (ssize_t off = 0; off < n;) {
                        struct dirent64 *d = (struct dirent64 *)(dbuf + off);
                        off += d->d_reclen;
                        if (d->d_name[0] < '0' || d->d_name[0] > '9')
                                continue;
                        (void)snprintf(path, sizeof path, "%d/task/%s/children", (int)pid, d->d_name);
                        alive += kill_listed(proc, path, depth);
                }
        (void)close(dfd);
        return alive;
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
                for (int round = 0; round < TREE_ROUNDS && kill_below(proc, cmd, 0) > 0; round++)
                        pause_round(round);
        (void)kill(-cmd, SIGKILL); /* its group too, should /proc lack children files */
        (void)kill(cmd, SIGKILL);
}
