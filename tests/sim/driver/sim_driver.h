/* sim_driver: shared state of the simulated libcuda.so.1 (devices, contexts, streams, events)
 * and the helpers the entry-point files use.
 * Lock: dev->lock for memory state, dev->streams_lock for the stream list, s->lock per stream,
 * ev->lock per event; never take dev->lock while holding a stream lock. Hot path: no. */
#ifndef SIM_DRIVER_H
#define SIM_DRIVER_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaProfiler.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "sim_heap.h"

#define SIM_DRIVER_VERSION 13000
#define SIM_SMALL_ALIGN    ((size_t)512)

struct sim_device;

/* Segment kinds (sim_heap_seg.kind). */
enum sim_kind { SIM_KIND_DEVICE = 1, SIM_KIND_MANAGED, SIM_KIND_ASYNC };

#define SIM_MAX_PEERS 8 /* contexts one context may access (cuCtxEnablePeerAccess) */
/* Streams of one capture whose joins are followed (the origin and its forks); work on a stream
 * past these is taken as joined. */
#define SIM_CAPTURE_STREAMS 16

struct CUctx_st {
    struct sim_device *dev;
    bool primary;
    bool destroyed;        /* protected by dev->lock */
    unsigned flags;        /* protected by dev->lock */
    struct CUctx_st *next; /* dev->created list; protected by dev->lock */
    /* Peer contexts whose memory this one may access; protected by dev->lock. */
    struct CUctx_st *peers[SIM_MAX_PEERS];
    int npeers;
    /* cuCtxSetLimit values, limit i valid when bit i of limits_set is on (else the default);
     * protected by dev->lock. */
    size_t limits[CU_LIMIT_MAX];
    unsigned limits_set;
    size_t stack_pages; /* device pages a stack above the default takes; protected by dev->lock */
};

struct CUmemPoolHandle_st {
    struct sim_device *dev;
    bool is_default;
    bool destroyed;
    uint64_t release_threshold; /* protected by dev->lock */
    size_t used, used_high;     /* bytes; protected by dev->lock */
    unsigned reuse_off;         /* bit i: reuse attribute (CU_MEMPOOL_ATTR_REUSE_*) i turned off */
    struct CUmemPoolHandle_st *next;
};

struct sim_op;

struct CUstream_st {
    struct sim_device *dev;
    struct CUctx_st *ctx;
    unsigned flags;
    int priority;
    bool legacy;     /* the legacy default stream (handle 0 / CU_STREAM_LEGACY) */
    bool per_thread; /* a thread's per-thread default stream */
    atomic_int refs;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct sim_op *head, *tail; /* protected by lock */
    uint64_t submitted;         /* protected by lock */
    uint64_t completed;         /* protected by lock */
    bool has_worker, stopping;  /* protected by lock */
    pthread_t worker;
    struct CUstream_st *next; /* dev->streams; protected by dev->streams_lock */
    uint64_t capture_id;      /* the capture it belongs to, 0 for none; sim_graph's lock */
    /* Its place among its capture's streams (SIM_CAPTURE_STREAMS: not followed), and the
     * captured work of each of them it depends on, its own included; sim_graph's lock. */
    uint8_t capture_index;
    uint32_t capture_seen[SIM_CAPTURE_STREAMS];
};

struct CUevent_st {
    unsigned flags;
    atomic_int refs;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t record_gen;  /* protected by lock */
    uint64_t done_gen;    /* protected by lock */
    struct timespec when; /* protected by lock; time the record completed */
    uint64_t capture_id;  /* last recorded inside this capture (0: outside); sim_graph's lock */
    uint32_t capture_seen[SIM_CAPTURE_STREAMS]; /* the recording stream's, at the record */
};

struct sim_device {
    int ordinal;
    pthread_mutex_t lock;
    void *base;               /* the device-memory reservation */
    size_t reserve;           /* bytes reserved (capacity + slack) */
    size_t capacity;          /* bytes of "physical" memory */
    size_t used_pages;        /* protected by lock; shared by heap, vmm_phys and contexts */
    size_t context_pages;     /* SIMCUDA_CONTEXT_MEM in pages: what each live context holds */
    struct sim_heap heap;     /* protected by lock */
    int memfd;                /* backs cuMemCreate handles */
    struct sim_heap vmm_phys; /* offsets into memfd; protected by lock */
    struct CUctx_st primary;
    unsigned primary_refs;    /* protected by lock */
    struct CUctx_st *created; /* protected by lock */
    struct CUmemPoolHandle_st default_pool;
    size_t graph_bytes, graph_bytes_high; /* graph allocations' segments; protected by lock */
    struct CUmemPoolHandle_st *pools;     /* protected by lock */
    /* cuDeviceSetMemPool's choice, NULL for default_pool; protected by lock. */
    struct CUmemPoolHandle_st *current_pool;
    pthread_mutex_t streams_lock;
    struct CUstream_st *streams; /* protected by streams_lock */
    struct CUstream_st legacy;
    /* Operations queued on the device's streams and not yet run: a synchronization that finds
     * none returns at once, as a real driver's does on an idle device. Raised at submission under
     * the stream's lock, lowered (release) once the operation's effects are done. */
    _Atomic uint64_t pending_ops;
};

struct sim_state {
    atomic_bool initialized;
    int init_error;
    int ndev;
    struct sim_device *devs;
};

extern struct sim_state sim;

/* Returns CUDA_ERROR_NOT_INITIALIZED until cuInit succeeded. */
static inline CUresult
sim_check_init(void)
{
    return atomic_load_explicit(&sim.initialized, memory_order_acquire)
               ? CUDA_SUCCESS
               : CUDA_ERROR_NOT_INITIALIZED;
}

/* fork(): cuInit's atfork handler takes every lock the driver can enumerate before fork (each
 * device's streams_lock and stream locks, in submit's order, then the data locks: each device's
 * lock, host_lock, vmm_lock, fail_lock, all leaves) and releases them in both processes, so a
 * child never inherits a lock held by a thread that did not survive the fork. In the child every
 * stream starts idle (its worker is gone; the parent's queued work stays the parent's). Events
 * are not enumerable and are not carried over; a real driver is unusable in a forked child. */
void sim_host_fork_lock(void);
void sim_host_fork_unlock(void);
void sim_vmm_fork_lock(void);
void sim_vmm_fork_unlock(void);
void sim_stream_fork_lock(void);
void sim_stream_fork_unlock(bool child);

/* sim_context.c */
struct CUctx_st *sim_ctx_current(void);
/* Init check + current live context; error when there is none. */
CUresult sim_ctx_require(struct CUctx_st **out) __attribute__((warn_unused_result));
/* True when ctx is one of the driver's contexts and alive (not released or destroyed). */
bool sim_ctx_live(const struct CUctx_st *ctx);
struct sim_device *sim_device_get(CUdevice d);
/* Init check + the device `d`: CUDA_ERROR_INVALID_DEVICE for an ordinal it does not have. */
CUresult sim_device_require(CUdevice d, struct sim_device **out)
    __attribute__((warn_unused_result));

/* sim_module.c: the pages every thread's stack of `stack_bytes` takes beyond the default's (the
 * device's 132 SMs x 2048 threads each), SIZE_MAX when past counting; and a charge of `pages` of
 * the device's memory (false when they do not fit). */
size_t sim_module_stack_pages(size_t stack_bytes);
bool sim_module_charge_locked(struct sim_device *dev, size_t pages);

/* sim_mem.c */
CUresult sim_mem_alloc(struct CUctx_st *ctx, size_t size, enum sim_kind kind,
                       struct CUmemPoolHandle_st *pool, CUdeviceptr *out)
    __attribute__((warn_unused_result));
/* Graph allocations (sim_graph.c): a segment `graph` owns. A live one (its graph ran and did not
 * free it) is the program's until a free hands it back to the graph; the graph frees the others
 * when it goes, and leaves a live one to the program as an ordinary allocation. */
CUresult sim_mem_alloc_graph(struct CUctx_st *ctx, size_t size, const void *graph, CUdeviceptr *out)
    __attribute__((warn_unused_result));
/* Sets whether the allocation at `ptr` that `graph` owns is live; false when it is not the
 * graph's, *was_live its previous state. */
bool sim_mem_graph_set_live(uintptr_t ptr, const void *graph, bool live, bool *was_live);
bool sim_mem_graph_is_live(uintptr_t ptr, const void *graph);
/* Takes the device memory of `graph`'s allocations at `ptrs` that have none yet (a graph's first
 * launch or upload); CUDA_ERROR_OUT_OF_MEMORY, taking none, when it does not fit. */
CUresult sim_mem_graph_back(const uintptr_t *ptrs, size_t n, const void *graph)
    __attribute__((warn_unused_result));
void sim_mem_graph_release(uintptr_t ptr, const void *graph);
/* Frees a heap segment at `ptr` without waiting for streams (the caller did). */
CUresult sim_mem_free_now(uintptr_t ptr, bool from_async) __attribute__((warn_unused_result));
/* Device that holds [ptr, ptr+len) (heap or mapped VMM); NULL if none. */
struct sim_device *sim_mem_owner(uintptr_t ptr, size_t len);
/* True when ptr lies inside any device reservation or VMM range. */
bool sim_mem_is_device_va(uintptr_t ptr);
void sim_device_sync(struct sim_device *dev);
size_t sim_device_free_owned(struct sim_device *dev, struct CUctx_st *ctx);

/* CU_POINTER_ATTRIBUTE_BUFFER_ID of a new allocation (device, host, mapping): unique within the
 * process, as cuda.h promises, counted from 1, never reused (an allocation made where a freed
 * one was gets a new ID). */
uint64_t sim_mem_new_buffer_id(void);

/* sim_host.c: the page-locked host block (allocated or registered) holding p, if any; `id` (may be
 * NULL) receives its buffer ID. */
bool sim_host_find(uintptr_t p, uintptr_t *base, size_t *size, uint64_t *id);

/* sim_vmm.c: a mapped, accessible VMM range holding [ptr, ptr+len); `id` (may be NULL) receives
 * the buffer ID of the mapping holding ptr. */
bool sim_vmm_reserved(uintptr_t ptr);
CUresult sim_vmm_lookup(uintptr_t ptr, size_t len, struct sim_device **dev, uintptr_t *base,
                        size_t *size, uint64_t *id) __attribute__((warn_unused_result));
/* Whether `device` may read (write: and write) every VMM mapping overlapping [ptr, ptr+len), as
 * cuMemSetAccess said: CUDA_ERROR_ILLEGAL_ADDRESS where it may not (the real device faults); no
 * mapping there is no VMM memory, CUDA_SUCCESS. */
CUresult sim_vmm_check_access(uintptr_t ptr, size_t len, int device, bool write)
    __attribute__((warn_unused_result));
/* One line in the SIMCUDA_VMM_LOG file (none without it), printf-style, no newline. */
void sim_vmm_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* sim_peer.c: a context's peer access is gone with it (destroy, reset, last primary release). */
void sim_peer_forget(struct CUctx_st *ctx);

/* sim_stream.c */
CUresult sim_stream_init_legacy(struct sim_device *dev) __attribute__((warn_unused_result));
/* Resolves a stream handle (0, 0x1, 0x2 or a created stream) for the current context. */
CUresult sim_stream_resolve(CUstream h, bool ptsz, struct CUstream_st **out)
    __attribute__((warn_unused_result));
CUresult sim_stream_enqueue_free(struct CUstream_st *s, uintptr_t ptr)
    __attribute__((warn_unused_result));
/* Graph nodes are queued work kept for later: a copy of `op` to queue (NULL when out of memory),
 * freeing one, and queuing one on `s` (which then owns it). */
struct sim_op *sim_op_clone(const struct sim_op *op);
void sim_op_free(struct sim_op *op);
CUresult sim_stream_submit_op(struct CUstream_st *s, struct sim_op *op)
    __attribute__((warn_unused_result));
void sim_stream_sync(struct CUstream_st *s);
/* sim_event.c: drops a reference (the event's own, or a queued record's or wait's). */
void sim_event_unref(struct CUevent_st *e);

/* Busy-waits `us` microseconds (SIMCUDA_MALLOC_US / SIMCUDA_FREE_US). */
void sim_busy_wait_us(unsigned long us);

#endif
