/* The Python that system_run_python runs in the container (python.c). */
#ifndef CM_TOOLS_PYTHON_H
#define CM_TOOLS_PYTHON_H

/* python3 -c cm_python_wrapper LIMIT CAP TIMEOUT, the code on stdin:
 * prints the result document. */
extern const char cm_python_wrapper[];
/* python3 -c cm_python_zygote: the warm interpreter (cm_exec_warm) whose
 * requests are LIMIT CAP TIMEOUT, answered as the wrapper would. */
extern const char cm_python_zygote[];

#endif
