/* Inside the registry client: the parts registry.c, registry_http.c,
 * registry_auth.c, registry_manifest.c and registry_blob.c share. */
#ifndef CM_IMAGE_REGISTRY_INT_H
#define CM_IMAGE_REGISTRY_INT_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "image/registry.h"

#define RG_MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define RG_MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define RG_MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define RG_MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define RG_MANIFEST_CAP (4u << 20) /* a manifest or index larger than this is refused */
#define RG_CONFIG_CAP (16 << 20)

/* A descriptor: what a manifest says of a blob or of another manifest. */
typedef struct rg_desc {
        char *media_type;
        char digest[72]; /* "sha256:<64 hex>" */
        int64_t size;
        char *os, *arch, *variant; /* an index entry's platform, or NULL */
} rg_desc;

typedef struct rg_manifest {
        bool is_index;
        char *media_type;
        rg_desc config; /* an image manifest's */
        rg_desc *items; /* its layers, or an index's manifests */
        size_t n;
} rg_manifest;

/* registry_manifest.c: parse outside bytes (fuzzed). */
int rg_manifest_parse(const char *body, size_t len, const char *content_type, rg_manifest *ret, cm_err *err);
void rg_manifest_free(rg_manifest *m);
/* "os/arch[/variant]" of this host. */
void rg_host_platform(char *ret, size_t n);
/* The index entry for `platform`; err lists the platforms there are. */
int rg_pick_platform(const rg_manifest *idx, const char *platform, size_t *ret_i, cm_err *err);

/* One registry endpoint for one repository. */
typedef struct rg_conn {
        const cm_registry_opts *o;
        const cm_cancel *cancel;
        char *base;   /* "https://host:port" without a trailing slash */
        char *host;   /* "host:port" as credentials are keyed ("docker.io" for Hub and its mirrors) */
        char *repo;   /* "library/alpine" */
        char *name;   /* for messages: the reference */
        char *bearer; /* "Authorization: Bearer …" once a token was obtained */
        bool basic;   /* send user/pass as Basic */
        char *user, *pass, *cred_source;
        char *certs_dir; /* this registry's certs.d entry, or NULL */
        char *ca_blob;   /* the system's CAs and certs.d's *.crt (PEM), or NULL */
        size_t ca_len;
        char *client_cert, *client_key; /* certs.d's first NAME.cert and NAME.key */
        bool guard_local;               /* refuse connections to local addresses (opts' local_ok) */
        bool tls_unverified;            /* an insecure registry over https: no certificate checks for base's host */
        char probe_err[160];            /* why https did not work when http was chosen (rg_choose_scheme) */
        char refused[160];              /* the connection the guard refused, for the message */
} rg_conn;

typedef struct rg_resp {
        long status;
        char *body;
        size_t len;
        char *content_type, *digest_header, *challenge;
} rg_resp;

void rg_resp_free(rg_resp *r);
void rg_conn_free(rg_conn *c);

/* registry_certs.c */
/* The certs.d directory of a registry host[:port], or NULL (owned). */
char *rg_certs_dir(const char *host);
/* Read the certs.d entry of c->base's host into c (nothing when none). */
int rg_certs_load(rg_conn *c, cm_err *err);

/* registry_http.c */
/* The options every request of this client takes: timeouts, redirects
 * only to http(s), the credentials, cancellation. */
void rg_easy_setup(rg_conn *c, CURL *h, const char *url, struct curl_slist **hdrs);
/* GET base/v2/<repo><path> into memory (at most `cap` bytes), answering
 * one authentication challenge on the way. */
int rg_get_url(rg_conn *c, const char *url, const char *accept, size_t cap, rg_resp *ret, const char *what,
               cm_err *err);
int rg_get(rg_conn *c, const char *path, const char *accept, size_t cap, rg_resp *ret, cm_err *err);
/* A curl failure as a sentence about `what`. */
int rg_transport_error(rg_conn *c, CURLcode rc, long os_errno, const char *what, cm_err *err);
/* Insecure registries (loopback and CONTAINER_MCP_INSECURE_REGISTRIES,
 * without a certs.d entry): https without certificate checks, else plain
 * http. */
bool rg_insecure(const char *domain);
/* For such a registry, as Docker and Podman do: ask https://DOMAIN/v2/
 * with tls_unverified; any HTTP answer keeps https, a failure to speak it
 * makes c->base http://DOMAIN (probe_err says why).  -1 only when
 * cancelled. */
int rg_choose_scheme(rg_conn *c, const char *domain, cm_err *err);
/* Whether two URLs name the same scheme-less authority (host:port). */
bool rg_same_host(const char *url_a, const char *url_b);
/* That authority of a URL, "host[:port]" (owned). */
char *rg_url_host(const char *url);

/* registry_auth.c: answer a 401's WWW-Authenticate. */
int rg_authenticate(rg_conn *c, const char *challenge, cm_err *err);
int rg_refused(rg_conn *c, cm_err *err);
/* One auth-param of a WWW-Authenticate challenge (key="value" or
 * key=token), owned, or NULL (fuzzed). */
char *rg_challenge_param(const char *challenge, const char *key);

/* registry_blob.c: download `n` blobs into the directory `blobs_fd`
 * (blobs/sha256), each verified, in parallel. */
int rg_fetch_blobs(rg_conn *c, int blobs_fd, const rg_desc *const *v, size_t n, const cm_image_progress *progress,
                   cm_err *err);
/* Whether blobs/sha256/<hex> exists and hashes to its name at `size`. */
bool rg_blob_verified(int blobs_fd, const rg_desc *d);
/* Write bytes already verified as blob `digest`: temp name, fsync, rename. */
int rg_blob_write(int blobs_fd, const char *digest, const char *data, size_t len, cm_err *err);
int rg_file_write(int dir_fd, const char *name, const char *data, size_t len, cm_err *err);

#endif
