/* Unit tests of the simulated driver's cuGetProcAddress table, error names, streams, events,
 * the legacy and per-thread default streams and implicit synchronisation of cuMemFree. */
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cudaTypedefs.h>

#include "sim_test.h"

/* Function pointers compare through their bits: ISO C has no function/void* conversion. */
static void *
fn_bits(void (*f)(void))
{
    void *p;
    memcpy(&p, &f, sizeof(p));
    return p;
}
#define FN(f) fn_bits((void (*)(void))(f))

/* Per-thread variants are not declared by cuda.h for ordinary builds: find them by name. */
static void *
sym(const char *name)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    void *p = dlsym(h, name);
    dlclose(h);
    assert_non_null(p);
    return p;
}

static void *
proc(const char *name, int version, cuuint64_t flags, CUresult want,
     CUdriverProcAddressQueryResult want_status)
{
    void *p = (void *)1;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)99;
    assert_int_equal(cuGetProcAddress(name, &p, version, flags, &st), want);
    assert_int_equal(st, want_status);
    if (want != CUDA_SUCCESS)
        assert_null(p);
    return p;
}

static void
test_proc_before_init(void **state)
{
    (void)state;
    /* cudart looks entry points up before cuInit, and probes "" expecting no stub error. */
    void *p = proc("cuInit", 2000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_ptr_equal(p, FN(cuInit));
    proc("", 0, 0, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
}

static void
test_proc_versions(void **state)
{
    (void)state;
    assert_ptr_equal(proc("cuMemAlloc", 3020, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuMemAlloc_v2));
    assert_ptr_equal(proc("cuMemAlloc", 13000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuMemAlloc_v2));
    /* The 32-bit ABI of CUDA < 3.2 is not provided. */
    proc("cuMemAlloc", 2000, 0, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    void *g1 = proc("cuCtxGetDevice", 2000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS);
    void *g2 = proc("cuCtxGetDevice", 13000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_ptr_not_equal(g1, g2);
    assert_ptr_equal(g2, FN(cuCtxGetDevice_v2));
    assert_ptr_equal(proc("cuCtxGetDevice", 12090, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     g1);
    void *r1 = proc("cuDevicePrimaryCtxReset", 7000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS);
    void *r2 = proc("cuDevicePrimaryCtxReset", 11000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_ptr_not_equal(r1, r2);
    assert_ptr_equal(r2, FN(cuDevicePrimaryCtxReset_v2));
    proc("cuMemAllocAsync", 11010, 0, CUDA_ERROR_NOT_FOUND,
         CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    proc("cuNoSuchFunction", 12000, 0, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    void *p = (void *)1;
    assert_int_equal(cuGetProcAddress("cuNoSuchFunction", &p, 12000, 0, NULL),
                     CUDA_ERROR_NOT_FOUND);
    assert_null(p);
    assert_int_equal(cuGetProcAddress("cuMemAlloc", &p, 13010, 0, NULL), CUDA_ERROR_INVALID_VALUE);
}

static void
test_proc_per_thread(void **state)
{
    (void)state;
    void *legacy = proc("cuMemAllocAsync", 11020, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS);
    void *ptsz = proc("cuMemAllocAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                      CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_ptr_equal(legacy, FN(cuMemAllocAsync));
    assert_ptr_equal(ptsz, sym("cuMemAllocAsync_ptsz"));
    assert_ptr_equal(proc("cuMemAllocAsync", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, CUDA_SUCCESS,
                          CU_GET_PROC_ADDRESS_SUCCESS),
                     legacy);
    assert_ptr_equal(proc("cuMemcpyHtoD", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                          CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     sym("cuMemcpyHtoD_v2_ptds"));
    /* No per-thread twin: the legacy function is returned. */
    assert_ptr_equal(proc("cuMemAlloc", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                          CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuMemAlloc_v2));
}

static void
test_proc_self_and_dlsym(void **state)
{
    (void)state;
    void *v1 = proc("cuGetProcAddress", 11030, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS);
    void *v2 = proc("cuGetProcAddress", 12000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_ptr_not_equal(v1, v2);
    assert_ptr_equal(v2, FN(cuGetProcAddress_v2));
    /* Call through both ABIs, like cudart's bootstrap. */
    PFN_cuGetProcAddress_v11030 gpa1;
    PFN_cuGetProcAddress_v12000 gpa2;
    memcpy(&gpa1, &v1, sizeof(v1));
    memcpy(&gpa2, &v2, sizeof(v2));
    void *p = NULL;
    assert_int_equal(gpa1("cuMemFree", &p, 3020, 0), CUDA_SUCCESS);
    assert_ptr_equal(p, FN(cuMemFree_v2));
    assert_int_equal(gpa2("cuMemFree", &p, 3020, 0, NULL), CUDA_SUCCESS);
    assert_ptr_equal(p, FN(cuMemFree_v2));
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    assert_non_null(h);
    assert_ptr_equal(dlsym(h, "cuGetProcAddress_v2"), v2);
    assert_ptr_equal(dlsym(h, "cuMemAlloc_v2"), FN(cuMemAlloc_v2));
    dlclose(h);
}

static void
test_errors_and_export_table(void **state)
{
    (void)state;
    const char *s = NULL;
    assert_int_equal(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
    assert_string_equal(s, "CUDA_ERROR_OUT_OF_MEMORY");
    assert_int_equal(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s), CUDA_SUCCESS);
    assert_string_equal(s, "invalid argument");
    assert_int_equal(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    assert_null(s);
    const void *table = (const void *)1;
    CUuuid id = {{0}};
    assert_int_equal(cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
}

/* ---- streams (SIMCUDA_STREAM_DELAY_US=20000) ---- */

static void CUDA_CB
wait_sem(void *arg)
{
    while (sem_wait(arg) != 0) {
    }
}

static void
test_stream_order(void **state)
{
    (void)state;
    sem_t gate;
    assert_int_equal(sem_init(&gate, 0, 0), 0);
    CUstream s;
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    CUdeviceptr buf;
    size_t n = 256 * 1024;
    unsigned char *host = calloc(1, n);
    assert_int_equal(cuMemAlloc(&buf, n), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc(s, wait_sem, &gate), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8Async(buf, 0xAB, n, s), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoHAsync(host, buf, n, s), CUDA_SUCCESS);
    CUevent e;
    assert_int_equal(cuEventCreate(&e, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventQuery(e), CUDA_SUCCESS); /* never recorded */
    assert_int_equal(cuEventRecord(e, s), CUDA_SUCCESS);
    assert_int_equal(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    assert_int_equal(cuEventQuery(e), CUDA_ERROR_NOT_READY);
    assert_int_equal(host[0], 0);
    sem_post(&gate);
    assert_int_equal(cuEventSynchronize(e), CUDA_SUCCESS);
    assert_int_equal(cuEventQuery(e), CUDA_SUCCESS);
    assert_int_equal(cuStreamQuery(s), CUDA_SUCCESS);
    for (size_t i = 0; i < n; i += 4099)
        assert_int_equal(host[i], 0xAB);
    assert_int_equal(host[n - 1], 0xAB);
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    assert_int_equal(cuStreamIsCapturing(s, &cs), CUDA_SUCCESS);
    assert_int_equal(cs, CU_STREAM_CAPTURE_STATUS_NONE);
    CUcontext ctx, cur;
    assert_int_equal(cuStreamGetCtx(s, &ctx), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    assert_ptr_equal(ctx, cur);
    assert_int_equal(cuStreamQuery((CUstream)(uintptr_t)0x1234), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuEventDestroy(e), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
    assert_int_equal(cuMemFree(buf), CUDA_SUCCESS);
    free(host);
    sem_destroy(&gate);
}

static void
test_events_timing(void **state)
{
    (void)state;
    CUevent a, b, nt;
    float ms = -1;
    assert_int_equal(cuEventCreate(&a, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&b, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    assert_int_equal(cuEventElapsedTime(&ms, a, b), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuEventRecord(a, NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(nt, NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(b, NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventSynchronize(b), CUDA_SUCCESS);
    assert_int_equal(cuEventElapsedTime(&ms, a, b), CUDA_SUCCESS);
    assert_true(ms >= 0);
    assert_int_equal(cuEventElapsedTime(&ms, a, nt), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuEventDestroy(a), CUDA_SUCCESS);
    assert_int_equal(cuEventDestroy(b), CUDA_SUCCESS);
    assert_int_equal(cuEventDestroy(nt), CUDA_SUCCESS);
}

static void
test_legacy_stream_sync(void **state)
{
    (void)state;
    sem_t gate;
    assert_int_equal(sem_init(&gate, 0, 0), 0);
    CUstream blocking, nonblocking;
    assert_int_equal(cuStreamCreate(&blocking, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr buf;
    assert_int_equal(cuMemAlloc(&buf, 4096), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc(blocking, wait_sem, &gate), CUDA_SUCCESS);
    /* Work on the legacy stream waits for the blocking stream ... */
    assert_int_equal(cuMemsetD8Async(buf, 1, 4096, CU_STREAM_LEGACY), CUDA_SUCCESS);
    /* ... a non-blocking stream does not. */
    assert_int_equal(cuMemsetD8Async(buf, 2, 16, nonblocking), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(nonblocking), CUDA_SUCCESS);
    assert_int_equal(cuStreamQuery(NULL), CUDA_ERROR_NOT_READY);
    unsigned char v = 0;
    memcpy(&v, (const void *)(uintptr_t)buf, 1);
    assert_int_equal(v, 2);
    sem_post(&gate);
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    memcpy(&v, (const void *)(uintptr_t)buf, 1);
    assert_int_equal(v, 1);
    assert_int_equal(cuStreamQuery(blocking), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy(blocking), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy(nonblocking), CUDA_SUCCESS);
    assert_int_equal(cuMemFree(buf), CUDA_SUCCESS);
    sem_destroy(&gate);
}

static void
test_wait_event(void **state)
{
    (void)state;
    sem_t gate;
    assert_int_equal(sem_init(&gate, 0, 0), 0);
    CUstream s1, s2;
    CUevent e;
    CUdeviceptr buf;
    assert_int_equal(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc(&buf, 64), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc(s1, wait_sem, &gate), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(e, s1), CUDA_SUCCESS);
    assert_int_equal(cuStreamWaitEvent(s2, e, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8Async(buf, 9, 64, s2), CUDA_SUCCESS);
    assert_int_equal(cuStreamQuery(s2), CUDA_ERROR_NOT_READY);
    assert_int_equal(cuEventDestroy(e), CUDA_SUCCESS); /* the pending wait keeps it alive */
    sem_post(&gate);
    assert_int_equal(cuStreamSynchronize(s2), CUDA_SUCCESS);
    unsigned char v = 0;
    assert_int_equal(cuMemcpyDtoH(&v, buf + 63, 1), CUDA_SUCCESS);
    assert_int_equal(v, 9);
    assert_int_equal(cuStreamDestroy(s1), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy(s2), CUDA_SUCCESS);
    assert_int_equal(cuMemFree(buf), CUDA_SUCCESS);
    sem_destroy(&gate);
}

struct pts_arg {
    CUcontext ctx;
    CUresult query;
};

static void *
other_thread_queries(void *p)
{
    struct pts_arg *a = p;
    assert_int_equal(cuCtxSetCurrent(a->ctx), CUDA_SUCCESS);
    a->query = cuStreamQuery(CU_STREAM_PER_THREAD);
    return NULL;
}

static void
test_per_thread_stream(void **state)
{
    (void)state;
    sem_t gate;
    assert_int_equal(sem_init(&gate, 0, 0), 0);
    struct pts_arg a = {.query = CUDA_ERROR_UNKNOWN};
    void *p1 = proc("cuLaunchHostFunc", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                    CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS);
    void *p2 = proc("cuStreamQuery", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                    CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_ptr_equal(p1, sym("cuLaunchHostFunc_ptsz"));
    PFN_cuLaunchHostFunc_v10000_ptsz cuLaunchHostFunc_ptsz;
    PFN_cuStreamQuery_v7000_ptsz cuStreamQuery_ptsz;
    memcpy(&cuLaunchHostFunc_ptsz, &p1, sizeof(p1));
    memcpy(&cuStreamQuery_ptsz, &p2, sizeof(p2));
    assert_int_equal(cuCtxGetCurrent(&a.ctx), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc_ptsz(NULL, wait_sem, &gate), CUDA_SUCCESS);
    /* 0 through a _ptsz entry point and CU_STREAM_PER_THREAD name the same stream. */
    assert_int_equal(cuStreamQuery(CU_STREAM_PER_THREAD), CUDA_ERROR_NOT_READY);
    assert_int_equal(cuStreamQuery_ptsz(NULL), CUDA_ERROR_NOT_READY);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, other_thread_queries, &a), 0);
    pthread_join(t, NULL);
    assert_int_equal(a.query, CUDA_SUCCESS); /* another thread has its own stream */
    sem_post(&gate);
    assert_int_equal(cuStreamSynchronize(CU_STREAM_PER_THREAD), CUDA_SUCCESS);
    assert_int_equal(cuStreamQuery_ptsz(NULL), CUDA_SUCCESS);
    sem_destroy(&gate);
}

static void
test_free_waits_for_streams(void **state)
{
    (void)state;
    CUstream s;
    CUdeviceptr buf, other;
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc(&buf, MiB), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc(&other, MiB), CUDA_SUCCESS);
    for (int i = 0; i < 3; i++)
        assert_int_equal(cuMemsetD8Async(buf, (unsigned char)i, MiB, s), CUDA_SUCCESS);
    /* Freeing an unrelated block still waits for all of the device's streams. */
    assert_int_equal(cuMemFree(other), CUDA_SUCCESS);
    assert_int_equal(cuStreamQuery(s), CUDA_SUCCESS);
    assert_int_equal(cuMemFree(buf), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* ---- SIMCUDA_FAIL=proc:cuMemAllocAsync ---- */

static void
test_proc_hidden(void **state)
{
    (void)state;
    proc("cuMemAllocAsync", 12000, 0, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    proc("cuMemAllocAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
         CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    assert_ptr_equal(proc("cuMemAlloc", 12000, 0, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS),
                     FN(cuMemAlloc_v2));
}

/* SIMCUDA_STRICT_HANDLES=1: a destroyed stream's handle still gets CUDA_ERROR_INVALID_HANDLE,
 * and each use says so on stderr (what the cuprof tests watch for). */
static void
test_strict_dead_stream(void **state)
{
    (void)state;
    CUstream s;
    CUevent e;
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&e, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(e, s), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
    FILE *err = tmpfile();
    assert_non_null(err);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0 && dup2(fileno(err), 2) == 2);
    CUresult record = cuEventRecord(e, s);
    CUresult sync = cuStreamSynchronize(s);
    CUresult legacy = cuEventRecord(e, CU_STREAM_LEGACY); /* a default stream is no handle */
    fflush(stderr);
    assert_true(dup2(saved, 2) == 2);
    close(saved);
    assert_int_equal(record, CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(sync, CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(legacy, CUDA_SUCCESS);
    char text[512] = "", want[128];
    rewind(err);
    size_t n = fread(text, 1, sizeof(text) - 1, err);
    text[n] = '\0';
    fclose(err);
    snprintf(want, sizeof(want), "cuprof: sim: stream handle %p is not a live stream\n", (void *)s);
    char twice[300];
    snprintf(twice, sizeof(twice), "%s%s", want, want);
    assert_string_equal(text, twice);
    assert_int_equal(cuEventSynchronize(e), CUDA_SUCCESS);
    assert_int_equal(cuEventDestroy(e), CUDA_SUCCESS);
}

int
main(int argc, char **argv)
{
    static const struct CMUnitTest procaddr[] = {
        cmocka_unit_test(test_proc_before_init),        cmocka_unit_test(test_proc_versions),
        cmocka_unit_test(test_proc_per_thread),         cmocka_unit_test(test_proc_self_and_dlsym),
        cmocka_unit_test(test_errors_and_export_table),
    };
    static const struct CMUnitTest streams[] = {
        cmocka_unit_test_setup(test_stream_order, sim_test_setup),
        cmocka_unit_test(test_events_timing),
        cmocka_unit_test(test_legacy_stream_sync),
        cmocka_unit_test(test_wait_event),
        cmocka_unit_test(test_per_thread_stream),
        cmocka_unit_test(test_free_waits_for_streams),
    };
    static const struct CMUnitTest proc_fail[] = {
        cmocka_unit_test(test_proc_hidden),
    };
    static const struct CMUnitTest strict[] = {
        cmocka_unit_test_setup(test_strict_dead_stream, sim_test_setup),
    };
    static const struct sim_test_group groups[] = {
        {"procaddr", procaddr, sizeof(procaddr) / sizeof(procaddr[0])},
        {"streams", streams, sizeof(streams) / sizeof(streams[0])},
        {"proc_fail", proc_fail, 1},
        {"strict", strict, 1},
    };
    return sim_test_main(argc, argv, groups, sizeof(groups) / sizeof(groups[0]));
}
