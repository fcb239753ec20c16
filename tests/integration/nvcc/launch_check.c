/* launch_check: the simulated runtime's registration and launch entry points called the way
 * nvcc's generated host code calls them, from plain C (so it runs where nvcc is absent): a fat
 * binary with one kernel, a __device__ and a __managed__ variable, <<<>>> configuration, launches
 * good and bad, function and occupancy queries, symbol copies, and unregistration.
 * Prints "launch_check: ok N" (N checks) or "launch_check: FAIL line: what" and exits 1. */
#include <cuda_runtime_api.h>
#include <fatbinary_section.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* crt/host_runtime.h and crt/device_functions.h declare these for C++ only. */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void __cudaUnregisterFatBinary(void **fatCubinHandle);
void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                            const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bDim, dim3 *gDim, int *wSize);
void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                       const char *deviceName, int ext, size_t size, int constant, int global);
void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress, char *deviceAddress,
                              const char *deviceName, int ext, size_t size, int constant,
                              int global);
char __cudaInitModule(void **fatCubinHandle);
unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                     struct CUstream_st *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
                                       void *stream);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                               size_t sharedMem, cudaStream_t stream);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                    size_t sharedMem, cudaStream_t stream);

static int checks;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond)) {                                                                             \
            printf("launch_check: FAIL %d: %s\n", __LINE__, #cond);                                \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define EQ(call, want) CHECK((call) == (want))

/* Host stubs: only their addresses matter. */
static void
kern_stub(void)
{
}

static void
not_registered(void)
{
}

/* What nvcc passes: the stub's address as data (ISO C has no cast for it, so memcpy). */
static const void *
addr_of(void (*fn)(void))
{
    const void *p;
    memcpy(&p, &fn, sizeof p);
    return p;
}

static char device_var[64]; /* a __device__ variable's host shadow */
static int *managed_var;    /* what host code reads a __managed__ int through */
static const dim3 one = {1, 1, 1};

/* A fat binary as nvcc lays it out: header, an sm_80 ELF entry and a compute_86 PTX entry. */
static unsigned long long fatbin[(16 + 2 * (64 + 16)) / 8];

static void
make_fatbin(void)
{
    unsigned char *p = (unsigned char *)fatbin;
    uint32_t magic = 0xBA55ED50u, arch;
    uint16_t version = 1, hsize = 16, kind;
    uint64_t total = 2 * (64 + 16), payload = 16;
    uint32_t ehsize = 64;
    memcpy(p, &magic, 4);
    memcpy(p + 4, &version, 2);
    memcpy(p + 6, &hsize, 2);
    memcpy(p + 8, &total, 8);
    for (int i = 0; i < 2; i++) {
        unsigned char *e = p + 16 + i * (64 + 16);
        kind = i == 0 ? 2 : 1;
        arch = i == 0 ? 80 : 86;
        memcpy(e, &kind, 2);
        memcpy(e + 4, &ehsize, 4);
        memcpy(e + 8, &payload, 8);
        memcpy(e + 28, &arch, 4);
    }
}

static dim3
d3(unsigned x, unsigned y, unsigned z)
{
    dim3 d = {x, y, z};
    return d;
}

int
main(void)
{
    make_fatbin();
    static __fatBinC_Wrapper_t wrapper = {FATBINC_MAGIC, 1, fatbin, NULL};
    void **h = __cudaRegisterFatBinary(&wrapper);
    CHECK(h != NULL && *h == &wrapper);
    __cudaRegisterFunction(h, (const char *)addr_of(kern_stub), (char *)"_Z4kernv", "_Z4kernv", -1,
                           NULL, NULL, NULL, NULL, NULL);
    __cudaRegisterVar(h, device_var, (char *)"device_var", "device_var", 0, sizeof device_var, 0,
                      0);
    __cudaRegisterManagedVar(h, (void **)&managed_var, (char *)"managed_var", "managed_var", 0,
                             sizeof(int), 0, 0);
    __cudaRegisterFatBinaryEnd(h);
    CHECK(__cudaInitModule(h) == 1);
    CHECK(managed_var != NULL && *managed_var == 0);
    *managed_var = 41; /* host code uses a __managed__ variable in place */
    CHECK(*managed_var == 41);

    /* __cudaGetKernel, once per stub in the generated code. */
    cudaKernel_t k = NULL, none = NULL;
    EQ(__cudaGetKernel(&k, addr_of(kern_stub)), cudaSuccess);
    CHECK(k != NULL);
    /* NVIDIA's runtime 13.0 answers an unknown non-NULL function this way (measured). */
    EQ(__cudaGetKernel(&none, addr_of(not_registered)), cudaErrorInvalidResourceHandle);
    CHECK(none == NULL);
    EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);

    /* <<<grid, block, smem, stream>>> then the stub's pop. */
    cudaStream_t s = NULL, got_s = NULL;
    EQ(cudaStreamCreate(&s), cudaSuccess);
    dim3 g, b;
    size_t smem = 0;
    EQ(__cudaPushCallConfiguration(d3(2, 3, 1), d3(32, 4, 1), 128, (struct CUstream_st *)s), 0u);
    EQ(__cudaPopCallConfiguration(&g, &b, &smem, &got_s), cudaSuccess);
    CHECK(g.x == 2 && g.y == 3 && g.z == 1 && b.x == 32 && b.y == 4 && smem == 128 && got_s == s);
    EQ(__cudaPopCallConfiguration(&g, &b, &smem, &got_s), cudaErrorMissingConfiguration);
    EQ(cudaGetLastError(), cudaErrorMissingConfiguration);

    /* Good launches: by handle, by stub, by handle cast to void *, legacy and per-thread. */
    int arg = 5;
    void *args[] = {&arg};
    EQ(__cudaLaunchKernel(k, d3(4, 1, 1), d3(256, 1, 1), args, 0, s), cudaSuccess);
    EQ(__cudaLaunchKernel_ptsz(k, d3(4, 1, 1), d3(256, 1, 1), args, 0, NULL), cudaSuccess);
    EQ(cudaLaunchKernel(addr_of(kern_stub), one, one, args, 0, NULL), cudaSuccess);
    EQ(cudaLaunchKernel((const void *)k, d3(2147483647, 65535, 65535), d3(1024, 1, 1), args, 0,
                        cudaStreamPerThread),
       cudaSuccess);
    /* Cooperative launches go the same way, to the driver's cooperative launch. */
    EQ(cudaLaunchCooperativeKernel(addr_of(kern_stub), d3(4, 1, 1), d3(256, 1, 1), args, 0, s),
       cudaSuccess);
    EQ(cudaLaunchCooperativeKernel((const void *)k, one, one, args, 0, cudaStreamPerThread),
       cudaSuccess);
    EQ(cudaGetLastError(), cudaSuccess);
    EQ(cudaLaunchCooperativeKernel(addr_of(not_registered), one, one, args, 0, NULL),
       cudaErrorInvalidResourceHandle);
    EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);

    /* Unknown function, empty or oversized grids and blocks: what NVIDIA's runtime 13.0 returns
     * with driver 580 (tests/integration/nvcc/real/nvcc_edges.out), not the documented
     * cudaErrorInvalidDeviceFunction and cudaErrorInvalidConfiguration. */
    EQ(cudaLaunchKernel(addr_of(not_registered), one, one, args, 0, NULL),
       cudaErrorInvalidResourceHandle);
    EQ(cudaPeekAtLastError(), cudaErrorInvalidResourceHandle);
    EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    EQ(__cudaLaunchKernel(NULL, one, one, args, 0, NULL), cudaErrorInvalidDeviceFunction);
    const dim3 bad_grids[] = {{0, 1, 1}, {1, 0, 1}, {1, 1, 0}, {1, 65536, 1}, {1, 1, 65536}};
    for (size_t i = 0; i < sizeof bad_grids / sizeof bad_grids[0]; i++)
        EQ(__cudaLaunchKernel(k, bad_grids[i], one, args, 0, NULL), cudaErrorInvalidValue);
    const dim3 bad_blocks[] = {{0, 1, 1}, {1025, 1, 1}, {1, 1025, 1}, {1, 1, 65}, {32, 32, 2}};
    for (size_t i = 0; i < sizeof bad_blocks / sizeof bad_blocks[0]; i++)
        EQ(__cudaLaunchKernel(k, one, bad_blocks[i], args, 0, NULL), cudaErrorInvalidValue);
    EQ(cudaGetLastError(), cudaErrorInvalidValue);
    EQ(cudaGetLastError(), cudaSuccess);

    /* Dynamic shared memory: 48 KiB without opting in, more after cudaFuncSetAttribute. */
    EQ(__cudaLaunchKernel(k, one, one, args, 49152, NULL), cudaSuccess);
    EQ(__cudaLaunchKernel(k, one, one, args, 49153, NULL), cudaErrorInvalidValue);
    EQ(cudaFuncSetAttribute(addr_of(kern_stub), cudaFuncAttributeMaxDynamicSharedMemorySize,
                            100000),
       cudaSuccess);
    EQ(__cudaLaunchKernel(k, one, one, args, 100000, NULL), cudaSuccess);
    EQ(cudaFuncSetAttribute(addr_of(kern_stub), cudaFuncAttributeMaxDynamicSharedMemorySize,
                            300000),
       cudaErrorInvalidValue);
    EQ(cudaFuncSetAttribute(addr_of(not_registered), cudaFuncAttributeMaxDynamicSharedMemorySize,
                            1024),
       cudaErrorInvalidResourceHandle);

    /* A launch on a destroyed stream. */
    cudaStream_t dead = NULL;
    EQ(cudaStreamCreate(&dead), cudaSuccess);
    EQ(cudaStreamDestroy(dead), cudaSuccess);
    EQ(__cudaLaunchKernel(k, one, one, args, 0, dead), cudaErrorInvalidResourceHandle);
    EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);

    /* Function queries: architectures from the fat binary, the attribute set above. */
    struct cudaFuncAttributes fa;
    EQ(cudaFuncGetAttributes(&fa, addr_of(kern_stub)), cudaSuccess);
    CHECK(fa.binaryVersion == 80 && fa.ptxVersion == 86 && fa.maxThreadsPerBlock == 1024);
    CHECK(fa.maxDynamicSharedSizeBytes == 100000 && fa.sharedSizeBytes == 0);
    EQ(cudaFuncGetAttributes(&fa, addr_of(not_registered)), cudaErrorInvalidResourceHandle);
    const char *name = NULL;
    EQ(cudaFuncGetName(&name, addr_of(kern_stub)), cudaSuccess);
    CHECK(name != NULL && strcmp(name, "_Z4kernv") == 0);
    EQ(cudaFuncSetCacheConfig(addr_of(kern_stub), cudaFuncCachePreferShared), cudaSuccess);

    /* Occupancy on the H100-like device: 2048 threads, 32 blocks per SM. */
    int n = -1;
    EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, addr_of(kern_stub), 256, 0), cudaSuccess);
    CHECK(n == 8);
    EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&n, addr_of(kern_stub), 1000, 0,
                                                              cudaOccupancyDisableCachingOverride),
       cudaSuccess);
    CHECK(n == 2);
    EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, addr_of(kern_stub), 32, 0), cudaSuccess);
    CHECK(n == 32);
    EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, addr_of(kern_stub), 2048, 0), cudaSuccess);
    CHECK(n == 0);
    EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, addr_of(not_registered), 256, 0),
       cudaErrorInvalidResourceHandle);
    EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, addr_of(kern_stub), 0, 0),
       cudaErrorInvalidValue);

    int v = 0, count = 0;
    EQ(cudaGetDeviceCount(&count), cudaSuccess);
    EQ(cudaDeviceGetAttribute(&v, cudaDevAttrMaxThreadsPerBlock, 0), cudaSuccess);
    CHECK(v == 1024);
    EQ(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, 0), cudaSuccess);
    CHECK(v == 32);
    EQ(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, count), cudaErrorInvalidDevice);
    EQ(cudaDeviceGetAttribute(NULL, cudaDevAttrWarpSize, 0), cudaErrorInvalidValue);

    /* Symbols: copies in and out at an offset, bounds, directions, device-to-device, async. */
    unsigned char in[16], out[16];
    for (int i = 0; i < 16; i++)
        in[i] = (unsigned char)(i + 1);
    EQ(cudaMemcpyToSymbol(device_var, in, 16, 8, cudaMemcpyHostToDevice), cudaSuccess);
    memset(out, 0, sizeof out);
    EQ(cudaMemcpyFromSymbol(out, device_var, 16, 8, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(memcmp(in, out, 16) == 0);
    EQ(cudaMemcpyFromSymbol(out, device_var, 8, 0, cudaMemcpyDefault), cudaSuccess);
    CHECK(out[0] == 0 && out[7] == 0); /* variables start zeroed */
    EQ(cudaMemcpyToSymbol(device_var, in, 8, 60, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EQ(cudaMemcpyToSymbol(device_var, in, 8, 65, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EQ(cudaMemcpyToSymbol(device_var, in, 8, 0, cudaMemcpyDeviceToHost),
       cudaErrorInvalidMemcpyDirection);
    EQ(cudaMemcpyFromSymbol(out, device_var, 8, 0, cudaMemcpyHostToDevice),
       cudaErrorInvalidMemcpyDirection);
    EQ(cudaMemcpyToSymbol(out, in, 8, 0, cudaMemcpyHostToDevice), cudaErrorInvalidSymbol);
    EQ(cudaGetLastError(), cudaErrorInvalidSymbol);
    void *addr = NULL;
    size_t size = 0;
    EQ(cudaGetSymbolAddress(&addr, device_var), cudaSuccess);
    EQ(cudaGetSymbolSize(&size, device_var), cudaSuccess);
    CHECK(addr != NULL && addr != (void *)device_var && size == sizeof device_var);
    CHECK(memcmp((unsigned char *)addr + 8, in, 16) == 0);
    EQ(cudaGetSymbolSize(&size, managed_var), cudaSuccess); /* found by its storage too */
    CHECK(size == sizeof(int));
    unsigned char *dev = NULL;
    EQ(cudaMalloc((void **)&dev, 64), cudaSuccess);
    EQ(cudaMemset(dev, 0xab, 64), cudaSuccess);
    EQ(cudaMemcpyToSymbol(device_var, dev, 4, 0, cudaMemcpyDeviceToDevice), cudaSuccess);
    EQ(cudaMemcpyFromSymbolAsync(out, device_var, 4, 0, cudaMemcpyDeviceToHost, s), cudaSuccess);
    EQ(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(out[0] == 0xab && out[3] == 0xab);
    EQ(cudaMemcpyToSymbolAsync(device_var, in, 16, 0, cudaMemcpyHostToDevice, s), cudaSuccess);
    EQ(cudaMemcpyFromSymbol(dev, device_var, 16, 0, cudaMemcpyDeviceToDevice), cudaSuccess);
    EQ(cudaMemcpy(out, dev, 16, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK(memcmp(in, out, 16) == 0);
    EQ(cudaFree(dev), cudaSuccess);

    /* After unregistration (atexit in generated code) nothing of the module is left. */
    __cudaUnregisterFatBinary(h);
    EQ(cudaLaunchKernel(addr_of(kern_stub), one, one, args, 0, NULL),
       cudaErrorInvalidResourceHandle);
    EQ(cudaMemcpyToSymbol(device_var, in, 1, 0, cudaMemcpyHostToDevice), cudaErrorInvalidSymbol);
    EQ(cudaStreamDestroy(s), cudaSuccess);
    printf("launch_check: ok %d\n", checks);
    return 0;
}
