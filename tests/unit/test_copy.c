/* util/copy.c: trees copied without following symlinks, container paths
 * that cannot leave their root, no setuid bits, the size cap. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <sys/syscall.h>

#include "util/cleanup.h"
#include "util/copy.h"

static char tmp[] = "/tmp/cm-copy-XXXXXX";

/* Without openat2 (old kernels; valgrind, which does not know it) the
 * fallback refuses every symlink on the way: stricter, never looser. */
static bool have_openat2(void) {
        struct open_how how = {.flags = O_PATH | O_CLOEXEC};
        int fd = (int)syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof how);
        if (fd >= 0)
                (void)close(fd);
        return fd >= 0;
}

static char *p(const char *rel) { return xasprintf("%s/%s", tmp, rel); }

static void put(const char *rel, const char *text, mode_t mode) {
        cleanup_free char *path = p(rel);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        assert_int_equal(fclose(f), 0);
        assert_int_equal(chmod(path, mode), 0);
}

static char *get(const char *rel) {
        cleanup_free char *path = p(rel);
        char *buf = xcalloc(1, 4096);
        FILE *f = fopen(path, "r");
        if (!f) {
                free(buf);
                return NULL;
        }
        (void)!fread(buf, 1, 4095, f);
        (void)fclose(f);
        return buf;
}

static void mk(const char *rel) {
        cleanup_free char *path = p(rel);
        assert_int_equal(mkdir(path, 0755), 0);
}

static void ln(const char *target, const char *rel) {
        cleanup_free char *path = p(rel);
        assert_int_equal(symlink(target, path), 0);
}

static int open_dir(const char *rel) {
        cleanup_free char *path = p(rel);
        int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        return fd;
}

static int setup(void **state) {
        tu_rm_rf(tmp, 1);
        mk("host");
        mk("host/proj");
        mk("host/proj/sub");
        put("host/proj/a.txt", "alpha\n", 0644);
        put("host/proj/sub/b.txt", "beta\n", 04755);
        ln("/etc/passwd", "host/proj/link");
        mk("root");   /* a container's root */
        mk("root/workspace");
        mk("root/etc");
        put("root/etc/secret", "container secret\n", 0600);
        ln("/etc", "root/etc-link");          /* absolute: must mean root/etc */
        ln("../../../../../../etc", "root/up"); /* must not climb out */
        (void)state;
        return 0;
}

static void assert_fd_pseudo(const char *path, bool want) {
        cleanup_close int fd = open(path, O_PATH | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(cm_fd_is_pseudo(fd), want);
}

static void test_tree_into_container(void **state) {
        cleanup_close int root = open_dir("root");
        cm_copy_stats st = {0};
        cm_err err = CM_ERR_INIT;
        cleanup_free char *host = p("host");
        struct stat sb;
        /* Onto an existing directory: lands inside it under its own name. */
        assert_int_equal(cm_copy_host_to_root(host, "proj", root, "/workspace", 1 << 20, &st, &err), 0);
        cleanup_free char *a = get("root/workspace/proj/a.txt");
        assert_string_equal(a, "alpha\n");
        assert_int_equal(st.files, 2);
        assert_int_equal(st.symlinks, 1);
        assert_int_equal(st.dirs, 2);
        /* The symlink is copied as a symlink, not as /etc/passwd's content. */
        cleanup_free char *lp = p("root/workspace/proj/link");
        assert_int_equal(lstat(lp, &sb), 0);
        assert_true(S_ISLNK(sb.st_mode));
        /* setuid dropped */
        cleanup_free char *bp = p("root/workspace/proj/sub/b.txt");
        assert_int_equal(stat(bp, &sb), 0);
        assert_int_equal(sb.st_mode & 07777, 0755);
        (void)state;
}

static void test_container_paths_stay_in_root(void **state) {
        cleanup_close int root = open_dir("root");
        cm_copy_stats st = {0};
        cm_err err = CM_ERR_INIT;
        cleanup_free char *host = p("host");
        int r;
        /* "/etc-link/x" inside the container is root/etc/x, never the host's /etc. */
        r = cm_copy_host_to_root(host, "proj/a.txt", root, "/etc-link/copied", 1 << 20, &st, &err);
        assert_int_equal(access("/etc/copied", F_OK), -1);
        if (!have_openat2()) {
                assert_true(r < 0);
                assert_true(cm_copy_host_to_root(host, "proj/a.txt", root, "/up/../../x", 1 << 20, &st, &err) < 0);
                return;
        }
        assert_int_equal(r, 0);
        cleanup_free char *c = get("root/etc/copied");
        assert_string_equal(c, "alpha\n");
        /* ".." and a climbing symlink stop at the root. */
        assert_int_equal(cm_copy_host_to_root(host, "proj/a.txt", root, "/up/../../x", 1 << 20, &st, &err), 0);
        cleanup_free char *x = get("root/x");
        assert_string_equal(x, "alpha\n");
        (void)state;
}

static void test_out_of_container(void **state) {
        cleanup_close int root = open_dir("root");
        cm_copy_stats st = {0};
        cm_err err = CM_ERR_INIT;
        cleanup_free char *host = p("host");
        /* A container symlink to "/etc" resolves to its own /etc on the way out. */
        if (have_openat2()) {
                assert_int_equal(cm_copy_root_to_host(root, "/etc-link/secret", host, "got", 1 << 20, &st, &err), 0);
                cleanup_free char *g = get("host/got");
                assert_string_equal(g, "container secret\n");
        } else {
                assert_true(cm_copy_root_to_host(root, "/etc-link/secret", host, "got", 1 << 20, &st, &err) < 0);
        }
        /* A destination that is a symlink is replaced, not written through. */
        ln("/tmp/cm-copy-should-not-exist", "host/trap");
        assert_int_equal(cm_copy_root_to_host(root, "/etc/secret", host, "trap", 1 << 20, &st, &err), 0);
        assert_int_equal(access("/tmp/cm-copy-should-not-exist", F_OK), -1);
        cleanup_free char *t = get("host/trap");
        assert_string_equal(t, "container secret\n");
        /* Onto the allowed root itself: lands inside it. */
        assert_int_equal(cm_copy_root_to_host(root, "/etc", host, "", 1 << 20, &st, &err), 0);
        cleanup_free char *e = get("host/etc/secret");
        assert_string_equal(e, "container secret\n");
        (void)state;
}

static void test_host_symlink_swapped_in(void **state) {
        cleanup_close int root = open_dir("root");
        cm_copy_stats st = {0};
        cm_err err = CM_ERR_INIT;
        cleanup_free char *host = p("host");
        /* The policy check saw host/dir as a directory; now it is a symlink to
         * the container's secrets.  The copy must refuse, not follow it. */
        ln(tmp, "host/dir");
        assert_true(cm_copy_host_to_root(host, "dir/root/etc/secret", root, "/x", 1 << 20, &st, &err) < 0);
        (void)state;
}

static void test_cap_and_bad_names(void **state) {
        cleanup_close int root = open_dir("root");
        cm_copy_stats st = {0};
        cm_err err = CM_ERR_INIT;
        cleanup_free char *host = p("host");
        assert_true(cm_copy_host_to_root(host, "proj", root, "/workspace", 4, &st, &err) < 0);
        assert_non_null(strstr(err.msg, "MiB"));
        assert_true(cm_copy_host_to_root(host, "proj", root, "/workspace/..", 1 << 20, &st, &err) < 0);
        assert_true(cm_copy_host_to_root(host, "proj", root, "/", 1 << 20, &st, &err) < 0);
        (void)state;
}

/* The container side of a copy never reads or writes a pseudo-filesystem
 * with the server's credentials (the review copied /proc/kallsyms out).
 * The host's own / stands in for a container's root here. */
static void test_pseudo_filesystems_refused(void **state) {
        cleanup_close int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        cm_copy_stats st = {0};
        cm_err err = CM_ERR_INIT;
        cleanup_free char *host = p("host");
        static const char *const out[] = {"/proc/kallsyms", "/proc/self/maps", "/proc/1", "/proc",
                                          "/sys/kernel/notes", "/sys/kernel"};
        struct stat sb;

        for (size_t i = 0; i < ARRAY_SIZE(out); i++) {
                cleanup_free char *got = xasprintf("%s/got%zu", host, i);
                if (stat(out[i], &sb) < 0)
                        continue;
                assert_true(cm_copy_root_to_host(root, out[i], host, strrchr(got, '/') + 1, 1 << 20, &st, &err) < 0);
                /* without openat2 (valgrind knows no syscall 437) the walk
                 * refuses the symlink /proc/self before it sees the fs */
                if (have_openat2() || !strstr(out[i], "self"))
                        assert_non_null(strstr(err.msg, "pseudo-filesystem"));
                assert_int_equal(access(got, F_OK), -1); /* nothing landed */
        }
        /* into one: neither a file nor a tree */
        assert_true(cm_copy_host_to_root(host, "proj/a.txt", root, "/proc/sys/kernel/x", 1 << 20, &st, &err) < 0);
        assert_true(cm_copy_host_to_root(host, "proj", root, "/proc/self", 1 << 20, &st, &err) < 0);
        assert_true(cm_copy_host_to_root(host, "proj", root, "/sys", 1 << 20, &st, &err) < 0);
        assert_fd_pseudo("/proc", true);
        assert_fd_pseudo("/sys", true);
        assert_fd_pseudo("/tmp", false);
        (void)state;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup(test_tree_into_container, setup),
                cmocka_unit_test_setup(test_container_paths_stay_in_root, setup),
                cmocka_unit_test_setup(test_out_of_container, setup),
                cmocka_unit_test_setup(test_host_symlink_swapped_in, setup),
                cmocka_unit_test_setup(test_cap_and_bad_names, setup),
                cmocka_unit_test_setup(test_pseudo_filesystems_refused, setup),
        };
        TU_RUN_IN_TMP(tmp, tests);
}
