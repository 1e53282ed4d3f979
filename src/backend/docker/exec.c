/* exec_in_container through the engine: exec create, a hijacked exec start
 * (stdin written, the multiplexed output demultiplexed into capped
 * buffers), exec inspect for the exit code.
 *
 * The engine has no call that kills an exec.  Each exec carries a marker in
 * its environment (CONTAINER_MCP_EXEC=<random>), which every process it
 * starts inherits; on timeout or cancellation a second exec SIGKILLs every
 * process of the container whose environment holds it, however it
 * detached (setsid, double fork).  That second exec needs /bin/sh, grep, tr
 * and kill in the image (busybox has them). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "backend/docker/internal.h"
#include "util/cleanup.h"
#include "util/clock.h"
#include "util/json.h"

#define DK_MARKER_VAR "CONTAINER_MCP_EXEC"

/* Three passes: a process forked while the first ran is caught by the next. */
static const char kill_script[] =
        "m=\"" DK_MARKER_VAR "=$1\"; for i in 1 2 3; do for d in /proc/[0-9]*; do p=${d#/proc/}; "
        "[ \"$p\" = \"$$\" ] && continue; if tr '\\0' '\\n' <\"$d/environ\" 2>/dev/null | grep -qxF \"$m\"; "
        "then kill -9 \"$p\" 2>/dev/null; fi; done; done";

static void new_marker(char ret[33]) {
        unsigned char r[16];
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
                struct timespec ts;
                (void)clock_gettime(CLOCK_REALTIME, &ts);
                memcpy(r, &ts, sizeof r < sizeof ts ? sizeof r : sizeof ts);
        }
        for (size_t i = 0; i < sizeof r; i++)
                (void)snprintf(ret + 2 * i, 3, "%02x", r[i]);
}

static json_t *exec_body(const cm_exec_spec *s, const char *marker) {
        json_t *cmd = json_array(), *env = json_array();
        cleanup_free char *m = xasprintf(DK_MARKER_VAR "=%s", marker);
        for (size_t i = 0; i < s->argc; i++)
                (void)json_array_append_new(cmd, json_string(s->argv[i]));
        for (size_t i = 0; i < s->n_env; i++) {
                cleanup_free char *kv = xasprintf("%s=%s", s->env[i].key, s->env[i].value);
                (void)json_array_append_new(env, json_string(kv));
        }
        (void)json_array_append_new(env, json_string(m));
        json_t *b = json_pack("{s:b, s:b, s:b, s:b, s:o, s:o}", "AttachStdin", s->stdin_len > 0, "AttachStdout", 1,
                              "AttachStderr", 1, "Tty", 0, "Cmd", cmd, "Env", env);
        if (s->workdir)
                (void)json_object_set_new(b, "WorkingDir", json_string(s->workdir));
        return b;
}

static int exec_create(docker *d, const char *id, json_t *body, char **ret_eid, cm_err *err) {
        cleanup_free char *path = xasprintf("/containers/%s/exec", id);
        cleanup_json json_t *out = NULL;
        int r = dk_call(&d->api, "POST", path, body, &out, err);
        if (r == -EEXIST)
                return cm_err_set(err, EBUSY, "container %s is not running: start it, or run a new one", id);
        if (r < 0)
                return r;
        if (!cm_json_str(out, "Id"))
                return cm_err_set(err, EIO, "the engine at %s made an exec but gave no id", d->api.where);
        *ret_eid = xstrdup(cm_json_str(out, "Id"));
        return 0;
}

/* The exit code once the engine says the exec ended (it may say so a little
 * after the stream closed). */
static int exec_exit_code(docker *d, const char *eid, int *ret, cm_err *err) {
        cleanup_free char *path = xasprintf("/exec/%s/json", eid);
        int64_t deadline = cm_now_ms() + d->api.timeout_ms;
        for (unsigned pause_us = 200;; pause_us = pause_us < 50000 ? pause_us * 2 : pause_us) {
                cleanup_json json_t *j = NULL;
                if (dk_call(&d->api, "GET", path, NULL, &j, err) < 0)
                        return -1;
                if (!json_is_true(json_object_get(j, "Running"))) {
                        *ret = (int)json_integer_value(json_object_get(j, "ExitCode"));
                        return 0;
                }
                if (cm_now_ms() > deadline)
                        return cm_err_set(err, ETIMEDOUT, "the engine at %s still reports exec %.12s running",
                                          d->api.where, eid);
                (void)nanosleep(&(struct timespec){0, (long)pause_us * 1000}, NULL);
        }
}

static size_t discard(char *p, size_t size, size_t n, void *arg) {
        (void)p, (void)arg;
        return size * n;
}

/* SIGKILL every process of the exec (the marker), and wait for that: the
 * kill's own output stream ends when it has run (Podman 4 keeps reporting a
 * detached exec as running, so its end is not asked for). */
static void kill_exec(docker *d, const char *id, const char *marker) {
        cleanup_json json_t *body = json_pack("{s:b, s:b, s:[s, s, s, s, s]}", "AttachStdout", 1, "AttachStderr", 1,
                                              "Cmd", "/bin/sh", "-c", kill_script, "cm-kill", marker);
        cleanup_json json_t *start = json_pack("{s:b, s:b}", "Detach", 0, "Tty", 0);
        cleanup_free char *kid = NULL, *path = NULL;
        cm_err err = CM_ERR_INIT;
        dk_resp resp;
        if (exec_create(d, id, body, &kid, &err) < 0)
                return;
        path = xasprintf("/exec/%s/start", kid);
        dk_req req = {.method = "POST", .path = path, .json = start, .write = discard};
        if (dk_request(&d->api, &req, &resp, &err) == 0)
                dk_resp_clear(&resp);
}

/* ---- watching (cm_exec_watch) ----------------------------------------------
 * Output goes to the watcher as it is read, with ticks every every_ms.
 * The first bytes are held back until they cannot be the engine's report
 * of a command it could not start (start_failure below), which must be an
 * error and no output: past DK_HOLD_BYTES, at a tick when they do not hold
 * that report, or at the end. */

#define DK_HOLD_BYTES 2048
#define DK_START_FAILURE "unable to start container process"

typedef struct piece {
        int stream;
        char *p;
        size_t n;
} piece;

typedef struct watcher {
        const cm_exec_watch *w;
        piece *held;
        size_t n_held, held_bytes;
        bool flowing;
        int64_t next_tick;
} watcher;

static void watcher_flush(watcher *wt) {
        for (size_t i = 0; i < wt->n_held; i++) {
                wt->w->output(wt->w->arg, wt->held[i].stream, wt->held[i].p, wt->held[i].n);
                free(wt->held[i].p);
        }
        free(wt->held);
        wt->held = NULL;
        wt->n_held = wt->held_bytes = 0;
        wt->flowing = true;
}

static void watcher_drop(watcher *wt) {
        for (size_t i = 0; i < wt->n_held; i++)
                free(wt->held[i].p);
        free(wt->held);
        wt->held = NULL;
        wt->n_held = wt->held_bytes = 0;
}

static bool held_has(const watcher *wt, const char *text) {
        for (size_t i = 0; i < wt->n_held; i++)
                if (memmem(wt->held[i].p, wt->held[i].n, text, strlen(text)))
                        return true;
        return false;
}

static void watch_emit(int stream, const char *p, size_t n, void *arg) {
        watcher *wt = arg;
        if (wt->flowing) {
                wt->w->output(wt->w->arg, stream, p, n);
                return;
        }
        wt->held = xrealloc(wt->held, (wt->n_held + 1) * sizeof *wt->held);
        wt->held[wt->n_held].stream = stream;
        wt->held[wt->n_held].p = xmalloc(n ? n : 1);
        memcpy(wt->held[wt->n_held].p, p, n);
        wt->held[wt->n_held++].n = n;
        wt->held_bytes += n;
        if (wt->held_bytes > DK_HOLD_BYTES)
                watcher_flush(wt);
}

/* A tick when one is due; the time to the next one (ms). */
static int64_t watcher_tick(watcher *wt) {
        int64_t now = cm_now_ms();
        if (!wt->w->every_ms)
                return 1000;
        if (now >= wt->next_tick) {
                if (!wt->flowing && !held_has(wt, DK_START_FAILURE))
                        watcher_flush(wt);
                wt->w->output(wt->w->arg, 0, NULL, 0);
                wt->next_tick = now + wt->w->every_ms;
        }
        return wt->next_tick - now;
}

/* The held bytes of each stream, as a result's out and err, for start_failure. */
static void held_result(const watcher *wt, cm_exec_result *r) {
        size_t len[3] = {0};
        char *buf[3];
        for (int s = 1; s <= 2; s++)
                buf[s] = xcalloc(wt->held_bytes + 1, 1);
        for (size_t i = 0; i < wt->n_held; i++) {
                int s = wt->held[i].stream == 2 ? 2 : 1;
                memcpy(buf[s] + len[s], wt->held[i].p, wt->held[i].n);
                len[s] += wt->held[i].n;
        }
        r->out = buf[1], r->out_len = len[1];
        r->err = buf[2], r->err_len = len[2];
}

typedef struct pump {
        dk_conn conn;
        dk_demux dm;
        const char *in;
        size_t in_left;
        int64_t deadline; /* 0: none */
        const cm_cancel *cancel;
        watcher *wt;      /* NULL: none */
} pump;

/* 1: the stream ended; 0: the deadline or cancellation came first; < 0. */
static int pump_run(pump *p, cm_err *err) {
        char buf[65536];
        for (;;) {
                struct pollfd fds[2] = {{p->conn.fd, POLLIN | (p->in_left ? POLLOUT : 0), 0},
                                        {p->cancel ? p->cancel->fd : -1, POLLIN, 0}};
                int64_t left = p->deadline ? p->deadline - cm_now_ms() : -1;
                ssize_t k;
                while ((k = dk_conn_recv(&p->conn, buf, sizeof buf)) > 0)
                        dk_demux_feed(&p->dm, buf, (size_t)k);
                if (k == 0)
                        return 1;
                if (k != -EAGAIN)
                        return cm_err_set(err, EIO, "the engine broke off the exec's output stream");
                if (p->in_left) {
                        ssize_t s = dk_conn_send(&p->conn, p->in, p->in_left);
                        if (s < 0)
                                p->in_left = 0; /* the process closed its stdin: fine */
                        else
                                p->in += s, p->in_left -= (size_t)s;
                        if (!p->in_left)
                                dk_conn_close_write(&p->conn);
                }
                if (p->deadline && left <= 0)
                        return 0;
                if (p->wt) {
                        int64_t tick = watcher_tick(p->wt);
                        if (left < 0 || tick < left)
                                left = tick;
                }
                if (poll(fds, 2, left < 0 || left > 1000 ? 1000 : (int)left) < 0 && errno != EINTR)
                        return cm_err_sys(err, errno, "poll");
                if (fds[1].revents & POLLIN)
                        return 0;
        }
}

/* The engine reports a command it could not start (not found, not
 * executable, a missing workdir) as output and exit code 126/127; the
 * interface, like the native runtime, makes that an error (ENOENT or
 * EACCES), so a caller can tell it from a command that ran and failed. */
static int start_failure(const cm_exec_spec *s, const cm_exec_result *r, cm_err *err) {
        const char *text = strstr(r->out, DK_START_FAILURE) ? r->out : r->err;
        const char *why = strstr(text, DK_START_FAILURE);
        size_t len;
        if ((r->exit_code != 126 && r->exit_code != 127) || !why)
                return 0;
        why += strlen("unable to start container process: ");
        len = strcspn(why, "\r\n");
        if (strstr(text, "permission denied"))
                return cm_err_set(err, EACCES, "cannot run %s in the container: %.*s", s->argv[0], (int)len, why);
        return cm_err_set(err, ENOENT, "cannot run %s in the container: %.*s", s->argv[0], (int)len, why);
}

int dk_exec(cm_backend *b, const char *id, const cm_exec_spec *spec, const cm_cancel *cancel, cm_exec_result *ret,
            cm_err *err) {
        docker *d = dk_of(b);
        cleanup_json json_t *body = NULL, *start = json_pack("{s:b, s:b}", "Detach", 0, "Tty", 0);
        cleanup_free char *eid = NULL, *path = NULL;
        dk_out out = {.cap = spec->output_cap ? spec->output_cap : 1u << 20};
        pump p = {.in = spec->stdin_data, .in_left = spec->stdin_len, .cancel = cancel};
        watcher wt = {0};
        int64_t t0 = cm_now_ms();
        char marker[33];
        int r;

        memset(ret, 0, sizeof *ret);
        new_marker(marker);
        body = exec_body(spec, marker);
        if (exec_create(d, id, body, &eid, err) < 0)
                return -1;
        path = xasprintf("/exec/%s/start", eid);
        if (dk_hijack(&d->api, path, start, &p.conn, err) < 0)
                return -1;
        p.dm = (dk_demux){.emit = dk_out_emit, .arg = &out};
        if (spec->watch) {
                wt = (watcher){.w = spec->watch, .next_tick = t0 + spec->watch->every_ms};
                p.wt = &wt;
                p.dm = (dk_demux){.emit = watch_emit, .arg = &wt};
        }
        p.deadline = spec->timeout_ms > 0 ? t0 + spec->timeout_ms : 0;
        r = pump_run(&p, err);
        if (r == 0) {
                ret->timed_out = !cm_cancelled(cancel);
                kill_exec(d, id, marker);
        }
        dk_conn_close(&p.conn);
        if (r >= 0 && exec_exit_code(d, eid, &ret->exit_code, err) < 0)
                r = -1;
        if (r == 0 && !ret->timed_out) {
                free(out.buf[1]);
                free(out.buf[2]);
                if (p.wt)
                        watcher_flush(&wt); /* what ran before the cancel, for the caller's record */
                return cm_err_set(err, ECANCELED, "cancelled: the exec's processes were killed");
        }
        if (p.wt && r >= 0) {
                /* a start failure is an error, not output for the watcher */
                cm_exec_result held = {.exit_code = ret->exit_code};
                held_result(&wt, &held);
                if (start_failure(spec, &held, err) < 0)
                        r = -1;
                cm_exec_result_clear(&held);
        }
        if (p.wt && r >= 0)
                watcher_flush(&wt);
        else if (p.wt)
                watcher_drop(&wt);
        dk_out_to_result(&out, ret);
        ret->duration_ms = cm_now_ms() - t0;
        if (r >= 0 && !p.wt && start_failure(spec, ret, err) < 0)
                r = -1;
        if (r < 0) {
                cm_exec_result_clear(ret);
                return -1;
        }
        return 0;
}
