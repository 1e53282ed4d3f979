/* Policy checks that tools apply before a backend sees a request. */
#ifndef CM_POLICY_H
#define CM_POLICY_H

#include <stdbool.h>

#include "policy/config.h"
#include "util/err.h"

/* Canonicalise a host path (symlinks resolved; it must exist) and check it
 * lies under one of CONTAINER_MCP_ALLOWED_MOUNTS.  On success *ret_real is
 * the canonical path (caller frees).  A path that resolves outside every
 * root, e.g. through a symlink, is refused with a message that says how to
 * allow it. */
int cm_policy_host_path(const cm_config *cfg, const char *path, char **ret_real, cm_err *err);

/* The same check, giving the allowed root the path lies under and the path
 * below it ("" for the root itself), as backends want it (cm_host_path).
 * must_exist false: for a destination, only the parent must exist (it is
 * canonicalised); the last name must not be ".", ".." or empty. */
int cm_policy_host_split(const cm_config *cfg, const char *path, bool must_exist, char **ret_root, char **ret_rel,
                         cm_err *err);

/* True when `path` equals `root` or lies below it (component-wise). */
bool cm_path_under(const char *path, const char *root);

/* Container names: 1-128 of [A-Za-z0-9_.-], not starting with - or . */
int cm_policy_name(const char *name, cm_err *err);

/* Image references: no leading '-', no whitespace or control characters,
 * at most 512 bytes: a value that can never turn into a flag or two words.
 * A path (starting with / or .) is a directory image: it must resolve to a
 * directory below one of CONTAINER_MCP_IMAGE_DIRS (none by default) and clear
 * of the state dir; *ret_real is then its canonical form (caller frees), to
 * be used instead of `image`.  Otherwise *ret_real is NULL. */
int cm_policy_image(const cm_config *cfg, const char *image, char **ret_real, cm_err *err);

/* Refuse a canonical host path that is, contains or lies inside the state
 * dir or the run log dir: records, control sockets, image copies and the
 * run log are the server's alone. */
int cm_policy_state_overlap(const cm_config *cfg, const char *real, cm_err *err);

/* Host ports below CONTAINER_MCP_MIN_HOST_PORT (1024) are refused; 0 means
 * "pick a free one" and always passes. */
int cm_policy_host_port(const cm_config *cfg, unsigned port, cm_err *err);

/* Whether an agent may pull `ref` (a reference as Docker parses it) from
 * its registry.  With CONTAINER_MCP_ALLOWED_REGISTRIES set, only from
 * those.  Unset, from any registry but one named by a local address
 * (localhost, loopback, private, link-local or unspecified IP literals),
 * which must be named in CONTAINER_MCP_ALLOWED_REGISTRIES or
 * CONTAINER_MCP_INSECURE_REGISTRIES: a pull is a request the server makes,
 * and an agent must not aim it at services on the host's own network.
 * (A DNS name that resolves to such an address, a redirect or a token
 * realm there: the native registry client refuses each connection to a
 * local address, see cm_policy_named_registries.) */
int cm_policy_registry(const cm_config *cfg, const char *ref, cm_err *err);
/* The registries the operator named (CONTAINER_MCP_ALLOWED_REGISTRIES and
 * CONTAINER_MCP_INSECURE_REGISTRIES), comma-separated, owned: the only ones
 * an agent's pull may reach at a local address, whatever their name
 * resolves to or redirects to (cm_registry_opts.local_ok). */
char *cm_policy_named_registries(const cm_config *cfg);

#endif
