/* Registry authentication: the credentials for a host, and the answer to a
 * 401's challenge (Basic, or a Bearer token from the realm it names). */
#include "image/registry_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "backend/docker/api.h" /* dk_base64_decode, dk_escape */
#include "backend/spawn.h"
#include "util/cleanup.h"
#include "util/json.h"

#define HUB_KEY "https://index.docker.io/v1/"

/* CONTAINER_MCP_REGISTRY_AUTH="host=user:password[,host=user:password]" */
static int from_env(const char *host, char **user, char **pass, cm_err *err) {
        const char *v = getenv("CONTAINER_MCP_REGISTRY_AUTH");
        size_t i = 0;
        for (const char *p = v; p && *p; i++) {
                size_t n = strcspn(p, ",");
                cleanup_free char *entry = xstrndup(p, n);
                char *eq = strchr(entry, '='), *colon = eq ? strchr(eq + 1, ':') : NULL;
                if (!eq || !colon || eq == entry || colon == eq + 1)
                        return cm_err_set(err, EINVAL,
                                          "CONTAINER_MCP_REGISTRY_AUTH: entry %zu is not host=user:password (entries "
                                          "separated by commas)",
                                          i + 1);
                *eq = 0, *colon = 0;
                if (strcasecmp(entry, host) == 0) {
                        *user = xstrdup(eq + 1);
                        *pass = xstrdup(colon + 1);
                        return 1;
                }
                p += n + (p[n] == ',');
        }
        return 0;
}

/* A key of `auths` ("https://index.docker.io/v1/", "host:5000",
 * "https://host/") names `host` when its host part is `host`; Docker Hub's
 * names are all one. */
static bool key_names(const char *key, const char *host) {
        static const char *const hub[] = {"docker.io", "index.docker.io", "registry-1.docker.io"};
        cleanup_free char *k = NULL;
        bool key_hub = false, host_hub = false;
        if (strncmp(key, "https://", 8) == 0)
                key += 8;
        else if (strncmp(key, "http://", 7) == 0)
                key += 7;
        k = xstrndup(key, strcspn(key, "/"));
        for (size_t i = 0; i < ARRAY_SIZE(hub); i++) {
                key_hub |= strcasecmp(k, hub[i]) == 0;
                host_hub |= strcasecmp(host, hub[i]) == 0;
        }
        return (key_hub && host_hub) || strcasecmp(k, host) == 0;
}

static char *docker_config_path(void) {
        const char *dir = getenv("DOCKER_CONFIG"), *home = getenv("HOME");
        if (dir && *dir)
                return xasprintf("%s/config.json", dir);
        return home && *home ? xasprintf("%s/.docker/config.json", home) : NULL;
}

/* Docker's credential helpers: `docker-credential-NAME get` on PATH, the
 * server address on its stdin, {"Username","Secret"} on its stdout.  NAME
 * comes from the operator's config file, the address from the reference
 * (letters, digits, . - : only): neither becomes a shell word or a path. */
#define HELPER_TIMEOUT_MS 10000

static bool helper_name_ok(const char *s) {
        if (!*s || strlen(s) > 64 || s[0] == '.')
                return false;
        for (; *s; s++)
                if (!isalnum((unsigned char)*s) && !strchr("._-", *s))
                        return false;
        return true;
}

static char *helper_path(const char *name) {
        const char *path = getenv("PATH");
        for (const char *p = path ? path : "/usr/local/bin:/usr/bin:/bin"; *p;) {
                size_t n = strcspn(p, ":");
                if (n && p[0] == '/') {
                        char *exe = xasprintf("%.*s/docker-credential-%s", (int)n, p, name);
                        if (access(exe, X_OK) == 0)
                                return exe;
                        free(exe);
                }
                p += n + (p[n] == ':');
        }
        return NULL;
}

/* 1 with credentials, 0 when the helper has none for this registry. */
static int from_helper(const char *config, const char *setting, const char *name, const char *host, char **user,
                       char **pass, char **ret_source, cm_err *err) {
        bool hub = key_names(HUB_KEY, host);
        cleanup_free char *exe = NULL, *input = xasprintf("%s\n", hub ? HUB_KEY : host);
        cleanup_json json_t *j = NULL;
        cm_exec_result r;
        const char *u, *secret;
        int ret = 0;

        if (!helper_name_ok(name))
                return cm_err_set(err, EINVAL,
                                  "%s: %s \"%.64s\" is not a credential helper's name (letters, digits, . _ -)", config,
                                  setting, name);
        if (!(exe = helper_path(name)))
                return cm_err_set(
                        err, ENOENT,
                        "%s names the credential helper \"%s\" (%s), but docker-credential-%s is not on PATH: "
                        "install it, or remove %s from that file",
                        config, name, setting, name, setting);
        char get[] = "get", *argv[] = {exe, get, NULL};
        cm_spawn_io io = {
                .stdin_data = input, .stdin_len = strlen(input), .timeout_ms = HELPER_TIMEOUT_MS, .cap = 1 << 16};
        if (cm_spawn(argv, &io, &r, err) < 0)
                return -1;
        if (r.timed_out)
                ret = cm_err_set(err, ETIMEDOUT,
                                 "%s get (%s of %s) did not answer within %d s for %s: is it waiting for a password "
                                 "or an unlocked keyring?",
                                 exe, setting, config, HELPER_TIMEOUT_MS / 1000, host);
        else if (r.exit_code != 0 && (strstr(r.out, "credentials not found") || strstr(r.err, "credentials not found")))
                ret = 0;
        else if (r.exit_code != 0)
                ret = cm_err_set(err, EIO, "%s get (%s of %s) failed for %s (exit %d): %.200s", exe, setting, config,
                                 host, r.exit_code, *r.err ? r.err : r.out);
        else if (!(j = json_loadb(r.out, r.out_len, 0, NULL)) || !(u = cm_json_str(j, "Username")) ||
                 !(secret = cm_json_str(j, "Secret")))
                ret = cm_err_set(err, EIO, "%s get (%s of %s) answered for %s without a Username and a Secret", exe,
                                 setting, config, host);
        else if (strcmp(u, "<token>") == 0)
                ret = cm_err_set(err, ENOTSUP,
                                 "%s holds an identity token for %s, which container-mcp cannot use: set "
                                 "CONTAINER_MCP_REGISTRY_AUTH=%s=USER:PASSWORD (or an access token as the password)",
                                 exe, host, host);
        else {
                *user = xstrdup(u);
                *pass = xstrdup(secret);
                if (ret_source)
                        *ret_source = xasprintf("docker-credential-%s (%s of %s)", name, setting, config);
                ret = 1;
        }
        cm_exec_result_clear(&r);
        return ret;
}

static int from_docker_config(const char *path, const char *host, char **user, char **pass, char **ret_source,
                              cm_err *err) {
        json_error_t je;
        cleanup_json json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
        json_t *auths = json_object_get(j, "auths"), *entry;
        const char *key, *store = cm_json_str(j, "credsStore");
        int r;
        if (!j && access(path, F_OK) != 0)
                return 0;
        if (!j)
                return cm_err_set(err, EINVAL, "%s is not valid JSON (%s, line %d); fix or remove it", path, je.text,
                                  je.line);
        /* As Docker: a registry's own helper, else the store's; what they
         * lack is looked for in auths. */
        json_object_foreach(json_object_get(j, "credHelpers"), key, entry) {
                if (key_names(key, host) && json_is_string(entry)) {
                        cleanup_free char *setting = xasprintf("credHelpers.\"%s\"", key);
                        if ((r = from_helper(path, setting, json_string_value(entry), host, user, pass, ret_source,
                                             err)) != 0)
                                return r;
                        store = NULL;
                        break;
                }
        }
        if (store && *store && (r = from_helper(path, "credsStore", store, host, user, pass, ret_source, err)) != 0)
                return r;
        json_object_foreach(auths, key, entry) {
                const char *auth = cm_json_str(entry, "auth"), *u = cm_json_str(entry, "username"),
                           *p = cm_json_str(entry, "password");
                if (!key_names(key, host))
                        continue;
                if (auth && *auth) {
                        size_t n;
                        cleanup_free char *plain = dk_base64_decode(auth, &n);
                        char *colon = plain ? memchr(plain, ':', n) : NULL;
                        if (!colon || strlen(plain) != n)
                                return cm_err_set(err, EINVAL,
                                                  "%s: auths.\"%s\".auth is not base64 of user:password; log in "
                                                  "again (docker login) or fix it",
                                                  path, key);
                        *colon = 0;
                        *user = xstrdup(plain);
                        *pass = xstrdup(colon + 1);
                } else if (u && p) {
                        *user = xstrdup(u);
                        *pass = xstrdup(p);
                } else
                        continue;
                if (ret_source)
                        *ret_source = xasprintf("%s (auths)", path);
                return 1;
        }
        return 0;
}

int cm_registry_credentials_from(const char *host, char **user, char **pass, char **ret_source, cm_err *err) {
        cleanup_free char *path = NULL;
        int r;
        *user = *pass = NULL;
        if ((r = from_env(host, user, pass, err)) != 0) {
                if (r > 0 && ret_source)
                        *ret_source = xstrdup("CONTAINER_MCP_REGISTRY_AUTH");
                return r;
        }
        if (!(path = docker_config_path()))
                return 0;
        return from_docker_config(path, host, user, pass, ret_source, err);
}

int cm_registry_credentials(const char *host, char **user, char **pass) {
        cm_err err = CM_ERR_INIT;
        return cm_registry_credentials_from(host, user, pass, NULL, &err);
}

/* Load the credentials for c->host once. */
static int load_credentials(rg_conn *c, cm_err *err) {
        if (c->user)
                return 1;
        return cm_registry_credentials_from(c->host, &c->user, &c->pass, &c->cred_source, err);
}

int rg_refused(rg_conn *c, cm_err *err) {
        if (c->cred_source)
                return cm_err_set(err, EACCES,
                                  "the registry %s refused the credentials for %s from %s (HTTP 401); correct them "
                                  "there",
                                  c->base, c->host, c->cred_source);
        return cm_err_set(err, EACCES,
                          "the registry %s wants credentials for %s (HTTP 401): set CONTAINER_MCP_REGISTRY_AUTH=%s="
                          "user:password or log in with docker login",
                          c->base, c->name, c->host);
}

/* One auth-param of a challenge: key="quoted \" value" or key=token. */
char *rg_challenge_param(const char *ch, const char *key) {
        size_t k = strlen(key);
        for (const char *p = ch; (p = strcasestr(p, key)); p += k) {
                const char *v;
                char *out, *o;
                if ((p != ch && p[-1] != ' ' && p[-1] != ',') || p[k] != '=')
                        continue;
                v = p + k + 1;
                if (*v != '"')
                        return xstrndup(v, strcspn(v, ", "));
                out = o = xmalloc(strlen(v) + 1);
                for (v++; *v && *v != '"'; v++) {
                        if (*v == '\\' && v[1])
                                v++;
                        *o++ = *v;
                }
                *o = 0;
                return out;
        }
        return NULL;
}

/* The realm is where our credentials go: https, or http for a host
 * plain http is allowed for. */
static bool realm_ok(const char *realm) {
        if (strncmp(realm, "https://", 8) == 0)
                return true;
        if (strncmp(realm, "http://", 7) == 0) {
                cleanup_free char *domain = rg_url_host(realm);
                return *domain && rg_insecure(domain);
        }
        return false;
}

static int get_token(rg_conn *c, const char *challenge, cm_err *err) {
        cleanup_free char *realm = rg_challenge_param(challenge, "realm"),
                          *service = rg_challenge_param(challenge, "service"),
                          *scope = rg_challenge_param(challenge, "scope"), *url = NULL, *esc_service = NULL,
                          *esc_scope = NULL;
        cleanup_json json_t *j = NULL;
        rg_resp resp = {0};
        rg_conn tc = {0};
        const char *token;
        int have;

        if (!realm || !realm_ok(realm))
                return cm_err_set(err, EPROTO,
                                  "the registry %s asked for a token from \"%.200s\", which is not an https URL (or "
                                  "http on a loopback or insecure registry); refused",
                                  c->base, realm ? realm : "");
        if ((have = load_credentials(c, err)) < 0)
                return -1;
        if (!scope)
                scope = xasprintf("repository:%s:pull", c->repo);
        esc_scope = dk_escape(scope);
        esc_service = service ? dk_escape(service) : NULL;
        url = xasprintf("%s%sscope=%s%s%s", realm, strchr(realm, '?') ? "&" : "?", esc_scope,
                        esc_service ? "&service=" : "", esc_service ? esc_service : "");
        tc = (rg_conn){.o = c->o,
                       .cancel = c->cancel,
                       .base = realm,
                       .basic = have > 0,
                       .user = c->user,
                       .pass = c->pass,
                       .guard_local = c->guard_local,
                       /* the registry's CAs; its client certificate and
                          an insecure registry's unchecked TLS only on its
                          own host */
                       .ca_blob = c->ca_blob,
                       .ca_len = c->ca_len,
                       .tls_unverified = c->tls_unverified && rg_same_host(realm, c->base)};
        if (c->client_cert && rg_same_host(realm, c->base)) {
                tc.client_cert = c->client_cert;
                tc.client_key = c->client_key;
        }
        if (rg_get_url(&tc, url, "application/json", 1 << 20, &resp, "a token", err) < 0) {
                rg_resp_free(&resp);
                return -1;
        }
        if (resp.status == 401 || resp.status == 403) {
                long st = resp.status;
                rg_resp_free(&resp);
                if (have > 0)
                        return cm_err_set(err, EACCES,
                                          "the token server %s refused the credentials for %s from %s (HTTP %ld); "
                                          "correct them there",
                                          realm, c->host, c->cred_source, st);
                return rg_refused(c, err);
        }
        if (resp.status != 200) {
                long st = resp.status;
                rg_resp_free(&resp);
                return cm_err_set(err, EIO, "the token server %s answered HTTP %ld", realm, st);
        }
        j = json_loadb(resp.body ? resp.body : "", resp.len, 0, NULL);
        rg_resp_free(&resp);
        token = cm_json_str(j, "token");
        if (!token || !*token)
                token = cm_json_str(j, "access_token");
        if (!token || !*token || strpbrk(token, "\r\n"))
                return cm_err_set(err, EPROTO, "the token server %s gave no token (JSON with token or access_token)",
                                  realm);
        free(c->bearer);
        c->bearer = xasprintf("Authorization: Bearer %s", token);
        return 0;
}

int rg_authenticate(rg_conn *c, const char *challenge, cm_err *err) {
        int have;
        if (!challenge)
                return rg_refused(c, err);
        if (strncasecmp(challenge, "Bearer ", 7) == 0)
                return get_token(c, challenge + 7, err);
        if (strncasecmp(challenge, "Basic", 5) == 0) {
                if ((have = load_credentials(c, err)) < 0)
                        return -1;
                if (have == 0)
                        return rg_refused(c, err);
                c->basic = true;
                return 0;
        }
        return cm_err_set(err, EPROTO, "the registry %s asks for authentication this client does not speak: %.100s",
                          c->base, challenge);
}
