/* libFuzzer: arbitrary bytes as a system_run_command line into
 * cm_cmdline_allowed (CONTAINER_MCP_ALLOWED_COMMANDS), an agent's value.
 * Beyond "no crash, no overflow, no stack exhaustion":
 *  - the verdict and message are the same on a second call;
 *  - err is filled iff the result is -1 (a success leaves it untouched),
 *    and every refusal names the setting;
 *  - a line accepted with a list is accepted with a longer list
 *    (allowing more never refuses more);
 *  - an accepted line holds no command substitution ($(...) or `...`),
 *    process substitution or arithmetic outside single quotes, by a second,
 *    deliberately simple reading of the quotes (lines with here-documents,
 *    whose quoted bodies are literal, are left out of this one). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/cmdline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool word_start(const char *s, size_t i) { return i == 0 || strchr(" \t\n;&|()<>", s[i - 1]); }

/* The first $( ` <( >( $[ outside single quotes, $'...' and comments. */
static bool substitution_outside_quotes(const char *s) {
        bool dq = false;
        for (size_t i = 0; s[i]; i++) {
                char c = s[i];
                if ((c == '\\' || (c == '$' && s[i + 1] == '$')) && s[i + 1]) {
                        i++; /* an escaped character; $$, the shell's pid */
                } else if (dq) {
                        if (c == '"')
                                dq = false;
                        else if (c == '`' || (c == '$' && (s[i + 1] == '(' || s[i + 1] == '[')))
                                return true;
                } else if (c == '"') {
                        dq = true;
                } else if (c == '\'' || (c == '$' && s[i + 1] == '\'')) {
                        bool ansi = c == '$';
                        i += ansi ? 2 : 1;
                        while (s[i] && s[i] != '\'') /* the parser accepted it: the quote closes */
                                i += ansi && s[i] == '\\' && s[i + 1] ? 2 : 1;
                        if (!s[i])
                                return false;
                } else if (c == '#' && word_start(s, i)) {
                        while (s[i + 1] && s[i + 1] != '\n')
                                i++;
                } else if (c == '`' || ((c == '$' || c == '<' || c == '>') && (s[i + 1] == '(' || s[i + 1] == '['))) {
                        if (!(c != '$' && s[i + 1] == '['))
                                return true;
                }
        }
        return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char *const few[] = {"ls", "cat", "[", "find", "printf", "test", "echo"};
        static const char *const more[] = {"ls", "cat", "[", "find", "printf", "test", "echo", "grep", "rm", "x"};
        cm_err a = {12345, "untouched"}, b = {12345, "untouched"}, c = {12345, "untouched"};
        char *s = malloc(size + 1);
        int ra, rb, rc;
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = 0;
        ra = cm_cmdline_allowed(s, few, sizeof few / sizeof few[0], &a);
        rb = cm_cmdline_allowed(s, few, sizeof few / sizeof few[0], &b);
        rc = cm_cmdline_allowed(s, more, sizeof more / sizeof more[0], &c);
        if (ra != rb || a.code != b.code || strcmp(a.msg, b.msg) != 0)
                abort(); /* not deterministic */
        if (ra != 0 && ra != -1)
                abort();
        if (ra == 0 && (a.code != 12345 || strcmp(a.msg, "untouched") != 0))
                abort(); /* a success touched err */
        if (ra < 0 && (a.code <= 0 || a.code == 12345 || !strstr(a.msg, "CONTAINER_MCP_ALLOWED_COMMANDS")))
                abort(); /* a refusal that does not say why or what to change */
        if (ra == 0 && rc != 0)
                abort(); /* allowing more refused more */
        if (ra == 0 && !strstr(s, "<<") && substitution_outside_quotes(s))
                abort(); /* accepted a substitution */
        free(s);
        return 0;
}
