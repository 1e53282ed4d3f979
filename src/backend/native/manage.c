/* A container after its start: stop, remove, find, list, inspect, logs,
 * stats.  Each works from the container's state record (state.c), so all of
 * it works after a server restart. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "backend/native/linux.h"
#include "util/cleanup.h"

/* An fd for the init that cannot be a recycled pid's; -1 when it is gone. */
int native_init_pidfd(const nstate *s) {
        int fd;
        if (s->init_pid <= 0)
                return -1;
        fd = sys_pidfd_open(s->init_pid, 0);
        if (fd >= 0 && !init_alive(s)) {
                (void)close(fd);
                return -1;
        }
        return fd;
}

int native_root_fd(const nstate *s, int *ret_fd, cm_err *err) {
        char path[64];
        int fd;

        if (!s->userns) {
                (void)snprintf(path, sizeof path, "/proc/%d/root", (int)s->init_pid);
                fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0 || !init_alive(s)) {
                        if (fd >= 0)
                                (void)close(fd);
                        return cm_err_set(err, ESRCH, "container %s is not running", s->name);
                }
                *ret_fd = fd;
                return 0;
        }
        return init_ctl_root(s->dir, ret_fd, err);
}

static void write_exit(const nstate *s, int code) {
        cleanup_free char *path = xasprintf("%s/exit", s->dir);
        char buf[16];
        struct stat st;
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
                return;
        /* Unless the init got to write the main process's own code. */
        if (fstat(fd, &st) == 0 && st.st_size == 0)
                (void)write_all(fd, buf, (size_t)snprintf(buf, sizeof buf, "%d\n", code));
        (void)close(fd);
}

int native_stop(cm_backend *b, const char *id, int grace_sec, cm_err *err) {
        native *n = (native *)b;
        nstate s = {0};
        int fd;
        struct pollfd p;

        if (state_load(n, id, &s, err) < 0)
                return -1;
        fd = native_init_pidfd(&s);
        if (fd < 0) {
                net_stop(&s.net); /* its watcher has killed it; reap */
                state_free(&s);
                return 0; /* not running: nothing to stop */
        }
        p = (struct pollfd){fd, POLLIN, 0};
        if (grace_sec > 0 && sys_pidfd_send_signal(fd, SIGTERM) == 0 && poll(&p, 1, grace_sec * 1000) == 1) {
                /* the init wrote the main process's exit code */
        } else {
                (void)sys_pidfd_send_signal(fd, SIGKILL);
                (void)poll(&p, 1, 5000);
                write_exit(&s, 137);
        }
        if (s.server_pid == getpid())
                (void)waitid((idtype_t)P_PIDFD, (id_t)fd, &(siginfo_t){0}, WEXITED | WNOHANG);
        (void)close(fd);
        net_stop(&s.net);
        cg_kill(&s.cg);
        state_free(&s);
        return 0;
}

int native_remove(cm_backend *b, const char *id, bool force, cm_err *err) {
        native *n = (native *)b;
        nstate s = {0};
        int r;

        if (state_load(n, id, &s, err) < 0)
                return -1;
        if (strcmp(s.state, "running") == 0 && !force) {
                r = cm_err_set(err, EBUSY, "container %s is running; stop it first or remove it with force", s.name);
                state_free(&s);
                return r;
        }
        state_kill_init(&s);
        zygote_drop(n, s.id);
        net_stop(&s.net);
        r = cg_destroy(&s.cg);
        state_delete(&s);
        if (r < 0)
                (void)cm_err_sys(err, -r, "container %s removed, but its cgroup could not be removed", s.name);
        state_free(&s);
        return r < 0 ? -1 : 0;
}

/* Moves the labels out of s. */
static void info_from_state(nstate *s, cm_container_info *c) {
        c->id = xstrdup(s->id);
        c->name = xstrdup(s->name);
        c->image = xstrdup(s->image);
        c->state = xstrdup(s->state);
        c->exit_code = s->exit_code < 0 ? 0 : s->exit_code;
        c->created_at = s->created_at;
        c->labels = steal_pointer(&s->labels);
        c->n_labels = s->n_labels;
        s->n_labels = 0;
}

int native_find(cm_backend *b, const char *ref, cm_container_info *ret, cm_err *err) {
        nstate s = {0};
        int r = state_load((native *)b, ref, &s, err);
        if (r < 0)
                return r; /* -ENOENT, or -EINVAL for an ambiguous prefix */
        if (s.ephemeral) {
                state_free(&s);
                return -ENOENT; /* a wait run's: not the agent's to touch */
        }
        info_from_state(&s, ret);
        state_free(&s);
        return 0;
}

int native_list(cm_backend *b, bool all, cm_container_info **ret, size_t *ret_n, cm_err *err) {
        native *n = (native *)b;
        nstate *v = NULL;
        size_t len = 0, m = 0;
        cm_container_info *out;

        if (state_list(n, &v, &len, err) < 0)
                return -1;
        out = xcalloc(len + 1, sizeof *out);
        for (size_t i = 0; i < len; i++) {
                nstate *s = &v[i];
                if (!s->ephemeral && (all || strcmp(s->state, "running") == 0))
                        info_from_state(s, &out[m++]);
                state_free(s);
        }
        free(v);
        *ret = out;
        *ret_n = m;
        return 0;
}

int native_inspect(cm_backend *b, const char *id, char **ret_json, cm_err *err) {
        nstate s = {0};
        if (state_load((native *)b, id, &s, err) < 0)
                return -1;
        *ret_json = state_to_json(&s);
        state_free(&s);
        return 0;
}

static bool idx_at(int fd, size_t i, log_idx *rec) {
        return pread(fd, rec, sizeof *rec, (off_t)(i * sizeof *rec)) == (ssize_t)sizeof *rec;
}

/* Where output written from since_ms on starts: the first index record of
 * that second or later (log_idx; records are in time order, so a binary
 * search of the file), back to the start of its line. */
static size_t since_offset(const char *dir, int64_t since_ms, const char *buf, size_t len) {
        cleanup_free char *path = xasprintf("%s/log.idx", dir);
        cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
        int64_t second = since_ms / 1000 * 1000;
        size_t n = 0, lo = 0, hi, from = len; /* no record: nothing since then */
        struct stat st;
        log_idx rec;

        if (fd >= 0 && fstat(fd, &st) == 0)
                n = (size_t)st.st_size / sizeof rec;
        for (hi = n; lo < hi;) {
                size_t mid = lo + (hi - lo) / 2;
                if (!idx_at(fd, mid, &rec))
                        return 0; /* an index we cannot read: all of it */
                if (rec.unix_ms >= second)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        if (lo < n && idx_at(fd, lo, &rec))
                from = rec.offset < len ? (size_t)rec.offset : len;
        while (from > 0 && from < len && buf[from - 1] != '\n')
                from--;
        return from;
}

int native_logs(cm_backend *b, const char *id, size_t tail, int64_t since_ms, char **ret, size_t *ret_len,
                cm_err *err) {
        nstate s = {0};
        cleanup_free char *path = NULL, *dir = NULL;
        cleanup_close int fd = -1;
        struct stat st;
        char *buf;
        size_t len = 0;
        ssize_t k;

        if (state_load((native *)b, id, &s, err) < 0)
                return -1;
        dir = xstrdup(s.dir);
        path = xasprintf("%s/log", s.dir);
        state_free(&s);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0) {
                *ret = xstrdup("");
                *ret_len = 0;
                return 0;
        }
        buf = xmalloc((size_t)st.st_size + 1);
        while (len < (size_t)st.st_size && (k = read(fd, buf + len, (size_t)st.st_size - len)) > 0)
                len += (size_t)k;
        buf[len] = 0;
        if (since_ms > 0) {
                size_t from = since_offset(dir, since_ms, buf, len);
                memmove(buf, buf + from, len - from + 1);
                len -= from;
        }
        if (tail > 0) {
                /* from the start of the tail-th line from the end */
                size_t lines = 0, from = len;
                if (from > 0 && buf[from - 1] == '\n')
                        from--;
                while (from > 0 && !(buf[from - 1] == '\n' && ++lines == tail))
                        from--;
                memmove(buf, buf + from, len - from + 1);
                len -= from;
        }
        *ret = buf;
        *ret_len = len;
        return 0;
}

/* From the cgroup; what it lacks (io on v1, everything without one) from
 * /proc (procstat.c). */
int native_stats(cm_backend *b, const char *id, cm_stats *ret, cm_err *err) {
        nstate s = {0};
        int r;
        if (state_load((native *)b, id, &s, err) < 0)
                return -1;
        r = cg_stats(&s.cg, ret);
        if (r == 0 && s.cg.mode == CG_V1 && !s.cg.dir[CG_BLKIO] && proc_stats(&s, true, ret) == 0)
                ret->source = "cgroup v1; io from /proc";
        else if (r < 0 && (r = proc_stats(&s, false, ret)) == 0) {
                ret->memory_limit_bytes = (uint64_t)s.limits.memory_bytes; /* the rlimit */
                ret->source = "/proc (no cgroup)";
        }
        if (r < 0)
                r = cm_err_set(err, ESRCH, "container %s is not running: no stats", s.name);
        state_free(&s);
        return r;
}
