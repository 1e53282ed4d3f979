/* cm_cmdline_allowed (CONTAINER_MCP_ALLOWED_COMMANDS): a table of lines,
 * allowed and refused, each refusal naming its construct; and the same
 * lines through a real bash, with `rm` a stub that leaves a mark: every
 * accepted line must leave none, and the refused lines marked `rm` must
 * really run it (the refusal is about something bash does). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "policy/cmdline.h"
#include "util/cleanup.h"

static const char *const allowed[] = {"ls",     "cat",  "grep", "find", "echo", "pwd",  "mkdir", "touch",
                                      "printf", "test", "[",    "true", "wc",   "head", "sort"};
#define N_ALLOWED ARRAY_SIZE(allowed)

enum { OK, NO, NO_RM }; /* allowed; refused; refused, and bash would run rm */

static const struct row {
        const char *line;
        int verdict;
        const char *names; /* refused: what the message must name */
} rows[] = {
        /* quoting that spells a literal name */
        {"ls", OK, NULL},
        {"l\"s\"", OK, NULL},
        {"'ls'", OK, NULL},
        {"\\ls -l", OK, NULL},
        {"ls '$(rm)' \"\\$(rm)\" \\`rm\\`", OK, NULL},
        {"echo a\\\"b 'c\"d' \"e'f\" $'\\x41' \"it's\"", OK, NULL},
        {"ls\\;rm", NO, "\"ls;rm\" is not in CONTAINER_MCP_ALLOWED_COMMANDS"},
        {"$'ls'", NO, "$'...'"},
        /* lists, pipes, subshells, groups, compound commands */
        {"ls;rm", NO_RM, "\"rm\" is not in"},
        {"ls|rm", NO_RM, "\"rm\" is not in"},
        {"ls&&rm", NO_RM, "\"rm\" is not in"},
        {"grep -q x nofile || rm", NO_RM, "\"rm\" is not in"},
        {"ls &rm", NO_RM, "\"rm\" is not in"},
        {"ls\nrm", NO_RM, "\"rm\" is not in"},
        {"(rm)", NO_RM, "\"rm\" is not in"},
        {"{ rm; }", NO_RM, "\"rm\" is not in"},
        {"! rm", NO_RM, "\"rm\" is not in"},
        {"ls | cat |& rm", NO_RM, "\"rm\" is not in"},
        {"if grep -q x nofile; then cat x; else rm; fi", NO_RM, "\"rm\" is not in"},
        {"for f in a; do rm; done", NO_RM, "\"rm\" is not in"},
        {"rm", NO_RM, "\"rm\" is not in"},
        {"ls | grep a | wc -l; ls && cat x || echo no & wc -l", OK, NULL},
        {"ls\ncat x\n\n", OK, NULL},
        {"(ls; cat x) && { ls; cat x; }", OK, NULL},
        {"! ls", OK, NULL},
        {"if ls; then cat x; elif grep -q a b; then echo y; else echo n; fi", OK, NULL},
        {"while grep -q x nofile; do ls; done; until true; do ls; done", OK, NULL},
        {"for f in *.txt; do cat \"$f\"; done; for g; do echo \"$g\"; done", OK, NULL},
        {"if (ls) then ls; fi; { (ls) }", OK, NULL},
        /* comments, assignments, redirections, here-documents */
        {"ls #; rm", OK, NULL},
        {"ls a#b; # rm\nls", OK, NULL},
        {"A=1 B=\"x y\" ls; C=2", OK, NULL},
        {"ls 2>&1 | grep x", OK, NULL},
        {"ls > out 2>/dev/null < /dev/null; >out; ls >| f &> g &>> g", OK, NULL},
        {"cat <<EOF\nhello $HOME ${HOME%/*}\nEOF\nls", OK, NULL},
        {"cat <<'EOF'\n$(rm) `rm`\nEOF", OK, NULL},
        {"cat <<-\"E\"O\\F\n\t$(rm)\n\tEOF\nls", OK, NULL},
        {"cat <<< \"$HOME\"", OK, NULL},
        {"cat <<EOF\n$(rm)\nEOF", NO_RM, "command substitution $(...)"},
        {"cat <<EOF\nx `rm` y\nEOF", NO_RM, "command substitution `...`"},
        {"PATH=/tmp ls", NO, "PATH"},
        {"LD_PRELOAD=/x.so ls", NO, "LD_PRELOAD"},
        /* substitutions, wherever they are */
        {"ls $(rm)", NO_RM, "command substitution $(...)"},
        {"ls \"$(rm)\"", NO_RM, "command substitution $(...)"},
        {"ls `rm`", NO_RM, "command substitution `...`"},
        {"ls \"x`rm`\"", NO_RM, "command substitution `...`"},
        {"cat <(rm)", NO_RM, "process substitution <(...)"},
        {"ls >(rm)", NO, /* bash does not wait for it: no NO_RM, that would be a race */ "process substitution >(...)"},
        {"cat ${x:-<(rm)}", NO_RM, "process substitution <(...)"}, /* found by fuzz_cmdline */
        {"echo \"${x:-<(rm)}\"", OK, NULL},
        {"A=$(rm) ls", NO_RM, "command substitution $(...)"},
        {"ls > $(rm)", NO_RM, "command substitution $(...)"},
        {"echo ${x:-$(rm)}", NO_RM, "command substitution $(...)"},
        {"echo ${x:-'$(rm)'} \"${x:-\"}\"}\" ${x/a/b} ${#x}", OK, NULL},
        {"echo \"${x:-'$(rm)'}\"", NO_RM, "a single quote inside a double-quoted ${...}"},
        /* bash ends a ${...} and expands it by different rules (found with bash, see cmdline_word.c) */
        {"echo \"${x:-'}'\"'$(rm)'\"}\"", NO_RM, "a single quote inside a double-quoted ${...}"},
        {"echo ${x:-$'}'\"'$(rm)'\"}", NO_RM, "$'...' inside ${...}"},
        {"echo \"${x:-$'a'}\"", NO, "$'...' inside ${...}"},
        {"echo $((1+2))", NO, "arithmetic expansion $((...))"},
        {"echo $[1+2]", NO, "arithmetic expansion $[...]"},
        {"((x=1))", NO, "arithmetic command ((...))"},
        {"for ((i=0;i<1;i++)); do ls; done", NO, "arithmetic loop for ((...))"},
        {"echo ${!x}", NO, "${!...}"},
        {"echo \"${a[$i]}\"", NO, "${name[...]}"},
        {"echo ${x:1}", NO, "${name:offset}"},
        {"echo ${x@P}", NO, "${name@...}"},
        /* the command word */
        {"$X", NO, "built from a variable"},
        {"${X} a", NO, "built from a variable"},
        {"l$X", NO, "built from a variable"},
        {"~/ls", NO, "~"},
        {"l* x", NO, "glob"},
        {"{ls,rm}", NO, "brace expansion"},
        {"/bin/ls", NO, "by path (\"/bin/ls\")"},
        {"./ls", NO, "by path"},
        /* what runs another command */
        {"eval rm", NO_RM, "\"eval\""},
        {"exec rm", NO_RM, "\"exec\""},
        {"source f", NO, "\"source\""},
        {". f", NO, "\".\""},
        {"env rm", NO_RM, "\"env\""},
        {"xargs rm </dev/null", NO_RM, "\"xargs\""},
        {"timeout 5 rm", NO_RM, "\"timeout\""},
        {"nice rm", NO_RM, "\"nice\""},
        {"command rm", NO_RM, "\"command\""},
        {"bash -c rm", NO_RM, "\"bash\""},
        {"sh -c rm", NO_RM, "\"sh\""},
        {"time rm", NO_RM, "\"time\""},
        {"jobs -x rm", NO_RM, "\"jobs\""},
        {"trap rm EXIT", NO_RM, "\"trap\""},
        {"hash -p /x/rm ls; ls", NO, "\"hash\""},
        {"alias ls=rm", NO, "\"alias\""},
        {"find . -exec rm {} +", NO_RM, "find -exec"},
        {"find . -execdir rm {} \\;", NO_RM, "find -execdir"},
        {"find . -exec rm \\;", NO_RM, "find -exec"},
        {"find . $X", NO, "find with an argument built from an expansion"},
        {"find . -name '*.c' -type f", OK, NULL},
        {"ls() { rm; }; ls", NO_RM, "function definition"},
        {"function f { rm; }", NO, "function"},
        {"a=(1 2)", NO, "array assignment name=(...)"},
        {"a[1]=x", NO, "array element assignment"},
        {"[ -v 'a[$(rm)]' ]", NO_RM, "[ -v"},
        {"[ $x = y ]", NO, "unquoted expansion"},
        {"test \"$x\" \"$y\"", NO, "no literal operator beside it"},
        {"[ -f \"$f\" ] && cat \"$f\"; [ \"$a\" = \"$b\" ]; test -d /tmp; [ \"$x\" ]", OK, NULL},
        {"printf -v x 1", NO, "printf -v"},
        {"printf '%s\\n' a b", OK, NULL},
        {"[[ -f x ]]", NO, "[["},
        {"case x in x) rm;; esac", NO, "case"},
        {"select x in a; do rm; done", NO, "select"},
        {"coproc rm", NO, "coproc"},
        {"ls \\\n-l", NO, "line continuation"},
        {"echo \"a\\\nb\"", NO, "line continuation"},
        /* what does not parse */
        {"", OK, NULL},
        {"   \t ", OK, NULL},
        {";;", NO, ";;"},
        {"ls;;", NO, ";;"},
        {"; ls", NO, "unexpected ;"},
        {"ls ||", NO, "ends after ||"},
        {"ls \"a", NO, "unbalanced double quote"},
        {"ls 'a", NO, "unbalanced single quote"},
        {"ls ${x", NO, "unbalanced ${"},
        {"(ls", NO, "unbalanced ( without )"},
        {"ls)", NO, "unexpected )"},
        {"{ ls; ", NO, "unbalanced { without }"},
        {"if ls; then ls;", NO, "unbalanced if without fi"},
        {"ls \\$(rm)", NO, "unexpected ("},
        {"ls >", NO, "has no file name"},
        {"ls; do rm", NO, "unexpected do"}, /* a closer with nothing open (found by fuzz_cmdline) */
        {"done; fi; }", NO, "unexpected done"},
};

static void test_table(void **state) {
        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
                cm_err err = CM_ERR_INIT;
                int r = cm_cmdline_allowed(rows[i].line, allowed, N_ALLOWED, &err);
                if (rows[i].verdict == OK && r != 0)
                        fail_msg("row %zu \"%s\" refused: %s", i, rows[i].line, err.msg);
                if (rows[i].verdict == OK)
                        continue;
                if (r == 0)
                        fail_msg("row %zu \"%s\" was allowed", i, rows[i].line);
                if (!strstr(err.msg, rows[i].names))
                        fail_msg("row %zu \"%s\": message does not name \"%s\": %s", i, rows[i].line, rows[i].names,
                                 err.msg);
                if (err.code == 0)
                        fail_msg("row %zu: error code not set", i);
        }
        assert_true(ARRAY_SIZE(rows) >= 40);
}

/* Success leaves err as it was (src/util/err.h); no allowlist allows
 * nothing but lines without commands; NULL is the empty line. */
static void test_contract(void **state) {
        cm_err err = CM_ERR_INIT;
        (void)state;
        (void)cm_err_set(&err, 7, "earlier");
        assert_int_equal(cm_cmdline_allowed("ls | grep x", allowed, N_ALLOWED, &err), 0);
        assert_string_equal(err.msg, "earlier");
        assert_int_equal(err.code, 7);
        assert_int_equal(cm_cmdline_allowed("A=1 >f", NULL, 0, &err), 0);
        assert_true(cm_cmdline_allowed("ls", NULL, 0, &err) < 0);
        assert_int_equal(cm_cmdline_allowed(NULL, allowed, N_ALLOWED, &err), 0);
        assert_true(cm_cmdline_allowed("rm", allowed, N_ALLOWED, NULL) < 0);
}

static char *repeat(const char *unit, size_t times, const char *head, const char *tail) {
        size_t u = strlen(unit), h = strlen(head), t = strlen(tail);
        char *s = xmalloc(h + u * times + t + 1), *p = s;
        memcpy(p, head, h), p += h;
        for (size_t i = 0; i < times; i++, p += u)
                memcpy(p, unit, u);
        memcpy(p, tail, t + 1);
        return s;
}

/* Size and depth: a 1 MB line is read whole (the rm at its end is found);
 * 10000 nested subshells or ${ are refused with a message, not a crash. */
static void test_bounds(void **state) {
        cm_err err = CM_ERR_INIT;
        (void)state;
        cleanup_free char *long_arg = repeat("a", 1 << 20, "ls ", "");
        cleanup_free char *many = repeat("ls;", (1 << 20) / 3, "", "");
        cleanup_free char *tail_rm = repeat("ls | ", (1 << 20) / 5, "", "rm");
        cleanup_free char *deep = repeat("( ", 10000, "", "ls");
        cleanup_free char *deep_ok = repeat("( ", CM_CMDLINE_MAX_DEPTH, "", "ls");
        cleanup_free char *deep_param = repeat("${x:-", 10000, "echo ", "");
        assert_int_equal(cm_cmdline_allowed(long_arg, allowed, N_ALLOWED, &err), 0);
        assert_int_equal(cm_cmdline_allowed(many, allowed, N_ALLOWED, &err), 0);
        assert_true(cm_cmdline_allowed(tail_rm, allowed, N_ALLOWED, &err) < 0);
        assert_non_null(strstr(err.msg, "\"rm\""));
        assert_true(cm_cmdline_allowed(deep, allowed, N_ALLOWED, &err) < 0);
        assert_non_null(strstr(err.msg, "nesting deeper than"));
        assert_true(cm_cmdline_allowed(deep_param, allowed, N_ALLOWED, &err) < 0);
        assert_non_null(strstr(err.msg, "nesting deeper than"));
        {
                /* as deep as allowed, then closed: accepted */
                cleanup_free char *closed = repeat(" )", CM_CMDLINE_MAX_DEPTH, deep_ok, "");
                assert_int_equal(cm_cmdline_allowed(closed, allowed, N_ALLOWED, &err), 0);
        }
}

/* ---- the same lines through bash ---- */

static char tmp[] = "/tmp/cm-cmdline-XXXXXX";

static const char *find_bin(const char *name) {
        static char path[256];
        static const char *const dirs[] = {"/usr/bin", "/bin", "/usr/sbin", "/sbin"};
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                (void)snprintf(path, sizeof path, "%s/%s", dirs[i], name);
                if (access(path, X_OK) == 0)
                        return path;
        }
        return NULL;
}

/* bin/: the real programs the rows use, and rm, a script that leaves a mark. */
static int make_bin(void) {
        static const char *const real[] = {"ls",   "cat", "grep",  "find",    "mkdir", "touch", "wc",   "head",
                                           "sort", "env", "xargs", "timeout", "nice",  "sh",    "bash", "true"};
        cleanup_free char *bin = xasprintf("%s/bin", tmp), *work = xasprintf("%s/work", tmp),
                          *rm = xasprintf("%s/bin/rm", tmp);
        FILE *f;
        if (mkdir(bin, 0755) < 0 || mkdir(work, 0755) < 0)
                return -1;
        for (size_t i = 0; i < ARRAY_SIZE(real); i++) {
                const char *p = find_bin(real[i]);
                cleanup_free char *dst = xasprintf("%s/%s", bin, real[i]);
                if (p && symlink(p, dst) < 0)
                        return -1;
        }
        if (!(f = fopen(rm, "we")))
                return -1;
        fprintf(f, "#!/bin/sh\necho ran >> %s/mark\n", tmp);
        if (fclose(f) != 0 || chmod(rm, 0755) < 0)
                return -1;
        /* a file for find -exec and the globs to see */
        cleanup_free char *file = xasprintf("%s/work/a.txt", tmp);
        return (f = fopen(file, "we")) && fclose(f) == 0 ? 0 : -1;
}

static bool bash_runs_rm(const char *bash, const char *line) {
        cleanup_free char *mark = xasprintf("%s/mark", tmp), *work = xasprintf("%s/work", tmp),
                          *path = xasprintf("PATH=%s/bin", tmp), *home = xasprintf("HOME=%s", work);
        char *const envp[] = {path, home, NULL};
        int status;
        pid_t pid;
        (void)unlink(mark);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (null < 0 || chdir(work) < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
                        _exit(127);
                execle(bash, "bash", "-c", line, (char *)NULL, envp);
                _exit(127);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        return access(mark, F_OK) == 0;
}

static void test_bash_agrees(void **state) {
        cleanup_free char *bash = find_bin("bash") ? xstrdup(find_bin("bash")) : NULL; /* find_bin reuses its buffer */
        (void)state;
        if (!bash)
                skip_because("no bash on this machine to compare the parser with");
        if (!mkdtemp(tmp) || make_bin() < 0)
                fail_msg("cannot set up %s", tmp);
        size_t bad = 0;
        for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
                cm_err err = CM_ERR_INIT;
                bool ran = bash_runs_rm(bash, rows[i].line);
                /* the parser's own verdict, not only the table's */
                if ((rows[i].verdict == OK || cm_cmdline_allowed(rows[i].line, allowed, N_ALLOWED, &err) == 0) && ran)
                        bad++, fprintf(stderr, "row %zu \"%s\" is allowed, yet bash ran rm\n", i, rows[i].line);
                if (rows[i].verdict == NO_RM && !ran)
                        bad++, fprintf(stderr, "row %zu \"%s\": bash did not run rm, the row proves nothing\n", i,
                                       rows[i].line);
        }
        tu_rm_rf(tmp, 0);
        assert_int_equal(bad, 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_table),
                cmocka_unit_test(test_contract),
                cmocka_unit_test(test_bounds),
                cmocka_unit_test(test_bash_agrees),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
