/* shim_rt.c: runtime-level wrappers and the cached fast path of cudaMalloc/cudaFree (see
 * shim_rt.h). */
#include "preload/shim_rt.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "preload/call_tag.h"
#include "preload/config.h"
#include "preload/cuda_backend.h"
#include "preload/device_footprint.h"
#include "preload/entry_points.h"
#include "preload/guard.h"
#include "preload/library_usage.h"
#include "preload/real_cuda.h"
#include "preload/real_dl.h"
#include "preload/runtime.h"
#include "preload/shim_call.h"
#include "preload/shim_ctx.h"
#include "preload/shim_peer.h"

_Thread_local struct call_tag call_tag_current __attribute__((tls_model("initial-exec")));

/* The runtime functions cuprof wraps: the RUNTIME_WRAPPER rows of entry_points.def. */
#define DRIVER_LOOKUP                                    ENTRY_POINT_IGNORE
#define DRIVER_WRAPPER                                   ENTRY_POINT_IGNORE
#define DRIVER_CALLED                                    ENTRY_POINT_IGNORE
#define RUNTIME_WRAPPER(exported, wrapper, params, args) RT_##exported,
enum rt_fn {
#include "preload/entry_points.def"
    RT_FN_COUNT
};
#undef RUNTIME_WRAPPER
#define RUNTIME_WRAPPER(exported, wrapper, params, args) [RT_##exported] = #exported,
static const char *const rt_names[RT_FN_COUNT] = {
#include "preload/entry_points.def"
};
#undef DRIVER_LOOKUP
#undef DRIVER_WRAPPER
#undef DRIVER_CALLED
#undef RUNTIME_WRAPPER

static _Atomic(void *) rt_real[RT_FN_COUNT];

/* The runtime's own function: the next definition after libcuprof (dlsym(RTLD_NEXT) from us).
 * Resolved on first use; racing threads store the same pointer. The lookup is out of line so
 * that a resolved call keeps no registers of its own (off mode's cost is a few loads). */
__attribute__((noinline, cold)) static void *
rt_lookup_slow(enum rt_fn fn)
{
    void *p = real_dl_dlsym(RTLD_NEXT, rt_names[fn]);
    if (p != NULL)
        atomic_store_explicit(&rt_real[fn], p, memory_order_release);
    return p;
}

static inline void *
rt_lookup(enum rt_fn fn)
{
    void *p = atomic_load_explicit(&rt_real[fn], memory_order_acquire);
    return __builtin_expect(p != NULL, 1) ? p : rt_lookup_slow(fn);
}

/* Declares `real` of type `type` for `fn`, or returns the runtime's "not initialised" error: a
 * program reaches these exports only with libcudart loaded, so this is a defensive answer. */
#define SHIM_RT_REAL(real, fn, type)                                                               \
    type real;                                                                                     \
    {                                                                                              \
        void *p_ = rt_lookup(fn);                                                                  \
        if (p_ == NULL)                                                                            \
            return cudaErrorInitializationError;                                                   \
        memcpy(&real, &p_, sizeof p_);                                                             \
    }

/* What kind of driver call a runtime call leads to (which CUPROF_STACKS setting applies). */
static bool
rt_is_free(enum rt_fn fn)
{
    return fn == RT_cudaFree || fn == RT_cudaFreeAsync || fn == RT_cudaFreeAsync_ptsz;
}

static bool
rt_allocates(enum rt_fn fn)
{
    return fn != RT_cudaMemGetInfo && fn != RT_cudaDeviceReset &&
           fn != RT_cudaDeviceEnablePeerAccess && !rt_is_free(fn);
}

/* Tags the thread for the driver wrappers below. Once cuprof is initialised the stack is taken
 * here, at the outermost layer (no cudart frames); the first call's driver wrapper, which runs
 * the initialisation, takes it itself. */
static struct call_tag
rt_enter(enum rt_fn fn, const void *caller)
{
    if (shim_call_runtime_if_ready() == NULL || !(rt_allocates(fn) || rt_is_free(fn)))
        return call_tag_push(rt_names[fn], call_tag_current.stack_id, call_tag_current.has_stack,
                             caller);
    uint32_t stack = shim_call_stack(rt_is_free(fn) ? SHIM_CALL_FREE : SHIM_CALL_ALLOC);
    return call_tag_push(rt_names[fn], stack, true, caller);
}

typedef cudaError_t (*rt_malloc_fn)(void **, size_t);
typedef cudaError_t (*rt_free_fn)(void *);
typedef cudaError_t (*rt_malloc_async_fn)(void **, size_t, cudaStream_t);
typedef cudaError_t (*rt_free_async_fn)(void *, cudaStream_t);
typedef cudaError_t (*rt_malloc_pool_fn)(void **, size_t, cudaMemPool_t, cudaStream_t);
typedef cudaError_t (*rt_malloc_pitch_fn)(void **, size_t *, size_t, size_t);
typedef cudaError_t (*rt_malloc_3d_fn)(struct cudaPitchedPtr *, struct cudaExtent);
typedef cudaError_t (*rt_malloc_managed_fn)(void **, size_t, unsigned int);
typedef cudaError_t (*rt_mem_get_info_fn)(size_t *, size_t *);
typedef cudaError_t (*rt_device_reset_fn)(void);
typedef cudaError_t (*rt_enable_peer_fn)(int, unsigned int);

/* Every wrapper: guarded calls (cuprof's own) and off mode go straight through; others are
 * tagged. The wrapper's return address is the program's call site (exports.c's stubs are tail
 * calls). */
#define SHIM_RT_CALL(fn, real, ...)                                                                \
    if (guard_active() || runtime_config()->mode == CUPROF_MODE_OFF)                               \
        return real(__VA_ARGS__);                                                                  \
    struct call_tag saved_ = rt_enter(fn, __builtin_return_address(0));                            \
    cudaError_t result_ = real(__VA_ARGS__);                                                       \
    call_tag_pop(saved_);                                                                          \
    return result_;

/* ---- The cached fast path: cudaMalloc and cudaFree answered at the runtime's export when the
 * cache alone can answer: a cached block fits, or the pointer is a block the cache handed out.
 * The runtime would only have forwarded such a call to cuprof's own driver-level wrapper, which
 * gives the same answer from the same cache; skipping the runtime and the second wrapper layer
 * is most of the shim's cost per call. Anything else (a miss, a pointer cuprof does not hold, no
 * current context, trace or off mode, before initialisation, a runtime older than 12, whose
 * cudaSetDevice switched contexts lazily, an error the runtime holds) goes the long way. */

/* Whether to try at all: not cuprof's own call, and cuprof initialised (never in off mode).
 * Inline: off mode and the first calls pay two loads. */
static inline bool
fast_may_answer(void)
{
    return !guard_active() && shim_call_runtime_if_ready() != NULL;
}

/* What the fast path did (12 bytes: returned in two registers). `answered`: *result is what the
 * program gets. Otherwise nothing was recorded: forward the call, tagged with `stack_id` when
 * `has_stack` (the stack already captured for it). */
struct shim_fast_answer {
    cudaError_t result;
    uint32_t stack_id;
    bool answered;
    bool has_stack;
};

/* What the fast path needs of the runtime, asked once. Its version: since CUDA 12
 * cudaSetDevice makes the device's primary context current at once, so the thread's current
 * context is the one the runtime serves; an older runtime switched lazily, at its next call, so
 * there a cudaMalloc right after cudaSetDevice must reach the runtime. And cudaPeekAtLastError:
 * after a sticky error (an illegal address in a kernel, ...) every runtime call returns it, and
 * an error the thread has not read yet is the runtime's to keep; in both cases the runtime
 * answers. runtime_fast_state: 0 not asked yet, 1 usable, -1 never (older or unknown runtime). */
static _Atomic int runtime_fast_state;
static cudaError_t (*runtime_peek_error)(void);

__attribute__((noinline, cold)) static int
runtime_fast_state_resolve(void)
{
    void *version_sym = real_dl_dlsym(RTLD_NEXT, "cudaRuntimeGetVersion");
    void *peek_sym = real_dl_dlsym(RTLD_NEXT, "cudaPeekAtLastError");
    cudaError_t (*get_version)(int *) = NULL;
    int version = 0;
    memcpy(&get_version, &version_sym, sizeof version_sym);
    memcpy(&runtime_peek_error, &peek_sym, sizeof peek_sym);
    int state = get_version != NULL && runtime_peek_error != NULL &&
                        get_version(&version) == cudaSuccess && version >= 12000
                    ? 1
                    : -1;
    atomic_store_explicit(&runtime_fast_state, state, memory_order_release);
    return state;
}

/* True when the runtime would only forward the call: recent enough, and no error pending. */
static bool
runtime_would_forward(void)
{
    int state = atomic_load_explicit(&runtime_fast_state, memory_order_acquire);
    if (state == 0)
        state = runtime_fast_state_resolve();
    return state == 1 && runtime_peek_error() == cudaSuccess;
}

/* The runtime in cache mode once a wrapper initialised it, or NULL: the fast path never
 * initialises anything itself. */
static struct cuprof_runtime *
cache_runtime(void)
{
    struct cuprof_runtime *rt = shim_call_runtime_if_ready();
    if (rt == NULL || rt->mode != CUPROF_MODE_CACHE)
        return NULL;
    return rt;
}

static inline struct shim_fast_answer
fast_malloc(void **ptr, size_t size, const void *caller)
{
    struct shim_fast_answer a = {0};
    /* A NULL pointer or size 0 gets the runtime's own answer. */
    struct cuprof_runtime *rt = ptr != NULL && size != 0 ? cache_runtime() : NULL;
    if (rt == NULL)
        return a;
    /* The runtime serves the thread's current context, as the driver wrapper does; without one
     * the runtime has its own work to do (initialise, make the device's primary context
     * current). */
    const struct real_cuda *real = real_cuda_get();
    CUdevice dev;
    if (!runtime_would_forward() || real == NULL || real->cuCtxGetDevice == NULL ||
        real->cuCtxGetDevice(&dev) != CUDA_SUCCESS || dev < 0 || dev >= rt->device_count)
        return a;
    guard_enter();
    lifecycle_resume_after_fork(rt);
    a.stack_id = shim_call_stack(SHIM_CALL_ALLOC);
    a.has_stack = true;
    device_footprint_note_start(dev);
    uint16_t owner = library_usage_begin_alloc(
        a.stack_id, call_tag_current.caller != NULL ? call_tag_current.caller : caller);
    uint64_t addr = 0;
    int rc = allocator_malloc_cached(rt->alloc, dev, size, 0, a.stack_id, owner, &addr);
    library_usage_end_call();
    cuda_backend_log_faults();
    guard_leave();
    if (rc != 0)
        return a; /* -CUPROF_EUNCACHED: nothing happened; the long way may reach the device */
    *ptr = (void *)(uintptr_t)addr;
    a.result = cudaSuccess;
    a.answered = true;
    return a;
}

static inline struct shim_fast_answer
fast_free(void *ptr)
{
    struct shim_fast_answer a = {0};
    /* cudaFree(NULL) is the runtime's way to initialise: always the runtime's. */
    struct cuprof_runtime *rt = ptr != NULL ? cache_runtime() : NULL;
    if (rt == NULL || !runtime_would_forward())
        return a;
    guard_enter();
    lifecycle_resume_after_fork(rt);
    a.stack_id = shim_call_stack(SHIM_CALL_FREE);
    a.has_stack = true;
    /* Synchronizes the block's device first, as the real cudaFree does. */
    int rc = allocator_free(rt->alloc, (uint64_t)(uintptr_t)ptr, a.stack_id);
    cuda_backend_log_faults();
    guard_leave();
    if (rc == -CUPROF_ENOTOWNED)
        return a; /* external memory, a stale pointer, the driver's: the long way decides */
    /* In cache mode a block's free answers 0; a device error while recording its streams' events
     * comes back as the driver's code, which the runtime's codes share for those errors. */
    a.result = rc == 0 ? cudaSuccess : rc > 0 ? (cudaError_t)rc : cudaErrorInvalidValue;
    a.answered = true;
    return a;
}

/* cudaMalloc and cudaFree: cuprof's own calls and off mode go straight to the runtime from a
 * frame that holds nothing (off mode adds a few loads). Otherwise the cache answers at once when
 * it can (the fast path above), else the runtime's call is tagged: with the stack the fast path
 * captured already, or as every runtime wrapper tags it (before initialisation, trace mode). */
#define SHIM_RT_UNLESS_ACCOUNTED(real, ...)                                                        \
    if (guard_active() || runtime_config()->mode == CUPROF_MODE_OFF)                               \
        return real(__VA_ARGS__);

static struct call_tag
rt_tag(enum rt_fn fn, const void *caller, struct shim_fast_answer a)
{
    return a.has_stack ? call_tag_push(rt_names[fn], a.stack_id, true, caller)
                       : rt_enter(fn, caller);
}

__attribute__((noinline)) static cudaError_t
rt_malloc_accounted(rt_malloc_fn real, void **ptr, size_t size, const void *caller)
{
    struct shim_fast_answer a = {0};
    if (fast_may_answer()) {
        a = fast_malloc(ptr, size, caller);
        if (a.answered)
            return a.result;
    }
    struct call_tag saved = rt_tag(RT_cudaMalloc, caller, a);
    cudaError_t result = real(ptr, size);
    call_tag_pop(saved);
    return result;
}

__attribute__((noinline)) static cudaError_t
rt_free_accounted(rt_free_fn real, void *ptr, const void *caller)
{
    struct shim_fast_answer a = {0};
    if (fast_may_answer()) {
        a = fast_free(ptr);
        if (a.answered)
            return a.result;
    }
    struct call_tag saved = rt_tag(RT_cudaFree, caller, a);
    cudaError_t result = real(ptr);
    call_tag_pop(saved);
    return result;
}

cudaError_t
shim_rt_malloc(void **ptr, size_t size)
{
    SHIM_RT_REAL(real, RT_cudaMalloc, rt_malloc_fn)
    SHIM_RT_UNLESS_ACCOUNTED(real, ptr, size)
    return rt_malloc_accounted(real, ptr, size, __builtin_return_address(0));
}

cudaError_t
shim_rt_free(void *ptr)
{
    SHIM_RT_REAL(real, RT_cudaFree, rt_free_fn)
    SHIM_RT_UNLESS_ACCOUNTED(real, ptr)
    return rt_free_accounted(real, ptr, __builtin_return_address(0));
}

cudaError_t
shim_rt_malloc_async(void **ptr, size_t size, cudaStream_t stream)
{
    SHIM_RT_REAL(real, RT_cudaMallocAsync, rt_malloc_async_fn)
    SHIM_RT_CALL(RT_cudaMallocAsync, real, ptr, size, stream)
}

cudaError_t
shim_rt_malloc_async_ptsz(void **ptr, size_t size, cudaStream_t stream)
{
    SHIM_RT_REAL(real, RT_cudaMallocAsync_ptsz, rt_malloc_async_fn)
    SHIM_RT_CALL(RT_cudaMallocAsync_ptsz, real, ptr, size, stream)
}

cudaError_t
shim_rt_free_async(void *ptr, cudaStream_t stream)
{
    SHIM_RT_REAL(real, RT_cudaFreeAsync, rt_free_async_fn)
    SHIM_RT_CALL(RT_cudaFreeAsync, real, ptr, stream)
}

cudaError_t
shim_rt_free_async_ptsz(void *ptr, cudaStream_t stream)
{
    SHIM_RT_REAL(real, RT_cudaFreeAsync_ptsz, rt_free_async_fn)
    SHIM_RT_CALL(RT_cudaFreeAsync_ptsz, real, ptr, stream)
}

cudaError_t
shim_rt_malloc_from_pool_async(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream)
{
    SHIM_RT_REAL(real, RT_cudaMallocFromPoolAsync, rt_malloc_pool_fn)
    SHIM_RT_CALL(RT_cudaMallocFromPoolAsync, real, ptr, size, pool, stream)
}

cudaError_t
shim_rt_malloc_from_pool_async_ptsz(void **ptr, size_t size, cudaMemPool_t pool,
                                    cudaStream_t stream)
{
    SHIM_RT_REAL(real, RT_cudaMallocFromPoolAsync_ptsz, rt_malloc_pool_fn)
    SHIM_RT_CALL(RT_cudaMallocFromPoolAsync_ptsz, real, ptr, size, pool, stream)
}

cudaError_t
shim_rt_malloc_pitch(void **ptr, size_t *pitch, size_t width, size_t height)
{
    SHIM_RT_REAL(real, RT_cudaMallocPitch, rt_malloc_pitch_fn)
    SHIM_RT_CALL(RT_cudaMallocPitch, real, ptr, pitch, width, height)
}

cudaError_t
shim_rt_malloc_3d(struct cudaPitchedPtr *pitched, struct cudaExtent extent)
{
    SHIM_RT_REAL(real, RT_cudaMalloc3D, rt_malloc_3d_fn)
    SHIM_RT_CALL(RT_cudaMalloc3D, real, pitched, extent)
}

cudaError_t
shim_rt_malloc_managed(void **ptr, size_t size, unsigned int flags)
{
    SHIM_RT_REAL(real, RT_cudaMallocManaged, rt_malloc_managed_fn)
    SHIM_RT_CALL(RT_cudaMallocManaged, real, ptr, size, flags)
}

cudaError_t
shim_rt_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
    SHIM_RT_REAL(real, RT_cudaMemGetInfo, rt_mem_get_info_fn)
    SHIM_RT_CALL(RT_cudaMemGetInfo, real, free_bytes, total_bytes)
}

cudaError_t
shim_rt_device_reset(void)
{
    SHIM_RT_REAL(real, RT_cudaDeviceReset, rt_device_reset_fn)
    if (guard_active())
        return real();
    /* Drop the current device's cache before the runtime resets its context (the driver-level
     * reset it makes drops it again: forgetting is idempotent). */
    const struct real_cuda *driver = real_cuda_get();
    CUdevice dev;
    if (shim_call_runtime_if_ready() != NULL && driver != NULL &&
        driver->cuCtxGetDevice(&dev) == CUDA_SUCCESS)
        shim_ctx_forget_device(dev);
    struct call_tag saved = rt_enter(RT_cudaDeviceReset, __builtin_return_address(0));
    cudaError_t result = real();
    call_tag_pop(saved);
    return result;
}

cudaError_t
shim_rt_device_enable_peer_access(int peer, unsigned int flags)
{
    SHIM_RT_REAL(real, RT_cudaDeviceEnablePeerAccess, rt_enable_peer_fn)
    if (guard_active())
        return real(peer, flags);
    struct call_tag saved = rt_enter(RT_cudaDeviceEnablePeerAccess, __builtin_return_address(0));
    cudaError_t result = real(peer, flags);
    call_tag_pop(saved);
    /* The runtime's cuCtxEnablePeerAccess came through cuprof's wrapper already; this covers a
     * runtime that reaches the driver otherwise (adding a peer twice does nothing). */
    if (result == cudaSuccess || result == cudaErrorPeerAccessAlreadyEnabled)
        shim_peer_record(peer);
    return result;
}
