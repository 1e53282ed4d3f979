/* A directory image without overlayfs (rootfs.c): CONTAINER_MCP_NATIVE_OVERLAY=0
 * forces the copy.  The command runs, the image on the host never changes,
 * symlinks are copied as symlinks (one pointing at the host's /usr is not
 * followed and resolves inside), the copy goes with the container, a
 * read-only root stays read-only, and an image over the cap is refused
 * before anything is copied.  Last, as root: with overlays on, an image the
 * kernel refuses as a lower layer (on overlays stacked as deep as they go)
 * is started again on a copy. */
#include "nt.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>

static char img[128];     /* the image, made once */
static char stacked[128]; /* root: a dir holding overlays stacked twice */

static void sh_ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh_ok(const char *fmt, ...) {
        va_list ap;
        char cmd[4096];
        va_start(ap, fmt);
        (void)vsnprintf(cmd, sizeof cmd, fmt, ap);
        va_end(ap);
        if (system(cmd) != 0)
                fail_msg("%s failed", cmd);
}

/* A tiny root: busybox-static when there is one, else dash, cat and their
 * libraries (as test_run's directory image); a file, a symlink to it by an
 * absolute path, and a symlink to the host's /usr. */
static void make_image(const char *dir) {
        if (access("/usr/bin/busybox", X_OK) == 0 && system("! ldd /usr/bin/busybox >/dev/null 2>&1") == 0)
                sh_ok("set -e; mkdir -p %s/bin; cp /usr/bin/busybox %s/bin/busybox; "
                      "for a in sh cat readlink sleep; do ln -s busybox %s/bin/$a; done",
                      dir, dir, dir);
        else
                sh_ok("set -e; mkdir -p %s/bin; cp /bin/dash %s/bin/sh; for b in cat readlink sleep; do "
                      "cp $(command -v $b) %s/bin/$b; done; for f in $(ldd /bin/dash $(command -v cat readlink "
                      "sleep) | grep -o '/[^ ]*\\.so[^ ]*'); do cp --parents $f %s; done",
                      dir, dir, dir, dir);
        sh_ok("set -e; mkdir -p %s/data %s/etc; echo inside > %s/data/in-image.txt; chmod 640 %s/data/in-image.txt; "
              "ln -s /data/in-image.txt %s/link; ln -s /usr %s/hostusr; chmod -R a+rX %s; chmod 755 %s",
              dir, dir, dir, dir, dir, dir, dir, dir);
}

static int setup(void **state) {
        if (!img[0]) {
                (void)snprintf(img, sizeof img, "%s/img", nt_state_dir);
                make_image(img);
        }
        (void)state;
        return 0;
}

static void test_status_says_copy(void **state) {
        cm_backend_status st;
        nt_b->ops->status(nt_b, &st);
        assert_non_null(strstr(st.details, "\"overlay\":false"));
        assert_non_null(strstr(st.details, "CONTAINER_MCP_NATIVE_OVERLAY=0"));
        (void)state;
}

/* The image is the same after the run as before: nothing added, no mode
 * changed. */
static void assert_image_untouched(void) {
        cleanup_free char *x = xasprintf("%s/x", img);
        cleanup_free char *hn = xasprintf("%s/etc/hostname", img);
        cleanup_free char *data = xasprintf("%s/data/in-image.txt", img);
        struct stat st;
        assert_int_equal(access(x, F_OK), -1);
        assert_int_equal(access(hn, F_OK), -1);
        assert_int_equal(stat(data, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0644); /* 640, then a+rX */
}

static void test_run_wait_on_a_copy(void **state) {
        char *argv[] = {S("sh"), S("-c"),
                        S("echo hi > /x; cat /x; cat /link; readlink /hostusr; "
                          "test -e /hostusr/bin || echo no-host-usr; echo w > /workspace/w; cat /workspace/w; "
                          "cat /etc/hostname; echo more >> /data/in-image.txt && cat /data/in-image.txt"),
                        NULL};
        cm_run_spec spec = {.image = img, .argv = argv, .name = "copybox", .timeout_ms = 20000};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;
        cleanup_free char *scratch = xasprintf("%s/scratch", nt_state_dir);

        if (nt_run_spec(&spec, &r, &err) < 0)
                fail_msg("run_wait on a copied directory image: %s", err.msg);
        assert_string_equal(r.err, "");
        assert_string_equal(r.out, "hi\ninside\n/usr\nno-host-usr\nw\ncopybox\ninside\nmore\n");
        assert_int_equal(r.exit_code, 0);
        cm_exec_result_clear(&r);
        assert_image_untouched();
        /* the run's copy is gone with it */
        assert_int_equal(access(scratch, F_OK), -1);
        (void)state;
}

static void test_readonly_root_on_a_copy(void **state) {
        char *argv[] = {S("sh"), S("-c"), S("echo x > /z || echo refused; echo t > /tmp/t && cat /tmp/t"), NULL};
        cm_run_spec spec = {.image = img, .argv = argv, .readonly_rootfs = true, .timeout_ms = 20000};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;

        if (nt_run_spec(&spec, &r, &err) < 0)
                fail_msg("run_wait, read-only root on a copy: %s", err.msg);
        assert_string_equal(r.out, "refused\nt\n");
        cm_exec_result_clear(&r);
        (void)state;
}

/* A detached container: its copy is in its state dir (symlinks as
 * symlinks, owners kept as root), and goes when it is removed. */
static void test_detached_copy_removed(void **state) {
        char *argv[] = {S("sh"), S("-c"), S("echo written > /y; exec sleep 100"), NULL};
        cm_run_spec spec = {.image = img, .argv = argv, .argc = 3};
        cm_err err = CM_ERR_INIT;
        char *id = NULL;
        cleanup_free char *root = NULL, *link = NULL, *y = NULL, *owned = NULL, *cdir = NULL;
        char text[256];
        ssize_t k;
        struct stat st;

        if (geteuid() == 0)
                sh_ok("chown 1234:2345 %s/data/in-image.txt", img);
        if (nt_b->ops->run(nt_b, &spec, &id, &err) < 0)
                fail_msg("run on a copied directory image: %s", err.msg);
        cdir = xasprintf("%s/containers/%s", nt_state_dir, id);
        root = xasprintf("%s/rootfs", cdir);
        link = xasprintf("%s/link", root);
        y = xasprintf("%s/y", root);
        owned = xasprintf("%s/data/in-image.txt", root);
        assert_int_equal(lstat(link, &st), 0);
        assert_true(S_ISLNK(st.st_mode));
        k = readlink(link, text, sizeof text - 1);
        assert_true(k > 0);
        text[k] = 0;
        assert_string_equal(text, "/data/in-image.txt");
        assert_int_equal(lstat(owned, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0644);
        if (geteuid() == 0) {
                /* owners kept, moved into the sandboxes' range */
                assert_int_equal(st.st_uid, nt_uid_base() + 1234);
                assert_int_equal(st.st_gid, nt_uid_base() + 2345);
        }
        for (int i = 0; i < 3000 && access(y, F_OK) < 0; i++) /* up to 30 s */
                (void)usleep(10000);
        assert_int_equal(access(y, F_OK), 0); /* written into the copy */
        assert_image_untouched();

        assert_int_equal(nt_b->ops->remove(nt_b, id, true, &err), 0);
        assert_int_equal(access(root, F_OK), -1);
        assert_int_equal(access(cdir, F_OK), -1);
        free(id);
        (void)state;
}

/* Over the cap (a sparse file: nothing is written), refused up front with
 * what to do; nothing is left behind. */
static void test_too_big(void **state) {
        cleanup_free char *big = xasprintf("%s/bigimg", nt_state_dir);
        cleanup_free char *file = xasprintf("%s/bigimg/blob", nt_state_dir);
        cleanup_free char *scratch = xasprintf("%s/scratch", nt_state_dir);
        char *argv[] = {S("true"), NULL};
        cm_run_spec spec = {.image = big, .argv = argv};
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;
        int fd;

        assert_int_equal(mkdir(big, 0755), 0);
        fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, (off_t)3 << 30), 0);
        (void)close(fd);
        assert_true(nt_run_spec(&spec, &r, &err) < 0);
        assert_int_equal(err.code, EFBIG);
        assert_non_null(strstr(err.msg, "too big to copy"));
        assert_non_null(strstr(err.msg, "overlay"));
        assert_int_equal(access(scratch, F_OK), -1);
        (void)unlink(file);
        (void)rmdir(big);
        (void)state;
}

static void test_nothing_left_behind(void **state) {
        cleanup_free char *cmd = xasprintf("test -z \"$(ls -A %s/containers 2>/dev/null)\" && test ! -e %s/scratch",
                                           nt_state_dir, nt_state_dir);
        assert_int_equal(system(cmd), 0);
        (void)state;
}

/* As root: overlays on again (a new backend without the variable); the
 * image sits on an overlay over an overlay, so a third is refused
 * (EINVAL: stacked too deep) and the sandbox starts on a copy instead. */
static void test_overlay_refused_at_run(void **state) {
        cleanup_free char *image = xasprintf("%s/top", stacked);
        char *argv[] = {S("sh"), S("-c"), S("echo hi > /x; cat /x /link"), NULL};
        cm_run_spec spec = {.image = image, .argv = argv, .timeout_ms = 20000};
        cm_backend_status st;
        cm_exec_result r;
        cm_err err = CM_ERR_INIT;
        cleanup_free char *x = xasprintf("%s/x", image);

        if (!stacked[0])
                skip_because("no stacked overlay to start from (making one needs root and a private mount namespace)");
        nt_b->ops->free(nt_b);
        (void)unsetenv("CONTAINER_MCP_NATIVE_OVERLAY");
        nt_b = nt_open_fresh();
        nt_b->ops->status(nt_b, &st);
        if (!strstr(st.details, "\"overlay\":true"))
                skip_because("the runtime cannot use overlayfs here, so nothing is refused: %s", st.details);
        if (nt_run_spec(&spec, &r, &err) < 0)
                fail_msg("run_wait on an image no overlay takes: %s", err.msg);
        assert_string_equal(r.out, "hi\ninside\n");
        cm_exec_result_clear(&r);
        assert_int_equal(access(x, F_OK), -1);
        (void)state;
}

/* Before anything else (still root, even for --unprivileged): a private
 * mount namespace holding two overlays stacked over a copy of the image. */
static void make_stacked(void) {
        cleanup_free char *base = NULL;
        char dir[] = "/tmp/cm-native-stack-XXXXXX";
        if (geteuid() != 0 || unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            !mkdtemp(dir))
                return;
        base = xasprintf("%s/img", dir);
        make_image(base);
        sh_ok("set -e; cd %s; chmod 755 .; mkdir -p u1 w1 m1 u2 w2 top; "
              "mount -t overlay o -o lowerdir=img,upperdir=u1,workdir=w1 m1; "
              "mount -t overlay o -o lowerdir=m1,upperdir=u2,workdir=w2 top",
              dir);
        (void)snprintf(stacked, sizeof stacked, "%s", dir);
}

int main(int argc, char **argv) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_status_says_copy),
                cmocka_unit_test(test_run_wait_on_a_copy),
                cmocka_unit_test(test_readonly_root_on_a_copy),
                cmocka_unit_test(test_detached_copy_removed),
                cmocka_unit_test(test_too_big),
                cmocka_unit_test(test_nothing_left_behind),
                cmocka_unit_test(test_overlay_refused_at_run), /* last: reopens the backend */
        };
        int r, status = 0;
        pid_t pid;

        make_stacked();
        /* The tests in a child, so that we, still root, can take the
         * overlays down after it (it may become nobody). */
        pid = stacked[0] ? fork() : 0;
        if (pid == 0) {
                /* before the backend opens: it decides once */
                (void)setenv("CONTAINER_MCP_NATIVE_OVERLAY", "0", 1);
                nt_setup(argc, argv);
                r = cmocka_run_group_tests(tests, setup, NULL);
                nt_teardown();
                if (stacked[0])
                        _exit(r);
                return r;
        }
        if (pid < 0 || waitpid(pid, &status, 0) < 0)
                status = 1 << 8;
        {
                cleanup_free char *top = xasprintf("%s/top", stacked);
                cleanup_free char *m1 = xasprintf("%s/m1", stacked);
                (void)umount2(top, MNT_DETACH);
                (void)umount2(m1, MNT_DETACH);
                nt_rm_rf(stacked);
        }
        /* the child wrote the TAP plan and lines (or its skip) */
        tap_done = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
