// nvcc_graphs: a CUDA graph captured from kernel launches, a memset, copies and stream-ordered
// allocations (graph memory nodes), instantiated once and launched three times, as inference
// programs do; then the same with a second stream forked and joined through events. Prints one
// `name=answer` line per call (error names) and checks the bytes the copies moved, so runs alone
// and under cuprof compare byte for byte. Kernels run on a GPU; the simulated device runs none,
// so no printed answer depends on what they compute.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void scale(float *x, int n, float by)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= by;
}

static void say(const char *name, cudaError_t e) { std::printf("%s=%s\n", name, cudaGetErrorName(e)); }

int main()
{
    const int n = 1 << 16;
    const size_t bytes = n * sizeof(float);
    static float host[1 << 16], back[1 << 16];
    for (int i = 0; i < n; i++)
        host[i] = (float)i;
    cudaStream_t s, side;
    say("stream", cudaStreamCreate(&s));
    say("side_stream", cudaStreamCreate(&side));
    float *in = nullptr, *out = nullptr;
    say("malloc_in", cudaMalloc(&in, bytes));
    say("malloc_out", cudaMalloc(&out, bytes));
    say("copy_in", cudaMemcpy(in, host, bytes, cudaMemcpyHostToDevice));

    cudaGraph_t g = nullptr;
    cudaGraphExec_t ge = nullptr;
    float *tmp = nullptr;
    say("begin", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    say("malloc_async", cudaMallocAsync(&tmp, bytes, s));
    say("copy_to_tmp", cudaMemcpyAsync(tmp, in, bytes, cudaMemcpyDeviceToDevice, s));
    scale<<<n / 256, 256, 0, s>>>(tmp, n, 1.0f);
    say("launch_scale", cudaGetLastError());
    say("copy_to_out", cudaMemcpyAsync(out, tmp, bytes, cudaMemcpyDeviceToDevice, s));
    say("free_async", cudaFreeAsync(tmp, s));
    say("end", cudaStreamEndCapture(s, &g));
    say("instantiate", cudaGraphInstantiate(&ge, g, 0));
    say("memset_out", cudaMemset(out, 0, bytes));
    for (int r = 0; r < 3; r++)
        say("graph_launch", cudaGraphLaunch(ge, s));
    say("sync", cudaStreamSynchronize(s));
    say("copy_back", cudaMemcpy(back, out, bytes, cudaMemcpyDeviceToHost));
    int same = 1;
    for (int i = 0; i < n; i++)
        same &= back[i] == host[i];
    std::printf("graph_data=%d\n", same);
    say("exec_destroy", cudaGraphExecDestroy(ge));
    say("destroy", cudaGraphDestroy(g));

    // Fork and join: the side stream zeroes the second half while s copies the first.
    cudaEvent_t fork, join;
    say("event_fork", cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    say("event_join", cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    say("fj_begin", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    say("fj_record_fork", cudaEventRecord(fork, s));
    say("fj_wait_fork", cudaStreamWaitEvent(side, fork, 0));
    say("fj_side_memset", cudaMemsetAsync(out + n / 2, 0, bytes / 2, side));
    scale<<<n / 512, 256, 0, side>>>(out + n / 2, n / 2, 2.0f);
    say("fj_side_launch", cudaGetLastError());
    say("fj_copy", cudaMemcpyAsync(out, in, bytes / 2, cudaMemcpyDeviceToDevice, s));
    say("fj_record_join", cudaEventRecord(join, side));
    say("fj_wait_join", cudaStreamWaitEvent(s, join, 0));
    say("fj_end", cudaStreamEndCapture(s, &g));
    say("fj_instantiate", cudaGraphInstantiate(&ge, g, 0));
    say("fj_memset_out", cudaMemset(out, 0xff, bytes));
    say("fj_launch", cudaGraphLaunch(ge, s));
    say("fj_sync", cudaStreamSynchronize(s));
    say("fj_copy_back", cudaMemcpy(back, out, bytes, cudaMemcpyDeviceToHost));
    same = 1;
    for (int i = 0; i < n; i++)
        same &= back[i] == (i < n / 2 ? host[i] : 0.0f);
    std::printf("fj_data=%d\n", same);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaEventDestroy(fork);
    cudaEventDestroy(join);
    say("free_in", cudaFree(in));
    say("free_out", cudaFree(out));
    cudaStreamDestroy(side);
    cudaStreamDestroy(s);
    say("device_sync", cudaDeviceSynchronize());
    return 0;
}
