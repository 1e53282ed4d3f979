/* dexec (toolset "codex", issue 11): the third seed's command runner.  A
 * command line runs with bash -lc (sh -c without bash) in a managed or
 * allowlisted container; the agent gets a preview (the head and the tail of
 * the output, the number of bytes between them left out), and the whole
 * run goes to the run log (tools/runlog.h), one record per run.
 *
 * The output is watched as the backend reads it (cm_exec_watch): stdout and
 * stderr make one stream in the order they were read, as a terminal would
 * show them, for the preview; each stream is kept on its own, up to
 * CONTAINER_MCP_RUNLOG_MAX_BYTES for both together, for the record.  The
 * tail is a ring of the last bytes, so it is the real end of the output
 * however long that was. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/common.h"
#include "tools/runlog.h"
#include "util/cleanup.h"
#include "util/clock.h"
#include "util/json.h"

#define DEFAULT_TIMEOUT_SEC 120 /* the seed's */
#define PROGRESS_MS 1000        /* at most one progress notification a second */

typedef struct buf {
        char *data;
        size_t len, alloc;
} buf;

static void buf_add(buf *b, const char *p, size_t n) {
        if (b->len + n > b->alloc) {
                size_t a = b->alloc ? b->alloc : 4096;
                while (a < b->len + n)
                        a *= 2;
                b->data = xrealloc(b->data, a);
                b->alloc = a;
        }
        if (n) /* p may be NULL when there is nothing */
                memcpy(b->data + b->len, p, n);
        b->len += n;
}

/* What the watcher keeps of a run. */
typedef struct capture {
        /* the preview: the first head_cap bytes, and a ring of the last
         * tail_cap bytes of what came after them */
        char *head, *ring;
        size_t head_cap, head_len, tail_cap, ring_len, ring_pos;
        uint64_t rest; /* bytes after the head */
        /* the record: each stream up to `cap` bytes for both together */
        buf out, err;
        size_t cap;
        bool cut;
        uint64_t out_bytes, err_bytes;
        /* progress */
        mcp_call *call;
        int64_t start, last_note;
} capture;

static void capture_init(capture *c, mcp_call *call, size_t preview, size_t cap) {
        *c = (capture){.head_cap = preview / 2, .tail_cap = preview - preview / 2, .cap = cap, .call = call};
        c->head = xmalloc(c->head_cap);
        c->ring = xmalloc(c->tail_cap);
        c->start = c->last_note = cm_now_ms();
}

static void capture_free(capture *c) {
        free(c->head);
        free(c->ring);
        free(c->out.data);
        free(c->err.data);
}

static void ring_add(capture *c, const char *p, size_t n) {
        c->rest += n;
        if (n >= c->tail_cap) {
                memcpy(c->ring, p + n - c->tail_cap, c->tail_cap);
                c->ring_pos = 0;
                c->ring_len = c->tail_cap;
                return;
        }
        size_t first = c->tail_cap - c->ring_pos < n ? c->tail_cap - c->ring_pos : n;
        memcpy(c->ring + c->ring_pos, p, first);
        memcpy(c->ring, p + first, n - first);
        c->ring_pos = (c->ring_pos + n) % c->tail_cap;
        c->ring_len = c->ring_len + n > c->tail_cap ? c->tail_cap : c->ring_len + n;
}

static void preview_add(capture *c, const char *p, size_t n) {
        size_t h = c->head_cap - c->head_len < n ? c->head_cap - c->head_len : n;
        memcpy(c->head + c->head_len, p, h);
        c->head_len += h;
        if (n > h)
                ring_add(c, p + h, n - h);
}

static void record_add(capture *c, buf *b, const char *p, size_t n) {
        size_t kept = c->out.len + c->err.len, take = c->cap - kept < n ? c->cap - kept : n;
        if (take < n)
                c->cut = true;
        if (take)
                buf_add(b, p, take);
}

static void note_progress(capture *c) {
        int64_t now = cm_now_ms();
        char msg[128];
        if (now - c->last_note < PROGRESS_MS)
                return;
        c->last_note = now;
        (void)snprintf(msg, sizeof msg, "running for %.1f s, %llu bytes of output so far", (double)(now - c->start) / 1000,
                       (unsigned long long)(c->out_bytes + c->err_bytes));
        /* progress must grow with each notification: the elapsed time does */
        mcp_call_progress(c->call, (double)(now - c->start) / 1000, 0, msg);
}

static void take(capture *c, int stream, const char *p, size_t n) {
        if (!n)
                return;
        preview_add(c, p, n);
        record_add(c, stream == 1 ? &c->out : &c->err, p, n);
        *(stream == 1 ? &c->out_bytes : &c->err_bytes) += n;
}

/* cm_exec_watch.output: stream 1 stdout, 2 stderr, 0 a tick. */
static void watch_output(void *arg, int stream, const char *p, size_t n) {
        capture *c = arg;
        if (stream == 1 || stream == 2)
                take(c, stream, p, n);
        note_progress(c);
}

/* ---- the preview ---------------------------------------------------------- */

/* Where the head may end without splitting a UTF-8 sequence. */
static size_t utf8_end(const char *s, size_t n) {
        size_t i = n, back = 0, need;
        unsigned char lead;
        while (i > 0 && back < 3 && ((unsigned char)s[i - 1] & 0xC0) == 0x80)
                i--, back++;
        if (i == 0)
                return n;
        lead = (unsigned char)s[i - 1];
        need = lead >= 0xF0 && lead < 0xF8 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        return lead >= 0xC0 && lead < 0xF8 && back + 1 < need ? i - 1 : n;
}

/* Where the tail may start: past continuation bytes of a cut sequence. */
static size_t utf8_start(const char *s, size_t n) {
        size_t i = 0;
        while (i < n && i < 3 && ((unsigned char)s[i] & 0xC0) == 0x80)
                i++;
        return i;
}

/* The preview's bytes and how many of the output's it leaves out. */
static void preview_make(const capture *c, buf *ret, uint64_t *ret_left) {
        cleanup_free char *tail = xmalloc(c->ring_len ? c->ring_len : 1);
        size_t older = c->ring_len < c->tail_cap ? 0 : c->ring_pos; /* the oldest byte of the ring */
        size_t h = c->head_len, t = 0;
        memcpy(tail, c->ring + older, c->ring_len - older);
        memcpy(tail + c->ring_len - older, c->ring, older);
        *ret_left = 0;
        if (c->rest > c->ring_len) {
                char note[96];
                h = utf8_end(c->head, c->head_len);
                t = utf8_start(tail, c->ring_len);
                *ret_left = c->head_len - h + (c->rest - c->ring_len) + t;
                buf_add(ret, c->head, h);
                (void)snprintf(note, sizeof note, "\n[... %llu bytes left out ...]\n", (unsigned long long)*ret_left);
                buf_add(ret, note, strlen(note));
        } else {
                buf_add(ret, c->head, h);
        }
        buf_add(ret, tail + t, c->ring_len - t);
}

/* ---- the run log ---------------------------------------------------------- */

static int64_t unix_ms(void) {
        struct timespec ts;
        (void)clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The conversation: the client's _meta.threadId (Codex sends one), else
 * the session, by its owner tag (the session id is a credential and never
 * goes into a file name). */
static char *conversation(mcp_call *call, const json_t **ret_thread) {
        const json_t *t = json_object_get(mcp_call_meta(call), "threadId");
        char owner[CM_OWNER_HEX + 1];
        if (json_is_string(t) && json_string_length(t) > 0) {
                *ret_thread = t;
                return cm_runlog_safe_name(json_string_value(t), json_string_length(t));
        }
        *ret_thread = NULL;
        cm_tool_owner(call, owner);
        return xasprintf("session-%s", owner);
}

typedef struct run {
        const char *container, *command, *stdin_data;
        size_t stdin_len;
        cm_container_info info;
        int64_t time_ms;
        const json_t *thread;
        char *path;
        int fd;
        bool sh;
} run;

static int open_log(mcp_call *call, run *rn, cm_err *err) {
        const cm_config *cfg = cm_call_app(call)->cfg;
        cleanup_free char *name = conversation(call, &rn->thread);
        cleanup_free char *file = cm_runlog_file_name(name, rn->time_ms);
        if (!cfg->runlog_dir)
                return cm_err_set(err, EIO, "dexec keeps a run log and has none: %s; set --runlog-dir or "
                                            "CONTAINER_MCP_RUNLOG_DIR to a directory of this user's",
                                  cfg->runlog_unusable ? cfg->runlog_unusable : "no directory");
        if (cm_runlog_check_total(cfg->runlog_dir, cfg->runlog_max_total, err) < 0)
                return -1;
        rn->fd = cm_runlog_open(cfg->runlog_dir, file, err);
        if (rn->fd < 0)
                return -1;
        rn->path = xasprintf("%s/%s", cfg->runlog_dir, file);
        return 0;
}

static int write_record(run *rn, const capture *c, const cm_exec_result *res, bool cancelled, int64_t duration_ms,
                        cm_err *err) {
        cm_runlog_record r = {
                .time_ms = rn->time_ms,
                .thread_id = rn->thread ? json_string_value(rn->thread) : NULL,
                .thread_id_end = rn->thread ? json_string_value(rn->thread) + json_string_length(rn->thread) : NULL,
                .container = rn->container,
                .container_id = rn->info.id,
                .command = rn->command,
                .shell = rn->sh ? "sh" : "bash",
                .stdin_bytes = rn->stdin_len,
                .exit_code = res->exit_code,
                .exited = !cancelled,
                .timed_out = res->timed_out,
                .cancelled = cancelled,
                .duration_ms = duration_ms,
                .out = c->out.data,
                .out_len = c->out.len,
                .err = c->err.data,
                .err_len = c->err.len,
                .out_bytes = c->out_bytes,
                .err_bytes = c->err_bytes,
                .cut = c->cut,
                .cap = (int64_t)c->cap,
        };
        size_t len;
        cleanup_free char *line = cm_runlog_line(&r, &len);
        return cm_runlog_append(rn->fd, line, len, err);
}

/* ---- the tool ------------------------------------------------------------- */

static void result(const run *rn, const capture *c, const cm_exec_result *res, json_t **ret, char **ret_text) {
        buf pv = {0};
        uint64_t left;
        preview_make(c, &pv, &left);
        *ret = json_pack("{s:i, s:o, s:I, s:s, s:I, s:b}", "exit_code", res->exit_code, "preview",
                         cm_json_bytes(pv.data, pv.len), "truncated_bytes", (json_int_t)left, "runlog", rn->path,
                         "duration_ms", (json_int_t)res->duration_ms, "timed_out", res->timed_out);
        if (rn->sh)
                (void)json_object_set_new(*ret, "shell", json_string("sh"));
        if (c->cut)
                (void)json_object_set_new(*ret, "runlog_cut", json_true());
        {
                cleanup_free char *text = cm_text_of_bytes(pv.data, pv.len);
                *ret_text = xasprintf("%s%s[exit code %d%s, %lld ms%s; the whole output is in the run log %s%s]",
                                      text, pv.len && pv.data[pv.len - 1] != '\n' ? "\n" : "", res->exit_code,
                                      res->timed_out ? ", timed out" : "", (long long)res->duration_ms,
                                      rn->sh ? ", run with sh -c: no bash" : "", rn->path,
                                      c->cut ? ", cut at CONTAINER_MCP_RUNLOG_MAX_BYTES" : "");
        }
        free(pv.data);
}

/* Run it, watching the output; a backend that does not watch hands its
 * output over at the end. */
static int execute(mcp_call *call, cm_backend *b, run *rn, capture *c, const json_t *args, cm_exec_result *res,
                   cm_err *err) {
        const json_t *t = json_object_get(args, "timeout_sec");
        cm_exec_watch watch = {watch_output, c, PROGRESS_MS};
        cm_exec_spec spec = {.stdin_data = rn->stdin_data,
                             .stdin_len = rn->stdin_len,
                             .timeout_ms = (t ? json_integer_value(t) : DEFAULT_TIMEOUT_SEC) * 1000,
                             .output_cap = c->cap,
                             .watch = &watch};
        int r = cm_tool_shell_exec(call, b, rn->info.id, "-lc", rn->command, &spec, res, &rn->sh, err);
        if (r == 0) {
                take(c, 1, res->out, res->out_len);
                take(c, 2, res->err, res->err_len);
                c->cut |= res->truncated;
        }
        return r;
}

static int dexec(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        const cm_config *cfg = cm_call_app(call)->cfg;
        run rn = {.container = cm_json_str(args, "container"),
                  .command = cm_json_str(args, "command"),
                  .stdin_data = cm_json_str(args, "stdin"),
                  .fd = -1};
        cm_exec_result res = {0};
        capture c;
        cm_backend *b;
        int r;

        rn.stdin_len = rn.stdin_data ? json_string_length(json_object_get(args, "stdin")) : 0;
        if (cm_tool_writable(call, "dexec", err) < 0)
                return -1;
        b = CM_TOOL_CODEX_TARGET(call, rn.container, exec, "exec in containers yet", &rn.info, err);
        if (!b)
                return -1;
        rn.time_ms = unix_ms();
        /* the log first: a run that cannot be recorded does not run */
        if (open_log(call, &rn, err) < 0) {
                cm_container_info_clear(&rn.info);
                return -1;
        }
        capture_init(&c, call, cfg->dexec_preview_bytes, (size_t)cfg->runlog_max_bytes);
        r = execute(call, b, &rn, &c, args, &res, err);
        if (r == 0 || mcp_call_cancelled(call)) {
                /* A cancelled run is recorded too: it ran, and its tree was
                 * killed. */
                cm_err werr = CM_ERR_INIT;
                bool cancelled = r < 0;
                if (write_record(&rn, &c, &res, cancelled, cancelled ? cm_now_ms() - c.start : res.duration_ms,
                                 &werr) < 0 &&
                    r == 0)
                        r = cm_err_set(err, werr.code,
                                       "the command ran (exit code %d) but its record could not be written: %s",
                                       res.exit_code, werr.msg);
        }
        if (r == 0)
                result(&rn, &c, &res, ret, ret_text);
        capture_free(&c);
        cm_exec_result_clear(&res);
        cm_container_info_clear(&rn.info);
        free(rn.path);
        if (rn.fd >= 0)
                (void)close(rn.fd);
        return r < 0 ? -1 : 0;
}

/* Name, description and schemas: src/tools/defs/dexec.json. */
static const cm_tool_handler handlers[] = {
        {"dexec", dexec},
};

const cm_tool_family cm_tools_dexec = {__FILE__, handlers, ARRAY_SIZE(handlers)};
