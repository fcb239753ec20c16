/* shim_call.h: what every accounting wrapper does first and last: decide whether cuprof handles
 *   the call (guard, mode, current device), capture the stack outside any allocator lock, raise
 *   the guard while cuprof works, and map cuprof's results to the CUresult the real call gives.
 * Locking: none of its own; must be entered holding no cuprof lock (runtime_get may initialise).
 * Hot path: yes. */
#ifndef CUPROF_SHIM_CALL_H
#define CUPROF_SHIM_CALL_H

#include <cuda.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "preload/call_tag.h"
#include "preload/ctx_owner.h"
#include "preload/runtime.h"
#include "snapshot/stacks.h"

struct shim_call {
    struct cuprof_runtime *rt;
    int device;        /* the calling thread's current device (from its current context) */
    CUcontext context; /* the calling thread's current context */
    uint32_t stack_id; /* 0 = none (CUPROF_STACKS) */
    uint16_t owner;    /* allocating calls: the calling library (library_table.h), the blocks'
                          owner tag */
};

enum shim_call_kind { SHIM_CALL_ALLOC, SHIM_CALL_FREE };

/* True: cuprof handles the call and the guard is raised (end with shim_call_end). False: forward
 * to the real function untouched: the guard was already raised (cuprof's own call), off mode, or
 * no current context (the real call then reports its own error). `caller` is the wrapper's
 * return address (SHIM_CALL_BEGIN passes it): where the call came from when no runtime wrapper
 * further out knows better. */
bool shim_call_begin(struct shim_call *call, enum shim_call_kind kind, const void *caller);
#define SHIM_CALL_BEGIN(call, kind) shim_call_begin(call, kind, __builtin_return_address(0))
void shim_call_end(struct shim_call *call);

/* The runtime once some wrapper initialised it (NULL before, and in off mode): for queries that
 * must not trigger initialisation themselves. Inline: one load. */
extern _Atomic(struct cuprof_runtime *) shim_call_ready_runtime
    __attribute__((visibility("hidden")));
static inline struct cuprof_runtime *
shim_call_runtime_if_ready(void)
{
    return atomic_load_explicit(&shim_call_ready_runtime, memory_order_acquire);
}

/* The stack for this call: none when CUPROF_STACKS says so (even where a wrapper further out
 * captured one before stacks were switched off), else the one a runtime-level wrapper captured
 * further out, else a fresh capture when CUPROF_STACKS asks for it for this kind of call. Inline:
 * without stacks it is one load. */
static inline uint32_t
shim_call_stack(enum shim_call_kind kind)
{
    enum stack_mode mode = stacks_mode();
    if (mode == STACKS_NONE)
        return 0;
    if (call_tag_current.has_stack)
        return call_tag_current.stack_id;
    if (kind == SHIM_CALL_FREE && mode != STACKS_ALL)
        return 0;
    /* stacks_capture drops the frames inside libcuprof itself. */
    return stacks_capture(0);
}

void shim_call_log_bad_answer(const char *api);

/* allocator_track_external for a pointer the driver handed the program, tagged with the calling
 * thread's context (whose end drops it); a range the allocator refuses (-CUPROF_EDRIVER) goes
 * unrecorded, logged once. The program's answer is unchanged. */
void shim_call_track_external(const struct shim_call *call, int device, uint64_t addr, size_t size,
                              uint64_t stream, uint8_t pool, const char *api);

/* In cache mode and outside a capture, hands back to the driver everything cuprof's cache holds on
 * `device` for no block of the program (allocator_releasable_bytes: segment_free entries, as the
 * program's own empty_cache() would), for memory the driver found it lacked; returns those bytes
 * (0: nothing was done). Takes the device's allocator lock. */
size_t shim_call_hand_back(struct cuprof_runtime *rt, int device);

/* A call cuprof passed to the driver was refused for lack of memory (`result`) while cuprof's
 * cache may hold free segments of `device`: without cuprof that memory would be the driver's, so
 * in cache mode the cache hands them back (as the program's own empty_cache would: segment_free
 * entries) unless a capture is under way (a cuMemFree would invalidate it). True when it released
 * anything: then the caller asks the driver once more. */
bool shim_call_release_for_driver(const struct shim_call *call, CUresult result, int device);

/* A call cuprof passed to the driver (`api`, for `size` bytes of `pool` memory) and the driver's
 * answer: an out-of-memory refusal is recorded and reported as the cache's own OOMs are (an oom
 * entry with its stack, the message, the OOM dump); any other answer is left alone. */
void shim_call_note_refusal(const struct shim_call *call, CUresult result, int device, size_t size,
                            uint64_t stream, uint8_t pool, const char *api);

/* True when the cache may hand this allocation its memory: the calling thread's context owns the
 * device's cache (or nobody did, and now it does). Else the driver serves the call and it is
 * recorded as that context's external memory (ctx_owner.h). */
static inline bool
shim_call_cache_serves(const struct shim_call *call)
{
    return ctx_owner_claim(call->device, call->context);
}

/* The calling thread's device when cuprof has a say in its call: the runtime is ready (*rt; a
 * caller that needs the cache checks its mode), the call is the program's (no guard) and a
 * context is current; else -1. For the queries and retries outside the allocating wrappers
 * (shim_query.c, shim_driver_memory.c). */
int shim_call_ready_device(struct cuprof_runtime **rt);

/* cuprof's int result (0, -CUPROF_E*, positive CUresult) as the CUresult the program sees. On
 * -CUPROF_ENOMEM it first lets the runtime write its OOM dump. */
CUresult shim_call_result(const struct shim_call *call, int result);

#endif
