/* runtime_check: a plain program against the runtime API (built by the tests at test time with
 * `gcc runtime_check.c -I$CUDA/include -L<sim runtime> -lcudart`, once as is and once with
 * -DCUDA_API_PER_THREAD_DEFAULT_STREAM so it calls the _ptsz/_ptds exports). It checks data round
 * trips and the runtime's documented error codes, and prints one line: "runtime_check: ok N". */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks;

#define EXPECT(what, got, want)                                                                    \
    do {                                                                                           \
        long long g_ = (long long)(got), w_ = (long long)(want);                                   \
        checks++;                                                                                  \
        if (g_ != w_) {                                                                            \
            printf("runtime_check: FAIL %s: got %lld want %lld (line %d)\n", what, g_, w_,         \
                   __LINE__);                                                                      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void
round_trip(void)
{
    enum { N = 1 << 20 };
    unsigned char *host = malloc(N), *back = malloc(N);
    for (int i = 0; i < N; i++)
        host[i] = (unsigned char)(i * 7 + 3);
    void *a = NULL, *b = NULL;
    EXPECT("cudaMalloc", cudaMalloc(&a, N), cudaSuccess);
    EXPECT("cudaMalloc", cudaMalloc(&b, N), cudaSuccess);
    EXPECT("512-byte alignment", (uintptr_t)a % 512, 0);
    EXPECT("H2D", cudaMemcpy(a, host, N, cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT("D2D", cudaMemcpy(b, a, N, cudaMemcpyDeviceToDevice), cudaSuccess);
    EXPECT("D2H", cudaMemcpy(back, b, N, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT("round trip data", memcmp(host, back, N), 0);
    EXPECT("memset", cudaMemset(b, 0x5A, N / 2), cudaSuccess);
    EXPECT("D2H default", cudaMemcpy(back, b, N, cudaMemcpyDefault), cudaSuccess);
    EXPECT("memset head", back[0] == 0x5A && back[N / 2 - 1] == 0x5A, 1);
    EXPECT("memset stops", back[N / 2], host[N / 2]);

    /* Streams and events: an async memset then an async copy on a created stream. */
    cudaStream_t s;
    cudaEvent_t ev;
    EXPECT("stream create", cudaStreamCreate(&s), cudaSuccess);
    EXPECT("event create", cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
    EXPECT("memsetAsync", cudaMemsetAsync(a, 0xC3, N, s), cudaSuccess);
    EXPECT("memcpyAsync", cudaMemcpyAsync(back, a, N, cudaMemcpyDeviceToHost, s), cudaSuccess);
    EXPECT("event record", cudaEventRecord(ev, s), cudaSuccess);
    EXPECT("event sync", cudaEventSynchronize(ev), cudaSuccess);
    EXPECT("event query", cudaEventQuery(ev), cudaSuccess);
    EXPECT("async data", back[0] == 0xC3 && back[N - 1] == 0xC3, 1);
    EXPECT("wait event", cudaStreamWaitEvent(0, ev, 0), cudaSuccess);
    void *c = NULL;
    EXPECT("mallocAsync", cudaMallocAsync(&c, 4096, s), cudaSuccess);
    EXPECT("mallocAsync ptr", c != NULL, 1);
    EXPECT("freeAsync", cudaFreeAsync(c, s), cudaSuccess);
    EXPECT("stream sync", cudaStreamSynchronize(s), cudaSuccess);
    EXPECT("stream query", cudaStreamQuery(s), cudaSuccess);
    EXPECT("event destroy", cudaEventDestroy(ev), cudaSuccess);
    EXPECT("stream destroy", cudaStreamDestroy(s), cudaSuccess);
    EXPECT("cudaFree", cudaFree(a), cudaSuccess);
    EXPECT("cudaFree", cudaFree(b), cudaSuccess);
    free(host);
    free(back);
}

static void
error_codes(void)
{
    void *p = (void *)0x1;
    EXPECT("cudaMalloc(0)", cudaMalloc(&p, 0), cudaSuccess);
    EXPECT("cudaMalloc(0) ptr", p == NULL, 1);
    EXPECT("cudaFree(NULL)", cudaFree(NULL), cudaSuccess);
    EXPECT("cudaMalloc(NULL out)", cudaMalloc(NULL, 16), cudaErrorInvalidValue);
    EXPECT("last error after invalid value", cudaGetLastError(), cudaErrorInvalidValue);
    EXPECT("last error cleared", cudaGetLastError(), cudaSuccess);

    int local;
    EXPECT("free of unknown pointer", cudaFree(&local), cudaErrorInvalidValue);
    void *q = NULL;
    EXPECT("cudaMalloc", cudaMalloc(&q, 1000), cudaSuccess);
    EXPECT("cudaFree", cudaFree(q), cudaSuccess);
    EXPECT("double free", cudaFree(q), cudaErrorInvalidValue);
    (void)cudaGetLastError();

    size_t free_b = 0, total_b = 0;
    EXPECT("memGetInfo", cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
    EXPECT("free <= total", free_b <= total_b && total_b > 0, 1);
    void *big = (void *)0x1;
    EXPECT("OOM", cudaMalloc(&big, total_b + ((size_t)1 << 30)), cudaErrorMemoryAllocation);
    EXPECT("peek OOM", cudaPeekAtLastError(), cudaErrorMemoryAllocation);
    EXPECT("get OOM", cudaGetLastError(), cudaErrorMemoryAllocation);
    EXPECT("OOM not sticky", cudaGetLastError(), cudaSuccess);
    EXPECT("malloc after OOM", cudaMalloc(&q, 4096), cudaSuccess);
    EXPECT("free after OOM", cudaFree(q), cudaSuccess);

    char buf[16];
    EXPECT("bad memcpy kind", cudaMemcpy(buf, buf, 16, (enum cudaMemcpyKind)42),
           cudaErrorInvalidMemcpyDirection);
    EXPECT("bad device", cudaSetDevice(99), cudaErrorInvalidDevice);
    (void)cudaGetLastError();
    EXPECT("error name",
           strcmp(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation"), 0);
    EXPECT("error string", strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument"),
           0);
    EXPECT("unknown error name",
           strcmp(cudaGetErrorName((cudaError_t)12345), "unrecognized error code"), 0);
}

static void
devices_and_entry_points(void)
{
    int n = 0, dev = -1, v = 0;
    EXPECT("device count", cudaGetDeviceCount(&n), cudaSuccess);
    EXPECT("device count >= 1", n >= 1, 1);
    EXPECT("set device", cudaSetDevice(0), cudaSuccess);
    EXPECT("get device", cudaGetDevice(&dev), cudaSuccess);
    EXPECT("device 0", dev, 0);
    EXPECT("driver version", cudaDriverGetVersion(&v), cudaSuccess);
    EXPECT("driver version value", v, 13000);
    EXPECT("runtime version", cudaRuntimeGetVersion(&v), cudaSuccess);
    EXPECT("runtime version value", v, 13000);
    struct cudaDeviceProp prop;
    EXPECT("properties", cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    EXPECT("properties name", prop.name[0] != '\0', 1);
    size_t free_b = 0, total_b = 0;
    EXPECT("memGetInfo", cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
    EXPECT("totalGlobalMem", prop.totalGlobalMem, total_b);
    EXPECT("properties bad device", cudaGetDeviceProperties(&prop, n), cudaErrorInvalidDevice);
    (void)cudaGetLastError();
    if (n >= 2) { /* the current device is per thread and picks the primary context */
        void *p0 = NULL, *p1 = NULL;
        EXPECT("malloc on 0", cudaMalloc(&p0, 4096), cudaSuccess);
        EXPECT("set device 1", cudaSetDevice(1), cudaSuccess);
        EXPECT("get device", cudaGetDevice(&dev), cudaSuccess);
        EXPECT("device 1", dev, 1);
        EXPECT("malloc on 1", cudaMalloc(&p1, 4096), cudaSuccess);
        EXPECT("distinct devices, distinct memory", p0 != p1, 1);
        EXPECT("free on 1", cudaFree(p1), cudaSuccess);
        EXPECT("set device 0", cudaSetDevice(0), cudaSuccess);
        EXPECT("free on 0", cudaFree(p0), cudaSuccess);
    }

    /* Entry points come through the driver's cuGetProcAddress with the version asked for. */
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult st = cudaDriverEntryPointSymbolNotFound;
    EXPECT("entry point", cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 3020, 0, &st),
           cudaSuccess);
    EXPECT("entry point status", st, cudaDriverEntryPointSuccess);
    CUdeviceptr d = 0;
    PFN_cuMemAlloc_v3020 alloc;
    memcpy(&alloc, &fn, sizeof fn);
    EXPECT("driver cuMemAlloc via entry point", alloc(&d, 4096), CUDA_SUCCESS);
    EXPECT("runtime frees driver memory", cudaFree((void *)(uintptr_t)d), cudaSuccess);
    EXPECT("unknown entry point",
           cudaGetDriverEntryPointByVersion("cuNoSuchThing", &fn, 13000, 0, &st), cudaSuccess);
    EXPECT("unknown entry point ptr", fn == NULL, 1);
    EXPECT("unknown entry point status", st, cudaDriverEntryPointSymbolNotFound);
}

static void
other_allocations(void)
{
    void *p = NULL;
    size_t pitch = 0;
    EXPECT("mallocPitch", cudaMallocPitch(&p, &pitch, 1000, 7), cudaSuccess);
    EXPECT("pitch >= width", pitch >= 1000, 1);
    EXPECT("free pitch", cudaFree(p), cudaSuccess);
    struct cudaPitchedPtr pp;
    EXPECT("malloc3D", cudaMalloc3D(&pp, (struct cudaExtent){300, 4, 5}), cudaSuccess);
    EXPECT("malloc3D pitch", pp.pitch >= 300 && pp.xsize == 300 && pp.ysize == 4, 1);
    EXPECT("free 3D", cudaFree(pp.ptr), cudaSuccess);
    EXPECT("managed", cudaMallocManaged(&p, 8192, cudaMemAttachGlobal), cudaSuccess);
    memset(p, 0x42, 8192); /* managed memory is host-accessible */
    EXPECT("free managed", cudaFree(p), cudaSuccess);
    EXPECT("managed size 0", cudaMallocManaged(&p, 0, cudaMemAttachGlobal), cudaErrorInvalidValue);
    (void)cudaGetLastError();
    EXPECT("mallocHost", cudaMallocHost(&p, 10000), cudaSuccess);
    memset(p, 1, 10000);
    EXPECT("freeHost", cudaFreeHost(p), cudaSuccess);
    cudaMemPool_t pool = NULL;
    EXPECT("default pool", cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
    EXPECT("fromPool", cudaMallocFromPoolAsync(&p, 65536, pool, 0), cudaSuccess);
    EXPECT("free fromPool", cudaFreeAsync(p, 0), cudaSuccess);
    EXPECT("device sync", cudaDeviceSynchronize(), cudaSuccess);
    EXPECT("device reset", cudaDeviceReset(), cudaSuccess);
    EXPECT("malloc after reset", cudaMalloc(&p, 4096), cudaSuccess);
    EXPECT("free after reset", cudaFree(p), cudaSuccess);
}

int
main(void)
{
    round_trip();
    error_codes();
    devices_and_entry_points();
    other_allocations();
    EXPECT("no error left", cudaGetLastError(), cudaSuccess);
    printf("runtime_check: ok %d\n", checks);
    return 0;
}
