/* Checks a value against a JSON Schema, the subset tool schemas use:
 * type (a name or a list of names), properties, required,
 * additionalProperties (boolean or schema), items, enum, const, minimum,
 * maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength,
 * minItems, maxItems, pattern (POSIX extended regex), anyOf, oneOf.
 * Unknown keywords are ignored, as JSON Schema says. */
#ifndef CM_MCP_SCHEMA_H
#define CM_MCP_SCHEMA_H

#include <jansson.h>

#include "util/err.h"

/* Returns 0 when `value` matches `schema`.  Otherwise returns -1 and fills err
 * with one message that names the field by its path below `root` (for
 * example "memory" or "mounts[2].source") and says what was expected and what
 * was given: "mounts[2].source: expected string, got integer". */
int mcp_schema_check(const json_t *schema, const json_t *value, const char *root, cm_err *err);

/* Returns 0 when `schema` is well-formed enough for mcp_schema_check (an
 * object; known keywords carry values of the right type). */
int mcp_schema_valid(const json_t *schema, cm_err *err);

/* Stricter, for our own tool definitions (checked at build time): valid, and
 * every keyword is one mcp_schema_check enforces or an annotation
 * (description, title, default, examples, $comment), so no constraint a
 * schema states goes unchecked; and every "required" name of a schema with
 * "properties" is one of them. */
int mcp_schema_supported(const json_t *schema, cm_err *err);

#endif
