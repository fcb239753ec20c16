/* hooks.h: where programs get their driver entry points: our dlsym (cudart's bootstrap and its
 *   versioned-name fallback, RTLD_NEXT emulation) and our cuGetProcAddress(_v2), which swap in
 *   cuprof's wrappers from one explicit (name, version range, per-thread flag) table.
 * Locking: none: tables are constant, counters are relaxed atomics.
 * Hot path: no (lookups happen at start-up), but dlsym runs before any init: no side effects. */
#ifndef CUPROF_HOOKS_H
#define CUPROF_HOOKS_H

#include <cuda.h>
#include <stdint.h>

/* dlsym as the program sees it; `caller` is the return address of the program's call. */
void *hooks_dlsym(void *handle, const char *name, const void *caller);

/* cuGetProcAddress, CUDA 11.3-11.8 ABI (4 arguments). */
CUresult hooks_get_proc_address(const char *symbol, void **pfn, int version, cuuint64_t flags);
/* cuGetProcAddress_v2 (CUDA >= 12.0: symbolStatus may be NULL). */
CUresult hooks_get_proc_address_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                   CUdriverProcAddressQueryResult *status);

/* The wrapper cuprof hands out for (base name, version, flags), or NULL to keep the driver's. */
void *hooks_wrapper_for(const char *symbol, int version, cuuint64_t flags);

struct hooks_counts {
    uint64_t lookups;        /* calls into our cuGetProcAddress(_v2) */
    uint64_t lookups_hooked; /* ... that returned one of cuprof's wrappers */
    uint64_t dlsym_hooked;   /* dlsym calls on a driver handle that returned a wrapper */
};
struct hooks_counts hooks_get_counts(void);

#endif
