/* graphs: CUDA graphs made by stream capture, and what a capture refuses, through the runtime API
 * only (plain C: copies, memsets and host functions as the captured work, so it runs unchanged on
 * the simulated device and on a GPU). Prints one `name=value` line per answer (error names,
 * capture states, data checks) so that the outputs of runs alone and under cuprof can be compared
 * byte for byte. Built twice: as is (stream 0 is the legacy stream) and with
 * CUDA_API_PER_THREAD_DEFAULT_STREAM (stream 0 is the thread's own stream, the _ptsz calls).
 * Scenarios:
 *   A  graph memory nodes: cudaMallocAsync/cudaFreeAsync inside a capture, replayed three times
 *      (under cuprof a snapshot is written while the graph holds its memory; nothing printed)
 *   B  cudaMalloc during a global-mode capture (a size the cache may hold), C  cudaFree then
 *   D  cudaMalloc during a relaxed capture, E  the thread switched to relaxed mode
 *   F  another thread's cudaMalloc and cudaFree during a global capture: global mode, then
 *      thread-local mode
 *   G  cudaStreamSynchronize of the capturing stream
 *   H  fork and join through events (a second stream joins the capture)
 *   I  work on the default stream while a blocking stream captures (a memset, a stream-ordered
 *      allocation and a stream-ordered free of memory allocated before)
 *   J  a graph allocation the graph does not free: the program's after the launch
 *   K  capture of the default stream (the per-thread build: with a graph allocation and its
 *      free on it); cudaStreamEndCapture without a capture; a cudaMalloc once no capture is
 *      under way
 *   L  cudaFreeAsync in a capture of memory allocated before it (not a graph allocation)
 *   M  forks not joined back: work on a forked stream that the origin never waits for (ending
 *      the capture fails and every stream leaves it; a cudaMalloc then), work after the join,
 *      a fork with no work of its own, and a chain of forks joined back in turn */
#include <cuda_runtime_api.h>
#include <pthread.h>

#include "preload/cuprof.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N (1 << 20)

static void
say(const char *name, cudaError_t e)
{
    printf("%s=%s\n", name, cudaGetErrorName(e));
}

/* cudaStreamGetCaptureInfo: the status, whether there is an id and a graph, and how many nodes
 * the stream's next work would depend on (none right after the capture began). */
static void
capture_info(const char *name, cudaStream_t s)
{
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    cudaGraph_t g = NULL;
    const cudaGraphNode_t *deps = NULL;
    size_t count = 99;
    cudaError_t e = cudaStreamGetCaptureInfo(s, &st, &id, &g, &deps, NULL, &count);
    printf("%s=%s/%d id=%d graph=%d dependencies=%zu\n", name, cudaGetErrorName(e), (int)st,
           id != 0, g != NULL, count);
}

static void
status(const char *name, cudaStream_t s)
{
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(s, &st);
    printf("%s=%s/%d\n", name, cudaGetErrorName(e), (int)st);
}

/* Every byte of device buffer `d` (N bytes) equals `v`. */
static int
all_bytes(const void *d, int v)
{
    static unsigned char host[N];
    if (cudaMemcpy(host, d, N, cudaMemcpyDeviceToHost) != cudaSuccess)
        return 0;
    for (int i = 0; i < N; i++)
        if (host[i] != (unsigned char)v)
            return 0;
    return 1;
}

static void
count_run(void *arg)
{
    ++*(int *)arg;
}

static void
memory_nodes(cudaStream_t s, void *out)
{
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    void *t = NULL;
    int runs = 0;
    say("A_memset_out", cudaMemset(out, 1, N));
    say("A_begin", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    status("A_status", s);
    capture_info("A_info", s);
    say("A_mallocasync", cudaMallocAsync(&t, N, s));
    say("A_memset", cudaMemsetAsync(t, 7, N, s));
    say("A_copy", cudaMemcpyAsync(out, t, N, cudaMemcpyDeviceToDevice, s));
    say("A_hostfn", cudaLaunchHostFunc(s, count_run, &runs));
    say("A_freeasync", cudaFreeAsync(t, s));
    say("A_end", cudaStreamEndCapture(s, &g));
    status("A_status_after", s);
    printf("A_captured_not_run=%d\n", all_bytes(out, 1) && runs == 0);
    say("A_inst", cudaGraphInstantiate(&ge, g, 0));
    for (int r = 0; r < 3; r++)
        say("A_launch", cudaGraphLaunch(ge, s));
    say("A_sync", cudaStreamSynchronize(s));
    printf("A_runs=%d\n", runs);
    printf("A_data=%d\n", all_bytes(out, 7));
    (void)cuprof_dump_snapshot(NULL); /* without cuprof: CUPROF_ERROR_NOT_LOADED, nothing done */
    say("A_exec_destroy", cudaGraphExecDestroy(ge));
    say("A_destroy", cudaGraphDestroy(g));
}

static void
refused_calls(cudaStream_t s, void *pre)
{
    void *q = NULL;
    cudaGraph_t g = NULL;
    say("B_begin", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    say("B_malloc", cudaMalloc(&q, 4096));
    status("B_status", s);
    say("B_end", cudaStreamEndCapture(s, &g));
    printf("B_graph_null=%d\n", g == NULL);
    say("B_last", cudaGetLastError());
    if (q != NULL)
        cudaFree(q);

    g = NULL;
    say("C_begin", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    say("C_free", cudaFree(pre));
    say("C_end", cudaStreamEndCapture(s, &g));
    printf("C_graph_null=%d\n", g == NULL);
    say("C_last", cudaGetLastError());

    q = NULL;
    say("D_begin", cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    say("D_malloc", cudaMalloc(&q, 4096));
    say("D_end", cudaStreamEndCapture(s, &g));
    say("D_destroy", cudaGraphDestroy(g));
    say("D_free", cudaFree(q));

    q = NULL;
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    say("E_begin", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    say("E_exchange", cudaThreadExchangeStreamCaptureMode(&mode));
    printf("E_previous_mode=%d\n", (int)mode);
    say("E_malloc", cudaMalloc(&q, 4096));
    say("E_exchange_back", cudaThreadExchangeStreamCaptureMode(&mode));
    say("E_end", cudaStreamEndCapture(s, &g));
    say("E_destroy", cudaGraphDestroy(g));
    say("E_free", cudaFree(q));
}

struct other_thread {
    enum cudaStreamCaptureMode mode;
    cudaError_t malloc_result, free_result;
    void *p, *to_free; /* to_free: a block allocated before the capture */
};

static void *
other_malloc(void *arg)
{
    struct other_thread *o = arg;
    enum cudaStreamCaptureMode mode = o->mode;
    cudaThreadExchangeStreamCaptureMode(&mode);
    o->malloc_result = cudaMalloc(&o->p, 3 << 20);
    o->free_result = cudaFree(o->to_free);
    return NULL;
}

static void
other_threads(cudaStream_t s)
{
    static const enum cudaStreamCaptureMode modes[] = {cudaStreamCaptureModeGlobal,
                                                       cudaStreamCaptureModeThreadLocal};
    for (int i = 0; i < 2; i++) {
        struct other_thread o = {modes[i], cudaErrorUnknown, cudaErrorUnknown, NULL, NULL};
        cudaMalloc(&o.to_free, 4096);
        pthread_t t;
        cudaGraph_t g = NULL;
        char name[32];
        snprintf(name, sizeof(name), "F%d_begin", i);
        say(name, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        pthread_create(&t, NULL, other_malloc, &o);
        pthread_join(t, NULL);
        snprintf(name, sizeof(name), "F%d_other_malloc", i);
        say(name, o.malloc_result);
        snprintf(name, sizeof(name), "F%d_other_free", i);
        say(name, o.free_result);
        snprintf(name, sizeof(name), "F%d_end", i);
        say(name, cudaStreamEndCapture(s, &g));
        if (g != NULL)
            cudaGraphDestroy(g);
        if (o.p != NULL)
            cudaFree(o.p);
        if (o.free_result != cudaSuccess) {
            snprintf(name, sizeof(name), "F%d_free_after", i);
            say(name, cudaFree(o.to_free));
        }
    }
}

static void
sync_and_join(cudaStream_t s, void *out)
{
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    say("G_begin", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    say("G_sync", cudaStreamSynchronize(s));
    status("G_status", s);
    say("G_end", cudaStreamEndCapture(s, &g));

    cudaStream_t s2;
    cudaEvent_t fork, join;
    cudaStreamCreate(&s2);
    cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&join, cudaEventDisableTiming);
    say("H_begin", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    say("H_memset", cudaMemsetAsync(out, 3, N, s));
    say("H_record_fork", cudaEventRecord(fork, s));
    say("H_wait_fork", cudaStreamWaitEvent(s2, fork, 0));
    status("H_s2_status", s2);
    say("H_s2_memset", cudaMemsetAsync(out, 9, N / 2, s2));
    say("H_record_join", cudaEventRecord(join, s2));
    say("H_wait_join", cudaStreamWaitEvent(s, join, 0));
    say("H_end", cudaStreamEndCapture(s, &g));
    status("H_s2_status_after", s2);
    say("H_inst", cudaGraphInstantiate(&ge, g, 0));
    say("H_launch", cudaGraphLaunch(ge, s));
    say("H_sync", cudaStreamSynchronize(s));
    static unsigned char host[N];
    cudaMemcpy(host, out, N, cudaMemcpyDeviceToHost);
    printf("H_data=%d\n",
           host[0] == 9 && host[N / 2 - 1] == 9 && host[N / 2] == 3 && host[N - 1] == 3);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaEventDestroy(fork);
    cudaEventDestroy(join);
    cudaStreamDestroy(s2);
}

static void
legacy_and_outliving(cudaStream_t s, void *out)
{
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    void *earlier = NULL, *during = NULL;
    say("I_pre_mallocasync", cudaMallocAsync(&earlier, 4096, 0));
    say("I_pre_sync", cudaStreamSynchronize(0));
    say("I_begin", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    say("I_default_memset", cudaMemsetAsync(out, 0, N, 0));
    say("I_default_mallocasync", cudaMallocAsync(&during, 4096, 0));
    cudaError_t freed = cudaFreeAsync(earlier, 0);
    say("I_default_freeasync", freed);
    say("I_end", cudaStreamEndCapture(s, &g));
    say("I_last", cudaGetLastError());
    if (freed != cudaSuccess)
        say("I_free_after", cudaFreeAsync(earlier, 0));
    if (during != NULL)
        say("I_free_during", cudaFreeAsync(during, 0));
    say("I_sync", cudaStreamSynchronize(0));

    void *t = NULL;
    say("J_begin", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    say("J_mallocasync", cudaMallocAsync(&t, N, s));
    say("J_memset", cudaMemsetAsync(t, 5, N, s));
    say("J_end", cudaStreamEndCapture(s, &g));
    say("J_inst", cudaGraphInstantiate(&ge, g, 0));
    say("J_launch", cudaGraphLaunch(ge, s));
    say("J_sync", cudaStreamSynchronize(s));
    printf("J_data=%d\n", all_bytes(t, 5));
    say("J_free", cudaFree(t));
    say("J_launch_again", cudaGraphLaunch(ge, s));
    say("J_launch_unfreed", cudaGraphLaunch(ge, s));
    say("J_last", cudaGetLastError());
    say("J_freeasync", cudaFreeAsync(t, s));
    say("J_sync_again", cudaStreamSynchronize(s));
    say("J_exec_destroy", cudaGraphExecDestroy(ge));
    say("J_destroy", cudaGraphDestroy(g));

    cudaError_t e = cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal);
    say("K_begin_default", e);
    if (e == cudaSuccess) {
        void *k = NULL;
        say("K_mallocasync_default", cudaMallocAsync(&k, 4096, 0));
        say("K_freeasync_default", cudaFreeAsync(k, 0));
        say("K_end_default", cudaStreamEndCapture(0, &g));
        cudaGraphDestroy(g);
    }
    say("K_end_uncaptured", cudaStreamEndCapture(s, &g));
    say("K_last", cudaGetLastError());
    void *q = NULL;
    say("K_malloc_after", cudaMalloc(&q, 4096));
    say("K_free_after", cudaFree(q));

    void *before = NULL;
    say("L_mallocasync", cudaMallocAsync(&before, 4096, s));
    say("L_memset", cudaMemsetAsync(before, 4, 4096, s));
    say("L_begin", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    say("L_freeasync", cudaFreeAsync(before, s));
    say("L_end", cudaStreamEndCapture(s, &g));
    if (g != NULL)
        cudaGraphDestroy(g);
    unsigned char back[4096];
    say("L_sync_before", cudaStreamSynchronize(s)); /* the default stream may be the thread's */
    say("L_copy", cudaMemcpy(back, before, sizeof(back), cudaMemcpyDeviceToHost));
    printf("L_kept=%d\n", back[0] == 4 && back[4095] == 4);
    say("L_freeasync_after", cudaFreeAsync(before, s));
    say("L_sync", cudaStreamSynchronize(s));
}

/* `from`'s work so far becomes a dependency of `to`'s next work, through a fresh event. */
static void
fork_to(const char *name, cudaStream_t from, cudaStream_t to)
{
    cudaEvent_t e;
    char n[32];
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    snprintf(n, sizeof(n), "%s_record", name);
    say(n, cudaEventRecord(e, from));
    snprintf(n, sizeof(n), "%s_wait", name);
    say(n, cudaStreamWaitEvent(to, e, 0));
    cudaEventDestroy(e);
}

static void
end_and_say(const char *name, cudaStream_t s)
{
    cudaGraph_t g = NULL;
    char n[32];
    snprintf(n, sizeof(n), "%s_end", name);
    say(n, cudaStreamEndCapture(s, &g));
    snprintf(n, sizeof(n), "%s_graph_null", name);
    printf("%s=%d\n", n, g == NULL);
    if (g != NULL)
        cudaGraphDestroy(g);
}

static void
unjoined_forks(cudaStream_t s, void *out)
{
    cudaStream_t s2, s3;
    cudaStreamCreate(&s2);
    cudaStreamCreate(&s3);
    say("M1_begin", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    fork_to("M1_fork", s, s2);
    say("M1_s2_memset", cudaMemsetAsync(out, 2, N, s2));
    end_and_say("M1", s);
    status("M1_status_after", s);
    status("M1_s2_status_after", s2);
    say("M1_last", cudaGetLastError());
    void *q = NULL;
    say("M1_malloc_after", cudaMalloc(&q, 4096));
    say("M1_free_after", cudaFree(q));

    say("M2_begin", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    fork_to("M2_fork", s, s2);
    say("M2_s2_memset", cudaMemsetAsync(out, 2, N, s2));
    fork_to("M2_join", s2, s);
    say("M2_s2_memset_after_join", cudaMemsetAsync(out, 3, N, s2));
    end_and_say("M2", s);
    status("M2_s2_status_after", s2);

    say("M3_begin", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    say("M3_memset", cudaMemsetAsync(out, 4, N, s));
    fork_to("M3_fork", s, s2);
    end_and_say("M3", s);
    status("M3_s2_status_after", s2);

    say("M4_begin", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    fork_to("M4_fork", s, s2);
    fork_to("M4_fork2", s2, s3);
    say("M4_s3_memset", cudaMemsetAsync(out, 5, N, s3));
    fork_to("M4_join3", s3, s2);
    say("M4_s2_memset", cudaMemsetAsync(out, 6, N / 2, s2));
    fork_to("M4_join2", s2, s);
    end_and_say("M4", s);
    cudaStreamDestroy(s3);
    cudaStreamDestroy(s2);
}

int
main(void)
{
    cudaStream_t s;
    void *out = NULL, *pre = NULL, *warm = NULL;
    say("setup_stream", cudaStreamCreate(&s));
    say("setup_out", cudaMalloc(&out, N));
    say("setup_pre", cudaMalloc(&pre, 4096));
    /* A freed 4 KiB block: a caching allocator holds it for B's cudaMalloc. */
    say("setup_warm", cudaMalloc(&warm, 4096));
    say("setup_warm_free", cudaFree(warm));
    memory_nodes(s, out);
    refused_calls(s, pre);
    other_threads(s);
    sync_and_join(s, out);
    legacy_and_outliving(s, out);
    unjoined_forks(s, out);
    say("end_free_pre", cudaFree(pre));
    say("end_free_out", cudaFree(out));
    say("end_sync", cudaDeviceSynchronize());
    return 0;
}
