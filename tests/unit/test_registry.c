/* The registry client's pieces that need no registry: manifests and
 * platform choice, where credentials come from, and when plain http is
 * allowed.  (The client against real registries: tests/e2e/registry.test.mjs.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu.h"
#include <string.h>
#include <unistd.h>

#include "image/registry_int.h"
#include "util/cleanup.h"

#define D(c)                                                                                                           \
        "sha256:" c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c  \
                c c c c c c c c c c c c c c

static const char oci_manifest[] =
        "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
        "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"" D(
                "a") "\",\"size\":7},"
                     "\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+zstd\",\"digest\":\"" D(
                             "b") "\",\"size\":9}]}";

static const char index_doc[] =
        "{\"schemaVersion\":2,\"manifests\":["
        "{\"digest\":\"" D(
                "c") "\",\"size\":1,\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}},"
                     "{\"digest\":\"" D(
                             "d") "\",\"size\":2,\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\"}},"
                                  "{\"digest\":\"" D("e") "\",\"size\":3,\"platform\":{\"os\":\"linux\","
                                                          "\"architecture\":\"arm\",\"variant\":\"v7\"}}]}";

static void test_manifest(void **state) {
        rg_manifest m;
        cm_err err = CM_ERR_INIT;
        (void)state;
        assert_int_equal(rg_manifest_parse(oci_manifest, strlen(oci_manifest), NULL, &m, &err), 0);
        assert_false(m.is_index);
        assert_string_equal(m.config.digest, D("a"));
        assert_int_equal(m.n, 1);
        assert_int_equal(m.items[0].size, 9);
        assert_string_equal(m.items[0].media_type, "application/vnd.oci.image.layer.v1.tar+zstd");
        rg_manifest_free(&m);
}

static void test_index_platforms(void **state) {
        rg_manifest m;
        cm_err err = CM_ERR_INIT;
        size_t i = 99;
        (void)state;
        /* no mediaType in the document: the Content-Type says it */
        assert_int_equal(rg_manifest_parse(index_doc, strlen(index_doc), RG_MT_OCI_INDEX "; charset=utf-8", &m, &err),
                         0);
        assert_true(m.is_index);
        assert_int_equal(rg_pick_platform(&m, "linux/arm64/v8", &i, &err), 0); /* v8 is arm64's default */
        assert_int_equal(i, 1);
        assert_int_equal(rg_pick_platform(&m, "linux/arm/v7", &i, &err), 0);
        assert_int_equal(i, 2);
        assert_int_equal(rg_pick_platform(&m, "linux/amd64", &i, &err), 0);
        assert_int_equal(i, 0);
        assert_true(rg_pick_platform(&m, "linux/arm/v6", &i, &err) < 0);
        assert_non_null(strstr(err.msg, "no linux/arm/v6 variant; it has linux/amd64, linux/arm64, linux/arm/v7"));
        assert_true(rg_pick_platform(&m, "amd64", &i, &err) < 0);
        assert_non_null(strstr(err.msg, "expected os/arch"));
        rg_manifest_free(&m);
}

static void test_manifest_refused(void **state) {
        static const struct {
                const char *doc, *why;
        } bad[] = {
                {"", "not a JSON object"},
                {"[]", "not a JSON object"},
                {"{\"schemaVersion\":1,\"fsLayers\":[]}", "schema 1"},
                {"{\"schemaVersion\":3}", "schemaVersion is not 2"},
                {"{\"schemaVersion\":2,\"mediaType\":\"text/html\",\"layers\":[]}", "not one this client reads"},
                {"{\"schemaVersion\":2,\"layers\":[]}", "config is not an object"},
                {"{\"schemaVersion\":2,\"config\":{\"digest\":\"sha256:abc\",\"size\":1},\"layers\":[]}",
                 "no sha256 digest"},
                {"{\"schemaVersion\":2,\"config\":{\"digest\":\"" D("a") "\",\"size\":-1},\"layers\":[]}", "no size"},
                {"{\"schemaVersion\":2,\"config\":{\"digest\":\"" D("a") "\",\"size\":1},\"layers\":{}}",
                 "layers is not a list"},
                {"{\"schemaVersion\":2,\"config\":{\"digest\":\"" D("a") "\",\"size\":1},\"layers\":[{\"digest\":"
                                                                         "\"" D("A") "\",\"size\":1}]}",
                 "no sha256 digest"},
                {"{\"schemaVersion\":2,\"schemaVersion\":2}", "not a JSON object"}, /* duplicate keys */
        };
        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                rg_manifest m;
                cm_err err = CM_ERR_INIT;
                if (rg_manifest_parse(bad[i].doc, strlen(bad[i].doc), NULL, &m, &err) == 0)
                        fail_msg("accepted: %s", bad[i].doc);
                if (!strstr(err.msg, bad[i].why))
                        fail_msg("%s: \"%s\" does not say \"%s\"", bad[i].doc, err.msg, bad[i].why);
        }
}

static void test_plain_http(void **state) {
        (void)state;
        setenv("CONTAINER_MCP_REGISTRY_CERTS_D", "", 1); /* the machine's certs.d stays out */
        unsetenv("CONTAINER_MCP_INSECURE_REGISTRIES");
        assert_true(rg_insecure("localhost:5000"));
        assert_true(rg_insecure("127.0.0.1:5000"));
        assert_true(rg_insecure("127.9.8.7"));
        assert_true(rg_insecure("[::1]:5000"));
        assert_false(rg_insecure("128.0.0.1:5000"));
        assert_false(rg_insecure("registry.example.com"));
        assert_false(rg_insecure("localhost.example.com"));
        assert_false(rg_insecure("[::2]:5000"));
        setenv("CONTAINER_MCP_INSECURE_REGISTRIES", "reg.lan:5000,other.lan", 1);
        assert_true(rg_insecure("reg.lan:5000"));
        assert_false(rg_insecure("reg.lan:6000"));
        assert_true(rg_insecure("other.lan:1234")); /* a bare host covers its ports */
        assert_false(rg_insecure("reg.lan.evil.com"));
        unsetenv("CONTAINER_MCP_INSECURE_REGISTRIES");
}

/* The host an insecure registry's unchecked TLS applies to: its own only
 * (a token realm elsewhere is checked). */
static void test_same_host(void **state) {
        (void)state;
        assert_true(rg_same_host("https://reg.lan:5000/v2/x/manifests/1", "https://reg.lan:5000"));
        assert_true(rg_same_host("https://REG.lan:5000/token?scope=a", "https://reg.lan:5000"));
        assert_true(rg_same_host("https://[::1]:5000/token", "https://[::1]:5000"));
        assert_false(rg_same_host("https://reg.lan:5001/token", "https://reg.lan:5000"));
        assert_false(rg_same_host("https://reg.lan/token", "https://reg.lan:5000"));
        assert_false(rg_same_host("https://reg.lan:5000.evil.com/token", "https://reg.lan:5000"));
        assert_false(rg_same_host("https://reg.lan:5000@evil.com/token", "https://reg.lan:5000"));
        assert_false(rg_same_host("https://evil.com/reg.lan:5000", "https://reg.lan:5000"));
        assert_false(rg_same_host("https:///token", "https://"));
}

static void test_challenge(void **state) {
        static const char ch[] = "realm=\"https://auth.example/token\",service=registry.example,"
                                 "scope=\"repository:a/b:pull\",xrealm=\"no\",bad=\"q\\\"uote\"";
        char *v;
        (void)state;
        v = rg_challenge_param(ch, "realm");
        assert_string_equal(v, "https://auth.example/token");
        free(v);
        v = rg_challenge_param(ch, "service"); /* a bare token */
        assert_string_equal(v, "registry.example");
        free(v);
        v = rg_challenge_param(ch, "scope");
        assert_string_equal(v, "repository:a/b:pull");
        free(v);
        v = rg_challenge_param(ch, "bad");
        assert_string_equal(v, "q\"uote");
        free(v);
        assert_null(rg_challenge_param(ch, "rea")); /* not a prefix match */
        assert_null(rg_challenge_param("realm=\"unterminated", "scope"));
        v = rg_challenge_param("realm=\"unterminated", "realm");
        assert_string_equal(v, "unterminated");
        free(v);
}

static char tmp[] = "/tmp/cm-registry-unit-XXXXXX";

static void write_config(const char *json) {
        cleanup_free char *p = xasprintf("%s/config.json", tmp);
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fputs(json, f);
        fclose(f);
}

static void test_credentials(void **state) {
        char *user = NULL, *pass = NULL, *src = NULL;
        cm_err err = CM_ERR_INIT;
        (void)state;
        setenv("DOCKER_CONFIG", tmp, 1);
        unsetenv("CONTAINER_MCP_REGISTRY_AUTH");
        assert_int_equal(cm_registry_credentials("docker.io", &user, &pass), 0); /* no file */

        /* base64 "hub:p:w" under Docker Hub's key, username/password for another */
        write_config("{\"auths\":{\"https://index.docker.io/v1/\":{\"auth\":\"aHViOnA6dw==\"},"
                     "\"reg.lan:5000\":{\"username\":\"u\",\"password\":\"pw\"}}}");
        assert_int_equal(cm_registry_credentials_from("docker.io", &user, &pass, &src, &err), 1);
        assert_string_equal(user, "hub");
        assert_string_equal(pass, "p:w");
        assert_non_null(strstr(src, "config.json"));
        free(user), free(pass), free(src), src = NULL;
        assert_int_equal(cm_registry_credentials("reg.lan:5000", &user, &pass), 1);
        assert_string_equal(pass, "pw");
        free(user), free(pass);
        assert_int_equal(cm_registry_credentials("reg.lan:6000", &user, &pass), 0);
        assert_int_equal(cm_registry_credentials("reg.lan", &user, &pass), 0);

        /* the environment first */
        setenv("CONTAINER_MCP_REGISTRY_AUTH", "a.b=x:y,reg.lan:5000=env:se:cret", 1);
        assert_int_equal(cm_registry_credentials_from("reg.lan:5000", &user, &pass, &src, &err), 1);
        assert_string_equal(user, "env");
        assert_string_equal(pass, "se:cret");
        assert_string_equal(src, "CONTAINER_MCP_REGISTRY_AUTH");
        free(user), free(pass), free(src), src = NULL;
        setenv("CONTAINER_MCP_REGISTRY_AUTH", "a.b=x:y,nonsense", 1);
        assert_true(cm_registry_credentials_from("reg.lan:5000", &user, &pass, &src, &err) < 0);
        assert_non_null(strstr(err.msg, "entry 2 is not host=user:password"));
        unsetenv("CONTAINER_MCP_REGISTRY_AUTH");

        write_config("{\"auths\":{\"reg.lan:5000\":{\"auth\":\"!!!\"}}}");
        assert_true(cm_registry_credentials_from("reg.lan:5000", &user, &pass, &src, &err) < 0);
        assert_non_null(strstr(err.msg, "not base64 of user:password"));
        write_config("{not json");
        assert_true(cm_registry_credentials_from("reg.lan:5000", &user, &pass, &src, &err) < 0);
        assert_non_null(strstr(err.msg, "is not valid JSON"));
        unsetenv("DOCKER_CONFIG");
}

/* certs.d: the first directory of the list with an entry for the host;
 * names that could leave certs.d find nothing; an entry means https. */
static void test_certs_dir(void **state) {
        char *mk, *list, *dir;
        (void)state;
        mk = xasprintf("cd %s && mkdir -p a/127.0.0.1:5000 b/127.0.0.1:5000 b/reg.lan && touch b/file.lan", tmp);
        assert_int_equal(system(mk), 0);
        free(mk);
        list = xasprintf("rel:/nonexistent:%s/a:%s/b", tmp, tmp);
        setenv("CONTAINER_MCP_REGISTRY_CERTS_D", list, 1);
        unsetenv("CONTAINER_MCP_INSECURE_REGISTRIES");
        dir = rg_certs_dir("127.0.0.1:5000");
        assert_non_null(dir);
        assert_non_null(strstr(dir, "/a/127.0.0.1:5000"));
        free(dir);
        dir = rg_certs_dir("reg.lan");
        assert_non_null(dir);
        assert_non_null(strstr(dir, "/b/reg.lan"));
        free(dir);
        assert_null(rg_certs_dir("file.lan")); /* not a directory */
        assert_null(rg_certs_dir("other.lan"));
        assert_null(rg_certs_dir(".."));
        assert_null(rg_certs_dir("."));
        assert_null(rg_certs_dir(""));
        assert_null(rg_certs_dir("x/../../a"));
        assert_false(rg_insecure("127.0.0.1:5000")); /* its entry says it speaks TLS */
        assert_true(rg_insecure("127.0.0.1:5001"));
        setenv("CONTAINER_MCP_REGISTRY_CERTS_D", "", 1); /* none at all */
        assert_null(rg_certs_dir("reg.lan"));
        free(list);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_manifest),         cmocka_unit_test(test_index_platforms),
                cmocka_unit_test(test_manifest_refused), cmocka_unit_test(test_plain_http),
                cmocka_unit_test(test_certs_dir),        cmocka_unit_test(test_same_host),
                cmocka_unit_test(test_challenge),        cmocka_unit_test(test_credentials),
        };
        TU_RUN_IN_TMP(tmp, tests);
}
