/* Small helpers over jansson. */
#ifndef CM_JSON_H
#define CM_JSON_H

#include <jansson.h>
#include <stdbool.h>

/* jansson (>= 2.9) provides json_decrefp. */
#define cleanup_json __attribute__((cleanup(json_decrefp)))

/* jansson's name of a value's type, as JSON Schema says it ("integer" for
 * whole numbers). */
const char *cm_json_type_name(const json_t *v);
/* Compact serialisation; aborts on allocation failure. */
char *cm_json_dump(const json_t *v);
/* The string member `key`, or NULL when absent or not a string. */
const char *cm_json_str(const json_t *obj, const char *key);

/* A JSON string of arbitrary bytes (process output): invalid UTF-8 bytes
 * become U+FFFD, NUL bytes are kept. */
json_t *cm_json_bytes(const char *p, size_t n);

#endif
