/* The generated bearer token of the HTTP transport (see http_token.h). */
#include "transport/http_token.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"

#define TOKEN_MIN 32
#define TOKEN_MAX 512

static bool token68_char(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || strchr("-._~+/", c);
}

bool cm_http_token_valid(const char *s, size_t len) {
        size_t i = 0;
        if (len > 0 && s[len - 1] == '\n')
                len--;
        if (len < TOKEN_MIN || len > TOKEN_MAX)
                return false;
        while (i < len && s[i] && token68_char(s[i]))
                i++;
        while (i < len && s[i] == '=' && i > 0)
                i++;
        return i == len;
}

/* The state dir, opened; refused when someone else could swap files in it. */
static int open_state_dir(const char *dir, cm_err *err) {
        cleanup_close int fd = -1;
        struct stat st;
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return cm_err_sys(err, errno, "HTTP token: cannot create the state dir %s (CONTAINER_MCP_STATE_DIR)",
                                  dir);
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0)
                return cm_err_sys(err, errno, "HTTP token: state dir %s", dir);
        if (st.st_uid != geteuid() || (st.st_mode & 022))
                return cm_err_set(err, EPERM,
                                  "HTTP token: the state dir %s is owned by uid %u with mode %04o: others could "
                                  "replace the token file there; make it owned by uid %u and not group- or "
                                  "world-writable (chmod 700), or set CONTAINER_MCP_STATE_DIR to such a directory",
                                  dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
        return take_fd(&fd);
}

/* An existing file: -ENOENT when there is none. */
static int read_existing(int dfd, const char *path, char **ret_token, cm_err *err) {
        cleanup_close int fd = openat(dfd, CM_HTTP_TOKEN_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        char buf[TOKEN_MAX + 2];
        struct stat st;
        ssize_t n;
        if (fd < 0 && errno == ENOENT)
                return -ENOENT;
        if (fd < 0 && errno == ELOOP)
                return cm_err_set(err, ELOOP,
                                  "HTTP token: %s is a symbolic link, which is never followed (someone may have "
                                  "planted it); remove it and start again",
                                  path);
        if (fd < 0 || fstat(fd, &st) < 0)
                return cm_err_sys(err, errno, "HTTP token: %s", path);
        if (!S_ISREG(st.st_mode))
                return cm_err_set(err, EINVAL, "HTTP token: %s is not a regular file; remove it and start again", path);
        if (st.st_uid != geteuid() || (st.st_mode & 07777) != 0600)
                return cm_err_set(err, EPERM,
                                  "HTTP token: %s is owned by uid %u with mode %04o; it must be owned by uid %u with "
                                  "mode 0600 so no one else can read it: fix it with chown and chmod 600, or remove "
                                  "it for a new token",
                                  path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
        n = read(fd, buf, sizeof buf - 1);
        if (n < 0)
                return cm_err_sys(err, errno, "HTTP token: reading %s", path);
        if (!cm_http_token_valid(buf, (size_t)n))
                return cm_err_set(err, EINVAL,
                                  "HTTP token: %s holds no valid token (32 to 512 letters, digits or -._~+/); "
                                  "remove it for a new one",
                                  path);
        *ret_token = xstrndup(buf, buf[n - 1] == '\n' ? (size_t)n - 1 : (size_t)n);
        return 0;
}

static void hex(const unsigned char *in, size_t n, char *out) {
        static const char digits[] = "0123456789abcdef";
        for (size_t i = 0; i < n; i++) {
                out[2 * i] = digits[in[i] >> 4];
                out[2 * i + 1] = digits[in[i] & 15];
        }
        out[2 * n] = 0;
}

static int random_bytes(unsigned char *p, size_t n, cm_err *err) {
        while (n > 0) {
                ssize_t r = getrandom(p, n, 0);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return cm_err_sys(err, errno, "HTTP token: getrandom");
                p += r;
                n -= (size_t)r;
        }
        return 0;
}

/* Publish the temporary file under the final name unless a file got there
 * first (then -EEXIST: read that one). */
static int publish(int dfd, const char *tmp, const char *path, cm_err *err) {
        int rc = renameat2(dfd, tmp, dfd, CM_HTTP_TOKEN_FILE, RENAME_NOREPLACE);
        if (rc < 0 && (errno == EINVAL || errno == ENOSYS)) { /* a file system without RENAME_NOREPLACE */
                rc = linkat(dfd, tmp, dfd, CM_HTTP_TOKEN_FILE, 0);
                int e = errno;
                (void)unlinkat(dfd, tmp, 0);
                errno = e;
        }
        if (rc == 0)
                return 0;
        rc = errno;
        (void)unlinkat(dfd, tmp, 0);
        return rc == EEXIST ? -EEXIST : cm_err_sys(err, rc, "HTTP token: creating %s", path);
}

static int create_new(int dfd, const char *path, char **ret_token, cm_err *err) {
        unsigned char raw[CM_HTTP_TOKEN_BYTES], suffix[8];
        char token[2 * CM_HTTP_TOKEN_BYTES + 2], tmp[64], sfx[17];
        cleanup_close int fd = -1;
        size_t len;
        int rc;
        if (random_bytes(raw, sizeof raw, err) < 0 || random_bytes(suffix, sizeof suffix, err) < 0)
                return -1;
        hex(raw, sizeof raw, token);
        hex(suffix, sizeof suffix, sfx);
        (void)snprintf(tmp, sizeof tmp, ".%s.%s", CM_HTTP_TOKEN_FILE, sfx);
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return (void)cm_err_sys(err, errno, "HTTP token: creating a temporary file next to %s", path), -1;
        len = strlen(token);
        token[len] = '\n';
        /* fchmod: the umask may only have narrowed 0600, but say it exactly */
        if (fchmod(fd, 0600) < 0 || write(fd, token, len + 1) != (ssize_t)(len + 1) || fsync(fd) < 0) {
                int e = errno;
                (void)unlinkat(dfd, tmp, 0);
                return (void)cm_err_sys(err, e, "HTTP token: writing %s", path), -1;
        }
        token[len] = 0;
        rc = publish(dfd, tmp, path, err);
        if (rc < 0)
                return rc == -EEXIST ? -EEXIST : -1;
        *ret_token = xstrdup(token);
        return 0;
}

int cm_http_token_load(const char *state_dir, char **ret_token, char **ret_path, bool *ret_created, cm_err *err) {
        cleanup_free char *path = xasprintf("%s/%s", state_dir, CM_HTTP_TOKEN_FILE);
        cleanup_close int dfd = open_state_dir(state_dir, err);
        char *token = NULL;
        int rc;
        if (dfd < 0)
                return -1;
        /* Two rounds: a server starting at the same moment may create the
         * file between our look and our create; then we read its token. */
        for (int round = 0; round < 2; round++) {
                rc = read_existing(dfd, path, &token, err);
                if (rc == 0) {
                        *ret_created = false;
                        break;
                }
                if (rc != -ENOENT)
                        return -1;
                rc = create_new(dfd, path, &token, err);
                if (rc == 0) {
                        *ret_created = true;
                        break;
                }
                if (rc != -EEXIST)
                        return -1;
        }
        if (!token)
                return cm_err_set(err, EAGAIN, "HTTP token: %s keeps changing; start again", path);
        *ret_token = token;
        *ret_path = steal_pointer(&path);
        return 0;
}
