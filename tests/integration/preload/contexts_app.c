/* contexts_app.c: several contexts on one device, each with live memory while another is created
 * and destroyed, then a memory pool of the program's own made the device's current one. Memory
 * belongs to the context that allocated it: a kernel of another context cannot use it, and
 * destroying a context frees its memory only. Prints each step's result, the bytes read back and
 * which context each pointer belongs to (CU_POINTER_ATTRIBUTE_CONTEXT), never an address, so that
 * runs with and without cuprof compare line for line. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void
say(const char *step, CUresult r)
{
    const char *name = NULL;
    if (cuGetErrorName(r, &name) != CUDA_SUCCESS)
        name = "?";
    printf("%s=%s\n", step, name);
}

static void
say_rt(const char *step, cudaError_t e)
{
    printf("%s=%s last=%s\n", step, cudaGetErrorName(e), cudaGetErrorName(cudaGetLastError()));
}

/* Fills `ptr` with `value` and prints the first byte read back. */
static void
fill_and_read(const char *name, CUdeviceptr ptr, unsigned char value)
{
    unsigned char host[4] = {0};
    char step[64];
    snprintf(step, sizeof step, "%s_set", name);
    say(step, cuMemsetD8(ptr, value, 1000));
    snprintf(step, sizeof step, "%s_get", name);
    say(step, cuMemcpyDtoH(host, ptr, sizeof host));
    printf("%s[0]=%d\n", name, host[0]);
}

static const char *
context_name(CUdeviceptr ptr, CUcontext a, CUcontext b, CUcontext primary)
{
    CUcontext owner = NULL;
    if (cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, ptr) != CUDA_SUCCESS)
        return "error";
    return owner == a ? "A" : owner == b ? "B" : owner == primary ? "primary" : "other";
}

int
main(void)
{
    /* 1. A library makes a context of its own and destroys it while the runtime's (primary)
     * context holds two blocks: both stay valid and freeable. */
    void *x = NULL, *y = NULL;
    say_rt("rt_malloc_x", cudaMalloc(&x, 1000));
    say_rt("rt_malloc_y", cudaMalloc(&y, 1000));
    CUdevice dev;
    CUcontext primary = NULL, lib = NULL;
    say("get_device", cuDeviceGet(&dev, 0));
    say("get_primary", cuCtxGetCurrent(&primary));
    say("lib_create", cuCtxCreate(&lib, NULL, 0, dev));
    say("lib_destroy", cuCtxDestroy(lib));
    say("primary_current", cuCtxSetCurrent(primary));
    say_rt("rt_free_x", cudaFree(x));
    fill_and_read("y", (CUdeviceptr)(uintptr_t)y, 3);
    say_rt("rt_free_y", cudaFree(y));

    /* 2. Contexts A and B of the same device each hold memory: B's is B's, and destroying A
     * leaves it whole. */
    CUcontext a = NULL, b = NULL;
    CUdeviceptr a1 = 0, b1 = 0, b2 = 0, b3 = 0;
    say("a_create", cuCtxCreate(&a, NULL, 0, dev));
    say("a1_alloc", cuMemAlloc(&a1, 1000));
    say("b_create", cuCtxCreate(&b, NULL, 0, dev));
    say("b1_alloc", cuMemAlloc(&b1, 1000));
    say("b2_alloc", cuMemAlloc(&b2, 1000));
    printf("a1_context=%s b1_context=%s b2_context=%s\n", context_name(a1, a, b, primary),
           context_name(b1, a, b, primary), context_name(b2, a, b, primary));
    fill_and_read("b1", b1, 7);
    say("a_destroy", cuCtxDestroy(a));
    say("a1_free_after_destroy", cuMemFree(a1)); /* went with A */
    fill_and_read("b1_after", b1, 9);
    fill_and_read("b2_after", b2, 5);
    say("b2_free", cuMemFree(b2));
    say("b1_free", cuMemFree(b1));
    say("b3_alloc", cuMemAlloc(&b3, 1000));
    printf("b3_context=%s\n", context_name(b3, a, b, primary));
    fill_and_read("b3", b3, 11);
    say("b_destroy", cuCtxDestroy(b));

    /* 3. The runtime's context again, with the others gone. */
    void *z = NULL;
    say("primary_again", cuCtxSetCurrent(primary));
    say_rt("rt_malloc_z", cudaMalloc(&z, 1000));
    printf("z_context=%s\n", context_name((CUdeviceptr)(uintptr_t)z, a, b, primary));
    fill_and_read("z", (CUdeviceptr)(uintptr_t)z, 13);
    say_rt("rt_free_z", cudaFree(z));

    /* 4. A pool of the program's own made current serves cudaMallocAsync, as cuda.h says. */
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pool = NULL;
    cudaMemPool_t fallback = NULL;
    void *q = NULL;
    unsigned long long used = 0;
    CUmemoryPool from = NULL;
    say_rt("pool_create", cudaMemPoolCreate(&pool, &props));
    say_rt("default_pool", cudaDeviceGetDefaultMemPool(&fallback, 0));
    say_rt("pool_set", cudaDeviceSetMemPool(0, pool));
    say_rt("pool_malloc", cudaMallocAsync(&q, 4096, 0));
    say("pool_of_q", cuPointerGetAttribute(&from, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
                                           (CUdeviceptr)(uintptr_t)q));
    printf("q_pool_is_own=%d\n", (void *)from == (void *)pool);
    say_rt("pool_used", cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
    printf("pool_used_bytes=%llu\n", used);
    say_rt("pool_free", cudaFreeAsync(q, 0));
    say_rt("pool_sync", cudaDeviceSynchronize());
    say_rt("pool_unset", cudaDeviceSetMemPool(0, fallback));
    say_rt("pool_destroy", cudaMemPoolDestroy(pool));

    /* 5. Stream-ordered and virtual-memory allocations outlive the context that made them (cuda.h,
     * cuCtxDestroy: "will not destroy memory allocations by cuMemCreate(), cuMemAllocAsync() and
     * cuMemAllocFromPoolAsync()"): made in C, used and freed from the primary after C's end. */
    CUcontext c = NULL;
    CUdeviceptr c_async = 0, c_va = 0;
    CUmemGenericAllocationHandle c_phys = 0;
    CUmemAllocationProp vprops;
    memset(&vprops, 0, sizeof vprops);
    vprops.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    vprops.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    vprops.location.id = 0;
    size_t gran = 0;
    say("c_create", cuCtxCreate(&c, NULL, 0, dev));
    say("c_async_alloc", cuMemAllocAsync(&c_async, 4096, NULL));
    say("c_sync", cuCtxSynchronize());
    say("c_granularity",
        cuMemGetAllocationGranularity(&gran, &vprops, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    say("c_create_phys", cuMemCreate(&c_phys, gran, &vprops, 0));
    say("c_reserve", cuMemAddressReserve(&c_va, gran, 0, 0, 0));
    say("c_map", cuMemMap(c_va, gran, 0, c_phys, 0));
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location = vprops.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    say("c_access", cuMemSetAccess(c_va, gran, &access, 1));
    say("c_destroy", cuCtxDestroy(c));
    say("primary_last", cuCtxSetCurrent(primary));
    fill_and_read("c_async", c_async, 17);
    fill_and_read("c_vmm", c_va, 19);
    say("c_async_free", cuMemFreeAsync(c_async, NULL));
    say("c_async_sync", cuCtxSynchronize());
    say("c_unmap", cuMemUnmap(c_va, gran));
    say("c_release", cuMemRelease(c_phys));
    say("c_address_free", cuMemAddressFree(c_va, gran));
    return 0;
}
