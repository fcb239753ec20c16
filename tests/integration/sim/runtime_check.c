/* runtime_check: a plain program against the runtime API (built by the tests at test time with
 * `gcc runtime_check.c -I$CUDA/include -L<sim runtime> -lcudart`, once as is and once with
 * -DCUDA_API_PER_THREAD_DEFAULT_STREAM so it calls the _ptsz/_ptds exports). It checks data round
 * trips and the runtime's documented error codes, and prints one line: "runtime_check: ok N". */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <stdatomic.h>
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

/* Expects `call` to fail with `err`, recorded as the thread's last error (then cleared). */
#define EXPECT_ERR(what, call, err)                                                                \
    do {                                                                                           \
        EXPECT(what, call, err);                                                                   \
        EXPECT(what " (last error)", cudaGetLastError(), err);                                     \
    } while (0)

static atomic_int gate; /* a host function waits on it, holding its stream up */

static void CUDART_CB
wait_for_gate(void *unused)
{
    (void)unused;
    while (!atomic_load(&gate))
        ;
}

static void
events_timing(void)
{
    cudaStream_t s;
    cudaEvent_t start, end, untimed;
    float ms = -1;
    void *d = NULL;
    EXPECT("stream create", cudaStreamCreate(&s), cudaSuccess);
    EXPECT("event create", cudaEventCreate(&start), cudaSuccess);
    EXPECT("event create", cudaEventCreate(&end), cudaSuccess);
    EXPECT("event create", cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
    EXPECT_ERR("elapsed before any record", cudaEventElapsedTime(&ms, start, end),
               cudaErrorInvalidResourceHandle);
    EXPECT("malloc", cudaMalloc(&d, 1 << 15), cudaSuccess);
    EXPECT("record start", cudaEventRecord(start, s), cudaSuccess);
    EXPECT("memsetAsync", cudaMemsetAsync(d, 1, 1 << 15, s), cudaSuccess);
    EXPECT("record end with flags", cudaEventRecordWithFlags(end, s, cudaEventRecordDefault),
           cudaSuccess);
    EXPECT("event sync", cudaEventSynchronize(end), cudaSuccess);
    EXPECT("elapsed", cudaEventElapsedTime(&ms, start, end), cudaSuccess);
    EXPECT("elapsed >= 0", ms >= 0.0f, 1);
    EXPECT_ERR("elapsed NULL", cudaEventElapsedTime(NULL, start, end), cudaErrorInvalidValue);
    EXPECT_ERR("record bad flags", cudaEventRecordWithFlags(end, s, 0x100), cudaErrorInvalidValue);
    EXPECT("record untimed", cudaEventRecord(untimed, s), cudaSuccess);
    EXPECT("sync", cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_ERR("elapsed of an untimed event", cudaEventElapsedTime(&ms, start, untimed),
               cudaErrorInvalidResourceHandle);
    /* An end event the stream has not reached yet: not ready, and not an error. */
    atomic_store(&gate, 0);
    EXPECT("hold the stream", cudaLaunchHostFunc(s, wait_for_gate, NULL), cudaSuccess);
    EXPECT("record behind it", cudaEventRecordWithFlags(end, s, 0), cudaSuccess);
    EXPECT("elapsed not ready", cudaEventElapsedTime(&ms, start, end), cudaErrorNotReady);
    EXPECT("not ready is not recorded", cudaGetLastError(), cudaSuccess);
    atomic_store(&gate, 1);
    EXPECT("sync", cudaStreamSynchronize(s), cudaSuccess);
    EXPECT("elapsed once done", cudaEventElapsedTime(&ms, start, end), cudaSuccess);
    EXPECT("free", cudaFree(d), cudaSuccess);
    EXPECT("event destroy", cudaEventDestroy(start), cudaSuccess);
    EXPECT("event destroy", cudaEventDestroy(end), cudaSuccess);
    EXPECT("event destroy", cudaEventDestroy(untimed), cudaSuccess);
    EXPECT("stream destroy", cudaStreamDestroy(s), cudaSuccess);
}

/* What each stream callback saw, in the order they ran. */
static struct {
    int n;
    int tag[8];
    cudaStream_t stream[8];
    cudaError_t status[8];
    unsigned char seen[8]; /* first byte of callback_host when it ran */
} callbacks;
static unsigned char callback_host[256];

static void CUDART_CB
record_callback(cudaStream_t stream, cudaError_t status, void *data)
{
    int i = callbacks.n++;
    if (i < 8) {
        callbacks.tag[i] = *(int *)data;
        callbacks.stream[i] = stream;
        callbacks.status[i] = status;
        callbacks.seen[i] = callback_host[0];
    }
}

static void
streams_extra(void)
{
    int least = 1, greatest = 1, prio = 1;
    unsigned int flags = 99;
    cudaStream_t s, hi, clamped;
    EXPECT("priority range", cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
    EXPECT("least priority", least, 0);
    EXPECT("greatest priority", greatest, -5);
    EXPECT("priority range, NULLs", cudaDeviceGetStreamPriorityRange(NULL, NULL), cudaSuccess);
    EXPECT("create with priority", cudaStreamCreateWithPriority(&hi, cudaStreamNonBlocking, -3),
           cudaSuccess);
    EXPECT("get priority", cudaStreamGetPriority(hi, &prio), cudaSuccess);
    EXPECT("priority kept", prio, -3);
    EXPECT("get flags", cudaStreamGetFlags(hi, &flags), cudaSuccess);
    EXPECT("non-blocking flag", flags, cudaStreamNonBlocking);
    EXPECT("create beyond the range", cudaStreamCreateWithPriority(&clamped, 0, -100), cudaSuccess);
    EXPECT("get priority", cudaStreamGetPriority(clamped, &prio), cudaSuccess);
    EXPECT("priority clamped", prio, -5);
    EXPECT("get flags", cudaStreamGetFlags(clamped, &flags), cudaSuccess);
    EXPECT("blocking flag", flags, cudaStreamDefault);
    EXPECT("default stream priority", cudaStreamGetPriority(0, &prio), cudaSuccess);
    EXPECT("default stream priority value", prio, 0);
    EXPECT_ERR("get priority NULL", cudaStreamGetPriority(hi, NULL), cudaErrorInvalidValue);
    EXPECT_ERR("get flags NULL", cudaStreamGetFlags(hi, NULL), cudaErrorInvalidValue);
    EXPECT_ERR("create with priority NULL", cudaStreamCreateWithPriority(NULL, 0, 0),
               cudaErrorInvalidValue);
    EXPECT_ERR("create with priority, bad flags", cudaStreamCreateWithPriority(&s, 0x10, 0),
               cudaErrorInvalidValue);
    EXPECT("stream destroy", cudaStreamDestroy(hi), cudaSuccess);
    EXPECT("stream destroy", cudaStreamDestroy(clamped), cudaSuccess);

    /* Callbacks run in stream order, after the work queued before them, with their arguments. */
    static int tags[3] = {1, 2, 3};
    void *d = NULL;
    EXPECT("stream create", cudaStreamCreate(&s), cudaSuccess);
    EXPECT("malloc", cudaMalloc(&d, sizeof callback_host), cudaSuccess);
    memset(callback_host, 0, sizeof callback_host);
    EXPECT("memsetAsync", cudaMemsetAsync(d, 0xAB, sizeof callback_host, s), cudaSuccess);
    EXPECT("callback 1", cudaStreamAddCallback(s, record_callback, &tags[0], 0), cudaSuccess);
    EXPECT("copy back",
           cudaMemcpyAsync(callback_host, d, sizeof callback_host, cudaMemcpyDeviceToHost, s),
           cudaSuccess);
    EXPECT("callback 2", cudaStreamAddCallback(s, record_callback, &tags[1], 0), cudaSuccess);
    EXPECT("sync", cudaStreamSynchronize(s), cudaSuccess);
    /* After s is done: a per-thread default stream does not wait for s. */
    EXPECT("callback on stream 0", cudaStreamAddCallback(0, record_callback, &tags[2], 0),
           cudaSuccess);
    EXPECT("sync 0", cudaStreamSynchronize(0), cudaSuccess);
    EXPECT("callbacks ran", callbacks.n, 3);
    EXPECT("callback order", callbacks.tag[0] * 100 + callbacks.tag[1] * 10 + callbacks.tag[2],
           123);
    EXPECT("callback stream", callbacks.stream[0] == s && callbacks.stream[1] == s, 1);
    EXPECT("callback stream 0", callbacks.stream[2] == NULL, 1);
    EXPECT("callback status", callbacks.status[0] | callbacks.status[1], cudaSuccess);
    EXPECT("callback 1 before the copy", callbacks.seen[0], 0);
    EXPECT("callback 2 after the copy", callbacks.seen[1], 0xAB);
    EXPECT_ERR("callback flags", cudaStreamAddCallback(s, record_callback, &tags[0], 1),
               cudaErrorInvalidValue);
    EXPECT_ERR("callback NULL", cudaStreamAddCallback(s, NULL, NULL, 0), cudaErrorInvalidValue);
    EXPECT("callbacks refused do not run", callbacks.n, 3);
    EXPECT("free", cudaFree(d), cudaSuccess);
    EXPECT("stream destroy", cudaStreamDestroy(s), cudaSuccess);
}

static void
copies_2d(void)
{
    enum { W = 100, H = 8, SPITCH = 128, DPITCH = 112 };
    unsigned char src[SPITCH * H], back[DPITCH * H], *d = NULL, *e = NULL;
    size_t pitch = 0, pitch_e = 0;
    for (int i = 0; i < SPITCH * H; i++)
        src[i] = (unsigned char)(i * 13 + 1);
    memset(back, 0x77, sizeof back);
    EXPECT("mallocPitch", cudaMallocPitch((void **)&d, &pitch, W, H), cudaSuccess);
    EXPECT("mallocPitch", cudaMallocPitch((void **)&e, &pitch_e, W, H), cudaSuccess);
    EXPECT("2D H2D", cudaMemcpy2D(d, pitch, src, SPITCH, W, H, cudaMemcpyHostToDevice),
           cudaSuccess);
    EXPECT("2D memset", cudaMemset2D(d + 10, pitch, 0xEE, 20, 3), cudaSuccess);
    cudaStream_t s;
    EXPECT("stream create", cudaStreamCreate(&s), cudaSuccess);
    EXPECT("2D memsetAsync", cudaMemset2DAsync(d + pitch * 5 + 90, pitch, 0x11, 10, 2, s),
           cudaSuccess);
    EXPECT("2D D2D async",
           cudaMemcpy2DAsync(e, pitch_e, d, pitch, W, H, cudaMemcpyDeviceToDevice, s), cudaSuccess);
    EXPECT("2D D2H async", cudaMemcpy2DAsync(back, DPITCH, e, pitch_e, W, H, cudaMemcpyDefault, s),
           cudaSuccess);
    EXPECT("sync", cudaStreamSynchronize(s), cudaSuccess);
    int wrong = 0;
    for (int r = 0; r < H; r++)
        for (int c = 0; c < DPITCH; c++) {
            int want = c >= W                       ? 0x77 /* beyond the width: untouched */
                       : r < 3 && c >= 10 && c < 30 ? 0xEE
                       : r >= 5 && r < 7 && c >= 90 ? 0x11
                                                    : src[r * SPITCH + c];
            wrong += back[r * DPITCH + c] != want;
        }
    EXPECT("2D data, pitches and padding", wrong, 0);
    EXPECT("2D width 0", cudaMemcpy2D(d, pitch, src, SPITCH, 0, H, cudaMemcpyHostToDevice),
           cudaSuccess);
    EXPECT_ERR("2D width > spitch", cudaMemcpy2D(d, pitch, src, 50, W, H, cudaMemcpyHostToDevice),
               cudaErrorInvalidPitchValue);
    EXPECT_ERR("2D width > dpitch", cudaMemcpy2D(back, 50, d, pitch, W, H, cudaMemcpyDeviceToHost),
               cudaErrorInvalidPitchValue);
    EXPECT_ERR("2D bad kind", cudaMemcpy2D(d, pitch, src, SPITCH, W, H, (enum cudaMemcpyKind)9),
               cudaErrorInvalidMemcpyDirection);
    /* Not "past the allocation": under a caching allocator the block lies inside a larger one. */
    EXPECT_ERR("2D to host memory as device memory",
               cudaMemcpy2D(back, DPITCH, src, SPITCH, W, H, cudaMemcpyHostToDevice),
               cudaErrorInvalidValue);
    EXPECT_ERR("2D memset width > pitch", cudaMemset2D(d, 50, 0, W, 2), cudaErrorInvalidValue);
    EXPECT_ERR("2D memset of host memory", cudaMemset2D(back, DPITCH, 0, W, 2),
               cudaErrorInvalidValue);
    EXPECT("free", cudaFree(d), cudaSuccess);
    EXPECT("free", cudaFree(e), cudaSuccess);
    EXPECT("stream destroy", cudaStreamDestroy(s), cudaSuccess);
}

/* On two devices (SIMCUDA_DEVICES=2) the copies cross them; on one they stay on it. */
static void
copies_peer(void)
{
    enum { N = 1 << 17 }; /* sizes other than 64 KiB: test_runtime_check.py counts those */
    int n = 0;
    EXPECT("device count", cudaGetDeviceCount(&n), cudaSuccess);
    int other = n >= 2 ? 1 : 0;
    unsigned char *host = malloc(N), *back = malloc(N);
    for (int i = 0; i < N; i++)
        host[i] = (unsigned char)(i * 31 + 5);
    void *d0 = NULL, *d0b = NULL, *d1 = NULL;
    EXPECT("set device", cudaSetDevice(other), cudaSuccess);
    EXPECT("malloc on the other device", cudaMalloc(&d1, N), cudaSuccess);
    EXPECT("set device 0", cudaSetDevice(0), cudaSuccess);
    EXPECT("malloc", cudaMalloc(&d0, N), cudaSuccess);
    EXPECT("malloc", cudaMalloc(&d0b, N), cudaSuccess);
    EXPECT("H2D", cudaMemcpy(d0, host, N, cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT("peer copy", cudaMemcpyPeer(d1, other, d0, 0, N), cudaSuccess);
    cudaStream_t s;
    EXPECT("stream create", cudaStreamCreate(&s), cudaSuccess);
    EXPECT("peer copy async", cudaMemcpyPeerAsync(d0b, 0, d1, other, N, s), cudaSuccess);
    EXPECT("D2H", cudaMemcpyAsync(back, d0b, N, cudaMemcpyDeviceToHost, s), cudaSuccess);
    EXPECT("sync", cudaStreamSynchronize(s), cudaSuccess);
    EXPECT("peer copies data", memcmp(host, back, N), 0);
    EXPECT("peer copy of 0 bytes", cudaMemcpyPeer(d1, other, d0, 0, 0), cudaSuccess);
    EXPECT_ERR("peer copy, bad device", cudaMemcpyPeer(d1, n, d0, 0, N), cudaErrorInvalidDevice);
    EXPECT_ERR("peer copy, NULL", cudaMemcpyPeer(NULL, other, d0, 0, N), cudaErrorInvalidValue);
    EXPECT_ERR("peer copy to host memory", cudaMemcpyPeer(back, other, d0, 0, N),
               cudaErrorInvalidValue);
    if (n >= 2)
        EXPECT_ERR("peer copy, memory of another device", cudaMemcpyPeer(d1, 0, d0, 0, N),
                   cudaErrorInvalidValue);
    EXPECT("free", cudaFree(d0), cudaSuccess);
    EXPECT("free", cudaFree(d0b), cudaSuccess);
    EXPECT("free", cudaFree(d1), cudaSuccess);
    EXPECT("stream destroy", cudaStreamDestroy(s), cudaSuccess);
    free(host);
    free(back);
}

static void
host_memory(void)
{
    unsigned int flags = 0;
    void *h = NULL, *dp = NULL;
    struct cudaPointerAttributes attr;
    EXPECT("hostAlloc", cudaHostAlloc(&h, 8192, cudaHostAllocMapped | cudaHostAllocPortable),
           cudaSuccess);
    EXPECT("host flags", cudaHostGetFlags(&flags, h), cudaSuccess);
    EXPECT("host flags value", flags, cudaHostAllocMapped | cudaHostAllocPortable);
    EXPECT("host flags inside", cudaHostGetFlags(&flags, (char *)h + 100), cudaSuccess);
    EXPECT("device pointer", cudaHostGetDevicePointer(&dp, h, 0), cudaSuccess);
    EXPECT("device pointer is the host address", dp == h, 1);
    EXPECT_ERR("device pointer flags", cudaHostGetDevicePointer(&dp, h, 1), cudaErrorInvalidValue);
    EXPECT_ERR("hostAlloc bad flags", cudaHostAlloc(&dp, 64, 0x100), cudaErrorInvalidValue);
    EXPECT_ERR("unregister allocated memory", cudaHostUnregister(h),
               cudaErrorHostMemoryNotRegistered);

    enum { N = 1 << 15 };
    unsigned char *buf = malloc(N), *d = NULL;
    memset(buf, 0x3C, N);
    EXPECT("attributes before", cudaPointerGetAttributes(&attr, buf), cudaSuccess);
    EXPECT("unregistered", attr.type, cudaMemoryTypeUnregistered);
    EXPECT("register", cudaHostRegister(buf, N, cudaHostRegisterDefault), cudaSuccess);
    EXPECT("attributes", cudaPointerGetAttributes(&attr, buf + 1000), cudaSuccess);
    EXPECT("registered is host memory", attr.type, cudaMemoryTypeHost);
    EXPECT("host pointer", attr.hostPointer == buf + 1000, 1);
    EXPECT("registered device pointer", cudaHostGetDevicePointer(&dp, buf, 0), cudaSuccess);
    EXPECT("registered device pointer value", dp == buf, 1);
    EXPECT_ERR("no flags for registered memory", cudaHostGetFlags(&flags, buf),
               cudaErrorInvalidValue);
    EXPECT_ERR("register overlapping", cudaHostRegister(buf + 4096, 4096, 0),
               cudaErrorHostMemoryAlreadyRegistered);
    EXPECT_ERR("register bad flags", cudaHostRegister(buf, N, 0x100), cudaErrorInvalidValue);
    EXPECT_ERR("register size 0", cudaHostRegister(buf, 0, 0), cudaErrorInvalidValue);
    EXPECT("malloc", cudaMalloc((void **)&d, N), cudaSuccess);
    EXPECT("copy from registered memory", cudaMemcpy(d, buf, N, cudaMemcpyHostToDevice),
           cudaSuccess);
    EXPECT("copy back", cudaMemcpy(h, d + N - 8192, 8192, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT("registered data", ((unsigned char *)h)[8191], 0x3C);
    EXPECT_ERR("unregister inside", cudaHostUnregister(buf + 1), cudaErrorHostMemoryNotRegistered);
    EXPECT("unregister", cudaHostUnregister(buf), cudaSuccess);
    EXPECT_ERR("unregister twice", cudaHostUnregister(buf), cudaErrorHostMemoryNotRegistered);
    EXPECT("attributes after", cudaPointerGetAttributes(&attr, buf), cudaSuccess);
    EXPECT("unregistered again", attr.type, cudaMemoryTypeUnregistered);
    EXPECT("free", cudaFree(d), cudaSuccess);
    EXPECT("freeHost", cudaFreeHost(h), cudaSuccess);
    free(buf);
}

static unsigned long long
pool_attr(cudaMemPool_t pool, enum cudaMemPoolAttr attr)
{
    unsigned long long v = 12345;
    EXPECT("pool get attribute", cudaMemPoolGetAttribute(pool, attr, &v), cudaSuccess);
    return v;
}

static void
pools(void)
{
    int n = 0;
    EXPECT("device count", cudaGetDeviceCount(&n), cudaSuccess);
    cudaMemPool_t def = NULL, cur = NULL, pool = NULL;
    EXPECT("default pool", cudaDeviceGetDefaultMemPool(&def, 0), cudaSuccess);
    EXPECT("current pool", cudaDeviceGetMemPool(&cur, 0), cudaSuccess);
    EXPECT("current is default", cur == def, 1);
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    EXPECT("pool create", cudaMemPoolCreate(&pool, &props), cudaSuccess);
    unsigned long long threshold = 1 << 20;
    EXPECT("set release threshold",
           cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), cudaSuccess);
    EXPECT("release threshold", pool_attr(pool, cudaMemPoolAttrReleaseThreshold), 1 << 20);
    int reuse = 0;
    EXPECT("reuse default",
           cudaMemPoolGetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &reuse), cudaSuccess);
    EXPECT("reuse on by default", reuse, 1);
    reuse = 0;
    EXPECT("reuse off", cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &reuse),
           cudaSuccess);
    reuse = 1;
    EXPECT("reuse get", cudaMemPoolGetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &reuse),
           cudaSuccess);
    EXPECT("reuse kept", reuse, 0);
    EXPECT("other pool untouched",
           cudaMemPoolGetAttribute(def, cudaMemPoolReuseAllowOpportunistic, &reuse), cudaSuccess);
    EXPECT("other pool reuse", reuse, 1);

    /* The current pool is what cudaDeviceGetMemPool answers until it is destroyed. Which pool
     * cudaMallocAsync then uses is not checked here: under cuprof's cache the shim serves it. */
    EXPECT("set pool", cudaDeviceSetMemPool(0, pool), cudaSuccess);
    EXPECT("current pool", cudaDeviceGetMemPool(&cur, 0), cudaSuccess);
    EXPECT("current is set", cur == pool, 1);
    EXPECT("pool unused", pool_attr(pool, cudaMemPoolAttrUsedMemCurrent), 0);
    EXPECT("reserved = used", pool_attr(pool, cudaMemPoolAttrReservedMemCurrent), 0);
    unsigned long long zero = 0, five = 5;
    EXPECT("reset high mark", cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero),
           cudaSuccess);
    EXPECT("high mark reset", pool_attr(pool, cudaMemPoolAttrUsedMemHigh), 0);
    EXPECT_ERR("high mark set to 5",
               cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &five),
               cudaErrorInvalidValue);
    EXPECT_ERR("attribute NULL", cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, NULL),
               cudaErrorInvalidValue);
    EXPECT("trim", cudaMemPoolTrimTo(pool, 0), cudaSuccess);
    EXPECT("pool destroy", cudaMemPoolDestroy(pool), cudaSuccess);
    EXPECT("current pool", cudaDeviceGetMemPool(&cur, 0), cudaSuccess);
    EXPECT("back to the default pool", cur == def, 1);
    EXPECT_ERR("destroy the default pool", cudaMemPoolDestroy(def), cudaErrorInvalidValue);
    EXPECT_ERR("get pool, bad device", cudaDeviceGetMemPool(&cur, n), cudaErrorInvalidDevice);
    EXPECT_ERR("set pool, bad device", cudaDeviceSetMemPool(n, def), cudaErrorInvalidDevice);
    props.location.id = n;
    EXPECT_ERR("create on a bad device", cudaMemPoolCreate(&pool, &props), cudaErrorInvalidDevice);
    if (n >= 2) {
        props.location.id = 1;
        EXPECT("pool on device 1", cudaMemPoolCreate(&pool, &props), cudaSuccess);
        EXPECT_ERR("pool of another device", cudaDeviceSetMemPool(0, pool), cudaErrorInvalidDevice);
        EXPECT("pool destroy", cudaMemPoolDestroy(pool), cudaSuccess);
    }
}

static void
managed_hints(void)
{
    enum { N = 1 << 20 };
    unsigned char *m = NULL;
    void *plain = NULL;
    int n = 0;
    EXPECT("device count", cudaGetDeviceCount(&n), cudaSuccess);
    EXPECT("managed", cudaMallocManaged((void **)&m, N, cudaMemAttachGlobal), cudaSuccess);
    EXPECT("malloc", cudaMalloc(&plain, 4096), cudaSuccess);
    memset(m, 0x5E, N);
    struct cudaMemLocation dev0 = {cudaMemLocationTypeDevice, 0};
    struct cudaMemLocation host = {cudaMemLocationTypeHost, 0};
    struct cudaMemLocation bad = {cudaMemLocationTypeDevice, n};
    EXPECT("prefetch to device", cudaMemPrefetchAsync(m, N, dev0, 0, 0), cudaSuccess);
    EXPECT("prefetch to host", cudaMemPrefetchAsync(m + 4096, 4096, host, 0, 0), cudaSuccess);
    EXPECT_ERR("prefetch flags", cudaMemPrefetchAsync(m, N, dev0, 1, 0), cudaErrorInvalidValue);
    EXPECT_ERR("prefetch bad device", cudaMemPrefetchAsync(m, N, bad, 0, 0),
               cudaErrorInvalidDevice);
    EXPECT_ERR("prefetch device memory", cudaMemPrefetchAsync(plain, 4096, dev0, 0, 0),
               cudaErrorInvalidValue);
    EXPECT_ERR("prefetch past the end", cudaMemPrefetchAsync(m, N + 1, dev0, 0, 0),
               cudaErrorInvalidValue);
    EXPECT("advise read mostly", cudaMemAdvise(m, N, cudaMemAdviseSetReadMostly, bad),
           cudaSuccess); /* documented: the location is ignored */
    EXPECT("advise preferred", cudaMemAdvise(m, N, cudaMemAdviseSetPreferredLocation, dev0),
           cudaSuccess);
    EXPECT("advise accessed by host", cudaMemAdvise(m, N, cudaMemAdviseSetAccessedBy, host),
           cudaSuccess);
    EXPECT_ERR("advise accessed by bad device",
               cudaMemAdvise(m, N, cudaMemAdviseSetAccessedBy, bad), cudaErrorInvalidDevice);
    EXPECT_ERR("advise unknown", cudaMemAdvise(m, N, (enum cudaMemoryAdvise)99, dev0),
               cudaErrorInvalidValue);
    EXPECT_ERR("advise device memory",
               cudaMemAdvise(plain, 4096, cudaMemAdviseSetPreferredLocation, dev0),
               cudaErrorInvalidValue);
    EXPECT("sync", cudaDeviceSynchronize(), cudaSuccess);
    EXPECT("hints leave data alone", m[0] == 0x5E && m[N - 1] == 0x5E, 1);
    EXPECT("free managed", cudaFree(m), cudaSuccess);
    EXPECT("free", cudaFree(plain), cudaSuccess);
}

static void
limits_and_flags(void)
{
    size_t v = 0;
    EXPECT("stack limit", cudaDeviceGetLimit(&v, cudaLimitStackSize), cudaSuccess);
    EXPECT("stack default", v, 1024);
    EXPECT("heap limit", cudaDeviceGetLimit(&v, cudaLimitMallocHeapSize), cudaSuccess);
    EXPECT("heap default", v, 8 << 20);
    EXPECT("printf limit", cudaDeviceGetLimit(&v, cudaLimitPrintfFifoSize), cudaSuccess);
    EXPECT("printf default", v, 1 << 20);
    EXPECT("set stack", cudaDeviceSetLimit(cudaLimitStackSize, 4096), cudaSuccess);
    EXPECT("set heap", cudaDeviceSetLimit(cudaLimitMallocHeapSize, 32 << 20), cudaSuccess);
    EXPECT("stack limit", cudaDeviceGetLimit(&v, cudaLimitStackSize), cudaSuccess);
    EXPECT("stack kept", v, 4096);
    EXPECT("heap limit", cudaDeviceGetLimit(&v, cudaLimitMallocHeapSize), cudaSuccess);
    EXPECT("heap kept", v, 32 << 20);
    EXPECT("set L2 granularity", cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity, 256),
           cudaSuccess);
    EXPECT("L2 granularity", cudaDeviceGetLimit(&v, cudaLimitMaxL2FetchGranularity), cudaSuccess);
    EXPECT("L2 granularity clamped", v, 128);
    EXPECT_ERR("sync depth on compute capability 9",
               cudaDeviceSetLimit(cudaLimitDevRuntimeSyncDepth, 4), cudaErrorUnsupportedLimit);
    EXPECT_ERR("unknown limit", cudaDeviceGetLimit(&v, (enum cudaLimit)0x100),
               cudaErrorUnsupportedLimit);
    EXPECT_ERR("limit NULL", cudaDeviceGetLimit(NULL, cudaLimitStackSize), cudaErrorInvalidValue);

    unsigned int flags = 0;
    EXPECT("set flags", cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync), cudaSuccess);
    EXPECT("get flags", cudaGetDeviceFlags(&flags), cudaSuccess);
    EXPECT("flags kept (map host implicit)", flags,
           cudaDeviceScheduleBlockingSync | cudaDeviceMapHost);
    EXPECT_ERR("two schedule flags",
               cudaSetDeviceFlags(cudaDeviceScheduleSpin | cudaDeviceScheduleYield),
               cudaErrorInvalidValue);
    EXPECT_ERR("unknown flag", cudaSetDeviceFlags(0x100), cudaErrorInvalidValue);
    EXPECT_ERR("get flags NULL", cudaGetDeviceFlags(NULL), cudaErrorInvalidValue);

    /* A reset destroys the primary context: limits and flags start again from the defaults. */
    EXPECT("device reset", cudaDeviceReset(), cudaSuccess);
    EXPECT("stack limit", cudaDeviceGetLimit(&v, cudaLimitStackSize), cudaSuccess);
    EXPECT("stack default after reset", v, 1024);
    EXPECT("get flags", cudaGetDeviceFlags(&flags), cudaSuccess);
    EXPECT("flags after reset", flags, cudaDeviceMapHost);
}

/* A graph the program creates and captures into, instantiated with parameters (and uploaded
 * there), uploaded again and launched; the graph memory queries by device ordinal. */
static void
graphs_extra(void)
{
    enum { N = 4096 };
    static unsigned char host[N];
    cudaStream_t s;
    unsigned char *d = NULL;
    EXPECT("stream", cudaStreamCreate(&s), cudaSuccess);
    EXPECT("malloc", cudaMalloc((void **)&d, N), cudaSuccess);
    cudaGraph_t g = NULL, ended = NULL;
    EXPECT_ERR("graph create with flags", cudaGraphCreate(&g, 1), cudaErrorInvalidValue);
    EXPECT_ERR("graph create NULL", cudaGraphCreate(NULL, 0), cudaErrorInvalidValue);
    EXPECT("graph create", cudaGraphCreate(&g, 0), cudaSuccess);
    EXPECT("capture into it",
           cudaStreamBeginCaptureToGraph(s, g, NULL, NULL, 0, cudaStreamCaptureModeGlobal),
           cudaSuccess);
    EXPECT("memset captured", cudaMemsetAsync(d, 0x3C, N, s), cudaSuccess);
    EXPECT("end capture", cudaStreamEndCapture(s, &ended), cudaSuccess);
    EXPECT("the program's graph back", ended == g, 1);

    cudaGraphExec_t e = NULL, e2 = NULL;
    cudaGraphInstantiateParams p = {.flags = cudaGraphInstantiateFlagUpload,
                                    .uploadStream = s,
                                    .result_out = cudaGraphInstantiateError};
    EXPECT("instantiate with params", cudaGraphInstantiateWithParams(&e, g, &p), cudaSuccess);
    EXPECT("instantiate result", p.result_out, cudaGraphInstantiateSuccess);
    EXPECT("no error node", p.errNode_out == NULL, 1);
    EXPECT("upload", cudaGraphUpload(e, s), cudaSuccess);
    EXPECT_ERR("upload NULL", cudaGraphUpload(NULL, s), cudaErrorInvalidValue);
    EXPECT("zero before the launch", cudaMemset(d, 0, N), cudaSuccess);
    EXPECT("launch", cudaGraphLaunch(e, s), cudaSuccess);
    EXPECT("sync", cudaStreamSynchronize(s), cudaSuccess);
    EXPECT("copy back", cudaMemcpy(host, d, N, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT("the graph ran", host[0] == 0x3C && host[N - 1] == 0x3C, 1);
    cudaGraphInstantiateParams unknown = {.flags = 1ull << 40};
    EXPECT_ERR("instantiate with an unknown flag", cudaGraphInstantiateWithParams(&e2, g, &unknown),
               cudaErrorInvalidValue);
    EXPECT_ERR("instantiate params NULL", cudaGraphInstantiateWithParams(&e2, g, NULL),
               cudaErrorInvalidValue);
    EXPECT_ERR("upload flag without params",
               cudaGraphInstantiateWithFlags(&e2, g, cudaGraphInstantiateFlagUpload),
               cudaErrorInvalidValue);
    EXPECT("exec destroy", cudaGraphExecDestroy(e), cudaSuccess);
    EXPECT("graph destroy", cudaGraphDestroy(g), cudaSuccess);

    unsigned long long v = 1;
    EXPECT("graph memory in use",
           cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &v), cudaSuccess);
    EXPECT("none in use", v, 0);
    EXPECT_ERR("graph memory of no device",
               cudaDeviceGetGraphMemAttribute(99, cudaGraphMemAttrUsedMemCurrent, &v),
               cudaErrorInvalidDevice);
    v = 0;
    EXPECT("reset the high watermark",
           cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &v), cudaSuccess);
    EXPECT("trim", cudaDeviceGraphMemTrim(0), cudaSuccess);
    EXPECT_ERR("trim no device", cudaDeviceGraphMemTrim(-1), cudaErrorInvalidDevice);
    EXPECT("free", cudaFree(d), cudaSuccess);
    EXPECT("stream destroy", cudaStreamDestroy(s), cudaSuccess);
}

static size_t
free_bytes(void)
{
    size_t free_b = 0, total = 0;
    EXPECT("mem info", cudaMemGetInfo(&free_b, &total), cudaSuccess);
    return free_b;
}

/* Texture arrays take their texels' bytes (2 MiB pages on the simulated device); a mipmapped
 * array those of all its levels; each gives them back when freed. */
static void
texture_arrays(void)
{
    const size_t mib = (size_t)1 << 20;
    struct cudaChannelFormatDesc f32 =
        cudaCreateChannelDesc(32, 0, 0, 0, cudaChannelFormatKindFloat);
    EXPECT("channel desc", f32.x == 32 && f32.y == 0 && f32.f == cudaChannelFormatKindFloat, 1);
    size_t before = free_bytes();
    cudaArray_t a = NULL, level = NULL;
    EXPECT("malloc array", cudaMallocArray(&a, &f32, 1024, 1024, 0), cudaSuccess);
    EXPECT("array bytes", before - free_bytes(), 4 * mib);
    EXPECT("free array", cudaFreeArray(a), cudaSuccess);
    EXPECT("array bytes back", free_bytes(), before);
    struct cudaExtent cube = {256, 256, 16};
    EXPECT("malloc 3D array", cudaMalloc3DArray(&a, &f32, cube, 0), cudaSuccess);
    EXPECT("3D array bytes", before - free_bytes(), 4 * mib);
    EXPECT("free 3D array", cudaFreeArray(a), cudaSuccess);
    struct cudaChannelFormatDesc mixed =
        cudaCreateChannelDesc(32, 16, 0, 0, cudaChannelFormatKindFloat);
    EXPECT_ERR("mixed channel widths", cudaMallocArray(&a, &mixed, 64, 64, 0),
               cudaErrorInvalidValue);
    struct cudaChannelFormatDesc three =
        cudaCreateChannelDesc(8, 8, 8, 0, cudaChannelFormatKindUnsigned);
    EXPECT_ERR("three channels", cudaMallocArray(&a, &three, 64, 64, 0), cudaErrorInvalidValue);
    EXPECT_ERR("no width", cudaMallocArray(&a, &f32, 0, 64, 0), cudaErrorInvalidValue);
    cudaMipmappedArray_t m = NULL;
    struct cudaExtent square = {1024, 1024, 0};
    EXPECT_ERR("too many levels", cudaMallocMipmappedArray(&m, &f32, square, 12, 0),
               cudaErrorInvalidValue);
    EXPECT("malloc mipmapped", cudaMallocMipmappedArray(&m, &f32, square, 11, 0), cudaSuccess);
    EXPECT("mipmapped bytes (5.33 MiB in pages)", before - free_bytes(), 6 * mib);
    EXPECT("level 10", cudaGetMipmappedArrayLevel(&level, m, 10), cudaSuccess);
    EXPECT("a level", level != NULL, 1);
    EXPECT_ERR("level 11", cudaGetMipmappedArrayLevel(&level, m, 11), cudaErrorInvalidValue);
    EXPECT("free mipmapped", cudaFreeMipmappedArray(m), cudaSuccess);
    EXPECT("mipmapped bytes back", free_bytes(), before);
    EXPECT("free NULL array", cudaFreeArray(NULL), cudaSuccess);
    EXPECT("free NULL mipmapped", cudaFreeMipmappedArray(NULL), cudaSuccess);
}

int
main(void)
{
    round_trip();
    error_codes();
    devices_and_entry_points();
    other_allocations();
    events_timing();
    streams_extra();
    copies_2d();
    copies_peer();
    host_memory();
    pools();
    managed_hints();
    limits_and_flags();
    graphs_extra();
    texture_arrays();
    EXPECT("profiler start", cudaProfilerStart(), cudaSuccess);
    EXPECT("profiler stop", cudaProfilerStop(), cudaSuccess);
    EXPECT("no error left", cudaGetLastError(), cudaSuccess);
    printf("runtime_check: ok %d\n", checks);
    return 0;
}
