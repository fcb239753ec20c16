/* hooks.c: our dlsym and cuGetProcAddress(_v2) (see hooks.h). */
#include "preload/hooks.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload/config.h"
#include "preload/entry_points.h"
#include "preload/instance.h"
#include "preload/layers.h"
#include "preload/real_cuda.h"
#include "preload/real_dl.h"
#include "preload/runtime.h"
#include "preload/shim_capture.h"
#include "preload/shim_ctx.h"
#include "preload/shim_driver_memory.h"
#include "preload/shim_mem.h"
#include "preload/shim_peer.h"
#include "preload/shim_query.h"
#include "preload/shim_vmm.h"
#include "preload/stderr_out.h"

/* Function pointers travel as void * (what cuGetProcAddress and dlsym hand out). */
#define FN(f) ((void *)(uintptr_t)(f))

/* (lookup name, [min_version, max_version), per-thread flag) -> wrapper of the same ABI: the
 * DRIVER_LOOKUP and DRIVER_WRAPPER rows of entry_points.def. Versions below a row's minimum are
 * an older ABI (e.g. cuMemAlloc@2000 is the 32-bit one) and keep the driver's pointer. */
struct hook_row {
    const char *name;
    int min_version;
    int max_version;
    int ptsz;
    void *wrapper;
};

#define DRIVER_LOOKUP(field, exported, lookup, min_version, max_version, ptsz, pfn, wrapper,       \
                      params, args)                                                                \
    {lookup, min_version, max_version, ptsz, FN(wrapper)},
#define DRIVER_WRAPPER  DRIVER_LOOKUP
#define DRIVER_CALLED   ENTRY_POINT_IGNORE
#define RUNTIME_WRAPPER ENTRY_POINT_IGNORE
static const struct hook_row hook_rows[] = {
#include "preload/entry_points.def"
};
#undef DRIVER_LOOKUP
#undef DRIVER_WRAPPER

/* Every wrapper has its row's ABI, the PFN type cudaTypedefs.h gives that version: a pointer to a
 * wrapper of another signature, handed out by cuGetProcAddress, would corrupt every call made
 * through it. */
#define DRIVER_LOOKUP(field, exported, lookup, min_version, max_version, ptsz, pfn, wrapper,       \
                      params, args)                                                                \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&wrapper), pfn),                        \
                   #wrapper " has the ABI of " #pfn);
#define DRIVER_WRAPPER DRIVER_LOOKUP
#include "preload/entry_points.def"
#undef DRIVER_LOOKUP
#undef DRIVER_WRAPPER

/* Exported (versioned) driver names -> wrapper, for programs and cudart's fallback path that
 * dlsym the driver by name. The unsuffixed 32-bit cuMemAlloc/cuMemFree are never wrapped. */
struct name_row {
    const char *name;
    void *wrapper;
};

#define DRIVER_LOOKUP(field, exported, lookup, min_version, max_version, ptsz, pfn, wrapper,       \
                      params, args)                                                                \
    {#exported, FN(wrapper)},
#define DRIVER_WRAPPER DRIVER_LOOKUP
static const struct name_row name_rows[] = {
#include "preload/entry_points.def"
};
#undef DRIVER_LOOKUP
#undef DRIVER_WRAPPER
#undef DRIVER_CALLED
#undef RUNTIME_WRAPPER

/* The driver lookups dlsym swapped for cuprof's (a few distinct ones): where our lookup
 * forwards when a driver that forwards to another driver through dlsym calls it back. */
enum { SWAPPED_MAX = 4 };
static _Atomic(void *) swapped_gpa_v2[SWAPPED_MAX];
static _Atomic(void *) swapped_gpa_v1[SWAPPED_MAX];
static _Thread_local int lookup_depth; /* our lookup is on this thread's stack */

static void
remember_swapped(_Atomic(void *) *slots, void *fn)
{
    for (int i = 0; i < SWAPPED_MAX; i++) {
        void *expected = NULL;
        if (atomic_load_explicit(&slots[i], memory_order_acquire) == fn ||
            atomic_compare_exchange_strong(&slots[i], &expected, fn))
            return;
    }
}

/* A swapped lookup other than `in_use` (the driver cuprof forwards to, which is the one calling
 * back), never one of ours; NULL when there is none: then the call fails instead of looping. */
static void *
swapped_other_than(_Atomic(void *) *slots, const void *in_use)
{
    for (int i = 0; i < SWAPPED_MAX; i++) {
        void *fn = atomic_load_explicit(&slots[i], memory_order_acquire);
        if (fn != NULL && fn != in_use && !real_dl_is_self(fn))
            return fn;
    }
    return NULL;
}

static _Atomic uint64_t count_lookups;
static _Atomic uint64_t count_lookups_hooked;
static _Atomic uint64_t count_dlsym_hooked;

static void
count(_Atomic uint64_t *counter)
{
    atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

void *
hooks_wrapper_for(const char *symbol, int version, cuuint64_t flags)
{
    int ptsz =
        (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ? ENTRY_PTSZ_YES : ENTRY_PTSZ_NO;
    for (size_t i = 0; i < sizeof hook_rows / sizeof hook_rows[0]; i++) {
        const struct hook_row *row = &hook_rows[i];
        if (version < row->min_version || version >= row->max_version)
            continue;
        if (row->ptsz != ENTRY_PTSZ_ANY && row->ptsz != ptsz)
            continue;
        if (strcmp(row->name, symbol) == 0)
            return row->wrapper;
    }
    return NULL;
}

REAL_DL_UNINSTRUMENTED static void *
wrapper_for_name(const char *name)
{
    for (size_t i = 0; i < sizeof name_rows / sizeof name_rows[0]; i++)
        if (strcmp(name_rows[i].name, name) == 0)
            return name_rows[i].wrapper;
    return NULL;
}

REAL_DL_UNINSTRUMENTED void *
hooks_dlsym(void *handle, const char *name, const void *caller)
{
    /* glibc resolves RTLD_NEXT relative to its caller, which would be us: redo it for the real
     * caller, or a second preloaded library's dlsym(RTLD_NEXT) would get its own symbol back. */
    if (handle == RTLD_NEXT)
        return real_dl_next(caller, name);
    if (instance_inert()) { /* another copy of libcuprof serves: glibc's answer, nothing more */
        if (name != NULL && strncmp(name, "cu", 2) == 0 && handle != RTLD_DEFAULT)
            instance_log_inert();
        return real_dl_dlsym(handle, name);
    }
    layers_rebind_new_objects(); /* a library dlopen'ed while a layer precedes us */
    if (name == NULL || strncmp(name, "cu", 2) != 0 || strncmp(name, "cuprof_", 7) == 0)
        return real_dl_dlsym(handle, name);
    if (handle == RTLD_DEFAULT) {
        void *sym = real_dl_dlsym(handle, name);
        /* Our CUDA exports must not make CUDA look present where it is not: without a real
         * definition after us, answer as the program would without the shim. */
        if (sym != NULL && real_dl_is_self(sym) && real_dl_dlsym(RTLD_NEXT, name) == NULL)
            return NULL;
        return sym;
    }
    /* A driver name on a handle: asked of the next layer (another interposer's dlsym, or
     * glibc's), so a layer after us still hands out its own entry points. */
    void *sym = layers_dlsym(handle, name);
    if (sym == NULL)
        return NULL;
    if (real_dl_is_self(sym)) /* a handle whose scope holds us (the global one): ours already */
        return sym;
    void *wrapper = wrapper_for_name(name);
    if (wrapper == NULL)
        return sym;
    if (strcmp(name, "cuGetProcAddress_v2") == 0)
        remember_swapped(swapped_gpa_v2, sym);
    else if (strcmp(name, "cuGetProcAddress") == 0)
        remember_swapped(swapped_gpa_v1, sym);
    count(&count_dlsym_hooked);
    return wrapper;
}

/* What stands for a pointer into libcuprof that the next layer handed back as the driver's (a
 * driver whose table binds to the global scope), by the exported name it has there. */
static void *
instead_of_self(void *fn, const char **name)
{
    Dl_info info;
    *name = NULL;
    if (dladdr(fn, &info) == 0 || info.dli_sname == NULL)
        return NULL;
    *name = info.dli_sname;
    return real_cuda_instead_of_self(info.dli_sname);
}

static CUresult
swap_in_wrapper(CUresult result, const char *symbol, void **pfn, int version, cuuint64_t flags,
                CUdriverProcAddressQueryResult *status)
{
    /* Only a symbol the driver really has gets a wrapper, and only for the ABI it returned. */
    if (result != CUDA_SUCCESS || pfn == NULL || *pfn == NULL || symbol == NULL)
        return result;
    if (real_dl_is_self(*pfn)) {
        const char *name;
        *pfn = instead_of_self(*pfn, &name);
        if (*pfn == NULL) { /* the driver has no such entry point of its own: say it has none */
            real_cuda_say_missing(name != NULL ? name : symbol);
            if (status != NULL)
                *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
            return CUDA_ERROR_NOT_FOUND;
        }
    }
    /* Off mode passes calls through untouched: the program gets the driver's own entry points,
     * except the lookup itself, which keeps answering for a driver that hands out cuprof's
     * exports (each later lookup must be filtered the same way). */
    void *wrapper = hooks_wrapper_for(symbol, version, flags);
    if (wrapper != NULL && runtime_config()->mode == CUPROF_MODE_OFF &&
        strcmp(symbol, "cuGetProcAddress") != 0)
        wrapper = NULL;
    if (wrapper != NULL) {
        *pfn = wrapper;
        count(&count_lookups_hooked);
    }
    return result;
}

/* True when our lookup is re-entered on this thread: from inside the resolution of the entry
 * points, or from the driver it forwards to. Waiting or forwarding again would loop. */
static bool
called_back(void)
{
    return lookup_depth > 0 || real_cuda_resolving();
}

CUresult
hooks_get_proc_address_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult *status)
{
    if (called_back()) {
        /* A driver that forwards to another driver through our dlsym: answer with that
         * driver's lookup, untouched. */
        void *p = swapped_other_than(swapped_gpa_v2, real_cuda_lookup_in_use());
        if (p == NULL)
            return CUDA_ERROR_NOT_FOUND;
        PFN_cuGetProcAddress_v12000 fn;
        memcpy(&fn, &p, sizeof fn);
        return fn(symbol, pfn, version, flags, status);
    }
    count(&count_lookups);
    const struct real_cuda *real = real_cuda_get();
    if (real == NULL || real->cuGetProcAddress_v2 == NULL) {
        if (pfn != NULL)
            *pfn = NULL;
        if (status != NULL)
            *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    lookup_depth++;
    CUresult result = real->cuGetProcAddress_v2(symbol, pfn, version, flags, status);
    lookup_depth--;
    return swap_in_wrapper(result, symbol, pfn, version, flags, status);
}

CUresult
hooks_get_proc_address(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    if (called_back()) { /* as in hooks_get_proc_address_v2 */
        void *p = swapped_other_than(swapped_gpa_v1, real_cuda_lookup_in_use());
        if (p == NULL)
            return hooks_get_proc_address_v2(symbol, pfn, version, flags, NULL);
        PFN_cuGetProcAddress_v11030 fn;
        memcpy(&fn, &p, sizeof fn);
        return fn(symbol, pfn, version, flags);
    }
    const struct real_cuda *real = real_cuda_get();
    if (real != NULL && real->cuGetProcAddress_v1 != NULL) {
        count(&count_lookups);
        lookup_depth++;
        CUresult result = real->cuGetProcAddress_v1(symbol, pfn, version, flags);
        lookup_depth--;
        return swap_in_wrapper(result, symbol, pfn, version, flags, NULL);
    }
    /* The v1 ABI has no fifth argument: never pass one through. */
    return hooks_get_proc_address_v2(symbol, pfn, version, flags, NULL);
}

struct hooks_counts
hooks_get_counts(void)
{
    struct hooks_counts counts = {
        .lookups = atomic_load_explicit(&count_lookups, memory_order_relaxed),
        .lookups_hooked = atomic_load_explicit(&count_lookups_hooked, memory_order_relaxed),
        .dlsym_hooked = atomic_load_explicit(&count_dlsym_hooked, memory_order_relaxed),
    };
    return counts;
}

/* CUPROF_LOG=debug: how many driver lookups flowed through cuprof (tests compare this with
 * what the program asked for). Read from the environment directly: at exit, configuration may
 * be off or gone, and this line must not depend on it. */
__attribute__((destructor)) static void
hooks_report_counts(void)
{
    const char *log = getenv("CUPROF_LOG");
    if (log == NULL || strcmp(log, "debug") != 0)
        return;
    struct hooks_counts c = hooks_get_counts();
    char line[200];
    int n = snprintf(line, sizeof line,
                     "cuprof: debug: driver lookups: cuGetProcAddress=%llu hooked=%llu "
                     "dlsym_hooked=%llu\n",
                     (unsigned long long)c.lookups, (unsigned long long)c.lookups_hooked,
                     (unsigned long long)c.dlsym_hooked);
    if (n > 0)
        (void)stderr_out_write(line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}
