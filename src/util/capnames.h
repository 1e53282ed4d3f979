/* Linux capability names, as Docker and capabilities(7) spell them without
 * the CAP_ prefix, and Docker's default set: what dinspect reports (the
 * native runtime decodes /proc's masks, the Docker mapping reads names). */
#ifndef CM_CAPNAMES_H
#define CM_CAPNAMES_H

#include <stdint.h>

#define CM_CAP_COUNT 41 /* CHOWN (0) .. CHECKPOINT_RESTORE (40) */

/* "CHOWN" for 0; NULL past the table. */
const char *cm_cap_name(int cap);
/* The number of "CHOWN", "CAP_CHOWN" or "cap_chown"; -1 when unknown. */
int cm_cap_from_name(const char *name);
/* Docker's default capability set (14 capabilities), as a mask. */
uint64_t cm_cap_docker_default(void);

#endif
