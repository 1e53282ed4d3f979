/* The JSON of images.  See manifest.h. */
#include "image/manifest.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "util/cleanup.h"
#include "util/json.h"

#define MAX_STRV 4096 /* entries of Env, Cmd, RepoTags... */

bool img_digest_valid(const char *d) {
        if (!d || strncmp(d, "sha256:", 7) != 0 || strlen(d) != 7 + 64)
                return false;
        for (const char *p = d + 7; *p; p++)
                if (!isdigit((unsigned char)*p) && !(*p >= 'a' && *p <= 'f'))
                        return false;
        return true;
}

bool img_media_is_index(const char *mt) {
        return mt && (strcmp(mt, "application/vnd.oci.image.index.v1+json") == 0 ||
                      strcmp(mt, "application/vnd.docker.distribution.manifest.list.v2+json") == 0);
}

bool img_media_is_manifest(const char *mt) {
        return mt && (strcmp(mt, "application/vnd.oci.image.manifest.v1+json") == 0 ||
                      strcmp(mt, "application/vnd.docker.distribution.manifest.v2+json") == 0);
}

int img_media_layer(const char *mt) {
        static const char *const ok[] = {
                "application/vnd.oci.image.layer.v1.tar",
                "application/vnd.oci.image.layer.v1.tar+gzip",
                "application/vnd.oci.image.layer.v1.tar+zstd",
                "application/vnd.oci.image.layer.nondistributable.v1.tar",
                "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
                "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
                "application/vnd.docker.image.rootfs.diff.tar",
                "application/vnd.docker.image.rootfs.diff.tar.gzip",
                "application/vnd.docker.image.rootfs.diff.tar.zstd",
                "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
        };
        for (size_t i = 0; mt && i < ARRAY_SIZE(ok); i++)
                if (strcmp(mt, ok[i]) == 0)
                        return 0;
        return -1;
}

void img_desc_clear(img_desc *d) {
        free(d->media_type);
        free(d->digest);
        free(d->ref_name);
        free(d->os);
        free(d->arch);
        free(d->variant);
        *d = (img_desc){0};
}

void img_descs_free(img_desc *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                img_desc_clear(&v[i]);
        free(v);
}

void img_manifest_clear(img_manifest *m) {
        img_desc_clear(&m->config);
        img_descs_free(m->layers, m->n_layers);
        *m = (img_manifest){0};
}

static void strv_free(char **v) {
        for (char **p = v; p && *p; p++)
                free(*p);
        free(v);
}

void img_config_clear(img_config *c) {
        strv_free(c->env);
        strv_free(c->entrypoint);
        strv_free(c->cmd);
        free(c->workdir);
        free(c->user);
        strv_free(c->exposed);
        *c = (img_config){0};
}

void img_config_doc_clear(img_config_doc *c) {
        strv_free(c->diff_ids);
        img_config_clear(&c->run);
        *c = (img_config_doc){0};
}

void img_docker_entries_free(img_docker_entry *v, size_t n) {
        for (size_t i = 0; v && i < n; i++) {
                free(v[i].config);
                strv_free(v[i].tags);
                strv_free(v[i].layers);
        }
        free(v);
}

static json_t *load(const char *buf, size_t len, const char *what, cm_err *err) {
        json_error_t je;
        json_t *j;
        if (len > IMG_MAX_JSON) {
                (void)cm_err_set(err, EFBIG, "%s: %zu bytes, more than the %zu a %s may have", what, len, IMG_MAX_JSON,
                                 what);
                return NULL;
        }
        j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
        if (!j)
                (void)cm_err_set(err, EINVAL, "%s: not valid JSON (line %d: %s)", what, je.line, je.text);
        return j;
}

/* An array of strings (or null / absent: *ret NULL).  -1: not one. */
static int strv_of(const json_t *v, char ***ret) {
        size_t i;
        json_t *x;
        *ret = NULL;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_array(v) || json_array_size(v) > MAX_STRV)
                return -1;
        *ret = xcalloc(json_array_size(v) + 1, sizeof **ret);
        json_array_foreach(v, i, x) {
                if (!json_is_string(x)) {
                        strv_free(*ret);
                        *ret = NULL;
                        return -1;
                }
                (*ret)[i] = xstrdup(json_string_value(x));
        }
        return 0;
}

static char *str_dup_or_null(const json_t *obj, const char *key) {
        const char *s = cm_json_str(obj, key);
        return s ? xstrdup(s) : NULL;
}

static int parse_desc(const json_t *j, img_desc *ret, const char *what, cm_err *err) {
        const json_t *size = json_object_get(j, "size"), *plat = json_object_get(j, "platform");
        const char *digest = cm_json_str(j, "digest");

        *ret = (img_desc){0};
        if (!json_is_object(j))
                return cm_err_set(err, EINVAL, "%s: a descriptor must be an object", what);
        if (!img_digest_valid(digest))
                return cm_err_set(err, EINVAL, "%s: digest \"%s\" is not sha256:<64 lower-case hex digits>", what,
                                  digest ? digest : "(missing)");
        if (!json_is_integer(size) || json_integer_value(size) < 0)
                return cm_err_set(err, EINVAL, "%s: size missing or negative", what);
        ret->digest = xstrdup(digest);
        ret->size = json_integer_value(size);
        ret->media_type = str_dup_or_null(j, "mediaType");
        ret->ref_name = str_dup_or_null(json_object_get(j, "annotations"), "org.opencontainers.image.ref.name");
        if (json_is_object(plat)) {
                ret->os = str_dup_or_null(plat, "os");
                ret->arch = str_dup_or_null(plat, "architecture");
                ret->variant = str_dup_or_null(plat, "variant");
        }
        return 0;
}

int img_parse_index(const char *buf, size_t len, img_desc **ret, size_t *ret_n, cm_err *err) {
        cleanup_json json_t *j = load(buf, len, "image index", err);
        const json_t *m;
        img_desc *v;
        size_t i, n;

        if (!j)
                return -1;
        m = json_object_get(j, "manifests");
        if (!json_is_array(m) || json_array_size(m) == 0 || json_array_size(m) > 1024)
                return cm_err_set(err, EINVAL, "image index: \"manifests\" must be an array of 1-1024 descriptors");
        n = json_array_size(m);
        v = xcalloc(n, sizeof *v);
        for (i = 0; i < n; i++)
                if (parse_desc(json_array_get(m, i), &v[i], "image index", err) < 0) {
                        img_descs_free(v, n);
                        return -1;
                }
        *ret = v;
        *ret_n = n;
        return 0;
}

int img_parse_manifest(const char *buf, size_t len, img_manifest *ret, cm_err *err) {
        cleanup_json json_t *j = load(buf, len, "image manifest", err);
        const json_t *layers;
        const char *mt;
        img_manifest m = {0};

        *ret = (img_manifest){0};
        if (!j)
                return -1;
        mt = cm_json_str(j, "mediaType");
        if (img_media_is_index(mt) || json_object_get(j, "manifests"))
                return cm_err_set(err, EMEDIUMTYPE, "image manifest: this is an index of manifests, not one");
        if (mt && !img_media_is_manifest(mt))
                return cm_err_set(err, EMEDIUMTYPE, "image manifest: media type \"%s\" is not one this store reads",
                                  mt);
        if (json_integer_value(json_object_get(j, "schemaVersion")) != 2)
                return cm_err_set(err, EINVAL, "image manifest: schemaVersion must be 2 (schema 1 is not supported)");
        layers = json_object_get(j, "layers");
        if (!json_is_array(layers) || json_array_size(layers) > IMG_MAX_LAYERS)
                return cm_err_set(err, EINVAL, "image manifest: \"layers\" must be an array of at most %d",
                                  IMG_MAX_LAYERS);
        if (parse_desc(json_object_get(j, "config"), &m.config, "image manifest config", err) < 0)
                return -1;
        m.n_layers = json_array_size(layers);
        m.layers = xcalloc(m.n_layers + 1, sizeof *m.layers);
        for (size_t i = 0; i < m.n_layers; i++) {
                if (parse_desc(json_array_get(layers, i), &m.layers[i], "image manifest layer", err) < 0) {
                        img_manifest_clear(&m);
                        return -1;
                }
                if (m.layers[i].media_type && img_media_layer(m.layers[i].media_type) < 0) {
                        (void)cm_err_set(err, EMEDIUMTYPE, "image manifest: layer media type \"%s\" is not supported",
                                         m.layers[i].media_type);
                        img_manifest_clear(&m);
                        return -1;
                }
        }
        *ret = m;
        return 0;
}

static int64_t parse_time(const char *s) {
        struct tm tm = {0};
        const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
        return end ? (int64_t)timegm(&tm) : 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* ExposedPorts' keys that are a port and a protocol ("8080/tcp", "53/udp";
 * a bare port is tcp), at most 64, sorted; anything else is left out:
 * the config is the image's, the list is only shown. */
static char **exposed_ports(const json_t *o) {
        char **v = NULL;
        size_t n = 0;
        const char *k;
        json_t *x;

        if (!json_is_object(o))
                return NULL;
        json_object_foreach((json_t *)o, k, x) {
                char *end, proto[4] = "tcp";
                unsigned long port = strtoul(k, &end, 10);
                (void)x;
                if (end == k || k[0] == '0' || port > 65535 || n >= 64)
                        continue;
                if (*end == '/' &&
                    (strcmp(end + 1, "tcp") == 0 || strcmp(end + 1, "udp") == 0 || strcmp(end + 1, "sctp") == 0))
                        (void)snprintf(proto, sizeof proto, "%s", end + 1);
                else if (*end)
                        continue;
                v = xrealloc(v, (n + 2) * sizeof *v);
                v[n++] = xasprintf("%lu/%s", port, proto);
                v[n] = NULL;
        }
        if (v)
                qsort(v, n, sizeof *v, cmp_str);
        return v;
}

int img_parse_config(const char *buf, size_t len, img_config_doc *ret, cm_err *err) {
        cleanup_json json_t *j = load(buf, len, "image config", err);
        const json_t *rootfs, *cfg;
        img_config_doc c = {0};

        *ret = (img_config_doc){0};
        if (!j)
                return -1;
        if (!json_is_object(j))
                return cm_err_set(err, EINVAL, "image config: must be an object");
        rootfs = json_object_get(j, "rootfs");
        if (strv_of(json_object_get(rootfs, "diff_ids"), &c.diff_ids) < 0 || !c.diff_ids)
                return cm_err_set(err, EINVAL, "image config: rootfs.diff_ids must be an array of digests");
        for (char **p = c.diff_ids; *p; p++, c.n_diff_ids++) {
                if (!img_digest_valid(*p) || c.n_diff_ids >= IMG_MAX_LAYERS) {
                        (void)cm_err_set(err, EINVAL, "image config: diff_id \"%s\" is not sha256:<64 hex digits>", *p);
                        img_config_doc_clear(&c);
                        return -1;
                }
                memmove(*p, *p + 7, 65); /* keep the hex */
        }
        c.created = parse_time(cm_json_str(j, "created"));
        cfg = json_object_get(j, "config");
        if (cfg && !json_is_null(cfg)) {
                if (!json_is_object(cfg) || strv_of(json_object_get(cfg, "Env"), &c.run.env) < 0 ||
                    strv_of(json_object_get(cfg, "Entrypoint"), &c.run.entrypoint) < 0 ||
                    strv_of(json_object_get(cfg, "Cmd"), &c.run.cmd) < 0) {
                        img_config_doc_clear(&c);
                        return cm_err_set(err, EINVAL,
                                          "image config: config.Env, Entrypoint and Cmd must be arrays of strings");
                }
                c.run.workdir = str_dup_or_null(cfg, "WorkingDir");
                c.run.user = str_dup_or_null(cfg, "User");
                c.run.exposed = exposed_ports(json_object_get(cfg, "ExposedPorts"));
        }
        *ret = c;
        return 0;
}

int img_parse_docker_manifest(const char *buf, size_t len, img_docker_entry **ret, size_t *ret_n, cm_err *err) {
        cleanup_json json_t *j = load(buf, len, "manifest.json", err);
        img_docker_entry *v;
        size_t i, n;
        json_t *x;

        if (!j)
                return -1;
        if (!json_is_array(j) || json_array_size(j) == 0 || json_array_size(j) > 1024)
                return cm_err_set(err, EINVAL, "manifest.json: must be an array of 1-1024 images");
        n = json_array_size(j);
        v = xcalloc(n, sizeof *v);
        json_array_foreach(j, i, x) {
                const char *config = cm_json_str(x, "Config");
                if (!config || strv_of(json_object_get(x, "RepoTags"), &v[i].tags) < 0 ||
                    strv_of(json_object_get(x, "Layers"), &v[i].layers) < 0 || !v[i].layers) {
                        img_docker_entries_free(v, n);
                        return cm_err_set(err, EINVAL,
                                          "manifest.json: image %zu needs \"Config\" (a path) and \"Layers\" (paths)",
                                          i);
                }
                v[i].config = xstrdup(config);
                while (v[i].layers[v[i].n_layers])
                        v[i].n_layers++;
                if (v[i].n_layers > IMG_MAX_LAYERS) {
                        img_docker_entries_free(v, n);
                        return cm_err_set(err, EINVAL, "manifest.json: more than %d layers", IMG_MAX_LAYERS);
                }
        }
        *ret = v;
        *ret_n = n;
        return 0;
}
