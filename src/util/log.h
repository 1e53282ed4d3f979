/* Logging for the top of the program (main, transports).  Library code
 * returns cm_err instead.  Everything goes to stderr: on stdio, stdout is the
 * MCP channel and must carry nothing else. */
#ifndef CM_LOG_H
#define CM_LOG_H

enum cm_log_level { CM_LOG_DEBUG, CM_LOG_INFO, CM_LOG_WARN, CM_LOG_ERROR };

void cm_log_set_level(enum cm_log_level level);
__attribute__((format(printf, 2, 3))) void cm_log(enum cm_log_level level, const char *fmt, ...);

#define log_debug(...) cm_log(CM_LOG_DEBUG, __VA_ARGS__)
#define log_info(...) cm_log(CM_LOG_INFO, __VA_ARGS__)
#define log_warn(...) cm_log(CM_LOG_WARN, __VA_ARGS__)
#define log_error(...) cm_log(CM_LOG_ERROR, __VA_ARGS__)

#endif
