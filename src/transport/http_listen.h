/* Listening sockets of the HTTP transport: TCP from "[HOST:]PORT" and a Unix
 * socket created mode 0600. */
#ifndef CM_HTTP_LISTEN_H
#define CM_HTTP_LISTEN_H

#include <stdbool.h>
#include <sys/stat.h>

#include "transport/http_check.h"
#include "util/err.h"

typedef struct http_bind {
        int fd;                      /* listening, O_CLOEXEC|O_NONBLOCK */
        char host[CM_HTTP_NAME_MAX]; /* as written in the spec, without brackets */
        bool ipv6;
        unsigned port; /* the port bound (PORT 0 picks one) */
        bool loopback; /* 127.0.0.0/8 or ::1 */
        bool wildcard; /* 0.0.0.0 or :: */
} http_bind;

int http_listen_tcp(const char *spec, http_bind *ret, cm_err *err);

/* Bind `path`, replacing a stale socket file that nothing answers on.
 * *ret_st identifies the file, for http_unlink_unix. */
int http_listen_unix(const char *path, int *ret_fd, struct stat *ret_st, cm_err *err);
/* Remove the socket file if it is still the one we created. */
void http_unlink_unix(const char *path, const struct stat *st);

#endif
