/* Running a program (Apple's `container` CLI, a credential helper):
 * posix_spawn (never a shell), its own process group so a timeout or a
 * cancel reaches whatever it started, stdout and stderr collected up to a
 * cap, stdin fed from memory, one poll loop with the deadline and the
 * cancel fd.  POSIX only (it builds on macOS); the caller ignores SIGPIPE
 * (serve.c), so a program that closes its stdin early is an EPIPE here, not
 * a death. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/spawn.h"
#include "util/cleanup.h"
#include "util/clock.h"

extern char **environ;

#define KILL_GRACE_MS 2000 /* SIGTERM (Apple's CLI passes it on to the process), then SIGKILL */
#define HELD_PIPE_MS 1000  /* output still open after the CLI exited: something it left holds it */

static int cloexec_pipe(int p[2]) {
#if defined(__GLIBC__)
        return pipe2(p, O_CLOEXEC);
#else
        /* macOS has no pipe2; posix_spawn there also gets
         * POSIX_SPAWN_CLOEXEC_DEFAULT, so no other spawn inherits these. */
        if (pipe(p) < 0)
                return -1;
        (void)fcntl(p[0], F_SETFD, FD_CLOEXEC);
        (void)fcntl(p[1], F_SETFD, FD_CLOEXEC);
        return 0;
#endif
}

typedef struct stream {
        int fd;
        char *buf;
        size_t len;
        bool truncated;
} stream;

typedef struct child {
        pid_t pid;
        bool exited;
        int status;
        int64_t killed_at; /* 0: not yet */
        bool killed_hard;
        int64_t exited_at;
} child;

static int spawn_child(char *const *argv, int in, int out, int errfd, pid_t *ret) {
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        sigset_t none, all;
        short flags = POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
        int r;

        (void)posix_spawn_file_actions_init(&fa);
        if (in >= 0)
                (void)posix_spawn_file_actions_adddup2(&fa, in, 0);
        else
                (void)posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        (void)posix_spawn_file_actions_adddup2(&fa, out, 1);
        (void)posix_spawn_file_actions_adddup2(&fa, errfd, 2);
        (void)posix_spawnattr_init(&attr);
#ifdef POSIX_SPAWN_CLOEXEC_DEFAULT
        flags |= POSIX_SPAWN_CLOEXEC_DEFAULT;
#endif
        (void)posix_spawnattr_setflags(&attr, flags);
        (void)posix_spawnattr_setpgroup(&attr, 0);
        (void)sigemptyset(&none);
        (void)sigfillset(&all);
        (void)sigdelset(&all, SIGKILL);
        (void)sigdelset(&all, SIGSTOP);
        (void)posix_spawnattr_setsigmask(&attr, &none);
        /* The server ignores SIGPIPE; the CLI gets every default back. */
        (void)posix_spawnattr_setsigdefault(&attr, &all);
        r = posix_spawn(ret, argv[0], &fa, &attr, argv, environ);
        (void)posix_spawn_file_actions_destroy(&fa);
        (void)posix_spawnattr_destroy(&attr);
        return r;
}

static void take(stream *s, size_t cap) {
        char chunk[65536];
        ssize_t n = read(s->fd, chunk, sizeof chunk);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                return;
        if (n <= 0) {
                (void)close(s->fd);
                s->fd = -1;
                return;
        }
        size_t keep = s->len < cap ? cap - s->len : 0;
        if ((size_t)n > keep)
                s->truncated = true;
        else
                keep = (size_t)n;
        if (keep) {
                s->buf = xrealloc(s->buf, s->len + keep + 1);
                memcpy(s->buf + s->len, chunk, keep);
                s->len += keep;
                s->buf[s->len] = 0;
        }
}

/* SIGTERM to the whole group first, SIGKILL after the grace. */
static void escalate(child *c, int64_t now) {
        if (c->exited && c->killed_hard)
                return;
        if (!c->killed_at) {
                c->killed_at = now;
                (void)kill(-c->pid, SIGTERM);
        } else if (!c->killed_hard && now - c->killed_at >= KILL_GRACE_MS) {
                c->killed_hard = true;
                (void)kill(-c->pid, SIGKILL);
        }
}

static void reap(child *c, int64_t now) {
        if (!c->exited && waitpid(c->pid, &c->status, WNOHANG) == c->pid) {
                c->exited = true;
                c->exited_at = now;
        }
}

static void feed(int *fd, const cm_spawn_io *io, size_t *off) {
        ssize_t n = write(*fd, io->stdin_data + *off, io->stdin_len - *off);
        if (n > 0)
                *off += (size_t)n;
        if ((n < 0 && errno != EAGAIN && errno != EINTR) || *off >= io->stdin_len) {
                (void)close(*fd); /* all written, or the CLI closed its stdin */
                *fd = -1;
        }
}

typedef struct loop {
        stream out, err;
        int in;
        size_t in_off;
        bool timed_out, cancelled;
} loop;

static int poll_once(loop *l, child *c, const cm_spawn_io *io, int64_t start) {
        struct pollfd p[4];
        int n = 0, io_out = -1, io_err = -1, io_in = -1, io_cancel = -1;
        int64_t now = cm_now_ms(), wait = l->out.fd >= 0 || l->err.fd >= 0 ? 100 : 5;
        if (l->out.fd >= 0)
                io_out = n, p[n++] = (struct pollfd){l->out.fd, POLLIN, 0};
        if (l->err.fd >= 0)
                io_err = n, p[n++] = (struct pollfd){l->err.fd, POLLIN, 0};
        if (l->in >= 0)
                io_in = n, p[n++] = (struct pollfd){l->in, POLLOUT, 0};
        if (io->cancel && io->cancel->fd >= 0 && !l->cancelled)
                io_cancel = n, p[n++] = (struct pollfd){io->cancel->fd, POLLIN, 0};
        if (io->timeout_ms > 0 && !l->timed_out && start + io->timeout_ms - now < wait)
                wait = start + io->timeout_ms - now < 0 ? 0 : start + io->timeout_ms - now;
        if (poll(p, (nfds_t)n, (int)wait) < 0 && errno != EINTR)
                return -errno;
        if (io_out >= 0 && p[io_out].revents)
                take(&l->out, io->cap);
        if (io_err >= 0 && p[io_err].revents)
                take(&l->err, io->cap);
        if (io_in >= 0 && p[io_in].revents)
                feed(&l->in, io, &l->in_off);
        if (io_cancel >= 0 && p[io_cancel].revents)
                l->cancelled = true;
        now = cm_now_ms();
        if (io->timeout_ms > 0 && now - start >= io->timeout_ms)
                l->timed_out = true;
        if (l->timed_out || l->cancelled)
                escalate(c, now);
        return 0;
}

static void close_stream(stream *s) {
        if (s->fd >= 0)
                (void)close(s->fd);
        s->fd = -1;
}

static void finish(loop *l, child *c, int64_t start, cm_exec_result *ret) {
        if (!c->exited)
                (void)waitpid(c->pid, &c->status, 0);
        if (l->in >= 0)
                (void)close(l->in);
        close_stream(&l->out);
        close_stream(&l->err);
        ret->exit_code = WIFEXITED(c->status) ? WEXITSTATUS(c->status) : 128 + WTERMSIG(c->status);
        ret->out = l->out.buf ? l->out.buf : xstrdup("");
        ret->out_len = l->out.len;
        ret->err = l->err.buf ? l->err.buf : xstrdup("");
        ret->err_len = l->err.len;
        ret->truncated = l->out.truncated || l->err.truncated;
        ret->timed_out = l->timed_out;
        ret->duration_ms = cm_now_ms() - start;
}

int cm_spawn(char *const *argv, const cm_spawn_io *io, cm_exec_result *ret, cm_err *err) {
        int in[2] = {-1, -1}, out[2] = {-1, -1}, errp[2] = {-1, -1}, r;
        loop l = {{-1, NULL, 0, false}, {-1, NULL, 0, false}, -1, 0, false, false};
        child c = {0};
        int64_t start = cm_now_ms();

        memset(ret, 0, sizeof *ret);
        if ((io->stdin_data && cloexec_pipe(in) < 0) || cloexec_pipe(out) < 0 || cloexec_pipe(errp) < 0) {
                r = errno;
                for (int *fd = &in[0]; fd <= &errp[1]; fd++)
                        if (*fd >= 0)
                                (void)close(*fd);
                return cm_err_sys(err, r, "cannot make pipes for %s", argv[0]);
        }
        r = spawn_child(argv, in[0], out[1], errp[1], &c.pid);
        if (in[0] >= 0)
                (void)close(in[0]);
        (void)close(out[1]);
        (void)close(errp[1]);
        l.in = in[1];
        l.out.fd = out[0];
        l.err.fd = errp[0];
        if (r != 0) {
                if (l.in >= 0)
                        (void)close(l.in);
                close_stream(&l.out);
                close_stream(&l.err);
                return cm_err_sys(err, r, "cannot run %s", argv[0]);
        }
        if (l.in >= 0)
                (void)fcntl(l.in, F_SETFL, O_NONBLOCK);
        for (;;) {
                int64_t now = cm_now_ms();
                reap(&c, now);
                if (c.exited && (l.out.fd < 0 && l.err.fd < 0))
                        break;
                /* The CLI is gone but something it started keeps its output
                 * open: what came is all we take. */
                if (c.exited && now - c.exited_at >= HELD_PIPE_MS)
                        break;
                if ((r = poll_once(&l, &c, io, start)) < 0)
                        escalate(&c, cm_now_ms());
        }
        finish(&l, &c, start, ret);
        if (l.cancelled) {
                cm_exec_result_clear(ret);
                return cm_err_set(err, ECANCELED, "cancelled: %s was stopped", argv[0]);
        }
        return 0;
}
