/* Pure checks of HTTP request pieces (see http_check.h).  Every function
 * reads only its arguments and never reads past a NUL or `len`. */
#include "transport/http_check.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static bool is_ows(char c) { return c == ' ' || c == '\t'; }

static const char *skip_ows(const char *s, const char *end) {
        while (s < end && is_ows(*s))
                s++;
        return s;
}

static const char *trim_end(const char *start, const char *end) {
        while (end > start && is_ows(end[-1]))
                end--;
        return end;
}

static bool span_eq(const char *s, const char *end, const char *lit) {
        size_t n = strlen(lit);
        return (size_t)(end - s) == n && strncasecmp(s, lit, n) == 0;
}

/* ---- Accept / Content-Type ---------------------------------------------- */

/* A q parameter of zero ("q=0", "q=0.", "q=0.000") means "not acceptable"
 * (RFC 9110 12.4.2); anything else, even malformed, is taken as acceptable. */
static bool q_is_zero(const char *p, const char *end) {
        while (p < end) {
                const char *semi = memchr(p, ';', (size_t)(end - p));
                const char *pe = semi ? semi : end;
                const char *s = skip_ows(p, pe);
                const char *e = trim_end(s, pe);
                if (e - s >= 2 && (s[0] == 'q' || s[0] == 'Q') && s[1] == '=') {
                        s += 2;
                        if (s == e || *s != '0')
                                return false;
                        for (s++; s < e; s++)
                                if (*s != '.' && *s != '0')
                                        return false;
                        return true;
                }
                p = semi ? semi + 1 : end;
        }
        return false;
}

/* How specifically the media range [s, e) names `type`: 3 exact, 2 "x/ *",
 * 1 "* / *", 0 not at all. */
static int range_match(const char *s, const char *e, const char *type) {
        const char *slash = strchr(type, '/');
        size_t main_len = slash ? (size_t)(slash - type) : strlen(type);
        if (span_eq(s, e, type))
                return 3;
        if (span_eq(s, e, "*/*"))
                return 1;
        if ((size_t)(e - s) == main_len + 2 && strncasecmp(s, type, main_len) == 0 && s[main_len] == '/' &&
            s[main_len + 1] == '*')
                return 2;
        return 0;
}

bool cm_http_accepts(const char *accept, const char *type) {
        int best = 0;
        bool best_ok = false;
        const char *p, *end;
        if (!accept || !type)
                return false;
        p = accept;
        end = accept + strlen(accept);
        /* The most specific matching range decides (RFC 9110 12.5.1), so
         * "text/ *, text/event-stream;q=0" refuses event streams. */
        while (p < end) {
                const char *comma = memchr(p, ',', (size_t)(end - p));
                const char *ee = comma ? comma : end;
                const char *semi = memchr(p, ';', (size_t)(ee - p));
                const char *s = skip_ows(p, semi ? semi : ee);
                const char *e = trim_end(s, semi ? semi : ee);
                int m = range_match(s, e, type);
                if (m > best) {
                        best = m;
                        best_ok = !(semi && q_is_zero(semi + 1, ee));
                }
                p = comma ? comma + 1 : end;
        }
        return best_ok;
}

bool cm_http_is_json_type(const char *ct) {
        const char *end, *semi, *s, *e;
        if (!ct)
                return false;
        end = ct + strlen(ct);
        semi = memchr(ct, ';', (size_t)(end - ct));
        s = skip_ows(ct, semi ? semi : end);
        e = trim_end(s, semi ? semi : end);
        return span_eq(s, e, "application/json");
}

/* ---- Host / Origin ------------------------------------------------------ */

static bool name_char(char c, bool v6) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
            c == '_')
                return true;
        return v6 && (c == ':' || c == '%');
}

/* An optional ":digits" port (empty allowed, as RFC 3986 does) and nothing
 * after it. */
static bool port_ok(const char *p) {
        size_t n = 0;
        unsigned v = 0;
        if (*p == 0)
                return true;
        if (*p++ != ':')
                return false;
        for (; *p; p++, n++) {
                if (*p < '0' || *p > '9' || n >= 5)
                        return false;
                v = v * 10 + (unsigned)(*p - '0');
        }
        return v <= 65535;
}

static bool copy_name(const char *s, size_t n, bool v6, char *out, size_t size) {
        if (n == 0 || n >= size)
                return false;
        for (size_t i = 0; i < n; i++) {
                if (!name_char(s[i], v6))
                        return false;
                out[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] - 'A' + 'a') : s[i];
        }
        out[n] = 0;
        /* an IPv6 literal has at least two colons ("::"), which also keeps
         * it from reading as name:port when written bare */
        if (v6) {
                const char *c = strchr(out, ':');
                return c && strchr(c + 1, ':');
        }
        return true;
}

bool cm_http_host_name(const char *hp, bool bare_v6, char *out, size_t size) {
        const char *colon, *last;
        if (!hp || size == 0)
                return false;
        if (hp[0] == '[') {
                const char *close = strchr(hp, ']');
                return close && copy_name(hp + 1, (size_t)(close - hp - 1), true, out, size) && port_ok(close + 1);
        }
        colon = strchr(hp, ':');
        last = strrchr(hp, ':');
        if (colon && colon != last)
                return bare_v6 && copy_name(hp, strlen(hp), true, out, size);
        if (!colon)
                return copy_name(hp, strlen(hp), false, out, size);
        return copy_name(hp, (size_t)(colon - hp), false, out, size) && port_ok(colon);
}

static bool name_admitted(const cm_http_hostpolicy *p, const char *name) {
        char other[CM_HTTP_NAME_MAX];
        if (p->loopback_names &&
            (strcmp(name, "localhost") == 0 || strcmp(name, "127.0.0.1") == 0 || strcmp(name, "::1") == 0))
                return true;
        if (p->bind_name && cm_http_host_name(p->bind_name, true, other, sizeof other) && strcmp(name, other) == 0)
                return true;
        for (size_t i = 0; p->allowed && p->allowed[i]; i++) {
                if (strcmp(p->allowed[i], "*") == 0)
                        return true;
                if (cm_http_host_name(p->allowed[i], true, other, sizeof other) && strcmp(name, other) == 0)
                        return true;
        }
        return false;
}

bool cm_http_host_ok(const cm_http_hostpolicy *p, const char *host) {
        char name[CM_HTTP_NAME_MAX];
        return p && cm_http_host_name(host, false, name, sizeof name) && name_admitted(p, name);
}

/* The host[:port] part of an origin, and whether its scheme is https; NULL
 * when the value is not an origin. */
static const char *origin_rest(const char *origin, bool *ret_https) {
        const char *rest;
        if (strncasecmp(origin, "http://", 7) == 0)
                rest = origin + 7, *ret_https = false;
        else if (strncasecmp(origin, "https://", 8) == 0)
                rest = origin + 8, *ret_https = true;
        else
                return NULL; /* "null", file:, chrome-extension:... */
        /* An origin is scheme://host[:port] and nothing more; userinfo or a
         * path would let "http://localhost@evil" pass a prefix match. */
        return strpbrk(rest, "/@?#\\ ") ? NULL : rest;
}

bool cm_http_origin_ok(const cm_http_hostpolicy *p, const char *origin) {
        char name[CM_HTTP_NAME_MAX];
        const char *rest;
        bool https;
        if (!p || !origin || !(rest = origin_rest(origin, &https)))
                return false;
        if (cm_http_host_name(rest, false, name, sizeof name) && name_admitted(p, name))
                return true;
        return cm_http_origin_listed(p->origins, origin);
}

bool cm_http_origin_canon(const char *origin, char *ret, size_t size) {
        char name[CM_HTTP_NAME_MAX];
        const char *rest, *port;
        bool https;
        int n;
        if (!origin || !(rest = origin_rest(origin, &https)) || !cm_http_host_name(rest, false, name, sizeof name))
                return false;
        /* cm_http_host_name checked the form, so the port (if any) follows
         * the closing bracket, or else the one colon. */
        port = rest[0] == '[' ? strchr(rest, ']') + 1 : strchr(rest, ':');
        port = port && *port == ':' && port[1] ? port + 1 : (https ? "443" : "80");
        while (port[0] == '0' && port[1]) /* ":080" is port 80 */
                port++;
        n = snprintf(ret, size, strchr(name, ':') ? "%s://[%s]:%s" : "%s://%s:%s", https ? "https" : "http", name,
                     port);
        return n > 0 && (size_t)n < size;
}

bool cm_http_origin_listed(const char *const *list, const char *origin) {
        char want[CM_HTTP_NAME_MAX + 16], have[CM_HTTP_NAME_MAX + 16];
        if (!list || !list[0] || !cm_http_origin_canon(origin, want, sizeof want))
                return false;
        for (size_t i = 0; list[i]; i++)
                if (cm_http_origin_canon(list[i], have, sizeof have) && strcmp(want, have) == 0)
                        return true;
        return false;
}

/* ---- Authorization ------------------------------------------------------ */

bool cm_http_bearer_ok(const char *authz, const char *token) {
        const char *cred, *end;
        size_t n, m;
        volatile unsigned char diff;
        if (!authz || !token)
                return false;
        while (is_ows(*authz))
                authz++;
        if (strncasecmp(authz, "bearer", 6) != 0 || !is_ows(authz[6]))
                return false;
        cred = authz + 6;
        while (is_ows(*cred))
                cred++;
        end = trim_end(cred, cred + strlen(cred));
        n = (size_t)(end - cred);
        m = strlen(token);
        /* Every byte of the token is compared whatever the input, so the time
         * taken says nothing about how long a prefix matched. */
        diff = (unsigned char)(n != m);
        for (size_t i = 0; i < m; i++)
                diff |= (unsigned char)(token[i] ^ (i < n ? cred[i] : 0));
        return diff == 0 && m > 0;
}

/* ---- small values -------------------------------------------------------- */

bool cm_http_session_id_ok(const char *id) {
        size_t i;
        if (!id)
                return false;
        for (i = 0; id[i]; i++)
                if (i >= 128 || (unsigned char)id[i] < 0x21 || (unsigned char)id[i] > 0x7e)
                        return false;
        return i > 0;
}

bool cm_http_parse_length(const char *s, uint64_t *ret) {
        uint64_t v = 0;
        if (!s || !*s)
                return false;
        for (; *s; s++) {
                unsigned d = (unsigned)(*s - '0');
                if (d > 9 || v > (UINT64_MAX - d) / 10)
                        return false;
                v = v * 10 + d;
        }
        *ret = v;
        return true;
}

static int parse_port(const char *s, unsigned *ret) {
        uint64_t v;
        if (strlen(s) > 5 || !cm_http_parse_length(s, &v) || v > 65535)
                return -EINVAL;
        *ret = (unsigned)v;
        return 0;
}

static int set_host(const char *s, size_t n, char *out, size_t size) {
        if (n == 0)
                s = "127.0.0.1", n = 9;
        if (n >= size)
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)s[i] <= 0x20 || s[i] == '/' || s[i] == '[' || s[i] == ']' || s[i] == 0x7f)
                        return -EINVAL;
        memcpy(out, s, n);
        out[n] = 0;
        return 0;
}

int cm_http_parse_listen(const char *spec, char *host, size_t size, unsigned *port) {
        const char *colon;
        if (!spec || !*spec)
                return -EINVAL;
        if (spec[0] == '[') {
                const char *close = strchr(spec, ']');
                if (!close || close == spec + 1 || close[1] != ':' || !memchr(spec, ':', (size_t)(close - spec)))
                        return -EINVAL;
                if (set_host(spec + 1, (size_t)(close - spec - 1), host, size) < 0)
                        return -EINVAL;
                return parse_port(close + 2, port);
        }
        colon = strchr(spec, ':');
        if (!colon)
                return set_host("", 0, host, size) < 0 ? -EINVAL : parse_port(spec, port);
        if (strchr(colon + 1, ':'))
                return -EINVAL; /* a bare IPv6 address: it needs [brackets] */
        if (set_host(spec, (size_t)(colon - spec), host, size) < 0)
                return -EINVAL;
        return parse_port(colon + 1, port);
}

/* ---- message shape ------------------------------------------------------- */

/* The MCP layer writes compact JSON with plain ASCII keys, so looking at the
 * top-level keys of the text tells a response from a notification without
 * building a tree; escaped keys are simply not recognised. */
enum cm_http_msg_kind cm_http_msg_kind(const char *json, size_t len) {
        size_t i = 0;
        int depth = 0;
        bool expect_key = false, has_id = false, has_method = false;
        while (i < len && (json[i] == ' ' || json[i] == '\t' || json[i] == '\r' || json[i] == '\n'))
                i++;
        if (i < len && json[i] == '[')
                return CM_HTTP_MSG_BATCH;
        if (i >= len || json[i] != '{')
                return CM_HTTP_MSG_OTHER;
        for (; i < len; i++) {
                char c = json[i];
                if (c == '"') {
                        size_t start = ++i;
                        while (i < len && json[i] != '"')
                                i += json[i] == '\\' ? 2 : 1;
                        if (i >= len)
                                return CM_HTTP_MSG_OTHER;
                        if (depth == 1 && expect_key) {
                                has_id |= i - start == 2 && memcmp(json + start, "id", 2) == 0;
                                has_method |= i - start == 6 && memcmp(json + start, "method", 6) == 0;
                        }
                        expect_key = false;
                } else if (c == '{' || c == '[') {
                        depth++;
                        expect_key = c == '{' && depth == 1;
                } else if (c == '}' || c == ']') {
                        if (--depth == 0)
                                break;
                } else if (c == ',' && depth == 1) {
                        expect_key = true;
                }
        }
        if (depth != 0)
                return CM_HTTP_MSG_OTHER;
        if (has_method)
                return has_id ? CM_HTTP_MSG_REQUEST : CM_HTTP_MSG_NOTIFICATION;
        return has_id ? CM_HTTP_MSG_RESPONSE : CM_HTTP_MSG_OTHER;
}
