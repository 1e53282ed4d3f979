/* The image store (src/image/store.c, blob.c, import.c): names, the index
 * under concurrent writers, crash leftovers, digest checks, import of a
 * root file system tarball, removal while in use, prune's bytes. */
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
#include <sys/wait.h>
#include <unistd.h>

#include "image/internal.h"
#include "image_tar.h"
#include "util/cleanup.h"

static char tmp[] = "/tmp/cm-test-store-XXXXXX";
static int case_no;
static const img_owner ours = {0};

static img_store *fresh_store(char state[256]) {
        img_store *s = NULL;
        cm_err err = CM_ERR_INIT;
        (void)snprintf(state, 256, "%s/%d", tmp, ++case_no);
        assert_int_equal(img_store_open(state, &ours, 0, &s, &err), 0);
        return s;
}

static void test_normalize(void **state) {
        static const char *const cases[][2] = {
                {"busybox", "docker.io/library/busybox:latest"},
                {"busybox:1.36", "docker.io/library/busybox:1.36"},
                {"library/busybox", "docker.io/library/busybox:latest"},
                {"docker.io/busybox", "docker.io/library/busybox:latest"},
                {"user/app:v1", "docker.io/user/app:v1"},
                {"localhost:5000/x/y", "localhost:5000/x/y:latest"},
                {"ghcr.io/o/r:t", "ghcr.io/o/r:t"},
                {"localhost/foo", "localhost/foo:latest"},
        };
        static const char *const bad[] = {"", "-rf", "/abs", "Upper", "a b", "a::b", "a/../b:x:y", "x@sha256:12",
                                          "a//b", "a:-x"};
        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                char *n = img_name_normalize(cases[i][0]);
                assert_non_null(n);
                assert_string_equal(n, cases[i][1]);
                free(n);
        }
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                char *n = img_name_normalize(bad[i]);
                if (n)
                        fail_msg("\"%s\" was accepted as %s", bad[i], n);
        }
}

static void fake_entry(img_entry *e, int writer, int k) {
        char hex[65];
        *e = (img_entry){0};
        (void)snprintf(hex, sizeof hex, "%08x%056x", writer, k);
        e->manifest = xasprintf("sha256:%s", hex);
        e->config = xasprintf("sha256:%s", hex);
        e->names = xcalloc(2, sizeof *e->names);
        e->names[0] = xasprintf("docker.io/library/w%d:%d", writer, k);
        e->n_names = 1;
        e->layers = xcalloc(1, sizeof *e->layers);
}

/* N processes publishing at once: every image is listed afterwards. */
static void test_concurrent_writers(void **state) {
        char dir[256];
        img_store *s = fresh_store(dir);
        enum { WRITERS = 5, EACH = 10 };
        img_entry *v;
        size_t n;
        cm_err err = CM_ERR_INIT;
        (void)state;
        for (int w = 0; w < WRITERS; w++) {
                pid_t pid = fork();
                assert_true(pid >= 0);
                if (pid == 0) {
                        img_store *mine = NULL;
                        /* the parent's store is not this writer's (valgrind
                         * checks each child's leaks at its exit) */
                        img_store_free(s);
                        if (img_store_open(dir, &ours, 0, &mine, &err) < 0)
                                _exit(1);
                        for (int k = 0; k < EACH; k++) {
                                img_entry e;
                                fake_entry(&e, w, k);
                                if (img_index_publish(mine, &e, &err) < 0)
                                        _exit(2);
                                img_entry_clear(&e);
                        }
                        img_store_free(mine);
                        _exit(0);
                }
        }
        for (int w = 0; w < WRITERS; w++) {
                int st;
                assert_true(wait(&st) > 0);
                assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        }
        assert_int_equal(img_list(s, &v, &n, &err), 0);
        assert_int_equal(n, WRITERS * EACH);
        for (int w = 0; w < WRITERS; w++)
                for (int k = 0; k < EACH; k++) {
                        char name[64];
                        img_entry e;
                        (void)snprintf(name, sizeof name, "w%d:%d", w, k);
                        assert_int_equal(img_resolve(s, name, &e, &err), 0);
                        img_entry_clear(&e);
                }
        img_entries_free(v, n);
        img_store_free(s);
}

/* A crash leaves temporaries (a half-unpacked layer, a half-written blob):
 * never listed, and gone when the store is opened again. */
static void test_crash_leftovers(void **state) {
        char dir[256], p[512];
        img_store *s = fresh_store(dir), *again = NULL;
        cm_err err = CM_ERR_INIT;
        img_entry *v;
        size_t n;
        struct stat st;
        (void)state;
        (void)snprintf(p, sizeof p, "%s/images/tmp/layer-1-abcdef", dir);
        assert_int_equal(mkdir(p, 0700), 0);
        (void)snprintf(p, sizeof p, "%s/images/tmp/layer-1-abcdef/half", dir);
        close(open(p, O_CREAT | O_WRONLY, 0600));
        (void)snprintf(p, sizeof p, "%s/images/tmp/blob-1-xyz", dir);
        close(open(p, O_CREAT | O_WRONLY, 0600));
        assert_int_equal(img_list(s, &v, &n, &err), 0);
        assert_int_equal(n, 0);
        img_store_free(s);
        assert_int_equal(img_store_open(dir, &ours, 0, &again, &err), 0);
        (void)snprintf(p, sizeof p, "%s/images/tmp/layer-1-abcdef", dir);
        assert_int_equal(lstat(p, &st), -1);
        (void)snprintf(p, sizeof p, "%s/images/tmp/blob-1-xyz", dir);
        assert_int_equal(lstat(p, &st), -1);
        img_store_free(again);
}

static bool used;
static bool in_use(void *arg, const char *manifest, char **ret) {
        (void)arg, (void)manifest;
        if (used && ret)
                *ret = xstrdup("box1");
        return used;
}

static int import_rootfs(img_store *s, const char *name, img_entry *ret, cm_err *err) {
        tar_ent v[] = {{"bin/sh", AE_IFREG, 0755, "#!fake"}, {"etc/passwd", AE_IFREG, 0644, "root:x:0:0::/:/bin/sh\n"},
                       {"big", AE_IFREG, 0644, NULL, NULL, 0, 0, 300000}};
        int fd = tar_make(v, ARRAY_SIZE(v), "gzip");
        char path[64];
        int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC), r;
        (void)snprintf(path, sizeof path, "%d", fd);
        /* the memfd through /proc/self/fd/N: a magic link, which the
         * importer would not follow; reopen it as a plain file instead */
        close(dir);
        char file[256];
        (void)snprintf(file, sizeof file, "%s/rootfs-%d.tar.gz", tmp, case_no);
        int out = open(file, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        char buf[65536];
        ssize_t k;
        while ((k = read(fd, buf, sizeof buf)) > 0)
                assert_int_equal(write(out, buf, (size_t)k), k);
        close(out);
        close(fd);
        dir = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        r = img_import_at(s, dir, strrchr(file, '/') + 1, name, NULL, NULL, ret, err);
        close(dir);
        return r;
}

static void test_import_remove_prune(void **state) {
        char dir[256], p[512];
        img_store *s = fresh_store(dir);
        img_entry e, found;
        cm_err err = CM_ERR_INIT;
        uint64_t bytes = 0;
        size_t images = 0;
        struct stat st;
        (void)state;
        assert_int_equal(import_rootfs(s, "tiny", &e, &err), 0);
        assert_int_equal(e.n_layers, 1);
        assert_true(e.size >= 300000);
        assert_int_equal(img_resolve(s, "docker.io/library/tiny:latest", &found, &err), 0);
        assert_string_equal(found.manifest, e.manifest);
        img_entry_clear(&found);
        (void)snprintf(p, sizeof p, "%s/images/layers/%s/etc/passwd", dir, e.layers[0]);
        assert_int_equal(lstat(p, &st), 0);
        /* in use: refused, naming the container */
        used = true;
        assert_true(img_remove(s, "tiny", false, in_use, NULL, &err) < 0);
        assert_int_equal(err.code, EBUSY);
        assert_non_null(strstr(err.msg, "box1"));
        /* forced: the name goes, the image stays while used */
        assert_int_equal(img_remove(s, "tiny", true, in_use, NULL, &err), 0);
        assert_true(img_resolve(s, "tiny", &found, &err) < 0);
        assert_int_equal(err.code, ENOENT);
        assert_non_null(strstr(err.msg, "pull_image"));
        assert_int_equal(img_prune(s, false, in_use, NULL, &bytes, &images, &err), 0);
        assert_int_equal(images, 0);
        assert_int_equal(lstat(p, &st), 0);
        /* unused: prune removes it, its layer and blobs, and counts them */
        used = false;
        assert_int_equal(img_prune(s, false, in_use, NULL, &bytes, &images, &err), 0);
        assert_int_equal(images, 1);
        assert_true(bytes >= 300000);
        assert_int_equal(lstat(p, &st), -1);
        (void)snprintf(p, sizeof p, "%s/images/blobs/sha256/%s", dir, e.manifest + 7);
        assert_int_equal(lstat(p, &st), -1);
        img_entry_clear(&e);
        img_store_free(s);
}

/* An OCI layout whose blob is not what its digest says. */
static void test_digest_mismatch(void **state) {
        char dir[256], lay[300], p[400];
        img_store *s = fresh_store(dir);
        img_entry *v, e;
        size_t n;
        cm_err err = CM_ERR_INIT;
        const char *fake = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
        FILE *f;
        (void)state;
        (void)snprintf(lay, sizeof lay, "%s/layout", dir);
        assert_int_equal(mkdir(lay, 0755), 0);
        (void)snprintf(p, sizeof p, "%s/blobs", lay);
        mkdir(p, 0755);
        (void)snprintf(p, sizeof p, "%s/blobs/sha256", lay);
        mkdir(p, 0755);
        (void)snprintf(p, sizeof p, "%s/index.json", lay);
        f = fopen(p, "w");
        fprintf(f, "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
                   "\"digest\":\"%s\",\"size\":2}]}",
                fake);
        fclose(f);
        (void)snprintf(p, sizeof p, "%s/blobs/sha256/%s", lay, fake + 7);
        f = fopen(p, "w");
        fputs("{}", f);
        fclose(f);
        assert_int_equal(img_import_layout(s, lay, "x", NULL, NULL, &e, &err), -1);
        assert_non_null(strstr(err.msg, "does not match its digest"));
        assert_int_equal(img_list(s, &v, &n, &err), 0);
        assert_int_equal(n, 0);
        /* a size that lies */
        f = fopen(p, "w");
        fputs("{}   ", f);
        fclose(f);
        cm_err_clear(&err);
        assert_int_equal(img_import_layout(s, lay, "x", NULL, NULL, &e, &err), -1);
        assert_non_null(strstr(err.msg, "larger than"));
        img_store_free(s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_normalize),           cmocka_unit_test(test_concurrent_writers),
                cmocka_unit_test(test_crash_leftovers),     cmocka_unit_test(test_import_remove_prune),
                cmocka_unit_test(test_digest_mismatch),
        };
        TU_RUN_IN_TMP(tmp, tests);
}
