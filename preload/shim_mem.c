/* shim_mem.c: driver allocation wrappers (see shim_mem.h).
 * cache: cuMemAlloc_v2 / pitched / stream-ordered requests are served by the allocator;
 * trace: the allocator runs with caching=false, so each request is its own device allocation;
 * both: managed memory and cuMemAllocFromPoolAsync go to the driver and are recorded
 * (allocator_track_external) with their own pool tag; off: the real function, untouched. */
#include "preload/shim_mem.h"

#include <stdatomic.h>

#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "preload/cuda_backend.h"
#include "preload/double_free.h"
#include "preload/guard.h"
#include "preload/config.h"
#include "preload/real_cuda.h"
#include "preload/runtime.h"
#include "preload/shim_capture.h"
#include "preload/shim_call.h"
#include "preload/stream_id.h"

/* During a capture that forbids this thread's unsafe calls the driver refuses any allocation,
 * and invalidates the capture, where the cache could have answered: such a call goes to the
 * driver, so that the program sees the driver's answer. cuprof records nothing for a refused
 * call; memory the driver gives after all (a capture cuprof could not follow) is recorded as
 * trace mode records it. */
static bool
capture_forbids_cache(void)
{
    return shim_capture_any() && runtime_config()->mode == CUPROF_MODE_CACHE &&
           shim_capture_forbids_unsafe();
}

CUresult
shim_mem_alloc(CUdeviceptr *dptr, size_t size)
{
    REAL_CUDA_OR_FAIL(real, cuMemAlloc_v2)
    struct shim_call call;
    /* NULL pointer or size 0: the driver's own CUDA_ERROR_INVALID_VALUE. */
    if (dptr == NULL || size == 0 || !SHIM_CALL_BEGIN(&call, SHIM_CALL_ALLOC))
        return real->cuMemAlloc_v2(dptr, size);
    if (capture_forbids_cache() || !shim_call_cache_serves(&call)) {
        CUresult result = real->cuMemAlloc_v2(dptr, size);
        if (shim_call_release_for_driver(&call, result, call.device))
            result = real->cuMemAlloc_v2(dptr, size);
        if (result == CUDA_SUCCESS)
            shim_call_track_external(&call, call.device, *dptr, size, 0, TRACE_POOL_TRACE,
                                     "cuMemAlloc_v2");
        shim_call_note_refusal(&call, result, call.device, size, 0, TRACE_POOL_TRACE,
                               "cuMemAlloc_v2");
        shim_call_end(&call);
        return result;
    }
    uint64_t addr = 0;
    int rc = allocator_malloc_owned(call.rt->alloc, call.device, size, 0, call.stack_id, call.owner,
                                    &addr);
    if (rc == -CUPROF_EDRIVER) {
        shim_call_end(&call);
        shim_call_log_bad_answer("cuMemAlloc_v2");
        return real->cuMemAlloc_v2(dptr, size);
    }
    if (rc == 0)
        *dptr = (CUdeviceptr)addr;
    CUresult result = shim_call_result(&call, rc);
    shim_call_end(&call);
    return result;
}

/* A pointer neither the cache nor the external records know. Inside a segment cuprof holds it is
 * a stale (double-freed) or interior pointer: the driver would free cuprof's whole segment, so
 * answer as the driver answers for a freed pointer. Otherwise it is the driver's business. */
static CUresult
free_unknown(const struct real_cuda *real, struct shim_call *call, CUdeviceptr dptr, bool async,
             CUstream stream, bool ptsz)
{
    if (cuda_backend_owns(dptr)) {
        (void)double_free_report(call->rt, dptr);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult r;
    if (!async)
        r = real->cuMemFree_v2(dptr);
    else if (ptsz)
        r = real->cuMemFreeAsync_ptsz(dptr, stream);
    else
        r = real->cuMemFreeAsync(dptr, stream);
    if (r != CUDA_SUCCESS) {
        /* trace mode: the segment went back to the driver, which now rejects the pointer. */
        (void)double_free_report(call->rt, dptr);
    }
    return r;
}

/* One free path for cuMemFree_v2 and cuMemFreeAsync(_ptsz): cache block, external record, or
 * unknown pointer. */
static CUresult
free_common(const struct real_cuda *real, struct shim_call *call, CUdeviceptr dptr, bool async,
            CUstream stream, bool ptsz)
{
    struct cuprof_runtime *rt = call->rt;
    int rc;
    if (async)
        rc = allocator_free_on_stream(rt->alloc, dptr, stream_id_from_cu(stream, ptsz),
                                      call->stack_id);
    else
        rc = allocator_free(rt->alloc, dptr, call->stack_id);
    if (rc != -CUPROF_ENOTOWNED)
        return shim_call_result(call, rc);
    if (allocator_untrack_external(rt->alloc, dptr, call->stack_id) == 0) {
        if (!async)
            return real->cuMemFree_v2(dptr);
        return ptsz ? real->cuMemFreeAsync_ptsz(dptr, stream) : real->cuMemFreeAsync(dptr, stream);
    }
    return free_unknown(real, call, dptr, async, stream, ptsz);
}

/* shim_mem_free_answer_next's answer; `set` false when there is none. */
struct free_answer {
    CUdeviceptr dptr;
    CUresult result;
    bool set;
};
static _Thread_local struct free_answer free_answer __attribute__((tls_model("initial-exec")));

void
shim_mem_free_answer_next(CUdeviceptr dptr, CUresult result)
{
    free_answer = (struct free_answer){.dptr = dptr, .result = result, .set = true};
}

void
shim_mem_free_answer_clear(void)
{
    free_answer.set = false;
}

CUresult
shim_mem_free(CUdeviceptr dptr)
{
    REAL_CUDA_OR_FAIL(real, cuMemFree_v2)
    if (__builtin_expect(free_answer.set, 0) && free_answer.dptr == dptr) {
        free_answer.set = false;
        return free_answer.result;
    }
    struct shim_call call;
    if (dptr == 0 || !SHIM_CALL_BEGIN(&call, SHIM_CALL_FREE))
        return real->cuMemFree_v2(dptr);
    CUresult result = free_common(real, &call, dptr, false, NULL, false);
    shim_call_end(&call);
    return result;
}

/* The pitch the driver would choose: the smallest multiple of its pitch alignment >= width.
 * The alignment is asked of the driver once per device (a 1-byte-wide pitched allocation returns
 * it as its pitch) rather than assumed: it differs between GPUs (and the simulator). False when
 * cuprof cannot know the pitch (the probe failed, its answer is no power of two up to 1 MiB, or
 * the row would not fit in a size_t): the driver then serves the request itself. */
#define PITCH_ALIGN_MAX ((size_t)1 << 20)
/* Per-device memos (pitch alignment, default pool); past this many devices the alignment is
 * probed at each call and the default pool is taken as current. */
#define SHIM_MEM_DEVICES 64
static _Atomic size_t pitch_alignment[SHIM_MEM_DEVICES];

static bool
pitch_for(const struct real_cuda *real, int device, size_t width, size_t *pitch)
{
    size_t align = device < SHIM_MEM_DEVICES ? atomic_load(&pitch_alignment[device]) : 0;
    if (align == 0) {
        CUdeviceptr probe = 0;
        if (real->cuMemAllocPitch_v2(&probe, &align, 1, 1, 4) != CUDA_SUCCESS)
            return false;
        (void)real->cuMemFree_v2(probe);
        if (align == 0 || align > PITCH_ALIGN_MAX || (align & (align - 1)) != 0)
            return false;
        if (device < SHIM_MEM_DEVICES)
            atomic_store(&pitch_alignment[device], align);
    }
    /* A width near SIZE_MAX would wrap to a tiny row (and a division by zero below). */
    if (width > SIZE_MAX - (align - 1))
        return false;
    *pitch = (width + align - 1) / align * align;
    return true;
}

CUresult
shim_mem_alloc_pitch(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                     unsigned int element_size)
{
    REAL_CUDA_OR_FAIL(real, cuMemAllocPitch_v2)
    struct shim_call call;
    /* Arguments the driver rejects get its own error. */
    bool valid = dptr != NULL && pitch != NULL && width != 0 && height != 0 &&
                 (element_size == 4 || element_size == 8 || element_size == 16);
    if (!valid || !SHIM_CALL_BEGIN(&call, SHIM_CALL_ALLOC))
        return real->cuMemAllocPitch_v2(dptr, pitch, width, height, element_size);
    size_t row = 0;
    int rc = -CUPROF_EDRIVER;
    if (call.rt->mode == CUPROF_MODE_CACHE && !capture_forbids_cache() &&
        shim_call_cache_serves(&call) && pitch_for(real, call.device, width, &row) &&
        height <= SIZE_MAX / row) {
        uint64_t addr = 0;
        rc = allocator_malloc_owned(call.rt->alloc, call.device, row * height, 0, call.stack_id,
                                    call.owner, &addr);
        if (rc == 0) {
            *dptr = (CUdeviceptr)addr;
            *pitch = row;
        }
        if (rc == -CUPROF_EDRIVER)
            shim_call_log_bad_answer("cuMemAlloc_v2");
    }
    CUresult result;
    if (rc != -CUPROF_EDRIVER) {
        result = shim_call_result(&call, rc);
    } else {
        /* Trace mode, a request cuprof cannot size, one a capture keeps from the cache or one
         * of a context that does not own it: the driver's own answer, recorded. */
        result = real->cuMemAllocPitch_v2(dptr, pitch, width, height, element_size);
        if (shim_call_release_for_driver(&call, result, call.device))
            result = real->cuMemAllocPitch_v2(dptr, pitch, width, height, element_size);
        if (result == CUDA_SUCCESS && *pitch != 0 && height <= SIZE_MAX / *pitch)
            shim_call_track_external(&call, call.device, *dptr, *pitch * height, 0,
                                     TRACE_POOL_TRACE, "cuMemAllocPitch_v2");
        if (width > 0 && height <= SIZE_MAX / width) /* the pitch is unknown: at least this */
            shim_call_note_refusal(&call, result, call.device, width * height, 0, TRACE_POOL_TRACE,
                                   "cuMemAllocPitch_v2");
    }
    shim_call_end(&call);
    return result;
}

CUresult
shim_mem_alloc_managed(CUdeviceptr *dptr, size_t size, unsigned int flags)
{
    REAL_CUDA_OR_FAIL(real, cuMemAllocManaged)
    struct shim_call call;
    if (!SHIM_CALL_BEGIN(&call, SHIM_CALL_ALLOC))
        return real->cuMemAllocManaged(dptr, size, flags);
    CUresult result = real->cuMemAllocManaged(dptr, size, flags);
    if (shim_call_release_for_driver(&call, result, call.device))
        result = real->cuMemAllocManaged(dptr, size, flags);
    if (result == CUDA_SUCCESS)
        shim_call_track_external(&call, call.device, *dptr, size, 0, TRACE_POOL_MANAGED,
                                 "cuMemAllocManaged");
    shim_call_note_refusal(&call, result, call.device, size, 0, TRACE_POOL_MANAGED,
                           "cuMemAllocManaged");
    shim_call_end(&call);
    return result;
}

/* Stream capture turns stream-ordered work into graph nodes, and the legacy stream is unusable
 * while a blocking stream captures (the driver's cuStreamIsCapturing answers
 * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT for it): the cache serves neither. True when `stream` (of a
 * per-thread entry point with `ptsz`: 0 is the thread's own stream) captures; *refusal is the
 * driver's error for work on it, else CUDA_SUCCESS. */
static bool
capturing(const struct real_cuda *real, CUstream stream, bool ptsz, CUresult *refusal)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    *refusal = CUDA_SUCCESS;
    if (real->cuStreamIsCapturing == NULL)
        return false;
    CUresult r =
        real->cuStreamIsCapturing(stream == NULL && ptsz ? CU_STREAM_PER_THREAD : stream, &status);
    if (r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
        *refusal = r;
    return r == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* A stream-ordered allocation takes memory from its device's current pool. The cache stands in
 * for the default pool only: a program that made another pool current (cudaDeviceSetMemPool)
 * gets that pool's memory, with the attributes it gave the pool. The default pool of a device
 * never changes: asked once. */
static _Atomic(CUmemoryPool) default_pools[SHIM_MEM_DEVICES];

/* The device's default pool, or NULL where the driver has none to name. */
static CUmemoryPool
default_pool_of(const struct real_cuda *real, int device)
{
    if (real->cuDeviceGetDefaultMemPool == NULL || device < 0 || device >= SHIM_MEM_DEVICES)
        return NULL;
    CUmemoryPool pool = atomic_load_explicit(&default_pools[device], memory_order_relaxed);
    if (pool == NULL && real->cuDeviceGetDefaultMemPool(&pool, device) == CUDA_SUCCESS)
        atomic_store_explicit(&default_pools[device], pool, memory_order_relaxed);
    return pool;
}

static bool
default_pool_current(const struct real_cuda *real, int device)
{
    CUmemoryPool current = NULL, fallback = default_pool_of(real, device);
    if (real->cuDeviceGetMemPool == NULL || fallback == NULL ||
        real->cuDeviceGetMemPool(&current, device) != CUDA_SUCCESS)
        return true;
    return current == fallback;
}

static CUresult
alloc_async(const struct real_cuda *real, PFN_cuMemAllocAsync_v11020 fn, CUdeviceptr *dptr,
            size_t size, CUstream stream, bool ptsz)
{
    struct shim_call call;
    if (dptr == NULL || size == 0 || !SHIM_CALL_BEGIN(&call, SHIM_CALL_ALLOC))
        return fn(dptr, size, stream);
    CUresult result;
    uint64_t sid = stream_id_from_cu(stream, ptsz);
    CUresult refusal = CUDA_SUCCESS;
    if (call.rt->mode == CUPROF_MODE_CACHE && !capturing(real, stream, ptsz, &refusal) &&
        refusal == CUDA_SUCCESS && default_pool_current(real, call.device) &&
        shim_call_cache_serves(&call)) {
        uint64_t addr = 0;
        int rc = allocator_malloc_stream_ordered(call.rt->alloc, call.device, size, sid,
                                                 call.stack_id, call.owner, &addr);
        if (rc == -CUPROF_EDRIVER) {
            shim_call_end(&call);
            shim_call_log_bad_answer("cuMemAlloc_v2");
            return fn(dptr, size, stream);
        }
        if (rc == 0)
            *dptr = (CUdeviceptr)addr;
        result = shim_call_result(&call, rc);
    } else {
        /* Trace mode, or in cache mode a capture (or the legacy stream a capture makes unusable:
         * the driver refuses and invalidates), a pool of the program's own made current, or a
         * context that does not own the cache. A graph allocation is recorded where the program
         * made it (its address is the graph's for the graph's life; its memory is the graph
         * pool's, device_footprint's graph_reserved_bytes_at_dump). */
        result = fn(dptr, size, stream);
        if (shim_call_release_for_driver(&call, result, call.device))
            result = fn(dptr, size, stream);
        if (result == CUDA_SUCCESS)
            shim_call_track_external(&call, call.device, *dptr, size, sid, TRACE_POOL_ASYNC,
                                     "cuMemAllocAsync");
        shim_call_note_refusal(&call, result, call.device, size, sid, TRACE_POOL_ASYNC,
                               "cuMemAllocAsync");
    }
    shim_call_end(&call);
    return result;
}

CUresult
shim_mem_alloc_async(CUdeviceptr *dptr, size_t size, CUstream stream)
{
    REAL_CUDA_OR_FAIL(real, cuMemAllocAsync)
    return alloc_async(real, real->cuMemAllocAsync, dptr, size, stream, false);
}

CUresult
shim_mem_alloc_async_ptsz(CUdeviceptr *dptr, size_t size, CUstream stream)
{
    REAL_CUDA_OR_FAIL(real, cuMemAllocAsync_ptsz)
    return alloc_async(real, real->cuMemAllocAsync_ptsz, dptr, size, stream, true);
}

static CUresult
free_async(const struct real_cuda *real, PFN_cuMemFreeAsync_v11020 fn, CUdeviceptr dptr,
           CUstream stream, bool ptsz)
{
    struct shim_call call;
    if (dptr == 0 || !SHIM_CALL_BEGIN(&call, SHIM_CALL_FREE))
        return fn(dptr, stream);
    CUresult result, refusal = CUDA_SUCCESS;
    /* A capture makes a stream-ordered free a graph node, which may free only a graph's own
     * allocation (cuGraphAddMemFreeNode's rule): a block of the cache is refused as the driver
     * refuses any other memory, and stays the program's; so is one freed on the legacy stream
     * while a blocking stream captures. */
    if (call.rt->mode == CUPROF_MODE_CACHE && shim_capture_any() && cuda_backend_owns(dptr) &&
        (capturing(real, stream, ptsz, &refusal) || refusal != CUDA_SUCCESS))
        result = refusal != CUDA_SUCCESS ? refusal : CUDA_ERROR_INVALID_VALUE;
    else
        result = free_common(real, &call, dptr, true, stream, ptsz);
    shim_call_end(&call);
    return result;
}

CUresult
shim_mem_free_async(CUdeviceptr dptr, CUstream stream)
{
    REAL_CUDA_OR_FAIL(real, cuMemFreeAsync)
    return free_async(real, real->cuMemFreeAsync, dptr, stream, false);
}

CUresult
shim_mem_free_async_ptsz(CUdeviceptr dptr, CUstream stream)
{
    REAL_CUDA_OR_FAIL(real, cuMemFreeAsync_ptsz)
    return free_async(real, real->cuMemFreeAsync_ptsz, dptr, stream, true);
}

/* Allocations from an explicit pool keep the pool's attributes (IPC, access, thresholds): they
 * are never served by the cache, only recorded. */
static CUresult
alloc_from_pool(PFN_cuMemAllocFromPoolAsync_v11020 fn, CUdeviceptr *dptr, size_t size,
                CUmemoryPool pool, CUstream stream, bool ptsz)
{
    struct shim_call call;
    if (!SHIM_CALL_BEGIN(&call, SHIM_CALL_ALLOC))
        return fn(dptr, size, pool, stream);
    CUresult result = fn(dptr, size, pool, stream);
    if (shim_call_release_for_driver(&call, result, call.device))
        result = fn(dptr, size, pool, stream);
    if (result == CUDA_SUCCESS)
        shim_call_track_external(&call, call.device, *dptr, size, stream_id_from_cu(stream, ptsz),
                                 TRACE_POOL_ASYNC, "cuMemAllocFromPoolAsync");
    shim_call_note_refusal(&call, result, call.device, size, stream_id_from_cu(stream, ptsz),
                           TRACE_POOL_ASYNC, "cuMemAllocFromPoolAsync");
    shim_call_end(&call);
    return result;
}

CUresult
shim_mem_alloc_from_pool_async(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream stream)
{
    REAL_CUDA_OR_FAIL(real, cuMemAllocFromPoolAsync)
    return alloc_from_pool(real->cuMemAllocFromPoolAsync, dptr, size, pool, stream, false);
}

CUresult
shim_mem_alloc_from_pool_async_ptsz(CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
                                    CUstream stream)
{
    REAL_CUDA_OR_FAIL(real, cuMemAllocFromPoolAsync_ptsz)
    return alloc_from_pool(real->cuMemAllocFromPoolAsync_ptsz, dptr, size, pool, stream, true);
}

/* Trimming a device's default pool hands back the memory its freed blocks hold: without cuprof
 * the driver's pool releases it; in cache mode cuprof's cache, standing in for that pool, holds
 * it, and hands back all it holds for no block (as empty_cache(): segment_free entries) unless it
 * reserves no more than the pool is asked to keep. (The cache releases whole, not down to
 * min_bytes_to_keep.) Any other pool, trace mode, a capture: the driver's trim alone. */
CUresult
shim_mem_pool_trim_to(CUmemoryPool pool, size_t min_bytes_to_keep)
{
    REAL_CUDA_OR_FAIL(real, cuMemPoolTrimTo)
    CUresult result = real->cuMemPoolTrimTo(pool, min_bytes_to_keep);
    struct cuprof_runtime *rt = shim_call_runtime_if_ready();
    if (result != CUDA_SUCCESS || pool == NULL || rt == NULL || rt->alloc == NULL ||
        rt->mode != CUPROF_MODE_CACHE || guard_active())
        return result;
    for (int device = 0; device < rt->device_count; device++) {
        if (default_pool_of(real, device) != pool)
            continue;
        struct memory_stats stats;
        allocator_get_stats(rt->alloc, device, &stats);
        if (stats.reserved_bytes[STAT_ALL].current > (int64_t)min_bytes_to_keep)
            (void)shim_call_hand_back(rt, device);
        break;
    }
    return result;
}
