/* The boundary between a sandbox and the host's users: sandbox root is
 * never host root (a user namespace over an unprivileged id range), files
 * a sandbox makes in a read-write mount carry no privilege on the host,
 * the server's terminal does not reach the sandbox, and socket families
 * outside the allowlist are refused.  Each check looks at the real effect:
 * the file's owner and mode as the host sees them, what arrived on a pty,
 * the errno of the call. */
#include "nt.h"

#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>

/* ---- the server's terminal ---------------------------------------------- */

/* Run in a child that has made the pty its controlling terminal: a sandbox
 * tries its /dev/tty; a detached one is looked at from the host (session,
 * controlling tty).  Writes what it saw on `out`. */
static void tty_child(int master, const char *slave_name, int out) {
        char *argv[] = {S("/bin/sh"), S("-c"),
                        S("if (exec 3<>/dev/tty) 2>/dev/null; then echo OPENED; else echo not-opened; fi; "
                          "echo PWNED > /dev/tty 2>/dev/null && echo WROTE; "
                          "head -c 4 /dev/tty 2>/dev/null && echo READ; true"),
                        NULL};
        char *sleep_argv[] = {S("sleep"), S("1000"), NULL};
        cm_run_spec spec = {.argv = argv, .timeout_ms = 20000};
        cm_run_spec det = {.image = "host", .argv = sleep_argv, .argc = 2};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;
        cm_backend *b;
        char *id = NULL, *json = NULL, stat[512], path[64];
        int slave;
        pid_t init_pid = 0;
        json_t *j;

        if (setsid() < 0 || (slave = open(slave_name, O_RDWR | O_CLOEXEC)) < 0 || ioctl(slave, TIOCSCTTY, 0) < 0)
                _exit(3);
        /* keys typed at the terminal, so an old-code read would not block */
        if (write(master, "KEYS\n", 5) != 5)
                _exit(3);
        (void)setenv("CONTAINER_MCP_NATIVE_WARM", "0", 1);
        b = cm_native_open();
        spec.image = "host";
        for (spec.argc = 0; argv[spec.argc];)
                spec.argc++;
        if (b->ops->run_wait(b, &spec, NULL, &r, &err) < 0)
                _exit(4);
        dprintf(out, "%s", r.out);
        /* the detached sandbox's init, from the host: its own session, no
         * controlling tty */
        if (b->ops->run(b, &det, &id, &err) < 0 || b->ops->inspect(b, id, &json, &err) < 0)
                _exit(5);
        j = json_loads(json, 0, NULL);
        init_pid = (pid_t)json_integer_value(json_object_get(json_object_get(j, "init"), "pid"));
        (void)snprintf(path, sizeof path, "/proc/%d/stat", (int)init_pid);
        {
                FILE *f = fopen(path, "re");
                if (!f || !fgets(stat, sizeof stat, f))
                        _exit(6);
                (void)fclose(f);
        }
        {
                /* after "(comm)": state ppid pgrp session tty_nr */
                char *p = strrchr(stat, ')');
                int ppid, pgrp, sid, tty;
                char st;
                if (!p || sscanf(p + 2, "%c %d %d %d %d", &st, &ppid, &pgrp, &sid, &tty) != 5)
                        _exit(7);
                dprintf(out, "init-session-is-server's=%d tty=%d\n", sid == getsid(0), tty);
        }
        json_decref(j);
        free(json);
        (void)b->ops->remove(b, id, true, &err);
        free(id);
        /* a marker after whatever the sandbox may have written */
        if (write(slave, "MARK\n", 5) != 5)
                _exit(8);
        b->ops->free(b);
        _exit(0);
}

/* The server runs with a controlling terminal (a pty here): nothing in a
 * sandbox may write to it or read from it, and the sandbox's processes are
 * in a session of their own. */
static void test_no_controlling_terminal(void **state) {
        int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC), p[2], st;
        char buf[4096], seen[8192] = "";
        size_t len = 0;
        pid_t pid;
        FILE *f;

        assert_true(master >= 0);
        assert_int_equal(grantpt(master), 0);
        assert_int_equal(unlockpt(master), 0);
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                (void)close(p[0]);
                tty_child(master, ptsname(master), p[1]);
        }
        (void)close(p[1]);
        /* what reached the terminal, up to our marker */
        while (!strstr(seen, "MARK")) {
                struct pollfd pf = {master, POLLIN, 0};
                ssize_t n;
                if (poll(&pf, 1, 30000) <= 0)
                        break;
                n = read(master, buf, sizeof buf - 1);
                if (n <= 0)
                        break;
                if (len + (size_t)n < sizeof seen - 1) {
                        memcpy(seen + len, buf, (size_t)n);
                        len += (size_t)n;
                        seen[len] = 0;
                }
        }
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
        f = fdopen(p[0], "r");
        len = fread(buf, 1, sizeof buf - 1, f);
        buf[len] = 0;
        (void)fclose(f);
        (void)close(master);
        assert_non_null(strstr(seen, "MARK"));
        if (strstr(seen, "PWNED"))
                fail_msg("the sandbox wrote to the server's terminal: %s", seen);
        assert_string_equal(buf, "not-opened\ninit-session-is-server's=0 tty=0\n");
        (void)state;
}

/* ---- socket families ---------------------------------------------------- */

static void test_socket_families(void **state) {
        cm_exec_result r;
        nt_py("import ctypes, os, socket\n"
              "libc = ctypes.CDLL(None, use_errno=True)\n"
              "def t(name, fam, typ=1, pair=False):\n"
              "    if pair:\n"
              "        sv = (ctypes.c_int * 2)()\n"
              "        r = libc.socketpair(fam, typ, 0, sv)\n"
              "    else:\n"
              "        r = libc.socket(fam, typ, 0)\n"
              "    e = ctypes.get_errno()\n"
              "    print(name, 'ok' if r >= 0 else os.strerror(e))\n"
              "t('vsock', 40)\n"
              "t('vsock-dgram', 40, 2)\n"
              "t('vsock-high-bits', 0x100000028)\n"
              "t('alg', 38, 5)\n"
              "t('key', 15, 3)\n"
              "t('tipc', 30, 2)\n"
              "t('can', 29, 3)\n"
              "t('rds', 21, 5)\n"
              "t('bluetooth', 31, 1)\n"
              "t('xdp', 44, 3)\n"
              "t('unspec', 0)\n"
              "t('vsock-pair', 40, 1, True)\n"
              "t('unix', 1)\n"
              "t('unix-pair', 1, 1, True)\n"
              "t('inet', 2)\n"
              "t('inet6', 10)\n"
              "t('netlink', 16, 3)\n"
              "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); print('listen ok')\n",
              NULL, &r);
        assert_int_equal(r.exit_code, 0);
        assert_string_equal(r.out, "vsock Address family not supported by protocol\n"
                                   "vsock-dgram Address family not supported by protocol\n"
                                   "vsock-high-bits Address family not supported by protocol\n"
                                   "alg Address family not supported by protocol\n"
                                   "key Address family not supported by protocol\n"
                                   "tipc Address family not supported by protocol\n"
                                   "can Address family not supported by protocol\n"
                                   "rds Address family not supported by protocol\n"
                                   "bluetooth Address family not supported by protocol\n"
                                   "xdp Address family not supported by protocol\n"
                                   "unspec Address family not supported by protocol\n"
                                   "vsock-pair Address family not supported by protocol\n"
                                   "unix ok\n"
                                   "unix-pair ok\n"
                                   "inet ok\n"
                                   "inet6 ok\n"
                                   "netlink ok\n"
                                   "listen ok\n");
        cm_exec_result_clear(&r);
        (void)state;
}

int main(int argc, char **argv) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_no_controlling_terminal),
                cmocka_unit_test(test_socket_families),
        };
        int r;
        nt_setup(argc, argv);
        r = cmocka_run_group_tests(tests, NULL, NULL);
        nt_teardown();
        return r;
}
