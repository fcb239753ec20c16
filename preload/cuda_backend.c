/* cuda_backend.c: device_ops over the real driver (see cuda_backend.h). */
#include "preload/cuda_backend.h"

#include <cuda.h>
#include <stdatomic.h>

#include "allocator/cuprof_errors.h"
#include "preload/addr_map.h"
#include "preload/real_cuda.h"
#include "preload/runtime.h"
#include "preload/stream_id.h"

/* Segment base -> (device, size): what cuprof holds from the driver. */
static struct addr_map segments = ADDR_MAP_INIT;

static int
from_cu(CUresult result)
{
    if (result == CUDA_SUCCESS)
        return 0;
    if (result == CUDA_ERROR_OUT_OF_MEMORY)
        return -CUPROF_ENOMEM;
    return (int)result;
}

/* Makes a context of `device` current for one call: the current one when it already belongs to
 * that device (the usual case: the allocator serves the calling thread's device), else the
 * device's primary context, retained only for the call so its lifetime stays the program's. */
struct device_scope {
    bool pushed;
    CUdevice dev;
};

static CUresult
scope_enter(const struct real_cuda *real, int device, struct device_scope *scope)
{
    scope->pushed = false;
    CUdevice current;
    if (real->cuCtxGetDevice(&current) == CUDA_SUCCESS && current == device)
        return CUDA_SUCCESS;
    CUresult r = real->cuDeviceGet(&scope->dev, device);
    if (r != CUDA_SUCCESS)
        return r;
    CUcontext ctx;
    r = real->cuDevicePrimaryCtxRetain(&ctx, scope->dev);
    if (r != CUDA_SUCCESS)
        return r;
    r = real->cuCtxPushCurrent_v2(ctx);
    if (r != CUDA_SUCCESS) {
        (void)real->cuDevicePrimaryCtxRelease_v2(scope->dev);
        return r;
    }
    scope->pushed = true;
    return CUDA_SUCCESS;
}

static void
scope_leave(const struct real_cuda *real, struct device_scope *scope)
{
    if (!scope->pushed)
        return;
    CUcontext popped;
    (void)real->cuCtxPopCurrent_v2(&popped);
    (void)real->cuDevicePrimaryCtxRelease_v2(scope->dev);
}

/* Runs `call` (an expression yielding a CUresult) with `device` current. */
#define WITH_DEVICE(real, device, call)                                                            \
    do {                                                                                           \
        struct device_scope scope_;                                                                \
        r_ = scope_enter(real, device, &scope_);                                                   \
        if (r_ == CUDA_SUCCESS) {                                                                  \
            r_ = (call);                                                                           \
            scope_leave(real, &scope_);                                                            \
        }                                                                                          \
    } while (0)

static int
backend_segment_alloc(void *ctx, int device, size_t size, uint64_t *addr)
{
    (void)ctx;
    const struct real_cuda *real = real_cuda_get();
    if (real == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUdeviceptr ptr = 0;
    CUresult r_;
    WITH_DEVICE(real, device, real->cuMemAlloc_v2(&ptr, size));
    if (r_ != CUDA_SUCCESS)
        return from_cu(r_);
    /* CUDA_SUCCESS is not proof: a NULL, misaligned (every CUDA allocation is 256-byte aligned),
     * wrapping pointer, or one inside a segment cuprof holds, would corrupt the cache. Such a
     * pointer is neither used nor freed (it may be someone else's memory): it leaks. */
    if (ptr == 0 || ptr % 256 != 0 || ptr + size < ptr ||
        addr_map_overlaps(&segments, ptr, size, NULL))
        return -CUPROF_EDRIVER;
    if (!addr_map_put(&segments, ptr, (uint64_t)device, size)) {
        (void)real->cuMemFree_v2(ptr);
        return -CUPROF_EHOSTMEM;
    }
    *addr = ptr;
    return 0;
}

static int
backend_segment_free(void *ctx, int device, uint64_t addr, size_t size)
{
    (void)ctx;
    (void)size;
    const struct real_cuda *real = real_cuda_get();
    if (real == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    (void)addr_map_remove(&segments, addr, NULL, NULL);
    CUresult r_;
    WITH_DEVICE(real, device, real->cuMemFree_v2((CUdeviceptr)addr));
    /* Driver shutting down or context gone: the memory went with it. */
    if (r_ == CUDA_ERROR_DEINITIALIZED || r_ == CUDA_ERROR_CONTEXT_IS_DESTROYED)
        return 0;
    return from_cu(r_);
}

static int
backend_mem_info(void *ctx, int device, size_t *free_bytes, size_t *total_bytes)
{
    (void)ctx;
    const struct real_cuda *real = real_cuda_get();
    if (real == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r_;
    WITH_DEVICE(real, device, real->cuMemGetInfo_v2(free_bytes, total_bytes));
    return from_cu(r_);
}

static int
backend_event_create(void *ctx, int device, void **event)
{
    (void)ctx;
    const struct real_cuda *real = real_cuda_get();
    if (real == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUevent ev = NULL;
    CUresult r_;
    WITH_DEVICE(real, device, real->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    if (r_ == CUDA_SUCCESS)
        *event = ev;
    return from_cu(r_);
}

static int
backend_event_record(void *ctx, void *event, uint64_t stream)
{
    (void)ctx;
    const struct real_cuda *real = real_cuda_get();
    if (real == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    return from_cu(real->cuEventRecord((CUevent)event, stream_id_to_cu(stream)));
}

/* The first cuEventQuery error not yet logged (0: none; -1: logged, never again). Set under an
 * allocator lock, logged by cuda_backend_log_faults outside it. */
atomic_int cuda_backend_fault;

static int
backend_event_query(void *ctx, void *event, bool *complete)
{
    (void)ctx;
    const struct real_cuda *real = real_cuda_get();
    if (real == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real->cuEventQuery((CUevent)event);
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY) {
        *complete = r == CUDA_SUCCESS;
        return 0;
    }
    int none = 0;
    (void)atomic_compare_exchange_strong(&cuda_backend_fault, &none, r > 0 ? (int)r : 1);
    return from_cu(r);
}

static int
backend_event_synchronize(void *ctx, void *event)
{
    (void)ctx;
    const struct real_cuda *real = real_cuda_get();
    if (real == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    return from_cu(real->cuEventSynchronize((CUevent)event));
}

static int
backend_event_destroy(void *ctx, void *event)
{
    (void)ctx;
    const struct real_cuda *real = real_cuda_get();
    if (real == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real->cuEventDestroy_v2((CUevent)event);
    if (r == CUDA_ERROR_DEINITIALIZED || r == CUDA_ERROR_CONTEXT_IS_DESTROYED)
        return 0;
    return from_cu(r);
}

/* cuCtxSynchronize with `device` made current for the call. */
__attribute__((noinline)) static int
synchronize_other_device(int device)
{
    const struct real_cuda *real = real_cuda_get();
    if (real == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r_;
    WITH_DEVICE(real, device, real->cuCtxSynchronize());
    return from_cu(r_);
}

/* Every cudaFree comes here, nearly always with the device already current: then it is one
 * query and the synchronization. */
static int
backend_synchronize(void *ctx, int device)
{
    (void)ctx;
    const struct real_cuda *real = real_cuda_get();
    CUdevice current;
    if (real == NULL || real->cuCtxGetDevice(&current) != CUDA_SUCCESS || current != device)
        return synchronize_other_device(device);
    return from_cu(real->cuCtxSynchronize());
}

/* The driver refuses a synchronization, like any call that could wait on a capturing stream,
 * while a CUDA graph capture forbids it (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and the other
 * capture errors): the real cudaFree fails the same way (measured on an H200). */
static bool
backend_call_refused(void *ctx, int error)
{
    (void)ctx;
    return error >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED &&
           error <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
}

/* ---- Expandable segments: PyTorch's ExpandableSegment calls, made on the real driver (never
 * through cuprof's own exports, so the program's VMM records never see them). */

static CUmemAllocationProp
page_prop(int device)
{
    /* PyTorch asks for POSIX file descriptor handles (IPC); cuprof shares nothing: none. */
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device}};
    return prop;
}

static int
backend_vmm_granularity(void *ctx, int device, size_t *granularity)
{
    (void)ctx;
    const struct real_cuda *real = real_cuda_get();
    if (real == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUmemAllocationProp prop = page_prop(device);
    return from_cu(
        real->cuMemGetAllocationGranularity(granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
}

static int
backend_vmm_reserve(void *ctx, int device, size_t size, uint64_t *addr)
{
    (void)ctx;
    const struct real_cuda *real = real_cuda_get();
    if (real == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUdeviceptr ptr = 0;
    CUresult r_;
    WITH_DEVICE(real, device, real->cuMemAddressReserve(&ptr, size, 0, 0, 0));
    if (r_ != CUDA_SUCCESS)
        return from_cu(r_);
    if (ptr == 0 || ptr + size < ptr || addr_map_overlaps(&segments, ptr, size, NULL))
        return -CUPROF_EDRIVER;
    /* In cuprof's table like a segment: frees of pointers inside it are cuprof's to judge. */
    if (!addr_map_put(&segments, ptr, (uint64_t)device, size)) {
        (void)real->cuMemAddressFree(ptr, size);
        return -CUPROF_EHOSTMEM;
    }
    *addr = ptr;
    return 0;
}

static int
backend_vmm_release(void *ctx, int device, uint64_t addr, size_t size)
{
    (void)ctx;
    (void)device;
    const struct real_cuda *real = real_cuda_get();
    if (real == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    (void)addr_map_remove(&segments, addr, NULL, NULL);
    CUresult r = real->cuMemAddressFree((CUdeviceptr)addr, size);
    if (r == CUDA_ERROR_DEINITIALIZED || r == CUDA_ERROR_CONTEXT_IS_DESTROYED)
        return 0;
    return from_cu(r);
}

/* Unmaps `count` pages from addr; each mapping held its page's memory (its handle was released
 * once mapped), so the memory goes back to the device with it. */
static CUresult
unmap_pages(const struct real_cuda *real, uint64_t addr, size_t page, size_t count)
{
    CUresult first = CUDA_SUCCESS;
    for (size_t i = 0; i < count; i++) {
        CUresult r = real->cuMemUnmap((CUdeviceptr)(addr + i * page), page);
        if (first == CUDA_SUCCESS)
            first = r;
    }
    return first;
}

/* PyTorch's ExpandableSegment::map: every page's handle first (cuMemCreate), then cuMemMap each
 * and cuMemSetAccess over the range. Unlike PyTorch, a handle is released as soon as it is
 * mapped: the mapping keeps the memory (the driver frees it at the last unmap), so cuprof keeps
 * no handle table and needs no host memory under the allocator's lock. */
static CUresult
map_pages(const struct real_cuda *real, int device, uint64_t addr, size_t page, size_t count)
{
    CUmemAllocationProp prop = page_prop(device);
    CUmemGenericAllocationHandle h[16];
    CUresult r = CUDA_SUCCESS;
    size_t done = 0;
    /* In batches of 16 pages: each batch is created whole before any of it is mapped. */
    while (done < count && r == CUDA_SUCCESS) {
        size_t n = count - done < 16 ? count - done : 16, made = 0, mapped = 0;
        for (; made < n && r == CUDA_SUCCESS; made += r == CUDA_SUCCESS)
            r = real->cuMemCreate(&h[made], page, &prop, 0);
        for (; mapped < made && r == CUDA_SUCCESS; mapped += r == CUDA_SUCCESS)
            r = real->cuMemMap((CUdeviceptr)(addr + (done + mapped) * page), page, 0, h[mapped], 0);
        for (size_t i = 0; i < made; i++)
            (void)real->cuMemRelease(h[i]);
        if (r != CUDA_SUCCESS) {
            (void)unmap_pages(real, addr + done * page, page, mapped);
            break;
        }
        done += n;
    }
    if (r == CUDA_SUCCESS) {
        CUmemAccessDesc desc = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device},
                                .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
        r = real->cuMemSetAccess((CUdeviceptr)addr, count * page, &desc, 1);
    }
    if (r != CUDA_SUCCESS) /* all or nothing: what this call mapped goes again */
        (void)unmap_pages(real, addr, page, done);
    return r;
}

static int
backend_vmm_map(void *ctx, int device, uint64_t addr, size_t page, size_t count)
{
    (void)ctx;
    const struct real_cuda *real = real_cuda_get();
    if (real == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r_;
    WITH_DEVICE(real, device, map_pages(real, device, addr, page, count));
    return from_cu(r_);
}

static int
backend_vmm_unmap(void *ctx, int device, uint64_t addr, size_t page, size_t count)
{
    (void)ctx;
    const struct real_cuda *real = real_cuda_get();
    if (real == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r_;
    WITH_DEVICE(real, device, unmap_pages(real, addr, page, count));
    if (r_ == CUDA_ERROR_DEINITIALIZED || r_ == CUDA_ERROR_CONTEXT_IS_DESTROYED)
        return 0;
    return from_cu(r_);
}

/* PyTorch's setAccess for a peer device: one cuMemSetAccess, one descriptor. */
static int
backend_vmm_set_access(void *ctx, int device, uint64_t addr, size_t size, int peer)
{
    (void)ctx;
    const struct real_cuda *real = real_cuda_get();
    if (real == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUmemAccessDesc desc = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = peer},
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUresult r_;
    WITH_DEVICE(real, device, real->cuMemSetAccess((CUdeviceptr)addr, size, &desc, 1));
    return from_cu(r_);
}

/* PyTorch's expandable segments need the driver's virtual memory calls and a device that says it
 * can map memory (older drivers, virtualization layers and some devices cannot). */
static bool
backend_vmm_supported(void *ctx, int device)
{
    (void)ctx;
    const struct real_cuda *real = real_cuda_get();
    CUdevice dev;
    int supported = 0;
    return real != NULL && real_cuda_missing(REAL_CUDA_NEED_VMM, NULL, 0) == 0 &&
           real->cuDeviceGet(&dev, device) == CUDA_SUCCESS &&
           real->cuDeviceGetAttribute(&supported,
                                      CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                      dev) == CUDA_SUCCESS &&
           supported != 0;
}

static int
backend_stream_synchronize(void *ctx, int device, uint64_t stream)
{
    (void)ctx;
    const struct real_cuda *real = real_cuda_get();
    if (real == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r_;
    WITH_DEVICE(real, device, real->cuStreamSynchronize(stream_id_to_cu(stream)));
    return from_cu(r_);
}

static const struct device_ops backend_ops = {
    .ctx = NULL,
    .segment_alloc = backend_segment_alloc,
    .segment_free = backend_segment_free,
    .mem_info = backend_mem_info,
    .event_create = backend_event_create,
    .event_record = backend_event_record,
    .event_query = backend_event_query,
    .event_synchronize = backend_event_synchronize,
    .event_destroy = backend_event_destroy,
    .synchronize = backend_synchronize,
    .call_refused = backend_call_refused,
    .vmm_granularity = backend_vmm_granularity,
    .vmm_reserve = backend_vmm_reserve,
    .vmm_map = backend_vmm_map,
    .vmm_unmap = backend_vmm_unmap,
    .vmm_release = backend_vmm_release,
    .vmm_set_access = backend_vmm_set_access,
    .vmm_supported = backend_vmm_supported,
    .stream_synchronize = backend_stream_synchronize,
};

const struct device_ops *
cuda_backend_ops(void)
{
    return &backend_ops;
}

int
cuda_backend_device_count(void)
{
    const struct real_cuda *real = real_cuda_get();
    int count = 0;
    if (real == NULL || real->cuDeviceGetCount == NULL ||
        real->cuDeviceGetCount(&count) != CUDA_SUCCESS)
        return 0;
    return count;
}

bool
cuda_backend_owns(uint64_t addr)
{
    /* cuprof's own table, not cuMemGetAddressRange: a wrong answer from the driver would send a
     * pointer inside cuprof's segment to cuMemFree, which frees the whole segment when the
     * pointer is its base. An error path only: the scan is linear. */
    return addr_map_overlaps(&segments, addr, 1, NULL);
}

void
cuda_backend_log_faults_slow(void)
{
    int code = atomic_exchange(&cuda_backend_fault, -1);
    if (code > 0 && runtime_log_info())
        runtime_log("cuprof: cuEventQuery failed with CUresult %d; cuprof waits for the stream "
                    "(or the device) before it reuses a block freed on another stream (logged "
                    "once)",
                    code);
}

void
cuda_backend_forget_device(int device)
{
    addr_map_remove_matching_a(&segments, (uint64_t)device);
}

void
cuda_backend_fork_prepare(void)
{
    addr_map_fork_prepare(&segments);
}

void
cuda_backend_fork_parent(void)
{
    addr_map_fork_parent(&segments);
}

void
cuda_backend_reset_after_fork(void)
{
    addr_map_reset_after_fork(&segments);
}
