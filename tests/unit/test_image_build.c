/* The store's side of the native builder (src/image/build.c): paths looked
 * up through a stack of layers as overlayfs shows them (symlinks kept
 * inside the image, whiteouts, opaque directories), paths cleaned as
 * Docker cleans them, and a RUN's upper dir made into a layer (whiteouts
 * and opaque dirs as the OCI spec writes them, the sandbox's set-up left
 * out), read back by the store's own tar reader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "image/build.h"
#include "image/internal.h"
#include "util/cleanup.h"

static char tmp[] = "/tmp/cm-test-build-XXXXXX";

static void put(const char *path, const char *text) {
        cleanup_free char *dir = xstrdup(path);
        char *slash;
        FILE *f;
        for (char *p = strchr(dir + 1, '/'); p; p = strchr(p + 1, '/')) {
                *p = 0;
                (void)mkdir(dir, 0755);
                *p = '/';
        }
        if ((slash = strrchr(dir, '/')) && slash[1] == 0) {
                (void)mkdir(dir, 0755);
                return;
        }
        f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

/* Three layers, bottom first: l0 has /usr/bin/tool, /bin -> usr/bin, /etc/x,
 * /d/{a,b}; l1 whiteouts /etc/x and makes /d opaque with /d/c; l2 has
 * /up -> ../../../usr (a link that tries to climb out) and /loop -> /loop. */
static char **layers(void) {
        char **v = xcalloc(4, sizeof *v);
        cleanup_free char *l0 = xasprintf("%s/l0", tmp), *l1 = xasprintf("%s/l1", tmp), *l2 = xasprintf("%s/l2", tmp);
        cleanup_free char *p = NULL;

        put((free(p), p = xasprintf("%s/usr/bin/tool", l0)), "tool");
        assert_int_equal(symlink("usr/bin", (free(p), p = xasprintf("%s/bin", l0))), 0);
        put((free(p), p = xasprintf("%s/etc/x", l0)), "x");
        put((free(p), p = xasprintf("%s/d/a", l0)), "a");
        put((free(p), p = xasprintf("%s/d/b", l0)), "b");
        put((free(p), p = xasprintf("%s/etc/", l1)), "");
        if (mknod((free(p), p = xasprintf("%s/etc/x", l1)), S_IFCHR | 0600, makedev(0, 0)) < 0) {
                free(v);
                return NULL; /* no whiteouts here */
        }
        put((free(p), p = xasprintf("%s/d/c", l1)), "c");
        assert_int_equal(setxattr((free(p), p = xasprintf("%s/d", l1)), "user.overlay.opaque", "y", 1, 0), 0);
        put((free(p), p = xasprintf("%s/", l2)), "");
        assert_int_equal(symlink("../../../usr", (free(p), p = xasprintf("%s/up", l2))), 0);
        assert_int_equal(symlink("/loop", (free(p), p = xasprintf("%s/loop", l2))), 0);
        v[0] = xstrdup(l2);
        v[1] = xstrdup(l1);
        v[2] = xstrdup(l0);
        return v;
}

static void test_lookup(void **state) {
        char **v = layers();
        struct stat st;
        char *res = NULL;
        (void)state;
        if (!v)
                skip_because("cannot make a 0/0 character device (a whiteout) here");
        /* through a symlink in a lower layer */
        assert_int_equal(img_layers_lookup(v, "bin/tool", true, &st, &res, NULL), 0);
        assert_string_equal(res, "usr/bin/tool");
        assert_true(S_ISREG(st.st_mode));
        free(res);
        /* the link itself, unfollowed */
        assert_int_equal(img_layers_lookup(v, "bin", false, &st, &res, NULL), 0);
        assert_true(S_ISLNK(st.st_mode));
        free(res);
        /* a link climbing out stays in the image: ../../../usr is /usr */
        assert_int_equal(img_layers_lookup(v, "up/bin/tool", true, &st, &res, NULL), 0);
        assert_string_equal(res, "usr/bin/tool");
        free(res);
        /* a whiteout hides the lower file */
        assert_int_equal(img_layers_lookup(v, "etc/x", true, &st, NULL, NULL), -ENOENT);
        /* an opaque directory hides what is below it, not its own */
        assert_int_equal(img_layers_lookup(v, "d/a", true, &st, NULL, NULL), -ENOENT);
        assert_int_equal(img_layers_lookup(v, "d/c", true, &st, NULL, NULL), 0);
        /* a directory as overlayfs merges it: d is opaque in l1, so only c;
         * etc: x is whited out */
        {
                img_dirent *d;
                size_t n;
                assert_int_equal(img_layers_list(v, "d", &d, &n), 0);
                assert_int_equal(n, 1);
                assert_string_equal(d[0].name, "c");
                assert_int_equal(d[0].layer, 1);
                img_dirents_free(d, n);
                assert_int_equal(img_layers_list(v, "etc", &d, &n), 0);
                assert_int_equal(n, 0);
                img_dirents_free(d, n);
                assert_int_equal(img_layers_list(v, "", &d, &n), 0);
                assert_true(n == 6); /* bin d etc loop up usr */
                img_dirents_free(d, n);
                assert_int_equal(img_layers_list(v, "nope", &d, &n), -ENOENT);
        }
        /* a loop ends */
        assert_int_equal(img_layers_lookup(v, "loop/x", true, &st, NULL, NULL), -ELOOP);
        assert_int_equal(img_layers_lookup(v, "usr/bin/tool/x", true, &st, NULL, NULL), -ENOTDIR);
        for (char **p = v; *p; p++)
                free(*p);
        free(v);
}

static void test_clean(void **state) {
        static const char *const cases[][3] = {
                {"a/b", "a/b", "0"},
                {"/a//b/", "a/b", "0"},
                {"./a/./b", "a/b", "0"},
                {"a/../b", "b", "0"},
                {"../../etc/passwd", "etc/passwd", "1"},
                {"a/../../b", "b", "1"},
                {"..", "", "1"},
                {"", "", "0"},
        };
        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                bool esc;
                cleanup_free char *out = img_path_clean(cases[i][0], &esc);
                if (strcmp(out, cases[i][1]) != 0 || esc != (cases[i][2][0] == '1'))
                        fail_msg("\"%s\": \"%s\" (escaped %d), not \"%s\" (%s)", cases[i][0], out, esc, cases[i][1],
                                 cases[i][2]);
        }
}

/* An upper dir as a RUN leaves it, made into a layer and unpacked by the
 * store: whiteouts and opaque dirs come back as overlayfs reads them; the
 * set-up's files do not come at all. */
static void test_upper(void **state) {
        cleanup_free char *st_dir = xasprintf("%s/state", tmp), *u = xasprintf("%s/upper", tmp), *p = NULL;
        cleanup_free char *layer = NULL;
        static const char *const skip[] = {"etc", "etc/hosts", "proc", "tmp", NULL};
        img_owner own = {0};
        img_store *s;
        img_tar *t;
        cm_err err = CM_ERR_INIT;
        char diff[65];
        uint64_t bytes;
        char v[4] = {0};
        struct stat st;
        int ufd;
        (void)state;

        assert_int_equal(img_store_open(st_dir, &own, 0, &s, &err), 0);
        put((free(p), p = xasprintf("%s/made/file", u)), "hello");
        put((free(p), p = xasprintf("%s/etc/hosts", u)), "127.0.0.1 x");
        put((free(p), p = xasprintf("%s/proc/", u)), "");
        put((free(p), p = xasprintf("%s/tmp/kept", u)), "k"); /* something the command wrote there */
        put((free(p), p = xasprintf("%s/gone/", u)), "");
        if (mknod((free(p), p = xasprintf("%s/gone/old", u)), S_IFCHR | 0600, makedev(0, 0)) < 0) {
                img_store_free(s);
                skip_because("cannot make a 0/0 character device (a whiteout) here");
        }
        put((free(p), p = xasprintf("%s/op/new", u)), "n");
        assert_int_equal(setxattr((free(p), p = xasprintf("%s/op", u)), "user.overlay.opaque", "y", 1, 0), 0);
        ufd = open(u, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(ufd >= 0);
        assert_int_equal(img_tar_new(s, &t, &err), 0);
        if (img_tar_add_upper(t, ufd, skip, &err) < 0 || img_tar_commit(t, NULL, diff, &bytes, &err) < 0)
                fail_msg("%s", err.msg);
        img_tar_free(t);
        (void)close(ufd);
        layer = img_layer_path(s, diff);
        assert_int_equal(stat((free(p), p = xasprintf("%s/made/file", layer)), &st), 0);
        assert_int_equal(lstat((free(p), p = xasprintf("%s/gone/old", layer)), &st), 0);
        assert_true(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
        assert_int_equal(getxattr((free(p), p = xasprintf("%s/op", layer)), "user.overlay.opaque", v, sizeof v), 1);
        assert_int_equal(stat((free(p), p = xasprintf("%s/op/new", layer)), &st), 0);
        assert_int_equal(stat((free(p), p = xasprintf("%s/tmp/kept", layer)), &st), 0);
        /* the set-up's: neither /etc/hosts nor the empty /proc, nor /etc */
        assert_int_equal(lstat((free(p), p = xasprintf("%s/etc", layer)), &st), -1);
        assert_int_equal(lstat((free(p), p = xasprintf("%s/proc", layer)), &st), -1);
        /* the same tree makes the same layer */
        {
                char again[65];
                ufd = open(u, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                assert_int_equal(img_tar_new(s, &t, &err), 0);
                assert_int_equal(img_tar_add_upper(t, ufd, skip, &err), 0);
                assert_int_equal(img_tar_commit(t, NULL, again, &bytes, &err), 0);
                img_tar_free(t);
                (void)close(ufd);
                assert_string_equal(again, diff);
        }
        img_store_free(s);
}

/* ADD of an archive: its names re-rooted under the destination, a ".."
 * that leaves it refused. */
static void test_archive(void **state) {
        cleanup_free char *st_dir = xasprintf("%s/state-a", tmp), *src = xasprintf("%s/src", tmp);
        cleanup_free char *tarf = xasprintf("%s/a.tar", tmp), *bad = xasprintf("%s/bad.tar", tmp), *cmd = NULL;
        cleanup_free char *layer = NULL, *p = NULL;
        img_owner own = {0};
        img_store *s;
        img_tar *t;
        cm_err err = CM_ERR_INIT;
        char diff[65];
        uint64_t bytes;
        bool plain;
        struct stat st;
        int fd;
        (void)state;

        put((free(p), p = xasprintf("%s/x/y", src)), "y");
        cmd = xasprintf("tar -C %s -cf %s x && tar -C %s -cf %s --transform 's,^x,../../x,' x", src, tarf, src, bad);
        if (system(cmd) != 0)
                skip_because("GNU tar with --transform is needed to make the archives");
        assert_int_equal(img_store_open(st_dir, &own, 0, &s, &err), 0);
        fd = open(tarf, O_RDONLY | O_CLOEXEC);
        assert_int_equal(img_tar_new(s, &t, &err), 0);
        assert_int_equal(img_tar_add_archive(t, fd, "opt/app", false, 0, 0, &plain, &err), 0);
        assert_int_equal(img_tar_commit(t, NULL, diff, &bytes, &err), 0);
        img_tar_free(t);
        (void)close(fd);
        layer = img_layer_path(s, diff);
        assert_int_equal(stat((free(p), p = xasprintf("%s/opt/app/x/y", layer)), &st), 0);
        fd = open(bad, O_RDONLY | O_CLOEXEC);
        assert_int_equal(img_tar_new(s, &t, &err), 0);
        assert_true(img_tar_add_archive(t, fd, "opt", false, 0, 0, &plain, &err) < 0);
        assert_false(plain);
        assert_non_null(strstr(err.msg, "leaves its directory"));
        img_tar_free(t);
        (void)close(fd);
        /* a file that is no archive says so */
        fd = open((free(p), p = xasprintf("%s/x/y", src)), O_RDONLY | O_CLOEXEC);
        assert_int_equal(img_tar_new(s, &t, &err), 0);
        assert_true(img_tar_add_archive(t, fd, "opt", false, 0, 0, &plain, &err) < 0);
        assert_true(plain);
        img_tar_free(t);
        (void)close(fd);
        img_store_free(s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_lookup),
                cmocka_unit_test(test_clean),
                cmocka_unit_test(test_upper),
                cmocka_unit_test(test_archive),
        };
        TU_RUN_IN_TMP(tmp, tests);
}
