/* CONTAINER_MCP_ALLOWED_COMMANDS: which command lines system_run_command
 * accepts while the operator restricts it to a list of command names.
 *
 * The line is parsed as bash parses it (quotes, escapes, comments, here-
 * documents, pipes, lists, subshells, groups, if/while/until/for), and every
 * simple command must start with one of the allowed names.  Whatever could
 * run a command the parser cannot see is refused as unprovable: command and
 * process substitution, arithmetic (bash evaluates array subscripts in it,
 * which can run commands), parameter expansions that evaluate (`${!x}`,
 * `${x[i]}`, `${x:n}`, `${x@P}`), a command word built from an expansion, a
 * glob, braces, `~` or `$'...'`, a command given by path, wrappers that run
 * their arguments (env, xargs, timeout, sh -c, ...), `find -exec`, function
 * and array definitions, `case`/`select`/`[[`/`((`, line continuations and
 * lines that do not parse.  A guard rail on top of the sandbox, not the
 * boundary: an allowed program that runs others itself (awk's system(), an
 * interpreter) still does.  Pure: no I/O, no globals, no recursion; the
 * nesting depth is capped (CM_CMDLINE_MAX_DEPTH). */
#ifndef CM_CMDLINE_H
#define CM_CMDLINE_H

#include <stddef.h>

#include "util/err.h"

/* Deepest nesting of ( { if while until for and of quotes inside ${...}. */
#define CM_CMDLINE_MAX_DEPTH 200
/* Longest name CONTAINER_MCP_ALLOWED_COMMANDS may list. */
#define CM_CMDLINE_NAME_MAX 128

/* 0 when every simple command of the shell line `line` starts with one of
 * the `n` words in `allowed`; -1 with err naming the first command or
 * construct that is not allowed or cannot be proven safe, and how to fix it
 * (e.g. "command substitution $(...) is not allowed while
 * CONTAINER_MCP_ALLOWED_COMMANDS is set: run the inner command on its own"). */
int cm_cmdline_allowed(const char *line, const char *const *allowed, size_t n, cm_err *err);

/* 0 when `name` may be listed in CONTAINER_MCP_ALLOWED_COMMANDS: 1 to
 * CM_CMDLINE_NAME_MAX of [A-Za-z0-9_.+-] not starting with '-' (or exactly
 * "["), not a reserved word, not a wrapper that cm_cmdline_allowed always
 * refuses; -1 with err saying why otherwise. */
int cm_cmdline_name_ok(const char *name, cm_err *err);

#endif
