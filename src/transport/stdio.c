/* MCP over stdio: one JSON-RPC message per line on in_fd, replies on out_fd.
 *
 * Leader/followers: one thread at a time holds the reader role.  It reads
 * and parses a message and, when the message is quick (anything but
 * tools/call), answers it itself and reads on.  For a tool call it first
 * accepts the message with the session, which registers the call, so a
 * notifications/cancelled right behind it always finds it; then it hands the
 * reader role to an idle thread (or a new one) and runs the call itself.  So
 * a quick message costs no thread hand-off, and a long call never holds up
 * ping, cancellation or other calls.  Tools marked quick (they never block)
 * are answered by the reader like any quick message.
 *
 * Reading never stops: when MAX_RUNNING calls already run, the reader keeps
 * the role and queues the call; a thread that finishes a call takes the next
 * waiting one.  The queue is bounded; a call beyond it is answered at once
 * with an error that says so.
 *
 * The server answers every call it gives up on itself: on a stop request, and
 * at EOF once the grace period is over, the calls still running or waiting
 * get a "server shutting down" error (mcp_session_abandon).  A call the
 * client cancelled gets nothing, as the spec says.
 *
 * A line longer than the message cap is refused as soon as it passes the cap
 * and the rest of it is skipped: memory stays bounded by the cap. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "transport/transport.h"
#include "util/cleanup.h"
#include "util/json.h"

#define READ_CHUNK (64 * 1024)
/* Tool calls running at once; the threads are these and the reader. */
#define MAX_RUNNING 64
/* Calls waiting for a thread, and the bytes of their messages (one message
 * always fits): past either, a call is refused at once. */
#define MAX_WAITING 1024
#define MAX_WAITING_BYTES (64u << 20)
/* Closing stdin is how an MCP client asks a stdio server to shut down; calls
 * still running get this long to answer before they are cancelled. */
#define EOF_GRACE_MS 1000

typedef struct out_sink {
        mcp_sink base;
        pthread_mutex_t lock;
        int fd;
        bool dead;
} out_sink;

static int write_all(int fd, struct iovec *iov, int n) {
        while (n > 0) {
                ssize_t w = writev(fd, iov, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return -errno;
                while (n > 0 && (size_t)w >= iov->iov_len) {
                        w -= (ssize_t)iov->iov_len;
                        iov++;
                        n--;
                }
                if (n > 0) {
                        iov->iov_base = (char *)iov->iov_base + w;
                        iov->iov_len -= (size_t)w;
                }
        }
        return 0;
}

static int out_send(mcp_sink *self, const char *json, size_t len) {
        out_sink *o = (out_sink *)self;
        struct iovec iov[2] = {{(void *)json, len}, {(void *)"\n", 1}};
        int r = -EPIPE;
        (void)pthread_mutex_lock(&o->lock);
        if (!o->dead) {
                r = write_all(o->fd, iov, 2);
                o->dead = r < 0;
        }
        (void)pthread_mutex_unlock(&o->lock);
        return r;
}

typedef struct waiting {
        mcp_job *job;
        size_t bytes;
        struct waiting *next;
} waiting;

typedef struct stdio_srv {
        pthread_mutex_t lock;
        pthread_cond_t follow;  /* followers wait here for the reader role */
        pthread_cond_t drained; /* no call running or waiting */
        bool reader_taken;
        bool done; /* input is over: EOF, a read error or a stop request */
        unsigned idle, busy, n_threads;
        pthread_t threads[MAX_RUNNING];
        waiting *head, **tail; /* calls accepted while every thread was busy */
        size_t n_waiting, waiting_bytes;

        /* The reader's state, touched only by the thread holding the role. */
        int in_fd;
        char *buf;
        size_t start, len, cap; /* pending bytes are buf[start, len) */
        size_t max;
        size_t msg_len; /* length of the line of the last message returned */
        bool skipping;  /* inside a line that was over the cap */
        bool eof;
        cm_err read_err;

        mcp_server *srv;
        mcp_session *session;
        mcp_sink *out;
} stdio_srv;

/* ---- reading one message ------------------------------------------------ */

static json_t *parse_line(stdio_srv *s, const char *line, size_t n) {
        s->msg_len = n;
        while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
                n--;
        return n ? mcp_parse(line, n, s->out) : NULL;
}

static void refuse_oversized(stdio_srv *s) {
        cleanup_free char *text = xasprintf(
                "message refused: it is longer than %zu bytes, the cap set by CONTAINER_MCP_MAX_MESSAGE_BYTES "
                "(or --max-message-bytes); send smaller messages, e.g. split file content across calls",
                s->max);
        mcp_send_error(s->out, NULL, MCP_INVALID_REQUEST, text);
}

/* Drop a long line's bytes and give their memory back. */
static void release_buffer(stdio_srv *s) {
        free(s->buf);
        s->buf = NULL;
        s->cap = s->start = s->len = 0;
}

/* Read more bytes into the buffer; false at EOF, on error or on a stop. */
static bool fill(stdio_srv *s) {
        struct pollfd pfd[2] = {{s->in_fd, POLLIN, 0}, {cm_stop_fd(), POLLIN, 0}};
        ssize_t n;
        if (s->start > 0) {
                memmove(s->buf, s->buf + s->start, s->len - s->start);
                s->len -= s->start;
                s->start = 0;
        }
        if (s->cap - s->len < READ_CHUNK / 2) {
                s->cap = s->cap ? s->cap * 2 : READ_CHUNK;
                if (s->cap > s->max + READ_CHUNK)
                        s->cap = s->max + READ_CHUNK;
                s->buf = xrealloc(s->buf, s->cap);
        }
        for (;;) {
                if (poll(pfd, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return cm_err_sys(&s->read_err, errno, "stdio: poll"), false;
                }
                if (pfd[1].revents)
                        return false;
                n = read(s->in_fd, s->buf + s->len, s->cap - s->len);
                if (n < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                if (n < 0)
                        return cm_err_sys(&s->read_err, errno, "stdio: read"), false;
                s->eof = n == 0;
                s->len += (size_t)n;
                return n > 0;
        }
}

/* The next message, or NULL when the input is over.  Blank lines are
 * skipped; malformed and oversized ones are answered with an error here. */
static json_t *next_message(stdio_srv *s) {
        for (;;) {
                char *line = s->buf + s->start;
                char *nl = s->len > s->start ? memchr(line, '\n', s->len - s->start) : NULL;
                size_t n = nl ? (size_t)(nl - line) : s->len - s->start;
                json_t *m = NULL;

                if (nl) {
                        s->start += n + 1;
                        if (s->skipping)
                                s->skipping = false;
                        else if (n > s->max)
                                refuse_oversized(s);
                        else
                                m = parse_line(s, line, n);
                        if (m)
                                return m;
                        continue;
                }
                if (s->skipping) {
                        s->start = s->len = 0; /* still inside the long line */
                } else if (n > s->max) {
                        refuse_oversized(s);
                        release_buffer(s);
                        s->skipping = true;
                }
                if (s->eof || !fill(s)) {
                        /* A last line without a newline still counts. */
                        if (s->eof && !s->skipping && s->len > s->start) {
                                m = parse_line(s, s->buf + s->start, s->len - s->start);
                                s->start = s->len;
                                if (m)
                                        return m;
                        }
                        return NULL;
                }
        }
}

/* ---- calls waiting for a thread ----------------------------------------- */

/* Called with the lock held: queue `j`, or false when the queue is full. */
static bool enqueue(stdio_srv *s, mcp_job *j, size_t bytes) {
        waiting *w;
        if (s->n_waiting >= MAX_WAITING || (s->n_waiting > 0 && s->waiting_bytes + bytes > MAX_WAITING_BYTES))
                return false;
        w = xmalloc(sizeof *w);
        *w = (waiting){j, bytes, NULL};
        *s->tail = w;
        s->tail = &w->next;
        s->n_waiting++;
        s->waiting_bytes += bytes;
        return true;
}

/* Called with the lock held: the oldest waiting call, or NULL. */
static mcp_job *dequeue(stdio_srv *s) {
        waiting *w = s->head;
        mcp_job *j;
        if (!w)
                return NULL;
        s->head = w->next;
        if (!s->head)
                s->tail = &s->head;
        s->n_waiting--;
        s->waiting_bytes -= w->bytes;
        j = w->job;
        free(w);
        return j;
}

/* Called with the lock held, which it releases. */
static void wait_or_refuse(stdio_srv *s, mcp_job *j, size_t bytes) {
        size_t n = s->n_waiting;
        cleanup_free char *text = NULL;
        bool queued = enqueue(s, j, bytes);
        (void)pthread_mutex_unlock(&s->lock);
        if (queued)
                return;
        text = xasprintf("tools/call refused: every worker is busy (at most %d calls run at once) and %zu more "
                         "calls are waiting, the most the stdio transport holds; wait for some to finish or cancel "
                         "some (notifications/cancelled), then send it again",
                         MAX_RUNNING, n);
        mcp_job_refuse(j, MCP_INTERNAL_ERROR, text);
}

/* ---- leader/followers --------------------------------------------------- */

static void *follower_main(void *arg);

/* Called with the lock held, by a reader about to run a long call: true when
 * an idle or new thread takes over reading. */
static bool pass_reader_role(stdio_srv *s) {
        if (s->idle > 0)
                (void)pthread_cond_signal(&s->follow);
        else if (s->n_threads < MAX_RUNNING &&
                 pthread_create(&s->threads[s->n_threads], NULL, follower_main, s) == 0)
                s->n_threads++;
        else
                return false;
        s->reader_taken = false;
        return true;
}

/* Run `j`, then the calls that wait for a thread; returns with the lock held. */
static void work(stdio_srv *s, mcp_job *j) {
        for (;;) {
                mcp_job_run(j);
                (void)pthread_mutex_lock(&s->lock);
                j = dequeue(s);
                if (!j)
                        break;
                (void)pthread_mutex_unlock(&s->lock);
        }
        if (--s->busy == 0)
                (void)pthread_cond_broadcast(&s->drained);
}

/* Wait up to `ms` for the calls running or waiting to finish. */
static void drain(stdio_srv *s, int ms) {
        struct timespec deadline;
        (void)clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += ms / 1000;
        deadline.tv_nsec += (long)(ms % 1000) * 1000000;
        if (deadline.tv_nsec >= 1000000000) {
                deadline.tv_sec++;
                deadline.tv_nsec -= 1000000000;
        }
        (void)pthread_mutex_lock(&s->lock);
        while (s->busy && pthread_cond_timedwait(&s->drained, &s->lock, &deadline) == 0)
                ;
        (void)pthread_mutex_unlock(&s->lock);
}

#define LOST_WORK "the call was stopped and may have done part of its work; check what it changed, then call again"

/* The input is over.  A stop request ends the calls at once; EOF (how an MCP
 * client asks a stdio server to shut down) first gives them EOF_GRACE_MS to
 * answer, as a client may close its end right after its last request.  Either
 * way the calls still running or waiting then get an error reply, not
 * silence.  Runs in the reader, which may not be the main thread: the main
 * thread may be in one of those calls.  Returns with the lock held. */
static void end_of_input(stdio_srv *s) {
        cleanup_free char *why = NULL;
        (void)pthread_mutex_lock(&s->lock);
        s->done = true;
        s->reader_taken = false;
        (void)pthread_cond_broadcast(&s->follow);
        (void)pthread_mutex_unlock(&s->lock);

        if (cm_stop_requested())
                why = xstrdup("server shutting down: it was asked to stop (SIGTERM, SIGINT or SIGHUP); " LOST_WORK
                              " once the server runs again");
        else if (s->read_err.code)
                why = xasprintf("server shutting down: reading stdin failed (%s); " LOST_WORK
                                " once the server runs again",
                                s->read_err.msg);
        else {
                drain(s, EOF_GRACE_MS);
                why = xasprintf("server shutting down: the client closed stdin and the call did not finish within "
                                "%d ms; " LOST_WORK " on a new server, and keep stdin open until the results are in",
                                EOF_GRACE_MS);
        }
        mcp_session_abandon(s->session, MCP_INTERNAL_ERROR, why);
        (void)pthread_mutex_lock(&s->lock);
}

/* Read and answer as the reader; returns (lock held) after passing the role
 * on and running one long call (and any that waited), or when the input is
 * over. */
static void lead(stdio_srv *s) {
        for (;;) {
                json_t *m = next_message(s);
                mcp_job *j;
                if (!m)
                        return end_of_input(s);
                if (!mcp_message_is_slow(m) || mcp_message_is_quick_call(s->srv, m)) {
                        mcp_session_handle(s->session, m, s->out);
                        json_decref(m);
                        continue;
                }
                /* Registered before the next message is read: its cancel,
                 * however soon it follows, finds it. */
                j = mcp_session_accept(s->session, m, s->out);
                json_decref(m);
                (void)pthread_mutex_lock(&s->lock);
                if (pass_reader_role(s) || s->busy == 0) {
                        /* With no thread to take over (none can be created)
                         * and none busy to take it from a queue, the reader
                         * runs the call and reads on after it. */
                        s->reader_taken = false;
                        s->busy++;
                        (void)pthread_mutex_unlock(&s->lock);
                        return work(s, j);
                }
                wait_or_refuse(s, j, s->msg_len);
        }
}

static void serve_loop(stdio_srv *s) {
        (void)pthread_mutex_lock(&s->lock);
        while (!s->done) {
                if (s->reader_taken) {
                        s->idle++;
                        (void)pthread_cond_wait(&s->follow, &s->lock);
                        s->idle--;
                        continue;
                }
                s->reader_taken = true;
                (void)pthread_mutex_unlock(&s->lock);
                lead(s); /* returns with the lock held */
        }
        (void)pthread_mutex_unlock(&s->lock);
}

static void *follower_main(void *arg) {
        serve_loop(arg);
        return NULL;
}

static void no_ref(mcp_sink *s) { (void)s; }

int cm_stdio_serve(mcp_server *srv, int in_fd, int out_fd, cm_err *err) {
        out_sink out = {{out_send, no_ref, no_ref, false}, PTHREAD_MUTEX_INITIALIZER, out_fd, false};
        stdio_srv s = {.lock = PTHREAD_MUTEX_INITIALIZER, .follow = PTHREAD_COND_INITIALIZER};
        pthread_condattr_t attr;
        mcp_job *j;
        unsigned n;

        (void)pthread_condattr_init(&attr);
        (void)pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        (void)pthread_cond_init(&s.drained, &attr);
        (void)pthread_condattr_destroy(&attr);
        s.tail = &s.head;
        s.srv = srv;
        s.in_fd = in_fd;
        s.max = mcp_server_max_message(srv);
        s.out = &out.base;
        s.session = mcp_session_new(srv, &out.base);

        serve_loop(&s); /* this thread reads first; returns once input is over */

        (void)pthread_mutex_lock(&s.lock);
        n = s.n_threads; /* no thread is created once done is set */
        (void)pthread_mutex_unlock(&s.lock);
        for (unsigned i = 0; i < n; i++)
                (void)pthread_join(s.threads[i], NULL);
        /* Threads take every waiting call before they end; this is a guard. */
        while ((j = dequeue(&s)))
                mcp_job_run(j);
        (void)pthread_cond_destroy(&s.drained);
        free(s.buf);
        mcp_session_unref(s.session);
        if (s.read_err.code) {
                if (err)
                        *err = s.read_err;
                return -s.read_err.code;
        }
        return 0;
}
