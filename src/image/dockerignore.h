/* .dockerignore, as Docker reads it (moby/patternmatcher and the
 * ignorefile reader), for any builder that sends or reads a build context:
 * the docker backend's tar of the context today, a native builder later.
 *
 * One pattern a line; `#` at the start of a line is a comment; blank lines
 * are skipped; each pattern is trimmed and cleaned like Go's filepath.Clean
 * (`a//b/../c` is `a/c`, a leading `/` dropped).  `*` is any run of
 * characters but `/`, `?` one character but `/`, `[a-z]` / `[^a]` a class,
 * `\x` the character x, and `**` any number of directories (`**` / `**` +
 * `/` ... as in .gitignore).  A pattern that matches a directory matches
 * everything under it.  `!` makes an exception; the last pattern that
 * matches a path decides. */
#ifndef CM_IMAGE_DOCKERIGNORE_H
#define CM_IMAGE_DOCKERIGNORE_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

#define CM_DOCKERIGNORE_MAX_PATTERNS 4096
#define CM_DOCKERIGNORE_MAX_PATTERN 4096 /* bytes of one pattern */

typedef struct cm_dockerignore cm_dockerignore;

/* An empty set (nothing excluded). */
cm_dockerignore *cm_dockerignore_new(void);
void cm_dockerignore_free(cm_dockerignore *d);

/* Add the patterns of a .dockerignore file's text (any bytes; NULs end
 * nothing, they are plain characters).  A bad pattern (an unterminated
 * class, a lone `!`, too many or too long) is an error naming its line;
 * the lines before it stay added (a builder then stops anyway). */
int cm_dockerignore_parse(cm_dockerignore *d, const char *text, size_t len, cm_err *err);
/* Add one pattern, as a line of the file ("!Dockerfile"). */
int cm_dockerignore_add(cm_dockerignore *d, const char *pattern, cm_err *err);

/* Is this path of the context (relative, `/`-separated, no `.` or `..`
 * components: as a walk of the context makes them) left out? */
bool cm_dockerignore_excluded(const cm_dockerignore *d, const char *path);
/* For a directory that is left out: must a walk still go into it, because
 * an exception names something below it (Docker's rule: an exception whose
 * text starts with "DIR/")? */
bool cm_dockerignore_enter(const cm_dockerignore *d, const char *dir);

/* The context's .dockerignore (none: nothing left out), read beneath the
 * context directory ctx without following a symlink, with the Dockerfile
 * and .dockerignore always kept, as the docker CLI does. */
#define CM_DOCKERIGNORE_MAX_FILE (1 << 20)
int cm_dockerignore_read(int ctx, const char *dockerfile, cm_dockerignore **ret, cm_err *err);

#endif
