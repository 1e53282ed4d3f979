/* MCP over stdio: one JSON-RPC message per line on in_fd, replies on out_fd.
 *
 * The reader thread parses lines and handles quick messages itself; tools/call
 * goes to a small pool of worker threads so that a long call does not hold up
 * ping, cancellation or other calls.  A line longer than the message cap is
 * refused and skipped without being held in memory. */
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
#define MAX_WORKERS 64
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

/* ---- the worker pool ---------------------------------------------------- */

typedef struct job {
        json_t *msg;
        struct job *next;
} job;

typedef struct pool {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        pthread_cond_t drained; /* no job queued or running */
        job *head, **tail;
        unsigned idle;
        unsigned busy;
        unsigned n_threads;
        pthread_t threads[MAX_WORKERS];
        bool closing;
        mcp_session *session;
        mcp_sink *out;
} pool;

static void *worker(void *arg) {
        pool *p = arg;
        (void)pthread_mutex_lock(&p->lock);
        for (;;) {
                job *j;
                while (!p->head && !p->closing) {
                        p->idle++;
                        (void)pthread_cond_wait(&p->cond, &p->lock);
                        p->idle--;
                }
                if (!p->head)
                        break;
                j = p->head;
                p->head = j->next;
                if (!p->head)
                        p->tail = &p->head;
                p->busy++;
                (void)pthread_mutex_unlock(&p->lock);
                mcp_session_handle(p->session, j->msg, p->out);
                json_decref(j->msg);
                free(j);
                (void)pthread_mutex_lock(&p->lock);
                if (--p->busy == 0 && !p->head)
                        (void)pthread_cond_broadcast(&p->drained);
        }
        (void)pthread_mutex_unlock(&p->lock);
        return NULL;
}

static void pool_submit(pool *p, json_t *msg) {
        job *j = xcalloc(1, sizeof *j);
        j->msg = msg;
        (void)pthread_mutex_lock(&p->lock);
        *p->tail = j;
        p->tail = &j->next;
        /* Grow while every worker is busy, so a slow call never queues a
         * quick one behind it (up to the cap). */
        if (p->idle == 0 && p->n_threads < MAX_WORKERS &&
            pthread_create(&p->threads[p->n_threads], NULL, worker, p) == 0)
                p->n_threads++;
        (void)pthread_cond_signal(&p->cond);
        (void)pthread_mutex_unlock(&p->lock);
}

/* Wait up to `ms` for every queued and running job to finish. */
static void pool_drain(pool *p, int ms) {
        struct timespec deadline;
        (void)clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += ms / 1000;
        deadline.tv_nsec += (long)(ms % 1000) * 1000000;
        if (deadline.tv_nsec >= 1000000000) {
                deadline.tv_sec++;
                deadline.tv_nsec -= 1000000000;
        }
        (void)pthread_mutex_lock(&p->lock);
        while ((p->head || p->busy) && pthread_cond_timedwait(&p->drained, &p->lock, &deadline) == 0)
                ;
        (void)pthread_mutex_unlock(&p->lock);
}

static void pool_close(pool *p) {
        (void)pthread_mutex_lock(&p->lock);
        p->closing = true;
        (void)pthread_cond_broadcast(&p->cond);
        (void)pthread_mutex_unlock(&p->lock);
        for (unsigned i = 0; i < p->n_threads; i++)
                (void)pthread_join(p->threads[i], NULL);
}

/* ---- the reader --------------------------------------------------------- */

typedef struct reader {
        mcp_server *srv;
        mcp_session *session;
        mcp_sink *out;
        pool *pool;
        char *line;
        size_t len, cap, max;
        bool skipping; /* inside a line that was over the cap */
} reader;

static void handle_line(reader *r, const char *buf, size_t len) {
        json_t *msg;
        while (len > 0 && (buf[len - 1] == '\r' || buf[len - 1] == ' ' || buf[len - 1] == '\t'))
                len--;
        if (len == 0)
                return;
        msg = mcp_parse(buf, len, r->out);
        if (!msg)
                return;
        if (mcp_message_is_slow(msg))
                return pool_submit(r->pool, msg);
        mcp_session_handle(r->session, msg, r->out);
        json_decref(msg);
}

static void refuse_oversized(reader *r) {
        cleanup_free char *text = xasprintf(
                "message refused: it is longer than %zu bytes, the cap set by CONTAINER_MCP_MAX_MESSAGE_BYTES "
                "(or --max-message-bytes); send smaller messages, e.g. split file content across calls",
                r->max);
        mcp_send_error(r->out, NULL, MCP_INVALID_REQUEST, text);
        r->skipping = true;
        r->len = 0;
        free(r->line);
        r->line = NULL;
        r->cap = 0;
}

/* Feed bytes; complete lines are handled in order. */
static void feed(reader *r, const char *buf, size_t n) {
        while (n > 0) {
                const char *nl = memchr(buf, '\n', n);
                size_t take = nl ? (size_t)(nl - buf) : n;
                if (r->skipping) {
                        /* drop the rest of the oversized line */
                } else if (r->len + take > r->max) {
                        refuse_oversized(r);
                } else if (r->len == 0 && nl) {
                        handle_line(r, buf, take); /* the common case: no copy */
                } else {
                        if (r->len + take > r->cap) {
                                r->cap = (r->len + take) * 2 < r->max ? (r->len + take) * 2 : r->max;
                                r->line = xrealloc(r->line, r->cap);
                        }
                        memcpy(r->line + r->len, buf, take);
                        r->len += take;
                        if (nl) {
                                handle_line(r, r->line, r->len);
                                r->len = 0;
                        }
                }
                if (nl)
                        r->skipping = false;
                buf += take + (nl ? 1 : 0);
                n -= take + (nl ? 1 : 0);
        }
}

static int read_loop(reader *r, int in_fd, cm_err *err) {
        cleanup_free char *buf = xmalloc(READ_CHUNK);
        struct pollfd pfd[2] = {{in_fd, POLLIN, 0}, {cm_stop_fd(), POLLIN, 0}};
        for (;;) {
                ssize_t n;
                if (poll(pfd, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return cm_err_sys(err, errno, "stdio: poll");
                }
                if (pfd[1].revents)
                        return 0;
                n = read(in_fd, buf, READ_CHUNK);
                if (n < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                if (n < 0)
                        return cm_err_sys(err, errno, "stdio: read");
                if (n == 0)
                        break;
                feed(r, buf, (size_t)n);
        }
        if (r->len > 0 && !r->skipping)
                handle_line(r, r->line, r->len); /* a last line without newline */
        return 0;
}

static void no_ref(mcp_sink *s) { (void)s; }

int cm_stdio_serve(mcp_server *srv, int in_fd, int out_fd, cm_err *err) {
        out_sink out = {{out_send, no_ref, no_ref}, PTHREAD_MUTEX_INITIALIZER, out_fd, false};
        pool p = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
        pthread_condattr_t attr;
        reader r = {.srv = srv, .out = &out.base, .pool = &p, .max = mcp_server_max_message(srv)};
        int ret;

        p.tail = &p.head;
        (void)pthread_condattr_init(&attr);
        (void)pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        (void)pthread_cond_init(&p.drained, &attr);
        (void)pthread_condattr_destroy(&attr);
        p.out = &out.base;
        p.session = r.session = mcp_session_new(srv, &out.base);
        ret = read_loop(&r, in_fd, err);
        /* At EOF, calls in flight get a grace period to answer (a client may
         * close its end right after its last request), then are cancelled;
         * on a stop request they are cancelled at once. */
        if (!cm_stop_requested() && ret == 0)
                pool_drain(&p, EOF_GRACE_MS);
        mcp_session_cancel_all(p.session);
        pool_close(&p);
        (void)pthread_cond_destroy(&p.drained);
        free(r.line);
        mcp_session_unref(p.session);
        return ret;
}
