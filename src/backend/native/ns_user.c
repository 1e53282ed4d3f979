/* The user namespace, when the server is not root: the caller's uid and gid
 * become root inside, nothing else is mapped.  The child writes its own maps
 * (allowed for a single line mapping its own id), so the parent need not wait
 * for it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "backend/native/linux.h"

int userns_map(uid_t outer_uid, gid_t outer_gid, sb_err *e) {
        char map[64];

        /* setgroups must be denied before an unprivileged gid_map. */
        if (write_file("/proc/self/setgroups", "deny") < 0 && errno != ENOENT)
                return sb_fail(e, SB_STEP_USERNS, errno, "deny setgroups");
        (void)snprintf(map, sizeof map, "0 %u 1\n", (unsigned)outer_uid);
        if (write_file("/proc/self/uid_map", map) < 0)
                return sb_fail(e, SB_STEP_USERNS, errno, "write uid_map \"0 %u 1\"", (unsigned)outer_uid);
        (void)snprintf(map, sizeof map, "0 %u 1\n", (unsigned)outer_gid);
        if (write_file("/proc/self/gid_map", map) < 0)
                return sb_fail(e, SB_STEP_USERNS, errno, "write gid_map \"0 %u 1\"", (unsigned)outer_gid);
        return 0;
}
