/* trace_sink.h: the allocator's events (PyTorch's trace-entry vocabulary) and where they go.
 * Locking: `record` is called with the device's allocator lock held; it may take leaf locks
 *   further down allocator/lock_order.h (the history ring's, a side table's), held only for its
 *   own update, and must not log, call malloc, wait for I/O or call back into the allocator.
 * Hot path: yes, once per allocator event. */
#ifndef CUPROF_TRACE_SINK_H
#define CUPROF_TRACE_SINK_H

#include <stdint.h>

/* The actions, listed once in trace_actions.def (the order is part of the snapshot contract).
 * `size` is: alloc, free_requested, free_completed: the requested (unrounded) size;
 * segment_alloc, segment_free: segment bytes; segment_map, segment_unmap: bytes mapped or
 * unmapped; oom: the rounded request (device_free = free bytes); snapshot: total active bytes
 * (addr 0); annotate (cuprof_annotate): 0, with the label id in `stack_id`. */
enum trace_action {
#define TRACE_ACTION(id, name) id,
#include "allocator/trace_actions.def"
#undef TRACE_ACTION
    TRACE_ACTION_COUNT
};

/* PyTorch's action string ("alloc", ...); NULL past the last action. */
static inline const char *
trace_action_name(unsigned action)
{
    static const char *const names[TRACE_ACTION_COUNT] = {
#define TRACE_ACTION(id, name) [id] = name,
#include "allocator/trace_actions.def"
#undef TRACE_ACTION
    };
    return action < TRACE_ACTION_COUNT ? names[action] : 0;
}

/* Segment pools a trace entry can be tagged with (managed and VMM memory are never cached). */
enum trace_pool {
    TRACE_POOL_DEFAULT = 0, /* the caching allocator's small/large pools */
    TRACE_POOL_TRACE = 1,   /* trace mode: one block per device allocation */
    TRACE_POOL_MANAGED = 2, /* cuMemAllocManaged / cudaMallocManaged */
    TRACE_POOL_VMM = 3,     /* cuMemCreate / cuMemMap */
    TRACE_POOL_ASYNC = 4,   /* the driver's own stream-ordered pool, passed through */
    TRACE_POOL_NVTX =
        5, /* the program's own pool: NVTX memory regions (snapshot/program_pools.h) */
};

struct trace_event {
    uint8_t action; /* enum trace_action */
    uint8_t pool;   /* enum trace_pool */
    int16_t device;
    uint32_t stack_id; /* interned stack (0 = none), or the label id for TRACE_ANNOTATE */
    uint64_t addr;
    uint64_t size;
    uint64_t stream;
    uint64_t device_free; /* TRACE_OOM only */
    uint16_t owner;       /* the owner tag of allocator_malloc_owned: the block's on alloc and
                             free_* events, the request's on segment_alloc, segment_map and oom;
                             0 on segment_free and segment_unmap, or when none was given */
};

struct trace_sink {
    void *ctx;
    void (*record)(void *ctx, const struct trace_event *event);
};

/* Sets of actions, one bit each: which events a sink wants handed to it
 * (allocator_set_traced_actions); the allocator skips the call for the others. */
#define TRACE_ACTION_BIT(action) (UINT32_C(1) << (action))
#define TRACE_ACTIONS_ALL        ((UINT32_C(1) << TRACE_ACTION_COUNT) - 1)
#define TRACE_ACTIONS_SEGMENTS                                                                     \
    (TRACE_ACTION_BIT(TRACE_SEGMENT_ALLOC) | TRACE_ACTION_BIT(TRACE_SEGMENT_FREE) |                \
     TRACE_ACTION_BIT(TRACE_SEGMENT_MAP) | TRACE_ACTION_BIT(TRACE_SEGMENT_UNMAP))
_Static_assert(TRACE_ACTION_COUNT <= 32, "a set of actions is one 32-bit word");

#endif
