/* mcp_schema_check, mcp_schema_valid and mcp_schema_supported: every keyword
 * passing and failing, and the wording of the messages agents read. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"

#include <stdio.h>
#include <string.h>

#include "mcp/schema.h"
#include "util/cleanup.h"
#include "util/json.h"

static json_t *parse(const char *text, const char *file, int line) {
        json_error_t jerr;
        json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        if (!j) {
                print_error("%s:%d: test JSON does not parse (%s): %s\n", file, line, jerr.text, text);
                _fail(file, line);
        }
        return j;
}

/* want == NULL: the value must match.  Otherwise it must not, and the message
 * must contain want (or equal it when exact). */
static void expect(const char *schema, const char *value, const char *want, bool exact, const char *file,
                   int line) {
        cleanup_json json_t *s = parse(schema, file, line);
        cleanup_json json_t *v = parse(value, file, line);
        cm_err err = CM_ERR_INIT;
        int r = mcp_schema_check(s, v, "arguments", &err);
        if (!want && r != 0) {
                print_error("%s:%d: expected a match, got: %s\n", file, line, err.msg);
                _fail(file, line);
        } else if (want && r != -1) {
                print_error("%s:%d: expected -1, got %d for %s\n", file, line, r, value);
                _fail(file, line);
        } else if (want && (exact ? strcmp(err.msg, want) != 0 : !strstr(err.msg, want))) {
                print_error("%s:%d: message \"%s\" %s \"%s\"\n", file, line, err.msg,
                            exact ? "is not" : "does not contain", want);
                _fail(file, line);
        } else if (want && err.code == 0) {
                print_error("%s:%d: err.code not set\n", file, line);
                _fail(file, line);
        }
}

#define MATCH(schema, value) expect(schema, value, NULL, false, __FILE__, __LINE__)
#define MISMATCH(schema, value, part) expect(schema, value, part, false, __FILE__, __LINE__)
#define MESSAGE(schema, value, msg) expect(schema, value, msg, true, __FILE__, __LINE__)

static void expect_schema(int (*valid)(const json_t *, cm_err *), const char *schema, const char *want,
                          const char *file, int line) {
        cleanup_json json_t *s = parse(schema, file, line);
        cm_err err = CM_ERR_INIT;
        int r = valid(s, &err);
        if (!want && r != 0) {
                print_error("%s:%d: expected a valid schema, got: %s\n", file, line, err.msg);
                _fail(file, line);
        } else if (want && (r != -1 || !strstr(err.msg, want))) {
                print_error("%s:%d: expected -1 and \"%s\", got %d \"%s\"\n", file, line, want, r, err.msg);
                _fail(file, line);
        }
}

#define SCHEMA_OK(schema) expect_schema(mcp_schema_valid, schema, NULL, __FILE__, __LINE__)
#define SCHEMA_BAD(schema, part) expect_schema(mcp_schema_valid, schema, part, __FILE__, __LINE__)
#define SUPPORTED_OK(schema) expect_schema(mcp_schema_supported, schema, NULL, __FILE__, __LINE__)
#define SUPPORTED_BAD(schema, part) expect_schema(mcp_schema_supported, schema, part, __FILE__, __LINE__)

/* A schema shaped like a real tool's input. */
static const char run_schema[] = "{\"type\":\"object\",\"additionalProperties\":false,"
                                 "\"required\":[\"image\"],\"properties\":{"
                                 "\"image\":{\"type\":\"string\",\"minLength\":1},"
                                 "\"command\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
                                 "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}},"
                                 "\"memory\":{\"enum\":[\"512m\",\"1g\"]},"
                                 "\"cpus\":{\"type\":\"number\",\"minimum\":0.1,\"maximum\":64},"
                                 "\"mounts\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
                                 "\"required\":[\"source\",\"target\"],\"additionalProperties\":false,"
                                 "\"properties\":{\"source\":{\"type\":\"string\"},\"target\":{\"type\":\"string\"},"
                                 "\"readonly\":{\"type\":\"boolean\"}}}}}}";

static void test_tool_schema(void **state) {
        (void)state;
        SCHEMA_OK(run_schema);
        MATCH(run_schema, "{\"image\":\"alpine\"}");
        MATCH(run_schema, "{\"image\":\"alpine\",\"command\":[\"sh\",\"-c\",\"true\"],\"env\":{\"A\":\"1\"},"
                          "\"memory\":\"1g\",\"cpus\":2,\"mounts\":[{\"source\":\"/a\",\"target\":\"/b\"}]}");
        MESSAGE(run_schema, "{}", "missing required field \"image\" (string)");
        MESSAGE(run_schema, "[]", "arguments: expected object, got array");
        MESSAGE(run_schema, "{\"image\":\"a\",\"foo\":1}",
                "unknown field \"foo\": this tool takes image, command, env, memory, cpus, mounts");
        MESSAGE(run_schema, "{\"image\":\"a\",\"memory\":\"lots\"}", "memory: \"lots\" is not one of \"512m\", \"1g\"");
        MESSAGE(run_schema, "{\"image\":\"a\",\"cpus\":0}", "cpus: 0 is below the minimum 0.1");
        MESSAGE(run_schema, "{\"image\":\"a\",\"cpus\":64.5}", "cpus: 64.5 is above the maximum 64");
        MESSAGE(run_schema, "{\"image\":\"a\",\"env\":{\"A\":\"1\",\"B\":2}}", "env.B: expected string, got integer");
        MESSAGE(run_schema, "{\"image\":\"a\",\"command\":[\"sh\",3]}", "command[1]: expected string, got integer");
}

static void test_nested_paths(void **state) {
        (void)state;
        const char *v = "{\"image\":\"a\",\"mounts\":[{\"source\":\"/a\",\"target\":\"/b\"},"
                        "{\"source\":\"/c\",\"target\":\"/d\"},{\"source\":7,\"target\":\"/f\"}]}";
        MESSAGE(run_schema, v, "mounts[2].source: expected string, got integer");
        MESSAGE(run_schema, "{\"image\":\"a\",\"mounts\":[{\"target\":\"/b\"}]}",
                "mounts[0]: missing required field \"source\" (string)");
        MESSAGE(run_schema, "{\"image\":\"a\",\"mounts\":[{\"source\":\"/a\",\"target\":\"/b\",\"ro\":true}]}",
                "mounts[0]: unknown field \"ro\": the fields allowed here are source, target, readonly");
        MESSAGE(run_schema, "{\"image\":\"a\",\"mounts\":[\"/a:/b\"]}", "mounts[0]: expected object, got string");
        /* Below a root array, the root names the value. */
        MESSAGE("{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}", "[1,\"x\"]",
                "arguments[1]: expected integer, got string");
        MESSAGE("{\"type\":\"string\"}", "1", "arguments: expected string, got integer");
        MESSAGE("{\"properties\":{\"a\":{\"properties\":{\"b\":{\"type\":\"array\",\"items\":{\"type\":\"null\"}}}}}}",
                "{\"a\":{\"b\":[null,null,false]}}", "a.b[2]: expected null, got boolean");
}

static void test_type(void **state) {
        static const struct {
                const char *type, *good, *bad, *got;
        } cases[] = {
                {"string", "\"x\"", "1", "got integer"},     {"integer", "1", "\"1\"", "got string"},
                {"number", "1.5", "true", "got boolean"},    {"boolean", "false", "0", "got integer"},
                {"object", "{}", "[]", "got array"},         {"array", "[]", "{}", "got object"},
                {"null", "null", "\"null\"", "got string"},
        };
        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                cleanup_free char *schema = xasprintf("{\"type\":\"%s\"}", cases[i].type);
                cleanup_free char *want = xasprintf("expected %s, %s", cases[i].type, cases[i].got);
                MATCH(schema, cases[i].good);
                MISMATCH(schema, cases[i].bad, want);
        }
}

static void test_integer_and_number(void **state) {
        (void)state;
        MATCH("{\"type\":\"integer\"}", "3");
        MATCH("{\"type\":\"integer\"}", "3.0");
        MATCH("{\"type\":\"integer\"}", "-0.0");
        MATCH("{\"type\":\"integer\"}", "1e300");
        MESSAGE("{\"type\":\"integer\"}", "3.5", "arguments: expected integer, got number 3.5");
        MATCH("{\"type\":\"number\"}", "3");
        MATCH("{\"type\":\"number\"}", "3.25");
        MISMATCH("{\"type\":\"number\"}", "\"3\"", "expected number, got string");
        /* Numbers compare by value whether written as integer or real. */
        MATCH("{\"enum\":[1,2]}", "2.0");
        MATCH("{\"const\":[1,{\"a\":2.0}]}", "[1.0,{\"a\":2}]");
        MATCH("{\"minimum\":9007199254740993}", "9007199254740993");
        MISMATCH("{\"minimum\":9007199254740993}", "9007199254740992", "9007199254740992 is below the minimum");
}

static void test_multiple_types(void **state) {
        (void)state;
        const char *s = "{\"type\":[\"string\",\"null\"]}";
        MATCH(s, "\"x\"");
        MATCH(s, "null");
        MESSAGE(s, "1", "arguments: expected string or null, got integer");
        MESSAGE("{\"type\":[\"null\",\"integer\",\"string\"]}", "[]",
                "arguments: expected string, integer or null, got array");
        MATCH("{\"type\":[\"integer\",\"boolean\"]}", "true");
}

static void test_required_and_properties(void **state) {
        (void)state;
        const char *s = "{\"required\":[\"a\",\"b\"],\"properties\":{\"a\":{\"type\":\"integer\"}}}";
        MATCH(s, "{\"a\":1,\"b\":\"anything\"}");
        MESSAGE(s, "{\"b\":1}", "missing required field \"a\" (integer)");
        /* No type in the schema: no type in the message. */
        MESSAGE(s, "{\"a\":1}", "missing required field \"b\"");
        MESSAGE(s, "{\"a\":\"1\",\"b\":1}", "a: expected integer, got string");
        MESSAGE("{\"required\":[\"a\"],\"properties\":{\"a\":{\"type\":[\"string\",\"null\"]}}}", "{}",
                "missing required field \"a\" (string or null)");
        /* properties and required say nothing about values that are not objects. */
        MATCH(s, "[1]");
        MATCH(s, "\"text\"");
        /* A property whose schema is false may not appear. */
        MESSAGE("{\"properties\":{\"old\":false}}", "{\"old\":1}", "old: no value is allowed here; leave this field out");
        MATCH("{\"properties\":{\"old\":false,\"any\":true}}", "{\"any\":[1]}");
}

static void test_additional_properties(void **state) {
        (void)state;
        MATCH("{\"properties\":{\"a\":{}}}", "{\"a\":1,\"b\":2}");
        MATCH("{\"properties\":{\"a\":{}},\"additionalProperties\":true}", "{\"a\":1,\"b\":2}");
        MATCH("{\"properties\":{\"a\":{}},\"additionalProperties\":false}", "{\"a\":1}");
        MESSAGE("{\"properties\":{\"a\":{}},\"additionalProperties\":false}", "{\"a\":1,\"zz\":2}",
                "unknown field \"zz\": this tool takes a");
        MESSAGE("{\"type\":\"object\",\"additionalProperties\":false}", "{\"x\":1}",
                "unknown field \"x\": this tool takes no arguments");
        MESSAGE("{\"properties\":{\"o\":{\"additionalProperties\":false}}}", "{\"o\":{\"x\":1}}",
                "o: unknown field \"x\": the fields allowed here are none");
        const char *typed = "{\"properties\":{\"a\":{}},\"additionalProperties\":{\"type\":\"integer\"}}";
        MATCH(typed, "{\"a\":\"s\",\"b\":2,\"c\":3}");
        MESSAGE(typed, "{\"a\":\"s\",\"b\":2,\"c\":\"3\"}", "c: expected integer, got string");
}

static void test_items(void **state) {
        (void)state;
        const char *s = "{\"items\":{\"type\":\"string\",\"minLength\":2}}";
        MATCH(s, "[]");
        MATCH(s, "[\"ab\",\"cd\"]");
        MESSAGE(s, "[\"ab\",\"c\"]", "arguments[1]: 1 character is fewer than the minimum 2");
        MATCH(s, "{\"not\":\"an array\"}");
}

static void test_enum_and_const(void **state) {
        (void)state;
        MATCH("{\"enum\":[\"a\",1,null,[1,2],{\"k\":true}]}", "null");
        MATCH("{\"enum\":[\"a\",1,null,[1,2],{\"k\":true}]}", "{\"k\":true}");
        MESSAGE("{\"enum\":[\"a\",1,null]}", "2", "arguments: 2 is not one of \"a\", 1, null");
        MISMATCH("{\"enum\":[[1,2]]}", "[2,1]", "[2,1] is not one of [1,2]");
        MATCH("{\"const\":\"ro\"}", "\"ro\"");
        MESSAGE("{\"properties\":{\"mode\":{\"const\":\"ro\"}}}", "{\"mode\":\"rw\"}", "mode: expected \"ro\", got \"rw\"");
        MISMATCH("{\"const\":null}", "0", "expected null, got 0");
        /* Long values are cut in messages. */
        char big[300];
        memset(big, 'x', sizeof big);
        big[0] = big[sizeof big - 2] = '"';
        big[sizeof big - 1] = 0;
        MISMATCH("{\"enum\":[\"a\"]}", big, "xxx... is not one of \"a\"");
}

static void test_numeric_bounds(void **state) {
        (void)state;
        MATCH("{\"minimum\":1}", "1");
        MESSAGE("{\"minimum\":1}", "0.5", "arguments: 0.5 is below the minimum 1");
        MATCH("{\"maximum\":1.5}", "1.5");
        MESSAGE("{\"maximum\":1.5}", "2", "arguments: 2 is above the maximum 1.5");
        MATCH("{\"exclusiveMinimum\":0}", "0.001");
        MESSAGE("{\"exclusiveMinimum\":0}", "0", "arguments: 0 must be greater than 0");
        MATCH("{\"exclusiveMaximum\":10}", "9");
        MESSAGE("{\"exclusiveMaximum\":10}", "10.0", "arguments: 10 must be less than 10");
        MATCH("{\"maximum\":100}", "-1e300");
        MISMATCH("{\"minimum\":-5}", "-7", "-7 is below the minimum -5");
        /* Bounds apply to numbers only. */
        MATCH("{\"minimum\":5}", "\"1\"");
}

static void test_string_length(void **state) {
        (void)state;
        MATCH("{\"maxLength\":5}", "\"h\\u00e9llo\"");            /* 6 bytes, 5 characters */
        MATCH("{\"maxLength\":3,\"minLength\":3}", "\"日本語\""); /* 9 bytes */
        MESSAGE("{\"maxLength\":2}", "\"日本語\"", "arguments: 3 characters is more than the maximum 2");
        MATCH("{\"maxLength\":1}", "\"\\ud83d\\ude00\""); /* one code point, 4 bytes */
        MESSAGE("{\"minLength\":1}", "\"\"", "arguments: 0 characters is fewer than the minimum 1");
        MATCH("{\"minLength\":1}", "42");

        char name[310];
        memset(name, 'n', sizeof name);
        name[0] = '"';
        memcpy(name + 301, "\"}", 3);
        cleanup_free char *value = xasprintf("{\"name\":%s", name);
        MESSAGE("{\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":255}}}", value,
                "name: 300 characters is more than the maximum 255");
}

static void test_array_length(void **state) {
        (void)state;
        MATCH("{\"minItems\":1,\"maxItems\":2}", "[1]");
        MATCH("{\"minItems\":1,\"maxItems\":2}", "[1,2]");
        MESSAGE("{\"minItems\":1}", "[]", "arguments: 0 items is fewer than the minimum 1");
        MESSAGE("{\"properties\":{\"ports\":{\"maxItems\":2}}}", "{\"ports\":[1,2,3]}",
                "ports: 3 items is more than the maximum 2");
        MATCH("{\"maxItems\":0}", "\"not an array\"");
}

static void test_pattern(void **state) {
        (void)state;
        const char *s = "{\"pattern\":\"^[a-z][a-z0-9_-]*$\"}";
        MATCH(s, "\"web-1\"");
        MESSAGE(s, "\"Web 1\"", "arguments: \"Web 1\" does not match the pattern ^[a-z][a-z0-9_-]*$");
        MATCH("{\"pattern\":\"[0-9]+\"}", "\"abc123\""); /* unanchored, as JSON Schema says */
        MATCH("{\"pattern\":\"x\"}", "5");
        /* What follows a NUL is not hidden from the pattern. */
        MISMATCH(s, "\"web\\u0000; rm -rf /\"", "contains a NUL character");
        MATCH("{\"maxLength\":3}", "\"a\\u0000b\"");
        /* Compiled once, used for many values. */
        MATCH("{\"items\":{\"pattern\":\"^a+$\"}}", "[\"a\",\"aa\",\"aaa\",\"aaaa\"]");
        MISMATCH("{\"items\":{\"pattern\":\"^a+$\"}}", "[\"a\",\"aa\",\"b\"]", "arguments[2]: \"b\" does not match");
        /* An uncompilable pattern is the schema's fault, and says so. */
        MISMATCH("{\"properties\":{\"p\":{\"pattern\":\"[a-\"}}}", "{\"p\":\"x\"}",
                 "p: cannot be checked, the tool's schema is invalid: pattern \"[a-\"");
}

static void test_any_of(void **state) {
        (void)state;
        const char *s = "{\"properties\":{\"port\":{\"anyOf\":[{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535},"
                        "{\"type\":\"string\",\"pattern\":\"^[0-9]+/(tcp|udp)$\"}]}}}";
        MATCH(s, "{\"port\":80}");
        MATCH(s, "{\"port\":\"53/udp\"}");
        /* The type matches no alternative: list the types that would. */
        MESSAGE(s, "{\"port\":true}", "port: expected string or integer, got boolean");
        /* The type picks the alternative the caller meant; its error is the one shown. */
        MESSAGE(s, "{\"port\":70000}", "port: 70000 is above the maximum 65535");
        MESSAGE(s, "{\"port\":\"53\"}", "port: \"53\" does not match the pattern ^[0-9]+/(tcp|udp)$");
        /* Both alternatives may match. */
        MATCH("{\"anyOf\":[{\"type\":\"number\"},{\"type\":\"integer\"}]}", "1");
        /* Untyped alternatives: the first one's error. */
        MISMATCH("{\"anyOf\":[{\"required\":[\"a\"]},{\"required\":[\"b\"]}]}", "{\"c\":1}",
                 "missing required field \"a\"");
        MATCH("{\"anyOf\":[{\"required\":[\"a\"]},{\"required\":[\"b\"]}]}", "{\"b\":1}");
        /* A broken schema in an alternative is not treated as a mismatch. */
        MISMATCH("{\"anyOf\":[{\"pattern\":\"(\"},{\"type\":\"string\"}]}", "\"x\"", "schema is invalid");
}

static void test_one_of(void **state) {
        (void)state;
        const char *s = "{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"integer\",\"minimum\":0}]}";
        MATCH(s, "\"x\"");
        MATCH(s, "3");
        MESSAGE(s, "-3", "arguments: -3 is below the minimum 0");
        MESSAGE(s, "[]", "arguments: expected string or integer, got array");
        const char *both = "{\"oneOf\":[{\"type\":\"number\"},{\"type\":\"string\"},{\"type\":\"integer\"}]}";
        MATCH(both, "1.5");
        MISMATCH(both, "2", "arguments: matches both alternative 1 and 3 of oneOf");
        const char *shapes = "{\"type\":\"object\",\"oneOf\":[{\"required\":[\"file\"]},{\"required\":[\"url\"]}]}";
        MATCH(shapes, "{\"file\":\"a\"}");
        MISMATCH(shapes, "{\"file\":\"a\",\"url\":\"b\"}", "exactly one");
}

static void test_error_order(void **state) {
        (void)state;
        const char *s = "{\"required\":[\"z\"],\"additionalProperties\":false,"
                        "\"properties\":{\"b\":{\"type\":\"string\"},\"a\":{\"type\":\"string\"},\"z\":{}}}";
        /* required first */
        MISMATCH(s, "{\"a\":1,\"b\":1,\"q\":1}", "missing required field \"z\"");
        /* then properties in schema order (b before a), not object order */
        MISMATCH(s, "{\"a\":1,\"b\":1,\"z\":1,\"q\":1}", "b: expected string");
        /* then additional properties in object order */
        MISMATCH(s, "{\"z\":1,\"y\":1,\"q\":1}", "unknown field \"y\"");
        /* the type of a node before its other keywords */
        MISMATCH("{\"type\":\"string\",\"enum\":[\"a\"]}", "1", "expected string, got integer");
}

static void test_ignored_keywords(void **state) {
        (void)state;
        const char *s = "{\"type\":\"string\",\"default\":7,\"description\":\"d\",\"format\":\"uri\","
                        "\"x-custom\":{\"type\":\"integer\"},\"$schema\":\"https://json-schema.org/draft/2020-12/schema\"}";
        SCHEMA_OK(s);
        MATCH(s, "\"not a uri\"");
        MATCH("{}", "[1,{\"a\":null}]");
        MATCH("true", "1");
        MISMATCH("false", "1", "arguments: no value is allowed here");
}

/* `depth` arrays inside each other, and a schema as deep. */
static void nested(int depth, char **ret_schema, char **ret_value) {
        size_t n = (size_t)depth;
        char *s = xmalloc(n * 32 + 64), *v = xmalloc(2 * n + 8), *p = s;
        for (size_t i = 0; i < n; i++)
                p += sprintf(p, "{\"type\":\"array\",\"items\":");
        p += sprintf(p, "{\"type\":\"integer\"}");
        memset(p, '}', n);
        p[n] = 0;
        memset(v, '[', n);
        strcpy(v + n, "1");
        memset(v + n + 1, ']', n);
        v[2 * n + 1] = 0;
        *ret_schema = s;
        *ret_value = v;
}

static void test_depth_cap(void **state) {
        (void)state;
        cleanup_free char *s63 = NULL;
        cleanup_free char *v63 = NULL;
        cleanup_free char *s200 = NULL;
        cleanup_free char *v200 = NULL;
        nested(63, &s63, &v63);
        nested(200, &s200, &v200);
        MATCH(s63, v63);
        MISMATCH(s200, v200, "nested more than 64 levels deep");
        MISMATCH(s200, v200, "arguments[0][0][0]");
        SCHEMA_OK(s63);
        SCHEMA_BAD(s200, "nested more than 64 levels deep");
        /* A deep value under a shallow schema is not walked. */
        MATCH("{\"type\":\"array\"}", v200);
        /* Depth is a limit on nesting, not on size. */
        cleanup_free char *wide = xmalloc(100000 * 2 + 16);
        char *p = wide;
        *p++ = '[';
        for (int i = 0; i < 100000; i++)
                p += sprintf(p, i ? ",7" : "7");
        strcpy(p, "]");
        MATCH("{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"maximum\":7}}", wide);
}

static void test_schema_valid(void **state) {
        (void)state;
        SCHEMA_OK("{}");
        SCHEMA_OK("{\"type\":[\"string\",\"null\"],\"enum\":[\"a\",null],\"const\":\"a\",\"minLength\":1,"
                  "\"maxLength\":2.0,\"pattern\":\"^a$\",\"minimum\":0,\"maximum\":1.5,\"exclusiveMinimum\":-1,"
                  "\"exclusiveMaximum\":2,\"minItems\":0,\"maxItems\":3,\"items\":{},\"required\":[],"
                  "\"additionalProperties\":{\"type\":\"integer\"},\"anyOf\":[{}],\"oneOf\":[{},{\"type\":\"null\"}]}");
        SCHEMA_BAD("[]", "invalid schema: expected a schema (an object), got array");
        SCHEMA_BAD("{\"type\":\"strng\"}", "invalid schema: \"type\" \"strng\" is not one of string, integer");
        SCHEMA_BAD("{\"type\":[\"string\",3]}", "\"type\" 3 is not one of");
        SCHEMA_BAD("{\"type\":[]}", "\"type\" must be a type name or a non-empty array of them, got array");
        SCHEMA_BAD("{\"type\":{}}", "got object");
        SCHEMA_BAD("{\"properties\":[]}", "\"properties\" must be an object of schemas, got array");
        SCHEMA_BAD("{\"properties\":{\"a\":{\"type\":\"string\"},\"b\":\"string\"}}",
                   "invalid schema at properties.b: expected a schema (an object), got string");
        SCHEMA_BAD("{\"properties\":{\"m\":{\"items\":{\"properties\":{\"s\":{\"type\":\"text\"}}}}}}",
                   "invalid schema at properties.m.items.properties.s: \"type\" \"text\" is not one of");
        SCHEMA_BAD("{\"required\":\"a\"}", "\"required\" must be an array of field names, got string");
        SCHEMA_BAD("{\"required\":[\"a\",1]}", "\"required\"[1] must be a field name (a string), got integer");
        SCHEMA_BAD("{\"additionalProperties\":\"no\"}",
                   "invalid schema at additionalProperties: expected a schema (an object), got string");
        SCHEMA_BAD("{\"items\":[{}]}", "invalid schema at items: expected a schema (an object), got array");
        SCHEMA_BAD("{\"enum\":[]}", "\"enum\" must be a non-empty array");
        SCHEMA_BAD("{\"enum\":\"a\"}", "\"enum\" must be a non-empty array");
        SCHEMA_BAD("{\"minimum\":\"1\"}", "\"minimum\" must be a number (JSON Schema 2020-12), got string");
        SCHEMA_BAD("{\"maximum\":null}", "\"maximum\" must be a number");
        SCHEMA_BAD("{\"exclusiveMinimum\":true}", "\"exclusiveMinimum\" must be a number (JSON Schema 2020-12), got boolean");
        SCHEMA_BAD("{\"exclusiveMaximum\":false}", "\"exclusiveMaximum\" must be a number");
        SCHEMA_BAD("{\"minLength\":-1}", "\"minLength\" must be a non-negative integer, got -1");
        SCHEMA_BAD("{\"maxLength\":1.5}", "\"maxLength\" must be a non-negative integer, got 1.5");
        SCHEMA_BAD("{\"minItems\":\"2\"}", "\"minItems\" must be a non-negative integer, got \"2\"");
        SCHEMA_BAD("{\"maxItems\":[]}", "\"maxItems\" must be a non-negative integer");
        SCHEMA_BAD("{\"pattern\":5}", "\"pattern\" must be a string, got integer");
        SCHEMA_BAD("{\"properties\":{\"p\":{\"pattern\":\"a(b\"}}}",
                   "invalid schema at properties.p: pattern \"a(b\" is not a POSIX extended regular expression");
        SCHEMA_BAD("{\"anyOf\":{}}", "\"anyOf\" must be a non-empty array of schemas");
        SCHEMA_BAD("{\"oneOf\":[]}", "\"oneOf\" must be a non-empty array of schemas");
        SCHEMA_BAD("{\"oneOf\":[{},{\"minimum\":\"x\"}]}", "invalid schema at oneOf[1]: \"minimum\" must be a number");
        SCHEMA_BAD("{\"anyOf\":[{},7]}", "invalid schema at anyOf[1]: expected a schema (an object), got integer");
}

/* The build's check of our own tool schemas: a keyword the checker would
 * skip is a constraint that silently does nothing, so it is refused. */
static void test_schema_supported(void **state) {
        (void)state;
        SUPPORTED_OK(run_schema);
        SUPPORTED_OK("{\"type\":\"object\",\"description\":\"d\",\"title\":\"t\",\"$comment\":\"c\","
                     "\"properties\":{\"a\":{\"const\":1,\"default\":1,\"examples\":[1]}},\"required\":[\"a\"],"
                     "\"anyOf\":[{\"required\":[\"b\"]},{}]}");
        SUPPORTED_BAD("{\"type\":\"string\",\"format\":\"uri\"}",
                      "invalid schema: keyword \"format\" is not checked by this server's validator");
        SUPPORTED_BAD("{\"properties\":{\"a\":{\"items\":{\"allOf\":[{}]}}}}",
                      "invalid schema at properties.a.items: keyword \"allOf\" is not checked");
        SUPPORTED_BAD("{\"$ref\":\"#/x\"}", "keyword \"$ref\" is not checked");
        SUPPORTED_BAD("{\"properties\":{\"a\":{}},\"required\":[\"a\",\"b\"]}",
                      "\"required\" names \"b\", which is not in \"properties\"");
        /* What mcp_schema_valid refuses stays refused. */
        SUPPORTED_BAD("{\"properties\":{\"a\":{\"minimum\":\"1\"}}}", "\"minimum\" must be a number");
        /* The lenient check still takes them: clients' schemas may carry any keyword. */
        SCHEMA_OK("{\"type\":\"string\",\"format\":\"uri\",\"allOf\":[{}]}");
}

static void test_null_arguments(void **state) {
        (void)state;
        cleanup_json json_t *s = json_loads("{\"type\":\"string\"}", 0, NULL);
        cleanup_json json_t *v = json_integer(1);
        cm_err err = CM_ERR_INIT;
        /* err may be NULL: the caller only wants the verdict. */
        assert_int_equal(mcp_schema_check(s, v, "arguments", NULL), -1);
        assert_int_equal(mcp_schema_valid(v, NULL), -1);
        /* root defaults to "value" */
        assert_int_equal(mcp_schema_check(s, v, NULL, &err), -1);
        assert_string_equal(err.msg, "value: expected string, got integer");
        assert_int_equal(mcp_schema_check(s, NULL, "arguments", &err), -1);
        assert_int_equal(mcp_schema_check(NULL, v, "arguments", &err), -1);
        assert_int_equal(mcp_schema_valid(NULL, &err), -1);
        /* success leaves err alone */
        cleanup_json json_t *good = json_string("x");
        cm_err_clear(&err);
        assert_int_equal(mcp_schema_check(s, good, "arguments", &err), 0);
        assert_int_equal(err.code, 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_tool_schema),
                cmocka_unit_test(test_nested_paths),
                cmocka_unit_test(test_type),
                cmocka_unit_test(test_integer_and_number),
                cmocka_unit_test(test_multiple_types),
                cmocka_unit_test(test_required_and_properties),
                cmocka_unit_test(test_additional_properties),
                cmocka_unit_test(test_items),
                cmocka_unit_test(test_enum_and_const),
                cmocka_unit_test(test_numeric_bounds),
                cmocka_unit_test(test_string_length),
                cmocka_unit_test(test_array_length),
                cmocka_unit_test(test_pattern),
                cmocka_unit_test(test_any_of),
                cmocka_unit_test(test_one_of),
                cmocka_unit_test(test_error_order),
                cmocka_unit_test(test_ignored_keywords),
                cmocka_unit_test(test_depth_cap),
                cmocka_unit_test(test_schema_valid),
                cmocka_unit_test(test_schema_supported),
                cmocka_unit_test(test_null_arguments),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
