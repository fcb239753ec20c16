/* shim_driver_memory.h: the driver calls that take device memory for the driver itself, outside
 *   every allocation cuprof sees: kernel code (module and library loads, and the first use of a
 *   kernel under CUDA's lazy loading: function lookups and launches), texture arrays, a larger
 *   thread stack (cuCtxSetLimit). Without cuprof the memory a program freed is the driver's
 *   again; in cache mode cuprof's cache keeps it, so when such a call fails with
 *   CUDA_ERROR_OUT_OF_MEMORY while the cache holds memory it could hand back, the cache hands it
 *   back (segment_free entries, as empty_cache()) and the call is made once more. Never during a
 *   stream capture (a cuMemFree would invalidate it); the program keeps the driver's answer
 *   otherwise. One log line, once; a refusal that stands gets its own line (once) and the
 *   first-OOM snapshot, in every mode but off.
 * Locking: none on success; a refusal takes the current device's allocator lock to release.
 * Hot path: launches pass through with one comparison of the result. */
#ifndef CUPROF_SHIM_DRIVER_MEMORY_H
#define CUPROF_SHIM_DRIVER_MEMORY_H

#include <cuda.h>

CUresult shim_driver_memory_set_limit(CUlimit limit, size_t value);
CUresult shim_driver_memory_module_load(CUmodule *module, const char *file);
CUresult shim_driver_memory_module_load_data(CUmodule *module, const void *image);
CUresult shim_driver_memory_module_load_data_ex(CUmodule *module, const void *image,
                                                unsigned int count, CUjit_option *options,
                                                void **values);
CUresult shim_driver_memory_module_load_fat_binary(CUmodule *module, const void *fat_cubin);
CUresult shim_driver_memory_module_get_function(CUfunction *function, CUmodule module,
                                                const char *name);
CUresult shim_driver_memory_library_load_data(CUlibrary *library, const void *code,
                                              CUjit_option *jit_options, void **jit_values,
                                              unsigned int jit_count, CUlibraryOption *options,
                                              void **values, unsigned int count);
CUresult shim_driver_memory_library_load_from_file(CUlibrary *library, const char *file,
                                                   CUjit_option *jit_options, void **jit_values,
                                                   unsigned int jit_count, CUlibraryOption *options,
                                                   void **values, unsigned int count);
CUresult shim_driver_memory_library_get_kernel(CUkernel *kernel, CUlibrary library,
                                               const char *name);
CUresult shim_driver_memory_library_get_module(CUmodule *module, CUlibrary library);
CUresult shim_driver_memory_kernel_get_function(CUfunction *function, CUkernel kernel);
CUresult shim_driver_memory_launch(CUfunction f, unsigned int grid_x, unsigned int grid_y,
                                   unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                                   unsigned int block_z, unsigned int shared_bytes, CUstream stream,
                                   void **params, void **extra);
CUresult shim_driver_memory_launch_ptsz(CUfunction f, unsigned int grid_x, unsigned int grid_y,
                                        unsigned int grid_z, unsigned int block_x,
                                        unsigned int block_y, unsigned int block_z,
                                        unsigned int shared_bytes, CUstream stream, void **params,
                                        void **extra);
CUresult shim_driver_memory_launch_ex(const CUlaunchConfig *config, CUfunction f, void **params,
                                      void **extra);
CUresult shim_driver_memory_launch_ex_ptsz(const CUlaunchConfig *config, CUfunction f,
                                           void **params, void **extra);
CUresult shim_driver_memory_launch_cooperative(CUfunction f, unsigned int grid_x,
                                               unsigned int grid_y, unsigned int grid_z,
                                               unsigned int block_x, unsigned int block_y,
                                               unsigned int block_z, unsigned int shared_bytes,
                                               CUstream stream, void **params);
CUresult shim_driver_memory_launch_cooperative_ptsz(CUfunction f, unsigned int grid_x,
                                                    unsigned int grid_y, unsigned int grid_z,
                                                    unsigned int block_x, unsigned int block_y,
                                                    unsigned int block_z, unsigned int shared_bytes,
                                                    CUstream stream, void **params);
CUresult shim_driver_memory_array_create(CUarray *array, const CUDA_ARRAY_DESCRIPTOR *descriptor);
CUresult shim_driver_memory_array_3d_create(CUarray *array,
                                            const CUDA_ARRAY3D_DESCRIPTOR *descriptor);

#endif
