/* shim_rt.c: runtime-level wrappers and the cached fast path of cudaMalloc/cudaFree (see
 * shim_rt.h). */
#include "preload/shim_rt.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "preload/call_tag.h"
#include "preload/config.h"
#include "preload/cuda_backend.h"
#include "preload/entry_points.h"
#include "preload/guard.h"
#include "preload/library_usage.h"
#include "preload/real_cuda.h"
#include "preload/real_dl.h"
#include "preload/runtime.h"
#include "preload/shim_call.h"
#include "preload/shim_capture.h"
#include "preload/shim_ctx.h"
#include "preload/shim_mem.h"
#include "preload/shim_peer.h"
#include "snapshot/loader_gate.h"

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

#define RUNTIME_WRAPPER(exported, wrapper, params, args)                                           \
    _Atomic(shim_rt_##exported##_fn) shim_rt_route_##exported = wrapper;
#define DRIVER_LOOKUP  ENTRY_POINT_IGNORE
#define DRIVER_WRAPPER ENTRY_POINT_IGNORE
#define DRIVER_CALLED  ENTRY_POINT_IGNORE
#include "preload/entry_points.def"
#undef DRIVER_LOOKUP
#undef DRIVER_WRAPPER
#undef DRIVER_CALLED
#undef RUNTIME_WRAPPER

/* Loaded objects named libcudart.so*, in load order (at most RT_RUNTIMES_MAX). */
#define RT_RUNTIMES_MAX 4
struct rt_runtimes {
    char path[RT_RUNTIMES_MAX][PATH_MAX];
    size_t count;
};

static int
runtime_object_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct rt_runtimes *r = data;
    const char *slash = strrchr(info->dlpi_name, '/');
    const char *base = slash != NULL ? slash + 1 : info->dlpi_name;
    if (r->count < RT_RUNTIMES_MAX && strncmp(base, "libcudart.so", 12) == 0 &&
        strlen(info->dlpi_name) < PATH_MAX)
        snprintf(r->path[r->count++], PATH_MAX, "%s", info->dlpi_name);
    return 0;
}

/* A runtime RTLD_NEXT cannot see: the dependency of a library loaded with dlopen(RTLD_LOCAL) (a
 * Python extension module, a plugin), whose calls still reach cuprof's exports first (a preloaded
 * library leads every lookup scope). The first loaded libcudart.so* that defines `name`; the
 * handles are opened with RTLD_NOLOAD (nothing loads) after the walk (no dlopen inside it). Two
 * runtimes loaded privately by different libraries would both be served by the first one found,
 * where without cuprof each library binds to its own: unusual, and not told apart here. */
static void *
rt_lookup_local(const char *name)
{
    struct rt_runtimes *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    (void)loader_gate_iterate(runtime_object_cb, r);
    void *p = NULL;
    for (size_t i = 0; i < r->count && p == NULL; i++) {
        void *handle = dlopen(r->path[i], RTLD_LAZY | RTLD_NOLOAD);
        if (handle == NULL)
            continue;
        p = real_dl_dlsym(handle, name);
        dlclose(handle); /* still loaded by whoever loaded it: p stays valid */
    }
    free(r);
    return p;
}

/* The runtime's own `name`: the next definition after libcuprof (dlsym(RTLD_NEXT) from us), or
 * in a runtime loaded out of RTLD_NEXT's sight. */
static void *
rt_resolve(const char *name)
{
    void *p = real_dl_dlsym(RTLD_NEXT, name);
    return p != NULL ? p : rt_lookup_local(name);
}

/* rt_resolve for an export, resolved on first use; racing threads store the same pointer. The
 * lookup is out of line so that a resolved call keeps no registers of its own (off mode's cost is
 * a few loads). */
__attribute__((noinline, cold)) static void *
rt_lookup_slow(enum rt_fn fn)
{
    void *p = rt_resolve(rt_names[fn]);
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

/* Every wrapper: guarded calls (cuprof's own) go straight through; so does off mode, which also
 * points the export's route at the runtime's function (its later calls never come here); others
 * are tagged. The wrapper's return address is the program's call site (exports.c's stubs are tail
 * jumps). */
#define SHIM_RT_CALL(name, real, ...)                                                              \
    if (guard_active())                                                                            \
        return real(__VA_ARGS__);                                                                  \
    if (runtime_config()->mode == CUPROF_MODE_OFF) {                                               \
        atomic_store_explicit(&shim_rt_route_##name, real, memory_order_release);                  \
        return real(__VA_ARGS__);                                                                  \
    }                                                                                              \
    struct call_tag saved_ = rt_enter(RT_##name, __builtin_return_address(0));                     \
    cudaError_t result_ = real(__VA_ARGS__);                                                       \
    call_tag_pop(saved_);                                                                          \
    return result_;

/* ---- The cached fast path: cudaMalloc and cudaFree answered at the runtime's export when the
 * cache alone can answer: a cached block fits, or the pointer is a block the cache handed out.
 * The runtime would only have forwarded such a call to cuprof's own driver-level wrapper, which
 * gives the same answer from the same cache; skipping the runtime and the second wrapper layer
 * is most of the shim's cost per call. Anything else (a miss, a pointer cuprof does not hold, no
 * current context, trace or off mode, before initialisation, a runtime older than 12, whose
 * cudaSetDevice switched contexts lazily, an error the runtime holds) goes the long way. The fast
 * path answers only successes itself: the runtime's last error (cudaGetLastError,
 * cudaPeekAtLastError) and sticky error are the runtime's, and a success leaves them as they
 * were, since the fast path answers only while the runtime holds none. A free that fails goes
 * through the runtime with its answer (rt_free_answered). */

/* What the fast path reads, in one place, published by pointing cudaMalloc's and cudaFree's
 * routes at their cached entries once it may answer:
 * cuprof initialised in cache mode, under a runtime of version 12 or later that has
 * cudaPeekAtLastError. Since CUDA 12 cudaSetDevice makes the device's primary context current at
 * once, so the thread's current context is the one the runtime serves; an older runtime switched
 * lazily, at its next call, so there a cudaMalloc right after cudaSetDevice must reach the
 * runtime. And after a sticky error (an illegal address in a kernel, ...) every runtime call
 * returns it, and an error the thread has not read yet is the runtime's to keep: in both cases
 * the runtime answers. */
struct fast_path {
    struct cuprof_runtime *rt;
    struct allocator *alloc;
    CUresult (*ctx_get_current)(CUcontext *);
    cudaError_t (*peek_error)(void);
};
static struct fast_path fast_path_value;
static _Atomic int fast_path_decided; /* set once cuprof is initialised and the runtime asked */

static cudaError_t fast_malloc(void **ptr, size_t size, const void *caller);
static cudaError_t fast_free(void *ptr, const void *caller);
static cudaError_t shim_rt_malloc_cached(void **ptr, size_t size);
static cudaError_t shim_rt_free_cached(void *ptr);

/* Decides, once cuprof is initialised, whether the fast path may answer; until then every call
 * asks again (cold: the calls that find it undecided are the first few). */
__attribute__((noinline, cold)) static void
fast_path_decide(void)
{
    static pthread_mutex_t deciding = PTHREAD_MUTEX_INITIALIZER;
    struct cuprof_runtime *rt = shim_call_runtime_if_ready();
    const struct real_cuda *driver = real_cuda_get();
    if (rt == NULL || driver == NULL)
        return; /* not initialised yet: a later call decides */
    pthread_mutex_lock(&deciding);
    if (!atomic_load_explicit(&fast_path_decided, memory_order_acquire)) {
        void *version_sym = rt_resolve("cudaRuntimeGetVersion");
        void *peek_sym = rt_resolve("cudaPeekAtLastError");
        cudaError_t (*get_version)(int *) = NULL;
        int version = 0;
        memcpy(&get_version, &version_sym, sizeof version_sym);
        memcpy(&fast_path_value.peek_error, &peek_sym, sizeof peek_sym);
        fast_path_value.rt = rt;
        fast_path_value.alloc = rt->alloc;
        fast_path_value.ctx_get_current = driver->cuCtxGetCurrent;
        if (rt->mode == CUPROF_MODE_CACHE && rt->alloc != NULL && driver->cuCtxGetDevice != NULL &&
            driver->cuCtxGetCurrent != NULL && fast_path_value.peek_error != NULL &&
            get_version != NULL && get_version(&version) == cudaSuccess && version >= 12000) {
            atomic_store_explicit(&shim_rt_route_cudaMalloc, shim_rt_malloc_cached,
                                  memory_order_release);
            atomic_store_explicit(&shim_rt_route_cudaFree, shim_rt_free_cached,
                                  memory_order_release);
        }
        atomic_store_explicit(&fast_path_decided, 1, memory_order_release);
    }
    pthread_mutex_unlock(&deciding);
}

/* The long way for cudaMalloc and cudaFree: the runtime's call, tagged with the stack the fast
 * path captured already (`has_stack`), or as every runtime wrapper tags it; cuprof's own calls
 * and off mode go straight through. Out of line, and looking the runtime's function up itself, so
 * that the fast path keeps as few registers as it can. */
__attribute__((noinline)) static cudaError_t
rt_malloc_forward(void **ptr, size_t size, const void *caller, uint32_t stack_id, bool has_stack)
{
    SHIM_RT_REAL(real, RT_cudaMalloc, rt_malloc_fn)
    if (guard_active())
        return real(ptr, size);
    if (runtime_config()->mode == CUPROF_MODE_OFF) {
        atomic_store_explicit(&shim_rt_route_cudaMalloc, real, memory_order_release);
        return real(ptr, size);
    }
    if (!atomic_load_explicit(&fast_path_decided, memory_order_acquire)) {
        fast_path_decide();
        if (!has_stack && atomic_load_explicit(&shim_rt_route_cudaMalloc, memory_order_acquire) ==
                              shim_rt_malloc_cached)
            return fast_malloc(ptr, size, caller);
    }
    struct call_tag saved = has_stack
                                ? call_tag_push(rt_names[RT_cudaMalloc], stack_id, true, caller)
                                : rt_enter(RT_cudaMalloc, caller);
    cudaError_t result = real(ptr, size);
    call_tag_pop(saved);
    /* The first call initialises cuprof: the next one may take the fast path. */
    if (!atomic_load_explicit(&fast_path_decided, memory_order_acquire))
        fast_path_decide();
    return result;
}

__attribute__((noinline)) static cudaError_t
rt_free_forward(void *ptr, const void *caller, uint32_t stack_id, bool has_stack)
{
    SHIM_RT_REAL(real, RT_cudaFree, rt_free_fn)
    if (guard_active())
        return real(ptr);
    if (runtime_config()->mode == CUPROF_MODE_OFF) {
        atomic_store_explicit(&shim_rt_route_cudaFree, real, memory_order_release);
        return real(ptr);
    }
    if (!atomic_load_explicit(&fast_path_decided, memory_order_acquire)) {
        fast_path_decide();
        if (!has_stack && atomic_load_explicit(&shim_rt_route_cudaFree, memory_order_acquire) ==
                              shim_rt_free_cached)
            return fast_free(ptr, caller);
    }
    struct call_tag saved = has_stack ? call_tag_push(rt_names[RT_cudaFree], stack_id, true, caller)
                                      : rt_enter(RT_cudaFree, caller);
    cudaError_t result = real(ptr);
    call_tag_pop(saved);
    /* The first call initialises cuprof: the next one may take the fast path. */
    if (!atomic_load_explicit(&fast_path_decided, memory_order_acquire))
        fast_path_decide();
    return result;
}

/* The fast path's free failed with `rc`: the runtime's cudaFree answers the program, so that it
 * records the error as it records any driver error (cudaGetLastError, cudaPeekAtLastError, a
 * sticky error), and the cuMemFree_v2 it makes is answered with rc's CUresult by cuprof's wrapper
 * without a second try (the driver already refused once: a second refused synchronization, or a
 * second free of a segment that failed, is not what the program did). */
__attribute__((noinline, cold)) static cudaError_t
rt_free_answered(void *ptr, const void *caller, uint32_t stack_id, int rc)
{
    struct shim_call as_driver = {.rt = fast_path_value.rt, .device = -1};
    shim_mem_free_answer_next((CUdeviceptr)(uintptr_t)ptr, shim_call_result(&as_driver, rc));
    cudaError_t result = rt_free_forward(ptr, caller, stack_id, true);
    shim_mem_free_answer_clear();
    return result;
}

/* A NULL pointer or size 0 gets the runtime's own answer; so does a thread without a current
 * context (the runtime has its own work to do: initialise, make the primary context current).
 * fast_path_value is read field by field, never kept in a register across the calls. */
__attribute__((noinline)) static cudaError_t
fast_malloc(void **ptr, size_t size, const void *caller)
{
    uint32_t stack_id = 0;
    bool has_stack = false;
    int dev;
    CUcontext ctx;
    /* While a capture is under way the long way decides (shim_capture.h); so does a context that
     * does not own a device's cache (ctx_owner.h). */
    if (ptr != NULL && size != 0 && !shim_capture_any() &&
        fast_path_value.peek_error() == cudaSuccess &&
        fast_path_value.ctx_get_current(&ctx) == CUDA_SUCCESS &&
        (dev = ctx_owner_device_of(ctx)) >= 0) {
        guard_enter();
        lifecycle_resume_after_fork(fast_path_value.rt);
        stack_id = shim_call_stack(SHIM_CALL_ALLOC);
        has_stack = true;
        /* No device_footprint_note_start: the cache answers only from a segment a call that went
         * the long way made on this device, and that call noted the device's footprint. */
        uint16_t owner = library_usage_begin_alloc(
            stack_id, call_tag_current.caller != NULL ? call_tag_current.caller : caller);
        uint64_t addr;
        int rc =
            allocator_malloc_cached(fast_path_value.alloc, dev, size, 0, stack_id, owner, &addr);
        library_usage_end_call();
        cuda_backend_log_faults();
        guard_leave();
        if (rc == 0) {
            *ptr = (void *)(uintptr_t)addr;
            return cudaSuccess;
        }
        /* -CUPROF_EUNCACHED, or a device cuprof does not serve (-CUPROF_EINVAL): nothing
         * happened; the long way may reach the device */
    }
    return rt_malloc_forward(ptr, size, caller, stack_id, has_stack);
}

/* cudaFree(NULL) is the runtime's way to initialise: always the runtime's. */
__attribute__((noinline)) static cudaError_t
fast_free(void *ptr, const void *caller)
{
    if (ptr == NULL || fast_path_value.peek_error() != cudaSuccess)
        return rt_free_forward(ptr, caller, 0, false);
    guard_enter();
    lifecycle_resume_after_fork(fast_path_value.rt);
    uint32_t stack_id = shim_call_stack(SHIM_CALL_FREE);
    /* Synchronizes the block's device first, as the real cudaFree does. */
    int rc = allocator_free(fast_path_value.alloc, (uint64_t)(uintptr_t)ptr, stack_id);
    cuda_backend_log_faults();
    guard_leave();
    if (__builtin_expect(rc == 0, 1))
        return cudaSuccess;
    /* external memory, a stale pointer, the driver's: the long way decides */
    if (rc == -CUPROF_ENOTOWNED)
        return rt_free_forward(ptr, caller, stack_id, true);
    /* The driver refused the synchronization (a capture forbids it), or freeing a segment of its
     * own failed: the runtime answers with that error and records it. */
    return rt_free_answered(ptr, caller, stack_id, rc);
}

/* cudaMalloc and cudaFree's routes until the fast path may answer (and in trace mode): the long
 * way, which points the routes elsewhere once it knows (off mode, the fast path). */
cudaError_t
shim_rt_malloc(void **ptr, size_t size)
{
    return rt_malloc_forward(ptr, size, __builtin_return_address(0), 0, false);
}

cudaError_t
shim_rt_free(void *ptr)
{
    return rt_free_forward(ptr, __builtin_return_address(0), 0, false);
}

/* Their routes once the fast path may answer: the cache first, but for cuprof's own calls. */
static cudaError_t
shim_rt_malloc_cached(void **ptr, size_t size)
{
    if (!guard_active())
        return fast_malloc(ptr, size, __builtin_return_address(0));
    return rt_malloc_forward(ptr, size, __builtin_return_address(0), 0, false);
}

static cudaError_t
shim_rt_free_cached(void *ptr)
{
    if (!guard_active())
        return fast_free(ptr, __builtin_return_address(0));
    return rt_free_forward(ptr, __builtin_return_address(0), 0, false);
}

cudaError_t
shim_rt_malloc_async(void **ptr, size_t size, cudaStream_t stream)
{
    SHIM_RT_REAL(real, RT_cudaMallocAsync, rt_malloc_async_fn)
    SHIM_RT_CALL(cudaMallocAsync, real, ptr, size, stream)
}

cudaError_t
shim_rt_malloc_async_ptsz(void **ptr, size_t size, cudaStream_t stream)
{
    SHIM_RT_REAL(real, RT_cudaMallocAsync_ptsz, rt_malloc_async_fn)
    SHIM_RT_CALL(cudaMallocAsync_ptsz, real, ptr, size, stream)
}

cudaError_t
shim_rt_free_async(void *ptr, cudaStream_t stream)
{
    SHIM_RT_REAL(real, RT_cudaFreeAsync, rt_free_async_fn)
    SHIM_RT_CALL(cudaFreeAsync, real, ptr, stream)
}

cudaError_t
shim_rt_free_async_ptsz(void *ptr, cudaStream_t stream)
{
    SHIM_RT_REAL(real, RT_cudaFreeAsync_ptsz, rt_free_async_fn)
    SHIM_RT_CALL(cudaFreeAsync_ptsz, real, ptr, stream)
}

cudaError_t
shim_rt_malloc_from_pool_async(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream)
{
    SHIM_RT_REAL(real, RT_cudaMallocFromPoolAsync, rt_malloc_pool_fn)
    SHIM_RT_CALL(cudaMallocFromPoolAsync, real, ptr, size, pool, stream)
}

cudaError_t
shim_rt_malloc_from_pool_async_ptsz(void **ptr, size_t size, cudaMemPool_t pool,
                                    cudaStream_t stream)
{
    SHIM_RT_REAL(real, RT_cudaMallocFromPoolAsync_ptsz, rt_malloc_pool_fn)
    SHIM_RT_CALL(cudaMallocFromPoolAsync_ptsz, real, ptr, size, pool, stream)
}

cudaError_t
shim_rt_malloc_pitch(void **ptr, size_t *pitch, size_t width, size_t height)
{
    SHIM_RT_REAL(real, RT_cudaMallocPitch, rt_malloc_pitch_fn)
    SHIM_RT_CALL(cudaMallocPitch, real, ptr, pitch, width, height)
}

cudaError_t
shim_rt_malloc_3d(struct cudaPitchedPtr *pitched, struct cudaExtent extent)
{
    SHIM_RT_REAL(real, RT_cudaMalloc3D, rt_malloc_3d_fn)
    SHIM_RT_CALL(cudaMalloc3D, real, pitched, extent)
}

cudaError_t
shim_rt_malloc_managed(void **ptr, size_t size, unsigned int flags)
{
    SHIM_RT_REAL(real, RT_cudaMallocManaged, rt_malloc_managed_fn)
    SHIM_RT_CALL(cudaMallocManaged, real, ptr, size, flags)
}

cudaError_t
shim_rt_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
    SHIM_RT_REAL(real, RT_cudaMemGetInfo, rt_mem_get_info_fn)
    SHIM_RT_CALL(cudaMemGetInfo, real, free_bytes, total_bytes)
}

cudaError_t
shim_rt_device_reset(void)
{
    SHIM_RT_REAL(real, RT_cudaDeviceReset, rt_device_reset_fn)
    if (guard_active())
        return real();
    /* Drop the memory of the current device's primary context before the runtime resets it (the
     * driver-level reset it makes drops it again: forgetting is idempotent). */
    const struct real_cuda *driver = real_cuda_get();
    CUdevice dev;
    if (shim_call_runtime_if_ready() != NULL && driver != NULL &&
        driver->cuCtxGetDevice(&dev) == CUDA_SUCCESS)
        shim_ctx_forget_primary(dev);
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
