/* The OCI distribution API v2 client: pulls one image for one platform from
 * a registry into an OCI image layout directory, which the image store then
 * imports.
 *
 *   layout_dir/oci-layout
 *   layout_dir/index.json        one manifest, annotated with the full reference
 *   layout_dir/blobs/sha256/<hex> the manifest, the config and the layers, as
 *                                the registry sent them (gzip, zstd or plain)
 *
 * Every blob is hashed and counted while it streams to a temporary name, and
 * renamed into blobs/ only when its digest and size match its descriptor;
 * index.json is written last, so a layout without it is an unfinished pull
 * and a second fetch into the same directory reuses the blobs that are
 * already there (each re-verified) and downloads only the rest. */
#ifndef CM_IMAGE_REGISTRY_H
#define CM_IMAGE_REGISTRY_H

#include <stdint.h>

#include "backend/backend.h"
#include "image/ref.h"
#include "util/err.h"

typedef struct cm_registry_opts {
        const char *platform;       /* "os/arch[/variant]"; NULL: the host's */
        int64_t max_size;           /* bytes, per layer and per image (CONTAINER_MCP_IMAGE_MAX_SIZE); 0: 8 GiB */
        unsigned connect_timeout_s; /* 0: 15 */
        unsigned stall_timeout_s;   /* a transfer with no byte for this long fails; 0: 30 */
        unsigned parallel;          /* downloads at once; 0: 3 */
        const char *reuse_dir;      /* blobs by hex digest (the image store's) to link in instead of
                                     * fetching, each verified like the layout's own; NULL: none */
        /* Called (on the fetching thread) for each blob once it is whole
         * and verified in the layout, the config and the layers alike:
         * what lets a caller unpack layers while others still download. */
        void (*on_blob)(void *arg, const char *digest, const char *media_type);
        void *on_blob_arg;
        /* An agent's pull: NULL (the operator's own) connects anywhere;
         * else no connection goes to a local address (cm_host_local: a
         * name that resolves there, a redirect, a token realm) unless the
         * registry is one this comma-separated list names. */
        const char *local_ok;
} cm_registry_opts;

/* Fetch `ref` into `layout_dir` (created when missing).  On success
 * *ret_digest (when non-NULL) is the manifest's "sha256:<hex>", owned. */
int cm_registry_fetch(const cm_image_ref *ref, const cm_registry_opts *o, const char *layout_dir,
                      const cm_image_progress *progress, const cm_cancel *cancel, char **ret_digest, cm_err *err);

/* The credentials for a registry host ("docker.io", "127.0.0.1:5000"):
 * CONTAINER_MCP_REGISTRY_AUTH ("host=user:password[,host=...]") first, then
 * the `auths` of $DOCKER_CONFIG/config.json or ~/.docker/config.json
 * (`auth`, base64 of user:password, or `username` and `password`; Docker
 * Hub's key is "https://index.docker.io/v1/").  Returns 1 and owned strings
 * when found, 0 when there are none, < 0 when a source is malformed. */
int cm_registry_credentials(const char *host, char **user, char **pass);
/* The same, also saying where they came from (for messages), and why a
 * source was refused. */
int cm_registry_credentials_from(const char *host, char **user, char **pass, char **ret_source, cm_err *err);

#endif
