/* The layer reader (src/image/layer.c) against hostile archives made here
 * with libarchive: each must be refused or kept inside the destination,
 * and nothing outside it may be touched.  Whiteouts in both forms, the
 * size cap against bombs, diff-ids across compressions, owners shifted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "image/layer.h"
#include "image_tar.h"
#include "util/cleanup.h"
#include "util/sha256.h"

static char tmp[] = "/tmp/cm-test-layer-XXXXXX";
static int case_no;

/* A fresh destination (tmp/N/dst) and a bait dir beside it (tmp/N/out). */
static int fresh(char dst[256], char out[256]) {
        char base[128];
        (void)snprintf(base, sizeof base, "%s/%d", tmp, ++case_no);
        (void)snprintf(dst, 256, "%s/dst", base);
        (void)snprintf(out, 256, "%s/out", base);
        assert_int_equal(mkdir(base, 0755), 0);
        assert_int_equal(mkdir(dst, 0755), 0);
        assert_int_equal(mkdir(out, 0755), 0);
        return open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static int unpack(const tar_ent *v, size_t n, const char *filter, int dst, enum img_unpack_mode mode, uint64_t cap,
                  img_unpack_result *res, cm_err *err) {
        int src = tar_make(v, n, filter);
        img_unpack_opts o = {mode, {0}, cap, NULL};
        int r = img_unpack(src, dst, &o, res, err);
        close(src);
        return r;
}

static bool exists(const char *dir, const char *rel) {
        char p[1024];
        struct stat st;
        (void)snprintf(p, sizeof p, "%s/%s", dir, rel);
        return lstat(p, &st) == 0;
}

static bool dir_empty(const char *dir) {
        DIR *d = opendir(dir);
        struct dirent *de;
        int n = 0;
        while (d && (de = readdir(d)))
                n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
        if (d)
                closedir(d);
        return n == 0;
}

static void test_plain_entries(void **state) {
        char dst[256], out[256], p[512];
        int fd = fresh(dst, out);
        tar_ent v[] = {
                {"bin", AE_IFDIR, 0755},
                {"bin/tool", AE_IFREG, 04755, "#!/bin/sh\n"},
                {"bin/alias", AE_IFLNK, 0777, "tool"},
                {"bin/hard", AE_IFREG, 0644, NULL, "bin/tool"},
                {"ro", AE_IFDIR, 0555},
                {"ro/inside", AE_IFREG, 0444, "x"},
                {"./deep/er/file", AE_IFREG, 0600, "deep"},
        };
        img_unpack_result res;
        cm_err err = CM_ERR_INIT;
        struct stat st, st2;
        (void)state;
        assert_int_equal(unpack(v, ARRAY_SIZE(v), NULL, fd, UNPACK_LAYER, 0, &res, &err), 0);
        (void)snprintf(p, sizeof p, "%s/bin/tool", dst);
        assert_int_equal(lstat(p, &st), 0);
        assert_int_equal(st.st_mode & 07777, 04755); /* setuid kept: it means something only in the sandbox */
        (void)snprintf(p, sizeof p, "%s/bin/hard", dst);
        assert_int_equal(lstat(p, &st2), 0);
        assert_int_equal(st.st_ino, st2.st_ino);
        (void)snprintf(p, sizeof p, "%s/ro", dst);
        assert_int_equal(lstat(p, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0555); /* set last, after its entries */
        assert_true(exists(dst, "ro/inside"));
        assert_true(exists(dst, "deep/er/file"));
        assert_int_equal(res.skipped, 0);
        close(fd);
}

static void test_dotdot_refused(void **state) {
        char dst[256], out[256];
        int fd = fresh(dst, out);
        tar_ent v[] = {{"a/../../out/evil", AE_IFREG, 0644, "evil"}};
        img_unpack_result res;
        cm_err err = CM_ERR_INIT;
        (void)state;
        assert_int_equal(unpack(v, 1, NULL, fd, UNPACK_LAYER, 0, &res, &err), -1);
        assert_int_equal(err.code, EPERM);
        assert_non_null(strstr(err.msg, "leaves the layer"));
        assert_true(dir_empty(out));
        close(fd);
}

static void test_absolute_kept_inside(void **state) {
        char dst[256], out[256], abs[300];
        int fd = fresh(dst, out);
        img_unpack_result res;
        cm_err err = CM_ERR_INIT;
        (void)state;
        (void)snprintf(abs, sizeof abs, "%s/evil", out);
        tar_ent v[] = {{abs, AE_IFREG, 0644, "evil"}};
        assert_int_equal(unpack(v, 1, NULL, fd, UNPACK_LAYER, 0, &res, &err), 0);
        assert_true(dir_empty(out));
        assert_true(exists(dst, abs + 1)); /* the same path, below dst */
        close(fd);
}

static void test_write_through_symlink(void **state) {
        char dst[256], out[256];
        int fd = fresh(dst, out);
        img_unpack_result res;
        cm_err err = CM_ERR_INIT;
        (void)state;
        tar_ent v[] = {{"link", AE_IFLNK, 0777, out}, {"link/evil", AE_IFREG, 0644, "evil"}};
        assert_int_equal(unpack(v, 2, NULL, fd, UNPACK_LAYER, 0, &res, &err), -1);
        assert_int_equal(err.code, EPERM);
        assert_non_null(strstr(err.msg, "symlink"));
        assert_true(dir_empty(out));
        /* a relative one climbing out, too */
        tar_ent w[] = {{"up", AE_IFLNK, 0777, "../out"}, {"up/evil", AE_IFREG, 0644, "evil"}};
        cm_err_clear(&err);
        assert_int_equal(unpack(w, 2, NULL, fd, UNPACK_LAYER, 0, &res, &err), -1);
        assert_true(dir_empty(out));
        close(fd);
}

static void test_hardlink_out(void **state) {
        char dst[256], out[256], bait[300], abs[300];
        int fd = fresh(dst, out);
        img_unpack_result res;
        cm_err err = CM_ERR_INIT;
        struct stat st;
        (void)state;
        (void)snprintf(bait, sizeof bait, "%s/secret", out);
        FILE *f = fopen(bait, "w");
        fputs("secret", f);
        fclose(f);
        /* by "..": refused */
        tar_ent v[] = {{"h", AE_IFREG, 0644, NULL, "../out/secret"}};
        assert_int_equal(unpack(v, 1, NULL, fd, UNPACK_LAYER, 0, &res, &err), -1);
        assert_int_equal(err.code, EPERM);
        /* by an absolute path: it names dst's own, which does not exist */
        (void)snprintf(abs, sizeof abs, "%s/secret", out);
        tar_ent w[] = {{"h", AE_IFREG, 0644, NULL, abs}};
        cm_err_clear(&err);
        assert_int_equal(unpack(w, 1, NULL, fd, UNPACK_LAYER, 0, &res, &err), -1);
        /* through a symlink of the layer */
        tar_ent x[] = {{"s", AE_IFLNK, 0777, out}, {"h", AE_IFREG, 0644, NULL, "s/secret"}};
        cm_err_clear(&err);
        assert_int_equal(unpack(x, 2, NULL, fd, UNPACK_LAYER, 0, &res, &err), -1);
        assert_false(exists(dst, "h"));
        assert_int_equal(stat(bait, &st), 0);
        assert_int_equal(st.st_nlink, 1); /* never linked */
        close(fd);
}

static void test_device_skipped(void **state) {
        char dst[256], out[256];
        int fd = fresh(dst, out);
        img_unpack_result res;
        cm_err err = CM_ERR_INIT;
        (void)state;
        tar_ent v[] = {{"dev/null", AE_IFCHR, 0666}, {"ok", AE_IFREG, 0644, "ok"}};
        assert_int_equal(unpack(v, 2, NULL, fd, UNPACK_LAYER, 0, &res, &err), 0);
        assert_false(exists(dst, "dev/null"));
        assert_true(exists(dst, "ok"));
        assert_int_equal(res.skipped, 1);
        close(fd);
}

static void test_whiteouts_layer(void **state) {
        char dst[256], out[256], p[512], val[8] = {0};
        int fd = fresh(dst, out);
        img_unpack_result res;
        cm_err err = CM_ERR_INIT;
        struct stat st;
        (void)state;
        tar_ent v[] = {{"etc/.wh.gone", AE_IFREG, 0644, ""}, {"d/.wh..wh..opq", AE_IFREG, 0644, ""},
                       {"d/new", AE_IFREG, 0644, "n"}};
        assert_int_equal(unpack(v, 3, NULL, fd, UNPACK_LAYER, 0, &res, &err), 0);
        (void)snprintf(p, sizeof p, "%s/etc/gone", dst);
        assert_int_equal(lstat(p, &st), 0);
        assert_true(S_ISCHR(st.st_mode)); /* overlayfs's whiteout: 0/0 */
        assert_int_equal(st.st_rdev, makedev(0, 0));
        assert_false(exists(dst, "etc/.wh.gone"));
        (void)snprintf(p, sizeof p, "%s/d", dst);
        assert_int_equal(getxattr(p, "user.overlay.opaque", val, sizeof val), 1);
        assert_int_equal(val[0], 'y');
        assert_false(exists(dst, "d/.wh..wh..opq"));
        close(fd);
}

static void test_whiteouts_apply(void **state) {
        char dst[256], out[256];
        int fd = fresh(dst, out);
        img_unpack_result res;
        cm_err err = CM_ERR_INIT;
        (void)state;
        tar_ent lower[] = {{"etc/gone", AE_IFREG, 0644, "g"}, {"etc/kept", AE_IFREG, 0644, "k"},
                           {"d/old", AE_IFREG, 0644, "o"}, {"d/sub/older", AE_IFREG, 0644, "o"}};
        tar_ent upper[] = {{"etc/.wh.gone", AE_IFREG, 0644, ""}, {"d/.wh..wh..opq", AE_IFREG, 0644, ""},
                           {"d/new", AE_IFREG, 0644, "n"}};
        assert_int_equal(unpack(lower, 4, NULL, fd, UNPACK_APPLY, 0, &res, &err), 0);
        assert_int_equal(unpack(upper, 3, NULL, fd, UNPACK_APPLY, 0, &res, &err), 0);
        assert_false(exists(dst, "etc/gone"));
        assert_true(exists(dst, "etc/kept"));
        assert_false(exists(dst, "d/old"));
        assert_false(exists(dst, "d/sub"));
        assert_true(exists(dst, "d/new"));
        assert_false(exists(dst, "etc/.wh.gone"));
        close(fd);
}

static void test_bomb_stops_at_cap(void **state) {
        char dst[256], out[256];
        int fd = fresh(dst, out);
        img_unpack_result res;
        cm_err err = CM_ERR_INIT;
        (void)state;
        /* 64 MiB of zeros, a few KiB gzipped */
        tar_ent v[] = {{"zeros", AE_IFREG, 0644, NULL, NULL, 0, 0, (size_t)64 << 20}};
        assert_int_equal(unpack(v, 1, "gzip", fd, UNPACK_LAYER, 4 << 20, &res, &err), -1);
        assert_int_equal(err.code, EFBIG);
        assert_non_null(strstr(err.msg, "CONTAINER_MCP_IMAGE_MAX_SIZE"));
        close(fd);
}

static void test_header_flood_is_a_bomb(void **state) {
        char dst[256], out[256];
        int fd = fresh(dst, out);
        img_unpack_result res;
        cm_err err = CM_ERR_INIT;
        tar_ent *v = calloc(5000, sizeof *v);
        char(*names)[16] = calloc(5000, 16);
        (void)state;
        for (int i = 0; i < 5000; i++) {
                (void)snprintf(names[i], 16, "f%d", i);
                v[i] = (tar_ent){names[i], AE_IFREG, 0644, ""};
        }
        /* empty files: only headers count, 512 bytes each and more */
        assert_int_equal(unpack(v, 5000, "zstd", fd, UNPACK_LAYER, 1 << 20, &res, &err), -1);
        assert_int_equal(err.code, EFBIG);
        free(v);
        free(names);
        close(fd);
}

static void test_diff_id_across_filters(void **state) {
        char dst[256], out[256];
        int fd = fresh(dst, out);
        img_unpack_result plain, gz, zst;
        cm_err err = CM_ERR_INIT;
        tar_ent v[] = {{"a", AE_IFREG, 0644, "alpha"}, {"b/c", AE_IFREG, 0644, "gamma"}};
        int src = tar_make(v, 2, NULL);
        uint8_t want[CM_SHA256_LEN];
        char buf[1 << 16];
        ssize_t n = read(src, buf, sizeof buf);
        (void)state;
        cm_sha256(buf, (size_t)n, want);
        close(src);
        assert_int_equal(unpack(v, 2, NULL, fd, UNPACK_APPLY, 0, &plain, &err), 0);
        if (unpack(v, 2, "gzip", fd, UNPACK_APPLY, 0, &gz, &err) < 0)
                fail_msg("%s", err.msg);
        if (unpack(v, 2, "zstd", fd, UNPACK_APPLY, 0, &zst, &err) < 0)
                fail_msg("%s", err.msg);
        assert_memory_equal(plain.diff_id, want, CM_SHA256_LEN);
        assert_memory_equal(gz.diff_id, want, CM_SHA256_LEN);
        assert_memory_equal(zst.diff_id, want, CM_SHA256_LEN);
        close(fd);
}

static void test_garbage_refused(void **state) {
        char dst[256], out[256];
        int fd = fresh(dst, out), src = memfd_create("g", MFD_CLOEXEC);
        img_unpack_opts o = {UNPACK_LAYER, {0}, 0, NULL};
        img_unpack_result res;
        cm_err err = CM_ERR_INIT;
        (void)state;
        assert_int_equal(write(src, "\x1f\x8b\x08\x00garbage", 11), 11);
        (void)lseek(src, 0, SEEK_SET);
        assert_int_equal(img_unpack(src, fd, &o, &res, &err), -1);
        assert_int_equal(err.code, EINVAL);
        close(src);
        close(fd);
}

static void test_owners_shifted(void **state) {
        char dst[256], out[256], p[512];
        int fd;
        img_unpack_result res;
        cm_err err = CM_ERR_INIT;
        struct stat st;
        (void)state;
        if (geteuid() != 0) {
                skip_because("owners are shifted only by a root server; this test is not root");
                return;
        }
        fd = fresh(dst, out);
        tar_ent v[] = {{"mine", AE_IFREG, 04755, "x", NULL, 5, 7}, {"far", AE_IFREG, 0644, "x", NULL, 100000, 0}};
        int src = tar_make(v, 2, NULL);
        img_unpack_opts o = {UNPACK_LAYER, {true, 200000, 300000}, 0, NULL};
        assert_int_equal(img_unpack(src, fd, &o, &res, &err), 0);
        (void)snprintf(p, sizeof p, "%s/mine", dst);
        assert_int_equal(lstat(p, &st), 0);
        assert_int_equal(st.st_uid, 200005);
        assert_int_equal(st.st_gid, 300007);
        assert_int_equal(st.st_mode & 07777, 04755); /* set again after chown */
        (void)snprintf(p, sizeof p, "%s/far", dst);
        assert_int_equal(lstat(p, &st), 0);
        assert_int_equal(st.st_uid, 200000 + 65534); /* past the range: its nobody */
        close(src);
        close(fd);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_plain_entries),       cmocka_unit_test(test_dotdot_refused),
                cmocka_unit_test(test_absolute_kept_inside), cmocka_unit_test(test_write_through_symlink),
                cmocka_unit_test(test_hardlink_out),        cmocka_unit_test(test_device_skipped),
                cmocka_unit_test(test_whiteouts_layer),     cmocka_unit_test(test_whiteouts_apply),
                cmocka_unit_test(test_bomb_stops_at_cap),   cmocka_unit_test(test_header_flood_is_a_bomb),
                cmocka_unit_test(test_diff_id_across_filters), cmocka_unit_test(test_garbage_refused),
                cmocka_unit_test(test_owners_shifted),
        };
        TU_RUN_IN_TMP(tmp, tests);
}
