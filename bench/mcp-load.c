/* mcp-load: load generator for MCP servers (tools/call round-trips).
 *
 *   mcp-load stdio [options] -- SERVER-COMMAND [ARGS...]
 *   mcp-load http  [options] http://127.0.0.1:PORT/mcp
 *
 * stdio: spawns the server, initializes, then makes sequential tools/call
 * round-trips over the pipes.  http: C client threads, each with its own
 * keep-alive connection and its own session, call in parallel.  Every
 * round-trip is timed with CLOCK_MONOTONIC from the first byte written to
 * the last byte of the reply read; the reply is checked (HTTP status,
 * JSON-RPC error, isError, echoed text) outside the timed region.  Any error
 * makes the exit status 1.  See bench/README.md.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "load.h"

/* ------------------------------------------------------------------ */
/* options                                                             */

enum mode { MODE_STDIO, MODE_HTTP };

struct opts {
        enum mode mode;
        long calls;         /* per client; 0 = until the duration ends */
        double duration;    /* seconds; 0 = until calls are done */
        long clients;
        long warmup;        /* unmeasured calls per client */
        long idle_ms;       /* idle time before reading the idle RSS */
        pid_t pid;          /* http: server pid for RSS and CPU figures */
        const char *text;
        bool kv;
        const char *url;
        char **cmd;
};

/* ------------------------------------------------------------------ */
/* a client: one session over one transport                            */

struct client {
        const struct opts *o;
        struct tally t;
        struct child child;             /* stdio */
        struct http_conn http;          /* http */
        struct http_reply reply;
        struct buf req;
        char *text_json;
        long next_id;
        char err[ERR_LEN];
};

/* One tools/call; 0 if correct, -1 if counted as an error, -2 if the
 * transport failed (the client must stop). */
static int client_call(struct client *c, bool measure)
{
        long id = c->next_id++;
        uint64_t ns = 0;
        json_t *msg;
        int ret;

        format_call(&c->req, id, c->text_json);
        if (c->o->mode == MODE_STDIO) {
                msg = child_roundtrip(&c->child, &c->req, id, &ns, &c->t, c->err);
                if (!msg)
                        return -2;
        } else {
                if (http_post(&c->http, &c->req, &c->reply, &ns, &c->t, c->err) < 0)
                        return -2;
                msg = http_reply_json(&c->reply, id, &c->t);
                if (!msg)
                        return -1;
        }
        if (measure)
                samples_add(&c->t.lat, ns);
        ret = check_call_reply(msg, c->o->text, &c->t);
        json_decref(msg);
        return ret;
}

static int stdio_initialize(struct client *c)
{
        json_t *msg;

        if (child_spawn(&c->child, c->o->cmd, c->err) < 0)
                return -1;
        format_initialize(&c->req, c->next_id);
        msg = child_roundtrip(&c->child, &c->req, c->next_id++, NULL, &c->t, c->err);
        if (!msg)
                return -1;
        if (!json_is_object(json_object_get(msg, "result"))) {
                char *dump = json_dumps(msg, JSON_COMPACT);

                set_err(c->err, "initialize failed: %.120s", dump ? dump : "?");
                free(dump);
                json_decref(msg);
                return -1;
        }
        json_decref(msg);
        format_initialized(&c->req);
        return child_notify(&c->child, &c->req, c->err);
}

static int http_initialize(struct client *c)
{
        json_t *msg;

        c->http.fd = -1;
        if (http_connect(&c->http, c->err) < 0)
                return -1;
        format_initialize(&c->req, c->next_id);
        if (http_post(&c->http, &c->req, &c->reply, NULL, &c->t, c->err) < 0)
                return -1;
        msg = http_reply_json(&c->reply, c->next_id++, &c->t);
        if (!msg || !json_is_object(json_object_get(msg, "result")) || !c->reply.session[0]) {
                set_err(c->err, "initialize failed (status %d, session id \"%s\"): %.120s",
                        c->reply.status, c->reply.session, c->reply.body.data ? c->reply.body.data : "");
                json_decref(msg);
                return -1;
        }
        c->http.session = xstrdup(c->reply.session);
        c->http.version = negotiated_version(msg);
        json_decref(msg);
        format_initialized(&c->req);
        if (http_post(&c->http, &c->req, &c->reply, NULL, &c->t, c->err) < 0)
                return -1;
        if (c->reply.status / 100 != 2) {
                set_err(c->err, "notifications/initialized: status %d", c->reply.status);
                return -1;
        }
        return 0;
}

static int client_initialize(struct client *c)
{
        return c->o->mode == MODE_STDIO ? stdio_initialize(c) : http_initialize(c);
}

static void client_init(struct client *c, const struct opts *o)
{
        json_t *s = json_string(o->text);

        if (!s)
                die("--text is not valid UTF-8");
        *c = (struct client){ .o = o, .next_id = 1, .http.url = NULL, .http.fd = -1 };
        c->text_json = json_dumps(s, JSON_ENCODE_ANY);
        json_decref(s);
        if (!c->text_json)
                die("out of memory");
}

static void client_free(struct client *c)
{
        if (c->o->mode == MODE_HTTP)
                http_disconnect(&c->http);
        buf_free(&c->http.in);
        buf_free(&c->reply.body);
        buf_free(&c->req);
        free(c->http.session);
        free(c->http.version);
        free(c->text_json);
        free(c->t.lat.ns);
}

/* ------------------------------------------------------------------ */
/* the run                                                             */

struct run {
        struct client *clients;
        pthread_barrier_t ready;    /* all initialized and warmed up */
        pthread_barrier_t go;       /* start time taken */
        uint64_t deadline;
        bool failed_setup;
        pthread_mutex_t lock;
};

static void client_warmup(struct client *c)
{
        for (long i = 0; i < c->o->warmup; i++) {
                if (client_call(c, false) == -2) {
                        tally_error(&c->t, ERR_IO, c->err);
                        return;
                }
        }
}

static void client_measure(struct client *c, uint64_t deadline)
{
        for (long i = 0; !c->o->calls || i < c->o->calls; i++) {
                if (c->o->duration > 0 && now_ns() >= deadline)
                        break;
                if (client_call(c, true) == -2) {
                        tally_error(&c->t, ERR_IO, c->err);
                        break;
                }
        }
}

struct thread_arg {
        struct run *run;
        struct client *c;
};

static void *thread_main(void *arg)
{
        struct thread_arg *ta = arg;
        struct client *c = ta->c;
        int r;

        if (client_initialize(c) < 0) {
                tally_error(&c->t, ERR_IO, c->err);
                r = pthread_mutex_lock(&ta->run->lock);
                if (r == 0) {
                        ta->run->failed_setup = true;
                        (void)pthread_mutex_unlock(&ta->run->lock);
                }
        } else {
                client_warmup(c);
        }
        (void)pthread_barrier_wait(&ta->run->ready);
        (void)pthread_barrier_wait(&ta->run->go);
        if (!ta->run->failed_setup && !c->err[0])
                client_measure(c, ta->run->deadline);
        return NULL;
}

/* What one run measured, for the report. */
struct result {
        struct samples lat;
        long errors[ERR_KINDS];
        long reconnects;
        long skipped;
        double seconds;
        double client_cpu_s;
        long long server_ticks;     /* -1 if unknown */
        long rss_idle_kib;          /* -1 if unknown */
        long rss_end_kib;           /* -1 if unknown */
        char first_err[ERR_LEN + 16];
};

static void result_add(struct result *res, const struct tally *t)
{
        samples_merge(&res->lat, &t->lat);
        for (int i = 0; i < ERR_KINDS; i++)
                res->errors[i] += t->errors[i];
        res->reconnects += t->reconnects;
        res->skipped += t->skipped;
        if (!res->first_err[0] && t->first_err[0])
                memcpy(res->first_err, t->first_err, sizeof(res->first_err));
}

/* Server CPU ticks and our CPU time at the start of the measured window. */
struct window {
        uint64_t t0;
        long long ticks0;
        double cpu0;
};

static void window_open(struct window *w, pid_t pid)
{
        w->ticks0 = pid > 0 ? cpu_ticks(pid) : -1;
        w->cpu0 = self_cpu_s();
        w->t0 = now_ns();
}

static void window_close(const struct window *w, pid_t pid, struct result *res)
{
        long long ticks1;

        res->seconds = (double)(now_ns() - w->t0) / 1e9;
        res->client_cpu_s = self_cpu_s() - w->cpu0;
        ticks1 = pid > 0 ? cpu_ticks(pid) : -1;
        res->server_ticks = w->ticks0 >= 0 && ticks1 >= 0 ? ticks1 - w->ticks0 : -1;
        res->rss_end_kib = pid > 0 ? rss_kib(pid) : -1;
}

static int run_stdio(const struct opts *o, struct result *res)
{
        struct client c;
        struct window w;

        client_init(&c, o);
        if (stdio_initialize(&c) < 0) {
                tally_error(&c.t, ERR_IO, c.err);
                result_add(res, &c.t);
                if (c.child.pid > 0)
                        child_stop(&c.child);
                client_free(&c);
                return -1;
        }
        sleep_ms(o->idle_ms);
        res->rss_idle_kib = rss_kib(c.child.pid);
        client_warmup(&c);
        window_open(&w, c.child.pid);
        if (!c.err[0])
                client_measure(&c, w.t0 + (uint64_t)(o->duration * 1e9));
        window_close(&w, c.child.pid, res);
        result_add(res, &c.t);
        child_stop(&c.child);
        client_free(&c);
        return 0;
}

/* With --pid: one session, initialized and left idle, then its RSS. */
static void http_idle_rss(const struct opts *o, const struct url *u, struct result *res)
{
        struct client c;

        res->rss_idle_kib = -1;
        if (o->pid <= 0)
                return;
        client_init(&c, o);
        c.http.url = u;
        if (http_initialize(&c) < 0) {
                tally_error(&c.t, ERR_IO, c.err);
                result_add(res, &c.t);
        } else {
                sleep_ms(o->idle_ms);
                res->rss_idle_kib = rss_kib(o->pid);
        }
        client_free(&c);
}

static void barrier_init(pthread_barrier_t *b, unsigned n)
{
        int r = pthread_barrier_init(b, NULL, n);

        if (r)
                die("pthread_barrier_init: %s", strerror(r));
}

static int run_http(const struct opts *o, struct result *res)
{
        struct run run = { .lock = PTHREAD_MUTEX_INITIALIZER };
        struct thread_arg *args = xcalloc((size_t)o->clients, sizeof(*args));
        pthread_t *tids = xcalloc((size_t)o->clients, sizeof(*tids));
        struct url u;
        struct window w;
        int r;

        parse_url(o->url, &u);
        http_idle_rss(o, &u, res);
        run.clients = xcalloc((size_t)o->clients, sizeof(*run.clients));
        barrier_init(&run.ready, (unsigned)o->clients + 1);
        barrier_init(&run.go, (unsigned)o->clients + 1);
        for (long i = 0; i < o->clients; i++) {
                client_init(&run.clients[i], o);
                run.clients[i].http.url = &u;
                args[i] = (struct thread_arg){ .run = &run, .c = &run.clients[i] };
                r = pthread_create(&tids[i], NULL, thread_main, &args[i]);
                if (r)
                        die("pthread_create: %s", strerror(r));
        }
        (void)pthread_barrier_wait(&run.ready);
        window_open(&w, o->pid);
        run.deadline = w.t0 + (uint64_t)(o->duration * 1e9);
        (void)pthread_barrier_wait(&run.go);
        for (long i = 0; i < o->clients; i++) {
                r = pthread_join(tids[i], NULL);
                if (r)
                        die("pthread_join: %s", strerror(r));
        }
        window_close(&w, o->pid, res);
        for (long i = 0; i < o->clients; i++) {
                result_add(res, &run.clients[i].t);
                client_free(&run.clients[i]);
        }
        (void)pthread_barrier_destroy(&run.ready);
        (void)pthread_barrier_destroy(&run.go);
        free(run.clients);
        free(tids);
        free(args);
        return run.failed_setup ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* report                                                              */

static long result_errors(const struct result *res)
{
        long total = 0;

        for (int i = 0; i < ERR_KINDS; i++)
                total += res->errors[i];
        return total;
}

static double per_call_us(double seconds, size_t calls)
{
        return calls ? seconds * 1e6 / (double)calls : 0;
}

static void report_kv(const struct opts *o, const struct result *res)
{
        double server_s = res->server_ticks >= 0 ? (double)res->server_ticks / (double)sysconf(_SC_CLK_TCK) : -1;
        size_t n = res->lat.n;

        printf("mode=%s clients=%ld calls=%zu errors=%ld", o->mode == MODE_STDIO ? "stdio" : "http",
               o->mode == MODE_STDIO ? 1 : o->clients, n, result_errors(res));
        for (int i = 0; i < ERR_KINDS; i++)
                printf(" errors_%s=%ld", err_names[i], res->errors[i]);
        printf(" seconds=%.3f calls_per_s=%.0f p50_us=%.1f p90_us=%.1f p99_us=%.1f p999_us=%.1f max_us=%.1f",
               res->seconds, res->seconds > 0 ? (double)n / res->seconds : 0,
               percentile_us(&res->lat, 0.50), percentile_us(&res->lat, 0.90),
               percentile_us(&res->lat, 0.99), percentile_us(&res->lat, 0.999),
               percentile_us(&res->lat, 1.0));
        printf(" client_cpu_us_per_call=%.1f server_cpu_us_per_call=%.1f",
               per_call_us(res->client_cpu_s, n), server_s >= 0 ? per_call_us(server_s, n) : -1);
        printf(" rss_idle_kib=%ld rss_end_kib=%ld reconnects=%ld skipped=%ld\n",
               res->rss_idle_kib, res->rss_end_kib, res->reconnects, res->skipped);
}

static void report_human(const struct opts *o, const struct result *res)
{
        size_t n = res->lat.n;

        printf("%s: %zu calls in %.2f s = %.0f calls/s; p50 %.1f us, p99 %.1f us, max %.1f us\n",
               o->mode == MODE_STDIO ? "stdio" : "http", n, res->seconds,
               res->seconds > 0 ? (double)n / res->seconds : 0, percentile_us(&res->lat, 0.50),
               percentile_us(&res->lat, 0.99), percentile_us(&res->lat, 1.0));
        if (res->rss_idle_kib >= 0)
                printf("server RSS: %.1f MiB idle after initialize, %.1f MiB after the run\n",
                       (double)res->rss_idle_kib / 1024, (double)res->rss_end_kib / 1024);
        printf("errors: %ld (io %ld, http %ld, rpc %ld, tool %ld, reply %ld); reconnects %ld\n",
               result_errors(res), res->errors[ERR_IO], res->errors[ERR_HTTP], res->errors[ERR_RPC],
               res->errors[ERR_TOOL], res->errors[ERR_REPLY], res->reconnects);
}

static void report(const struct opts *o, struct result *res)
{
        if (res->lat.n)
                qsort(res->lat.ns, res->lat.n, sizeof(*res->lat.ns), cmp_u64);
        if (res->first_err[0])
                fprintf(stderr, "mcp-load: first error: %s\n", res->first_err);
        if (o->kv)
                report_kv(o, res);
        else
                report_human(o, res);
        if (fflush(stdout) != 0)
                die("stdout: %s", strerror(errno));
}

/* ------------------------------------------------------------------ */
/* command line                                                        */

static void usage(FILE *f)
{
        fputs("usage: mcp-load stdio [options] -- SERVER-COMMAND [ARGS...]\n"
              "       mcp-load http  [options] http://127.0.0.1:PORT/mcp\n"
              "\n"
              "  -n, --calls N      measured calls per client (stdio default 20000,\n"
              "                     http default: none, use the duration)\n"
              "  -d, --duration S   measure for S seconds (http default 5)\n"
              "  -c, --clients C    http: concurrent clients, one connection and\n"
              "                     session each (default 4)\n"
              "  -w, --warmup N     unmeasured calls per client first (default 1000)\n"
              "  -p, --pid PID      http: server pid, for RSS and CPU figures\n"
              "  -i, --idle-ms MS   idle time after initialize before reading RSS\n"
              "                     (default 300)\n"
              "  -t, --text TEXT    text to echo (default \"hello\")\n"
              "  -k, --kv           print one line of key=value\n"
              "\n"
              "Exit status: 0 if every call succeeded, 1 if any failed, 2 on bad usage.\n",
              f);
}

static double parse_seconds(const char *s)
{
        char *end;
        double v;

        errno = 0;
        v = strtod(s, &end);
        if (errno || end == s || *end || !(v > 0 && v < 86400))
                die("bad --duration: %s", s);
        return v;
}

static enum mode parse_mode(const char *s)
{
        if (!strcmp(s, "stdio"))
                return MODE_STDIO;
        if (!strcmp(s, "http"))
                return MODE_HTTP;
        usage(stderr);
        exit(2);
}

static void parse_option(struct opts *o, int opt, const char *arg)
{
        switch (opt) {
        case 'n': o->calls = parse_long(arg, "--calls", 1); break;
        case 'd': o->duration = parse_seconds(arg); break;
        case 'c': o->clients = parse_long(arg, "--clients", 1); break;
        case 'w': o->warmup = parse_long(arg, "--warmup", 0); break;
        case 'p': o->pid = (pid_t)parse_long(arg, "--pid", 1); break;
        case 'i': o->idle_ms = parse_long(arg, "--idle-ms", 0); break;
        case 't': o->text = arg; break;
        case 'k': o->kv = true; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
}

static void parse_args(int argc, char **argv, struct opts *o)
{
        static const struct option longopts[] = {
                { "calls", required_argument, NULL, 'n' },
                { "duration", required_argument, NULL, 'd' },
                { "clients", required_argument, NULL, 'c' },
                { "warmup", required_argument, NULL, 'w' },
                { "pid", required_argument, NULL, 'p' },
                { "idle-ms", required_argument, NULL, 'i' },
                { "text", required_argument, NULL, 't' },
                { "kv", no_argument, NULL, 'k' },
                { "help", no_argument, NULL, 'h' },
                { NULL, 0, NULL, 0 },
        };
        int opt;

        if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
                usage(argc < 2 ? stderr : stdout);
                exit(argc < 2 ? 2 : 0);
        }
        *o = (struct opts){ .mode = parse_mode(argv[1]), .clients = 4, .warmup = 1000,
                            .idle_ms = 300, .text = "hello" };
        while ((opt = getopt_long(argc - 1, argv + 1, "+n:d:c:w:p:i:t:kh", longopts, NULL)) != -1)
                parse_option(o, opt, optarg);
        argc -= optind + 1;
        argv += optind + 1;
        if (o->mode == MODE_STDIO && argc < 1)
                die("stdio mode wants a server command after --");
        if (o->mode == MODE_HTTP && argc != 1)
                die("http mode wants exactly one URL");
        if (!o->calls && o->duration <= 0) {
                if (o->mode == MODE_STDIO)
                        o->calls = 20000;
                else
                        o->duration = 5;
        }
        if (o->mode == MODE_STDIO)
                o->cmd = argv;
        else
                o->url = argv[0];
}

int main(int argc, char **argv)
{
        struct result res = { .server_ticks = -1, .rss_idle_kib = -1, .rss_end_kib = -1 };
        struct opts o;
        int ret;

        parse_args(argc, argv, &o);
        /* A server that dies must not kill us through a write to its pipe. */
        if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
                die("signal: %s", strerror(errno));
        json_object_seed(0);
        ret = o.mode == MODE_STDIO ? run_stdio(&o, &res) : run_http(&o, &res);
        report(&o, &res);
        free(res.lat.ns);
        return ret < 0 || result_errors(&res) ? 1 : 0;
}
