/* dinspect (issue 11): a compact view of a container's isolation.  The
 * fields are those of src/tools/defs/dinspect.json. */
#ifndef CM_TOOLS_DINSPECT_H
#define CM_TOOLS_DINSPECT_H

#include "util/json.h"

/* The view of a container from the Docker Engine API's inspect document
 * (GET /containers/{id}/json, Docker's or Podman's compatible API), as the
 * engine reports it ("source": "inspect").  A pure function; NULL when
 * `inspect` is not such a document (no Id or no HostConfig).  `runtime`
 * names the backend. */
json_t *cm_dinspect_docker(const json_t *inspect, const char *runtime);

#endif
