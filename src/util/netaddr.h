/* Which hosts and addresses are local (this machine, private and
 * link-local networks): what an agent's requests reach only when the
 * operator names the host. */
#ifndef CM_UTIL_NETADDR_H
#define CM_UTIL_NETADDR_H

#include <stdbool.h>
#include <sys/socket.h>

/* A host name or address literal (no port, no brackets): localhost and
 * *.localhost, 0/8, 10/8, 100.64/10, 127/8, 169.254/16, 172.16/12,
 * 192.168/16, ::, ::1, fe80::/10, fc00::/7, and those as v4-mapped. */
bool cm_host_local(const char *host);

/* The same for a socket address (AF_INET, AF_INET6; others: true). */
bool cm_sockaddr_local(const struct sockaddr *sa);

/* The host of "host[:port]" or "[v6][:port]" (owned). */
char *cm_host_of(const char *domain);

/* Whether a comma- (or space-) separated list names `domain`
 * ("host[:port]") or its host alone (case-insensitive), or has a range
 * ("10.0.0.0/8", "fd00::/8") holding its host when that is an address
 * literal (a name is not resolved for this). */
bool cm_host_listed(const char *list, const char *domain);

#endif
