/* dpatch (toolset codex, issue 11): a Codex apply_patch patch applied to
 * files in a container, through the backend's file operations only
 * (file_read, file_write, file_delete, file_move), so any backend that has
 * them has dpatch.  Those resolve every path inside the container's root
 * and write atomically, keeping the mode.
 *
 * Order: the container (managed and the session's, or allowlisted), the
 * patch parsed, then under the container's patch lock: the plan (every
 * file read once, every hunk applied in memory, src/patch/plan.c), and
 * only if all of it holds, the writes, moves and deletes in the patch's
 * order.  A failure there has no rollback (as in the seed): the error
 * names what was already changed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "patch/patch.h"
#include "tools/common.h"
#include "tools/keylock.h"
#include "util/cleanup.h"

#define MAX_NAME "CONTAINER_MCP_FILE_MAX_SIZE_MB"

typedef struct target {
        cm_backend *b;
        const char *id;
        uint64_t max;
        unsigned max_mb;
} target;

/* The plan's reads (cm_patch_io.read) through file_read.  For existence
 * alone the cap is 0: a file with bytes then answers EFBIG without being
 * read, which says it is there. */
static int read_file(void *ctx, const char *path, bool want_data, char **ret, size_t *ret_len, cm_err *err) {
        const target *t = ctx;
        cm_file_data d = {0};
        cm_err e = CM_ERR_INIT;
        if (t->b->ops->file_read(t->b, t->id, path, want_data ? t->max : 0, &d, &e) == 0) {
                if (want_data) {
                        *ret = steal_pointer(&d.data);
                        *ret_len = d.len;
                }
                cm_file_data_clear(&d);
                return 0;
        }
        cm_file_data_clear(&d);
        if (e.code == ENOENT || e.code == EISDIR)
                return -e.code;
        if (e.code == EFBIG && !want_data)
                return 0;
        if (e.code == EFBIG)
                return cm_err_set(err, EFBIG,
                                  "dpatch refused: %.200s is %llu bytes or more, over the limit of %u MiB (%s=%u); "
                                  "no file was changed. Edit it with dexec, or have the operator raise " MAX_NAME,
                                  path, (unsigned long long)(d.size ? d.size : t->max + 1), t->max_mb, MAX_NAME,
                                  t->max_mb);
        *err = e;
        cm_err_prefix(err, "dpatch: reading %.200s (no file was changed)", path);
        return -e.code;
}

/* A move: the source rewritten in place (atomic, keeps its mode), then
 * renamed.  When the destination's directory does not exist (file_move
 * makes none), file_write makes it by writing the destination, and the
 * rename then replaces that file.  *ret_src_written: the source holds the
 * new bytes. */
static int move_file(const target *t, const cm_patch_op *op, bool *ret_src_written, cm_err *err) {
        const cm_backend_ops *o = t->b->ops;
        cm_err e = CM_ERR_INIT;
        if (o->file_write(t->b, t->id, op->from, op->data, op->len, err) < 0)
                return -1;
        *ret_src_written = true;
        if (o->file_move(t->b, t->id, op->from, op->path, &e) == 0)
                return 0;
        if (e.code != ENOENT) {
                *err = e;
                return -1;
        }
        if (o->file_write(t->b, t->id, op->path, op->data, op->len, err) < 0)
                return -1;
        return o->file_move(t->b, t->id, op->from, op->path, err);
}

static int carry_out_one(const target *t, const cm_patch_op *op, bool *ret_src_written, cm_err *err) {
        switch (op->action) {
        case CM_PATCH_DELETED: return t->b->ops->file_delete(t->b, t->id, op->path, err);
        case CM_PATCH_MOVED: return move_file(t, op, ret_src_written, err);
        default: return t->b->ops->file_write(t->b, t->id, op->path, op->data, op->len, err);
        }
}

static void describe(FILE *o, const cm_patch_op *op) {
        fprintf(o, "%s %s", cm_patch_action_name(op->action), op->from ? op->from : op->path);
        if (op->from)
                fprintf(o, " -> %s", op->path);
        if (op->hunks)
                fprintf(o, " (%zu hunk%s)", op->hunks, op->hunks == 1 ? "" : "s");
}

/* The error of step `i`, with what was done before it and what not. */
static int partial_failure(const cm_patch_op *ops, size_t n, size_t i, bool src_written, cm_err *err) {
        cleanup_free char *msg = NULL;
        size_t len = 0;
        FILE *o = open_memstream(&msg, &len);
        if (!o)
                abort(); /* out of memory, as x* allocators do */
        fprintf(o, "dpatch: the patch was checked, but changing %s failed: %s. ",
                ops[i].from ? ops[i].from : ops[i].path, err->msg);
        if (src_written)
                fprintf(o, "%s now holds its new content but was not moved to %s. ", ops[i].from, ops[i].path);
        fprintf(o, "There is no rollback across files: ");
        if (i == 0)
                fprintf(o, "no other file was changed");
        else
                fprintf(o, "already changed:");
        for (size_t k = 0; k < i; k++) {
                fprintf(o, k ? ", " : " ");
                describe(o, &ops[k]);
        }
        if (i + 1 < n) {
                fprintf(o, "; not changed:");
                for (size_t k = i + 1; k < n; k++)
                        fprintf(o, "%s%s", k > i + 1 ? ", " : " ", ops[k].from ? ops[k].from : ops[k].path);
        }
        fprintf(o, ". Read those files and send a patch for what is left");
        (void)fclose(o);
        return cm_err_set(err, err->code ? err->code : EIO, "%s", msg);
}

static json_t *op_json(const cm_patch_op *op) {
        json_t *j = json_pack("{s:s, s:s}", "path", op->path, "action", cm_patch_action_name(op->action));
        if (op->hunks)
                json_object_set_new(j, "hunks", json_integer((json_int_t)op->hunks));
        if (op->from)
                json_object_set_new(j, "from", json_string(op->from));
        return j;
}

static void result(const char *id, const cm_patch_op *ops, size_t n, json_t **ret, char **ret_text) {
        json_t *files = json_array();
        char *text = NULL;
        size_t len = 0;
        FILE *o = open_memstream(&text, &len);
        if (!o)
                abort();
        fprintf(o, "patched %zu file%s in %.12s:", n, n == 1 ? "" : "s", id);
        for (size_t i = 0; i < n; i++) {
                (void)json_array_append_new(files, op_json(&ops[i]));
                fputc('\n', o);
                describe(o, &ops[i]);
        }
        (void)fclose(o);
        *ret = json_pack("{s:b, s:s, s:o}", "success", 1, "container", id, "files", files);
        *ret_text = text;
}

/* Plan and carry out, with the container's patch lock held. */
static int apply_locked(const target *t, const cm_patch *p, json_t **ret, char **ret_text, cm_err *err) {
        /* What one patch may hold: 8 files of the largest size, at least
         * 256 MiB (reads and results). */
        cm_patch_io io = {(void *)t, read_file, t->max, MAX_NAME, t->max > (32u << 20) ? 8 * t->max : 256u << 20, 0};
        cm_patch_op *ops = NULL;
        size_t n = 0, i;
        bool src_written = false;
        int r = cm_patch_plan(p, &io, &ops, &n, err);
        for (i = 0; r == 0 && i < n; i++)
                if (carry_out_one(t, &ops[i], &src_written, err) < 0)
                        r = partial_failure(ops, n, i, src_written, err);
        if (r == 0)
                result(t->id, ops, n, ret, ret_text);
        cm_patch_ops_free(ops, n);
        return r < 0 ? -1 : 0;
}

static int dpatch(mcp_call *call, json_t *args, json_t **ret, char **ret_text, cm_err *err) {
        cm_app *app = cm_call_app(call);
        const json_t *text = json_object_get(args, "patch");
        cm_container_info info = {0};
        cm_patch p = {0};
        target t = {.max_mb = app->cfg->file_max_size_mb, .max = (uint64_t)app->cfg->file_max_size_mb << 20};
        cm_keylock *lock;
        int r;
        if (cm_tool_writable(call, "dpatch", err) < 0 ||
            !(t.b = CM_TOOL_CODEX_TARGET(call, cm_json_str(args, "container"), file_read, "patch files", &info, err)))
                return -1;
        t.id = info.id;
        if (!t.b->ops->file_write || !t.b->ops->file_delete || !t.b->ops->file_move)
                r = cm_tool_unsupported(t.b, "patch files", err);
        else if ((r = cm_patch_parse(json_string_value(text), json_string_length(text), &p, err)) < 0)
                cm_err_prefix(err, "dpatch refused: the patch is not valid (no file was changed)");
        if (r == 0) {
                /* Per container: patches to others go on meanwhile. */
                lock = cm_keylock_acquire(app->patch_locks, info.id);
                r = apply_locked(&t, &p, ret, ret_text, err);
                cm_keylock_release(app->patch_locks, lock);
        }
        cm_patch_clear(&p);
        cm_container_info_clear(&info);
        return r < 0 ? -1 : 0;
}

/* Name, description and schemas: src/tools/defs/dpatch.json. */
static const cm_tool_handler handlers[] = {
        {"dpatch", dpatch},
};

const cm_tool_family cm_tools_dpatch = {__FILE__, handlers, ARRAY_SIZE(handlers)};
