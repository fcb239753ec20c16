/* fork_app.c: a child forked after VMM use and a per-thread-stream allocation. The child maps
 * the parent's physical handle again, creates and releases a handle of its own and allocates on
 * its own per-thread default stream (kept live); the parent waits and frees its memory.
 * Prints parent_tid, child_tid, the addresses and the child's exit status. Links with -lcuda. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            printf("fork_app: %s failed: %d\n", #call, (int)r_);                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define GRAN ((size_t)2 << 20)

static void
child(CUdeviceptr va, CUmemGenericAllocationHandle h, const CUmemAllocationProp *prop)
{
    CUdeviceptr q = 0;
    CK(cuMemAllocAsync(&q, 4096, CU_STREAM_PER_THREAD));
    CK(cuMemMap(va + GRAN, GRAN, 0, h, 0)); /* the parent's handle, second view */
    CK(cuMemUnmap(va + GRAN, GRAN));
    CUmemGenericAllocationHandle h2;
    CK(cuMemCreate(&h2, GRAN, prop, 0));
    CK(cuMemRelease(h2));
    printf("child_tid=%ld q=%llu\n", (long)syscall(SYS_gettid), (unsigned long long)q);
    fflush(stdout);
    exit(0); /* the exit dump of the child */
}

int
main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CUdeviceptr p = 0;
    CK(cuMemAllocAsync(&p, 4096, CU_STREAM_PER_THREAD));
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h;
    CK(cuMemCreate(&h, GRAN, &prop, 0));
    CUdeviceptr va = 0;
    CK(cuMemAddressReserve(&va, 2 * GRAN, 0, 0, 0));
    CK(cuMemMap(va, GRAN, 0, h, 0));
    printf("parent_tid=%ld p=%llu va=%llu\n", (long)syscall(SYS_gettid), (unsigned long long)p,
           (unsigned long long)va);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        child(va, h, &prop);
    int status = -1;
    waitpid(pid, &status, 0);
    CK(cuMemFreeAsync(p, CU_STREAM_PER_THREAD));
    CK(cuMemUnmap(va, GRAN));
    CK(cuMemRelease(h));
    CK(cuMemAddressFree(va, 2 * GRAN));
    printf("child_pid=%d child_status=%d\n", (int)pid,
           WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}
