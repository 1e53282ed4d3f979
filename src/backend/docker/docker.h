#ifndef CM_DOCKER_H
#define CM_DOCKER_H

#include "backend/backend.h"

/* The Docker Engine API backend (Docker or Podman); where the engine is:
 * api.h. */
cm_backend *cm_docker_open(void);

#endif
