/* The whole patch worked out before anything is written: each file it
 * names is read once (through the caller's callback) into a table of what
 * the files will be, each change is made there in the patch's order, and
 * the result is the list of writes, moves and deletes to carry out.  Any
 * hunk that does not apply, or any file that is not what the patch says
 * (missing, a directory, too big), fails the whole plan. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "patch/internal.h"

typedef enum vstate { V_UNKNOWN, V_ABSENT, V_FILE, V_DIR } vstate;

/* A file as the patch has left it so far. */
typedef struct vfile {
        const char *path;
        vstate state;
        bool loaded; /* data holds its bytes */
        char *data;
        size_t len;
} vfile;

typedef struct vfs {
        vfile *v;
        size_t n;
        const cm_patch_io *io;
        cm_patch_op *ops;
        size_t n_ops;
        uint64_t held; /* bytes read and made so far */
} vfs;

/* Count `len` more bytes held by the plan, within io->max_total. */
static int hold(vfs *fs, const char *path, size_t len, cm_err *err) {
        fs->held += len;
        if (fs->held <= fs->io->max_total)
                return 0;
        return cm_err_set(err, E2BIG,
                          "the patch needs more than %llu bytes of files in memory (at %.200s); no file was "
                          "changed. Split it into smaller patches",
                          (unsigned long long)fs->io->max_total, path);
}

static vfile *vfs_find(vfs *fs, const char *path) {
        for (size_t i = 0; i < fs->n; i++)
                if (strcmp(fs->v[i].path, path) == 0)
                        return &fs->v[i];
        fs->v = xrealloc(fs->v, (fs->n + 1) * sizeof *fs->v);
        fs->v[fs->n] = (vfile){.path = path};
        return &fs->v[fs->n++];
}

/* The file at `path`, read through the callback the first time (and
 * again for its bytes when only its existence was asked before). */
static vfile *vfs_get(vfs *fs, const char *path, bool want_data, cm_err *err) {
        vfile *f = vfs_find(fs, path);
        char *data = NULL;
        size_t len = 0;
        int r;
        if (f->state != V_UNKNOWN && !(f->state == V_FILE && want_data && !f->loaded))
                return f;
        r = fs->io->read(fs->io->ctx, path, want_data, &data, &len, err);
        if (r == -ENOENT || r == -EISDIR) {
                f->state = r == -ENOENT ? V_ABSENT : V_DIR;
                return f;
        }
        if (r < 0)
                return NULL;
        f->state = V_FILE;
        if (want_data && hold(fs, path, len, err) < 0) {
                free(data);
                return NULL;
        }
        if (want_data) {
                f->data = data;
                f->len = len;
                f->loaded = true;
        } else {
                free(data);
        }
        return f;
}

static void vfs_set(vfile *f, vstate state, const char *data, size_t len) {
        free(f->data);
        f->state = state;
        f->loaded = state == V_FILE;
        f->data = NULL;
        f->len = 0;
        if (state == V_FILE) {
                f->data = xmalloc(len + 1);
                memcpy(f->data, data, len);
                f->len = len;
        }
}

static void vfs_clear(vfs *fs) {
        for (size_t i = 0; i < fs->n; i++)
                free(fs->v[i].data);
        free(fs->v);
}

static cm_patch_op *add_op(vfs *fs, cm_patch_action a, const char *path, char *data, size_t len) {
        fs->ops = xrealloc(fs->ops, (fs->n_ops + 1) * sizeof *fs->ops);
        fs->ops[fs->n_ops] = (cm_patch_op){.action = a, .path = path, .data = data, .len = len};
        return &fs->ops[fs->n_ops++];
}

static int too_big(const vfs *fs, const char *path, size_t len, cm_err *err) {
        if (len <= fs->io->max_bytes)
                return 0;
        return cm_err_set(err, EFBIG,
                          "%.200s would be %zu bytes after the patch, over the limit of %llu bytes (%s); no file "
                          "was changed. Split the file, or have the operator raise %s",
                          path, len, (unsigned long long)fs->io->max_bytes, fs->io->max_name, fs->io->max_name);
}

static int is_dir(const char *header, const char *path, cm_err *err) {
        return cm_err_set(err, EISDIR,
                          "%s %.200s: that is a directory, and dpatch changes files only; no file was "
                          "changed",
                          header, path);
}

static int plan_add(vfs *fs, const cm_patch_file *p, cm_err *err) {
        vfile *f = vfs_get(fs, p->path, false, err);
        char *data = NULL;
        size_t len = 0;
        FILE *o;
        if (!f)
                return -1;
        if (f->state == V_DIR)
                return is_dir("Add File:", p->path, err);
        if (!(o = open_memstream(&data, &len)))
                abort(); /* out of memory, as x* allocators do */
        for (size_t i = 0; i < p->n_add; i++) {
                fwrite(p->add[i].p, 1, p->add[i].n, o);
                fputc('\n', o);
        }
        (void)fclose(o);
        if (too_big(fs, p->path, len, err) < 0 || hold(fs, p->path, len, err) < 0) {
                free(data);
                return -1;
        }
        vfs_set(f, V_FILE, data, len);
        add_op(fs, CM_PATCH_ADDED, p->path, data, len);
        return 0;
}

static int plan_delete(vfs *fs, const cm_patch_file *p, cm_err *err) {
        vfile *f = vfs_get(fs, p->path, false, err);
        if (!f)
                return -1;
        if (f->state == V_DIR)
                return is_dir("Delete File:", p->path, err);
        if (f->state == V_ABSENT)
                return cm_err_set(err, ENOENT,
                                  "Delete File: %.200s: no such file (line %zu of the patch); leave it out of the "
                                  "patch; no file was changed",
                                  p->path, p->line);
        vfs_set(f, V_ABSENT, NULL, 0);
        add_op(fs, CM_PATCH_DELETED, p->path, NULL, 0);
        return 0;
}

static int plan_update(vfs *fs, const cm_patch_file *p, cm_err *err) {
        vfile *f = vfs_get(fs, p->path, true, err), *dst;
        char *data = NULL;
        size_t len = 0;
        cm_patch_op *op;
        if (!f)
                return -1;
        if (f->state == V_DIR)
                return is_dir("Update File:", p->path, err);
        if (f->state == V_ABSENT)
                return cm_err_set(err, ENOENT,
                                  "Update File: %.200s: no such file (line %zu of the patch); create it with "
                                  "'*** Add File:'; no file was changed",
                                  p->path, p->line);
        if (cm_patch_apply(p, f->data, f->len, fs->io->budget, &data, &len, err) < 0)
                return -1;
        if (too_big(fs, p->move_to ? p->move_to : p->path, len, err) < 0 || hold(fs, p->path, len, err) < 0) {
                free(data);
                return -1;
        }
        if (p->move_to) {
                /* vfs_get may move the table: f is looked up again below */
                if (!(dst = vfs_get(fs, p->move_to, false, err)) || dst->state == V_DIR) {
                        free(data);
                        return dst ? is_dir("Move to:", p->move_to, err) : -1;
                }
                vfs_set(dst, V_FILE, data, len);
                vfs_set(vfs_find(fs, p->path), V_ABSENT, NULL, 0);
        } else {
                vfs_set(f, V_FILE, data, len);
        }
        op = add_op(fs, p->move_to ? CM_PATCH_MOVED : CM_PATCH_UPDATED, p->move_to ? p->move_to : p->path, data, len);
        op->from = p->move_to ? p->path : NULL;
        op->hunks = p->n_chunks;
        return 0;
}

int cm_patch_plan(const cm_patch *p, const cm_patch_io *io, cm_patch_op **ret, size_t *ret_n, cm_err *err) {
        vfs fs = {.io = io};
        int r = 0;
        if (p->n_files == 0)
                return cm_err_set(err, EINVAL,
                                  "the patch names no file; put '*** Add File:', '*** Delete File:' or '*** Update "
                                  "File:' sections between '*** Begin Patch' and '*** End Patch'");
        for (size_t i = 0; r == 0 && i < p->n_files; i++) {
                const cm_patch_file *f = &p->files[i];
                r = f->kind == CM_PATCH_ADD      ? plan_add(&fs, f, err)
                    : f->kind == CM_PATCH_DELETE ? plan_delete(&fs, f, err)
                                                 : plan_update(&fs, f, err);
        }
        vfs_clear(&fs);
        if (r < 0) {
                cm_patch_ops_free(fs.ops, fs.n_ops);
                return -1;
        }
        *ret = fs.ops;
        *ret_n = fs.n_ops;
        return 0;
}

void cm_patch_ops_free(cm_patch_op *v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i].data);
        free(v);
}

const char *cm_patch_action_name(cm_patch_action a) {
        static const char *const names[] = {"added", "updated", "moved", "deleted"};
        return names[a];
}
