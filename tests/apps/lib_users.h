/* lib_users.h: the two small libraries of the lib_users app, each making its own device calls
 * (device memory by library): libruntime_user.so through the runtime, libdriver_user.so through
 * the driver API. Lock: none. Hot path: n/a (test programs). */
#ifndef CUPROF_LIB_USERS_H
#define CUPROF_LIB_USERS_H

#include <stddef.h>
#include <stdint.h>

/* cudaMalloc / cudaFree; 0 on success, the cudaError_t otherwise. */
int runtime_user_alloc(void **ptr, size_t size);
int runtime_user_free(void *ptr);

/* cuMemAlloc_v2 / cuMemAllocManaged / cuMemFree_v2; 0 on success, the CUresult otherwise. */
int driver_user_alloc(uint64_t *ptr, size_t size);
int driver_user_alloc_managed(uint64_t *ptr, size_t size);
int driver_user_free(uint64_t ptr);

#endif
