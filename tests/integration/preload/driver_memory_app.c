/* driver_memory_app.c: calls that take device memory for the driver itself (kernel code under
 * lazy and eager loading, launches, texture arrays, a larger thread stack), each made right after
 * the program allocated all the free memory and freed it again. Without cuprof that memory is the
 * driver's again and every call succeeds; under cuprof's cache it stays cached unless the cache
 * hands it back. Driver API, primary context; "eager" as the first argument loads modules and
 * libraries with CUDA_MODULE_LOADING=EAGER (the code taken at load). Prints one line per call:
 * name=error (no sizes: compared with a run without cuprof). */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char IMAGE[] = "simulated code"; /* the simulated driver does not parse images */

static void
show(const char *name, CUresult r)
{
    const char *text = NULL;
    if (cuGetErrorName(r, &text) != CUDA_SUCCESS || text == NULL)
        text = "?";
    printf("%s=%s\n", name, text);
}

/* All the free memory allocated and freed again: cached under cuprof's cache mode. */
static void
fill_and_free(void)
{
    size_t free_b = 0, total = 0;
    CUdeviceptr p = 0;
    if (cuMemGetInfo(&free_b, &total) != CUDA_SUCCESS || cuMemAlloc(&p, free_b) != CUDA_SUCCESS ||
        cuMemFree(p) != CUDA_SUCCESS) {
        printf("fill failed\n");
        exit(3);
    }
}

#define PER_THREAD CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM

/* The pointer cuGetProcAddress hands out for (name, version, flags), stored in *out (a function
 * pointer of `size` bytes: copied, as dlsym's results are). */
static void
lookup(const char *name, int version, cuuint64_t flags, void *out, size_t size)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult found;
    if (cuGetProcAddress(name, &fn, version, flags, &found) != CUDA_SUCCESS || fn == NULL ||
        size != sizeof fn) {
        printf("lookup of %s failed\n", name);
        exit(3);
    }
    memcpy(out, &fn, size);
}

/* A library whose code is not loaded yet (lazy loading), and one of its kernels. */
static CUkernel
fresh_kernel(void)
{
    CUlibrary lib = NULL;
    CUkernel k = NULL;
    if (cuLibraryLoadData(&lib, IMAGE, NULL, NULL, 0, NULL, NULL, 0) != CUDA_SUCCESS ||
        cuLibraryGetKernel(&k, lib, "kernel") != CUDA_SUCCESS) {
        printf("library failed\n");
        exit(3);
    }
    return k;
}

static void
lazy_calls(const char *self)
{
    CUmodule mod = NULL;
    CUfunction f = NULL;
    show("module_load", cuModuleLoad(&mod, self));
    fill_and_free();
    show("module_get_function", cuModuleGetFunction(&f, mod, "kernel"));
    CUkernel k = fresh_kernel();
    fill_and_free();
    show("kernel_get_function", cuKernelGetFunction(&f, k));
    CUlibrary lib = NULL;
    show("library_load", cuLibraryLoadData(&lib, IMAGE, NULL, NULL, 0, NULL, NULL, 0));
    fill_and_free();
    show("library_get_module", cuLibraryGetModule(&mod, lib));
    k = fresh_kernel();
    fill_and_free();
    show("launch", cuLaunchKernel((CUfunction)(void *)k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    CUlaunchConfig config;
    memset(&config, 0, sizeof config);
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = 32;
    config.blockDimY = config.blockDimZ = 1;
    k = fresh_kernel();
    fill_and_free();
    show("launch_ex", cuLaunchKernelEx(&config, (CUfunction)(void *)k, NULL, NULL));
    k = fresh_kernel();
    fill_and_free();
    show("launch_cooperative",
         cuLaunchCooperativeKernel((CUfunction)(void *)k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL));
    /* As NVIDIA's runtime calls them: through the pointers cuGetProcAddress hands out, the
     * per-thread default stream's variants among them. */
    PFN_cuLaunchKernel_v4000 launch = NULL;
    PFN_cuLaunchKernel_v7000_ptsz launch_ptsz = NULL;
    PFN_cuLaunchKernelEx_v11060_ptsz launch_ex_ptsz = NULL;
    PFN_cuLaunchCooperativeKernel_v9000_ptsz cooperative_ptsz = NULL;
    lookup("cuLaunchKernel", 4000, 0, &launch, sizeof launch);
    lookup("cuLaunchKernel", 7000, PER_THREAD, &launch_ptsz, sizeof launch_ptsz);
    lookup("cuLaunchKernelEx", 11060, PER_THREAD, &launch_ex_ptsz, sizeof launch_ex_ptsz);
    lookup("cuLaunchCooperativeKernel", 9000, PER_THREAD, &cooperative_ptsz,
           sizeof cooperative_ptsz);
    k = fresh_kernel();
    fill_and_free();
    show("launch_looked_up", launch((CUfunction)(void *)k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    k = fresh_kernel();
    fill_and_free();
    show("launch_ptsz", launch_ptsz((CUfunction)(void *)k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    k = fresh_kernel();
    fill_and_free();
    show("launch_ex_ptsz", launch_ex_ptsz(&config, (CUfunction)(void *)k, NULL, NULL));
    k = fresh_kernel();
    fill_and_free();
    show("launch_cooperative_ptsz",
         cooperative_ptsz((CUfunction)(void *)k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL));
}

static void
eager_calls(const char *self)
{
    CUmodule mod = NULL;
    CUlibrary lib = NULL;
    fill_and_free();
    show("module_load_eager", cuModuleLoad(&mod, self));
    fill_and_free();
    show("module_load_data_eager", cuModuleLoadData(&mod, IMAGE));
    fill_and_free();
    show("module_load_data_ex_eager", cuModuleLoadDataEx(&mod, IMAGE, 0, NULL, NULL));
    fill_and_free();
    show("module_load_fat_binary_eager", cuModuleLoadFatBinary(&mod, IMAGE));
    fill_and_free();
    show("library_load_eager", cuLibraryLoadData(&lib, IMAGE, NULL, NULL, 0, NULL, NULL, 0));
    fill_and_free();
    show("library_load_from_file_eager",
         cuLibraryLoadFromFile(&lib, self, NULL, NULL, 0, NULL, NULL, 0));
}

int
main(int argc, char **argv)
{
    int eager = argc > 1 && strcmp(argv[1], "eager") == 0;
    if (eager)
        setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    CUdevice dev = 0;
    CUcontext ctx = NULL;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return 2;
    if (eager) {
        eager_calls(argv[0]);
        return 0;
    }
    lazy_calls(argv[0]);
    CUarray array = NULL;
    CUDA_ARRAY_DESCRIPTOR d2 = {
        .Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    fill_and_free();
    show("array_create", cuArrayCreate(&array, &d2));
    CUDA_ARRAY3D_DESCRIPTOR d3 = {
        .Width = 256, .Height = 256, .Depth = 16, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    fill_and_free();
    show("array_3d_create", cuArray3DCreate(&array, &d3));
    fill_and_free();
    show("stack_limit", cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024 + 64));
    return 0;
}
