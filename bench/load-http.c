/* load-http.c: a raw HTTP/1.1 keep-alive client for MCP Streamable HTTP:
 * Content-Length, chunked or until-close bodies; JSON or SSE replies. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "load.h"

void parse_url(const char *s, struct url *u)
{
        const char *p, *slash, *colon;
        size_t hlen;

        if (strncmp(s, "http://", 7))
                die("URL must start with http://: %s", s);
        p = s + 7;
        slash = strchr(p, '/');
        if (!slash)
                slash = p + strlen(p);
        colon = memchr(p, ':', (size_t)(slash - p));
        hlen = (size_t)((colon ? colon : slash) - p);
        if (!hlen || hlen >= sizeof(u->host))
                die("bad host in URL: %s", s);
        memcpy(u->host, p, hlen);
        u->host[hlen] = '\0';
        (void)snprintf(u->port, sizeof(u->port), "%.*s", colon ? (int)(slash - colon - 1) : 2,
                       colon ? colon + 1 : "80");
        (void)snprintf(u->path, sizeof(u->path), "%s", *slash ? slash : "/");
}

int http_connect(struct http_conn *hc, char *err)
{
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
        struct timeval tv = { .tv_sec = IO_TIMEOUT_MS / 1000 };
        int one = 1, r;

        r = getaddrinfo(hc->url->host, hc->url->port, &hints, &ai);
        if (r) {
                set_err(err, "resolve %s: %s", hc->url->host, gai_strerror(r));
                return -1;
        }
        hc->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (hc->fd < 0 || connect(hc->fd, ai->ai_addr, ai->ai_addrlen) < 0) {
                set_err(err, "connect %s:%s: %s", hc->url->host, hc->url->port, strerror(errno));
                freeaddrinfo(ai);
                return -1;
        }
        freeaddrinfo(ai);
        if (setsockopt(hc->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
            setsockopt(hc->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
            setsockopt(hc->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
                set_err(err, "setsockopt: %s", strerror(errno));
                return -1;
        }
        hc->in.len = 0;
        return 0;
}

void http_disconnect(struct http_conn *hc)
{
        if (hc->fd >= 0)
                (void)close(hc->fd);
        hc->fd = -1;
}

/* Read more bytes into hc->in; 0 on EOF, -1 on error, else bytes read. */
static ssize_t http_fill(struct http_conn *hc, char *err)
{
        ssize_t n;

        buf_reserve(&hc->in, 65536);
        do
                n = recv(hc->fd, hc->in.data + hc->in.len, hc->in.cap - hc->in.len - 1, 0);
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                set_err(err, "recv: %s", errno == EAGAIN ? "no reply within 10 s" : strerror(errno));
                return -1;
        }
        hc->in.len += (size_t)n;
        hc->in.data[hc->in.len] = '\0';
        return n;
}

/* Wait until hc->in holds needle; return its offset. */
static ssize_t http_find(struct http_conn *hc, const char *needle, char *err)
{
        char *at;
        ssize_t n;

        while (!(at = memmem(hc->in.data ? hc->in.data : "", hc->in.len, needle, strlen(needle)))) {
                n = http_fill(hc, err);
                if (n <= 0) {
                        if (!n)
                                set_err(err, "connection closed mid-response");
                        return -1;
                }
        }
        return at - hc->in.data;
}

/* Move n bytes from hc->in to the body, reading more as needed. */
static int http_take(struct http_conn *hc, size_t n, struct buf *body, char *err)
{
        ssize_t r;

        while (hc->in.len < n) {
                r = http_fill(hc, err);
                if (r <= 0) {
                        if (!r)
                                set_err(err, "connection closed mid-body");
                        return -1;
                }
        }
        buf_append(body, hc->in.data, n);
        buf_consume(&hc->in, n);
        return 0;
}

static int http_read_chunked(struct http_conn *hc, struct buf *body, char *err)
{
        for (;;) {
                ssize_t eol = http_find(hc, "\r\n", err);
                unsigned long size;
                char *end;

                if (eol < 0)
                        return -1;
                size = strtoul(hc->in.data, &end, 16);
                if (end == hc->in.data) {
                        set_err(err, "bad chunk size line");
                        return -1;
                }
                buf_consume(&hc->in, (size_t)eol + 2);
                if (!size)
                        break;
                if (http_take(hc, size, body, err) < 0 || http_find(hc, "\r\n", err) != 0)
                        return -1;
                buf_consume(&hc->in, 2);
        }
        /* Trailers end with an empty line. */
        for (;;) {
                ssize_t eol = http_find(hc, "\r\n", err);

                if (eol < 0)
                        return -1;
                buf_consume(&hc->in, (size_t)eol + 2);
                if (!eol)
                        return 0;
        }
}

static int http_read_to_eof(struct http_conn *hc, struct buf *body, char *err)
{
        ssize_t n;

        while ((n = http_fill(hc, err)) > 0)
                ;
        if (n < 0)
                return -1;
        buf_append(body, hc->in.data ? hc->in.data : "", hc->in.len);
        hc->in.len = 0;
        return 0;
}

/* Header value if line is "Name: value" (case-insensitive name). */
static const char *header_value(const char *line, const char *name)
{
        size_t n = strlen(name);

        if (strncasecmp(line, name, n) || line[n] != ':')
                return NULL;
        line += n + 1;
        while (*line == ' ' || *line == '\t')
                line++;
        return line;
}

struct head_info {
        long content_length;    /* -1 if absent */
        bool chunked;
};

static void parse_header_line(const char *line, struct http_reply *r, struct head_info *hi)
{
        const char *v;

        if ((v = header_value(line, "Content-Length")))
                hi->content_length = strtol(v, NULL, 10);
        else if ((v = header_value(line, "Transfer-Encoding")))
                hi->chunked = strcasestr(v, "chunked") != NULL;
        else if ((v = header_value(line, "Content-Type")))
                r->sse = strncasecmp(v, "text/event-stream", 17) == 0;
        else if ((v = header_value(line, "Connection")))
                r->close = strcasestr(v, "close") != NULL;
        else if ((v = header_value(line, "Mcp-Session-Id")))
                (void)snprintf(r->session, sizeof(r->session), "%s", v);
}

/* Parse the status line and headers (NUL-separated lines in head). */
static int parse_head(char *head, struct http_reply *r, struct head_info *hi, char *err)
{
        char *line, *save = NULL;

        line = strtok_r(head, "\r\n", &save);
        if (!line || sscanf(line, "HTTP/1.%*d %d", &r->status) != 1) {
                set_err(err, "bad status line: %.80s", line ? line : "");
                return -1;
        }
        if (!strncmp(line, "HTTP/1.0", 8))
                r->close = true;
        while ((line = strtok_r(NULL, "\r\n", &save)))
                parse_header_line(line, r, hi);
        return 0;
}

static int http_read_reply(struct http_conn *hc, struct http_reply *r, char *err)
{
        struct head_info hi = { .content_length = -1 };
        ssize_t end = http_find(hc, "\r\n\r\n", err);
        char *head;
        int ret;

        if (end < 0)
                return -1;
        head = xcalloc(1, (size_t)end + 1);
        memcpy(head, hc->in.data, (size_t)end);
        buf_consume(&hc->in, (size_t)end + 4);
        ret = parse_head(head, r, &hi, err);
        free(head);
        if (ret < 0)
                return -1;
        r->body.len = 0;
        if (hi.chunked)
                return http_read_chunked(hc, &r->body, err);
        if (hi.content_length >= 0)
                return http_take(hc, (size_t)hi.content_length, &r->body, err);
        if (r->status == 204 || r->status == 304 || r->status / 100 == 1)
                return 0;
        r->close = true;
        return http_read_to_eof(hc, &r->body, err);
}

static void format_http_request(struct http_conn *hc, const struct buf *body, struct buf *out)
{
        char head[1024];
        int n;

        n = snprintf(head, sizeof(head),
                     "POST %s HTTP/1.1\r\nHost: %s:%s\r\n"
                     "Content-Type: application/json\r\n"
                     "Accept: application/json, text/event-stream\r\n"
                     "%s%s%s%s%s%s%s%s%s"
                     "Content-Length: %zu\r\n\r\n",
                     hc->url->path, hc->url->host, hc->url->port,
                     hc->url->token ? "Authorization: Bearer " : "", hc->url->token ? hc->url->token : "",
                     hc->url->token ? "\r\n" : "",
                     hc->session ? "Mcp-Session-Id: " : "", hc->session ? hc->session : "",
                     hc->session ? "\r\n" : "",
                     hc->version ? "MCP-Protocol-Version: " : "", hc->version ? hc->version : "",
                     hc->version ? "\r\n" : "", body->len);
        if (n < 0 || (size_t)n >= sizeof(head))
                die("HTTP request head too long");
        out->len = 0;
        buf_append(out, head, (size_t)n);
        buf_append(out, body->data, body->len);
}

/* One POST and its reply; reconnects first if the server closed. */
int http_post(struct http_conn *hc, const struct buf *body, struct http_reply *r,
                     uint64_t *ret_ns, struct tally *t, char *err)
{
        struct buf req = { 0 };
        uint64_t t0;
        int ret;

        if (hc->fd < 0) {
                if (http_connect(hc, err) < 0)
                        return -1;
                t->reconnects++;
        }
        format_http_request(hc, body, &req);
        r->status = 0;
        r->close = r->sse = false;
        r->session[0] = '\0';
        t0 = now_ns();
        ret = write_all(hc->fd, req.data, req.len, err);
        if (ret == 0)
                ret = http_read_reply(hc, r, err);
        if (ret_ns)
                *ret_ns = now_ns() - t0;
        buf_free(&req);
        if (ret < 0 || r->close)
                http_disconnect(hc);
        return ret;
}

/* The JSON-RPC message with this id in an SSE body ("data:" lines). */
static json_t *sse_find_reply(const char *body, long id)
{
        const char *p = body;
        struct buf data = { 0 };
        json_t *found = NULL;

        while (*p && !found) {
                const char *eol = strchr(p, '\n');
                size_t n = eol ? (size_t)(eol - p) : strlen(p);

                if (n && p[n - 1] == '\r')
                        n--;
                if (n >= 5 && !strncmp(p, "data:", 5)) {
                        size_t skip = 5 + (n > 5 && p[5] == ' ');

                        if (data.len)
                                buf_append(&data, "\n", 1);
                        buf_append(&data, p + skip, n - skip);
                }
                if (!n || !eol) {       /* end of an event */
                        json_t *msg = data.len ? json_loadb(data.data, data.len, 0, NULL) : NULL;

                        if (msg && reply_has_id(msg, id))
                                found = msg;
                        else
                                json_decref(msg);
                        data.len = 0;
                }
                p = eol ? eol + 1 : p + n;
        }
        buf_free(&data);
        return found;
}

/* Decode the reply to request id; counts HTTP and framing errors. */
json_t *http_reply_json(struct http_reply *r, long id, struct tally *t)
{
        char msg[ERR_LEN];
        json_t *j;

        if (r->status != 200) {
                set_err(msg, "status %d: %.120s", r->status, r->body.data ? r->body.data : "");
                tally_error(t, ERR_HTTP, msg);
                return NULL;
        }
        if (r->sse)
                j = sse_find_reply(r->body.data ? r->body.data : "", id);
        else
                j = json_loadb(r->body.data ? r->body.data : "", r->body.len, 0, NULL);
        if (!j || !reply_has_id(j, id)) {
                set_err(msg, "no JSON-RPC reply with id %ld in body: %.80s", id,
                        r->body.data ? r->body.data : "");
                tally_error(t, ERR_REPLY, msg);
                json_decref(j);
                return NULL;
        }
        return j;
}
