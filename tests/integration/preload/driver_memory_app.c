/* driver_memory_app.c: calls that take device memory for the driver itself (kernel code under lazy
 * and eager loading, launches, texture arrays (mipmapped ones too; also through the runtime), a
 * larger thread stack, graphs' memory nodes at a graph's first launch or upload, a context of its
 * own), each made right after the program allocated all the free memory and freed it again.
 * Without cuprof that memory is the driver's again and every call succeeds; under cuprof's cache
 * it stays cached unless the cache hands it back. Driver API (the runtime for two arrays), primary
 * context; "eager" as the first argument loads modules and libraries with
 * CUDA_MODULE_LOADING=EAGER (the code taken at load); "held" keeps the memory instead and asks for
 * a function of a module loaded before, twice: refused with or without cuprof ("held wait" then
 * waits for its standard input to close, to be watched; "held_graph" and "held_context" launch a
 * graph and make a context instead); "split" frees it, keeps 4 MiB and then asks: served alone,
 * refused under cuprof's cache (the 4 MiB are cut from the cached segment, which cannot go back to
 * the driver) unless its segments are expandable; "other_device" frees device 1 whole and makes a
 * context for it while device 0's is current. The code is driver_memory_kernel.fatbin beside the
 * program when there is one (built by nvcc: real code for a real GPU), else a few bytes the
 * simulated driver does not parse. Prints one line per call: name=error (no sizes: compared with a
 * run without cuprof). */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB        ((size_t)1 << 20)
#define MAX_CHUNKS 8192

static const char FAKE_IMAGE[] = "simulated code";
static const void *image = FAKE_IMAGE;
static const char *image_file; /* the program itself without a fat binary (any file will do) */

/* driver_memory_kernel.fatbin beside the program, read whole, when it is there. */
static void
find_image(const char *self)
{
    static char path[4096];
    const char *slash = strrchr(self, '/');
    int dir = slash != NULL ? (int)(slash - self) + 1 : 0;
    snprintf(path, sizeof path, "%.*sdriver_memory_kernel.fatbin", dir, self);
    image_file = self;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return;
    char *data = malloc(1 << 20);
    size_t n = data != NULL ? fread(data, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    if (n == 0) {
        free(data);
        return;
    }
    image = data;
    image_file = path;
}

static void
show(const char *name, CUresult r)
{
    const char *text = NULL;
    if (cuGetErrorName(r, &text) != CUDA_SUCCESS || text == NULL)
        text = "?";
    printf("%s=%s\n", name, text);
}

/* A runtime call's answer, named as the driver's when it succeeded (the lines are compared with
 * one list of CUDA_SUCCESS). */
static void
show_runtime(const char *name, cudaError_t e)
{
    printf("%s=%s\n", name, e == cudaSuccess ? "CUDA_SUCCESS" : cudaGetErrorName(e));
}

/* All the free memory allocated, then freed again unless `hold`: cached under cuprof's cache
 * mode. In one request where the driver can serve it (the simulated one does), else in 256 MiB and
 * then 2 MiB pieces until the driver has no more. */
static void
fill(bool hold)
{
    static CUdeviceptr chunk[MAX_CHUNKS];
    size_t free_b = 0, total = 0, n = 0;
    if (cuMemGetInfo(&free_b, &total) != CUDA_SUCCESS) {
        printf("fill failed\n");
        exit(3);
    }
    bool whole = free_b > 0 && cuMemAlloc(&chunk[0], free_b) == CUDA_SUCCESS;
    n = whole ? 1 : 0;
    for (size_t piece = 256 * MIB; !whole && piece >= 2 * MIB; piece /= 128)
        while (n < MAX_CHUNKS && cuMemAlloc(&chunk[n], piece) == CUDA_SUCCESS)
            n++;
    for (size_t i = 0; i < n && !hold; i++)
        if (cuMemFree(chunk[i]) != CUDA_SUCCESS) {
            printf("free failed\n");
            exit(3);
        }
}

static void
fill_and_free(void)
{
    fill(false);
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
    if (cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0) != CUDA_SUCCESS ||
        cuLibraryGetKernel(&k, lib, "kernel") != CUDA_SUCCESS) {
        printf("library failed\n");
        exit(3);
    }
    return k;
}

static void
lazy_calls(void)
{
    CUmodule mod = NULL;
    CUfunction f = NULL;
    show("module_load", cuModuleLoad(&mod, image_file));
    fill_and_free();
    show("module_get_function", cuModuleGetFunction(&f, mod, "kernel"));
    CUkernel k = fresh_kernel();
    fill_and_free();
    show("kernel_get_function", cuKernelGetFunction(&f, k));
    CUlibrary lib = NULL;
    show("library_load", cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
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

/* A graph captured on `stream` that allocates 8 MiB and frees it again (memory nodes: their
 * addresses fixed now, their memory taken at the graph's first upload or launch). */
static CUgraph
graph_with_memory(CUstream stream)
{
    CUgraph g = NULL;
    CUdeviceptr p = 0;
    if (cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED) != CUDA_SUCCESS ||
        cuMemAllocAsync(&p, 8 * MIB, stream) != CUDA_SUCCESS ||
        cuMemFreeAsync(p, stream) != CUDA_SUCCESS ||
        cuStreamEndCapture(stream, &g) != CUDA_SUCCESS) {
        printf("graph capture failed\n");
        exit(3);
    }
    return g;
}

static CUgraphExec
instantiated(CUgraph g)
{
    CUgraphExec exec = NULL;
    if (cuGraphInstantiateWithFlags(&exec, g, 0) != CUDA_SUCCESS) {
        printf("instantiate failed\n");
        exit(3);
    }
    return exec;
}

/* The graph gone, and its memory given back to the device (the driver keeps it cached for
 * graphs until trimmed). */
static void
graph_done(CUstream stream, CUgraph g, CUgraphExec exec)
{
    if (cuStreamSynchronize(stream) != CUDA_SUCCESS || cuGraphExecDestroy(exec) != CUDA_SUCCESS ||
        cuGraphDestroy(g) != CUDA_SUCCESS || cuDeviceGraphMemTrim(0) != CUDA_SUCCESS) {
        printf("graph cleanup failed\n");
        exit(3);
    }
}

/* Graphs' memory nodes take their memory at the graph's first upload or launch: each right after
 * the fill, directly and through the pointers cuGetProcAddress hands out. */
static void
graph_calls(void)
{
    CUstream stream = NULL;
    if (cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
        printf("stream failed\n");
        exit(3);
    }
    PFN_cuGraphLaunch_v10000_ptsz launch_ptsz = NULL;
    PFN_cuGraphUpload_v11010_ptsz upload_ptsz = NULL;
    lookup("cuGraphLaunch", 10000, PER_THREAD, &launch_ptsz, sizeof launch_ptsz);
    lookup("cuGraphUpload", 11010, PER_THREAD, &upload_ptsz, sizeof upload_ptsz);
    for (int step = 0; step < 4; step++) {
        static const char *const names[] = {"graph_launch", "graph_upload", "graph_launch_ptsz",
                                            "graph_upload_ptsz"};
        CUgraph g = graph_with_memory(stream);
        CUgraphExec exec = instantiated(g);
        fill_and_free();
        CUresult r;
        if (step == 0)
            r = cuGraphLaunch(exec, stream);
        else if (step == 1)
            r = cuGraphUpload(exec, stream);
        else if (step == 2)
            r = launch_ptsz(exec, stream);
        else
            r = upload_ptsz(exec, stream);
        show(names[step], r);
        graph_done(stream, g, exec);
    }
    (void)cuStreamDestroy(stream);
}

static void
eager_calls(void)
{
    CUmodule mod = NULL;
    CUlibrary lib = NULL;
    fill_and_free();
    show("module_load_eager", cuModuleLoad(&mod, image_file));
    fill_and_free();
    show("module_load_data_eager", cuModuleLoadData(&mod, image));
    fill_and_free();
    show("module_load_data_ex_eager", cuModuleLoadDataEx(&mod, image, 0, NULL, NULL));
    fill_and_free();
    show("module_load_fat_binary_eager", cuModuleLoadFatBinary(&mod, image));
    fill_and_free();
    show("library_load_eager", cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
    fill_and_free();
    show("library_load_from_file_eager",
         cuLibraryLoadFromFile(&lib, image_file, NULL, NULL, 0, NULL, NULL, 0));
}

/* A context of the program's own on the device (it takes device memory there), each ABI as the
 * program or a runtime asks for it; destroyed again (which pops it). */
static void
context_calls(CUdevice dev)
{
    CUcontext own = NULL;
    fill_and_free();
    show("ctx_create", cuCtxCreate(&own, NULL, 0, dev));
    if (own != NULL && cuCtxDestroy(own) != CUDA_SUCCESS)
        exit(3);
    PFN_cuCtxCreate_v3020 create_v2 = NULL;
    PFN_cuCtxCreate_v11040 create_v3 = NULL;
    lookup("cuCtxCreate", 3020, 0, &create_v2, sizeof create_v2);
    lookup("cuCtxCreate", 11040, 0, &create_v3, sizeof create_v3);
    own = NULL;
    fill_and_free();
    show("ctx_create_v2_looked_up", create_v2(&own, 0, dev));
    if (own != NULL && cuCtxDestroy(own) != CUDA_SUCCESS)
        exit(3);
    own = NULL;
    fill_and_free();
    show("ctx_create_v3_looked_up", create_v3(&own, NULL, 0, 0, dev));
    if (own != NULL && cuCtxDestroy(own) != CUDA_SUCCESS)
        exit(3);
}

/* Texture arrays, directly, looked up and through the runtime (as a program built by nvcc
 * allocates them). */
static void
array_calls(void)
{
    CUarray array = NULL;
    CUDA_ARRAY_DESCRIPTOR d2 = {
        .Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    fill_and_free();
    show("array_create", cuArrayCreate(&array, &d2));
    CUDA_ARRAY3D_DESCRIPTOR d3 = {
        .Width = 256, .Height = 256, .Depth = 16, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    fill_and_free();
    show("array_3d_create", cuArray3DCreate(&array, &d3));
    CUmipmappedArray mipmap = NULL;
    CUDA_ARRAY3D_DESCRIPTOR levels = {
        .Width = 256, .Height = 256, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    fill_and_free();
    show("mipmapped_array_create", cuMipmappedArrayCreate(&mipmap, &levels, 9));
    PFN_cuMipmappedArrayCreate_v5000 mipmapped_create = NULL;
    lookup("cuMipmappedArrayCreate", 5000, 0, &mipmapped_create, sizeof mipmapped_create);
    fill_and_free();
    show("mipmapped_array_create_looked_up", mipmapped_create(&mipmap, &levels, 9));
    struct cudaChannelFormatDesc texel =
        cudaCreateChannelDesc(32, 0, 0, 0, cudaChannelFormatKindFloat);
    cudaArray_t runtime_array = NULL;
    cudaMipmappedArray_t runtime_mipmap = NULL;
    fill_and_free();
    show_runtime("runtime_malloc_array", cudaMallocArray(&runtime_array, &texel, 512, 512, 0));
    fill_and_free();
    show_runtime(
        "runtime_malloc_mipmapped_array",
        cudaMallocMipmappedArray(&runtime_mipmap, &texel, (struct cudaExtent){256, 256, 0}, 9, 0));
}

/* The default run: every call right after a fill. */
static int
run_lazy(CUdevice dev, CUcontext ctx, bool wait)
{
    (void)ctx, (void)wait;
    lazy_calls();
    array_calls();
    fill_and_free();
    show("stack_limit", cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024 + 64));
    graph_calls();
    context_calls(dev);
    return 0;
}

static int
run_eager(CUdevice dev, CUcontext ctx, bool wait)
{
    (void)dev, (void)ctx, (void)wait;
    eager_calls();
    return 0;
}

/* The memory kept, a function of a module loaded before asked for twice (the second: a retry);
 * `wait`: then until standard input closes (watched). */
static int
run_held(CUdevice dev, CUcontext ctx, bool wait)
{
    (void)dev, (void)ctx;
    CUmodule mod = NULL;
    CUfunction f = NULL;
    show("module_load", cuModuleLoad(&mod, image_file));
    fill(true);
    show("held_module_get_function", cuModuleGetFunction(&f, mod, "kernel"));
    show("held_module_get_function", cuModuleGetFunction(&f, mod, "kernel"));
    if (wait) {
        printf("waiting\n");
        fflush(stdout);
        while (getchar() != EOF)
            ;
    }
    return 0;
}

/* The memory kept, a graph launched. */
static int
run_held_graph(CUdevice dev, CUcontext ctx, bool wait)
{
    (void)dev, (void)ctx, (void)wait;
    CUstream stream = NULL;
    if (cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
        return 2;
    CUgraph g = graph_with_memory(stream);
    CUgraphExec exec = instantiated(g);
    fill(true);
    show("held_graph_launch", cuGraphLaunch(exec, stream));
    return 0;
}

/* The memory kept, a context made. */
static int
run_held_context(CUdevice dev, CUcontext ctx, bool wait)
{
    (void)ctx, (void)wait;
    CUcontext own = NULL;
    fill(true);
    show("held_ctx_create", cuCtxCreate(&own, NULL, 0, dev));
    return 0;
}

/* Device 1 freed whole, then a context made for it while device 0's is current. */
static int
run_other_device(CUdevice dev, CUcontext ctx, bool wait)
{
    (void)dev, (void)wait;
    CUdevice other = 0;
    CUcontext other_primary = NULL, own = NULL;
    if (cuDeviceGet(&other, 1) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&other_primary, other) != CUDA_SUCCESS ||
        cuCtxSetCurrent(other_primary) != CUDA_SUCCESS)
        return 2;
    fill_and_free();
    if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return 2;
    show("other_device_ctx_create", cuCtxCreate(&own, NULL, 0, other));
    return 0;
}

/* The card freed but 4 MiB of it, then a kernel's code asked for. */
static int
run_split(CUdevice dev, CUcontext ctx, bool wait)
{
    (void)dev, (void)ctx, (void)wait;
    CUmodule mod = NULL;
    CUfunction f = NULL;
    CUdeviceptr kept = 0;
    show("module_load", cuModuleLoad(&mod, image_file));
    fill_and_free();
    show("split_alloc", cuMemAlloc(&kept, 4 * MIB));
    show("split_module_get_function", cuModuleGetFunction(&f, mod, "kernel"));
    return 0;
}

static const struct {
    const char *name;
    int (*run)(CUdevice dev, CUcontext ctx, bool wait);
} RUNS[] = {
    {"eager", run_eager},
    {"held", run_held},
    {"held_graph", run_held_graph},
    {"held_context", run_held_context},
    {"other_device", run_other_device},
    {"split", run_split},
};

int
main(int argc, char **argv)
{
    int (*run)(CUdevice, CUcontext, bool) = run_lazy;
    for (size_t i = 0; argc > 1 && i < sizeof RUNS / sizeof RUNS[0]; i++)
        if (strcmp(argv[1], RUNS[i].name) == 0)
            run = RUNS[i].run;
    if (run == run_eager)
        setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    find_image(argv[0]);
    CUdevice dev = 0;
    CUcontext ctx = NULL;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return 2;
    return run(dev, ctx, argc > 2 && strcmp(argv[2], "wait") == 0);
}
