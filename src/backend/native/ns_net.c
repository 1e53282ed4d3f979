/* The network namespace: a new one has only a loopback interface, down.
 * Bringing it up is all "network off" needs.
 *
 * Spent namespaces used to be pooled for the next run to completion (one
 * costs about a millisecond to make).  Every sandbox now has a user
 * namespace of its own, which must own its network namespace (in a spent
 * one, owned by the old sandbox's, the new one holds no capability), so
 * that pool is gone; a namespace owned by one shared user namespace would
 * bring it back. */
#include <errno.h>
#include <stdio.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend/native/internal.h"

int net_lo_up(sb_err *e) {
        struct ifreq ifr;
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        int r = 0;

        if (fd < 0)
                return sb_fail(e, SB_STEP_NETWORK, errno, "socket for lo");
        memset(&ifr, 0, sizeof ifr);
        memcpy(ifr.ifr_name, "lo", 3);
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                r = sb_fail(e, SB_STEP_NETWORK, errno, "read the flags of lo");
        else {
                ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
                if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                        r = sb_fail(e, SB_STEP_NETWORK, errno, "bring lo up");
        }
        (void)close(fd);
        return r;
}
