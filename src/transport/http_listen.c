/* Listening sockets of the HTTP transport (see http_listen.h). */
#include "transport/http_listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/cleanup.h"

static void classify(const struct sockaddr_storage *ss, http_bind *b) {
        if (ss->ss_family == AF_INET) {
                const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
                uint32_t a = ntohl(in->sin_addr.s_addr);
                b->port = ntohs(in->sin_port);
                b->loopback = (a >> 24) == 127;
                b->wildcard = a == INADDR_ANY;
        } else {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
                const struct in6_addr *a = &in6->sin6_addr;
                b->port = ntohs(in6->sin6_port);
                b->loopback = IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
                b->wildcard = IN6_IS_ADDR_UNSPECIFIED(a);
                b->ipv6 = true;
        }
}

/* Options every TCP listener gets.  Accepted sockets inherit them, so TCP
 * keepalive frees the thread of an idle keep-alive connection whose peer
 * vanished without a FIN. */
static void tune(int fd, int family, bool wildcard) {
        int one = 1, zero = 0, idle = 60, intvl = 10, cnt = 6;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
        if (family == AF_INET6 && wildcard) /* [::] also takes IPv4 */
                (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
}

static int open_bound(const char *spec, const struct addrinfo *ai, bool wildcard, cm_err *err) {
        cleanup_close int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return cm_err_sys(err, errno, "--http %s: socket", spec);
        tune(fd, ai->ai_family, wildcard);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
                if (errno == EADDRINUSE)
                        return cm_err_set(err, EADDRINUSE,
                                          "--http %s: the port is in use; stop what listens there or choose another "
                                          "port (0 picks a free one)",
                                          spec);
                return cm_err_sys(err, errno, "--http %s: bind", spec);
        }
        if (listen(fd, SOMAXCONN) < 0)
                return cm_err_sys(err, errno, "--http %s: listen", spec);
        return take_fd(&fd);
}

int http_listen_tcp(const char *spec, http_bind *b, cm_err *err) {
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
        struct addrinfo *ai = NULL;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        char port[8];
        int rc;

        memset(b, 0, sizeof *b);
        b->fd = -1;
        if (cm_http_parse_listen(spec, b->host, sizeof b->host, &b->port) < 0)
                return cm_err_set(err, EINVAL,
                                  "--http %s: expected [HOST:]PORT, e.g. 8080, 127.0.0.1:8080, 0.0.0.0:8080 or "
                                  "[::1]:8080 (an IPv6 address goes in brackets)",
                                  spec);
        (void)snprintf(port, sizeof port, "%u", b->port);
        rc = getaddrinfo(b->host, port, &hints, &ai);
        if (rc != 0)
                return cm_err_set(err, EINVAL, "--http %s: cannot resolve %s: %s; give an IP address", spec, b->host,
                                  gai_strerror(rc));
        memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
        classify(&ss, b);
        b->fd = open_bound(spec, ai, b->wildcard, err);
        freeaddrinfo(ai);
        if (b->fd < 0)
                return b->fd;
        if (getsockname(b->fd, (struct sockaddr *)&ss, &sl) < 0) {
                rc = cm_err_sys(err, errno, "--http %s: getsockname", spec);
                (void)close(b->fd);
                b->fd = -1;
                return rc;
        }
        classify(&ss, b);
        return 0;
}

/* A socket file nobody answers on is left over from a crash: remove it.  A
 * live one, or anything that is not a socket, is an error. */
static int remove_stale(const char *path, const struct sockaddr_un *sa, cm_err *err) {
        struct stat st;
        cleanup_close int probe = -1;
        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : cm_err_sys(err, errno, "--socket %s", path);
        if (!S_ISSOCK(st.st_mode))
                return cm_err_set(err, EEXIST,
                                  "--socket %s: the path exists and is not a socket; remove it or choose "
                                  "another path",
                                  path);
        probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (probe < 0)
                return cm_err_sys(err, errno, "--socket %s: socket", path);
        if (connect(probe, (const struct sockaddr *)sa, sizeof *sa) == 0 || errno == EAGAIN)
                return cm_err_set(err, EADDRINUSE,
                                  "--socket %s: another server is listening there; stop it or choose "
                                  "another path",
                                  path);
        if (errno != ECONNREFUSED)
                return cm_err_sys(err, errno, "--socket %s: checking for a live server", path);
        if (unlink(path) < 0 && errno != ENOENT)
                return cm_err_sys(err, errno, "--socket %s: removing the stale socket", path);
        return 0;
}

int http_listen_unix(const char *path, int *ret_fd, struct stat *ret_st, cm_err *err) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        cleanup_close int fd = -1;
        mode_t old;
        int rc, e;

        if (strlen(path) >= sizeof sa.sun_path)
                return cm_err_set(err, ENAMETOOLONG,
                                  "--socket %s: the path is longer than %zu bytes; choose a shorter "
                                  "one",
                                  path, sizeof sa.sun_path - 1);
        memcpy(sa.sun_path, path, strlen(path) + 1);
        if (remove_stale(path, &sa, err) < 0)
                return -1;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return cm_err_sys(err, errno, "--socket %s: socket", path);
        /* bind() creates the file with the umask applied, so a tight umask
         * makes it 0600 from birth: no window where others can connect.  The
         * umask is process-wide; this runs at start-up, before any thread
         * creates files. */
        old = umask(0177);
        rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
        e = errno;
        (void)umask(old);
        if (rc < 0)
                return cm_err_sys(err, e, "--socket %s: bind", path);
        if (listen(fd, SOMAXCONN) < 0 || lstat(path, ret_st) < 0) {
                rc = cm_err_sys(err, errno, "--socket %s: listen", path);
                (void)unlink(path);
                return rc;
        }
        *ret_fd = take_fd(&fd);
        return 0;
}

void http_unlink_unix(const char *path, const struct stat *st) {
        struct stat now;
        /* Another server may have replaced our file since; leave theirs. */
        if (lstat(path, &now) == 0 && now.st_dev == st->st_dev && now.st_ino == st->st_ino)
                (void)unlink(path);
}
