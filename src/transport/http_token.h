/* The bearer token of an HTTP listener nobody gave a token: generated once,
 * kept in a file of the state dir that only the server's user can read, and
 * reused on later starts so configured clients keep working.
 *
 * Loopback is no boundary on a machine with other users: without a token any
 * local user could drive the server (and run containers as its user). */
#ifndef CM_HTTP_TOKEN_H
#define CM_HTTP_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

/* The file's name inside the state dir. */
#define CM_HTTP_TOKEN_FILE "http-token"
/* Random bytes of a generated token (hex-encoded: twice as many characters). */
#define CM_HTTP_TOKEN_BYTES 32

/* True when `s` (len bytes, a trailing newline allowed) is a token this
 * server accepts from its token file: 32 to 512 characters of the RFC 6750
 * token68 set (letters, digits, "-._~+/" and trailing "="). */
bool cm_http_token_valid(const char *s, size_t len);

/* Read the token of <state_dir>/http-token, or generate one and create the
 * file (mode 0600, through a temporary name, never following a symlink).
 * Refuses a file that is a symlink, not a regular file, not owned by the
 * effective uid, readable or writable by anyone else, or holding no valid
 * token, and a state dir that others may write to.  *ret_token and
 * *ret_path are the caller's to free; *ret_created says the file is new. */
int cm_http_token_load(const char *state_dir, char **ret_token, char **ret_path, bool *ret_created, cm_err *err);

#endif
