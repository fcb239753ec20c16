/* tune.h: a search of allocator settings by replay: the recorded settings replayed first (how
 *   far the replay reproduces the recording), then a grid of expandable_segments,
 *   max_split_size_mb, roundup_power2_divisions (single values and per-size lists) and
 *   garbage_collection_threshold (with a fraction), every one on its own thread, ranked by an
 *   objective, with the lines to paste for the best. Computed here; cmd_tune.c prints it.
 * Locking: none (the replays share only read-only data).
 * Hot path: no. */
#ifndef CUPROF_CLI_TUNE_H
#define CUPROF_CLI_TUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot/snapshot_model.h"

enum tune_objective {
    TUNE_OBJECTIVE_RESERVED = 0, /* fewest OOMs (new ones last), then the lowest peak reserved,
                                  * then the fewest device calls */
    TUNE_OBJECTIVE_CALLS,        /* fewest OOMs, then the fewest device calls, then the peak */
};

/* Where the capacity the OOMs are counted against came from. */
enum tune_capacity {
    TUNE_CAPACITY_OPTION,    /* --memory */
    TUNE_CAPACITY_OOM,       /* what the allocator could reach at the recording's first OOM */
    TUNE_CAPACITY_FOOTPRINT, /* the card less what was in use before the program began */
    TUNE_CAPACITY_UNKNOWN,   /* none: no OOM can happen */
};

struct tune_request {
    const char *path; /* the file, for messages */
    size_t device;
    uint64_t memory; /* 0: the device in the file */
    enum tune_objective objective;
    unsigned threads; /* 0: one per CPU */
    bool progress;    /* a progress line on a terminal */
};

/* One setting and how its replay went. */
struct tune_row {
    char label[160];   /* what differs from the recorded settings, or "recorded settings" */
    char conf[512];    /* CUPROF_ALLOC_CONF to paste */
    char pytorch[512]; /* PYTORCH_CUDA_ALLOC_CONF to paste (PyTorch's keys only) */
    double fraction;   /* a per_process_memory_fraction PyTorch sets by a call (0: none) */
    bool recorded, ok;
    size_t ooms, new_ooms; /* new: at requests the recording served */
    uint64_t peak_reserved, peak_allocated;
    uint64_t free_at_peak; /* cached, unused bytes when reserved memory peaked */
    uint64_t device_allocs, device_frees;
};

struct tune {
    size_t device, entries;
    enum tune_objective objective;
    enum tune_capacity capacity_from;
    uint64_t capacity; /* the replays' capacity (REPLAY_UNLIMITED when unknown) */
    /* How far the ranking can be trusted: the recorded settings' replay. */
    size_t checked, reproduced, start_misses;
    bool mid_run;
    uint64_t dropped;
    struct tune_row *rows; /* rows[0]: the recorded settings */
    size_t nrows;
    size_t *order; /* rows ranked, best first */
    size_t best;   /* = order[0] */
};

/* Runs the search. Returns 0; -1 with one line in err (host memory, a replay that failed). */
__attribute__((warn_unused_result)) int tune_compute(const struct snapshot *snap,
                                                     const struct tune_request *req,
                                                     struct tune *out, char *err, size_t errlen);
void tune_free(struct tune *t);

/* Device calls (allocations and frees) of a row against the recorded settings', as a ratio
 * (1.0 when the recording made none). */
double tune_calls_ratio(const struct tune *t, const struct tune_row *row);

/* A ratio at which a row is flagged: it saves memory by calling the device that much more. */
#define TUNE_CALLS_WARN 2.0

#endif
