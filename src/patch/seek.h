/* Finding lines in a file as Codex does (seek.c). */
#ifndef CM_PATCH_SEEK_H
#define CM_PATCH_SEEK_H

#include <stdbool.h>
#include <stdint.h>

#include "patch/internal.h"

/* The passes, strictest first. */
typedef enum cm_seek_pass {
        CM_SEEK_EXACT,
        CM_SEEK_RSTRIP,     /* trailing whitespace ignored */
        CM_SEEK_TRIM,       /* whitespace around the line ignored */
        CM_SEEK_NORMALISED, /* and typographic punctuation read as ASCII */
        CM_SEEK_PASSES
} cm_seek_pass;

/* A file's lines and, made on first use, their hashes under each pass. */
typedef struct cm_seek_file {
        const cm_patch_line *lines;
        size_t n;
        uint64_t *hash[CM_SEEK_PASSES];
        uint64_t budget; /* lines the searches may still step over */
        bool exhausted;  /* a search stopped because the budget ran out */
} cm_seek_file;

void cm_seek_index(cm_seek_file *f, const cm_patch_line *lines, size_t n, uint64_t budget);
void cm_seek_free(cm_seek_file *f);

/* The hashes of the file's lines under `pass`, made on first use. */
const uint64_t *cm_seek_hashes(cm_seek_file *f, cm_seek_pass pass);
uint64_t cm_seek_hash(cm_seek_pass pass, cm_patch_line l);
bool cm_seek_line_eq(cm_seek_pass pass, cm_patch_line a, cm_patch_line b);

/* Where the m lines of `pat` first occur at or after line `start`, trying
 * each pass in turn; with `eof`, only as the file's last lines.  An empty
 * pattern is found at `start`. */
bool cm_seek(cm_seek_file *f, const cm_patch_line *pat, size_t m, size_t start, bool eof, size_t *ret);

#endif
