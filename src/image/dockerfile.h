/* A Dockerfile, read as Docker's parser reads it (moby/buildkit's
 * frontend/dockerfile/parser and shell/lex.go), for the native builder:
 * the subset it runs.  Outside bytes (the agent's context): fuzzed.
 *
 * Parsing splits the text into instructions: parser directives at the top
 * (`# escape=` sets the escape character, `\` or a backquote; `# syntax=`
 * and `# check=` are ignored), comments (`#` first on a line, even inside a
 * continued instruction), continuation lines (the escape character last on
 * a line, then only blanks), empty lines.  Each instruction's keyword is
 * case-insensitive; its arguments are kept raw (quotes and `$` still in
 * them): what they expand to depends on the ARG and ENV values at the
 * step, so the builder expands them with df_word as it goes.
 *
 * What is not in the subset is an error naming the line and the
 * instruction: another keyword (VOLUME, HEALTHCHECK, ONBUILD, STOPSIGNAL,
 * MAINTAINER), a heredoc (`<<EOF`), a flag the instruction does not take.
 * Error messages start "Dockerfile line N: " ("Dockerfile: " for the file
 * as a whole: too big, no instruction, no FROM). */
#ifndef CM_IMAGE_DOCKERFILE_H
#define CM_IMAGE_DOCKERFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

#define DF_MAX_BYTES (1024 * 1024)    /* of the file: more is an error */
#define DF_MAX_INSTRUCTIONS 4096
#define DF_MAX_WORD (64 * 1024)       /* bytes a word may expand to */

enum df_cmd {
        DF_FROM,
        DF_RUN,
        DF_COPY,
        DF_ADD,
        DF_ENV,
        DF_ARG,
        DF_WORKDIR,
        DF_USER,
        DF_CMD,
        DF_ENTRYPOINT,
        DF_LABEL,
        DF_EXPOSE,
        DF_SHELL,
};

/* "FROM", "RUN", ... */
const char *df_cmd_name(enum df_cmd c);

/* `--name=value` (or `--name` alone: value NULL) before the arguments. */
typedef struct df_flag {
        char *name; /* without the dashes: "from", "chown", "chmod" */
        char *value;
} df_flag;

/* One instruction.  args, by command (raw: quotes and `$` kept, except
 * in the JSON form, whose strings are decoded):
 *   FROM            [image] or [image, name] (`AS name`; the "AS" dropped,
 *                   the name lower-cased as Docker does)
 *   RUN, CMD, ENTRYPOINT
 *                   json: the array's strings; else one string, the rest
 *                   of the line (continuations joined, as Docker does:
 *                   the escape character and newline removed)
 *   SHELL           json only: the array's strings (at least one)
 *   COPY, ADD       json or words: sources..., destination (>= 2)
 *   ENV, LABEL      pairs: name, value, name, value... (`k=v k2="a b"`;
 *                   the legacy `ENV k the rest` gives one pair)
 *   ARG             words: "name" or "name=default" (>= 1)
 *   WORKDIR, USER   one string, the rest of the line (trimmed)
 *   EXPOSE          words (>= 1)
 * Flags: COPY --from --chown --chmod --link; ADD --chown --chmod --link
 * --checksum; FROM --platform; RUN --network (only "none" and "default",
 * checked by the builder).  Anything else is an error, and so is a flag
 * given twice.  --link takes no value or =true/=false; the others need a
 * value.  A flag's value has its quotes and escapes removed already, as
 * Docker's flag parser does. */
typedef struct df_inst {
        enum df_cmd cmd;
        unsigned line; /* 1-based: where the instruction starts */
        bool json;     /* the exec (JSON array) form */
        char **args;   /* NULL-terminated */
        size_t n_args;
        df_flag *flags;
        size_t n_flags;
        char *text; /* as written, continuations joined; for progress */
                    /* (the pieces trimmed and joined by a space, control
                     * characters as spaces, at most 256 bytes: cut with "…") */
} df_inst;

typedef struct df_file {
        df_inst *v;
        size_t n;
        char escape; /* '\\' or '`' */
} df_file;

/* Parse the text (any bytes; a NUL is an error).  An empty file, or one
 * with no FROM before the first instruction other than ARG, is an error
 * that says so. */
int df_parse(const char *text, size_t len, df_file *ret, cm_err *err);
void df_file_clear(df_file *f);

/* The value of a variable for expansion; NULL: unset. */
typedef const char *(*df_lookup_fn)(void *arg, const char *name);

/* A raw word as the shell-like lexer of Docker makes it: quotes removed
 * ('...' literal; "..." with `$` expanded and the escape character
 * escaping only `"`, `$`, itself and a newline), the escape character
 * escaping the next character outside quotes, and $NAME, ${NAME},
 * ${NAME:-word}, ${NAME-word}, ${NAME:+word}, ${NAME+word},
 * ${NAME:?message}, ${NAME?message} expanded (an unset name: "").
 * `quotes` false (the JSON form's strings): only the expansion.  Errors: an
 * unterminated quote or `${`, a bad substitution, `?` on an unset or
 * empty name (its message), a result past DF_MAX_WORD.
 *
 * As Docker's lexer: `$` before a character that starts no name is
 * itself; `$1`, `$@`, `$#`... look up "1", "@", "#" (unset: ""); with
 * `quotes` false the escape character still escapes; the word of a
 * ${NAME:-word} is read (and an error in it counts) even when unused.
 * ${NAME#...}, ${NAME%...} and ${NAME/...} are errors here.  ${...} nests
 * at most 64 deep. */
int df_word(const char *raw, char escape, bool quotes, df_lookup_fn lookup, void *arg, char **ret, cm_err *err);

#endif
