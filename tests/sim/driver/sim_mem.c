/* Device memory: cuMemAlloc/Free/Pitch/Managed, managed-memory hints, info and range queries,
 * pointer attributes, memory pools and stream-ordered allocation. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>

#include "sim_config.h"
#include "sim_driver.h"
#include "sim_graph.h"

static struct sim_device *
device_of_heap_ptr(uintptr_t p)
{
    for (int i = 0; i < sim.ndev; i++) {
        struct sim_device *d = &sim.devs[i];
        if (p >= (uintptr_t)d->base && p - (uintptr_t)d->base < d->reserve)
            return d;
    }
    return NULL;
}

bool
sim_mem_is_device_va(uintptr_t ptr)
{
    return device_of_heap_ptr(ptr) || sim_vmm_reserved(ptr);
}

struct sim_device *
sim_mem_owner(uintptr_t ptr, size_t len)
{
    struct sim_device *d = device_of_heap_ptr(ptr);
    if (d) {
        pthread_mutex_lock(&d->lock);
        struct sim_heap_seg *s = sim_heap_find_containing(&d->heap, ptr);
        bool ok = s && len <= s->req - (ptr - s->start);
        pthread_mutex_unlock(&d->lock);
        return ok ? d : NULL;
    }
    uintptr_t base;
    size_t size;
    return sim_vmm_lookup(ptr, len, &d, &base, &size, NULL) == CUDA_SUCCESS ? d : NULL;
}

/* The real driver's IDs are unique within the process, not per address: one counter for every
 * kind of allocation. */
static _Atomic uint64_t buffer_ids;

uint64_t
sim_mem_new_buffer_id(void)
{
    return atomic_fetch_add_explicit(&buffer_ids, 1, memory_order_relaxed) + 1;
}

/* One allocation; `backed`: its pages charged now (else an address range whose pages a graph's
 * first run charges). */
static CUresult
alloc_segment(struct CUctx_st *ctx, size_t size, enum sim_kind kind,
              struct CUmemPoolHandle_st *pool, bool backed, CUdeviceptr *out)
{
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    const struct sim_config *cfg = sim_config_get();
    sim_busy_wait_us(cfg->malloc_us);
    int err = sim_fail_check(SIM_FAIL_ALLOC, size);
    if (err)
        return (CUresult)err;
    /* Real GPUs: >= 512 B alignment, and 2 MiB pages for requests of 2 MiB or more. */
    size_t align = size >= SIM_PAGE ? SIM_PAGE : SIM_SMALL_ALIGN;
    if (size > SIZE_MAX - align)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t rounded = (size + align - 1) & ~(align - 1);
    struct sim_device *dev = pool ? pool->dev : ctx->dev;
    struct sim_heap_seg *seg;
    pthread_mutex_lock(&dev->lock);
    err = backed ? sim_heap_alloc(&dev->heap, rounded, align, size, &seg)
                 : sim_heap_alloc_unbacked(&dev->heap, rounded, align, size, &seg);
    if (!err) {
        seg->owner = ctx->dev == dev ? ctx : &dev->primary;
        seg->kind = kind;
        seg->pool = pool;
        seg->buffer_id = sim_mem_new_buffer_id();
        if (pool) {
            pool->used += size;
            if (pool->used > pool->used_high)
                pool->used_high = pool->used;
        }
    }
    pthread_mutex_unlock(&dev->lock);
    if (err)
        return (CUresult)err;
    *out = (CUdeviceptr)seg->start;
    return CUDA_SUCCESS;
}

CUresult
sim_mem_alloc(struct CUctx_st *ctx, size_t size, enum sim_kind kind,
              struct CUmemPoolHandle_st *pool, CUdeviceptr *out)
{
    return alloc_segment(ctx, size, kind, pool, true, out);
}

CUresult
sim_mem_free_now(uintptr_t ptr, bool from_async)
{
    struct sim_device *dev = device_of_heap_ptr(ptr);
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&dev->lock);
    struct sim_heap_seg *s = sim_heap_find(&dev->heap, ptr);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (s && s->used && s->free_queued == from_async) {
        if (s->pool)
            ((struct CUmemPoolHandle_st *)s->pool)->used -= s->req;
        sim_heap_free(&dev->heap, s);
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&dev->lock);
    return r;
}

CUresult
sim_mem_alloc_graph(struct CUctx_st *ctx, size_t size, const void *graph, CUdeviceptr *out)
{
    /* The address now, the memory at the graph's first run (sim_mem_graph_back). */
    CUresult r = alloc_segment(ctx, size, SIM_KIND_ASYNC, NULL, false, out);
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_device *dev = device_of_heap_ptr(*out);
    pthread_mutex_lock(&dev->lock);
    sim_heap_find(&dev->heap, *out)->graph = graph;
    pthread_mutex_unlock(&dev->lock);
    return CUDA_SUCCESS;
}

CUresult
sim_mem_graph_back(const uintptr_t *ptrs, size_t n, const void *graph)
{
    struct sim_device *dev = n > 0 ? device_of_heap_ptr(ptrs[0]) : NULL;
    if (dev == NULL)
        return CUDA_SUCCESS;
    pthread_mutex_lock(&dev->lock);
    /* All or nothing: a run that cannot have its memory runs nothing. */
    size_t done = 0;
    bool fits = true;
    for (; done < n && fits; done++) {
        struct sim_heap_seg *seg = sim_heap_find(&dev->heap, ptrs[done]);
        if (!seg || !seg->used || seg->graph != graph || !seg->unbacked)
            continue;
        fits = sim_heap_back(&dev->heap, seg);
        dev->graph_bytes += fits ? seg->size : 0;
        seg->graph_backed_now = fits;
    }
    for (size_t i = 0; i < done; i++) {
        struct sim_heap_seg *seg = sim_heap_find(&dev->heap, ptrs[i]);
        if (!seg || !seg->graph_backed_now)
            continue;
        seg->graph_backed_now = false;
        if (!fits) {
            sim_heap_unback(&dev->heap, seg);
            dev->graph_bytes -= seg->size;
        }
    }
    if (dev->graph_bytes > dev->graph_bytes_high)
        dev->graph_bytes_high = dev->graph_bytes;
    pthread_mutex_unlock(&dev->lock);
    return fits ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

bool
sim_mem_graph_set_live(uintptr_t ptr, const void *graph, bool live, bool *was_live)
{
    struct sim_device *dev = device_of_heap_ptr(ptr);
    if (!dev)
        return false;
    pthread_mutex_lock(&dev->lock);
    struct sim_heap_seg *seg = sim_heap_find(&dev->heap, ptr);
    bool ours = seg && seg->used && seg->graph == graph;
    if (ours) {
        *was_live = seg->graph_live;
        seg->graph_live = live;
    }
    pthread_mutex_unlock(&dev->lock);
    return ours;
}

bool
sim_mem_graph_is_live(uintptr_t ptr, const void *graph)
{
    struct sim_device *dev = device_of_heap_ptr(ptr);
    if (!dev)
        return false;
    pthread_mutex_lock(&dev->lock);
    struct sim_heap_seg *seg = sim_heap_find(&dev->heap, ptr);
    bool live = seg && seg->used && seg->graph == graph && seg->graph_live;
    pthread_mutex_unlock(&dev->lock);
    return live;
}

void
sim_mem_graph_release(uintptr_t ptr, const void *graph)
{
    struct sim_device *dev = device_of_heap_ptr(ptr);
    if (!dev)
        return;
    pthread_mutex_lock(&dev->lock);
    struct sim_heap_seg *seg = sim_heap_find(&dev->heap, ptr);
    if (seg && seg->used && seg->graph == graph) {
        if (!seg->unbacked)
            dev->graph_bytes -= seg->size;
        if (seg->graph_live) /* the program's now, like any allocation */
            seg->graph = NULL;
        else
            sim_heap_free(&dev->heap, seg);
    }
    pthread_mutex_unlock(&dev->lock);
}

/* A free of a graph allocation: the program may free one only while it holds it (its graph ran
 * and did not free it); the memory then stays the graph's, for its next launch. */
static CUresult
free_graph_allocation(struct sim_device *dev, uintptr_t ptr)
{
    pthread_mutex_lock(&dev->lock);
    struct sim_heap_seg *seg = sim_heap_find(&dev->heap, ptr);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (seg && seg->used && seg->graph_live) {
        seg->graph_live = false;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&dev->lock);
    return r;
}

size_t
sim_device_free_owned(struct sim_device *dev, struct CUctx_st *ctx)
{
    pthread_mutex_lock(&dev->lock);
    /* cuda.h, cuCtxDestroy: stream-ordered memory (cuMemAllocAsync, cuMemAllocFromPoolAsync) is
     * not destroyed with its context: the device's from now on. (VMM memory has no owner.) */
    for (struct sim_heap_seg *s = dev->heap.first; s; s = s->next)
        if (s->used && s->owner == ctx && s->kind == SIM_KIND_ASYNC)
            s->owner = &dev->primary;
    for (struct sim_heap_seg *s = dev->heap.first; s; s = s->next)
        if (s->used && s->owner == ctx && s->pool)
            ((struct CUmemPoolHandle_st *)s->pool)->used -= s->req;
    size_t n = sim_heap_free_owned(&dev->heap, ctx);
    pthread_mutex_unlock(&dev->lock);
    return n;
}

CUresult
cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_capture_active() && (r = sim_capture_check_unsafe()) != CUDA_SUCCESS)
        return r;
    return sim_mem_alloc(ctx, bytesize, SIM_KIND_DEVICE, NULL, dptr);
}

CUresult
cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_capture_active() && (r = sim_capture_check_unsafe()) != CUDA_SUCCESS)
        return r;
    return sim_mem_alloc(ctx, bytesize, SIM_KIND_MANAGED, NULL, dptr);
}

/* The pitch is the width rounded up to 512 bytes, what real GPUs hand out for cudaMallocPitch. */
CUresult
cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                   unsigned int ElementSizeBytes)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    if (WidthInBytes > SIZE_MAX - SIM_SMALL_ALIGN)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t pitch = (WidthInBytes + SIM_SMALL_ALIGN - 1) & ~(SIM_SMALL_ALIGN - 1);
    if (Height > SIZE_MAX / pitch)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (sim_capture_active() && (r = sim_capture_check_unsafe()) != CUDA_SUCCESS)
        return r;
    r = sim_mem_alloc(ctx, pitch * Height, SIM_KIND_DEVICE, NULL, dptr);
    if (r == CUDA_SUCCESS)
        *pPitch = pitch;
    return r;
}

CUresult
cuMemFree_v2(CUdeviceptr dptr)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (dptr == 0)
        return CUDA_SUCCESS;
    struct sim_device *dev = device_of_heap_ptr(dptr);
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&dev->lock);
    struct sim_heap_seg *s = sim_heap_find(&dev->heap, dptr);
    bool valid = s && s->used && !s->free_queued;
    bool graph = valid && s->graph != NULL;
    pthread_mutex_unlock(&dev->lock);
    if (!valid)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_capture_active() && (r = sim_capture_check_unsafe()) != CUDA_SUCCESS)
        return r;
    int err = sim_fail_check(SIM_FAIL_FREE, 0);
    if (err)
        return (CUresult)err;
    sim_busy_wait_us(sim_config_get()->free_us);
    /* Like the real cuMemFree: implicitly waits for all work queued on the device. */
    sim_device_sync(dev);
    return graph ? free_graph_allocation(dev, dptr) : sim_mem_free_now(dptr, false);
}

CUresult
cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    /* A slow query on demand (seconds, so a sleep, not a busy-wait): what a profiler does while
     * it waits on the driver can then be watched. */
    unsigned long delay_us = sim_config_get()->meminfo_us;
    if (delay_us > 0) {
        struct timespec delay = {(time_t)(delay_us / 1000000), (long)(delay_us % 1000000) * 1000};
        while (nanosleep(&delay, &delay) != 0 && errno == EINTR)
            ;
    }
    struct sim_device *dev = ctx->dev;
    pthread_mutex_lock(&dev->lock);
    *free_bytes = dev->capacity - dev->used_pages * SIM_PAGE;
    pthread_mutex_unlock(&dev->lock);
    *total = dev->capacity;
    return CUDA_SUCCESS;
}

/* Finds the allocation holding ptr: heap segment or mapped VMM range (`copy` is zeroed for a
 * VMM range but for its buffer_id). */
static bool
find_range(uintptr_t ptr, struct sim_device **dev, uintptr_t *base, size_t *size,
           struct sim_heap_seg *copy)
{
    struct sim_device *d = device_of_heap_ptr(ptr);
    if (d) {
        pthread_mutex_lock(&d->lock);
        struct sim_heap_seg *s = sim_heap_find_containing(&d->heap, ptr);
        if (s)
            *copy = *s;
        pthread_mutex_unlock(&d->lock);
        if (!s)
            return false;
        *dev = d;
        *base = copy->start;
        *size = copy->req;
        return true;
    }
    memset(copy, 0, sizeof(*copy));
    return sim_vmm_lookup(ptr, 0, dev, base, size, &copy->buffer_id) == CUDA_SUCCESS;
}

CUresult
cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_device *d;
    uintptr_t base;
    size_t size;
    struct sim_heap_seg seg;
    if (!find_range(dptr, &d, &base, &size, &seg))
        return CUDA_ERROR_NOT_FOUND;
    if (pbase)
        *pbase = base;
    if (psize)
        *psize = size;
    return CUDA_SUCCESS;
}

/* A legacy IPC handle for cuMemAlloc memory: the allocation it names (its start, whatever
 * address inside it was given), and this process. Opening one is not simulated: the simulated
 * device's memory belongs to one process. */
CUresult
cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_device *d;
    uintptr_t base;
    size_t size;
    struct sim_heap_seg seg;
    if (handle == NULL || !find_range(dptr, &d, &base, &size, &seg) || seg.kind != SIM_KIND_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    memset(handle, 0, sizeof(*handle));
    const uint64_t words[] = {0x4350495f4d4953ull /* "SIM_IPC" */, (uint64_t)getpid(),
                              (uint64_t)base, (uint64_t)size};
    memcpy(handle->reserved, words, sizeof(words));
    return CUDA_SUCCESS;
}

/* One attribute; `known` false means ptr is no CUDA pointer (defaults for the plural call).
 * `plural`: cuPointerGetAttributes, which NVIDIA's driver 580 answers differently where noted
 * (measured on an H200: tests/integration/nvcc/real/). */
static CUresult
pointer_attribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr, bool plural, bool *known)
{
    struct sim_device *dev = NULL;
    uintptr_t base = 0;
    size_t size = 0;
    struct sim_heap_seg seg;
    uint64_t host_id = 0;
    bool is_dev = find_range(ptr, &dev, &base, &size, &seg);
    bool is_host = !is_dev && sim_host_find(ptr, &base, &size, &host_id);
    *known = is_dev || is_host;
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = is_dev ? (seg.owner ? seg.owner : &dev->primary) : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = is_dev ? CU_MEMORYTYPE_DEVICE : is_host ? CU_MEMORYTYPE_HOST : 0;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = *known ? ptr : 0;
        break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        /* Device memory has no host pointer: an error alone, NULL among others. A pointer to
         * nothing is its own host pointer in the plural call. */
        if (is_dev && seg.kind != SIM_KIND_MANAGED) {
            if (!plural)
                return CUDA_ERROR_INVALID_VALUE;
            *(void **)data = NULL;
        } else {
            *(void **)data = (void *)(uintptr_t)ptr;
        }
        break;
    /* The yes/no attributes: NVIDIA's driver 580 writes 4 bytes for each (measured). */
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(unsigned int *)data = is_dev && seg.kind == SIM_KIND_MANAGED;
        break;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(unsigned int *)data = *known;
        break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        *(unsigned int *)data = 0; /* until cuPointerSetAttribute turns it on: not simulated */
        break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(unsigned int *)data = is_dev && seg.kind == SIM_KIND_DEVICE;
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = is_dev ? seg.buffer_id : host_id;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        if (*known) /* a pointer to nothing leaves the range unwritten */
            *(void **)data = (void *)base;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        if (*known)
            *(size_t *)data = size;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = is_dev ? dev->ordinal : -2;
        break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *(CUmemoryPool *)data = is_dev ? seg.pool : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        *(unsigned long long *)data = 0;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult
cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned char scratch[16];
    bool known;
    r = pointer_attribute(scratch, attribute, ptr, false, &known);
    if (r != CUDA_SUCCESS || !known)
        return CUDA_ERROR_INVALID_VALUE;
    return pointer_attribute(data, attribute, ptr, false, &known);
}

CUresult
cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                       CUdeviceptr ptr)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!attributes || !data)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < numAttributes; i++) {
        bool known;
        if (!data[i])
            return CUDA_ERROR_INVALID_VALUE;
        r = pointer_attribute(data[i], attributes[i], ptr, true, &known);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
}

/* ---- managed-memory hints: validated, with no effect (the simulated device keeps one copy) ----
 */

/* [p, p+count) lies in one cuMemAllocManaged allocation. */
static bool
managed_range(CUdeviceptr p, size_t count)
{
    struct sim_device *d;
    uintptr_t base;
    size_t size;
    struct sim_heap_seg seg;
    return count > 0 && find_range(p, &d, &base, &size, &seg) && seg.kind == SIM_KIND_MANAGED &&
           count <= size - (p - base);
}

/* A place managed memory may go or be read from: a device, or the host (one NUMA node, 0). */
static CUresult
check_location(CUmemLocation loc)
{
    switch (loc.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        return sim_device_get(loc.id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT: /* the id is ignored for these two */
        return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
        return loc.id == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult
prefetch(CUdeviceptr p, size_t count, CUmemLocation loc, unsigned flags, CUstream h, bool ptsz)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (flags != 0 || !managed_range(p, count)) /* flags: for future use, must be 0 */
        return CUDA_ERROR_INVALID_VALUE;
    return check_location(loc);
}

CUresult
cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags,
                      CUstream hStream)
{
    return prefetch(devPtr, count, location, flags, hStream, false);
}

CUresult
cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                           unsigned int flags, CUstream hStream)
{
    return prefetch(devPtr, count, location, flags, hStream, true);
}

CUresult
cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUmemLocation location)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!managed_range(devPtr, count))
        return CUDA_ERROR_INVALID_VALUE;
    switch (advice) {
    case CU_MEM_ADVISE_SET_READ_MOSTLY: /* cuda.h: these three ignore the location */
    case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
    case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
        return CUDA_SUCCESS;
    case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
    case CU_MEM_ADVISE_SET_ACCESSED_BY:
    case CU_MEM_ADVISE_UNSET_ACCESSED_BY:
        return check_location(location);
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* ---- memory pools (no caching: reserved memory always equals used memory) ---- */

CUresult
cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_device *d = sim_device_get(dev);
    if (!d)
        return CUDA_ERROR_INVALID_DEVICE;
    *pool_out = &d->default_pool;
    return CUDA_SUCCESS;
}

/* The pool cuMemAllocAsync takes from on `d`: cuDeviceSetMemPool's, else the default one. */
static struct CUmemPoolHandle_st *
current_pool(struct sim_device *d)
{
    pthread_mutex_lock(&d->lock);
    struct CUmemPoolHandle_st *p = d->current_pool ? d->current_pool : &d->default_pool;
    pthread_mutex_unlock(&d->lock);
    return p;
}

CUresult
cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    struct sim_device *d;
    CUresult r = sim_device_require(dev, &d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    *pool = current_pool(d);
    return CUDA_SUCCESS;
}

/* cuda.h: the pool must be local to the device. */
CUresult
cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    struct sim_device *d;
    CUresult r = sim_device_require(dev, &d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    if (pool->dev != d)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&d->lock);
    r = pool->destroyed ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS)
        d->current_pool = pool->is_default ? NULL : pool;
    pthread_mutex_unlock(&d->lock);
    return r;
}

CUresult
cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_device *d = sim_device_get(poolProps->location.id);
    if (!d)
        return CUDA_ERROR_INVALID_DEVICE;
    struct CUmemPoolHandle_st *p = calloc(1, sizeof(*p));
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->dev = d;
    pthread_mutex_lock(&d->lock);
    p->next = d->pools;
    d->pools = p;
    pthread_mutex_unlock(&d->lock);
    *pool = p;
    return CUDA_SUCCESS;
}

CUresult
cuMemPoolDestroy(CUmemoryPool pool)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pool || pool->is_default)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool->dev->lock);
    bool was = pool->destroyed;
    pool->destroyed = true; /* stays on dev->pools: live allocations may still point at it */
    if (pool->dev->current_pool == pool) /* cuda.h: the device goes back to its default pool */
        pool->dev->current_pool = NULL;
    pthread_mutex_unlock(&pool->dev->lock);
    return was ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult
cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    (void)minBytesToKeep;
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    return pool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult
cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pool || !value)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool->dev->lock);
    r = CUDA_SUCCESS;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *(int *)value = !(pool->reuse_off & (1u << attr)); /* on by default */
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        *(cuuint64_t *)value = pool->release_threshold;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
        *(cuuint64_t *)value = pool->used;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        *(cuuint64_t *)value = pool->used_high;
        break;
    default:
        r = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&pool->dev->lock);
    return r;
}

CUresult
cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pool || !value)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool->dev->lock);
    r = CUDA_SUCCESS;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        /* Kept for the getter only: a pool that never caches has nothing to reuse. */
        if (*(int *)value)
            pool->reuse_off &= ~(1u << attr);
        else
            pool->reuse_off |= 1u << attr;
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        pool->release_threshold = *(cuuint64_t *)value;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        /* Only a reset to zero is allowed; the mark restarts from the current value. */
        if (*(cuuint64_t *)value != 0)
            r = CUDA_ERROR_INVALID_VALUE;
        else
            pool->used_high = pool->used;
        break;
    default:
        r = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&pool->dev->lock);
    return r;
}

/* ---- stream-ordered allocation ---- */

static CUresult
alloc_async(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, bool from_pool, CUstream hStream,
            bool ptsz)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    struct CUstream_st *s;
    r = sim_stream_resolve(hStream, ptsz, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr || (from_pool && !pool))
        return CUDA_ERROR_INVALID_VALUE;
    if (!pool)
        pool = current_pool(s->dev);
    if (pool->destroyed)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_capture_active()) {
        bool taken = false;
        r = sim_capture_alloc(s, ctx, bytesize, dptr, &taken);
        if (taken)
            return r;
    }
    /* Memory is handed out at once: nothing can still be using it, so stream order holds. */
    return sim_mem_alloc(ctx, bytesize, SIM_KIND_ASYNC, pool, dptr);
}

CUresult
cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, NULL, false, hStream, false);
}

CUresult
cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, NULL, false, hStream, true);
}

CUresult
cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    return alloc_async(dptr, bytesize, pool, true, hStream, false);
}

CUresult
cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                             CUstream hStream)
{
    return alloc_async(dptr, bytesize, pool, true, hStream, true);
}

static CUresult
free_async(CUdeviceptr dptr, CUstream hStream, bool ptsz)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    struct CUstream_st *s;
    r = sim_stream_resolve(hStream, ptsz, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (dptr == 0)
        return CUDA_SUCCESS;
    if (sim_capture_active()) {
        bool taken = false;
        r = sim_capture_free(s, dptr, &taken);
        if (taken)
            return r;
    }
    struct sim_device *dev = device_of_heap_ptr(dptr);
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    int err = 0;
    pthread_mutex_lock(&dev->lock);
    struct sim_heap_seg *seg = sim_heap_find(&dev->heap, dptr);
    bool graph = seg && seg->graph != NULL;
    if (!seg || !seg->used || seg->free_queued)
        err = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&dev->lock);
    if (!err && graph)
        return free_graph_allocation(dev, dptr);
    if (!err)
        err = sim_fail_check(SIM_FAIL_FREE, 0);
    if (err)
        return (CUresult)err;
    pthread_mutex_lock(&dev->lock);
    seg = sim_heap_find(&dev->heap, dptr);
    if (!seg || !seg->used || seg->free_queued)
        err = CUDA_ERROR_INVALID_VALUE;
    else
        seg->free_queued = true;
    pthread_mutex_unlock(&dev->lock);
    if (err)
        return (CUresult)err;
    /* The memory goes back when the stream reaches this point. A stream that refuses the work
     * (the legacy stream while a blocking stream captures) leaves the allocation as it was. */
    r = sim_stream_enqueue_free(s, dptr);
    if (r != CUDA_SUCCESS) {
        pthread_mutex_lock(&dev->lock);
        seg = sim_heap_find(&dev->heap, dptr);
        if (seg && seg->used)
            seg->free_queued = false;
        pthread_mutex_unlock(&dev->lock);
    }
    return r;
}

CUresult
cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(dptr, hStream, false);
}

CUresult
cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(dptr, hStream, true);
}
