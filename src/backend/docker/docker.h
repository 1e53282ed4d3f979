#ifndef CM_DOCKER_H
#define CM_DOCKER_H

#include "backend/backend.h"

/* The Docker Engine API backend (Docker or Podman).  The socket is
 * CONTAINER_MCP_DOCKER_HOST or DOCKER_HOST (unix://PATH), else the first of
 * /var/run/docker.sock, /run/podman/podman.sock,
 * $XDG_RUNTIME_DIR/podman/podman.sock that exists. */
cm_backend *cm_docker_open(void);

#endif
