/* explain.h: why a device ran out of memory (or how full it was) at one instant of a snapshot's
 *   history, and what would have avoided it: the request, the whole device in bytes that add up
 *   to its capacity, a verdict with its numbers, and the history replayed from its start under
 *   other settings. Computed here (explain.c, explain_whatif.c); cmd_explain.c prints it as text
 *   or JSON, and the report page can take the same struct.
 * Locking: none (the replays run on threads of their own, sharing only read-only data).
 * Hot path: no. */
#ifndef CUPROF_CLI_EXPLAIN_H
#define CUPROF_CLI_EXPLAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/analysis.h"
#include "snapshot/snapshot_model.h"

/* Which instant (--at). */
enum explain_at {
    EXPLAIN_AT_DEFAULT = 0, /* the first OOM, else the peak of reserved memory */
    EXPLAIN_AT_OOM,         /* the first OOM, a request's or a driver's own call's (none: an
                             * error) */
    EXPLAIN_AT_PEAK,        /* the peak of reserved memory */
    EXPLAIN_AT_ENTRY,       /* right after trace entry `entry` (an oom entry: that OOM) */
    EXPLAIN_AT_DRIVER, /* the driver's own call refused that is row `entry` of cuprof.oom_messages
                        * (the report page's markers) */
};

struct explain_request {
    size_t device;
    enum explain_at at;
    size_t entry;     /* EXPLAIN_AT_ENTRY, EXPLAIN_AT_DRIVER */
    uint64_t memory;  /* the card's size when the file does not record it (0: not given) */
    size_t top;       /* call sites and segments kept */
    unsigned threads; /* for the replays (0: one per CPU) */
};

/* What the verdict found (any combination). */
#define EXPLAIN_LIVE_EXCEEDS  (1u << 0) /* live memory and the request exceed the device */
#define EXPLAIN_OUTSIDE       (1u << 1) /* memory outside the allocator took what was missing */
#define EXPLAIN_CAP           (1u << 2) /* per_process_memory_fraction refused the segment */
#define EXPLAIN_FRAGMENTATION (1u << 3) /* the bytes were free, in no block large enough */
#define EXPLAIN_DRIVER        (1u << 4) /* the driver refused a segment it said it had room for */
#define EXPLAIN_DRIVER_OWN    (1u << 5) /* one of the driver's own calls found too little free */

/* Where the capacity came from. */
enum explain_capacity {
    EXPLAIN_CAPACITY_FOOTPRINT, /* cuprof.device_footprint: the driver's total */
    EXPLAIN_CAPACITY_OPTION,    /* --memory */
    EXPLAIN_CAPACITY_ASSUMED,   /* unknown: reserved + pass-through + free (nothing outside) */
};

/* Free space of one pool of the allocator at the instant. */
struct explain_pool {
    uint64_t free_bytes, largest_free, free_blocks;
    size_t segments_with_free;
};

/* A segment holding free space. */
struct explain_segment {
    uint64_t addr, size, free_bytes, largest_free, stream;
    bool small, expandable;
};

/* One setting the history was replayed under. */
struct explain_whatif {
    char label[96]; /* "expandable_segments:True", "empty_cache before the request", ... */
    char conf[512]; /* the setting replayed (PYTORCH_CUDA_ALLOC_CONF syntax) */
    bool recorded;  /* the recording's own settings (the baseline) */
    bool ok;        /* the replay ran */
    bool avoided;   /* an OOM instant: the replay ran through it without running out */
    size_t ooms;    /* OOMs in the whole replay */
    uint64_t peak_reserved, peak_allocated;
    uint64_t device_allocs; /* cudaMalloc (or page maps) the replay made */
    /* A driver's own refusal: what the cache kept at the instant once emptied (the replay's
     * reserved bytes, pass-through memory not counted), as cuprof's cache hands back all it can
     * before such a call fails. */
    bool kept_known;
    uint64_t kept_reserved;
};

struct explain {
    const struct snapshot *snap;
    size_t device;
    size_t count;     /* trace entries */
    size_t at;        /* the state after `at` entries (an OOM: the state it met, its entry `at`) */
    bool is_oom;      /* the instant is an OOM of a request (an `oom` entry) */
    size_t oom_count; /* OOMs in the history */
    /* The instant is a refusal of one of the driver's own calls (kernel code, an array, a thread
     * stack: cuprof.oom_messages' `api`): its name; no request (is_oom false: the driver does
     * not say how much it wanted), `at` counts the entries before it. NULL otherwise. */
    const char *driver_call;
    int64_t driver_time_us;
    size_t driver_ooms;     /* such refusals the file records on the device */
    enum explain_at chosen; /* EXPLAIN_AT_OOM, _PEAK or _ENTRY: what `at` is */
    /* The request (an OOM). */
    uint64_t request_size;    /* rounded, as PyTorch records it */
    uint64_t request_segment; /* what the allocator asked of the device for it */
    uint64_t request_stream;
    uint8_t request_pool; /* enum trace_pool: not the allocator's when passed through */
    uint32_t request_stack;
    bool device_free_known;
    uint64_t device_free; /* what the driver said was free */
    const char *message;  /* the OOM's message (cuprof.oom_messages), or NULL */
    /* The device, in bytes that add up to `capacity`. */
    enum explain_capacity capacity_from;
    bool capacity_known;
    uint64_t capacity;
    uint64_t live_requested, live_allocated; /* allocated: block sizes */
    uint64_t reserved;                       /* the allocator's segments */
    uint64_t private_pools;                  /* of reserved: private (CUDA graph) pools */
    uint64_t cached_free;                    /* reserved - allocated - pending */
    uint64_t pending_free;     /* freed, waiting for the streams that used them (events) */
    uint64_t replay_reserved;  /* the recorded settings' replay's reserved bytes then */
    uint64_t passthrough;      /* managed, VMM, the driver's pools */
    uint64_t outside;          /* context, libraries' pools, other processes */
    uint64_t outside_at_start; /* of outside: in use before the program began */
    uint64_t graphs;           /* of outside: CUDA graphs' memory at the dump */
    bool outside_estimated;    /* not at an OOM: outside taken as at the dump */
    uint64_t free_bytes;
    struct explain_pool pools[2];     /* [0] small pool, [1] large pool */
    uint64_t largest_fit;             /* the largest free block the request could have taken (its
                                       * stream and pool) */
    struct explain_segment *segments; /* holding free space, most free first (at most top) */
    size_t nsegments, segments_with_free;
    struct site_total *sites; /* live bytes by call site (requested sizes), at most top */
    size_t nsites, all_sites;
    /* The recorded settings. */
    char recorded_conf[512];
    double fraction;  /* per_process_memory_fraction, 0 when none */
    uint64_t allowed; /* fraction * capacity */
    unsigned verdict; /* EXPLAIN_* flags; 0 at an instant that is not an OOM */
    uint64_t missing; /* LIVE/OUTSIDE: bytes short of what the request needed */
    /* A cuprof recording in cache mode whose OOM the cache caused: the program's live bytes
     * (as requested) and the request fit in what the cache held and the driver had free. */
    bool cache_caused;
    uint64_t without_cache; /* what the request could have had without the cache */
    /* A driver's own refusal recorded by cuprof's cache: the device's free bytes had the cache
     * kept none (the live blocks as requested); 0 otherwise. */
    uint64_t free_without_cache;
    /* How far the replays can be trusted. */
    bool mid_run;
    uint64_t dropped;
    bool state_from_replay; /* blocks and free space as the recorded settings' replay had them */
    size_t start_misses, checked, reproduced;
    bool baseline_oom; /* the recorded settings' replay ran out at the same request */
    struct explain_whatif *whatifs;
    size_t nwhatifs;
};

/* An OOM of a request cuprof passed through (managed, VMM, a driver pool): the driver refused it
 * itself, no setting of the cache applies. */
static inline bool
explain_request_passed(const struct explain *x)
{
    return x->is_oom && analysis_pool_passed(x->request_pool);
}

/* Computes everything for req. Returns 0; -1 with one line in err (no OOM to explain, an entry
 * past the history, host memory). */
__attribute__((warn_unused_result)) int explain_compute(const struct snapshot *snap,
                                                        const struct explain_request *req,
                                                        struct explain *out, char *err,
                                                        size_t errlen);
void explain_free(struct explain *x);

/* ---- explain_whatif.c: the replays (baseline first), and the state the baseline had at the
 * instant (blocks, free space by pool and segment), filled into x. Returns 0 or -1. */
__attribute__((warn_unused_result)) int explain_whatif(struct explain *x,
                                                       const struct explain_request *req);

/* `base` with `key` set to `value` (an existing `key:` item replaced), into out. */
void explain_conf_with(const char *base, const char *key, const char *value, char *out, size_t len);

#endif
