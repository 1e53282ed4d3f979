/* Output capture for run-to-completion and exec: read stdout and stderr up to
 * a cap each (draining the rest so the process never blocks on a full pipe),
 * or hand every byte to the caller's watcher (cm_exec_watch, with ticks),
 * feed stdin, and kill the process tree on timeout or cancel.
 *
 * Two threads.  The control loop (the caller's thread) watches the
 * process, the deadline, the cancel and stdin, and never touches the
 * output pipes; a reader thread reads them.  A process in the sandbox can
 * hold a pipe's lock for as long as it likes (sendfile or splice from a
 * source that never delivers): a read of that pipe then blocks, O_NONBLOCK
 * or not.  Only the reader is stuck then; the control loop still kills on
 * time, waits LINGER_MS after the exit, and leaves.  The reader is then
 * abandoned: it delivers nothing more (the watcher is never called after
 * pump_run returns) and frees what it shares when its read returns. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "util/cleanup.h"

/* How long output may still arrive after the process exited: background
 * children of an exec may hold the pipes open indefinitely.  Past
 * LINGER_MS the run ends as soon as the pipes hold nothing unread and the
 * reader is not in the middle of a read (a starved reader on a loaded
 * machine still gets everything the process wrote); past LINGER_MAX_MS
 * it ends anyway (a reader blocked on a pipe's lock). */
#define LINGER_MS 50
#define LINGER_MAX_MS 2000
#define LINGER_STEP_MS 5

/* Readers left blocked by sandbox processes that hold a pipe's lock: each
 * costs a thread and its stack until the holder lets go.  Past this many,
 * runs are refused rather than letting a sandbox exhaust the server. */
#define MAX_STUCK_READERS 128

static atomic_int stuck_readers;

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

/* What the control loop and the reader share.  `lock` guards the buffers,
 * `abandoned` and every watcher call (ticks included), so the watcher runs
 * in one thread at a time and never after the control loop let go. */
typedef struct reader {
        pthread_mutex_t lock;
        atomic_int refs;
        int fds[2];  /* stdout, stderr: the reader's, closed by it */
        int stop_fd; /* eventfd: the control loop gave up on the reader */
        int done_fd; /* eventfd: both pipes reached EOF */
        capbuf out, err;
        const cm_exec_watch *watch;
        bool abandoned; /* the control loop let go before the reader ended */
        bool ended;     /* the reader is past its last delivery */
        atomic_bool busy; /* between a read and the delivery of what it got */
} reader;

static void reader_unref(reader *r) {
        if (atomic_fetch_sub(&r->refs, 1) != 1)
                return;
        (void)pthread_mutex_destroy(&r->lock);
        (void)close(r->stop_fd);
        (void)close(r->done_fd);
        free(r->out.data);
        free(r->err.data);
        free(r);
}

/* Deliver one piece, unless the control loop has let go. */
static void deliver(reader *r, int stream, const char *p, size_t n) {
        (void)pthread_mutex_lock(&r->lock);
        if (!r->abandoned) {
                if (r->watch)
                        r->watch->output(r->watch->arg, stream, p, n);
                else
                        cap_add(stream == 1 ? &r->out : &r->err, p, n);
        }
        (void)pthread_mutex_unlock(&r->lock);
}

/* Read what is there; false at EOF or error. */
static bool drain(reader *r, int i) {
        char buf[65536];
        for (;;) {
                atomic_store(&r->busy, true);
                ssize_t n = read(r->fds[i], buf, sizeof buf);
                if (n > 0) {
                        deliver(r, i + 1, buf, (size_t)n);
                        continue;
                }
                atomic_store(&r->busy, false);
                if (n < 0 && errno == EINTR)
                        continue;
                return n < 0 && errno == EAGAIN;
        }
}

/* Whether output is still on its way: unread in a pipe (the control loop's
 * own copies of the read ends; poll takes no pipe lock), or read and not
 * yet delivered. */
static bool in_flight(reader *r, const int *peek) {
        struct pollfd pf[2] = {{peek[0], POLLIN, 0}, {peek[1], POLLIN, 0}};
        if (poll(pf, 2, 0) > 0 && ((pf[0].revents & POLLIN) || (pf[1].revents & POLLIN)))
                return true;
        return atomic_load(&r->busy);
}

static void *reader_main(void *arg) {
        reader *r = arg;
        bool stopped = false;
        while (!stopped && (r->fds[0] >= 0 || r->fds[1] >= 0)) {
                struct pollfd pf[3] = {{r->fds[0], POLLIN, 0}, {r->fds[1], POLLIN, 0}, {r->stop_fd, POLLIN, 0}};
                if (poll(pf, 3, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                for (int i = 0; i < 2; i++)
                        if (r->fds[i] >= 0 && pf[i].revents && !drain(r, i)) {
                                (void)close(r->fds[i]);
                                r->fds[i] = -1;
                        }
                stopped = pf[2].revents != 0;
        }
        for (int i = 0; i < 2; i++)
                if (r->fds[i] >= 0)
                        (void)close(r->fds[i]);
        (void)pthread_mutex_lock(&r->lock);
        r->ended = true;
        if (r->abandoned)
                atomic_fetch_sub(&stuck_readers, 1);
        else
                (void)eventfd_write(r->done_fd, 1);
        (void)pthread_mutex_unlock(&r->lock);
        reader_unref(r);
        return NULL;
}

static reader *reader_start(const pump_io *io, size_t cap, cm_err *err) {
        if (atomic_load(&stuck_readers) >= MAX_STUCK_READERS) {
                (void)cm_err_set(err, EAGAIN,
                                 "%d earlier runs still have output pipes held by sandbox processes (a "
                                 "sendfile or splice that never ends): remove the containers that run "
                                 "them, then try again",
                                 MAX_STUCK_READERS);
                return NULL;
        }
        reader *r = xcalloc(1, sizeof *r);
        *r = (reader){.refs = 2, .fds = {io->out_fd, io->err_fd}, .out = {.cap = cap}, .err = {.cap = cap},
                      .watch = io->watch};
        (void)pthread_mutex_init(&r->lock, NULL);
        r->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        r->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        for (int i = 0; i < 2; i++)
                if (r->fds[i] >= 0)
                        (void)fcntl(r->fds[i], F_SETFL, O_NONBLOCK);
        pthread_attr_t a;
        pthread_t th;
        int rc = r->stop_fd < 0 || r->done_fd < 0 ? errno : 0;
        if (!rc) {
                (void)pthread_attr_init(&a);
                (void)pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
                (void)pthread_attr_setstacksize(&a, 256 * 1024);
                rc = pthread_create(&th, &a, reader_main, r);
                (void)pthread_attr_destroy(&a);
        }
        if (rc) {
                for (int i = 0; i < 2; i++)
                        if (r->fds[i] >= 0)
                                (void)close(r->fds[i]);
                r->refs = 1;
                reader_unref(r);
                (void)cm_err_sys(err, rc, "start the thread that reads the sandbox's output");
                return NULL;
        }
        return r;
}

static void finish_buf(capbuf *b, char **ret, size_t *ret_len) {
        if (!b->data)
                b->data = xmalloc(1);
        b->data[b->len] = 0;
        *ret = b->data;
        *ret_len = b->len;
}

/* The control loop is done with the reader and takes what it read (out
 * and err may be NULL: dropped).  A reader that has not ended is
 * abandoned: told to stop, and nothing it reads later is delivered. */
static void reader_release(reader *r, capbuf *out, capbuf *err) {
        (void)pthread_mutex_lock(&r->lock);
        bool ended = r->ended;
        if (out && err) {
                *out = r->out;
                *err = r->err;
                r->out = r->err = (capbuf){0};
        }
        if (!ended) {
                r->abandoned = true;
                atomic_fetch_add(&stuck_readers, 1);
        }
        (void)pthread_mutex_unlock(&r->lock);
        if (!ended)
                (void)eventfd_write(r->stop_fd, 1);
        reader_unref(r);
}

/* The control loop's own fds: the peeking dups of the output pipes and
 * the write end of stdin. */
static void close_fds(const int peek[2], int in_fd) {
        for (int i = 0; i < 2; i++)
                if (peek[i] >= 0)
                        (void)close(peek[i]);
        if (in_fd >= 0)
                (void)close(in_fd);
}

int pump_run(const pump_io *io, const pump_target *t, cm_exec_result *ret, cm_err *err) {
        size_t cap = io->cap ? io->cap : NATIVE_OUTPUT_CAP;
        int in_fd = io->in_fd;
        size_t in_off = 0;
        bool exited = false, killed = false, cancelled = false, hard = !t->kill_hard, finished = false;
        int64_t start = cm_now_ms(), exit_at = 0, hard_at = 0;
        int64_t deadline = io->timeout_ms > 0 ? start + io->timeout_ms : 0;
        const cm_exec_watch *watch = io->watch;
        int64_t tick = watch && watch->every_ms > 0 ? start + watch->every_ms : 0;

        int peek[2] = {io->out_fd >= 0 ? fcntl(io->out_fd, F_DUPFD_CLOEXEC, 3) : -1,
                       io->err_fd >= 0 ? fcntl(io->err_fd, F_DUPFD_CLOEXEC, 3) : -1};
        reader *r = reader_start(io, cap, err);
        if (!r) {
                close_fds(peek, in_fd);
                t->kill(t->ctx);
                return -1;
        }
        if (in_fd >= 0 && io->in_len == 0) {
                (void)close(in_fd);
                in_fd = -1;
        }
        for (;;) {
                struct pollfd pf[5];
                nfds_t n = 0;
                int idx_in = -1, idx_pid = -1, idx_done;
                int64_t now = cm_now_ms(), wait = -1;

                if (exited && (finished || now >= exit_at + LINGER_MAX_MS ||
                               (now >= exit_at + LINGER_MS && !in_flight(r, peek))))
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
                idx_done = (int)n, pf[n++] = (struct pollfd){finished ? -1 : r->done_fd, POLLIN, 0};
                if (in_fd >= 0)
                        idx_in = (int)n, pf[n++] = (struct pollfd){in_fd, POLLOUT, 0};
                if (!exited)
                        idx_pid = (int)n, pf[n++] = (struct pollfd){t->pidfd, POLLIN, 0};
                /* wakes us; cm_cancelled() at the top says what it means */
                if (!killed && io->cancel && io->cancel->fd >= 0)
                        pf[n++] = (struct pollfd){io->cancel->fd, POLLIN, 0};
                if (exited)
                        wait = now < exit_at + LINGER_MS ? exit_at + LINGER_MS - now : LINGER_STEP_MS;
                if (!killed && deadline && (wait < 0 || deadline - now < wait))
                        wait = deadline - now;
                if (killed && !exited && !hard && (wait < 0 || hard_at - now < wait))
                        wait = hard_at - now;
                if (tick && (wait < 0 || tick - now < wait))
                        wait = tick > now ? tick - now : 0;
                if (poll(pf, n, wait < 0 ? -1 : (int)wait) < 0) {
                        if (errno == EINTR)
                                continue;
                        int e = errno;
                        reader_release(r, NULL, NULL);
                        close_fds(peek, in_fd);
                        t->kill(t->ctx);
                        return cm_err_sys(err, e, "poll on the sandbox's process");
                }
                if (pf[idx_done].revents)
                        finished = true;
                if (idx_in >= 0 && pf[idx_in].revents) {
                        /* POLLERR or POLLHUP without POLLOUT: the reader is
                         * gone.  Its own errno, not one a read left (an
                         * EAGAIN there kept a dead stdin polled, and this
                         * loop spinning, for good). */
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
                if (idx_pid >= 0 && pf[idx_pid].revents) {
                        exited = true;
                        exit_at = cm_now_ms();
                }
                if (tick && cm_now_ms() >= tick) {
                        (void)pthread_mutex_lock(&r->lock);
                        watch->output(watch->arg, 0, NULL, 0);
                        (void)pthread_mutex_unlock(&r->lock);
                        tick = cm_now_ms() + watch->every_ms;
                }
        }
        close_fds(peek, in_fd);
        capbuf out, errb;
        reader_release(r, &out, &errb);
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
