/* libFuzzer: arbitrary bytes into every pure request check of the HTTP
 * transport (http_check.h): Accept, Content-Type, Host, Origin, bearer
 * token, CORS origins, session id, Content-Length, --http specs and the message-shape scan.
 * The first byte picks the policy; the rest is split at NUL bytes so one
 * input exercises several header values at once.  Nothing may crash, read
 * out of bounds or disagree with itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/http_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_one(const char *v, unsigned flags) {
        static const char *const allowed[] = {"mcp.example.test", "fe80::1", "host.test:8080", NULL};
        static const char *const star[] = {"*", NULL};
        static const char *const origins[] = {"http://localhost:6274", "https://[fe80::1]", NULL};
        cm_http_hostpolicy p = {flags & 1, (flags & 2) ? "10.0.0.1" : NULL, (flags & 4) ? star : allowed,
                                (flags & 16) ? origins : NULL};
        char name[CM_HTTP_NAME_MAX], host[64], canon[CM_HTTP_NAME_MAX + 16];
        unsigned port;
        uint64_t n;

        (void)cm_http_accepts(v, "application/json");
        (void)cm_http_accepts(v, "text/event-stream");
        (void)cm_http_accepts("text/event-stream", v);
        (void)cm_http_is_json_type(v);
        if (cm_http_host_name(v, flags & 8, name, sizeof name)) {
                /* a name we extracted must be accepted as a Host by a policy
                 * that lists exactly it */
                const char *const self[] = {name, NULL};
                cm_http_hostpolicy only = {false, NULL, self};
                if (!(flags & 8) && !cm_http_host_ok(&only, v))
                        __builtin_trap();
        }
        (void)cm_http_host_ok(&p, v);
        (void)cm_http_origin_ok(&p, v);
        if (cm_http_origin_canon(v, canon, sizeof canon)) {
                /* an origin in canonical form is listed by a list of itself,
                 * and passes the Origin check of a policy with that list */
                const char *const self[] = {v, NULL};
                cm_http_hostpolicy only = {false, NULL, NULL, self};
                if (!cm_http_origin_listed(self, canon) || !cm_http_origin_ok(&only, v))
                        __builtin_trap();
        }
        (void)cm_http_bearer_ok(v, "t0ken");
        (void)cm_http_bearer_ok("Bearer t0ken", v);
        (void)cm_http_session_id_ok(v);
        (void)cm_http_parse_length(v, &n);
        if (cm_http_parse_listen(v, host, sizeof host, &port) == 0 && port > 65535)
                __builtin_trap();
        (void)cm_http_msg_kind(v, strlen(v));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        unsigned flags;
        char *buf;
        if (size == 0)
                return 0;
        flags = data[0];
        /* The length-bounded scan sees the raw bytes, NULs and all. */
        (void)cm_http_msg_kind((const char *)data + 1, size - 1);
        buf = malloc(size);
        if (!buf)
                return 0;
        memcpy(buf, data + 1, size - 1);
        buf[size - 1] = 0;
        for (char *p = buf; p < buf + size - 1; p += strlen(p) + 1)
                check_one(p, flags);
        if (size == 1)
                check_one(buf, flags);
        free(buf);
        return 0;
}
