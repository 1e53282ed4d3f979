#include "util/err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

__attribute__((format(printf, 3, 0))) static void set_va(cm_err *err, int code, const char *fmt, va_list ap) {
        if (!err)
                return;
        err->code = code > 0 ? code : (code < 0 ? -code : EIO);
        (void)vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        if (!err->msg[0])
                (void)snprintf(err->msg, sizeof err->msg, "%s", strerror(err->code));
}

int cm_err_set(cm_err *err, int code, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        set_va(err, code, fmt, ap);
        va_end(ap);
        return code > 0 ? -code : (code < 0 ? code : -EIO);
}

int cm_err_sys(cm_err *err, int code, const char *fmt, ...) {
        va_list ap;
        int c = code < 0 ? -code : code;
        va_start(ap, fmt);
        set_va(err, c, fmt, ap);
        va_end(ap);
        if (err) {
                size_t n = strlen(err->msg);
                (void)snprintf(err->msg + n, sizeof err->msg - n, ": %s", strerror(c ? c : EIO));
        }
        return c ? -c : -EIO;
}

void cm_err_prefix(cm_err *err, const char *fmt, ...) {
        char old[CM_ERR_MAX];
        va_list ap;
        int n;
        if (!err)
                return;
        memcpy(old, err->msg, sizeof old);
        va_start(ap, fmt);
        n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n + 2 < sizeof err->msg) {
                size_t used = (size_t)n, k = strlen(old), room = sizeof err->msg - 1 - used - 2;
                memcpy(err->msg + used, ": ", 2);
                used += 2;
                k = k < room ? k : room;
                memcpy(err->msg + used, old, k);
                err->msg[used + k] = 0;
        }
}

void cm_err_clear(cm_err *err) {
        if (err) {
                err->code = 0;
                err->msg[0] = 0;
        }
}
