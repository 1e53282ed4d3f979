/* The tar reader for layers and image archives (layer.c).  Outside bytes:
 * every path is opened component by component beneath the destination
 * with O_NOFOLLOW, so an entry can neither name nor write through a way
 * out of it. */
#ifndef CM_IMAGE_LAYER_H
#define CM_IMAGE_LAYER_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "image/store.h"
#include "util/sha256.h"

enum img_unpack_mode {
        UNPACK_LAYER, /* into the store: whiteouts as overlayfs reads them */
        UNPACK_APPLY, /* onto lower layers (the copy fallback): whiteouts delete */
        UNPACK_PLAIN, /* an image archive: files as they are, owners ours */
};

typedef struct img_unpack_opts {
        enum img_unpack_mode mode;
        img_owner owner;
        uint64_t max_bytes; /* of the decompressed stream, plus 512 a header */
        const cm_cancel *cancel;
} img_unpack_opts;

typedef struct img_unpack_result {
        uint8_t diff_id[CM_SHA256_LEN]; /* sha256 of the decompressed stream */
        uint64_t stream_bytes;
        uint64_t file_bytes; /* of the regular files written */
        size_t skipped;      /* device nodes and sockets, not created */
} img_unpack_result;

/* Unpack the archive read from src (gzip, zstd or plain tar) into the
 * directory dst.  On failure dst holds part of it: the caller's temporary
 * goes. */
int img_unpack(int src, int dst, const img_unpack_opts *o, img_unpack_result *ret, cm_err *err);

/* Remove name in dir and everything below, never following a symlink. */
void img_remove_at(int dir, const char *name);
/* Bytes of the regular files below dir/name (and name itself). */
uint64_t img_tree_bytes(int dir, const char *name);
/* Open `rel` beneath dir, every component with O_NOFOLLOW (flags for the
 * last one); no "..".  -1 with errno. */
int img_open_beneath(int dir, const char *rel, int flags);

#endif
