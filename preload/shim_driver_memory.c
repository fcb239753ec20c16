/* shim_driver_memory.c: the driver's own memory calls (see shim_driver_memory.h). */
#include "preload/shim_driver_memory.h"

#include <stdatomic.h>
#include <stdbool.h>

#include "allocator/alloc_policy.h"
#include "allocator/allocator.h"
#include "preload/guard.h"
#include "preload/real_cuda.h"
#include "preload/runtime.h"
#include "preload/shim_call.h"
#include "preload/shim_capture.h"

static atomic_bool release_logged; /* one line per process */

/* After `api` was refused for lack of memory: true when cuprof's cache held memory the driver
 * lacked and handed it back, so that the call is worth making again. */
static bool
release_for(const char *api)
{
    struct cuprof_runtime *rt;
    int device = shim_call_ready_device(&rt);
    if (device < 0 || rt->mode != CUPROF_MODE_CACHE || shim_capture_any())
        return false;
    size_t held = allocator_releasable_bytes(rt->alloc, device);
    if (held == 0)
        return false;
    guard_enter();
    (void)allocator_empty_cache(rt->alloc, device);
    guard_leave();
    if (!atomic_exchange(&release_logged, true) && runtime_log_info()) {
        char size[32];
        alloc_policy_format_size(held, size, sizeof size);
        runtime_log("cuprof: %s found no device memory for the driver while cuprof's cache held "
                    "%s the program had freed; the cache handed it back and the call was made "
                    "again (logged once)",
                    api, size);
    }
    return true;
}

/* `api`'s refusal stands: said once, and the first-OOM snapshot (every mode but off). */
static CUresult
refused(const char *api)
{
    struct cuprof_runtime *rt;
    int device = shim_call_ready_device(&rt);
    if (device >= 0)
        runtime_notify_driver_oom(rt, device, api);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* A wrapper's whole body: the real call, made once more after the cache handed memory back for
 * it; returns the last answer (a refusal that stands is told, runtime_notify_driver_oom). */
#define CALL_WITH_RELEASE(field, args)                                                             \
    REAL_CUDA_OR_FAIL(real, field)                                                                 \
    CUresult result = real->field args;                                                            \
    if (result == CUDA_ERROR_OUT_OF_MEMORY && release_for(#field))                                 \
        result = real->field args;                                                                 \
    return result == CUDA_ERROR_OUT_OF_MEMORY ? refused(#field) : result

CUresult
shim_driver_memory_set_limit(CUlimit limit, size_t value)
{
    CALL_WITH_RELEASE(cuCtxSetLimit, (limit, value));
}

CUresult
shim_driver_memory_module_load(CUmodule *module, const char *file)
{
    CALL_WITH_RELEASE(cuModuleLoad, (module, file));
}

CUresult
shim_driver_memory_module_load_data(CUmodule *module, const void *image)
{
    CALL_WITH_RELEASE(cuModuleLoadData, (module, image));
}

CUresult
shim_driver_memory_module_load_data_ex(CUmodule *module, const void *image, unsigned int count,
                                       CUjit_option *options, void **values)
{
    CALL_WITH_RELEASE(cuModuleLoadDataEx, (module, image, count, options, values));
}

CUresult
shim_driver_memory_module_load_fat_binary(CUmodule *module, const void *fat_cubin)
{
    CALL_WITH_RELEASE(cuModuleLoadFatBinary, (module, fat_cubin));
}

CUresult
shim_driver_memory_module_get_function(CUfunction *function, CUmodule module, const char *name)
{
    CALL_WITH_RELEASE(cuModuleGetFunction, (function, module, name));
}

CUresult
shim_driver_memory_library_load_data(CUlibrary *library, const void *code,
                                     CUjit_option *jit_options, void **jit_values,
                                     unsigned int jit_count, CUlibraryOption *options,
                                     void **values, unsigned int count)
{
    CALL_WITH_RELEASE(cuLibraryLoadData,
                      (library, code, jit_options, jit_values, jit_count, options, values, count));
}

CUresult
shim_driver_memory_library_load_from_file(CUlibrary *library, const char *file,
                                          CUjit_option *jit_options, void **jit_values,
                                          unsigned int jit_count, CUlibraryOption *options,
                                          void **values, unsigned int count)
{
    CALL_WITH_RELEASE(cuLibraryLoadFromFile,
                      (library, file, jit_options, jit_values, jit_count, options, values, count));
}

CUresult
shim_driver_memory_library_get_kernel(CUkernel *kernel, CUlibrary library, const char *name)
{
    CALL_WITH_RELEASE(cuLibraryGetKernel, (kernel, library, name));
}

CUresult
shim_driver_memory_library_get_module(CUmodule *module, CUlibrary library)
{
    CALL_WITH_RELEASE(cuLibraryGetModule, (module, library));
}

CUresult
shim_driver_memory_kernel_get_function(CUfunction *function, CUkernel kernel)
{
    CALL_WITH_RELEASE(cuKernelGetFunction, (function, kernel));
}

/* A launch that failed for lack of memory launched nothing: making it again is what the program
 * would do itself once memory is back. */
CUresult
shim_driver_memory_launch(CUfunction f, unsigned int grid_x, unsigned int grid_y,
                          unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                          unsigned int block_z, unsigned int shared_bytes, CUstream stream,
                          void **params, void **extra)
{
    CALL_WITH_RELEASE(cuLaunchKernel, (f, grid_x, grid_y, grid_z, block_x, block_y, block_z,
                                       shared_bytes, stream, params, extra));
}

CUresult
shim_driver_memory_launch_ptsz(CUfunction f, unsigned int grid_x, unsigned int grid_y,
                               unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                               unsigned int block_z, unsigned int shared_bytes, CUstream stream,
                               void **params, void **extra)
{
    CALL_WITH_RELEASE(cuLaunchKernel_ptsz, (f, grid_x, grid_y, grid_z, block_x, block_y, block_z,
                                            shared_bytes, stream, params, extra));
}

CUresult
shim_driver_memory_launch_ex(const CUlaunchConfig *config, CUfunction f, void **params,
                             void **extra)
{
    CALL_WITH_RELEASE(cuLaunchKernelEx, (config, f, params, extra));
}

CUresult
shim_driver_memory_launch_ex_ptsz(const CUlaunchConfig *config, CUfunction f, void **params,
                                  void **extra)
{
    CALL_WITH_RELEASE(cuLaunchKernelEx_ptsz, (config, f, params, extra));
}

CUresult
shim_driver_memory_launch_cooperative(CUfunction f, unsigned int grid_x, unsigned int grid_y,
                                      unsigned int grid_z, unsigned int block_x,
                                      unsigned int block_y, unsigned int block_z,
                                      unsigned int shared_bytes, CUstream stream, void **params)
{
    CALL_WITH_RELEASE(cuLaunchCooperativeKernel, (f, grid_x, grid_y, grid_z, block_x, block_y,
                                                  block_z, shared_bytes, stream, params));
}

CUresult
shim_driver_memory_launch_cooperative_ptsz(CUfunction f, unsigned int grid_x, unsigned int grid_y,
                                           unsigned int grid_z, unsigned int block_x,
                                           unsigned int block_y, unsigned int block_z,
                                           unsigned int shared_bytes, CUstream stream,
                                           void **params)
{
    CALL_WITH_RELEASE(cuLaunchCooperativeKernel_ptsz, (f, grid_x, grid_y, grid_z, block_x, block_y,
                                                       block_z, shared_bytes, stream, params));
}

CUresult
shim_driver_memory_array_create(CUarray *array, const CUDA_ARRAY_DESCRIPTOR *descriptor)
{
    CALL_WITH_RELEASE(cuArrayCreate_v2, (array, descriptor));
}

CUresult
shim_driver_memory_array_3d_create(CUarray *array, const CUDA_ARRAY3D_DESCRIPTOR *descriptor)
{
    CALL_WITH_RELEASE(cuArray3DCreate_v2, (array, descriptor));
}
