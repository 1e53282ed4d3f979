/* dexec's run log (issue 11): every run, whole, one JSON object per line,
 * in one file per conversation and UTC day under the run log directory.
 *
 * Pure parts (the file name of an id, the record's text) and the append:
 * tools/dexec.c decides what goes in a record. */
#ifndef CM_TOOLS_RUNLOG_H
#define CM_TOOLS_RUNLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* The longest name part an id keeps as it is. */
#define CM_RUNLOG_NAME_MAX 64

/* The name part of a conversation's files for `id` (len bytes, any bytes,
 * NUL included).  An id of 1-64 letters, digits, '_', '-' and '.', not
 * starting with '.' or '-', is kept as it is; any other is made one (each
 * other byte '_', cut to 40) and gets '~' and 16 hex digits of its
 * SHA-256, so two different ids never share a file ('~' is never in a
 * kept id).  Owned by the caller. */
char *cm_runlog_safe_name(const char *id, size_t len);

/* "<name>.<YYYY-MM-DD>.jsonl" for the UTC day of `unix_ms`. */
char *cm_runlog_file_name(const char *name, int64_t unix_ms);

/* One run, as it is written. */
typedef struct cm_runlog_record {
        int64_t time_ms;           /* unix ms when it started */
        const char *thread_id;     /* the client's _meta.threadId, or NULL */
        const char *thread_id_end; /* its end (it may hold NUL bytes) */
        const char *container;     /* as the call named it */
        const char *container_id;
        const char *command;
        const char *shell;         /* "bash" or "sh" */
        size_t stdin_bytes;
        int exit_code;
        bool exited;               /* false: cancelled before it ended (exit_code null) */
        bool timed_out, cancelled;
        int64_t duration_ms;
        const char *out, *err;     /* what is kept of stdout and stderr */
        size_t out_len, err_len;
        uint64_t out_bytes, err_bytes; /* all that came */
        bool cut;                  /* over the cap: out and err are their first bytes */
        int64_t cap;
} cm_runlog_record;

/* The record as one line of JSON (ending in '\n'). */
char *cm_runlog_line(const cm_runlog_record *r, size_t *ret_len);

/* Open (creating, 0600) `dir`/`file` for appending; refuse anything but a
 * regular file of ours (a symlink, a fifo, another user's file).  Returns
 * the fd (O_CLOEXEC) or < 0 with err set. */
int cm_runlog_open(const char *dir, const char *file, cm_err *err);

/* Refuse when the regular files of `dir` hold `max_total` bytes or more
 * together: the run log's ceiling on disk (concurrent runs may pass it by
 * a record each). */
int cm_runlog_check_total(const char *dir, int64_t max_total, cm_err *err);

/* Append one record with one write under an exclusive flock, so records of
 * concurrent runs (threads or processes) never interleave; a write that
 * fails half-way is cut off again, so the file holds whole records only. */
int cm_runlog_append(int fd, const char *line, size_t len, cm_err *err);

#endif
