/* Codex's patch format (apply_patch), parsed and applied in memory.
 *
 * No MCP and no I/O here: the dpatch tool (tools/dpatch.c) hands the text of
 * a patch to cm_patch_parse, then cm_patch_plan reads each file it names
 * through a callback and works out every file's new bytes before anything
 * is written, so a hunk that does not apply changes nothing.  The caller
 * then carries out the plan's operations in order.
 *
 *   *** Begin Patch
 *   *** Add File: /abs/path        then "+line" lines
 *   *** Delete File: /abs/path
 *   *** Update File: /abs/path     then an optional "*** Move to: /abs/path"
 *   @@ optional context line       then " ", "-", "+" lines, and an optional
 *                                  "*** End of File" (the lines end the file)
 *   *** End Patch
 *
 * Read as Codex's own parser reads it (codex-rs/apply-patch): markers may
 * carry surrounding whitespace, the whole patch may be wrapped in a
 * heredoc (<<'EOF' ... EOF), a CRLF patch reads as LF, the first hunk of an
 * update may lack its "@@" line, blank lines between hunks are skipped.
 * Context is matched as Codex does: exactly, then ignoring trailing
 * whitespace, then ignoring surrounding whitespace, then with typographic
 * dashes, quotes and spaces read as their ASCII forms.  Unlike Codex, a
 * context line keeps the file's own bytes (a match that ignored its
 * whitespace or quotes does not rewrite it).  Paths must be absolute,
 * without "." or ".." components. */
#ifndef CM_PATCH_H
#define CM_PATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* A line: bytes without their line end (may hold NUL), borrowed. */
typedef struct cm_patch_line {
        const char *p;
        size_t n;
} cm_patch_line;

/* One "@@" hunk of an update. */
typedef struct cm_patch_chunk {
        bool has_context;
        cm_patch_line context;    /* the text after "@@ ": a line the hunk follows */
        cm_patch_line *old_lines; /* context and "-" lines: what the file must hold */
        size_t n_old;
        cm_patch_line *new_lines; /* context and "+" lines: what replaces them */
        size_t *new_ctx;          /* per new line: 1 + its index in old_lines for a
                                   * context line, 0 for a "+" line */
        size_t n_new;
        bool eof;    /* "*** End of File": old_lines end the file */
        size_t line; /* the hunk's first line in the patch, from 1 */
} cm_patch_chunk;

typedef enum cm_patch_kind { CM_PATCH_ADD, CM_PATCH_DELETE, CM_PATCH_UPDATE } cm_patch_kind;

typedef struct cm_patch_file {
        cm_patch_kind kind;
        char *path;         /* absolute, normalised (no "//", ".", "..") */
        char *move_to;      /* update: "*** Move to:", or NULL */
        cm_patch_line *add; /* add: the "+" lines, each to end in a newline */
        size_t n_add;
        cm_patch_chunk *chunks; /* update: at least one */
        size_t n_chunks;
        size_t line; /* the header's line in the patch, from 1 */
} cm_patch_file;

typedef struct cm_patch {
        char *text; /* a copy of the patch: every cm_patch_line points into it */
        cm_patch_file *files;
        size_t n_files;
} cm_patch;

/* Files one patch may name: the plan looks paths up in a list, and Codex
 * patches name a handful. */
#define CM_PATCH_MAX_FILES 10000

/* Parse `len` bytes.  An invalid patch fails (EINVAL) with the line and
 * what to write instead; *ret is untouched then. */
int cm_patch_parse(const char *text, size_t len, cm_patch *ret, cm_err *err);
void cm_patch_clear(cm_patch *p);

/* Apply an update's hunks to the bytes of the file `f` names, in memory.
 * A CRLF file (every newline a CRLF) is matched without its \r and written
 * back with CRLF; a file without a final newline stays without one.  A
 * hunk that does not apply fails (ENOENT) with the file, the hunk (its line
 * in the patch, "@@" context, first lines) and the closest lines found in
 * the file (where, and what).  `budget`: 0 for CM_PATCH_BUDGET. */
int cm_patch_apply(const cm_patch_file *f, const char *data, size_t len, uint64_t budget, char **ret, size_t *ret_len,
                   cm_err *err);

/* Lines a file's searches may step over in all (cm_patch_apply's budget),
 * so a patch of many hunks that each fall back to the lenient passes (each
 * such pass scans to the file's end) cannot hold a server thread for long:
 * about a second.  More fails with E2BIG. */
#define CM_PATCH_BUDGET (512u << 20)

/* ---- the plan: every file's outcome, worked out before any write ---- */

typedef enum cm_patch_action { CM_PATCH_ADDED, CM_PATCH_UPDATED, CM_PATCH_MOVED, CM_PATCH_DELETED } cm_patch_action;

/* One step, in the patch's order.  added, updated: write `path`;
 * moved: write `from` (keeping its mode), then rename it to `path`;
 * deleted: delete `path`. */
typedef struct cm_patch_op {
        cm_patch_action action;
        const char *path; /* borrowed from the cm_patch */
        const char *from; /* moved: the source */
        char *data;       /* added, updated, moved: the new bytes (owned) */
        size_t len;
        size_t hunks; /* updated, moved */
} cm_patch_op;

/* How the plan sees the files.  read: 0 with the bytes (owned by the
 * caller afterwards); -ENOENT when nothing is there; -EISDIR for a
 * directory; any other < 0 with err set (too big, not a regular file, a
 * pseudo-filesystem, ...).  With want_data false only existence matters
 * (ret may be left NULL). */
typedef struct cm_patch_io {
        void *ctx;
        int (*read)(void *ctx, const char *path, bool want_data, char **ret, size_t *ret_len, cm_err *err);
        uint64_t max_bytes;   /* the largest file the plan may produce */
        const char *max_name; /* the setting behind max_bytes, for messages */
        uint64_t max_total;   /* the bytes of files read and made in all */
        uint64_t budget;      /* lines each file's searches may step over (0: CM_PATCH_BUDGET) */
} cm_patch_io;

/* Every file the patch names, read once, every hunk applied in memory, in
 * the patch's order (a file named twice sees the first change); any
 * failure fails the whole plan and names the file and hunk. */
int cm_patch_plan(const cm_patch *p, const cm_patch_io *io, cm_patch_op **ret, size_t *ret_n, cm_err *err);
void cm_patch_ops_free(cm_patch_op *v, size_t n);

const char *cm_patch_action_name(cm_patch_action a);

#endif
