/* Points in time as agents and the docker CLI write them (logs `since`). */
#ifndef CM_WHEN_H
#define CM_WHEN_H

#include <stdint.h>

#include "util/err.h"

/* `s` as unix milliseconds: unix seconds ("1700000000", "1700000000.5"),
 * RFC 3339 ("2026-11-29T13:00:00Z", "...T13:00:00.25+01:00"; no zone:
 * UTC; a date alone: its midnight UTC), or a duration back from now_ms
 * ("10m", "1h30m", "45s", "500ms").  0, or -EINVAL with err saying the
 * three forms. */
int cm_parse_when(const char *s, int64_t now_ms, int64_t *ret_ms, cm_err *err);

#endif
