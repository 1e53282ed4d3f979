/* HTTP/1.1 over a Unix socket, the client side (see client.h). */
#include "daemon/client.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/cleanup.h"

/* Headers of one response, and a message (a JSON body, one event): what a
 * daemon of ours sends is far below both; the caps keep a confused peer
 * from growing the proxy without bound. */
#define MAX_HEAD (64u << 10)
#define MAX_BODY ((size_t)1 << 30)

int cm_uconn_open(cm_uconn *c, const char *path, cm_err *err) {
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        struct ucred cred = {0};
        socklen_t len = sizeof cred;
        int fd;
        if (strlen(path) >= sizeof a.sun_path)
                return cm_err_set(err, ENAMETOOLONG,
                                  "socket path %s is longer than %zu bytes: choose a shorter --socket-path", path,
                                  sizeof a.sun_path - 1),
                       -ENAMETOOLONG;
        memcpy(a.sun_path, path, strlen(path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return cm_err_sys(err, errno, "socket"), -errno;
        if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
                int e = errno;
                (void)close(fd);
                return cm_err_sys(err, e, "connecting to the daemon's socket %s", path), -e;
        }
        /* The server must be ours (or root's): in a shared directory another
         * user could bind the path first and read every message, the token
         * included. */
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
            (cred.uid != geteuid() && cred.uid != 0)) {
                (void)close(fd);
                return cm_err_set(err, EPERM,
                                  "the socket %s is served by uid %u, not by this user (uid %u): refusing to talk "
                                  "to it; remove it or choose another --socket-path",
                                  path, (unsigned)cred.uid, (unsigned)geteuid()),
                       -EPERM;
        }
        cm_uconn_close(c);
        c->fd = fd;
        c->reused = false;
        c->off = c->len = 0;
        return 0;
}

void cm_uconn_close(cm_uconn *c) {
        if (c->fd >= 0)
                (void)close(c->fd);
        c->fd = -1;
        free(c->buf);
        c->buf = NULL;
        c->off = c->len = c->cap = 0;
}

static int send_all(int fd, const char *p, size_t n) {
        while (n > 0) {
                ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return -errno;
                p += w;
                n -= (size_t)w;
        }
        return 0;
}

static int send_request(cm_uconn *c, const cm_ureq *q) {
        cleanup_free char *head = NULL;
        char auth[400] = "", sess[200] = "", ver[80] = "", extra[300] = "", body[96] = "";
        int r;
        if (q->token)
                (void)snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", q->token);
        if (q->session)
                (void)snprintf(sess, sizeof sess, "Mcp-Session-Id: %s\r\n", q->session);
        if (q->version)
                (void)snprintf(ver, sizeof ver, "MCP-Protocol-Version: %s\r\n", q->version);
        if (q->extra)
                (void)snprintf(extra, sizeof extra, "%s\r\n", q->extra);
        if (q->body)
                (void)snprintf(body, sizeof body, "Content-Type: application/json\r\nContent-Length: %zu\r\n",
                               q->len);
        head = xasprintf("%s %s HTTP/1.1\r\nHost: localhost\r\nAccept: %s\r\n%s%s%s%s%s\r\n", q->method, q->path,
                         q->accept ? q->accept : "application/json, text/event-stream", auth, sess, ver, extra, body);
        if ((r = send_all(c->fd, head, strlen(head))) < 0)
                return r;
        return q->body && q->len ? send_all(c->fd, q->body, q->len) : 0;
}

/* Read more into the buffer.  >0 bytes read, 0 at EOF, -errno. */
static ssize_t fill(cm_uconn *c) {
        ssize_t n;
        if (c->off > 0 && c->off == c->len)
                c->off = c->len = 0;
        if (c->len == c->cap) {
                if (c->off > 0) {
                        memmove(c->buf, c->buf + c->off, c->len - c->off);
                        c->len -= c->off;
                        c->off = 0;
                }
                if (c->len == c->cap) {
                        c->cap = c->cap ? c->cap * 2 : 16384;
                        c->buf = xrealloc(c->buf, c->cap + 1);
                }
        }
        do
                n = read(c->fd, c->buf + c->len, c->cap - c->len);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        c->len += (size_t)n;
        return n;
}

/* Make at least `need` unread bytes available.  0, -EPIPE at EOF, -errno. */
static int want(cm_uconn *c, size_t need) {
        while (c->len - c->off < need) {
                ssize_t n = fill(c);
                if (n == 0)
                        return -EPIPE;
                if (n < 0)
                        return (int)n;
        }
        return 0;
}

/* The offset past the next LF from c->off, reading as needed; 0 with *ret
 * set at EOF, on an error, or past `max` bytes. */
static size_t line_end(cm_uconn *c, size_t max, int *ret) {
        size_t rel = 0; /* from c->off: fill() may move the data */
        for (;;) {
                char *nl = c->buf ? memchr(c->buf + c->off + rel, '\n', c->len - c->off - rel) : NULL;
                ssize_t n;
                if (nl)
                        return (size_t)(nl - c->buf) + 1;
                rel = c->len - c->off;
                if (rel > max)
                        return *ret = -EMSGSIZE, 0;
                n = fill(c);
                if (n <= 0) {
                        *ret = n == 0 ? -EPIPE : (int)n;
                        return 0;
                }
        }
}

typedef struct body {
        enum { B_LENGTH, B_CHUNKED, B_EOF } kind;
        size_t left;
        bool keep;
} body;

static bool header_is(const char *line, const char *name, const char **ret_value) {
        size_t n = strlen(name);
        if (strncasecmp(line, name, n) != 0 || line[n] != ':')
                return false;
        line += n + 1;
        while (*line == ' ' || *line == '\t')
                line++;
        *ret_value = line;
        return true;
}

static int read_head(cm_uconn *c, cm_uresp *ret, body *b) {
        int r = 0;
        bool first = true;
        b->kind = B_EOF;
        b->keep = true;
        for (;;) {
                size_t end = line_end(c, MAX_HEAD, &r);
                char *line = c->buf + c->off;
                const char *v;
                if (!end)
                        return r;
                c->buf[end - 1] = '\0';
                if (end - 2 >= c->off && c->buf[end - 2] == '\r')
                        c->buf[end - 2] = '\0';
                c->off = end;
                if (first) {
                        if (sscanf(line, "HTTP/1.%*d %d", &ret->status) != 1)
                                return -EPROTO;
                        first = false;
                } else if (!*line) {
                        return 0;
                } else if (header_is(line, "Content-Length", &v)) {
                        b->kind = B_LENGTH;
                        b->left = strtoull(v, NULL, 10);
                } else if (header_is(line, "Transfer-Encoding", &v) && strcasestr(v, "chunked")) {
                        b->kind = B_CHUNKED;
                } else if (header_is(line, "Content-Type", &v)) {
                        ret->events = strncasecmp(v, "text/event-stream", 17) == 0;
                } else if (header_is(line, "Mcp-Session-Id", &v)) {
                        (void)snprintf(ret->session, sizeof ret->session, "%s", v);
                } else if (header_is(line, "Connection", &v) && strcasestr(v, "close")) {
                        b->keep = false;
                }
        }
}

/* What the body's bytes become: one message, or events. */
typedef struct sink {
        cm_umsg_fn fn;
        void *arg;
        const cm_uresp *resp;
        char *acc; /* the JSON body, or the current line of the stream */
        size_t len, cap;
        char *data; /* an event's data so far */
        size_t dlen, dcap;
} sink;

static void append(char **p, size_t *len, size_t *cap, const char *s, size_t n) {
        if (*len + n + 1 > *cap) {
                *cap = (*len + n + 1) * 2;
                *p = xrealloc(*p, *cap);
        }
        memcpy(*p + *len, s, n);
        *len += n;
        (*p)[*len] = '\0';
}

/* One line of an event stream (no newline): data lines gather, a blank one
 * ends the event; ids, event names and comments are of no use here. */
static int sse_line(sink *k, char *line, size_t n) {
        if (n && line[n - 1] == '\r')
                line[--n] = '\0';
        if (n == 0) {
                int r = 0;
                if (k->dlen)
                        r = k->fn(k->arg, k->resp, k->data, k->dlen);
                k->dlen = 0;
                return r;
        }
        if (n >= 5 && memcmp(line, "data:", 5) == 0) {
                size_t skip = n > 5 && line[5] == ' ' ? 6 : 5;
                if (k->dlen)
                        append(&k->data, &k->dlen, &k->dcap, "\n", 1);
                if (k->dlen + n > MAX_BODY)
                        return -EMSGSIZE;
                append(&k->data, &k->dlen, &k->dcap, line + skip, n - skip);
        }
        return 0;
}

static int feed(sink *k, const char *p, size_t n) {
        if (!k->resp->events) {
                if (k->len + n > MAX_BODY)
                        return -EMSGSIZE;
                append(&k->acc, &k->len, &k->cap, p, n);
                return 0;
        }
        while (n > 0) {
                const char *nl = memchr(p, '\n', n);
                size_t take = nl ? (size_t)(nl - p) : n;
                int r;
                if (k->len + take > MAX_BODY)
                        return -EMSGSIZE;
                append(&k->acc, &k->len, &k->cap, p, take);
                if (!nl)
                        return 0;
                r = sse_line(k, k->acc, k->len);
                k->len = 0;
                if (r < 0)
                        return r;
                p += take + 1;
                n -= take + 1;
        }
        return 0;
}

/* Pass what is buffered, up to `max` bytes, to the sink. */
static int pass(cm_uconn *c, sink *k, size_t max) {
        size_t n = c->len - c->off < max ? c->len - c->off : max;
        int r = feed(k, c->buf + c->off, n);
        c->off += n;
        return r < 0 ? r : (int)n;
}

static int read_chunked(cm_uconn *c, sink *k) {
        for (;;) {
                int r = 0;
                size_t end = line_end(c, 1024, &r), size;
                if (!end)
                        return r;
                size = strtoull(c->buf + c->off, NULL, 16);
                c->off = end;
                if (size == 0) { /* trailers, then a blank line */
                        for (;;) {
                                end = line_end(c, MAX_HEAD, &r);
                                if (!end)
                                        return r;
                                bool blank = end - c->off <= 2;
                                c->off = end;
                                if (blank)
                                        return 0;
                        }
                }
                while (size > 0) {
                        if ((r = want(c, 1)) < 0 || (r = pass(c, k, size)) < 0)
                                return r;
                        size -= (size_t)r;
                }
                if ((r = want(c, 2)) < 0)
                        return r;
                c->off += 2; /* the chunk's CRLF */
        }
}

static int read_body(cm_uconn *c, body *b, sink *k) {
        int r;
        switch (b->kind) {
        case B_LENGTH:
                if (b->left > MAX_BODY)
                        return -EMSGSIZE;
                while (b->left > 0) {
                        if ((r = want(c, 1)) < 0 || (r = pass(c, k, b->left)) < 0)
                                return r;
                        b->left -= (size_t)r;
                }
                return 0;
        case B_CHUNKED: return read_chunked(c, k);
        case B_EOF:
        default:
                b->keep = false;
                for (;;) {
                        ssize_t n = c->off < c->len ? 1 : fill(c);
                        if (n == 0)
                                return 0;
                        if (n < 0)
                                return (int)n;
                        if ((r = pass(c, k, SIZE_MAX)) < 0)
                                return r;
                }
        }
}

static int exchange(cm_uconn *c, const cm_ureq *q, sink *k, cm_uresp *ret, bool *ret_none) {
        body b;
        int r;
        *ret_none = false;
        if ((r = send_request(c, q)) < 0) {
                *ret_none = true;
                return r;
        }
        if ((r = read_head(c, ret, &b)) < 0) {
                *ret_none = ret->status == 0;
                return r;
        }
        if ((r = read_body(c, &b, k)) < 0)
                return r;
        if (!ret->events && k->len && (r = k->fn(k->arg, ret, k->acc, k->len)) < 0)
                return r;
        if (!b.keep)
                cm_uconn_close(c);
        return 0;
}

int cm_uhttp(cm_uconn *c, const char *path, const cm_ureq *q, cm_umsg_fn fn, void *arg, cm_uresp *ret,
             cm_err *err) {
        for (int attempt = 0;; attempt++) {
                sink k = {.fn = fn, .arg = arg, .resp = ret};
                bool none, reused;
                int r;
                *ret = (cm_uresp){0};
                if (c->fd < 0 && (r = cm_uconn_open(c, path, err)) < 0)
                        return r;
                reused = c->reused;
                r = exchange(c, q, &k, ret, &none);
                free(k.acc);
                free(k.data);
                if (r >= 0) {
                        if (c->fd >= 0)
                                c->reused = true;
                        return 0;
                }
                cm_uconn_close(c);
                if (none && reused && attempt == 0)
                        continue; /* the server had closed the kept connection */
                if (r == -EMSGSIZE)
                        return cm_err_set(err, EMSGSIZE, "the daemon at %s sent a response too large to read", path),
                               r;
                if (r == -EPROTO)
                        return cm_err_set(err, EPROTO, "%s does not answer as container-mcp's HTTP does", path), r;
                return cm_err_sys(err, -r, "the daemon at %s closed the connection", path), r;
        }
}
