/* rt_driver: loads libcuda.so.1 and fills the table of driver entry points, exactly as cudart 13.
 * Lock: filled once under pthread_once in rt_driver_load(), read-only afterwards (no lock).
 * Hot path: yes (every runtime call reads the table; loading happens once). */
#ifndef CUPROF_SIM_RT_DRIVER_H
#define CUPROF_SIM_RT_DRIVER_H

#include <cuda.h>
#include <cudaProfilerTypedefs.h>
#include <cudaTypedefs.h>

struct rt_driver {
    void *handle;                         /* dlopen("libcuda.so.1", RTLD_NOW) */
    PFN_cuGetProcAddress_v12000 get_proc; /* the pointer every lookup goes through */
    int via_get_proc; /* 1: filled through cuGetProcAddress, 0: dlsym fallback */
#define RT_DRV(field, name, version, flags, type, sym) type field;
#include "rt_driver.def"
#undef RT_DRV
};

/* The table; valid once rt_driver_load() returned CUDA_SUCCESS. */
extern struct rt_driver rt_drv;

/* Loads the driver once (thread-safe) and resolves every entry point. Returns CUDA_SUCCESS,
 * CUDA_ERROR_STUB_LIBRARY or CUDA_ERROR_SHARED_OBJECT_INIT_FAILED (no libcuda.so.1). */
__attribute__((warn_unused_result)) CUresult rt_driver_load(void);

/* Calls a table entry, answering CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER where the driver lacked it
 * (the real runtime fills such slots with a stub returning that code). */
#define RT_CALL(field, ...)                                                                        \
    (rt_drv.field ? rt_drv.field(__VA_ARGS__) : CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER)

#endif
