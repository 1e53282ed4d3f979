/* The seccomp filter: what Docker's default profile refuses, refused with
 * EPERM (clone3 with ENOSYS so libc falls back to clone, whose flags a
 * filter can see).
 *
 * libseccomp builds the program once, in the parent; the child only hands
 * the finished BPF to the kernel, since libseccomp allocates. */
#include <errno.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
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

static int add_rules(scmp_filter_ctx ctx) {
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
        return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                                SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX));
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

int seccomp_build(struct sock_fprog *ret, cm_err *err) {
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
        r = add_rules(ctx);
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
