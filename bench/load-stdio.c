/* load-stdio.c: a server spawned with its stdin/stdout as the transport
 * (newline-delimited JSON-RPC). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "load.h"

extern char **environ;

int child_spawn(struct child *c, char **cmd, char *err)
{
        int in[2], out[2], r;
        posix_spawn_file_actions_t fa;

        if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0) {
                set_err(err, "pipe2: %s", strerror(errno));
                return -1;
        }
        if (posix_spawn_file_actions_init(&fa) ||
            posix_spawn_file_actions_adddup2(&fa, in[0], 0) ||
            posix_spawn_file_actions_adddup2(&fa, out[1], 1))
                die("posix_spawn_file_actions: out of memory");
        r = posix_spawnp(&c->pid, cmd[0], &fa, NULL, cmd, environ);
        (void)posix_spawn_file_actions_destroy(&fa);
        (void)close(in[0]);
        (void)close(out[1]);
        c->to = in[1];
        c->from = out[0];
        if (r) {
                set_err(err, "spawn %s: %s", cmd[0], strerror(r));
                return -1;
        }
        return 0;
}

/* Read more bytes from the server's stdout into c->in, with a timeout. */
static int child_fill(struct child *c, char *err)
{
        struct pollfd p = { .fd = c->from, .events = POLLIN };
        ssize_t n;
        int r;

        r = poll(&p, 1, IO_TIMEOUT_MS);
        if (r < 0 && errno == EINTR)
                return 0;
        if (r <= 0) {
                set_err(err, r ? "poll: %s" : "no reply within 10 s%s", r ? strerror(errno) : "");
                return -1;
        }
        buf_reserve(&c->in, 65536);
        n = read(c->from, c->in.data + c->in.len, c->in.cap - c->in.len - 1);
        if (n < 0 && errno == EINTR)
                return 0;
        if (n <= 0) {
                set_err(err, n ? "read: %s" : "server closed stdout%s", n ? strerror(errno) : "");
                return -1;
        }
        c->in.len += (size_t)n;
        c->in.data[c->in.len] = '\0';
        return 0;
}

/* Read one newline-terminated message into line (without the newline). */
static int child_read_line(struct child *c, struct buf *line, char *err)
{
        char *nl;

        while (!(c->in.len && (nl = memchr(c->in.data, '\n', c->in.len))))
                if (child_fill(c, err) < 0)
                        return -1;
        line->len = 0;
        buf_append(line, c->in.data, (size_t)(nl - c->in.data));
        buf_consume(&c->in, (size_t)(nl - c->in.data) + 1);
        return 0;
}

/* Send one request and wait for the reply with its id; *ret_ns is the
 * round-trip time up to the end of the reply line. */
json_t *child_roundtrip(struct child *c, struct buf *req, long id, uint64_t *ret_ns,
                               struct tally *t, char *err)
{
        struct buf line = { 0 };
        uint64_t t0, t1;
        json_t *msg;

        buf_append(req, "\n", 1);
        t0 = now_ns();
        if (write_all(c->to, req->data, req->len, err) < 0)
                return NULL;
        for (;;) {
                if (child_read_line(c, &line, err) < 0) {
                        buf_free(&line);
                        return NULL;
                }
                t1 = now_ns();
                msg = json_loadb(line.data, line.len, 0, NULL);
                if (msg && reply_has_id(msg, id))
                        break;
                if (!msg) {
                        set_err(err, "not JSON: %.80s", line.data);
                        buf_free(&line);
                        return NULL;
                }
                t->skipped++;
                json_decref(msg);
        }
        buf_free(&line);
        if (ret_ns)
                *ret_ns = t1 - t0;
        return msg;
}

int child_notify(struct child *c, struct buf *req, char *err)
{
        buf_append(req, "\n", 1);
        return write_all(c->to, req->data, req->len, err);
}

/* Close stdin, give the server 2 s to exit, then terminate it. */
void child_stop(struct child *c)
{
        int status;

        if (c->to >= 0)
                (void)close(c->to);
        c->to = -1;
        for (int i = 0; i < 200; i++) {
                if (waitpid(c->pid, &status, WNOHANG) != 0)
                        goto out;
                sleep_ms(10);
        }
        (void)kill(c->pid, SIGTERM);
        sleep_ms(200);
        if (waitpid(c->pid, &status, WNOHANG) == 0) {
                (void)kill(c->pid, SIGKILL);
                (void)waitpid(c->pid, &status, 0);
        }
out:
        (void)close(c->from);
        buf_free(&c->in);
}
