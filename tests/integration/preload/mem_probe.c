/* mem_probe.c: driver-API behaviours a caching shim could change and a program can see: errors
 * of double and interior frees, address ranges and pointer attributes of small allocations,
 * pitched allocations, managed, VMM and pool allocations. Prints one line of results; the test
 * runs it with and without cuprof and compares. Links with -lcuda (the simulated driver). */
#include <cuda.h>
#include <stdio.h>

#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            printf("mem_probe: %s failed: %d\n", #call, (int)r_);                                  \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int
main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));

    /* Small allocations: their own range, whatever the driver allocation behind them. */
    CUdeviceptr a, b;
    CK(cuMemAlloc(&a, 1000));
    CK(cuMemAlloc(&b, 3000));
    CUdeviceptr base = 0;
    size_t size = 0;
    CK(cuMemGetAddressRange(&base, &size, b + 100));
    int range_ok = base == b && size >= 3000 && size < 3000 + 4096;
    CUdeviceptr attr_base = 0;
    size_t attr_size = 0;
    CK(cuPointerGetAttribute(&attr_base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, a + 10));
    CK(cuPointerGetAttribute(&attr_size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, a + 10));
    int attr_ok = attr_base == a && attr_size >= 1000 && attr_size < 1000 + 4096;
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                    CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    CUdeviceptr attrs_base = 0;
    size_t attrs_size = 0;
    void *data[2] = {&attrs_base, &attrs_size};
    CK(cuPointerGetAttributes(2, attrs, data, b + 1));
    int attrs_ok = attrs_base == b && attrs_size == size;

    /* Errors the program sees: interior free, double free; then everything still works. */
    CUresult interior = cuMemFree(b + 512);
    CK(cuMemFree(a));
    CUresult twice = cuMemFree(a);
    CK(cuMemFree(b));
    CUdeviceptr c;
    CK(cuMemAlloc(&c, 1000));
    CK(cuMemFree(c));
    CUresult zero = cuMemAlloc(&c, 0);

    /* Pitched: the pitch the driver chooses. */
    CUdeviceptr p;
    size_t pitch = 0;
    CK(cuMemAllocPitch(&p, &pitch, 1000, 7, 4));
    CUresult bad_pitch = cuMemAllocPitch(&c, &pitch, 1000, 7, 3);
    CK(cuMemFree(p));

    /* Managed and pool allocations: recorded, freed through the driver. */
    CUdeviceptr m;
    CK(cuMemAllocManaged(&m, 5000, CU_MEM_ATTACH_GLOBAL));
    CK(cuMemFree(m));
    CUmemoryPool pool;
    CK(cuDeviceGetDefaultMemPool(&pool, dev));
    CUdeviceptr q;
    CK(cuMemAllocFromPoolAsync(&q, 6000, pool, NULL));
    CK(cuMemFreeAsync(q, NULL));
    CK(cuStreamSynchronize(NULL));

    /* VMM: create, reserve, map, unmap, release. */
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    CK(cuMemCreate(&h, 2 * gran, &prop, 0));
    CK(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
    CK(cuMemMap(va, 2 * gran, 0, h, 0));
    CK(cuMemUnmap(va, 2 * gran));
    CK(cuMemAddressFree(va, 2 * gran));
    CK(cuMemRelease(h));

    /* Async allocation on the legacy stream. */
    CUdeviceptr s;
    CK(cuMemAllocAsync(&s, 7000, NULL));
    CK(cuMemFreeAsync(s, NULL));
    CK(cuStreamSynchronize(NULL));

    /* One live allocation at exit. */
    CUdeviceptr live;
    CK(cuMemAlloc(&live, 12345));

    printf("mem_probe: range_ok=%d attr_ok=%d attrs_ok=%d interior_free=%d double_free=%d "
           "alloc0=%d pitch=%zu bad_pitch=%d\n",
           range_ok, attr_ok, attrs_ok, (int)interior, (int)twice, (int)zero, pitch,
           (int)bad_pitch);
    return 0;
}
