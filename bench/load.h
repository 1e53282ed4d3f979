/* load.h: the pieces of mcp-load (see mcp-load.c and bench/README.md).
 *
 *   load-util.c   allocation, clocks, buffers, latency samples, /proc figures
 *   load-rpc.c    JSON-RPC messages and the checks of a tools/call reply
 *   load-stdio.c  a server spawned with its stdin/stdout as the transport
 *   load-http.c   a raw HTTP/1.1 keep-alive client for Streamable HTTP
 *
 * Transport failures return -1 and leave a message in err[ERR_LEN]; reply
 * errors are counted in a struct tally.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#define PROTOCOL_VERSION "2025-11-25"
#define IO_TIMEOUT_MS 10000
#define ERR_LEN 256

/* load-util.c */

struct buf {
        char *data;
        size_t len;
        size_t cap;
};

struct samples {
        uint64_t *ns;
        size_t n;
        size_t cap;
};

void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void set_err(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void *xrealloc(void *p, size_t n);
void *xcalloc(size_t n, size_t size);
char *xstrdup(const char *s);
uint64_t now_ns(void);
void sleep_ms(long ms);
int write_all(int fd, const char *p, size_t n, char *err);
long parse_long(const char *s, const char *what, long min);
void buf_reserve(struct buf *b, size_t extra);
void buf_append(struct buf *b, const char *p, size_t n);
void buf_consume(struct buf *b, size_t n);
void buf_free(struct buf *b);
void samples_add(struct samples *s, uint64_t ns);
void samples_merge(struct samples *into, const struct samples *from);
int cmp_u64(const void *a, const void *b);
double percentile_us(const struct samples *s, double q);
long rss_kib(pid_t pid);
long long cpu_ticks(pid_t pid);
double self_cpu_s(void);

/* load-rpc.c */

enum err_kind { ERR_IO, ERR_HTTP, ERR_RPC, ERR_TOOL, ERR_REPLY, ERR_KINDS };

extern const char *const err_names[ERR_KINDS];

/* Per-client counters and the first error's message. */
struct tally {
        struct samples lat;
        long errors[ERR_KINDS];
        long reconnects;
        long skipped;       /* messages that were not the awaited reply */
        char first_err[ERR_LEN + 16];
};

void tally_error(struct tally *t, enum err_kind k, const char *msg);
void format_initialize(struct buf *out, long id);
void format_initialized(struct buf *out);
char *call_tail(const char *tool, json_t *args);
void format_call(struct buf *out, long id, const char *tail);
bool reply_has_id(json_t *msg, long id);
int check_call_reply(json_t *msg, const char *text, struct tally *t);
int check_expect(json_t *msg, json_t *expect, struct tally *t);
const char *reply_result_id(json_t *msg);
char *negotiated_version(json_t *msg);

/* load-stdio.c */

struct child {
        pid_t pid;
        int to;             /* server's stdin */
        int from;           /* server's stdout */
        struct buf in;      /* bytes read, not yet consumed */
};

int child_spawn(struct child *c, char **cmd, char *err);
json_t *child_roundtrip(struct child *c, struct buf *req, long id, uint64_t *ret_ns,
                        struct tally *t, char *err);
int child_notify(struct child *c, struct buf *req, char *err);
void child_stop(struct child *c);

/* load-http.c */

struct url {
        char host[256];
        char port[16];
        char path[512];
        const char *token;      /* bearer token, or NULL */
};

struct http_conn {
        const struct url *url;
        int fd;
        struct buf in;          /* bytes read, not yet consumed */
        char *session;          /* Mcp-Session-Id */
        char *version;          /* MCP-Protocol-Version */
};

struct http_reply {
        int status;
        bool close;             /* server said Connection: close */
        bool sse;               /* Content-Type: text/event-stream */
        char session[256];
        struct buf body;
};

void parse_url(const char *s, struct url *u);
int http_connect(struct http_conn *hc, char *err);
void http_disconnect(struct http_conn *hc);
int http_post(struct http_conn *hc, const struct buf *body, struct http_reply *r,
              uint64_t *ret_ns, struct tally *t, char *err);
json_t *http_reply_json(struct http_reply *r, long id, struct tally *t);
