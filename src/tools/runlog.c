/* dexec's run log: file names from hostile ids, records as JSON Lines, and
 * whole-record appends (runlog.h). */
#include "tools/runlog.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/json.h"
#include "util/sha256.h"

#define CUT_PREFIX 40 /* of a changed id, before '~' and the hash */
#define HASH_HEX 16

static bool safe_byte(unsigned char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
               c == '.';
}

/* Kept as it is: a file name no shell or listing misreads, never "." or
 * "..", never hidden, never an option. */
static bool kept_as_is(const char *id, size_t len) {
        if (len == 0 || len > CM_RUNLOG_NAME_MAX || id[0] == '.' || id[0] == '-')
                return false;
        for (size_t i = 0; i < len; i++)
                if (!safe_byte((unsigned char)id[i]))
                        return false;
        return true;
}

char *cm_runlog_safe_name(const char *id, size_t len) {
        uint8_t sum[CM_SHA256_LEN];
        char hex[CM_SHA256_LEN * 2 + 1];
        size_t n = len < CUT_PREFIX ? len : CUT_PREFIX;
        char *name;
        if (kept_as_is(id, len))
                return xstrndup(id, len);
        /* Changed: the hash of the whole id tells it from every other id
         * that reads the same once changed. */
        cm_sha256(id, len, sum);
        cm_hex(sum, HASH_HEX / 2, hex);
        name = xmalloc(n + 1 + HASH_HEX + 1);
        for (size_t i = 0; i < n; i++)
                name[i] = safe_byte((unsigned char)id[i]) && !(i == 0 && (id[0] == '.' || id[0] == '-')) ? id[i] : '_';
        name[n] = '~';
        memcpy(name + n + 1, hex, HASH_HEX + 1);
        return name;
}

char *cm_runlog_file_name(const char *name, int64_t unix_ms) {
        time_t t = (time_t)(unix_ms / 1000);
        struct tm tm;
        (void)gmtime_r(&t, &tm);
        return xasprintf("%s.%04d-%02d-%02d.jsonl", name, tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

static char *iso_time(int64_t unix_ms) {
        time_t t = (time_t)(unix_ms / 1000);
        struct tm tm;
        (void)gmtime_r(&t, &tm);
        return xasprintf("%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                         tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(unix_ms % 1000));
}

char *cm_runlog_line(const cm_runlog_record *r, size_t *ret_len) {
        cleanup_free char *when = iso_time(r->time_ms);
        cleanup_json json_t *o = json_pack(
                "{s:s, s:s, s:s, s:s, s:s, s:I, s:o, s:b, s:b, s:I, s:I, s:I, s:b}", "time", when, "container",
                r->container, "container_id", r->container_id, "command", r->command, "shell", r->shell,
                "stdin_bytes", (json_int_t)r->stdin_bytes, "exit_code",
                r->exited ? json_integer(r->exit_code) : json_null(), "timed_out", r->timed_out, "cancelled",
                r->cancelled, "duration_ms", (json_int_t)r->duration_ms, "stdout_bytes", (json_int_t)r->out_bytes,
                "stderr_bytes", (json_int_t)r->err_bytes, "cut", r->cut);
        char *text, *line;
        size_t n;
        if (r->thread_id)
                (void)json_object_set_new(o, "thread_id",
                                          cm_json_bytes(r->thread_id, (size_t)(r->thread_id_end - r->thread_id)));
        if (r->cut)
                (void)json_object_set_new(o, "cap_bytes", json_integer((json_int_t)r->cap));
        /* last, so a person reading the file sees the facts before pages
         * of output */
        (void)json_object_set_new(o, "stdout", cm_json_bytes(r->out, r->out_len));
        (void)json_object_set_new(o, "stderr", cm_json_bytes(r->err, r->err_len));
        text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!text)
                abort(); /* out of memory, as x* allocators do */
        n = strlen(text);
        line = xmalloc(n + 2);
        memcpy(line, text, n);
        line[n] = '\n';
        line[n + 1] = 0;
        free(text);
        *ret_len = n + 1;
        return line;
}

int cm_runlog_open(const char *dir, const char *file, cm_err *err) {
        cleanup_close int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cleanup_close int fd = -1;
        struct stat st;
        if (dfd < 0)
                return cm_err_sys(err, errno,
                                  "run log directory %s cannot be opened; check it, or have the operator set "
                                  "--runlog-dir (CONTAINER_MCP_RUNLOG_DIR)",
                                  dir);
        /* No symlink followed, no fifo or device opened: the directory is
         * ours alone (config checked), but a file in it is checked anyway. */
        fd = openat(dfd, file, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC, 0600);
        if (fd < 0)
                return cm_err_sys(err, errno, "run log %s/%s cannot be opened for appending; nothing was run", dir,
                                  file);
        if (fstat(fd, &st) < 0)
                return cm_err_sys(err, errno, "run log %s/%s", dir, file);
        if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
                return cm_err_set(err, EPERM,
                                  "run log %s/%s is not a regular file of the server's user; nothing was run; remove "
                                  "it, or have the operator choose another --runlog-dir",
                                  dir, file);
        return take_fd(&fd);
}

int cm_runlog_check_total(const char *dir, int64_t max_total, cm_err *err) {
        DIR *d = opendir(dir);
        struct dirent *e;
        int64_t total = 0;
        if (!d)
                return cm_err_sys(err, errno, "run log directory %s cannot be read", dir);
        while ((e = readdir(d))) {
                struct stat st;
                if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
                        total += st.st_size;
        }
        (void)closedir(d);
        if (total < max_total)
                return 0;
        return cm_err_set(err, ENOSPC,
                          "the run log directory %s holds %lld bytes, CONTAINER_MCP_RUNLOG_MAX_TOTAL allows %lld; "
                          "nothing was run; have the operator remove old run log files or raise "
                          "CONTAINER_MCP_RUNLOG_MAX_TOTAL",
                          dir, (long long)total, (long long)max_total);
}

static int write_all(int fd, const char *p, size_t n) {
        while (n) {
                ssize_t w = write(fd, p, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return w < 0 ? -errno : -EIO;
                p += w;
                n -= (size_t)w;
        }
        return 0;
}

int cm_runlog_append(int fd, const char *line, size_t len, cm_err *err) {
        struct stat st;
        int r;
        while ((r = flock(fd, LOCK_EX)) < 0 && errno == EINTR)
                ;
        if (r < 0)
                return cm_err_sys(err, errno, "locking the run log");
        if (fstat(fd, &st) < 0) {
                r = cm_err_sys(err, errno, "the run log");
        } else if ((r = write_all(fd, line, len)) < 0) {
                /* A partial record would make the rest of the file
                 * unparseable: take it back. */
                (void)ftruncate(fd, st.st_size);
                r = cm_err_sys(err, -r,
                               "writing a record of %zu bytes to the run log (free space where it lives, or lower "
                               "CONTAINER_MCP_RUNLOG_MAX_BYTES)",
                               len);
        }
        (void)flock(fd, LOCK_UN);
        return r < 0 ? -1 : 0;
}
