/* The one error convention of container-mcp.
 *
 * A fallible function returns a negative value (usually -errno, or -1 when no
 * errno fits) and, when it takes a `cm_err *err` as its last argument, fills it
 * with a message a person or an agent can act on: what failed, why, and what
 * to change.  Library code never logs; the top of the call chain decides
 * whether the message goes to a log, to an MCP tool result, or both.
 *
 *   if (thing_open(path, &fd, err) < 0)
 *           return -1;                 // err already says why
 *
 * On success `err` is left untouched.  `cm_err_set` overwrites an earlier
 * message so the innermost, most specific cause is kept unless a caller
 * deliberately adds context with `cm_err_prefix`. */
#ifndef CM_ERR_H
#define CM_ERR_H

#include <stdarg.h>
#include <stddef.h>

#define CM_ERR_MAX 1024

typedef struct cm_err {
        int code;             /* errno-like, positive; 0 = no error */
        char msg[CM_ERR_MAX]; /* NUL-terminated, never empty when code != 0 */
} cm_err;

#define CM_ERR_INIT {0, {0}}

__attribute__((format(printf, 3, 4))) int cm_err_set(cm_err *err, int code, const char *fmt, ...);
/* Like cm_err_set, with strerror(code) appended after ": ". */
__attribute__((format(printf, 3, 4))) int cm_err_sys(cm_err *err, int code, const char *fmt, ...);
/* Put "context: " in front of the message already held. */
__attribute__((format(printf, 2, 3))) void cm_err_prefix(cm_err *err, const char *fmt, ...);
void cm_err_clear(cm_err *err);

#endif
