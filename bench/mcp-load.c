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
 *
 * The call is echo {text} unless --tool/--args name another; --setup-tool
 * makes one unmeasured call first (say, run_container to start a container)
 * whose structuredContent.id replaces "{id}" in --args, and --cleanup-tool
 * is called at the end for every id the calls returned (remove_container).
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
        long gap_ms;        /* idle time before each measured call but the first */
        long idle_ms;       /* idle time before reading the idle RSS */
        pid_t pid;          /* http: server pid for RSS and CPU figures */
        const char *text;
        const char *tool;
        json_t *args;               /* echo: {"text": text} */
        const char *expect_text;    /* echo: the reply must echo it */
        json_t *expect;             /* --expect: members structuredContent must have */
        const char *setup_tool;
        json_t *setup_args;
        const char *cleanup_tool;
        json_t *cleanup_args;
        bool kv;
        const char *url;
        const char *token;              /* http: bearer token, or NULL */
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
        char *tail;                     /* the measured call, for format_call */
        char **ids;                     /* structuredContent.id of the replies */
        size_t n_ids;
        long cleaned;                   /* successful cleanup calls */
        long next_id;
        char err[ERR_LEN];
};

/* Send one tools/call (format_call's tail) and read its reply.  NULL if
 * there is none: *ret is then -1 if that was counted as an error, -2 if the
 * transport failed (c->err says how; the client must stop). */
static json_t *client_rpc(struct client *c, const char *tail, uint64_t *ret_ns, int *ret)
{
        long id = c->next_id++;
        json_t *msg;

        format_call(&c->req, id, tail);
        if (c->o->mode == MODE_STDIO) {
                *ret = -2;
                return child_roundtrip(&c->child, &c->req, id, ret_ns, &c->t, c->err);
        }
        if (http_post(&c->http, &c->req, &c->reply, ret_ns, &c->t, c->err) < 0) {
                *ret = -2;
                return NULL;
        }
        msg = http_reply_json(&c->reply, id, &c->t);
        *ret = -1;
        return msg;
}

/* With --cleanup-tool, remember what each reply names for the cleanup. */
static void client_keep_id(struct client *c, json_t *msg)
{
        const char *id = reply_result_id(msg);

        if (!c->o->cleanup_tool || !id)
                return;
        c->ids = xrealloc(c->ids, (c->n_ids + 1) * sizeof(*c->ids));
        c->ids[c->n_ids++] = xstrdup(id);
}

/* One measured (or warm-up) tools/call; 0 if correct, -1 if counted as an
 * error, -2 if the transport failed (the client must stop). */
static int client_call(struct client *c, bool measure)
{
        uint64_t ns = 0;
        json_t *msg;
        int ret;

        msg = client_rpc(c, c->tail, &ns, &ret);
        if (!msg)
                return ret;
        if (measure)
                samples_add(&c->t.lat, ns);
        ret = check_call_reply(msg, c->o->expect_text, &c->t);
        if (ret == 0 && c->o->expect)
                ret = check_expect(msg, c->o->expect, &c->t);
        client_keep_id(c, msg);
        json_decref(msg);
        return ret;
}

/* A copy of v with every string "{id}" in it replaced by id. */
static json_t *with_id(json_t *v, const char *id)
{
        const char *key;
        json_t *e, *copy;
        size_t i;

        if (json_is_string(v) && !strcmp(json_string_value(v), "{id}"))
                return json_string(id);
        if (json_is_array(v)) {
                copy = json_array();
                json_array_foreach(v, i, e)
                        (void)json_array_append_new(copy, with_id(e, id));
                return copy;
        }
        if (json_is_object(v)) {
                copy = json_object();
                json_object_foreach(v, key, e)
                        (void)json_object_set_new(copy, key, with_id(e, id));
                return copy;
        }
        return json_incref(v);
}

/* The tail of a call of tool with args, "{id}" replaced when id is given. */
static char *tail_with_id(const char *tool, json_t *args, const char *id)
{
        json_t *a = id ? with_id(args, id) : json_incref(args);
        char *tail = call_tail(tool, a);

        json_decref(a);
        return tail;
}

/* --setup-tool: one unmeasured call after initialize; the id its reply
 * names goes into the measured call's arguments (and to the cleanup). */
static int client_setup(struct client *c)
{
        const struct opts *o = c->o;
        struct tally check = { 0 };
        char *tail;
        const char *id;
        json_t *msg;
        int ret;

        if (!o->setup_tool)
                return 0;
        tail = call_tail(o->setup_tool, o->setup_args);
        msg = client_rpc(c, tail, NULL, &ret);
        free(tail);
        if (!msg) {
                if (ret == -1)
                        set_err(c->err, "setup call %s: %s", o->setup_tool, c->t.first_err);
                return -1;
        }
        /* Checked against a tally of its own: the caller counts the failure. */
        if (check_call_reply(msg, NULL, &check) < 0) {
                set_err(c->err, "setup call %s: %s", o->setup_tool, check.first_err);
                json_decref(msg);
                return -1;
        }
        id = reply_result_id(msg);
        if (id) {
                free(c->tail);
                c->tail = tail_with_id(o->tool, o->args, id);
        }
        client_keep_id(c, msg);
        json_decref(msg);
        return 0;
}

/* --cleanup-tool: called for every id the replies named, after the
 * measured window; its errors count like any other. */
static void client_cleanup(struct client *c)
{
        const struct opts *o = c->o;

        for (size_t i = 0; i < c->n_ids && !c->err[0]; i++) {
                char *tail = tail_with_id(o->cleanup_tool, o->cleanup_args, c->ids[i]);
                json_t *msg;
                int ret;

                msg = client_rpc(c, tail, NULL, &ret);
                free(tail);
                if (!msg) {
                        if (ret == -2)
                                tally_error(&c->t, ERR_IO, c->err);
                        continue;
                }
                if (check_call_reply(msg, NULL, &c->t) == 0)
                        c->cleaned++;
                json_decref(msg);
        }
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
        if (child_notify(&c->child, &c->req, c->err) < 0)
                return -1;
        return client_setup(c);
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

static int http_initialize_and_setup(struct client *c)
{
        return http_initialize(c) < 0 ? -1 : client_setup(c);
}

static int client_initialize(struct client *c)
{
        return c->o->mode == MODE_STDIO ? stdio_initialize(c) : http_initialize_and_setup(c);
}

static void client_init(struct client *c, const struct opts *o)
{
        *c = (struct client){ .o = o, .next_id = 1, .http.url = NULL, .http.fd = -1 };
        c->tail = call_tail(o->tool, o->args);
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
        free(c->tail);
        for (size_t i = 0; i < c->n_ids; i++)
                free(c->ids[i]);
        free(c->ids);
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
                if (i > 0 && c->o->gap_ms > 0)
                        sleep_ms(c->o->gap_ms);
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
        long to_clean;              /* ids for --cleanup-tool */
        long cleaned;               /* of which cleaned up */
        char first_err[ERR_LEN + 16];
};

static void result_add(struct result *res, const struct client *c)
{
        const struct tally *t = &c->t;

        res->to_clean += (long)c->n_ids;
        res->cleaned += c->cleaned;
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
                result_add(res, &c);
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
        client_cleanup(&c);
        result_add(res, &c);
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
                result_add(res, &c);
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
        u.token = o->token;
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
                client_cleanup(&run.clients[i]);
                result_add(res, &run.clients[i]);
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
        printf(" rss_idle_kib=%ld rss_end_kib=%ld reconnects=%ld skipped=%ld",
               res->rss_idle_kib, res->rss_end_kib, res->reconnects, res->skipped);
        /* Only then, so that the echo runs print the line they always did. */
        if (o->cleanup_tool)
                printf(" to_clean=%ld cleaned=%ld", res->to_clean, res->cleaned);
        printf("\n");
}

static void report_human(const struct opts *o, const struct result *res)
{
        size_t n = res->lat.n;

        printf("%s: %zu calls in %.2f s = %.0f calls/s; p50 %.1f us, p99 %.1f us, max %.1f us\n",
               o->mode == MODE_STDIO ? "stdio" : "http", n, res->seconds,
               res->seconds > 0 ? (double)n / res->seconds : 0, percentile_us(&res->lat, 0.50),
               percentile_us(&res->lat, 0.99), percentile_us(&res->lat, 1.0));
        if (res->rss_idle_kib >= 0)
                printf("server RSS: %.1f MiB idle after initialize%s, %.1f MiB after the run\n",
                       (double)res->rss_idle_kib / 1024, o->setup_tool ? " and setup" : "",
                       (double)res->rss_end_kib / 1024);
        if (o->cleanup_tool)
                printf("cleanup: %ld of %ld %s calls succeeded\n", res->cleaned, res->to_clean, o->cleanup_tool);
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

enum { OPT_SETUP_TOOL = 256, OPT_SETUP_ARGS, OPT_CLEANUP_TOOL, OPT_CLEANUP_ARGS, OPT_TOKEN, OPT_EXPECT };

/* The JSON texts of the options, parsed once jansson is seeded. */
struct json_opts {
        const char *args;
        const char *setup_args;
        const char *cleanup_args;
        const char *expect;
};

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
              "  -g, --gap-ms MS    idle time before each measured call (an agent's\n"
              "                     time between calls; default 0: back to back)\n"
              "  -p, --pid PID      http: server pid, for RSS and CPU figures\n"
              "  --token TOKEN      http: send \"Authorization: Bearer TOKEN\"\n"
              "  -i, --idle-ms MS   idle time after initialize before reading RSS\n"
              "                     (default 300)\n"
              "  -t, --text TEXT    text to echo (default \"hello\")\n"
              "  -T, --tool NAME    the tool to call (default echo)\n"
              "  -a, --args JSON    its arguments, an object (default {\"text\": TEXT},\n"
              "                     whose echo is checked; for other tools a reply\n"
              "                     must not be isError nor have a non-zero exitCode)\n"
              "  -e, --expect JSON  an object: each of its members must be in every\n"
              "                     measured reply's structuredContent, equal\n"
              "  --setup-tool NAME  one unmeasured call after initialize (per client);\n"
              "  --setup-args JSON  the structuredContent.id of its reply replaces\n"
              "                     every \"{id}\" string in --args\n"
              "  --cleanup-tool NAME, --cleanup-args JSON\n"
              "                     after the measured window, one call for each\n"
              "                     structuredContent.id any reply named, \"{id}\" in\n"
              "                     --cleanup-args replaced by it\n"
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

static void parse_option(struct opts *o, struct json_opts *j, int opt, const char *arg)
{
        switch (opt) {
        case 'n': o->calls = parse_long(arg, "--calls", 1); break;
        case 'd': o->duration = parse_seconds(arg); break;
        case 'c': o->clients = parse_long(arg, "--clients", 1); break;
        case 'w': o->warmup = parse_long(arg, "--warmup", 0); break;
        case 'g': o->gap_ms = parse_long(arg, "--gap-ms", 0); break;
        case 'p': o->pid = (pid_t)parse_long(arg, "--pid", 1); break;
        case 'i': o->idle_ms = parse_long(arg, "--idle-ms", 0); break;
        case 't': o->text = arg; break;
        case 'T': o->tool = arg; break;
        case 'a': j->args = arg; break;
        case OPT_SETUP_TOOL: o->setup_tool = arg; break;
        case OPT_TOKEN: o->token = arg; break;
        case OPT_SETUP_ARGS: j->setup_args = arg; break;
        case OPT_CLEANUP_TOOL: o->cleanup_tool = arg; break;
        case OPT_CLEANUP_ARGS: j->cleanup_args = arg; break;
        case 'e': j->expect = arg; break;
        case 'k': o->kv = true; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
}

static void parse_args(int argc, char **argv, struct opts *o, struct json_opts *j)
{
        static const struct option longopts[] = {
                { "calls", required_argument, NULL, 'n' },
                { "duration", required_argument, NULL, 'd' },
                { "clients", required_argument, NULL, 'c' },
                { "warmup", required_argument, NULL, 'w' },
                { "gap-ms", required_argument, NULL, 'g' },
                { "pid", required_argument, NULL, 'p' },
                { "idle-ms", required_argument, NULL, 'i' },
                { "text", required_argument, NULL, 't' },
                { "tool", required_argument, NULL, 'T' },
                { "args", required_argument, NULL, 'a' },
                { "setup-tool", required_argument, NULL, OPT_SETUP_TOOL },
                { "token", required_argument, NULL, OPT_TOKEN },
                { "setup-args", required_argument, NULL, OPT_SETUP_ARGS },
                { "cleanup-tool", required_argument, NULL, OPT_CLEANUP_TOOL },
                { "cleanup-args", required_argument, NULL, OPT_CLEANUP_ARGS },
                { "expect", required_argument, NULL, 'e' },
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
                            .idle_ms = 300, .text = "hello", .tool = "echo" };
        *j = (struct json_opts){ 0 };
        while ((opt = getopt_long(argc - 1, argv + 1, "+n:d:c:w:g:p:i:t:T:a:e:kh", longopts, NULL)) != -1)
                parse_option(o, j, opt, optarg);
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

static json_t *parse_object(const char *text, const char *what)
{
        json_error_t e;
        json_t *v = json_loads(text ? text : "{}", 0, &e);

        if (!json_is_object(v))
                die("bad %s: %s", what, v ? "not a JSON object" : e.text);
        return v;
}

/* The arguments of the calls.  The echo of the default call is checked;
 * with --args or another tool, only the reply's status. */
static void parse_call_args(struct opts *o, const struct json_opts *j)
{
        if (j->args || strcmp(o->tool, "echo")) {
                o->args = parse_object(j->args, "--args");
        } else {
                o->args = json_pack("{s:s}", "text", o->text);
                if (!o->args)
                        die("--text is not valid UTF-8");
                o->expect_text = o->text;
        }
        o->setup_args = parse_object(j->setup_args, "--setup-args");
        o->cleanup_args = parse_object(j->cleanup_args, "--cleanup-args");
        o->expect = j->expect ? parse_object(j->expect, "--expect") : NULL;
        if ((j->setup_args && !o->setup_tool) || (j->cleanup_args && !o->cleanup_tool))
                die("--setup-args and --cleanup-args go with --setup-tool and --cleanup-tool");
}

int main(int argc, char **argv)
{
        struct result res = { .server_ticks = -1, .rss_idle_kib = -1, .rss_end_kib = -1 };
        struct json_opts j;
        struct opts o;
        int ret;

        parse_args(argc, argv, &o, &j);
        /* A server that dies must not kill us through a write to its pipe. */
        if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
                die("signal: %s", strerror(errno));
        json_object_seed(0);
        parse_call_args(&o, &j);
        ret = o.mode == MODE_STDIO ? run_stdio(&o, &res) : run_http(&o, &res);
        report(&o, &res);
        free(res.lat.ns);
        json_decref(o.args);
        json_decref(o.setup_args);
        json_decref(o.cleanup_args);
        json_decref(o.expect);
        return ret < 0 || result_errors(&res) ? 1 : 0;
}
