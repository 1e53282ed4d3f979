/* The patch library (src/patch/) against tests/patch/corpus/, byte for
 * byte: each case is a directory with `patch`, `in/` (the container's
 * files before, /w/... as in/w/...) and either `out/` (every file after)
 * or `error` (lines the message must hold; then no step may be planned).
 * The files live in memory here, as the plan sees them through its read
 * callback; the plan's steps are carried out on them as dpatch carries
 * them out through the backend.  One TAP line per case. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <string.h>

#include "patch/patch.h"
#include "util/cleanup.h"

static const char *corpus;

typedef struct mfile {
        char *path; /* absolute, as in the container */
        char *data;
        size_t len;
} mfile;

typedef struct mfs {
        mfile *v;
        size_t n;
        size_t reads; /* calls of the read callback */
} mfs;

static char *slurp(const char *path, size_t *ret_len) {
        FILE *f = fopen(path, "rbe");
        char *data = NULL;
        size_t cap = 0, len = 0, k;
        if (!f)
                return NULL;
        do {
                if (len == cap)
                        data = xrealloc(data, (cap = cap ? 2 * cap : 4096) + 1);
                k = fread(data + len, 1, cap - len, f);
                len += k;
        } while (k > 0);
        (void)fclose(f);
        data[len] = 0;
        *ret_len = len;
        return data;
}

static mfile *mfs_find(mfs *fs, const char *path) {
        for (size_t i = 0; i < fs->n; i++)
                if (strcmp(fs->v[i].path, path) == 0)
                        return &fs->v[i];
        return NULL;
}

static void mfs_set(mfs *fs, const char *path, const char *data, size_t len) {
        mfile *f = mfs_find(fs, path);
        if (!f) {
                fs->v = xrealloc(fs->v, (fs->n + 1) * sizeof *fs->v);
                f = &fs->v[fs->n++];
                *f = (mfile){.path = xstrdup(path)};
        }
        free(f->data);
        f->data = xmalloc(len + 1);
        memcpy(f->data, data, len);
        f->len = len;
}

static void mfs_remove(mfs *fs, const char *path) {
        mfile *f = mfs_find(fs, path);
        assert_non_null(f);
        free(f->path);
        free(f->data);
        *f = fs->v[--fs->n];
}

static void mfs_clear(mfs *fs) {
        for (size_t i = 0; i < fs->n; i++) {
                free(fs->v[i].path);
                free(fs->v[i].data);
        }
        free(fs->v);
        *fs = (mfs){0};
}

static bool mfs_is_dir(const mfs *fs, const char *path) {
        size_t k = strlen(path);
        for (size_t i = 0; i < fs->n; i++)
                if (strncmp(fs->v[i].path, path, k) == 0 && fs->v[i].path[k] == '/')
                        return true;
        return false;
}

static mfs *loading;
static size_t loading_root;

static int load_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        char *data;
        size_t len;
        (void)st, (void)ftw;
        if (flag != FTW_F)
                return 0;
        data = slurp(path, &len);
        assert_non_null(data);
        mfs_set(loading, path + loading_root, data, len);
        free(data);
        return 0;
}

/* The tree under `dir` as files named /rel (none when dir is missing: git
 * keeps no empty directory). */
static void mfs_load(mfs *fs, const char *dir) {
        loading = fs;
        loading_root = strlen(dir);
        (void)nftw(dir, load_one, 16, FTW_PHYS);
}

static int by_path(const void *a, const void *b) { return strcmp(((const mfile *)a)->path, ((const mfile *)b)->path); }

static void assert_same_files(mfs *got, mfs *want, const char *name) {
        qsort(got->v, got->n, sizeof *got->v, by_path);
        qsort(want->v, want->n, sizeof *want->v, by_path);
        for (size_t i = 0; i < got->n || i < want->n; i++) {
                if (i >= got->n || i >= want->n || strcmp(got->v[i].path, want->v[i].path) != 0)
                        fail_msg("%s: files differ: got %s, want %s", name, i < got->n ? got->v[i].path : "(none)",
                                 i < want->n ? want->v[i].path : "(none)");
                if (got->v[i].len != want->v[i].len || memcmp(got->v[i].data, want->v[i].data, got->v[i].len) != 0)
                        fail_msg("%s: %s: got %zu bytes '%.*s', want %zu bytes '%.*s'", name, got->v[i].path,
                                 got->v[i].len, (int)got->v[i].len, got->v[i].data, want->v[i].len, (int)want->v[i].len,
                                 want->v[i].data);
        }
}

/* The plan's view of the files: as dpatch's reads through the backend. */
static int mfs_read(void *ctx, const char *path, bool want_data, char **ret, size_t *ret_len, cm_err *err) {
        mfs *fs = ctx;
        mfile *f = mfs_find(fs, path);
        (void)err;
        fs->reads++;
        if (!f)
                return mfs_is_dir(fs, path) ? -EISDIR : -ENOENT;
        if (want_data) {
                *ret = xmalloc(f->len + 1);
                memcpy(*ret, f->data, f->len);
                *ret_len = f->len;
        }
        return 0;
}

/* What dpatch does with each step, on the in-memory files. */
static void carry_out(mfs *fs, const cm_patch_op *ops, size_t n) {
        for (size_t i = 0; i < n; i++) {
                const cm_patch_op *op = &ops[i];
                if (op->action == CM_PATCH_DELETED) {
                        mfs_remove(fs, op->path);
                        continue;
                }
                mfs_set(fs, op->path, op->data, op->len);
                if (op->action == CM_PATCH_MOVED)
                        mfs_remove(fs, op->from);
        }
}

/* parse + plan, as dpatch runs them. */
static int run_patch_io(const char *text, size_t len, mfs *fs, const cm_patch_io *io_in, cm_patch_op **ops, size_t *n,
                        cm_err *err) {
        cm_patch p;
        cm_patch_io io = *io_in;
        int r;
        if (cm_patch_parse(text, len, &p, err) < 0)
                return -1;
        io.ctx = fs;
        r = cm_patch_plan(&p, &io, ops, n, err);
        if (r == 0)
                carry_out(fs, *ops, *n);
        if (r == 0) /* a failed plan hands back nothing */
                cm_patch_ops_free(steal_pointer(ops), *n);
        cm_patch_clear(&p);
        return r;
}

static int run_patch(const char *text, size_t len, mfs *fs, uint64_t max, cm_patch_op **ops, size_t *n, cm_err *err) {
        cm_patch_io io = {fs, mfs_read, max, "TEST_MAX", 64 << 20, 0};
        return run_patch_io(text, len, fs, &io, ops, n, err);
}

static void check_error(const char *name, const char *dir, const cm_err *err) {
        cleanup_free char *path = xasprintf("%s/error", dir), *want = NULL;
        size_t len;
        want = slurp(path, &len);
        if (!want)
                fail_msg("%s: the patch failed, and the case has no error file: %s", name, err->msg);
        for (char *line = strtok(want, "\n"); line; line = strtok(NULL, "\n"))
                if (!strstr(err->msg, line))
                        fail_msg("%s: the message lacks \"%s\":\n%s", name, line, err->msg);
}

static void run_case(void **state) {
        const char *name = *state;
        cleanup_free char *dir = xasprintf("%s/%s", corpus, name), *in = xasprintf("%s/in", dir),
                          *out = xasprintf("%s/out", dir), *ppath = xasprintf("%s/patch", dir), *text = NULL;
        mfs fs = {0}, want = {0}, before = {0};
        cm_err err = CM_ERR_INIT;
        cm_patch_op *ops = NULL;
        size_t len, n = 0;
        text = slurp(ppath, &len);
        assert_non_null(text);
        mfs_load(&fs, in);
        mfs_load(&before, in);
        if (run_patch(text, len, &fs, 1 << 20, &ops, &n, &err) < 0) {
                assert_true(err.code > 0 && err.msg[0]);
                check_error(name, dir, &err);
                assert_same_files(&fs, &before, name); /* nothing changed */
        } else {
                cleanup_free char *epath = xasprintf("%s/error", dir);
                if (access(epath, F_OK) == 0)
                        fail_msg("%s: the patch applied, but the case expects an error", name);
                mfs_load(&want, out);
                assert_same_files(&fs, &want, name);
        }
        mfs_clear(&fs);
        mfs_clear(&want);
        mfs_clear(&before);
}

/* The size cap: a result over it fails the whole plan, naming the setting. */
static void test_cap(void **state) {
        static const char patch[] = "*** Begin Patch\n*** Add File: /w/ok.txt\n+ok\n*** Update File: /w/big.txt\n"
                                    "@@\n-a\n+abcdefgh\n*** End Patch\n";
        mfs fs = {0};
        cm_err err = CM_ERR_INIT;
        cm_patch_op *ops = NULL;
        size_t n = 0;
        (void)state;
        mfs_set(&fs, "/w/big.txt", "a\n", 2);
        assert_int_equal(run_patch(patch, sizeof patch - 1, &fs, 8, &ops, &n, &err), -1);
        assert_int_equal(err.code, EFBIG);
        assert_non_null(strstr(err.msg, "/w/big.txt would be 9 bytes"));
        assert_non_null(strstr(err.msg, "TEST_MAX"));
        assert_null(mfs_find(&fs, "/w/ok.txt"));
        assert_int_equal(run_patch(patch, sizeof patch - 1, &fs, 9, &ops, &n, &err), 0);
        assert_int_equal(mfs_find(&fs, "/w/big.txt")->len, 9);
        mfs_clear(&fs);
}

/* Each file is read through the callback once, however often the patch
 * names it (the plan works on what it read). */
static void test_reads_once(void **state) {
        static const char patch[] = "*** Begin Patch\n*** Update File: /w/a\n@@\n-1\n+2\n*** Update File: /w/a\n@@\n"
                                    "-2\n+3\n*** Update File: /w/a\n*** Move to: /w/b\n@@\n-3\n+4\n*** End Patch\n";
        mfs fs = {0};
        cm_err err = CM_ERR_INIT;
        cm_patch_op *ops = NULL;
        size_t n = 0;
        (void)state;
        mfs_set(&fs, "/w/a", "1\n", 2);
        assert_int_equal(run_patch(patch, sizeof patch - 1, &fs, 100, &ops, &n, &err), 0);
        assert_int_equal(fs.reads, 2); /* /w/a, then whether /w/b is a directory */
        assert_null(mfs_find(&fs, "/w/a"));
        assert_memory_equal(mfs_find(&fs, "/w/b")->data, "4\n", 2);
        mfs_clear(&fs);
}

/* A NUL in a path is refused (paths become C strings); in content it is
 * a byte like any other. */
static void test_nul(void **state) {
        static const char bad[] = "*** Begin Patch\n*** Add File: /w/a\0b\n+x\n*** End Patch\n";
        static const char good[] = "*** Begin Patch\n*** Update File: /w/a\n@@\n-x\0y\n+z\0w\n*** End Patch\n";
        mfs fs = {0};
        cm_err err = CM_ERR_INIT;
        cm_patch_op *ops = NULL;
        size_t n = 0;
        (void)state;
        assert_int_equal(run_patch(bad, sizeof bad - 1, &fs, 100, &ops, &n, &err), -1);
        assert_non_null(strstr(err.msg, "NUL"));
        mfs_set(&fs, "/w/a", "x\0y\n", 4);
        assert_int_equal(run_patch(good, sizeof good - 1, &fs, 100, &ops, &n, &err), 0);
        assert_int_equal(mfs_find(&fs, "/w/a")->len, 4);
        assert_memory_equal(mfs_find(&fs, "/w/a")->data, "z\0w\n", 4);
        mfs_clear(&fs);
}

/* The ceilings: matching work per file, files per patch, bytes a plan
 * holds.  Each refusal changes nothing; under the ceiling the same patch
 * applies. */
static void test_limits(void **state) {
        cleanup_free char *many = NULL, *files = NULL, *text = NULL;
        size_t len = 0, n = 0;
        FILE *o;
        mfs fs = {0};
        cm_err err = CM_ERR_INIT;
        cm_patch_op *ops = NULL;
        cm_patch_io io = {&fs, mfs_read, 1 << 20, "TEST_MAX", 64 << 20, 10000};
        cm_patch p;
        (void)state;
        /* 1000 lines "a"; 20 hunks that each need the third pass (surrounding
         * whitespace), so each scans the rest of the file twice first. */
        o = open_memstream(&text, &len);
        for (int i = 0; i < 1000; i++)
                fputs("a\n", o);
        (void)fclose(o);
        o = open_memstream(&many, &len);
        fputs("*** Begin Patch\n*** Update File: /w/a\n", o);
        for (int i = 0; i < 20; i++)
                fputs("@@\n-  a\n+b\n", o);
        fputs("*** End Patch\n", o);
        (void)fclose(o);
        mfs_set(&fs, "/w/a", text, 2000);
        assert_int_equal(run_patch_io(many, len, &fs, &io, &ops, &n, &err), -1);
        assert_int_equal(err.code, E2BIG);
        assert_non_null(strstr(err.msg, "too many line comparisons"));
        assert_memory_equal(mfs_find(&fs, "/w/a")->data, text, 2000);
        io.budget = 0; /* the default: plenty for this */
        assert_int_equal(run_patch_io(many, len, &fs, &io, &ops, &n, &err), 0);
        assert_int_equal(mfs_find(&fs, "/w/a")->len, 2000);
        assert_memory_equal(mfs_find(&fs, "/w/a")->data, "b\nb\n", 4);
        assert_memory_equal(mfs_find(&fs, "/w/a")->data + 38, "b\na\n", 4);

        /* Bytes held: the file read (2000) and made (2000). */
        io.max_total = 3999;
        assert_int_equal(run_patch_io(many, len, &fs, &io, &ops, &n, &err), -1);
        assert_int_equal(err.code, E2BIG);
        assert_non_null(strstr(err.msg, "more than 3999 bytes of files in memory"));

        o = open_memstream(&files, &len);
        fputs("*** Begin Patch\n", o);
        for (int i = 0; i <= CM_PATCH_MAX_FILES; i++)
                fprintf(o, "*** Delete File: /w/%d\n", i);
        fputs("*** End Patch\n", o);
        (void)fclose(o);
        assert_int_equal(cm_patch_parse(files, len, &p, &err), -1);
        assert_int_equal(err.code, E2BIG);
        assert_non_null(strstr(err.msg, "more than 10000 files"));
        mfs_clear(&fs);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
        struct CMUnitTest *tests;
        char **names = NULL;
        size_t n = 0, i;
        struct dirent *e;
        DIR *d;
        int r;
        if (argc < 2) {
                fprintf(stderr, "usage: test_patch CORPUS_DIR\n");
                return 2;
        }
        corpus = argv[1];
        if (!(d = opendir(corpus))) {
                perror(corpus);
                return 2;
        }
        while ((e = readdir(d)))
                if (e->d_name[0] != '.') {
                        names = xrealloc(names, (n + 1) * sizeof *names);
                        names[n++] = xstrdup(e->d_name);
                }
        (void)closedir(d);
        qsort(names, n, sizeof *names, by_name);
        tests = xcalloc(n + 4, sizeof *tests);
        for (i = 0; i < n; i++)
                tests[i] = (struct CMUnitTest){.name = names[i], .test_func = run_case, .initial_state = names[i]};
        tests[i++] = (struct CMUnitTest)cmocka_unit_test(test_cap);
        tests[i++] = (struct CMUnitTest)cmocka_unit_test(test_reads_once);
        tests[i++] = (struct CMUnitTest)cmocka_unit_test(test_nul);
        tests[i++] = (struct CMUnitTest)cmocka_unit_test(test_limits);
        r = tap_run(tests, i, NULL, NULL);
        for (i = 0; i < n; i++)
                free(names[i]);
        free(names);
        free(tests);
        return r;
}
