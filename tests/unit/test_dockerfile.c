/* The Dockerfile parser and word lexer against what Docker (BuildKit's
 * frontend/dockerfile parser, instructions and shell packages) does with
 * the same text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"
#include <string.h>

#include "image/dockerfile.h"
#include "util/cleanup.h"

/* An instruction as "LINE CMD --flag=v json [arg] [arg]", one a line. */
static char *dump(const df_file *f) {
        static char out[8192];
        size_t n = 0;
        out[0] = 0;
        for (size_t i = 0; i < f->n; i++) {
                const df_inst *in = &f->v[i];
                n += (size_t)snprintf(out + n, sizeof out - n, "%s%u %s", i ? "\n" : "", in->line,
                                      df_cmd_name(in->cmd));
                for (size_t j = 0; j < in->n_flags; j++)
                        n += (size_t)snprintf(out + n, sizeof out - n, " --%s%s%s", in->flags[j].name,
                                              in->flags[j].value ? "=" : "",
                                              in->flags[j].value ? in->flags[j].value : "");
                if (in->json)
                        n += (size_t)snprintf(out + n, sizeof out - n, " json");
                assert_null(in->args[in->n_args]);
                for (size_t j = 0; j < in->n_args; j++)
                        n += (size_t)snprintf(out + n, sizeof out - n, " [%s]", in->args[j]);
        }
        return out;
}

static void parse_ok(const char *text, size_t len, df_file *f) {
        cm_err err = CM_ERR_INIT;
        if (df_parse(text, len, f, &err) < 0)
                fail_msg("\"%s\": %s", text, err.msg);
}

static const struct {
        const char *text, *want;
} parse_cases[] = {
        {"FROM alpine\nRUN echo hi", "1 FROM [alpine]\n2 RUN [echo hi]"},
        /* continuations: the escape character and what follows it go, the
         * blank before it stays, the next line is joined as it is */
        {"FROM a\nRUN echo a \\  \n    b", "1 FROM [a]\n2 RUN [echo a     b]"},
        {"FROM a\nRUN echo a\\\nb", "1 FROM [a]\n2 RUN [echo ab]"},
        {"FROM a\r\nRUN a \\\r\n b\r\n", "1 FROM [a]\n2 RUN [a  b]"},
        {"FROM a\nRUN a \\\n  # a comment\n\n   \n b\nUSER x", "1 FROM [a]\n2 RUN [a  b]\n7 USER [x]"},
        {"FROM a\nRUN echo \\\\\nUSER b", "1 FROM [a]\n2 RUN [echo \\\\]\n3 USER [b]"}, /* an escaped escape */
        {"FROM a\nRUN x \\", "1 FROM [a]\n2 RUN [x]"},                                  /* at the end of the file */
        {"\n  # c\nFROM a\n\n\tRUN b", "3 FROM [a]\n5 RUN [b]"},
        {"\xEF\xBB\xBF"
         "FROM a",
         "1 FROM [a]"},
        /* `# escape=`: a backquote continues, a backslash is a character */
        {"# escape=`\nFROM a\nRUN dir c:\\ `\n  && echo x", "2 FROM [a]\n3 RUN [dir c:\\   && echo x]"},
        {"#syntax=docker/dockerfile:1\n# ESCAPE = `\nFROM a\nRUN a\\\nRUN b `\nc",
         "3 FROM [a]\n4 RUN [a\\]\n5 RUN [b c]"},
        /* a directive only before anything else: here a comment */
        {"FROM a\n# escape=`\nRUN a `\nRUN b", "1 FROM [a]\n3 RUN [a `]\n4 RUN [b]"},
        {"# hello\n# escape=`\nFROM a\nRUN a \\\nb", "3 FROM [a]\n4 RUN [a b]"},
        {"\n# escape=`\nFROM a\nRUN a \\\nb", "3 FROM [a]\n4 RUN [a b]"},
        {"from a\nrun b\nCoPy x y\nEnTrYpOiNt z", "1 FROM [a]\n2 RUN [b]\n3 COPY [x] [y]\n4 ENTRYPOINT [z]"},
        {"FROM img AS Build\nFROM x as b2.c_d-e", "1 FROM [img] [build]\n2 FROM [x] [b2.c_d-e]"},
        {"FROM --platform=linux/amd64 x", "1 FROM --platform=linux/amd64 [x]"},
        {"FROM --platform=$BUILDPLATFORM golang:1.22 AS build",
         "1 FROM --platform=$BUILDPLATFORM [golang:1.22] [build]"},
        /* the exec form when the text is a JSON array of strings */
        {"FROM a\nCMD [\"a\", \"b\"]", "1 FROM [a]\n2 CMD json [a] [b]"},
        {"FROM a\nCMD [ \"a\" ]  ", "1 FROM [a]\n2 CMD json [a]"},
        {"FROM a\nCMD []", "1 FROM [a]\n2 CMD json"},
        {"FROM a\nENTRYPOINT [\"/bin/x\", \"-c\", \"a\\\"b\\u00e9\"]",
         "1 FROM [a]\n2 ENTRYPOINT json [/bin/x] [-c] [a\"b\xc3\xa9]"},
        {"FROM a\nRUN [oops", "1 FROM [a]\n2 RUN [[oops]"},
        {"FROM a\nRUN [\"a\"] b", "1 FROM [a]\n2 RUN [[\"a\"] b]"},
        {"FROM a\nRUN ['a']", "1 FROM [a]\n2 RUN [['a']]"},
        {"FROM a\nRUN [\"echo\", \\\n  \"x\"]", "1 FROM [a]\n2 RUN json [echo] [x]"},
        {"FROM a\nSHELL [\"/bin/bash\", \"-c\"]", "1 FROM [a]\n2 SHELL json [/bin/bash] [-c]"},
        {"FROM a\nRUN --network=none echo hi", "1 FROM [a]\n2 RUN --network=none [echo hi]"},
        {"FROM a\nRUN -- --x", "1 FROM [a]\n2 RUN [--x]"},
        {"FROM a\nRUN -x y", "1 FROM [a]\n2 RUN [-x y]"},
        /* ENV and LABEL: pairs, raw; the legacy form is one pair */
        {"FROM a\nENV a=b c=\"d e\"", "1 FROM [a]\n2 ENV [a] [b] [c] [\"d e\"]"},
        {"FROM a\nENV a b  c", "1 FROM [a]\n2 ENV [a] [b  c]"},
        {"FROM a\nENV a=", "1 FROM [a]\n2 ENV [a] []"},
        {"FROM a\nENV a=\\ x b='$c d'", "1 FROM [a]\n2 ENV [a] [\\ x] [b] ['$c d']"},
        {"FROM a\nLABEL \"com.x\"=\"y z\" b=c\\\"d", "1 FROM [a]\n2 LABEL [\"com.x\"] [\"y z\"] [b] [c\\\"d]"},
        {"FROM a\nLABEL v=\"a\\\"b c\"", "1 FROM [a]\n2 LABEL [v] [\"a\\\"b c\"]"},
        {"ARG V=1\nARG a b=c d=\"e f\"\nFROM a:$V", "1 ARG [V=1]\n2 ARG [a] [b=c] [d=\"e f\"]\n3 FROM [a:$V]"},
        {"FROM a\nARG name", "1 FROM [a]\n2 ARG [name]"},
        /* COPY and ADD: flags, words or JSON */
        {"FROM a\nCOPY --chown=1:1 --from=build a b /dst/",
         "1 FROM [a]\n2 COPY --chown=1:1 --from=build [a] [b] [/dst/]"},
        {"FROM a\nCOPY --chown=\"1:1\" --link a   b", "1 FROM [a]\n2 COPY --chown=1:1 --link [a] [b]"},
        {"FROM a\nCOPY --link=false [\"a b\", \"/d st\"]", "1 FROM [a]\n2 COPY --link=false json [a b] [/d st]"},
        {"FROM a\nADD --checksum=sha256:00 --chmod=644 http://x/y /z",
         "1 FROM [a]\n2 ADD --checksum=sha256:00 --chmod=644 [http://x/y] [/z]"},
        {"FROM a\nCOPY \"a b\" c", "1 FROM [a]\n2 COPY [\"a] [b\"] [c]"}, /* quotes do not group here */
        {"FROM a\nEXPOSE 80 443/tcp\n", "1 FROM [a]\n2 EXPOSE [80] [443/tcp]"},
        {"FROM a\nWORKDIR /a b  \nUSER 1000:1000", "1 FROM [a]\n2 WORKDIR [/a b]\n3 USER [1000:1000]"},
        /* `<<` that is no heredoc */
        {"FROM a\nRUN echo \"<<EOF\" a<<b '<<x' <<", "1 FROM [a]\n2 RUN [echo \"<<EOF\" a<<b '<<x' <<]"},
        {"FROM a\nCMD cat <<EOF", "1 FROM [a]\n2 CMD [cat <<EOF]"},
};

static void test_parse(void **state) {
        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(parse_cases); i++) {
                df_file f = {0};
                parse_ok(parse_cases[i].text, strlen(parse_cases[i].text), &f);
                if (strcmp(dump(&f), parse_cases[i].want))
                        fail_msg("\"%s\":\n got  \"%s\"\n want \"%s\"", parse_cases[i].text, dump(&f),
                                 parse_cases[i].want);
                df_file_clear(&f);
        }
}

static void test_escape_and_text(void **state) {
        df_file f = {0};
        char big[2000];
        (void)state;
        parse_ok("# escape=`\nFROM a", 17, &f);
        assert_int_equal(f.escape, '`');
        df_file_clear(&f);
        parse_ok("FROM a\n# escape=`", 17, &f);
        assert_int_equal(f.escape, '\\');
        df_file_clear(&f);

        parse_ok("FROM a\n  RUN apt-get update && \\\n    # why\n    apt-get install -y x\t\n", 69, &f);
        assert_string_equal(f.v[1].text, "RUN apt-get update && apt-get install -y x");
        assert_int_equal(f.v[1].line, 2);
        df_file_clear(&f);

        /* cut at 256 bytes, on a character boundary */
        memcpy(big, "FROM a\nRUN ", 11);
        for (size_t i = 11; i < 1000; i += 2)
                memcpy(big + i, "\xc3\xa9", 2);
        parse_ok(big, 1001, &f);
        assert_true(strlen(f.v[1].text) <= 256);
        assert_non_null(strstr(f.v[1].text, "\xc3\xa9…"));
        assert_int_equal(strlen(f.v[1].args[0]), 990);
        df_file_clear(&f);
}

static const struct {
        const char *text, *want[3];
} bad_cases[] = {
        {"FROM a\nVOLUME /x", {"line 2: VOLUME", "subset (FROM, RUN", "--backend docker"}},
        {"FROM a\n\nhealthcheck CMD true", {"line 3: HEALTHCHECK", "subset"}},
        {"FROM a\nONBUILD RUN x", {"line 2: ONBUILD"}},
        {"FROM a\nMAINTAINER me", {"line 2: MAINTAINER"}},
        {"FROM a\nSTOPSIGNAL 9", {"line 2: STOPSIGNAL"}},
        {"FROM a\nFOO bar", {"line 2: unknown instruction \"FOO\"", "FROM, RUN"}},
        {"FROM a\nRUN <<EOF\necho\nEOF", {"line 2: RUN", "heredoc"}},
        {"FROM a\nRUN cat 2<<-EOF x", {"line 2: RUN", "heredoc"}},
        {"FROM a\nRUN a && \\\n  cat << 'EOF'", {"line 2: RUN", "heredoc"}},
        {"FROM a\nCOPY <<EOF /x\nhi\nEOF", {"line 2: COPY", "heredoc"}},
        {"FROM a\nCOPY a", {"line 2: COPY", "source and a destination"}},
        {"FROM a\nADD [\"a\"]", {"line 2: ADD", "destination"}},
        {"FROM a\nCOPY --foo=1 a b", {"line 2: COPY --foo: an unknown flag", "--from=, --chown=, --chmod=, --link"}},
        {"FROM a\nCOPY --exclude=*.md a b", {"line 2: COPY --exclude", "subset", "--backend docker"}},
        {"FROM a\nRUN --mount=type=cache,target=/x a", {"line 2: RUN --mount", "subset (RUN takes --network=)"}},
        {"FROM a\nENV --x=1 a=b", {"line 2: ENV --x: an unknown flag; ENV takes no flags"}},
        {"FROM a\nCOPY --from a b", {"line 2: COPY --from needs a value"}},
        {"FROM a\nCOPY --link=maybe a b", {"line 2: COPY --link", "true"}},
        {"FROM a\nCOPY --chown=1 --chown=2 a b", {"line 2: COPY --chown", "twice"}},
        {"FROM a\nADD --from=x a b", {"line 2: ADD --from: an unknown flag; ADD takes", "--checksum="}},
        {"RUN x", {"line 1: RUN before the first FROM"}},
        {"ARG a\nCOPY a b\nFROM x", {"line 2: COPY before the first FROM"}},
        {"", {"Dockerfile: no instructions"}},
        {"# only\n\n   \n", {"Dockerfile: no instructions"}},
        {"ARG a", {"Dockerfile: no FROM"}},
        {"FROM a\nENV a", {"line 2: ENV a has no value", "ENV a=value"}},
        {"FROM a\nENV", {"line 2: ENV needs name=value"}},
        {"FROM a\nENV a=b c", {"line 2: ENV", "no =", "\"c\""}},
        {"FROM a\nLABEL =x", {"line 2: LABEL", "no name"}},
        {"FROM a\nARG =x", {"line 2: ARG =x has no name"}},
        {"FROM a\nARG", {"line 2: ARG needs a name"}},
        {"FROM a\nSHELL /bin/sh -c", {"line 2: SHELL takes a JSON array"}},
        {"FROM a\nSHELL []", {"line 2: SHELL has no command"}},
        {"FROM a\nCMD [1, 2]", {"line 2: CMD", "only strings"}},
        {"FROM a\nRUN [\"a\", null]", {"line 2: RUN", "only strings"}},
        {"FROM a\nRUN", {"line 2: RUN has no command"}},
        {"FROM a\nRUN []", {"line 2: RUN has no command"}},
        {"FROM a\nWORKDIR", {"line 2: WORKDIR needs a value"}},
        {"FROM a\nEXPOSE", {"line 2: EXPOSE needs a port"}},
        {"FROM", {"line 1: FROM takes an image"}},
        {"FROM a b", {"line 1: FROM takes an image"}},
        {"FROM a AS b c", {"line 1: FROM takes an image"}},
        {"FROM a AS 1x", {"line 1: FROM ... AS 1x", "stage name"}},
        {"# escape=`\n# escape=\\\nFROM a", {"line 2: a second `# escape=`"}},
        {"# escape=x\nFROM a", {"line 1: `# escape=x`", "\\ or `"}},
        {"FROM a\n\\\n", {"line 2: unknown instruction"}},
};

static void test_refused(void **state) {
        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(bad_cases); i++) {
                df_file f = {0};
                cm_err err = CM_ERR_INIT;
                if (df_parse(bad_cases[i].text, strlen(bad_cases[i].text), &f, &err) == 0)
                        fail_msg("\"%s\" was taken: %s", bad_cases[i].text, dump(&f));
                assert_null(f.v);
                if (strncmp(err.msg, "Dockerfile line ", 16) && strncmp(err.msg, "Dockerfile: ", 12))
                        fail_msg("\"%s\": %s", bad_cases[i].text, err.msg);
                for (size_t j = 0; j < 3 && bad_cases[i].want[j]; j++)
                        if (!strstr(err.msg, bad_cases[i].want[j]))
                                fail_msg("\"%s\": \"%s\" lacks \"%s\"", bad_cases[i].text, err.msg,
                                         bad_cases[i].want[j]);
        }
}

static void test_limits(void **state) {
        size_t n = DF_MAX_BYTES + 1, len = 0;
        char *text = malloc(n);
        df_file f = {0};
        cm_err err = CM_ERR_INIT;
        (void)state;
        assert_non_null(text);
        assert_true(df_parse("FROM a\nRUN a\0b", 14, &f, &err) < 0);
        assert_non_null(strstr(err.msg, "line 2: a NUL byte"));

        memset(text, '#', n);
        assert_true(df_parse(text, n, &f, &err) < 0);
        assert_non_null(strstr(err.msg, "KiB"));

        len = (size_t)sprintf(text, "FROM a\n");
        for (int i = 0; i < DF_MAX_INSTRUCTIONS - 1; i++)
                len += (size_t)sprintf(text + len, "RUN x\n");
        parse_ok(text, len, &f);
        assert_int_equal(f.n, DF_MAX_INSTRUCTIONS);
        df_file_clear(&f);
        len += (size_t)sprintf(text + len, "RUN x\n");
        assert_true(df_parse(text, len, &f, &err) < 0);
        assert_non_null(strstr(err.msg, "line 4097: more than 4096 instructions"));
        free(text);
}

/* ---- df_word ---- */

static const char *lookup(void *arg, const char *name) {
        static const char *const env[][2] = {{"a", "A"}, {"e", ""}, {"sp", "x y"}, {"q", "\"'"}};
        (void)arg;
        for (size_t i = 0; i < ARRAY_SIZE(env); i++)
                if (!strcmp(env[i][0], name))
                        return env[i][1];
        return NULL;
}

static const struct {
        const char *raw;
        char esc;
        bool quotes;
        const char *want; /* NULL: an error, whose message has `fail` */
        const char *fail;
} word_cases[] = {
        {"$a", '\\', true, "A", NULL},
        {"${a}", '\\', true, "A", NULL},
        {"x${a}y$a-$a_", '\\', true, "xAyA-", NULL}, /* $a_ is a name of its own, unset */
        {"$u|${u}", '\\', true, "|", NULL},
        {"${a:-x}|${e:-x}|${u:-x}", '\\', true, "A|x|x", NULL},
        {"${a-x}|${e-x}|${u-x}", '\\', true, "A||x", NULL},
        {"${a:+x}|${e:+x}|${u:+x}", '\\', true, "x||", NULL},
        {"${a+x}|${e+x}|${u+x}", '\\', true, "x|x|", NULL},
        {"${a:?m}|${a?m}|${e?m}", '\\', true, "A|A|", NULL},
        {"${u:?set u first}", '\\', true, NULL, "u: set u first"},
        {"${e:?}", '\\', true, NULL, "e: is not allowed to be empty"},
        {"${u?}", '\\', true, NULL, "u: is not allowed to be unset"},
        {"'$a \"b'", '\\', true, "$a \"b", NULL},
        {"\"$a b\"", '\\', true, "A b", NULL},
        {"\"$sp\"$sp", '\\', true, "x yx y", NULL},
        {"$q'$q'", '\\', true, "\"'$q", NULL}, /* a value's quotes are no quotes */
        {"\\$a\\ b\\'", '\\', true, "$a b'", NULL},
        {"\"a\\\"b\\$c\\\\d\\xe\\'\"", '\\', true, "a\"b$c\\d\\xe\\'", NULL},
        {"a\\", '\\', true, "a", NULL},
        {"`$a c:\\dir \"`\"\"", '`', true, "$a c:\\dir \"", NULL},
        {"\"`\"`$\"", '`', true, "\"$", NULL},
        {"'abc", '\\', true, NULL, "no closing single quote"},
        {"\"abc", '\\', true, NULL, "no closing double quote"},
        {"\"abc\\", '\\', true, NULL, "no closing double quote"},
        {"${a", '\\', true, NULL, "no closing '}'"},
        {"${", '\\', true, NULL, "no closing '}'"},
        {"${a:-x", '\\', true, NULL, "no closing '}'"},
        {"${}", '\\', true, NULL, "bad substitution"},
        {"${:-x}", '\\', true, NULL, "bad substitution"},
        {"${a:x}", '\\', true, NULL, "bad substitution"},
        {"${a#x}", '\\', true, NULL, "not supported"},
        {"${a/x/y}", '\\', true, NULL, "not supported"},
        {"'$a' \"$a\" \\$a", '\\', false, "'A' \"A\" $a", NULL},
        {"${u:-'a b'}", '\\', false, "'a b'", NULL},
        {"$|a$|$%|$-x|$", '\\', true, "$|a$|$%|x|$", NULL}, /* $- is a special parameter, unset */
        {"$1$23x|${1}", '\\', true, "x|", NULL},
        {"${u:-${a}}|${a:-${u}}|${u:-${u:-$a}}", '\\', true, "A|A|A", NULL},
        {"${u:-\"q }\"}|${u:-a\\}b}|${u:-'}'}", '\\', true, "q }|a}b|}", NULL},
        {"${a:-${u:?inner}}", '\\', true, NULL, "u: inner"}, /* read even when not used */
        {"${a:-${u}", '\\', true, NULL, "no closing '}'"},
};

static void test_word(void **state) {
        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(word_cases); i++) {
                char *got = NULL;
                cm_err err = CM_ERR_INIT;
                int r = df_word(word_cases[i].raw, word_cases[i].esc, word_cases[i].quotes, lookup, NULL, &got, &err);
                if (word_cases[i].want && r < 0)
                        fail_msg("`%s`: %s", word_cases[i].raw, err.msg);
                if (word_cases[i].want && strcmp(got, word_cases[i].want))
                        fail_msg("`%s`: got `%s`, want `%s`", word_cases[i].raw, got, word_cases[i].want);
                if (!word_cases[i].want && r == 0)
                        fail_msg("`%s` was taken: `%s`", word_cases[i].raw, got);
                if (!word_cases[i].want && !strstr(err.msg, word_cases[i].fail))
                        fail_msg("`%s`: \"%s\" lacks \"%s\"", word_cases[i].raw, err.msg, word_cases[i].fail);
                free(got);
        }
}

static const char *big_lookup(void *arg, const char *name) { return !strcmp(name, "set") ? "s" : arg; }

/* Nesting and size stay bounded, and a word thrown away costs its length. */
static void test_word_limits(void **state) {
        size_t n = 0;
        char *raw = malloc(1 << 20), *big = malloc(40001), *got = NULL;
        cm_err err = CM_ERR_INIT;
        (void)state;
        assert_non_null(raw);
        assert_non_null(big);
        memset(big, 'b', 40000);
        big[40000] = 0;
        for (int i = 0; i < 64; i++)
                n += (size_t)sprintf(raw + n, "${u:-");
        n += (size_t)sprintf(raw + n, "$a");
        memset(raw + n, '}', 64);
        raw[n + 64] = 0;
        assert_int_equal(df_word(raw, '\\', true, lookup, NULL, &got, &err), 0);
        assert_string_equal(got, "A");
        free(got);
        memmove(raw + 5, raw, strlen(raw) + 1);
        memcpy(raw, "${u:-", 5);
        strcat(raw, "}");
        assert_true(df_word(raw, '\\', true, lookup, NULL, &got, &err) < 0);
        assert_non_null(strstr(err.msg, "nested more than 64"));

        assert_int_equal(df_word("$x", '\\', true, big_lookup, big, &got, &err), 0);
        free(got);
        assert_true(df_word("$x$x", '\\', true, big_lookup, big, &got, &err) < 0);
        assert_non_null(strstr(err.msg, "more than 64 KiB"));

        /* an unused word is not built: it cannot be too long */
        assert_int_equal(df_word("${set:-$x$x}", '\\', true, big_lookup, big, &got, &err), 0);
        assert_string_equal(got, "s");
        free(got);

        /* 50,000 copies of a 40 kB value, all in unused words: quick */
        n = 0;
        for (int i = 0; i < 50000; i++)
                n += (size_t)sprintf(raw + n, "${set:-$x}");
        assert_int_equal(df_word(raw, '\\', true, big_lookup, big, &got, &err), 0);
        assert_int_equal(strlen(got), 50000);
        free(got);
        free(raw);
        free(big);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse),   cmocka_unit_test(test_escape_and_text),
                cmocka_unit_test(test_refused), cmocka_unit_test(test_limits),
                cmocka_unit_test(test_word),    cmocka_unit_test(test_word_limits),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
