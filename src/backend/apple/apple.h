#ifndef CM_APPLE_H
#define CM_APPLE_H

#include "backend/backend.h"

/* Apple's `container` CLI (macOS 26, Apple silicon), driven with
 * posix_spawn: the executable is CONTAINER_MCP_APPLE_CLI, else `container`
 * on PATH.  Every call has a deadline (CONTAINER_MCP_APPLE_TIMEOUT_MS,
 * default 120000, the first seed's base CLI timeout). */
cm_backend *cm_apple_open(void);

#endif
