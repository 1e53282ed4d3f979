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
#include <sys/xattr.h>
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

/* ---- sandbox root is not host root ---------------------------------------- */

/* A directory under /tmp every host user can reach (nobody runs a file
 * from it below), removed at the end. */
static char *tmp_dir(uid_t owner, gid_t group) {
        char *d = xstrdup("/tmp/cm-boundary-XXXXXX");
        assert_non_null(mkdtemp(d));
        assert_int_equal(chmod(d, 0777), 0);
        if (geteuid() == 0)
                assert_int_equal(chown(d, owner, group), 0);
        return d;
}

static void rm_tmp_dir(char *d) {
        cleanup_free char *cmd = xasprintf("rm -rf -- '%s'", d);
        if (strncmp(d, "/tmp/cm-boundary-", 17) == 0)
                (void)!system(cmd);
        free(d);
}

static void run_with_mount(const char *script, const char *src, const char *dst, bool readonly, cm_exec_result *r) {
        char *argv[] = {S("/bin/sh"), S("-c"), S(script), NULL};
        cm_mount m = {src, dst, readonly};
        cm_run_spec spec = {.argv = argv, .mounts = &m, .n_mounts = src ? 1 : 0, .timeout_ms = 20000};
        cm_err err = CM_ERR_INIT;
        if (nt_run_spec(&spec, r, &err) < 0)
                fail_msg("run_wait of %s: %s", script, err.msg);
}

/* Root inside; on the host the sandbox's processes are the range's base (a
 * root server) or the server's own uid (rootless), never 0. */
static void test_root_is_not_host_root(void **state) {
        char *argv[] = {S("sleep"), S("1000"), NULL};
        cm_run_spec spec = {.image = "host", .argv = argv, .argc = 2};
        cm_err err = CM_ERR_INIT;
        cm_exec_result r;
        char *id = NULL, *json = NULL, path[64], line[256];
        unsigned long base, uid[4], gid[4];
        json_t *j;
        FILE *f;
        bool seen_uid = false, seen_gid = false;

        nt_sh("id -u; id -g; grep -E '^(Uid|Gid):' /proc/1/status | tr -s '\\t' ' '", &r);
        assert_string_equal(r.out, "0\n0\nUid: 0 0 0 0\nGid: 0 0 0 0\n");
        cm_exec_result_clear(&r);
        assert_int_equal(nt_b->ops->run(nt_b, &spec, &id, &err), 0);
        assert_int_equal(nt_b->ops->inspect(nt_b, id, &json, &err), 0);
        j = json_loads(json, 0, NULL);
        (void)snprintf(path, sizeof path, "/proc/%d/status",
                       (int)json_integer_value(json_object_get(json_object_get(j, "init"), "pid")));
        f = fopen(path, "re");
        assert_non_null(f);
        while (fgets(line, sizeof line, f)) {
                if (sscanf(line, "Uid: %lu %lu %lu %lu", &uid[0], &uid[1], &uid[2], &uid[3]) == 4)
                        seen_uid = true;
                if (sscanf(line, "Gid: %lu %lu %lu %lu", &gid[0], &gid[1], &gid[2], &gid[3]) == 4)
                        seen_gid = true;
        }
        (void)fclose(f);
        assert_true(seen_uid && seen_gid);
        /* the host's view first: never uid or gid 0 */
        for (int i = 0; i < 4; i++) {
                assert_int_not_equal(uid[i], 0);
                assert_int_not_equal(gid[i], 0);
        }
        base = nt_uid_base();
        if (geteuid() == 0) {
                assert_true(base >= 65536);
                assert_true(base + 65535 <= 0xfffffffeUL);
        } else
                assert_int_equal(base, geteuid());
        for (int i = 0; i < 4; i++)
                assert_int_equal(uid[i], base);
        json_decref(j);
        free(json);
        assert_int_equal(nt_b->ops->remove(nt_b, id, true, &err), 0);
        free(id);
        (void)state;
}

/* The hostile sequence in a read-write mount: a root-owned setuid shell.
 * On the host the file is neither root's nor setuid, and the chmod was
 * refused; every other way to set the bits too.  Without a read-write
 * mount, chmod keeps Docker's behaviour. */
static void test_no_setuid_in_rw_mount(void **state) {
        char *d = tmp_dir(0, 0);
        cleanup_free char *x = xasprintf("%s/x", d);
        cm_exec_result r;
        struct stat st;

        run_with_mount("cd /out && cp /bin/sh x && chown 0:0 x; chmod 4755 x 2>&1 | grep -c 'not permitted'; "
                       "chmod g+s x 2>&1 | grep -c 'not permitted'; "
                       "python3 -c \"\nimport os\n"
                       "for name, f in (('open', lambda: os.open('y', os.O_CREAT | os.O_WRONLY, 0o4755)),\n"
                       "                ('mkdir', lambda: os.mkdir('z', 0o2755)),\n"
                       "                ('fchmod', lambda: os.fchmod(os.open('x', os.O_RDONLY), 0o6755)),\n"
                       "                ('mknod', lambda: os.mknod('n', 0o104755))):\n"
                       "    try:\n        f(); print(name, 'ok')\n"
                       "    except OSError as e: print(name, e.strerror)\n\"",
                       d, "/out", false, &r);
        assert_string_equal(r.out, "1\n1\nopen Operation not permitted\nmkdir Operation not permitted\n"
                                   "fchmod Operation not permitted\nmknod Operation not permitted\n");
        cm_exec_result_clear(&r);
        assert_int_equal(stat(x, &st), 0);
        assert_int_not_equal(st.st_uid, 0);
        assert_int_not_equal(st.st_gid, 0);
        assert_int_equal(st.st_mode & (S_ISUID | S_ISGID), 0);
        /* no read-write mount: as in Docker */
        nt_sh("cp /bin/sh /tmp/x && chmod 4755 /tmp/x && stat -c %a /tmp/x", &r);
        assert_string_equal(r.out, "4755\n");
        cm_exec_result_clear(&r);
        rm_tmp_dir(d);
        (void)state;
}

/* A file capability set inside the sandbox is a namespaced one (v3, its
 * root id the sandbox root's host uid): a host user who runs the file gets
 * nothing.  Here cap_dac_read_search on a copy of cat, which would read
 * /etc/shadow. */
static void test_file_caps_not_honoured_on_host(void **state) {
        char *d;
        cleanup_free char *cat = NULL;
        cm_exec_result r;
        unsigned char xattr[64];
        ssize_t n;
        pid_t pid;
        int st;

        if (geteuid() != 0) {
                printf("note: not root: file capabilities are checked by the root run\n");
                (void)state;
                return;
        }
        /* scripts/deps.sh --test installs libcap2-bin: its absence is a
         * broken set-up, not a reason to pass */
        if (access("/usr/sbin/setcap", X_OK) < 0 || access("/etc/shadow", F_OK) < 0)
                fail_msg("no /usr/sbin/setcap (libcap2-bin) or no /etc/shadow: file capabilities cannot be checked");
        d = tmp_dir(0, 0);
        cat = xasprintf("%s/cat", d);
        run_with_mount("cp /bin/cat /out/cat && /usr/sbin/setcap cap_dac_read_search+ep /out/cat && echo set", d,
                       "/out", false, &r);
        assert_string_equal(r.out, "set\n");
        cm_exec_result_clear(&r);
        /* v3: magic 0x03000000 and a root id, the sandbox root's host uid */
        n = getxattr(cat, "security.capability", xattr, sizeof xattr);
        assert_int_equal(n, 24);
        assert_int_equal(xattr[3], 3);
        assert_int_equal((unsigned long)xattr[20] | (unsigned long)xattr[21] << 8 | (unsigned long)xattr[22] << 16 |
                                 (unsigned long)xattr[23] << 24,
                         nt_uid_base());
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
                if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0 || null < 0)
                        _exit(100);
                (void)dup2(null, 1);
                (void)dup2(null, 2);
                execl(cat, "cat", "/etc/shadow", (char *)NULL);
                _exit(101);
        }
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 1); /* cat: Permission denied */
        rm_tmp_dir(d);
        (void)state;
}

/* A read-write mount of a user's directory: what the sandbox's root makes
 * there is the user's on the host (idmapped), or, where the kernel cannot
 * idmap it, the range's root's. */
static void test_rw_mount_of_a_users_dir(void **state) {
        char *d;
        cleanup_free char *f = NULL, *sub = NULL;
        cm_backend_status bs;
        cm_exec_result r;
        struct stat st;
        bool idmap;

        if (geteuid() != 0) {
                printf("note: not root: owners on the host are ours anyway\n");
                (void)state;
                return;
        }
        nt_b->ops->status(nt_b, &bs);
        idmap = strstr(bs.details, "\"idmapped_mounts\":true") != NULL;
        d = tmp_dir(4242, 4343);
        /* without idmapped mounts the sandbox's root is BASE there, and
         * writes only where the host's modes let BASE write */
        assert_int_equal(chmod(d, idmap ? 0755 : 0777), 0);
        f = xasprintf("%s/f", d);
        sub = xasprintf("%s/sub", d);
        run_with_mount("echo hi > /workspace/f && mkdir /workspace/sub && stat -c '%u %g' /workspace/f; "
                       "touch /usr/x /etc/x 2>/dev/null || echo system-denied; "
                       "echo 1 > /proc/sys/vm/drop_caches 2>/dev/null || echo proc-sys-denied",
                       d, "/workspace", false, &r);
        assert_string_equal(r.out, "0 0\nsystem-denied\nproc-sys-denied\n");
        cm_exec_result_clear(&r);
        assert_int_equal(stat(f, &st), 0);
        assert_int_not_equal(st.st_uid, 0);
        assert_int_equal(st.st_uid, idmap ? 4242 : nt_uid_base());
        assert_int_equal(st.st_gid, idmap ? 4343 : nt_uid_base());
        assert_int_equal(stat(sub, &st), 0);
        assert_int_equal(st.st_uid, idmap ? 4242 : nt_uid_base());
        if (!idmap)
                printf("note: no idmapped mounts here: files are the range's root's\n");
        rm_tmp_dir(d);
        (void)state;
}

/* A directory image over an overlay: the image's root-owned files are the
 * sandbox root's (its lower layer is idmapped, or the image copied with
 * its owners moved into the range), so it can change them (an overlay's
 * copy-up of a file whose owner is not mapped fails); the image itself
 * never changes. */
static void test_dir_image_owned_by_sandbox_root(void **state) {
        char *d = tmp_dir(0, 0);
        cleanup_free char *img = xasprintf("%s/img", d);
        cleanup_free char *mk = xasprintf(
                "set -e; mkdir -p %s/bin %s/data; cp /bin/dash %s/bin/sh; cp $(command -v cat) "
                "%s/bin/; for f in $(ldd /bin/dash $(command -v cat) | grep -o '/[^ ]*\\.so[^ ]*'); do "
                "cp --parents $f %s; done; echo image > %s/data/f; chmod 644 %s/data/f; chmod -R a+rX %s",
                img, img, img, img, img, img, img, img);
        cleanup_free char *data = xasprintf("%s/data/f", img);
        char *argv[] = {S("/bin/sh"), S("-c"), S("echo more >> /data/f && /bin/cat /data/f"),
                        NULL};
        cm_run_spec spec = {.image = img, .argv = argv, .timeout_ms = 20000};
        cm_err err = CM_ERR_INIT;
        cm_exec_result r;
        char buf[32] = {0};
        FILE *f;

        assert_int_equal(system(mk), 0);
        if (nt_run_spec(&spec, &r, &err) < 0)
                fail_msg("run on %s: %s", img, err.msg);
        assert_string_equal(r.out, "image\nmore\n");
        cm_exec_result_clear(&r);
        f = fopen(data, "re");
        assert_non_null(f);
        assert_non_null(fgets(buf, sizeof buf, f));
        (void)fclose(f);
        assert_string_equal(buf, "image\n");
        rm_tmp_dir(d);
        (void)state;
}

/* exec, through the init and through the setns fallback (a request too
 * big for the init): root inside, the range's root (never 0) on the host
 * for what it writes in a read-write mount, and the setuid refusal holds
 * on both paths. */
static void test_exec_paths_are_sandbox_root(void **state) {
        char *d = tmp_dir(0, 0);
        char *sleep_argv[] = {S("sleep"), S("1000"), NULL};
        cm_mount m = {d, "/out", false};
        cm_run_spec spec = {.image = "host", .argv = sleep_argv, .argc = 2, .mounts = &m, .n_mounts = 1};
        cm_err err = CM_ERR_INIT;
        char *id = NULL;

        assert_int_equal(nt_b->ops->run(nt_b, &spec, &id, &err), 0);
        for (int pad = 0; pad <= 100 * 1024; pad += 100 * 1024) {
                cleanup_free char *big = xcalloc((size_t)pad + 1, 1);
                cleanup_free char *file = xasprintf("%s/f%d", d, pad);
                cleanup_free char *script = xasprintf(
                        "id -u; echo x > /out/f%d; chmod 4755 /out/f%d 2>/dev/null || echo setuid-refused", pad, pad);
                char *argv[] = {S("/bin/sh"), S("-c"), script, big, NULL};
                cm_exec_spec es = {.argv = argv, .argc = 4, .timeout_ms = 20000};
                cm_exec_result r;
                struct stat st;

                memset(big, 'x', (size_t)pad);
                if (nt_b->ops->exec(nt_b, id, &es, NULL, &r, &err) < 0)
                        fail_msg("exec (pad %d): %s", pad, err.msg);
                assert_string_equal(r.out, "0\nsetuid-refused\n");
                cm_exec_result_clear(&r);
                assert_int_equal(stat(file, &st), 0);
                assert_int_not_equal(st.st_uid, 0);
                assert_int_not_equal(st.st_gid, 0);
                assert_int_equal(st.st_uid, nt_uid_base());
                assert_int_equal(st.st_mode & (S_ISUID | S_ISGID), 0);
        }
        assert_int_equal(nt_b->ops->remove(nt_b, id, true, &err), 0);
        free(id);
        rm_tmp_dir(d);
        (void)state;
}

/* copy_files into a sandbox: what arrives is the sandbox root's (a root
 * server's copy would otherwise make files of host uid 0, which the
 * sandbox's tmpfs cannot even store), and its root can change it. */
static void test_copy_in_owned_by_sandbox_root(void **state) {
        char *d = tmp_dir(0, 0);
        cleanup_free char *f = xasprintf("%s/in.txt", d);
        char *sleep_argv[] = {S("sleep"), S("1000"), NULL};
        char *argv[] = {S("/bin/sh"), S("-c"), S("stat -c '%u %g' /workspace/in.txt && echo more >> /workspace/in.txt"),
                        NULL};
        cm_run_spec spec = {.image = "host", .argv = sleep_argv, .argc = 2};
        cm_exec_spec es = {.argv = argv, .argc = 3, .timeout_ms = 20000};
        cm_host_path src = {d, "in.txt"};
        cm_copy_stats cs = {0};
        cm_err err = CM_ERR_INIT;
        cm_exec_result r;
        char *id = NULL;
        FILE *fp = fopen(f, "we");

        assert_non_null(fp);
        assert_int_equal(fputs("in\n", fp) >= 0, 1);
        assert_int_equal(fclose(fp), 0);
        assert_int_equal(chmod(f, 0600), 0); /* readable by the server only */
        assert_int_equal(nt_b->ops->run(nt_b, &spec, &id, &err), 0);
        if (nt_b->ops->copy_in(nt_b, id, &src, "/workspace", &cs, &err) < 0)
                fail_msg("copy_in: %s", err.msg);
        if (nt_b->ops->exec(nt_b, id, &es, NULL, &r, &err) < 0)
                fail_msg("exec: %s", err.msg);
        assert_string_equal(r.out, "0 0\n");
        assert_int_equal(r.exit_code, 0);
        cm_exec_result_clear(&r);
        assert_int_equal(nt_b->ops->remove(nt_b, id, true, &err), 0);
        free(id);
        rm_tmp_dir(d);
        (void)state;
}

/* A base that would map sandbox ids onto the host's own users (below
 * 65536) or past the last id is refused at start, naming the setting. */
static void test_userns_base_refused(void **state) {
        static const char *const bad[] = {"0", "1000", "65535", "4294901760", "x"};
        FILE *f = fopen("/etc/subuid", "re");
        char line[256];
        bool has_range = false;

        while (f && fgets(line, sizeof line, f))
                has_range |= strncmp(line, "root:", 5) == 0 || strncmp(line, "0:", 2) == 0;
        if (f)
                (void)fclose(f);
        if (geteuid() != 0 || has_range) {
                printf("note: not root, or root has an /etc/subuid range: CONTAINER_MCP_USERNS_BASE not used\n");
                (void)state;
                return;
        }
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                cm_backend *b;
                cm_backend_status st;
                (void)setenv("CONTAINER_MCP_USERNS_BASE", bad[i], 1);
                b = cm_native_open();
                b->ops->status(b, &st);
                if (st.available || !strstr(st.reason, "CONTAINER_MCP_USERNS_BASE"))
                        fail_msg("base %s: available %d, reason %s", bad[i], st.available, st.reason);
                b->ops->free(b);
        }
        (void)unsetenv("CONTAINER_MCP_USERNS_BASE");
        (void)state;
}

int main(int argc, char **argv) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_no_controlling_terminal),
                cmocka_unit_test(test_socket_families),
                cmocka_unit_test(test_root_is_not_host_root),
                cmocka_unit_test(test_no_setuid_in_rw_mount),
                cmocka_unit_test(test_file_caps_not_honoured_on_host),
                cmocka_unit_test(test_rw_mount_of_a_users_dir),
                cmocka_unit_test(test_dir_image_owned_by_sandbox_root),
                cmocka_unit_test(test_exec_paths_are_sandbox_root),
                cmocka_unit_test(test_copy_in_owned_by_sandbox_root),
                cmocka_unit_test(test_userns_base_refused),
        };
        int r;
        nt_setup(argc, argv);
        r = cmocka_run_group_tests(tests, NULL, NULL);
        nt_teardown();
        return r;
}
