/* pool_threshold.c: one stream-ordered allocation on each simulated device (the first CUDA
 *   allocation starts cuprof), then prints each device's default pool release threshold and
 *   high-water mark as read back from the driver:
 *   "device=D release_threshold=BYTES used_high=BYTES".
 * Lock: none (one thread). Hot path: no. */
#include <cuda.h>
#include <stdio.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            printf("pool_threshold: %s failed: %d\n", #call, (int)r_);                             \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int
main(void)
{
    int count = 0;
    CHECK(cuInit(0));
    CHECK(cuDeviceGetCount(&count));
    for (int i = 0; i < count; i++) {
        CUdevice dev;
        CUcontext ctx;
        CUdeviceptr p;
        CHECK(cuDeviceGet(&dev, i));
        CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
        CHECK(cuCtxSetCurrent(ctx));
        CHECK(cuMemAllocAsync(&p, 4096, NULL));
        CHECK(cuMemFreeAsync(p, NULL));
        CHECK(cuCtxSynchronize());
    }
    for (int i = 0; i < count; i++) {
        CUdevice dev;
        CUmemoryPool pool;
        cuuint64_t threshold = 0, high = 0;
        CHECK(cuDeviceGet(&dev, i));
        CHECK(cuDeviceGetDefaultMemPool(&pool, dev));
        CHECK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
        CHECK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &high));
        printf("device=%d release_threshold=%llu used_high=%llu\n", i,
               (unsigned long long)threshold, (unsigned long long)high);
    }
    return 0;
}
