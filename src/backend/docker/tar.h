/* The tar streams of the archive endpoints, never held whole in memory:
 * a reader fed by libcurl's write callback that extracts beneath a host
 * directory fd (tar-slip refused: no absolute name, no `..`, no symlink
 * followed on the way), and a writer pulled by libcurl's read callback that
 * walks a host tree through fds (symlinks archived, never followed). */
#ifndef CM_DOCKER_TAR_H
#define CM_DOCKER_TAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/copy.h"
#include "util/err.h"

typedef struct dk_untar dk_untar;

/* Extract below dir_fd; the archive's first component is renamed `top`. */
dk_untar *dk_untar_new(int dir_fd, const char *top, uint64_t max_bytes);
/* Feed bytes; < 0 once anything was refused (the error kept). */
int dk_untar_feed(dk_untar *u, const char *p, size_t n);
/* After the last bytes: 0 when the archive was complete and all went
 * well, else < 0 with err. */
int dk_untar_end(dk_untar *u, cm_copy_stats *ret, cm_err *err);
void dk_untar_free(dk_untar *u);

typedef struct dk_tarw dk_tarw;

/* Archive `name` of dir_fd (file, directory or symlink) as `top`.  An
 * empty `top`: a directory's contents, named from its root ("a", "d/b"),
 * as a build context is sent. */
dk_tarw *dk_tarw_new(int dir_fd, const char *name, const char *top, uint64_t max_bytes);
/* Which entries go in (a build's .dockerignore): called with each entry's
 * name in the archive, below `top`, before it is read. */
enum dk_tar_verdict {
        DK_TAR_KEEP,
        DK_TAR_SKIP,       /* the entry, and for a directory all below it */
        DK_TAR_SKIP_ENTRY, /* a directory's own entry, not what is below it */
};
typedef enum dk_tar_verdict (*dk_tar_filter)(void *arg, const char *name, bool is_dir);
void dk_tarw_set_filter(dk_tarw *w, dk_tar_filter fn, void *arg);
/* Up to n bytes of the stream; 0 at its end; < 0 on error (kept). */
ssize_t dk_tarw_read(dk_tarw *w, char *p, size_t n);
int dk_tarw_end(dk_tarw *w, cm_copy_stats *ret, cm_err *err);
void dk_tarw_free(dk_tarw *w);

#endif
