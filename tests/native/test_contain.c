/* Containment: what a sandbox must not see or do.  Each check runs the
 * attempt inside a fresh sandbox and asserts the outcome, as root and (run
 * by the test suite under setpriv) as an unprivileged user. */
#include "nt.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

/* Only the sandbox's own processes: pid 1 (the init) and the few of the
 * pipeline itself. */
static void test_cannot_see_host_processes(void **state) {
        cm_exec_result r;
        cleanup_free char *script =
                xasprintf("ls /proc | grep -E '^[0-9]+$' | sort -n | tr '\\n' ' '; echo; test -e /proc/%d && echo LEAK",
                          (int)getpid());
        nt_sh(script, &r);
        assert_int_equal(r.exit_code, 1); /* test -e failed */
        assert_null(strstr(r.out, "LEAK"));
        /* "1 2 3 4 5 " or so: the init, sh, ls, grep, sort, tr */
        for (char *p = r.out; *p && *p != '\n';) {
                long pid = strtol(p, &p, 10);
                assert_true(pid >= 1 && pid < 20);
                while (*p == ' ')
                        p++;
        }
        cm_exec_result_clear(&r);
        (void)state;
}

static void test_cannot_write_outside_writable_paths(void **state) {
        static const char *const denied[] = {"/usr/x",        "/etc/x",
                                             "/etc/passwd",   "/bin/x",
                                             "/lib/x",        "/proc/sys/kernel/hostname",
                                             "/sys/kernel/x", "/proc/sysrq-trigger"};
        cm_exec_result r;
        for (size_t i = 0; i < ARRAY_SIZE(denied); i++) {
                cleanup_free char *script = xasprintf("echo x > %s && echo WROTE", denied[i]);
                nt_sh(script, &r);
                if (r.exit_code == 0 || strstr(r.out, "WROTE"))
                        fail_msg("could write %s", denied[i]);
                cm_exec_result_clear(&r);
        }
        /* what is writable */
        nt_sh("echo a > /tmp/a && echo b > /workspace/b && echo c > /root/c && echo d > /dev/shm/d && "
              "cat /tmp/a /workspace/b /root/c /dev/shm/d",
              &r);
        assert_int_equal(r.exit_code, 0);
        assert_string_equal(r.out, "a\nb\nc\nd\n");
        cm_exec_result_clear(&r);
        (void)state;
}

static void test_readonly_rootfs(void **state) {
        char *argv[] = {S("/bin/sh"), S("-c"),
                        S("touch /x 2>/dev/null && echo ROOT; touch /root/x 2>/dev/null && echo HOME; "
                          "touch /tmp/x /workspace/x && echo tmp-ok"),
                        NULL};
        cm_run_spec spec = {.argv = argv, .readonly_rootfs = true};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;
        assert_int_equal(nt_run_spec(&spec, &r, &err), 0);
        assert_string_equal(r.out, "tmp-ok\n");
        cm_exec_result_clear(&r);
        (void)state;
}

static void test_no_secrets_from_etc(void **state) {
        cm_exec_result r;
        nt_sh("ls /etc/shadow /etc/gshadow /etc/ssl/private /etc/sudoers 2>/dev/null; ls /etc/ssh; "
              "test -r /etc/passwd && test -r /etc/ld.so.cache && test -d /etc/ssl/certs && echo ok",
              &r);
        assert_string_equal(r.out, "ssh_config\nssh_config.d\nok\n");
        cm_exec_result_clear(&r);
        (void)state;
}

/* A listener on the host's 127.0.0.1 is out of reach: the sandbox's
 * loopback is its own. */
static void test_cannot_reach_host_network(void **state) {
        int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof a;
        struct pollfd p;
        cm_exec_result r;
        cleanup_free char *code = NULL;

        assert_true(l >= 0);
        assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof a), 0);
        assert_int_equal(listen(l, 8), 0);
        assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
        code = xasprintf("import socket, os\n"
                         "s = socket.socket()\n"
                         "s.settimeout(2)\n"
                         "try:\n"
                         "    s.connect(('127.0.0.1', %d)); print('CONNECTED')\n"
                         "except OSError as e: print('refused' if isinstance(e, ConnectionRefusedError) else e)\n"
                         "print(sorted(os.listdir('/sys/class/net')))\n",
                         ntohs(a.sin_port));
        nt_py(code, NULL, &r);
        assert_string_equal(r.out, "refused\n['lo']\n");
        p = (struct pollfd){l, POLLIN, 0};
        assert_int_equal(poll(&p, 1, 0), 0); /* no connection ever arrived */
        (void)close(l);
        cm_exec_result_clear(&r);
        (void)state;
}

/* mount, new namespaces, modules, kexec, bpf, ptrace, keys: refused. */
static void test_dangerous_syscalls_refused(void **state) {
        cm_exec_result r;
        nt_py("import ctypes, os\n"
              "libc = ctypes.CDLL(None, use_errno=True)\n"
              "def t(name, *a):\n"
              "    r = libc.syscall(*a)\n"
              "    print(name, r, os.strerror(ctypes.get_errno()) if r < 0 else '')\n"
              "print('mount', libc.mount(b'tmpfs', b'/tmp', b'tmpfs', 0, None), os.strerror(ctypes.get_errno()))\n"
              "t('unshare-user', 272, 0x10000000)\n"
              "t('unshare-mnt', 272, 0x00020000)\n"
              "t('setns', 308, 0, 0)\n"
              "t('init_module', 175, 0, 0, b'')\n"
              "t('finit_module', 313, 0, b'', 0)\n"
              "t('delete_module', 176, b'x', 0)\n"
              "t('kexec_load', 246, 0, 0, 0, 0)\n"
              "t('bpf', 321, 0, 0, 0)\n"
              "t('ptrace', 101, 16, 1, 0, 0)\n"
              "t('keyctl', 250, 0, 0, 0, 0, 0)\n"
              "t('reboot', 169, 0xfee1dead, 672274793, 0x4321fedc, 0)\n"
              "t('swapoff', 168, b'/x')\n"
              "t('perf_event_open', 298, 0, 0, 0, 0, 0)\n"
              "t('userfaultfd', 323, 0)\n"
              "t('open_by_handle_at', 304, 0, 0, 0)\n"
              "t('pivot_root', 155, b'/', b'/')\n"
              "try:\n"
              "    os.mknod('/tmp/null', 0o20666, os.makedev(1, 3)); print('mknod ok')\n"
              "except OSError as e: print('mknod', e.strerror)\n",
              NULL, &r);
        assert_int_equal(r.exit_code, 0);
        assert_string_equal(r.out, "mount -1 Operation not permitted\n"
                                   "unshare-user -1 Operation not permitted\n"
                                   "unshare-mnt -1 Operation not permitted\n"
                                   "setns -1 Operation not permitted\n"
                                   "init_module -1 Operation not permitted\n"
                                   "finit_module -1 Operation not permitted\n"
                                   "delete_module -1 Operation not permitted\n"
                                   "kexec_load -1 Operation not permitted\n"
                                   "bpf -1 Operation not permitted\n"
                                   "ptrace -1 Operation not permitted\n"
                                   "keyctl -1 Operation not permitted\n"
                                   "reboot -1 Operation not permitted\n"
                                   "swapoff -1 Operation not permitted\n"
                                   "perf_event_open -1 Operation not permitted\n"
                                   "userfaultfd -1 Operation not permitted\n"
                                   "open_by_handle_at -1 Operation not permitted\n"
                                   "pivot_root -1 Operation not permitted\n"
                                   "mknod Operation not permitted\n");
        cm_exec_result_clear(&r);
        (void)state;
}

static void test_privileges(void **state) {
        cm_exec_result r;
        nt_sh("grep -E '^(CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\\t' ' '", &r);
        assert_string_equal(r.out, "CapEff: 00000000800405fb\n"
                                   "CapBnd: 00000000800405fb\n"
                                   "CapAmb: 0000000000000000\n"
                                   "NoNewPrivs: 1\n"
                                   "Seccomp: 2\n");
        cm_exec_result_clear(&r);
        /* pid 1, the init (which spawns exec's commands), holds no more */
        nt_sh("grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/1/status | tr -s '\\t' ' '", &r);
        assert_string_equal(r.out, "CapEff: 00000000800405fb\n"
                                   "CapBnd: 00000000800405fb\n"
                                   "NoNewPrivs: 1\n"
                                   "Seccomp: 2\n");
        cm_exec_result_clear(&r);
        (void)state;
}

/* pid 1 is a copy of the server's memory (its environment, its secrets):
 * nothing in the sandbox may read it. */
static void test_init_memory_private(void **state) {
        cm_exec_result r;
        nt_py("for f in ('mem', 'environ', 'maps'):\n"
              "    try:\n"
              "        open('/proc/1/' + f, 'rb').read(1); print(f, 'READABLE')\n"
              "    except OSError as e: print(f, e.strerror)\n",
              NULL, &r);
        assert_string_equal(r.out, "mem Permission denied\nenviron Permission denied\nmaps Permission denied\n");
        cm_exec_result_clear(&r);
        (void)state;
}

static void test_masked_proc(void **state) {
        cm_exec_result r;
        /* present or not on this kernel, never readable content */
        nt_sh("for f in /proc/kcore /proc/keys /proc/timer_list /proc/sched_debug; do "
              "test -e $f && head -c 1 $f | wc -c; done | sort -u | tr -d ' \\n'; echo; ls /proc/acpi | wc -l; "
              "ls /sys/firmware | wc -l",
              &r);
        assert_true(strcmp(r.out, "0\n0\n0\n") == 0 || strcmp(r.out, "\n0\n0\n") == 0);
        cm_exec_result_clear(&r);
        (void)state;
}

int main(int argc, char **argv) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_cannot_see_host_processes),
                cmocka_unit_test(test_cannot_write_outside_writable_paths),
                cmocka_unit_test(test_readonly_rootfs),
                cmocka_unit_test(test_no_secrets_from_etc),
                cmocka_unit_test(test_cannot_reach_host_network),
                cmocka_unit_test(test_dangerous_syscalls_refused),
                cmocka_unit_test(test_privileges),
                cmocka_unit_test(test_init_memory_private),
                cmocka_unit_test(test_masked_proc),
        };
        int r;
        nt_setup(argc, argv);
        r = cmocka_run_group_tests(tests, NULL, NULL);
        nt_teardown();
        return r;
}
