/* Manifests and indexes (Docker schema 2 and OCI): outside bytes, so every
 * field is checked for type and range before use, and the parser is fuzzed
 * (tests/fuzz/fuzz_manifest.c). */
#include "image/registry_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#include "util/cleanup.h"
#include "util/json.h"

static char *opt_str(const json_t *o, const char *key) {
        const char *s = cm_json_str(o, key);
        return s ? xstrndup(s, 256) : NULL;
}

static int parse_desc(const json_t *j, rg_desc *d, const char *what, cm_err *err) {
        const char *digest = cm_json_str(j, "digest");
        json_t *size = json_object_get(j, "size"), *plat = json_object_get(j, "platform");
        if (!json_is_object(j))
                return cm_err_set(err, EPROTO, "the manifest's %s is not an object", what);
        if (!cm_image_digest_ok(digest))
                return cm_err_set(err, EPROTO, "the manifest's %s has no sha256 digest (\"%.80s\")", what,
                                  digest ? digest : "");
        if (!json_is_integer(size) || json_integer_value(size) < 0)
                return cm_err_set(err, EPROTO, "the manifest's %s %s has no size", what, digest);
        (void)snprintf(d->digest, sizeof d->digest, "%s", digest);
        d->size = json_integer_value(size);
        d->media_type = opt_str(j, "mediaType");
        if (json_is_object(plat)) {
                d->os = opt_str(plat, "os");
                d->arch = opt_str(plat, "architecture");
                d->variant = opt_str(plat, "variant");
        }
        return 0;
}

static void desc_free(rg_desc *d) { free(d->media_type), free(d->os), free(d->arch), free(d->variant); }

void rg_manifest_free(rg_manifest *m) {
        desc_free(&m->config);
        for (size_t i = 0; i < m->n; i++)
                desc_free(&m->items[i]);
        free(m->items), free(m->media_type);
        memset(m, 0, sizeof *m);
}

static bool is_index_type(const char *mt) {
        return strcmp(mt, RG_MT_DOCKER_LIST) == 0 || strcmp(mt, RG_MT_OCI_INDEX) == 0;
}
static bool is_image_type(const char *mt) {
        return strcmp(mt, RG_MT_DOCKER_MANIFEST) == 0 || strcmp(mt, RG_MT_OCI_MANIFEST) == 0;
}

/* The media type: the document's own, else the Content-Type (OCI lets a
 * manifest leave it out), else what its members say it is. */
static char *media_type_of(const json_t *j, const char *content_type) {
        const char *mt = cm_json_str(j, "mediaType");
        if (mt)
                return xstrdup(mt);
        if (content_type && *content_type) {
                size_t n = strcspn(content_type, "; ");
                cleanup_free char *ct = xstrndup(content_type, n);
                if (is_index_type(ct) || is_image_type(ct))
                        return steal_pointer(&ct);
        }
        if (json_object_get(j, "manifests"))
                return xstrdup(RG_MT_OCI_INDEX);
        return xstrdup(RG_MT_OCI_MANIFEST);
}

int rg_manifest_parse(const char *body, size_t len, const char *content_type, rg_manifest *ret, cm_err *err) {
        json_error_t je;
        cleanup_json json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
        rg_manifest m = {0};
        json_t *list, *sv;

        memset(ret, 0, sizeof *ret);
        if (!json_is_object(j))
                return cm_err_set(err, EPROTO, "the manifest is not a JSON object (%s at byte %d)",
                                  j ? "another value" : je.text, j ? 0 : je.position);
        sv = json_object_get(j, "schemaVersion");
        if (json_is_integer(sv) && json_integer_value(sv) == 1)
                return cm_err_set(err, EPROTO,
                                  "the image uses Docker's schema 1 manifest, retired in 2019; "
                                  "push it again with a current tool (docker push, skopeo copy)");
        if (!json_is_integer(sv) || json_integer_value(sv) != 2)
                return cm_err_set(err, EPROTO, "the manifest's schemaVersion is not 2");
        m.media_type = media_type_of(j, content_type);
        m.is_index = is_index_type(m.media_type);
        if (!m.is_index && !is_image_type(m.media_type)) {
                cm_err_set(err, EPROTO,
                           "the manifest's media type %.100s is not one this client reads (%s, %s, %s, %s)",
                           m.media_type, RG_MT_OCI_MANIFEST, RG_MT_OCI_INDEX, RG_MT_DOCKER_MANIFEST, RG_MT_DOCKER_LIST);
                rg_manifest_free(&m);
                return -EPROTO;
        }
        list = json_object_get(j, m.is_index ? "manifests" : "layers");
        if (!json_is_array(list) || json_array_size(list) > 4096) {
                rg_manifest_free(&m);
                return cm_err_set(err, EPROTO, "the manifest's %s is not a list (of at most 4096)",
                                  m.is_index ? "manifests" : "layers");
        }
        if (!m.is_index && parse_desc(json_object_get(j, "config"), &m.config, "config", err) < 0) {
                rg_manifest_free(&m);
                return -EPROTO;
        }
        m.items = xcalloc(json_array_size(list) + 1, sizeof *m.items);
        for (size_t i = 0; i < json_array_size(list); i++, m.n++)
                if (parse_desc(json_array_get(list, i), &m.items[i], m.is_index ? "manifest entry" : "layer", err) <
                    0) {
                        m.n++;
                        rg_manifest_free(&m);
                        return -EPROTO;
                }
        *ret = m;
        return 0;
}

void rg_host_platform(char *ret, size_t n) {
        struct utsname u;
        const char *arch = "amd64", *variant = NULL;
        if (uname(&u) == 0) {
                if (strcmp(u.machine, "aarch64") == 0 || strcmp(u.machine, "arm64") == 0)
                        arch = "arm64", variant = "v8";
                else if (strncmp(u.machine, "armv7", 5) == 0)
                        arch = "arm", variant = "v7";
                else if (strncmp(u.machine, "armv6", 5) == 0)
                        arch = "arm", variant = "v6";
                else if (strcmp(u.machine, "i686") == 0 || strcmp(u.machine, "i386") == 0)
                        arch = "386";
                else if (strcmp(u.machine, "x86_64") != 0)
                        arch = u.machine; /* ppc64le, s390x, riscv64, mips64le: the same names */
        }
        (void)snprintf(ret, n, "linux/%s%s%s", arch, variant ? "/" : "", variant ? variant : "");
}

/* arm64's variant is v8 whether the entry says so or not. */
static bool variant_matches(const rg_desc *d, const char *arch, const char *want) {
        const char *have = d->variant ? d->variant : "";
        if (!want || !*want)
                return true;
        if (strcmp(arch, "arm64") == 0 && strcmp(want, "v8") == 0 && !*have)
                return true;
        return strcmp(have, want) == 0;
}

int rg_pick_platform(const rg_manifest *idx, const char *platform, size_t *ret_i, cm_err *err) {
        char host[96], have[1024] = "";
        const char *want = platform && *platform ? platform : (rg_host_platform(host, sizeof host), host);
        cleanup_free char *copy = xstrdup(want);
        char *os = copy, *arch = strchr(copy, '/'), *variant = NULL;
        size_t used = 0;

        if (!arch || !arch[1] || arch == os)
                return cm_err_set(err, EINVAL, "platform \"%.100s\": expected os/arch[/variant], like linux/arm64/v8",
                                  want);
        *arch++ = 0;
        if ((variant = strchr(arch, '/')))
                *variant++ = 0;
        for (size_t i = 0; i < idx->n; i++) {
                const rg_desc *d = &idx->items[i];
                if (d->os && d->arch && strcmp(d->os, os) == 0 && strcmp(d->arch, arch) == 0 &&
                    variant_matches(d, arch, variant)) {
                        *ret_i = i;
                        return 0;
                }
        }
        for (size_t i = 0; i < idx->n && used < sizeof have - 1; i++) {
                const rg_desc *d = &idx->items[i];
                int w = snprintf(have + used, sizeof have - used, "%s%s/%s%s%s", used ? ", " : "", d->os ? d->os : "?",
                                 d->arch ? d->arch : "?", d->variant ? "/" : "", d->variant ? d->variant : "");
                if (w < 0)
                        break;
                used += (size_t)w;
        }
        return cm_err_set(err, ENOENT, "the image has no %s variant; it has %s; ask for one of those with platform",
                          want, used ? have : "none");
}
