/* Warm processes in a container (cm_exec_warm): a "zygote" that forks one
 * child per exec, so an interpreter's start-up is paid once per container,
 * not once per call (system_run_python: ~80 ms of python3 start-up against
 * a fork).
 *
 * The zygote is started like any exec, through the init's control socket:
 * vforked by the init, so it has exactly what a command there has (the
 * sandbox's namespaces, cgroup, capabilities, no_new_privs, seccomp filter;
 * its own session; a child subreaper), and nothing more.  Its stdin is our
 * end of a SOCK_SEQPACKET socketpair, the request socket; its stdout and
 * stderr go nowhere.  It lives until the container goes, until it dies,
 * or until we close the request socket.
 *
 * Protocol:
 *   zygote -> us, request socket: one byte 'z' once it is ready.
 *   us -> zygote, request socket: one message per exec: the working
 *       directory and the strings of cm_exec_warm.args, each ending in a
 *       NUL, with four fds: the exec's stdin (a memfd holding the data),
 *       stdout, stderr, and the zygote's end of a socketpair, the call
 *       socket.
 *   On the call socket, one message back: 'f' when it did not run anything
 *       (it could not chdir, fork, ...; we then run argv as usual, and it
 *       fails the usual way), or the exit code as an int32 once the call's
 *       child ended and its output was written.  A byte 'k' from us, or our
 *       hanging up, kills the call's whole process tree (its child is a
 *       child subreaper in its own session), and only it.
 *
 * The zygote runs at the sandbox's privilege, so the sandbox's code can
 * kill, stop or replace it; that reaches only this container, whose code
 * it already is.  We trust nothing it says beyond "this call's output":
 * a call whose kill is not answered within KILL_GRACE_MS has the zygote's
 * whole tree killed by the init (pump_target.kill_hard); a zygote that died
 * is noticed at the next call (its request socket hung up), which runs argv
 * as usual while a new zygote starts; one that never said hello is not
 * tried again for that container.  Requests never block on it
 * (MSG_DONTWAIT): a zygote that stopped reading sends the calls to argv. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "backend/native/linux.h"
#include "util/cleanup.h"

#define KILL_GRACE_MS 3000  /* a call's kill, before the zygote's */
#define HELLO_WAIT_MS 60000 /* a new zygote's start-up, at most */

struct zygote {
        struct zygote *next;
        char *id, *key;
        int ctl;  /* our end of its request socket */
        int conn; /* the init's connection for its exec: 'k' kills its tree */
        int refs; /* the list's and each call's; under n->zyg_lock */
        bool linked;
        int64_t started_ms;
        pthread_mutex_t mu; /* held while waiting for its hello */
        bool ready;         /* under mu: it said hello */
        atomic_bool broken; /* it never did: not tried again */
        atomic_bool dead;   /* killed, or seen gone: replace it */
};

static void closefd(int *fd) {
        if (*fd >= 0)
                (void)close(*fd);
        *fd = -1;
}

static void zyg_free(zygote *z) {
        /* Its tree goes with the connection (the init kills what a
         * hung-up client left running); EOF on its socket ends it too. */
        closefd(&z->ctl);
        closefd(&z->conn);
        (void)pthread_mutex_destroy(&z->mu);
        free(z->id);
        free(z->key);
        free(z);
}

static void zyg_put(native *n, zygote *z) {
        bool last;
        (void)pthread_mutex_lock(&n->zyg_lock);
        last = --z->refs == 0;
        (void)pthread_mutex_unlock(&n->zyg_lock);
        if (last)
                zyg_free(z);
}

/* Under n->zyg_lock. */
static void zyg_unlink_locked(native *n, zygote *z) {
        for (zygote **p = &n->zygotes; *p; p = &(*p)->next)
                if (*p == z) {
                        *p = z->next;
                        z->linked = false;
                        if (--z->refs == 0)
                                zyg_free(z);
                        return;
                }
}

/* Start one: an exec of argv through the init, its stdin our request
 * socket.  NULL when the init cannot start it (argv[0] is not in the
 * image, the container is stopping): argv then fails or runs as usual. */
static zygote *zyg_spawn(const nstate *s, const cm_exec_warm *w, char **envp) {
        int sp[2] = {-1, -1}, sync_p[2] = {-1, -1}, null_p[2] = {-1, -1}, conn = -1;
        cm_err err = CM_ERR_INIT;
        zygote *z = NULL;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0 || pipe2(sync_p, O_CLOEXEC) < 0 ||
            pipe2(null_p, O_CLOEXEC) < 0)
                goto out;
        conn = init_ctl_spawn(s->dir, w->argv, envp, "/", (int[]){sync_p[1], null_p[1], null_p[1], sp[1]}, &err);
        if (conn < 0)
                goto out;
        closefd(&sync_p[1]);
        if (sb_wait_ready(sync_p[0], NULL, &err) < 0) /* exec'd, or why not */
                goto out;
        z = xcalloc(1, sizeof *z);
        z->id = xstrdup(s->id);
        z->key = xstrdup(w->key);
        z->ctl = take_fd(&sp[0]);
        z->conn = take_fd(&conn);
        z->started_ms = cm_now_ms();
        (void)pthread_mutex_init(&z->mu, NULL);
out:
        for (int i = 0; i < 2; i++) {
                closefd(&sp[i]);
                closefd(&sync_p[i]);
                closefd(&null_p[i]);
        }
        closefd(&conn);
        return z;
}

/* Gone: its request socket hung up (it never writes there after hello). */
static bool zyg_gone(zygote *z) {
        struct pollfd pf = {z->ctl, 0, 0};
        if (atomic_load(&z->dead))
                return true;
        if (poll(&pf, 1, 0) == 1 && (pf.revents & (POLLHUP | POLLERR)))
                atomic_store(&z->dead, true);
        return atomic_load(&z->dead);
}

/* The container's zygote for this key, with a reference; NULL: run argv
 * (none can serve now).  A dead one is replaced, but the call that noticed
 * runs argv: the new one is still starting. */
static zygote *zyg_get(native *n, const nstate *s, const cm_exec_warm *w, char **envp) {
        zygote *z, *ret = NULL;
        bool replace = false;

        (void)pthread_mutex_lock(&n->zyg_lock);
        for (z = n->zygotes; z; z = z->next)
                if (strcmp(z->id, s->id) == 0 && strcmp(z->key, w->key) == 0)
                        break;
        if (z && atomic_load(&z->broken))
                goto out;
        if (z && zyg_gone(z)) {
                zyg_unlink_locked(n, z);
                z = NULL;
                replace = true;
        }
        if (!z) {
                z = zyg_spawn(s, w, envp);
                if (!z)
                        goto out;
                z->refs = 1;
                z->linked = true;
                z->next = n->zygotes;
                n->zygotes = z;
                if (replace)
                        goto out;
        }
        z->refs++;
        ret = z;
out:
        (void)pthread_mutex_unlock(&n->zyg_lock);
        return ret;
}

/* Wait for its hello (once), no longer than the call's own timeout;
 * false: it cannot serve this call (which runs argv meanwhile). */
static bool zyg_ready(zygote *z, int64_t timeout_ms, const cm_cancel *cancel) {
        bool ok;
        (void)pthread_mutex_lock(&z->mu);
        if (!z->ready && !atomic_load(&z->broken)) {
                struct pollfd pf[2] = {{z->ctl, POLLIN, 0}, {cancel ? cancel->fd : -1, POLLIN, 0}};
                int64_t until = z->started_ms + HELLO_WAIT_MS;
                char b = 0;
                int k;

                if (timeout_ms > 0 && cm_now_ms() + timeout_ms < until)
                        until = cm_now_ms() + timeout_ms;
                do
                        k = poll(pf, 2, (int)(until - cm_now_ms() > 0 ? until - cm_now_ms() : 0));
                while (k < 0 && errno == EINTR);
                if (k > 0 && pf[0].revents) {
                        z->ready = recv(z->ctl, &b, 1, MSG_DONTWAIT) == 1 && b == 'z';
                        if (!z->ready) { /* it died starting: argv from now on */
                                atomic_store(&z->broken, true);
                                atomic_store(&z->dead, true);
                        }
                } else if (k == 0 && cm_now_ms() >= z->started_ms + HELLO_WAIT_MS) {
                        /* Stuck starting: stop it, a new one next time. */
                        atomic_store(&z->dead, true);
                        (void)send(z->conn, "k", 1, MSG_NOSIGNAL);
                }
        }
        ok = z->ready && !atomic_load(&z->dead);
        (void)pthread_mutex_unlock(&z->mu);
        return ok;
}

/* ---- one call -------------------------------------------------------------- */

typedef struct zcall {
        zygote *z;
        int cs; /* our end of the call socket */
} zcall;

static void kill_call(void *ctx) { (void)send(((zcall *)ctx)->cs, "k", 1, MSG_NOSIGNAL | MSG_DONTWAIT); }

/* The zygote did not kill the call: the init kills the zygote's whole
 * tree, this call's included. */
static void kill_zygote(void *ctx) {
        zygote *z = ((zcall *)ctx)->z;
        atomic_store(&z->dead, true);
        (void)send(z->conn, "k", 1, MSG_NOSIGNAL);
}

/* The exec's stdin as a memfd (the zygote's child reads it whole). */
static int stdin_memfd(const cm_exec_spec *spec) {
        int fd = memfd_create("stdin", MFD_CLOEXEC);
        if (fd < 0)
                return -1;
        if ((spec->stdin_len && write_all(fd, spec->stdin_data, spec->stdin_len) < 0) || lseek(fd, 0, SEEK_SET) < 0) {
                (void)close(fd);
                return -1;
        }
        return fd;
}

/* The request: workdir and args, NUL-terminated each, with the fds. */
static int send_request(int ctl, const char *workdir, char *const *args, const int fds[4]) {
        size_t len = strlen(workdir) + 1;
        union {
                char buf[CMSG_SPACE(sizeof(int) * 4)];
                struct cmsghdr align;
        } u;
        struct iovec iov;
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
        struct cmsghdr *cm;
        cleanup_free char *buf = NULL;
        char *p;

        for (char *const *a = args; a && *a; a++)
                len += strlen(*a) + 1;
        p = buf = xmalloc(len);
        p = stpcpy(p, workdir) + 1;
        for (char *const *a = args; a && *a; a++)
                p = stpcpy(p, *a) + 1;
        iov = (struct iovec){buf, len};
        memset(u.buf, 0, sizeof u.buf);
        cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * 4);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * 4);
        return sendmsg(ctl, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)len ? 0 : -errno;
}

/* Returns 1 when the zygote ran nothing (run argv instead). */
static int zyg_call(zygote *z, const char *workdir, const cm_exec_spec *spec, const cm_cancel *cancel,
                    cm_exec_result *ret, cm_err *err) {
        int out_p[2] = {-1, -1}, err_p[2] = {-1, -1}, cs[2] = {-1, -1}, in = -1, r = 1;
        zcall c = {z, -1};
        int32_t code;
        ssize_t k;

        if ((in = stdin_memfd(spec)) < 0 || pipe2(out_p, O_CLOEXEC) < 0 || pipe2(err_p, O_CLOEXEC) < 0 ||
            socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, cs) < 0)
                goto out;
        r = send_request(z->ctl, workdir, spec->warm->args, (int[]){in, out_p[1], err_p[1], cs[1]});
        if (r < 0) {
                /* EAGAIN: it stopped reading; anything else: it is gone */
                if (r != -EAGAIN)
                        atomic_store(&z->dead, true);
                r = 1;
                goto out;
        }
        closefd(&in);
        closefd(&out_p[1]);
        closefd(&err_p[1]);
        closefd(&cs[1]);
        c.cs = cs[0];
        {
                pump_io io = {.out_fd = take_fd(&out_p[0]),
                              .err_fd = take_fd(&err_p[0]),
                              .in_fd = -1,
                              .cap = spec->output_cap,
                              .timeout_ms = spec->timeout_ms,
                              .cancel = cancel};
                r = pump_run(&io, &(pump_target){cs[0], kill_call, &c, kill_zygote, KILL_GRACE_MS}, ret, err);
        }
        if (r < 0)
                goto out;
        do
                k = recv(cs[0], &code, sizeof code, MSG_DONTWAIT);
        while (k < 0 && errno == EINTR);
        if (k == 1) { /* 'f': nothing ran */
                cm_exec_result_clear(ret);
                r = 1;
        } else if (k == (ssize_t)sizeof code) {
                ret->exit_code = code;
        } else if (ret->timed_out) {
                ret->exit_code = 128 + SIGKILL; /* its tree was killed with the zygote's */
        } else {
                atomic_store(&z->dead, true);
                cm_exec_result_clear(ret);
                r = cm_err_set(err, ECHILD,
                               "the container's warm %s process died during the call (killed from inside the "
                               "container?), and the call's result with it; the next call starts a new one",
                               spec->warm->key);
        }
out:
        closefd(&in);
        for (int i = 0; i < 2; i++) {
                closefd(&out_p[i]);
                closefd(&err_p[i]);
                closefd(&cs[i]);
        }
        return r;
}

int zygote_exec(native *n, const nstate *s, const cm_exec_spec *spec, char **envp, const cm_cancel *cancel,
                cm_exec_result *ret, cm_err *err) {
        zygote *z;
        int r = 1;

        /* Its environment is the container's: a call with its own runs argv. */
        if (!spec->warm || spec->n_env || !spec->warm->argv || !spec->warm->key)
                return 1;
        z = zyg_get(n, s, spec->warm, envp);
        if (!z)
                return 1;
        if (zyg_ready(z, spec->timeout_ms, cancel))
                r = zyg_call(z, spec->workdir ? spec->workdir : s->workdir, spec, cancel, ret, err);
        zyg_put(n, z);
        return r;
}

void zygote_drop(native *n, const char *id) {
        (void)pthread_mutex_lock(&n->zyg_lock);
        for (zygote **p = &n->zygotes; *p;) {
                zygote *z = *p;
                if (!id || strcmp(z->id, id) == 0) {
                        atomic_store(&z->dead, true);
                        zyg_unlink_locked(n, z);
                } else
                        p = &z->next;
        }
        (void)pthread_mutex_unlock(&n->zyg_lock);
}
