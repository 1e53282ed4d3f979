/* A static probe the native tests run inside a sandbox (the "host" image
 * has no build dir: the tests mount this one's directory read-only), so
 * they depend on no interpreter.
 *
 *   nt_probe syscalls     one line per call: its name and "ok" or the errno's
 *                         name.  Each call runs in a child of its own, so
 *                         one that succeeds (a new user namespace, a
 *                         ptrace) changes nothing for the next.
 *   nt_probe ignore-term  ignore SIGTERM, say "ready" on stdout, wait
 *   nt_probe spew N       write N bytes of numbered lines to stdout, exit 0
 *
 * Each refused call is made so that without the seccomp rule the kernel
 * would answer differently (success, EFAULT, ENOTTY, EBADF...), so a
 * dropped rule shows. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#ifndef KEY_SPEC_PROCESS_KEYRING
#define KEY_SPEC_PROCESS_KEYRING (-2)
#endif
#define KEYCTL_GET_KEYRING_ID 0
#define KCMP_FILE 0
#define MPOL_DEFAULT 0
#define UFFD_USER_MODE_ONLY 1

static long do_clone(unsigned long flags) {
        /* raw clone without a new stack: the child runs on a copy, as after fork */
        long r = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
        if (r == 0)
                syscall(SYS_exit_group, 0);
        if (r > 0)
                (void)waitpid((pid_t)r, NULL, 0);
        return r;
}

static long do_clone3(unsigned long flags) {
        struct clone_args a = {.flags = flags, .exit_signal = SIGCHLD};
        long r = syscall(SYS_clone3, &a, sizeof a);
        if (r == 0)
                syscall(SYS_exit_group, 0);
        if (r > 0)
                (void)waitpid((pid_t)r, NULL, 0);
        return r;
}

static long c_clone_user(void) { return do_clone(CLONE_NEWUSER); }
static long c_clone_user_net(void) { return do_clone(CLONE_NEWUSER | CLONE_NEWNET); }
static long c_clone_user_mnt(void) { return do_clone(CLONE_NEWUSER | CLONE_NEWNS); }
static long c_clone_user_pid(void) { return do_clone(CLONE_NEWUSER | CLONE_NEWPID); }
static long c_clone3_user(void) { return do_clone3(CLONE_NEWUSER); }
static long c_unshare_user(void) { return syscall(SYS_unshare, CLONE_NEWUSER); }
static long c_unshare_user_net(void) { return syscall(SYS_unshare, CLONE_NEWUSER | CLONE_NEWNET); }
static long c_unshare_user_uts(void) { return syscall(SYS_unshare, CLONE_NEWUSER | CLONE_NEWUTS); }
static long c_unshare_user_ipc(void) { return syscall(SYS_unshare, CLONE_NEWUSER | CLONE_NEWIPC); }
static long c_unshare_user_cgroup(void) { return syscall(SYS_unshare, CLONE_NEWUSER | CLONE_NEWCGROUP); }

static long c_io_uring_setup(void) {
        static char params[120]; /* struct io_uring_params, zeroed */
        return syscall(SYS_io_uring_setup, 1, params);
}
static long c_io_uring_enter(void) { return syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0); }
static long c_io_uring_register(void) { return syscall(SYS_io_uring_register, -1, 0, NULL, 0); }

static long c_add_key(void) { return syscall(SYS_add_key, "user", "cm-probe", "v", 1, KEY_SPEC_PROCESS_KEYRING); }
static long c_request_key(void) { return syscall(SYS_request_key, "user", "cm-probe-none", NULL, 0); }
static long c_keyctl(void) { return syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_PROCESS_KEYRING, 1); }

/* On /dev/null: the kernel says ENOTTY, the filter EPERM before it looks */
static long tty_ioctl(unsigned long req) {
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        char c = 'x';
        if (fd < 0)
                return -1;
        return syscall(SYS_ioctl, fd, req, &c);
}
static long c_tiocsti(void) { return tty_ioctl(TIOCSTI); }
/* the kernel reads the request as 32 bits: high bits must not slip past */
static long c_tiocsti_high(void) { return tty_ioctl(0x100000000ul | TIOCSTI); }
static long c_tioclinux(void) { return tty_ioctl(TIOCLINUX); }

static long c_ptrace(void) { return syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0); }
static long c_process_vm_readv(void) {
        char src[8] = "probe", dst[8];
        struct iovec l = {dst, sizeof dst}, r = {src, sizeof src};
        return syscall(SYS_process_vm_readv, getpid(), &l, 1, &r, 1, 0);
}
static long c_kcmp(void) { return syscall(SYS_kcmp, getpid(), getpid(), KCMP_FILE, 0, 0); }
static long c_pidfd_getfd(void) {
        int pfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
        return syscall(SYS_pidfd_getfd, pfd, 0, 0);
}
static long c_bpf(void) { return syscall(SYS_bpf, 0, NULL, 0); }
static long c_perf_event_open(void) { return syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0); }
static long c_userfaultfd(void) { return syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY); }
/* Harmless arguments throughout, should the probe ever run unconfined:
 * no such mount point, an invalid kexec flag, no reboot magic. */
static long c_mount(void) { return syscall(SYS_mount, "none", "/nonexistent-cm-probe", "tmpfs", 0, NULL); }
static long c_fsopen(void) { return syscall(SYS_fsopen, "tmpfs", 0); }
static long c_open_tree(void) { return syscall(SYS_open_tree, AT_FDCWD, "/", 0); }
static long c_setns(void) { return syscall(SYS_setns, -1, 0); /* the kernel: EBADF */ }
static long c_set_mempolicy(void) { return syscall(SYS_set_mempolicy, MPOL_DEFAULT, NULL, 0); }
static long c_move_pages(void) { return syscall(SYS_move_pages, 0, 0, NULL, NULL, NULL, 0); }
static long c_kexec_load(void) { return syscall(SYS_kexec_load, 0, 0, NULL, 0xdead0000ul); }
static long c_init_module(void) { return syscall(SYS_init_module, NULL, 0, ""); }
static long c_reboot(void) { return syscall(SYS_reboot, 0, 0, 0, NULL); }

/* Controls: what a sandbox's programs need, and so must keep working */
static long c_getpid(void) { return syscall(SYS_getpid) > 0 ? 0 : -1; }
static long c_fork(void) { return do_clone(0) > 0 ? 0 : -1; }
static long c_unshare_none(void) { return syscall(SYS_unshare, 0); }
static long c_ioctl_fionread(void) {
        int p[2], n = 0;
        if (pipe2(p, O_CLOEXEC) < 0)
                return -1;
        return syscall(SYS_ioctl, p[0], FIONREAD, &n);
}
static void *thread_fn(void *arg) { return arg; }
static long c_pthread(void) {
        /* glibc tries clone3 first and falls back to clone on ENOSYS */
        pthread_t t;
        int r = pthread_create(&t, NULL, thread_fn, NULL);
        if (r != 0) {
                errno = r;
                return -1;
        }
        return pthread_join(t, NULL) == 0 ? 0 : -1;
}
static long c_socket_unix(void) { return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0) >= 0 ? 0 : -1; }

static const struct {
        const char *name;
        long (*fn)(void);
} calls[] = {
        {"clone-newuser", c_clone_user},
        {"clone-newuser-newnet", c_clone_user_net},
        {"clone-newuser-newns", c_clone_user_mnt},
        {"clone-newuser-newpid", c_clone_user_pid},
        {"clone3-newuser", c_clone3_user},
        {"unshare-newuser", c_unshare_user},
        {"unshare-newuser-newnet", c_unshare_user_net},
        {"unshare-newuser-newuts", c_unshare_user_uts},
        {"unshare-newuser-newipc", c_unshare_user_ipc},
        {"unshare-newuser-newcgroup", c_unshare_user_cgroup},
        {"io_uring_setup", c_io_uring_setup},
        {"io_uring_enter", c_io_uring_enter},
        {"io_uring_register", c_io_uring_register},
        {"add_key", c_add_key},
        {"request_key", c_request_key},
        {"keyctl", c_keyctl},
        {"ioctl-TIOCSTI", c_tiocsti},
        {"ioctl-TIOCSTI-high-bits", c_tiocsti_high},
        {"ioctl-TIOCLINUX", c_tioclinux},
        {"ptrace", c_ptrace},
        {"process_vm_readv", c_process_vm_readv},
        {"kcmp", c_kcmp},
        {"pidfd_getfd", c_pidfd_getfd},
        {"bpf", c_bpf},
        {"perf_event_open", c_perf_event_open},
        {"userfaultfd", c_userfaultfd},
        {"mount", c_mount},
        {"fsopen", c_fsopen},
        {"open_tree", c_open_tree},
        {"setns", c_setns},
        {"set_mempolicy", c_set_mempolicy},
        {"move_pages", c_move_pages},
        {"kexec_load", c_kexec_load},
        {"init_module", c_init_module},
        {"reboot", c_reboot},
        {"control-getpid", c_getpid},
        {"control-fork", c_fork},
        {"control-unshare-0", c_unshare_none},
        {"control-ioctl-FIONREAD", c_ioctl_fionread},
        {"control-pthread_create", c_pthread},
        {"control-socket-AF_UNIX", c_socket_unix},
};

/* The call in a child; its exit status carries the errno (0: it worked). */
static int run_one(long (*fn)(void)) {
        int status = 0;
        pid_t pid = fork();
        if (pid < 0)
                return -1;
        if (pid == 0) {
                long r = fn();
                _exit(r < 0 ? (errno > 0 && errno < 255 ? errno : 255) : 0);
        }
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
                return -1;
        return WEXITSTATUS(status);
}

/* Only under a seccomp filter: the calls are meant for a sandbox. */
static bool filtered(void) {
        char line[256];
        bool yes = false;
        FILE *f = fopen("/proc/self/status", "re");
        while (f && fgets(line, sizeof line, f))
                if (strcmp(line, "Seccomp:\t2\n") == 0)
                        yes = true;
        if (f)
                (void)fclose(f);
        return yes;
}

static int probe_syscalls(void) {
        if (!filtered()) {
                fprintf(stderr, "nt_probe: not under a seccomp filter; run it in a sandbox\n");
                return 2;
        }
        for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
                int e = run_one(calls[i].fn);
                const char *name = e > 0 ? strerrorname_np(e) : NULL;
                if (e == 0)
                        printf("%s ok\n", calls[i].name);
                else if (e < 0)
                        printf("%s crashed\n", calls[i].name);
                else
                        printf("%s %s\n", calls[i].name, name ? name : "?");
        }
        return 0;
}

static int ignore_term(void) {
        struct sigaction sa = {.sa_handler = SIG_IGN};
        (void)sigaction(SIGTERM, &sa, NULL);
        (void)sigaction(SIGINT, &sa, NULL);
        (void)sigaction(SIGHUP, &sa, NULL);
        printf("ready\n");
        (void)fflush(stdout);
        for (;;)
                (void)pause();
        return 0;
}

/* Lines "%09zu\n" (10 bytes each), so any byte's offset names its line. */
static int spew(size_t n) {
        static char buf[65536];
        size_t line = 0;
        while (n > 0) {
                size_t len = 0;
                while (len + 10 <= sizeof buf && len < n) {
                        (void)snprintf(buf + len, 11, "%09zu\n", line++);
                        len += 10;
                }
                if (len > n)
                        len = n;
                if (fwrite(buf, 1, len, stdout) != len)
                        return 1;
                n -= len;
        }
        return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
        if (argc >= 2 && strcmp(argv[1], "syscalls") == 0)
                return probe_syscalls();
        if (argc >= 2 && strcmp(argv[1], "ignore-term") == 0)
                return ignore_term();
        if (argc >= 3 && strcmp(argv[1], "spew") == 0)
                return spew(strtoull(argv[2], NULL, 10));
        fprintf(stderr, "usage: nt_probe syscalls | ignore-term | spew BYTES\n");
        return 2;
}
