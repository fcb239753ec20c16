/* rt_register: what nvcc's generated host code registers before main: fat binaries (the driver's
 * libraries, loaded at a first launch), kernels (host stub -> device name, the driver's kernel)
 * and __device__/__constant__/__managed__ variables.
 * Lock: rt_register's mutex guards the tables. Hot path: launches look their kernel up. */
#ifndef CUPROF_SIM_RT_REGISTER_H
#define CUPROF_SIM_RT_REGISTER_H

#include <cuda.h>
#include <driver_types.h>
#include <stddef.h>

/* A copy of what the runtime knows about one registered kernel. */
struct rt_register_kernel {
    const char *name; /* the device (mangled) name, owned by the program image */
    int arch_sass;    /* newest SASS architecture in its fat binary (75 = sm_75), 0 if unknown */
    int arch_ptx;     /* newest PTX architecture, else arch_sass */
    int max_dyn_smem; /* cudaFuncAttributeMaxDynamicSharedMemorySize */
    int carveout;     /* cudaFuncAttributePreferredSharedMemoryCarveout, -1 = no preference */
};

/* Finds a kernel by the host stub nvcc registered, or by the cudaKernel_t handle __cudaGetKernel
 * handed out (cudaLaunchKernel accepts both). When neither: cudaErrorInvalidDeviceFunction for
 * NULL, cudaErrorInvalidResourceHandle for any other pointer (as NVIDIA's runtime 13.0). */
__attribute__((warn_unused_result)) enum cudaError
rt_register_kernel_find(const void *func, struct rt_register_kernel *out);

/* The driver's function for a registered kernel (host stub or handle), for cuLaunchKernel: its fat
 * binary loaded as a library at the first launch (cuLibraryLoadData, whose code the driver takes
 * under CUDA_MODULE_LOADING's rules), the kernel asked once (cuLibraryGetKernel). The driver's
 * error when it refuses; CUDA_ERROR_INVALID_HANDLE for an unregistered function. */
__attribute__((warn_unused_result)) CUresult rt_register_kernel_driver(const void *func,
                                                                       CUfunction *out);

/* The cudaKernel_t of a registered host stub (errors as rt_register_kernel_find). */
__attribute__((warn_unused_result)) enum cudaError rt_register_kernel_handle(const void *func,
                                                                             void **handle);

/* Stores one cudaFuncSetAttribute value (already validated) for the kernel. */
__attribute__((warn_unused_result)) enum cudaError
rt_register_kernel_set(const void *func, enum cudaFuncAttribute attr, int value);

/* The storage and size of a registered variable, found by its host shadow address (what
 * cudaMemcpyToSymbol's C++ template passes) or by its storage address. cudaErrorInvalidSymbol
 * when neither. */
__attribute__((warn_unused_result)) enum cudaError rt_register_symbol(const void *symbol,
                                                                      void **storage, size_t *size);

/* Default dynamic shared memory a kernel may use without opting in (48 KiB, every GPU since
 * Kepler) and the most it may opt into on the simulated (H100-like) device. */
#define RT_REGISTER_SMEM_DEFAULT 49152
#define RT_REGISTER_SMEM_OPTIN   232448

#endif
