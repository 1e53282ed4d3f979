#include "util/netaddr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/cleanup.h"

static bool v4_local(uint32_t a) {
        return (a >> 24) == 0 || (a >> 24) == 10 || (a >> 24) == 127 || (a >> 16) == 0xa9fe /* 169.254 */ ||
               (a >> 20) == 0xac1 /* 172.16/12 */ || (a >> 16) == 0xc0a8 /* 192.168 */ ||
               (a >> 22) == 0x191 /* 100.64/10 */;
}

static bool v6_local(const struct in6_addr *a6) {
        const uint8_t *b = a6->s6_addr;
        static const uint8_t zero[16];
        if (memcmp(b, zero, 15) == 0 && (b[15] == 0 || b[15] == 1)) /* :: and ::1 */
                return true;
        if ((b[0] == 0xfe && (b[1] & 0xc0) == 0x80) || (b[0] & 0xfe) == 0xfc) /* fe80::/10, fc00::/7 */
                return true;
        if (IN6_IS_ADDR_V4MAPPED(a6) || IN6_IS_ADDR_V4COMPAT(a6))
                return v4_local((uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15]);
        return false;
}

bool cm_host_local(const char *host) {
        struct in_addr a4;
        struct in6_addr a6;
        size_t n = strlen(host);
        if (strcasecmp(host, "localhost") == 0 || (n > 10 && strcasecmp(host + n - 10, ".localhost") == 0))
                return true;
        if (inet_pton(AF_INET, host, &a4) == 1)
                return v4_local(ntohl(a4.s_addr));
        if (inet_pton(AF_INET6, host, &a6) == 1)
                return v6_local(&a6);
        return false;
}

bool cm_sockaddr_local(const struct sockaddr *sa) {
        if (sa->sa_family == AF_INET)
                return v4_local(ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr));
        if (sa->sa_family == AF_INET6)
                return v6_local(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr);
        return true;
}

char *cm_host_of(const char *domain) {
        if (domain[0] == '[') {
                const char *close = strchr(domain, ']');
                return xstrndup(domain + 1, close ? (size_t)(close - domain - 1) : strlen(domain + 1));
        }
        return xstrndup(domain, strcspn(domain, ":"));
}

/* Whether the address literal `host` is in the range "ADDR/BITS" (the
 * first n bytes of `cidr`); anything malformed is no range. */
static bool in_range(const char *cidr, size_t n, const char *host) {
        char net[INET6_ADDRSTRLEN + 5], *slash, *end;
        unsigned char want[16], have[16];
        int family;
        long bits;

        if (n >= sizeof net)
                return false;
        memcpy(net, cidr, n);
        net[n] = 0;
        if (!(slash = strchr(net, '/')))
                return false;
        *slash = 0;
        family = strchr(net, ':') ? AF_INET6 : AF_INET;
        bits = strtol(slash + 1, &end, 10);
        if (!slash[1] || *end || bits < 0 || bits > (family == AF_INET ? 32 : 128) ||
            inet_pton(family, net, want) != 1 || inet_pton(family, host, have) != 1)
                return false;
        for (long i = 0; i < bits; i++) {
                unsigned char m = (unsigned char)(0x80 >> (i % 8));
                if ((want[i / 8] & m) != (have[i / 8] & m))
                        return false;
        }
        return true;
}

bool cm_host_listed(const char *list, const char *domain) {
        cleanup_free char *host = cm_host_of(domain);
        for (const char *p = list; p && *p;) {
                size_t n = strcspn(p, ", ");
                if (n && ((n == strlen(domain) && strncasecmp(p, domain, n) == 0) ||
                          (n == strlen(host) && strncasecmp(p, host, n) == 0) || in_range(p, n, host)))
                        return true;
                p += n;
                p += strspn(p, ", ");
        }
        return false;
}
