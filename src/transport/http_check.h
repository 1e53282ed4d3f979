/* Pure checks of the pieces of an HTTP request: header values in, a verdict
 * out.  No I/O, no allocation, no global state, so the fuzzer and the unit
 * tests can call them on any bytes.  The HTTP transport runs every one of them
 * before a request reaches the MCP layer. */
#ifndef CM_HTTP_CHECK_H
#define CM_HTTP_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest host name we compare (RFC 1035 allows 253; IPv6 literals with a
 * zone id fit too). */
#define CM_HTTP_NAME_MAX 256

/* True when the Accept header value admits `type` ("text/event-stream"):
 * listed exactly, or through type/x wildcard or a bare wildcard, with a q weight
 * other than 0.  NULL or empty admits nothing. */
bool cm_http_accepts(const char *accept, const char *type);

/* True when a Content-Type value is application/json, in any letter case,
 * with or without parameters ("application/json; charset=utf-8"). */
bool cm_http_is_json_type(const char *content_type);

/* The host name of a Host header value ("name", "name:port", "[v6]",
 * "[v6]:port"), lower-cased, IPv6 brackets removed, into ret_name.  When
 * `bare_v6` is set a value with two or more colons and no brackets is taken as
 * an IPv6 literal (how people write --allow-host ::1).  Returns false when the
 * value is not of that form or the name does not fit. */
bool cm_http_host_name(const char *hostport, bool bare_v6, char *ret_name, size_t size);

/* Which Host and Origin names a listener accepts. */
typedef struct cm_http_hostpolicy {
        bool loopback_names;        /* localhost, 127.0.0.1, ::1 */
        const char *bind_name;      /* the bind address as a name, or NULL */
        const char *const *allowed; /* extra names, NULL-terminated, or NULL; "*" admits any */
        const char *const *origins; /* origins allowed cross-origin (CORS), NULL-terminated, or NULL */
} cm_http_hostpolicy;

/* True when a Host header value names this server under `p`. */
bool cm_http_host_ok(const cm_http_hostpolicy *p, const char *host);

/* True when an Origin header value is http:// or https:// followed by a name
 * `p` admits (any port) and nothing else, or is one of p->origins; "null"
 * and other schemes fail. */
bool cm_http_origin_ok(const cm_http_hostpolicy *p, const char *origin);

/* An origin ("scheme://host[:port]", http or https, nothing more) in one
 * form for comparison: scheme and host lower-case, IPv6 in brackets, the port
 * always written ("http://localhost:80").  False when `origin` is not of that
 * form or does not fit. */
bool cm_http_origin_canon(const char *origin, char *ret, size_t size);

/* True when `origin` is, once canonical, one of `list` (NULL-terminated,
 * may be NULL): the origins the operator allows cross-origin requests from. */
bool cm_http_origin_listed(const char *const *list, const char *origin);

/* True when an Authorization value is "Bearer <token>" (scheme in any case).
 * The comparison takes the same time wherever the first difference is. */
bool cm_http_bearer_ok(const char *authorization, const char *token);

/* True when a session id is 1..128 visible ASCII characters (0x21-0x7E), the
 * form the spec allows. */
bool cm_http_session_id_ok(const char *id);

/* A decimal Content-Length: digits only, no sign, no overflow. */
bool cm_http_parse_length(const char *s, uint64_t *ret);

/* "[HOST:]PORT" as given to --http: "8080", ":8080", "localhost:8080",
 * "0.0.0.0:80", "[::1]:8080".  HOST defaults to 127.0.0.1; an IPv6 HOST needs
 * brackets and is returned without them.  Returns 0, or -EINVAL. */
int cm_http_parse_listen(const char *spec, char *ret_host, size_t size, unsigned *ret_port);

/* What a compact JSON-RPC message sent by the MCP layer is, from its top-level
 * keys, without parsing it into a tree. */
enum cm_http_msg_kind {
        CM_HTTP_MSG_OTHER,        /* not an object or array, or malformed */
        CM_HTTP_MSG_RESPONSE,     /* object with "id" and no "method" */
        CM_HTTP_MSG_REQUEST,      /* object with "method" and "id" */
        CM_HTTP_MSG_NOTIFICATION, /* object with "method" and no "id" */
        CM_HTTP_MSG_BATCH,        /* array */
};
enum cm_http_msg_kind cm_http_msg_kind(const char *json, size_t len);

#endif
