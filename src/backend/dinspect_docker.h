/* dinspect (issue 11): a compact view of a container's isolation, the
 * fields of src/tools/defs/dinspect.json, from Docker's inspect document.
 * In the backend layer so that an engine backend's `isolation` op can
 * return it (get the inspect JSON, map it); the dinspect tool also maps a
 * backend's inspect with it when that backend has no `isolation`. */
#ifndef CM_BACKEND_DINSPECT_DOCKER_H
#define CM_BACKEND_DINSPECT_DOCKER_H

#include "util/json.h"

/* The view of a container from the Docker Engine API's inspect document
 * (GET /containers/{id}/json, Docker's or Podman's compatible API), as the
 * engine reports it ("source": "inspect").  A pure function; NULL when
 * `inspect` is not such a document (no Id or no HostConfig).  `runtime`
 * names the backend. */
json_t *cm_dinspect_docker(const json_t *inspect, const char *runtime);

#endif
