/* rt_errors: CUresult -> cudaError_t mapping, and the names and strings of runtime error codes.
 * Lock: none (constant tables).
 * Hot path: yes (every failing call maps its driver result). */
#ifndef CUPROF_SIM_RT_ERRORS_H
#define CUPROF_SIM_RT_ERRORS_H

#include <cuda.h>
#include <driver_types.h>
#include <stdbool.h>

/* The runtime code for a driver result, as the real runtime reports it. */
enum cudaError rt_errors_from_cu(CUresult r);

/* true for errors that corrupt the context: every later call reports them (sticky). */
bool rt_errors_is_sticky(enum cudaError e);

/* Name ("cudaErrorMemoryAllocation") and description ("out of memory"); NULL when unknown. */
const char *rt_errors_name(enum cudaError e);
const char *rt_errors_string(enum cudaError e);

#endif
