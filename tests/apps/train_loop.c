/* train_loop: a training-shaped workload on the CUDA runtime API. Parameters are allocated once;
 * every step allocates activations (cudaMalloc, some cudaMallocAsync) and one gradient per
 * parameter (cudaMallocAsync on the gradient stream), fills and checks them, and frees them; three
 * streams (legacy default, two created). A known leak (3 x 1 MiB + 12345 B) is never freed.
 * Output (one line, identical with or without a profiler):
 *   train_loop: steps=S allocs=A frees=F async_allocs=X leaked_bytes=L live_bytes=B
 *   peak_bytes=P checksum=C
 * tests/integration/sim/check_apps.py re-derives every number from the same PRNG. */
#include "app_common.h"

#include <cuda_runtime_api.h>
#include <string.h>

#define APP      "train_loop"
#define N_PARAMS 12
#define N_ACTS   10
#define SAMPLE   64
#define PATTERN  4096

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        APP_CHECK(APP, e_ == cudaSuccess, #call, e_);                                              \
    } while (0)

static unsigned long long allocs, frees, async_allocs, live_bytes, peak_bytes;
static uint64_t checksum = APP_FNV_OFFSET;

static void
count_alloc(size_t n, int async)
{
    allocs++;
    async_allocs += (unsigned long long)async;
    live_bytes += n;
    if (live_bytes > peak_bytes)
        peak_bytes = live_bytes;
}

static void
count_free(size_t n)
{
    frees++;
    live_bytes -= n;
}

/* Reads SAMPLE bytes at the start and at the end of a buffer filled with `byte` on `s`, checks
 * them, and folds them into the checksum. */
static void
check_fill(const void *dev, size_t n, unsigned char byte, cudaStream_t s)
{
    unsigned char head[SAMPLE], tail[SAMPLE];
    CK(cudaMemcpyAsync(head, dev, SAMPLE, cudaMemcpyDeviceToHost, s));
    CK(cudaMemcpyAsync(tail, (const unsigned char *)dev + n - SAMPLE, SAMPLE,
                       cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    for (int i = 0; i < SAMPLE; i++) {
        APP_CHECK(APP, head[i] == byte, "data check (head)", head[i]);
        APP_CHECK(APP, tail[i] == byte, "data check (tail)", tail[i]);
    }
    checksum = app_fnv(checksum, head, SAMPLE);
    checksum = app_fnv(checksum, tail, SAMPLE);
}

/* Activations: 4 KiB << (r % 14) plus jitter, i.e. 4 KiB .. ~48 MiB. */
static size_t
act_size(uint64_t r)
{
    size_t base = (size_t)4096 << (r % 14);
    return base + (size_t)((r >> 20) % (base / 2));
}

int
main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 20;
    APP_CHECK(APP, steps >= 0, "steps >= 0", steps);
    uint64_t rng = 0x5EEDull;
    cudaStream_t s_act, s_grad;
    CK(cudaStreamCreate(&s_act));
    CK(cudaStreamCreateWithFlags(&s_grad, cudaStreamNonBlocking));
    cudaStream_t streams[3] = {0, s_act, s_grad};

    /* Parameters: 256 KiB << (r % 6) plus jitter (256 KiB .. ~12 MiB), filled with 0x11 + i. */
    void *param[N_PARAMS];
    size_t param_n[N_PARAMS];
    for (int i = 0; i < N_PARAMS; i++) {
        uint64_t r = app_rand(&rng);
        size_t base = (size_t)262144 << (r % 6);
        param_n[i] = base + (size_t)((r >> 16) % (base / 4));
        CK(cudaMalloc(&param[i], param_n[i]));
        count_alloc(param_n[i], 0);
        CK(cudaMemset(param[i], 0x11 + i, param_n[i]));
    }

    /* The deliberate leak: never freed, so a leak report must show exactly these four blocks. */
    static const size_t leak_n[4] = {1 << 20, 1 << 20, 1 << 20, 12345};
    unsigned long long leaked = 0;
    for (int i = 0; i < 4; i++) {
        void *p = NULL;
        CK(cudaMalloc(&p, leak_n[i]));
        count_alloc(leak_n[i], 0);
        CK(cudaMemset(p, 0xEE, leak_n[i]));
        leaked += leak_n[i];
    }

    unsigned char pattern[PATTERN], back[PATTERN];
    for (int step = 0; step < steps; step++) {
        void *act[N_ACTS], *grad[N_PARAMS];
        size_t act_n[N_ACTS];
        int act_async[N_ACTS];
        /* Forward: activations, every fourth one stream-ordered on s_act. */
        for (int i = 0; i < N_ACTS; i++) {
            uint64_t r = app_rand(&rng);
            act_n[i] = act_size(r);
            act_async[i] = i % 4 == 3;
            cudaStream_t s = streams[i % 3];
            if (act_async[i])
                CK(cudaMallocAsync(&act[i], act_n[i], s_act));
            else
                CK(cudaMalloc(&act[i], act_n[i]));
            count_alloc(act_n[i], act_async[i]);
            if (act_async[i])
                s = s_act;
            unsigned char byte = (unsigned char)(r >> 56);
            CK(cudaMemsetAsync(act[i], byte, act_n[i], s));
            check_fill(act[i], act_n[i], byte, s);
        }
        /* Backward: one gradient per parameter, stream-ordered on s_grad. */
        for (int i = 0; i < N_PARAMS; i++) {
            CK(cudaMallocAsync(&grad[i], param_n[i], s_grad));
            count_alloc(param_n[i], 1);
            unsigned char byte = (unsigned char)(step * N_PARAMS + i);
            CK(cudaMemsetAsync(grad[i], byte, param_n[i], s_grad));
            check_fill(grad[i], param_n[i], byte, s_grad);
        }
        /* A host round trip through two device buffers: H2D, D2D, D2H. */
        for (int i = 0; i < PATTERN; i += 8) {
            uint64_t r = app_rand(&rng);
            memcpy(pattern + i, &r, 8);
        }
        CK(cudaMemcpy(grad[0], pattern, PATTERN, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(act[0], grad[0], PATTERN, cudaMemcpyDeviceToDevice));
        CK(cudaMemcpy(back, act[0], PATTERN, cudaMemcpyDeviceToHost));
        APP_CHECK(APP, memcmp(pattern, back, PATTERN) == 0, "H2D/D2D/D2H round trip", step);
        checksum = app_fnv(checksum, back, PATTERN);
        /* Free gradients on their stream, activations in reverse order. */
        for (int i = 0; i < N_PARAMS; i++) {
            CK(cudaFreeAsync(grad[i], s_grad));
            count_free(param_n[i]);
        }
        for (int i = N_ACTS - 1; i >= 0; i--) {
            if (act_async[i])
                CK(cudaFreeAsync(act[i], s_act));
            else
                CK(cudaFree(act[i]));
            count_free(act_n[i]);
        }
    }
    CK(cudaDeviceSynchronize());

    /* The parameters must still hold what was written before the loop. */
    for (int i = 0; i < N_PARAMS; i++) {
        check_fill(param[i], param_n[i], (unsigned char)(0x11 + i), 0);
        CK(cudaFree(param[i]));
        count_free(param_n[i]);
    }
    CK(cudaStreamDestroy(s_act));
    CK(cudaStreamDestroy(s_grad));
    CK(cudaGetLastError());
    printf(APP ": steps=%d allocs=%llu frees=%llu async_allocs=%llu leaked_bytes=%llu "
               "live_bytes=%llu peak_bytes=%llu checksum=%016llx\n",
           steps, allocs, frees, async_allocs, leaked, live_bytes, peak_bytes,
           (unsigned long long)checksum);
    return 0;
}
