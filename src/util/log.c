#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>

static enum cm_log_level min_level = CM_LOG_INFO;

void cm_log_set_level(enum cm_log_level level) { min_level = level; }

void cm_log(enum cm_log_level level, const char *fmt, ...) {
        static const char *const names[] = {"debug", "info", "warn", "error"};
        char line[2048];
        va_list ap;
        int n;
        if (level < min_level)
                return;
        n = snprintf(line, sizeof line, "container-mcp: %s: ", names[level]);
        va_start(ap, fmt);
        (void)vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
        va_end(ap);
        /* One fputs per line so lines of concurrent threads do not interleave. */
        fprintf(stderr, "%s\n", line);
}
