/* Running a program without a shell: posix_spawn in its own process
 * group, stdin fed from memory, stdout and stderr collected up to a cap, a
 * deadline and a cancel fd (spawn.c).  POSIX only: Apple's `container` CLI
 * (backend/apple) and Docker's credential helpers (image/registry_auth.c)
 * run through it. */
#ifndef CM_BACKEND_SPAWN_H
#define CM_BACKEND_SPAWN_H

#include "backend/backend.h"

typedef struct cm_spawn_io {
        const char *stdin_data; /* NULL: /dev/null */
        size_t stdin_len;
        int64_t timeout_ms; /* 0: none */
        const cm_cancel *cancel;
        size_t cap; /* bytes kept per stream */
} cm_spawn_io;

/* Spawn argv (argv[0] a path; no shell), feed stdin, collect stdout and
 * stderr up to the cap, and wait.  0: it ran and ended (ret->exit_code,
 * 128+signal when killed); a timeout kills its process group (SIGTERM, then
 * SIGKILL 2 s later) and sets ret->timed_out.  < 0: it could not be
 * started, or the call was cancelled (-ECANCELED, the process group
 * killed). */
int cm_spawn(char *const *argv, const cm_spawn_io *io, cm_exec_result *ret, cm_err *err);

#endif
