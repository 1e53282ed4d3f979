/* The seccomp filter: what Docker's default profile refuses, refused with
 * EPERM (clone3 with ENOSYS so libc falls back to clone, whose flags a
 * filter can see); socket families outside a short allowlist; and, in a
 * second program for sandboxes with a read-write host mount, the setuid
 * and setgid bits.
 *
 * libseccomp builds the program once, in the parent; the child only hands
 * the finished BPF to the kernel, since libseccomp allocates. */
#include <errno.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include "backend/native/internal.h"
#include "backend/native/linux.h"
#include "util/cleanup.h"

static const char *const blocked[] = {
        /* file systems and the root */
        "mount",
        "umount",
        "umount2",
        "pivot_root",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "move_mount",
        "open_tree",
        "mount_setattr",
        "open_by_handle_at",
        "quotactl",
        "quotactl_fd",
        "swapon",
        "swapoff",
        /* the kernel itself */
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "create_module",
        "query_module",
        "get_kernel_syms",
        "reboot",
        "bpf",
        "perf_event_open",
        "lookup_dcookie",
        "acct",
        "syslog",
        "uselib",
        "_sysctl",
        "nfsservctl",
        "iopl",
        "ioperm",
        "vm86",
        "vm86old",
        "vhangup",
        "fanotify_init",
        /* other processes */
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "kcmp",
        "pidfd_getfd",
        "setns",
        /* keys, time, memory policy, io_uring, userfaultfd */
        "keyctl",
        "add_key",
        "request_key",
        "settimeofday",
        "clock_settime",
        "clock_adjtime",
        "stime",
        "mbind",
        "set_mempolicy",
        "migrate_pages",
        "move_pages",
        "userfaultfd",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
};

/* Socket families: an allowlist, stricter than Docker's profile (which
 * refuses only AF_VSOCK, 40).  A sandbox needs local sockets, IPv4/IPv6
 * and netlink (glibc's getaddrinfo and iproute2 ask the kernel through it);
 * every other family is kernel code nobody here needs and that has had its
 * share of holes (AF_VSOCK reaches the hypervisor of a VM host; AF_ALG,
 * AF_KEY, AF_TIPC, AF_CAN, AF_RDS, AF_BLUETOOTH, AF_NFC, AF_XDP...).
 * AF_PACKET needs CAP_NET_RAW, which the sandbox never holds.  The answer
 * is EAFNOSUPPORT, what a kernel without the family says, so programs take
 * their "not available here" path rather than fail as on a permission. */
static const unsigned allowed_families[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};

static bool family_allowed(unsigned f) {
        for (size_t i = 0; i < ARRAY_SIZE(allowed_families); i++)
                if (allowed_families[i] == f)
                        return true;
        return false;
}

/* Every family below the highest allowed one that is not allowed, one rule
 * each, and one rule for everything above.  The comparisons are on the
 * whole register: a value with high bits set is above, so refused, even
 * though the kernel reads only the int. */
static int add_family_rules(scmp_filter_ctx ctx, int nr) {
        unsigned top = 0;
        int r;

        for (size_t i = 0; i < ARRAY_SIZE(allowed_families); i++)
                if (allowed_families[i] > top)
                        top = allowed_families[i];
        for (unsigned f = 0; f < top; f++) {
                if (family_allowed(f))
                        continue;
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), nr, 1, SCMP_A0(SCMP_CMP_EQ, f));
                if (r < 0)
                        return r;
        }
        return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), nr, 1, SCMP_A0(SCMP_CMP_GT, top));
}

static int add_socket_rules(scmp_filter_ctx ctx) {
        int r = add_family_rules(ctx, SCMP_SYS(socket));
        if (r >= 0)
                r = add_family_rules(ctx, SCMP_SYS(socketpair));
        if (r < 0)
                return r;
        /* i386's socketcall keeps the family in memory, out of a filter's
         * sight: its socket and socketpair calls are refused (a 32-bit
         * program on a 4.3+ kernel uses the direct syscalls, filtered
         * above). */
        for (unsigned call = 1; call <= 8; call += 7) { /* SYS_SOCKET, SYS_SOCKETPAIR */
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socketcall), 1,
                                     SCMP_A0(SCMP_CMP_EQ, call));
                if (r < 0 && r != -EEXIST && r != -EDOM)
                        return r;
        }
        return 0;
}

/* In a sandbox with a read-write host mount, no file may get the setuid or
 * setgid bit: the mount outlives the sandbox, and such a file would give
 * its owner's ids (a host uid of the sandbox's range, or the mount owner's)
 * to whoever runs it on the host.  Each call that sets a mode, by where
 * its mode argument is.  openat2 carries its mode in a struct the filter
 * cannot read: ENOSYS, so libc falls back to openat (glibc's open never
 * uses it). */
static int add_setid_rules(scmp_filter_ctx ctx) {
        static const struct {
                const char *name;
                unsigned arg;
        } calls[] = {{"chmod", 1},  {"fchmod", 1}, {"fchmodat", 2}, {"fchmodat2", 2}, {"open", 2},
                     {"openat", 3}, {"creat", 1},  {"mkdir", 1},    {"mkdirat", 2},   {"mknod", 1},
                     {"mknodat", 2}};
        static const unsigned bits[] = {S_ISUID, S_ISGID};
        int r;

        for (size_t i = 0; i < ARRAY_SIZE(calls); i++) {
                int nr = seccomp_syscall_resolve_name(calls[i].name);
                if (nr == __NR_SCMP_ERROR && strcmp(calls[i].name, "fchmodat2") == 0)
                        nr = 452; /* Linux 6.6; older libseccomp does not know the name */
                if (nr == __NR_SCMP_ERROR)
                        continue;
                for (size_t b = 0; b < ARRAY_SIZE(bits); b++) {
                        struct scmp_arg_cmp cmp = {calls[i].arg, SCMP_CMP_MASKED_EQ, bits[b], bits[b]};
                        r = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1, &cmp);
                        if (r < 0 && r != -EDOM)
                                return r;
                }
        }
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0);
        return r < 0 && r != -EEXIST && r != -EDOM ? r : 0;
}

static int add_rules(scmp_filter_ctx ctx, bool no_setid) {
        static const unsigned long ns_flags[] = {CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,   CLONE_NEWUSER,
                                                 CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP};
        int r;

        for (size_t i = 0; i < ARRAY_SIZE(blocked); i++) {
                int nr = seccomp_syscall_resolve_name(blocked[i]);
                if (nr == __NR_SCMP_ERROR)
                        continue;
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
                if (r < 0 && r != -EEXIST)
                        return r;
        }
        /* New namespaces: clone and unshare with any namespace flag. */
        for (size_t i = 0; i < ARRAY_SIZE(ns_flags); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                     SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
                if (r < 0)
                        return r;
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
                                     SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
                if (r < 0)
                        return r;
        }
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
        if (r < 0 && r != -EEXIST)
                return r;
        /* Typing into the terminal of whoever started us. */
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                             SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
        if (r < 0)
                return r;
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                             SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX));
        if (r < 0)
                return r;
        r = add_socket_rules(ctx);
        if (r < 0 || !no_setid)
                return r;
        return add_setid_rules(ctx);
}

/* libseccomp 2.5 exports only to an fd: a memfd, read back. */
static int export_prog(scmp_filter_ctx ctx, struct sock_fprog *ret) {
        cleanup_close int fd = memfd_create("cm-seccomp", MFD_CLOEXEC);
        struct stat st;
        void *buf;
        int r;

        if (fd < 0)
                return -errno;
        r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return r;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter))
                return -EINVAL;
        buf = xmalloc((size_t)st.st_size);
        if (pread(fd, buf, (size_t)st.st_size, 0) != st.st_size) {
                free(buf);
                return -EIO;
        }
        ret->len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
        ret->filter = buf;
        return 0;
}

int seccomp_build(struct sock_fprog *ret, bool no_setid, cm_err *err) {
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        int r;

        if (!ctx)
                return cm_err_set(err, ENOMEM, "seccomp: cannot make a filter");
        /* i386 entry points get the same rules rather than a blanket kill,
         * so 32-bit binaries of the host image still run; x32 (rarely
         * built) is refused as a foreign architecture. */
        if (seccomp_arch_native() == SCMP_ARCH_X86_64)
                (void)seccomp_arch_add(ctx, SCMP_ARCH_X86);
        /* A binary tree over syscall numbers: the kernel walks the filter
         * for every syscall when it loads it (to build its cache), so a
         * short path costs 0.1 ms per sandbox instead of 0.5. */
        (void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
        r = add_rules(ctx, no_setid);
        if (r >= 0)
                r = export_prog(ctx, ret);
        seccomp_release(ctx);
        if (r < 0)
                return cm_err_sys(err, -r, "seccomp: cannot build the filter");
        return 0;
}

int seccomp_apply(const struct sock_fprog *prog) {
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog) < 0)
                return -errno;
        return 0;
}
