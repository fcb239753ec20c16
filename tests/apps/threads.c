/* threads: several threads on the runtime API, each with its own stream and PRNG, allocating
 * random sizes (512 B .. ~6 MiB) with cudaMalloc or cudaMallocAsync, filling and checking them,
 * and freeing them (some blocks live across iterations so frees interleave between threads).
 * Usage: threads [THREADS=4] [ITERS=100]. Output (one line, deterministic):
 *   threads: threads=T iters=N allocs=A frees=F async_allocs=X checksum=C */
#include "app_common.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <string.h>

#define APP    "threads"
#define SLOTS  8
#define SAMPLE 32

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        APP_CHECK(APP, e_ == cudaSuccess, #call, e_);                                              \
    } while (0)

struct worker {
    pthread_t tid;
    int id;
    int iters;
    unsigned long long allocs, frees, async_allocs;
    uint64_t checksum;
};

static void *
worker_main(void *arg)
{
    struct worker *w = arg;
    uint64_t rng = 0x7EADull + (uint64_t)w->id;
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void *slot[SLOTS] = {0};
    int slot_async[SLOTS] = {0};
    w->checksum = APP_FNV_OFFSET;
    for (int it = 0; it < w->iters; it++) {
        uint64_t r = app_rand(&rng);
        int k = (int)(r % SLOTS);
        if (slot[k] != NULL) { /* replace what the slot held */
            if (slot_async[k])
                CK(cudaFreeAsync(slot[k], s));
            else
                CK(cudaFree(slot[k]));
            w->frees++;
            slot[k] = NULL;
        }
        size_t base = (size_t)512 << ((r >> 8) % 14);
        size_t n = base + (size_t)((r >> 24) % (base / 2 + 1));
        slot_async[k] = (int)((r >> 40) & 1);
        if (slot_async[k])
            CK(cudaMallocAsync(&slot[k], n, s));
        else
            CK(cudaMalloc(&slot[k], n));
        w->allocs++;
        w->async_allocs += (unsigned long long)slot_async[k];
        unsigned char byte = (unsigned char)(r >> 56), buf[SAMPLE];
        CK(cudaMemsetAsync(slot[k], byte, n, s));
        CK(cudaMemcpyAsync(buf, (unsigned char *)slot[k] + n - SAMPLE, SAMPLE,
                           cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        for (int i = 0; i < SAMPLE; i++)
            APP_CHECK(APP, buf[i] == byte, "data check", buf[i]);
        w->checksum = app_fnv(w->checksum, buf, SAMPLE);
    }
    for (int k = 0; k < SLOTS; k++) {
        if (slot[k] == NULL)
            continue;
        if (slot_async[k])
            CK(cudaFreeAsync(slot[k], s));
        else
            CK(cudaFree(slot[k]));
        w->frees++;
    }
    CK(cudaStreamSynchronize(s));
    CK(cudaStreamDestroy(s));
    return NULL;
}

int
main(int argc, char **argv)
{
    int nthreads = argc > 1 ? atoi(argv[1]) : 4;
    int iters = argc > 2 ? atoi(argv[2]) : 100;
    APP_CHECK(APP, nthreads > 0 && nthreads <= 64, "1 <= threads <= 64", nthreads);
    APP_CHECK(APP, iters >= 0, "iters >= 0", iters);
    struct worker *w = calloc((size_t)nthreads, sizeof *w);
    APP_CHECK(APP, w != NULL, "calloc", 0);
    for (int i = 0; i < nthreads; i++) {
        w[i].id = i;
        w[i].iters = iters;
        int rc = pthread_create(&w[i].tid, NULL, worker_main, &w[i]);
        APP_CHECK(APP, rc == 0, "pthread_create", rc);
    }
    unsigned long long allocs = 0, frees = 0, async_allocs = 0;
    uint64_t checksum = APP_FNV_OFFSET;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(w[i].tid, NULL);
        allocs += w[i].allocs;
        frees += w[i].frees;
        async_allocs += w[i].async_allocs;
        unsigned char b[8];
        memcpy(b, &w[i].checksum, 8);
        checksum = app_fnv(checksum, b, 8);
    }
    free(w);
    CK(cudaDeviceSynchronize());
    printf(APP ": threads=%d iters=%d allocs=%llu frees=%llu async_allocs=%llu checksum=%016llx\n",
           nthreads, iters, allocs, frees, async_allocs, (unsigned long long)checksum);
    return 0;
}
