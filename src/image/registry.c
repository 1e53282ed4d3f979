/* cm_registry_fetch: one image, one platform, from a registry (or a mirror
 * of Docker Hub) into an OCI image layout.  The order is the safety:
 *   1. the manifest (by tag or digest), its digest checked;
 *   2. an index resolved to one platform, that manifest checked the same way;
 *   3. sizes against CONTAINER_MCP_IMAGE_MAX_SIZE before a byte of a layer;
 *   4. config and layers, each verified before it gets its name;
 *   5. the manifest blob, then index.json last: a layout with index.json is
 *      whole. */
#include "image/registry_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "policy/config.h" /* cm_mkdir_p */
#include "util/cleanup.h"
#include "util/netaddr.h"
#include "util/json.h"
#include "util/lazy.h"
#include "util/sha256.h"

#define HUB "docker.io"
#define HUB_API "https://registry-1.docker.io"
#define DEFAULT_MAX_SIZE (8ll << 30)

static const char accept_all[] =
        RG_MT_OCI_INDEX ", " RG_MT_DOCKER_LIST ", " RG_MT_OCI_MANIFEST ", " RG_MT_DOCKER_MANIFEST;

static void digest_of(const char *data, size_t len, char ret[72]) {
        uint8_t md[CM_SHA256_LEN];
        char hex[2 * CM_SHA256_LEN + 1];
        cm_sha256(data, len, md);
        cm_hex(md, sizeof md, hex);
        (void)snprintf(ret, 72, "sha256:%s", hex);
}

/* GET a manifest; its bytes must hash to `want` when we know the digest we
 * asked for, and to the Docker-Content-Digest header when there is one. */
static int get_manifest(rg_conn *c, const char *reference, const char *want, int64_t want_size, rg_resp *ret,
                        char digest[72], cm_err *err) {
        cleanup_free char *path = xasprintf("/manifests/%s", reference);
        if (rg_get(c, path, accept_all, RG_MANIFEST_CAP, ret, err) < 0)
                return -1;
        if (ret->status == 404)
                return cm_err_set(err, ENOENT, "the registry %s has no manifest %s for %s; check the name and tag",
                                  c->base, reference, c->repo);
        if (ret->status == 400 && strncmp(c->base, "http://", 7) == 0 && ret->body && strstr(ret->body, "HTTPS server"))
                return cm_err_set(err, EPROTO,
                                  "the registry %s speaks TLS, and https failed (%s): put its CA certificate in "
                                  "/etc/containers/certs.d/%s/ca.crt (or a directory CONTAINER_MCP_REGISTRY_CERTS_D "
                                  "names), and NAME.cert with NAME.key there if it asks for a client certificate; "
                                  "with that entry it is asked over https",
                                  c->base, c->probe_err[0] ? c->probe_err : "not tried", c->base + 7);
        if (ret->status != 200)
                return cm_err_set(err, EIO, "the registry %s answered HTTP %ld for the manifest of %s: %.200s", c->base,
                                  ret->status, c->name, ret->body ? ret->body : "");
        digest_of(ret->body ? ret->body : "", ret->len, digest);
        if (want && strcmp(digest, want) != 0)
                return cm_err_set(err, EPROTO,
                                  "the manifest the registry %s sent for %s hashes to %s, not %s; refused (a corrupt "
                                  "or tampered registry)",
                                  c->base, c->name, digest, want);
        if (want_size >= 0 && (int64_t)ret->len != want_size)
                return cm_err_set(err, EPROTO, "the manifest %s from %s is %zu bytes, its index says %lld; refused",
                                  digest, c->base, ret->len, (long long)want_size);
        if (ret->digest_header && cm_image_digest_ok(ret->digest_header) && strcmp(ret->digest_header, digest) != 0)
                return cm_err_set(err, EPROTO,
                                  "the manifest the registry %s sent for %s hashes to %s, but the registry says %s; "
                                  "refused (a corrupt or tampered registry)",
                                  c->base, c->name, digest, ret->digest_header);
        return 0;
}

/* Sizes against the cap before any layer is fetched. */
static int check_sizes(const rg_conn *c, const rg_manifest *m, int64_t cap, cm_err *err) {
        char capstr[32];
        int64_t total = m->config.size;
        cm_format_size(cap, capstr);
        if (m->config.size > RG_CONFIG_CAP)
                return cm_err_set(err, EFBIG, "the config of %s is %lld bytes; refused (at most 16 MiB)", c->name,
                                  (long long)m->config.size);
        for (size_t i = 0; i < m->n; i++) {
                if (m->items[i].size > cap)
                        return cm_err_set(err, EFBIG,
                                          "layer %s of %s is %lld bytes, over the %s per layer and per image "
                                          "(CONTAINER_MCP_IMAGE_MAX_SIZE); raise it to pull this image",
                                          m->items[i].digest, c->name, (long long)m->items[i].size, capstr);
                total += m->items[i].size;
                if (total > cap)
                        return cm_err_set(err, EFBIG,
                                          "the layers of %s add up to more than %s "
                                          "(CONTAINER_MCP_IMAGE_MAX_SIZE); raise it to pull this image",
                                          c->name, capstr);
        }
        return 0;
}

static int write_layout(int dir_fd, const cm_image_ref *ref, const char *media_type, const char *digest, size_t size,
                        cm_err *err) {
        cleanup_free char *name = cm_image_ref_format(ref), *index = NULL;
        cleanup_json json_t *j =
                json_pack("{s:i, s:s, s:[{s:s, s:s, s:I, s:{s:s}}]}", "schemaVersion", 2, "mediaType", RG_MT_OCI_INDEX,
                          "manifests", "mediaType", media_type, "digest", digest, "size", (json_int_t)size,
                          "annotations", "org.opencontainers.image.ref.name", name);
        static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
        if (!j)
                return cm_err_set(err, EINVAL, "cannot describe %s in index.json", name);
        index = cm_json_dump(j);
        if (rg_file_write(dir_fd, "oci-layout", layout, sizeof layout - 1, err) < 0 ||
            rg_file_write(dir_fd, "index.json", index, strlen(index), err) < 0)
                return -1;
        return 0;
}

/* The manifest's bytes, verified already, unless the layout has them. */
static int write_manifest(int blobs_fd, const char *digest, const rg_resp *resp, cm_err *err) {
        rg_desc d = {.size = (int64_t)resp->len};
        (void)snprintf(d.digest, sizeof d.digest, "%s", digest);
        if (rg_blob_verified(blobs_fd, &d))
                return 0;
        return rg_blob_write(blobs_fd, digest, resp->body, resp->len, err);
}

/* Steps 1 to 5 against one endpoint. */
static int fetch_from(rg_conn *c, const cm_image_ref *ref, const cm_registry_opts *o, int dir_fd, int blobs_fd,
                      const cm_image_progress *progress, char **ret_digest, cm_err *err) {
        rg_resp resp = {0};
        rg_manifest m = {0}, img = {0};
        char digest[72];
        const rg_desc **descs = NULL;
        int r = -1;

        if (get_manifest(c, cm_image_ref_reference(ref), ref->digest, -1, &resp, digest, err) < 0 ||
            rg_manifest_parse(resp.body, resp.len, resp.content_type, &m, err) < 0)
                goto out;
        if (m.is_index) {
                size_t i;
                rg_desc d;
                if (rg_pick_platform(&m, o ? o->platform : NULL, &i, err) < 0) {
                        cm_err_prefix(err, "%s", c->name);
                        goto out;
                }
                d = m.items[i];
                if (get_manifest(c, d.digest, d.digest, d.size, &resp, digest, err) < 0 ||
                    rg_manifest_parse(resp.body, resp.len, resp.content_type, &img, err) < 0)
                        goto out;
                if (img.is_index) {
                        cm_err_set(err, EPROTO, "the index of %s names another index for its platform; refused",
                                   c->name);
                        goto out;
                }
        } else {
                img = m;
                memset(&m, 0, sizeof m);
        }
        if (check_sizes(c, &img, o && o->max_size > 0 ? o->max_size : DEFAULT_MAX_SIZE, err) < 0)
                goto out;
        descs = xcalloc(img.n + 1, sizeof *descs);
        descs[0] = &img.config;
        for (size_t i = 0; i < img.n; i++)
                descs[i + 1] = &img.items[i];
        if (rg_fetch_blobs(c, blobs_fd, descs, img.n + 1, progress, err) < 0 ||
            write_manifest(blobs_fd, digest, &resp, err) < 0 ||
            write_layout(dir_fd, ref, img.media_type, digest, resp.len, err) < 0)
                goto out;
        if (ret_digest)
                *ret_digest = xstrdup(digest);
        r = 0;
out:
        free(descs);
        rg_manifest_free(&m);
        rg_manifest_free(&img);
        rg_resp_free(&resp);
        return r;
}

/* Where to ask: Docker Hub's mirrors first, then the registry itself. */
static char **endpoints(const cm_image_ref *ref) {
        const char *mirrors = getenv("CONTAINER_MCP_REGISTRY_MIRRORS");
        char **v = xcalloc(1, sizeof *v);
        size_t n = 0;
        if (strcmp(ref->domain, HUB) == 0) {
                for (const char *p = mirrors; p && *p;) {
                        size_t k = strcspn(p, ",");
                        while (k && p[k - 1] == '/')
                                k--;
                        if (k) {
                                v = xrealloc(v, (n + 2) * sizeof *v);
                                v[n++] = xstrndup(p, k);
                        }
                        p += strcspn(p, ",");
                        p += *p == ',';
                }
                v = xrealloc(v, (n + 2) * sizeof *v);
                v[n++] = xstrdup(HUB_API);
        } else {
                v = xrealloc(v, 2 * sizeof *v);
                v[n++] = xasprintf("https://%s", ref->domain); /* or http: rg_choose_scheme */
        }
        v[n] = NULL;
        return v;
}

static void strv_free(char **v) {
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

static int open_layout(const char *layout_dir, int *ret_dir, int *ret_blobs, cm_err *err) {
        cleanup_free char *blobs = xasprintf("%s/blobs/sha256", layout_dir);
        cm_mkdir_p(blobs, 0755);
        *ret_dir = open(layout_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (*ret_dir < 0)
                return cm_err_sys(err, errno, "cannot open the image layout %s", layout_dir);
        *ret_blobs = openat(*ret_dir, "blobs/sha256", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (*ret_blobs < 0)
                return cm_err_sys(err, errno, "cannot make %s/blobs/sha256", layout_dir);
        return 0;
}

/* os/arch[/variant], each a short run of [a-z0-9_-]. */
static bool platform_ok(const char *p) {
        size_t parts = 1, len = 0;
        for (const char *c = p; *c; c++, len++) {
                if (*c == '/') {
                        if (len == 0 || c[1] == 0)
                                return false;
                        parts++, len = (size_t)-1;
                } else if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' ||
                             (*c == '-' && len > 0))) {
                        return false;
                }
                if (len != (size_t)-1 && len > 32)
                        return false;
        }
        return *p && (parts == 2 || parts == 3);
}

int cm_registry_fetch(const cm_image_ref *ref, const cm_registry_opts *o, const char *layout_dir,
                      const cm_image_progress *progress, const cm_cancel *cancel, char **ret_digest, cm_err *err) {
        cleanup_close int dir_fd = -1, blobs_fd = -1;
        cleanup_free char *name = cm_image_ref_format(ref);
        char **eps;
        int r = -1;

        if (o && o->platform && !platform_ok(o->platform))
                return cm_err_set(err, EINVAL,
                                  "platform \"%.100s\": expected os/arch[/variant] in lower case, like "
                                  "linux/amd64 or linux/arm64/v8",
                                  o->platform);
        if (cm_curl_load(err) < 0 || open_layout(layout_dir, &dir_fd, &blobs_fd, err) < 0)
                return -1;
        eps = endpoints(ref);
        for (size_t i = 0; eps[i]; i++)
                if (strncmp(eps[i], "https://", 8) != 0 && strncmp(eps[i], "http://", 7) != 0) {
                        cm_err_set(err, EINVAL,
                                   "CONTAINER_MCP_REGISTRY_MIRRORS: \"%.200s\" is not an http:// or https:// URL",
                                   eps[i]);
                        strv_free(eps);
                        return -1;
                }
        for (size_t i = 0; eps[i]; i++) {
                bool mirror = eps[i + 1] != NULL;
                rg_conn c = {.o = o,
                             .cancel = cancel,
                             .base = xstrdup(eps[i]),
                             .repo = xstrdup(ref->path),
                             .name = xstrdup(name)};
                c.host = strcmp(ref->domain, HUB) == 0 && !mirror ? xstrdup(HUB)
                         : mirror                                 ? rg_url_host(eps[i]) /* for its credentials */
                                                                  : xstrdup(ref->domain);
                /* a mirror is the operator's own setting: not guarded */
                c.guard_local = o && o->local_ok && !mirror && !cm_host_listed(o->local_ok, c.host) &&
                                !cm_host_listed(o->local_ok, strstr(eps[i], "://") + 3);
                r = rg_certs_load(&c, err);
                if (r == 0 && !mirror && strcmp(ref->domain, HUB) != 0 && rg_insecure(ref->domain))
                        r = rg_choose_scheme(&c, ref->domain, err);
                if (r == 0)
                        r = fetch_from(&c, ref, o, dir_fd, blobs_fd, progress, ret_digest, err);
                rg_conn_free(&c);
                /* A mirror that lacks the image or is down: the next, then Hub.
                 * A digest that lies is not a reason to ask elsewhere quietly:
                 * it is reported. */
                if (r == 0 || !mirror || err->code == EPROTO || err->code == ECANCELED || err->code == EFBIG)
                        break;
        }
        strv_free(eps);
        return r;
}
