/* Capability names (see capnames.h). */
#include <stddef.h>
#include <strings.h>

#include "util/capnames.h"

static const char *const names[CM_CAP_COUNT] = {
        "CHOWN",           "DAC_OVERRIDE",   "DAC_READ_SEARCH", "FOWNER",     "FSETID",          "KILL",
        "SETGID",          "SETUID",         "SETPCAP",         "LINUX_IMMUTABLE", "NET_BIND_SERVICE",
        "NET_BROADCAST",   "NET_ADMIN",      "NET_RAW",         "IPC_LOCK",   "IPC_OWNER",       "SYS_MODULE",
        "SYS_RAWIO",       "SYS_CHROOT",     "SYS_PTRACE",      "SYS_PACCT",  "SYS_ADMIN",       "SYS_BOOT",
        "SYS_NICE",        "SYS_RESOURCE",   "SYS_TIME",        "SYS_TTY_CONFIG", "MKNOD",        "LEASE",
        "AUDIT_WRITE",     "AUDIT_CONTROL",  "SETFCAP",         "MAC_OVERRIDE", "MAC_ADMIN",     "SYSLOG",
        "WAKE_ALARM",      "BLOCK_SUSPEND",  "AUDIT_READ",      "PERFMON",    "BPF",             "CHECKPOINT_RESTORE",
};

const char *cm_cap_name(int cap) { return cap >= 0 && cap < CM_CAP_COUNT ? names[cap] : NULL; }

int cm_cap_from_name(const char *name) {
        if (!name)
                return -1;
        if (strncasecmp(name, "CAP_", 4) == 0)
                name += 4;
        for (int i = 0; i < CM_CAP_COUNT; i++)
                if (strcasecmp(names[i], name) == 0)
                        return i;
        return -1;
}

uint64_t cm_cap_docker_default(void) {
        static const int set[] = {0 /* CHOWN */,       1 /* DAC_OVERRIDE */, 3 /* FOWNER */, 4 /* FSETID */,
                                  5 /* KILL */,        6 /* SETGID */,       7 /* SETUID */, 8 /* SETPCAP */,
                                  10 /* NET_BIND_SERVICE */, 13 /* NET_RAW */, 18 /* SYS_CHROOT */,
                                  27 /* MKNOD */,      29 /* AUDIT_WRITE */, 31 /* SETFCAP */};
        uint64_t m = 0;
        for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
                m |= (uint64_t)1 << set[i];
        return m;
}
