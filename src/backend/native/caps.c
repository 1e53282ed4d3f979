/* Capabilities: what is left to root inside a sandbox.
 *
 * Docker's default set, less the three a sandbox without network or devices
 * has no use for (MKNOD, NET_RAW, AUDIT_WRITE).  Raw prctl/capset instead of
 * libcap because the child of a raw clone() must not allocate. */
#include <errno.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "backend/native/linux.h"

#define BIT(c) ((uint64_t)1 << (c))

uint64_t caps_default_keep(void) {
        return BIT(CAP_CHOWN) | BIT(CAP_DAC_OVERRIDE) | BIT(CAP_FSETID) | BIT(CAP_FOWNER) | BIT(CAP_SETGID) |
               BIT(CAP_SETUID) | BIT(CAP_SETFCAP) | BIT(CAP_SETPCAP) | BIT(CAP_NET_BIND_SERVICE) | BIT(CAP_SYS_CHROOT) |
               BIT(CAP_KILL);
}

int caps_last_cap(void) {
        char buf[16];
        if (read_file("/proc/sys/kernel/cap_last_cap", buf, sizeof buf) < 0)
                return CAP_LAST_CAP;
        return atoi(buf);
}

int caps_drop(uint64_t keep, int last_cap) {
        struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
        struct __user_cap_data_struct data[2] = {{0}};

        /* The bounding set first: it needs CAP_SETPCAP, which capset may drop. */
        for (int c = 0; c <= last_cap && c < 64; c++)
                if (!(keep & BIT(c)) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
                        return -errno;
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return -errno;
        data[0].effective = data[0].permitted = (uint32_t)keep;
        data[1].effective = data[1].permitted = (uint32_t)(keep >> 32);
        if (syscall(SYS_capset, &hdr, data) < 0)
                return -errno;
        return 0;
}
