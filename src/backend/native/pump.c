/* Output capture for run-to-completion and exec: read stdout and stderr up to
 * a cap each (draining the rest so the process never blocks on a full pipe),
 * or hand every byte to the caller's watcher (cm_exec_watch, with ticks),
 * feed stdin, and kill the process tree on timeout or cancel.  One poll loop,
 * no threads. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "util/cleanup.h"

/* How long output may still arrive after the process exited: background
 * children of an exec may hold the pipes open indefinitely. */
#define LINGER_MS 50

typedef struct capbuf {
        char *data;
        size_t len, alloc, cap;
        bool cut;
} capbuf;

static void cap_add(capbuf *b, const char *p, size_t n) {
        size_t take = n;
        if (b->len + take > b->cap) {
                take = b->cap - b->len;
                b->cut = true;
        }
        if (!take)
                return;
        if (b->len + take + 1 > b->alloc) {
                size_t a = b->alloc ? b->alloc : 4096;
                while (a < b->len + take + 1)
                        a *= 2;
                if (a > b->cap + 1)
                        a = b->cap + 1;
                b->data = xrealloc(b->data, a);
                b->alloc = a;
        }
        memcpy(b->data + b->len, p, take);
        b->len += take;
}

/* Read what is there, into `b` or to the watcher (stream 1 or 2); false
 * at EOF or error. */
static bool drain(int fd, capbuf *b, const cm_exec_watch *w, int stream) {
        char buf[65536];
        for (;;) {
                ssize_t n = read(fd, buf, sizeof buf);
                if (n > 0) {
                        if (w)
                                w->output(w->arg, stream, buf, (size_t)n);
                        else
                                cap_add(b, buf, (size_t)n);
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                return n < 0 && errno == EAGAIN;
        }
}

static void finish_buf(capbuf *b, char **ret, size_t *ret_len) {
        if (!b->data)
                b->data = xmalloc(1);
        b->data[b->len] = 0;
        *ret = b->data;
        *ret_len = b->len;
}

int pump_run(const pump_io *io, const pump_target *t, cm_exec_result *ret, cm_err *err) {
        size_t cap = io->cap ? io->cap : NATIVE_OUTPUT_CAP;
        capbuf out = {.cap = cap}, errb = {.cap = cap};
        int fds[2] = {io->out_fd, io->err_fd};
        int in_fd = io->in_fd;
        size_t in_off = 0;
        bool exited = false, killed = false, cancelled = false, hard = !t->kill_hard;
        int64_t start = cm_now_ms(), exit_at = 0, hard_at = 0;
        int64_t deadline = io->timeout_ms > 0 ? start + io->timeout_ms : 0;
        const cm_exec_watch *watch = io->watch;
        int64_t tick = watch && watch->every_ms > 0 ? start + watch->every_ms : 0;

        for (int i = 0; i < 2; i++)
                if (fds[i] >= 0)
                        (void)fcntl(fds[i], F_SETFL, O_NONBLOCK);
        if (in_fd >= 0 && io->in_len == 0) {
                (void)close(in_fd);
                in_fd = -1;
        }
        for (;;) {
                struct pollfd pf[5];
                nfds_t n = 0;
                int idx_out = -1, idx_err = -1, idx_in = -1, idx_pid = -1;
                int64_t now = cm_now_ms(), wait = -1;

                if (exited && ((fds[0] < 0 && fds[1] < 0) || now >= exit_at + LINGER_MS))
                        break;
                if (!killed && ((deadline && now >= deadline) || (io->cancel && cm_cancelled(io->cancel)))) {
                        cancelled = !(deadline && now >= deadline);
                        t->kill(t->ctx);
                        killed = true;
                        hard_at = now + t->grace_ms;
                }
                if (killed && !exited && !hard && now >= hard_at) {
                        t->kill_hard(t->ctx);
                        hard = true;
                }
                if (fds[0] >= 0)
                        idx_out = (int)n, pf[n++] = (struct pollfd){fds[0], POLLIN, 0};
                if (fds[1] >= 0)
                        idx_err = (int)n, pf[n++] = (struct pollfd){fds[1], POLLIN, 0};
                if (in_fd >= 0)
                        idx_in = (int)n, pf[n++] = (struct pollfd){in_fd, POLLOUT, 0};
                if (!exited)
                        idx_pid = (int)n, pf[n++] = (struct pollfd){t->pidfd, POLLIN, 0};
                /* wakes us; cm_cancelled() at the top says what it means */
                if (!killed && io->cancel && io->cancel->fd >= 0)
                        pf[n++] = (struct pollfd){io->cancel->fd, POLLIN, 0};
                if (exited)
                        wait = exit_at + LINGER_MS - now;
                if (!killed && deadline && (wait < 0 || deadline - now < wait))
                        wait = deadline - now;
                if (killed && !exited && !hard && (wait < 0 || hard_at - now < wait))
                        wait = hard_at - now;
                if (tick && (wait < 0 || tick - now < wait))
                        wait = tick > now ? tick - now : 0;
                if (poll(pf, n, wait < 0 ? -1 : (int)wait) < 0) {
                        if (errno == EINTR)
                                continue;
                        return cm_err_sys(err, errno, "poll on the sandbox's output");
                }
                /* stdin before the output: a process that splices its stdin
                 * into its stdout pipe (busybox cat's sendfile) holds that
                 * pipe's lock while it waits for input, and our read of
                 * the pipe then blocks on the lock, O_NONBLOCK or not. */
                if (idx_in >= 0 && pf[idx_in].revents) {
                        /* POLLERR or POLLHUP without POLLOUT: the reader is
                         * gone.  Its own errno, not one a read above left
                         * (an EAGAIN there kept a dead stdin polled, and
                         * this loop spinning, for good). */
                        ssize_t w = -1;
                        int e = EPIPE;
                        if (pf[idx_in].revents & POLLOUT) {
                                w = send(in_fd, io->in_data + in_off, io->in_len - in_off,
                                         MSG_NOSIGNAL | MSG_DONTWAIT);
                                e = w < 0 ? errno : 0;
                        }
                        if (w > 0)
                                in_off += (size_t)w;
                        if ((w < 0 && e != EAGAIN && e != EINTR) || in_off == io->in_len) {
                                (void)close(in_fd);
                                in_fd = -1;
                        }
                }
                if (idx_out >= 0 && pf[idx_out].revents && !drain(fds[0], &out, watch, 1)) {
                        (void)close(fds[0]);
                        fds[0] = -1;
                }
                if (idx_err >= 0 && pf[idx_err].revents && !drain(fds[1], &errb, watch, 2)) {
                        (void)close(fds[1]);
                        fds[1] = -1;
                }
                if (idx_pid >= 0 && pf[idx_pid].revents) {
                        exited = true;
                        exit_at = cm_now_ms();
                }
                if (tick && cm_now_ms() >= tick) {
                        watch->output(watch->arg, 0, NULL, 0);
                        tick = cm_now_ms() + watch->every_ms;
                }
        }
        for (int i = 0; i < 2; i++)
                if (fds[i] >= 0)
                        (void)close(fds[i]);
        if (in_fd >= 0)
                (void)close(in_fd);
        if (cancelled) {
                free(out.data);
                free(errb.data);
                return cm_err_set(err, ECANCELED, "cancelled by the caller; the process tree was killed");
        }
        finish_buf(&out, &ret->out, &ret->out_len);
        finish_buf(&errb, &ret->err, &ret->err_len);
        ret->truncated = out.cut || errb.cut;
        ret->timed_out = killed;
        return 0;
}
