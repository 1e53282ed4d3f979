/* The pure parts of the file tools, kept apart so unit tests reach them:
 * a tool's path as a container path, extension checks, line ranges, and
 * the conversion between a file's bytes and the text a tool carries
 * (utf-8, base64, single-byte encodings through iconv). */
#ifndef CM_FILETEXT_H
#define CM_FILETEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

#define CM_FILE_WORKDIR "/workspace"

/* `path` (len bytes, from a tool) as an absolute container path: relative
 * ones are under /workspace; repeated slashes, "." components and a
 * trailing slash go.  ".." stays: the backend resolves it inside the
 * container's root.  Refused: empty, a NUL byte, a name over NAME_MAX. */
int cm_file_path(const char *path, size_t len, char **ret, cm_err *err);

/* Whether the last name of `path` has an extension in `exts` (lower case,
 * no dot, NULL-terminated; NULL: every name is allowed). */
bool cm_file_ext_allowed(char *const *exts, const char *path);

/* The part of `p` (n bytes) from line `offset` (0: the first) on, at most
 * `limit` lines (0: all), as a start and a length.  A line ends after its
 * '\n'. */
void cm_text_lines(const char *p, size_t n, size_t offset, size_t limit, size_t *ret_start, size_t *ret_len);

/* Whether `encoding` is one the file tools know ("utf-8", "base64",
 * "latin-1", ...; any case). */
bool cm_text_encoding_known(const char *encoding);
/* The encodings, for messages: "utf-8, base64, latin-1, ...". */
extern const char cm_text_encodings[];

/* A file's bytes as the text a tool returns (UTF-8, owned, NUL-terminated;
 * it may hold NUL bytes, *ret_len counts them): utf-8 is checked, base64
 * encodes, the others are converted from.  Invalid input is an error that
 * gives its offset and suggests base64. */
int cm_text_decode(const char *encoding, const char *p, size_t n, char **ret, size_t *ret_len, cm_err *err);
/* The text a tool was given as the bytes to write: the reverse. */
int cm_text_encode(const char *encoding, const char *p, size_t n, char **ret, size_t *ret_len, cm_err *err);

#endif
