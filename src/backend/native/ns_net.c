/* The network namespace: a new one has only a loopback interface, down.
 * Bringing it up is all "network off" needs. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "util/cleanup.h"

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

/* ---- a pool of spent network namespaces (root only) ---------------------
 *
 * A network namespace costs about a millisecond to make and more to tear
 * down (in a kernel worker, competing with the next sandbox).  One whose
 * sandbox is gone is as good as new: only lo, already up, and the sandbox
 * could change nothing in it (no CAP_NET_ADMIN, /proc/sys read-only).  So
 * runs to completion hand theirs back and the next ones join it with setns.
 * But every sandbox now has a user namespace of its own, which must own its
 * network namespace (a spent one belongs to its old sandbox's, where the
 * new one holds no capability): the pool stays empty.  What is left is
 * for a later design (a namespace owned by a shared user namespace). */

int netns_take(native *n) {
        int fd = -1;
        (void)pthread_mutex_lock(&n->lock);
        if (n->n_netns > 0)
                fd = n->netns_pool[--n->n_netns];
        (void)pthread_mutex_unlock(&n->lock);
        return fd;
}

/* The namespace of a sandbox just started, to give back when it is done. */
int netns_keep(native *n, pid_t pid) {
        /* see above: never kept while every sandbox has its own userns */
        (void)n;
        (void)pid;
        return -1;
}

void netns_give(native *n, int fd) {
        if (fd < 0)
                return;
        (void)pthread_mutex_lock(&n->lock);
        if (n->n_netns < ARRAY_SIZE(n->netns_pool)) {
                n->netns_pool[n->n_netns++] = fd;
                fd = -1;
        }
        (void)pthread_mutex_unlock(&n->lock);
        if (fd >= 0)
                (void)close(fd);
}

void netns_pool_free(native *n) {
        while (n->n_netns > 0)
                (void)close(n->netns_pool[--n->n_netns]);
}
