/* The built-in Linux runtime (DESIGN §4): daemonless sandboxes made of
 * namespaces, a pivoted root, cgroups, dropped capabilities and seccomp. */
#ifndef CM_NATIVE_H
#define CM_NATIVE_H

#include "backend/backend.h"

/* Build the native backend; never fails (an unusable machine reports why in
 * status(), and every operation then fails with that reason). */
cm_backend *cm_native_open(void);

#endif
