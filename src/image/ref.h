/* Image references, parsed exactly as Docker parses them
 * (github.com/distribution/reference, ParseNormalizedNamed):
 *
 *   alpine                      -> docker.io/library/alpine:latest
 *   user/app:1.2                -> docker.io/user/app:1.2
 *   localhost/x                 -> localhost/x:latest
 *   127.0.0.1:5000/a/b@sha256:… -> 127.0.0.1:5000/a/b@sha256:…
 *
 * The first component is a registry host when it holds '.' or ':', is
 * "localhost", or has an upper-case letter; otherwise the image is on
 * Docker Hub.  Repository paths are lower case; the whole name is at most
 * 255 characters, a tag at most 128. */
#ifndef CM_IMAGE_REF_H
#define CM_IMAGE_REF_H

#include "util/err.h"

#define CM_IMAGE_NAME_MAX 255
#define CM_IMAGE_TAG_MAX 128

typedef struct cm_image_ref {
        char *domain; /* "docker.io", "127.0.0.1:5000", "[::1]:5000" */
        char *path;   /* "library/alpine" */
        char *tag;    /* "latest" unless a digest was given without a tag (then NULL) */
        char *digest; /* "sha256:<64 hex>" or NULL */
} cm_image_ref;

/* Parse `s`; on failure *ret is left empty and err says what is wrong. */
int cm_image_ref_parse(const char *s, cm_image_ref *ret, cm_err *err);
void cm_image_ref_free(cm_image_ref *r);
/* "domain/path[:tag][@digest]", owned. */
char *cm_image_ref_format(const cm_image_ref *r);
/* What the registry's manifests endpoint takes: the digest when there is
 * one, else the tag. */
const char *cm_image_ref_reference(const cm_image_ref *r);
/* A digest as the OCI spec writes a sha256 one: "sha256:" and 64 lower-case
 * hex digits (the only algorithm this client accepts). */
int cm_image_digest_ok(const char *d);

#endif
