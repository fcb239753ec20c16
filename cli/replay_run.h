/* replay_run.h: one replay of a snapshot's history under one allocator setting, as `replay`,
 *   `explain` and `tune` ask for it: the recording's starting state first, then the setting.
 * Locking: none; a replay owns all it changes, so replays of one plan may run in parallel threads
 *   (they share the snapshot and the plan, both read-only once replay_plan_init returned).
 * Hot path: no; O(entries) per replay. */
#ifndef CUPROF_CLI_REPLAY_RUN_H
#define CUPROF_CLI_REPLAY_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocator/alloc_config.h"
#include "allocator/allocator.h"
#include "cli/span_map.h"
#include "snapshot/snapshot_model.h"
#include "stats/memory_stats.h"

/* What every replay of one device's history shares. */
struct replay_plan {
    const struct snapshot *snap;
    size_t device;
    const char *recorded_conf; /* the recording's settings (PYTORCH_CUDA_ALLOC_CONF syntax) */
    struct alloc_config recorded;
    uint64_t capacity;          /* bytes a replay may reserve (REPLAY_UNLIMITED: no limit) */
    uint64_t total;             /* the card's size the device reports (0: min(capacity, the
                                 * recorded card)); a fraction cap and expandable reservations
                                 * are sized from it, as PyTorch sizes them from the card */
    struct span_map remainders; /* unsplit remainders of the starting state, learnt once */
    uint8_t *pending;           /* per entry: a free_requested whose free_completed follows */
    struct replay_index *index; /* the trace's allocs and frees by address (replay.h) */
};

/* Parses recorded_conf (kept by pointer), then learns what the recording proves about its
 * starting state (replays with the recorded settings until no guess is contradicted). Returns
 * 0; -1 after one line on stderr (host memory, or settings that do not parse). */
__attribute__((warn_unused_result)) int replay_plan_init(struct replay_plan *plan,
                                                         const struct snapshot *snap, size_t device,
                                                         const char *recorded_conf,
                                                         uint64_t capacity);
void replay_plan_free(struct replay_plan *plan);

struct replay_opts {
    const char *conf; /* the setting replayed */
    bool recorded;    /* conf is the recorded setting (its mode too: trace mode never caches) */
    bool check;       /* count the recorded decisions reproduced (the recorded setting) */
    bool progress;    /* a progress line on stderr when it is a terminal */
    bool empty_cache; /* empty the cache right before entry empty_cache_at (past the last: at
                       * the end) */
    size_t empty_cache_at;
    bool capture;      /* keep the state after capture_at entries (0: the starting state), after an
                        * empty_cache at the same instant */
    size_t capture_at; /* past the last entry: the state at the end */
    bool watch;        /* say whether the request of entry watch_at ran out of memory */
    size_t watch_at;
};

/* The allocator's state after opts->capture_at entries: its segments and blocks, as a snapshot has
 * them. */
struct replay_state {
    bool captured;
    struct segment_info *segments; /* sorted by address; malloc'd */
    size_t segment_count;
    struct block_info *blocks; /* each segment's, in address order; malloc'd */
    size_t block_count;
    struct memory_stats stats;
};

/* A recorded decision the replay did not reproduce (replay --check lists the first ones). */
struct replay_diff {
    size_t entry;
    uint64_t size, stream;
    uint64_t recorded_addr, recorded_segment; /* segment: bytes of the one it made, or 0 */
    uint64_t replay_addr, replay_segment;
};
#define REPLAY_MAX_DIFFS 10

struct replay_result {
    bool ok;
    struct memory_stats stats; /* the replayed allocator's counters at the end */
    size_t ooms, recorded_ooms;
    size_t new_ooms;       /* OOMs at requests the recording served */
    size_t first_oom;      /* the entry of the replay's first OOM; SIZE_MAX when none */
    bool watched_oom;      /* opts->watch: entry watch_at's request ran out of memory */
    size_t prelude_misses; /* blocks of the starting state that could not be placed */
    size_t checked, reproduced;
    uint64_t peak_reserved;  /* the device's reserved bytes at their highest */
    size_t peak_reserved_at; /* after this many entries (0: the starting state) */
    uint64_t free_at_peak;   /* reserved minus allocated bytes then (cached, unused) */
    /* cudaMalloc/cuMemMap calls and frees/unmaps the replay made from the first entry on
     * (num_device_alloc and num_device_free, less the starting state's). */
    uint64_t device_allocs, device_frees;
    struct replay_diff diffs[REPLAY_MAX_DIFFS]; /* the first differences (check) */
    size_t ndiffs;
    struct replay_state state; /* opts->capture_at's; free with replay_result_free */
};

void replay_result_free(struct replay_result *res);

/* Replays plan's history under opts->conf. Returns 0 (res filled); -1 after one line on stderr
 * (host memory, a setting that does not parse, the allocator refusing a recorded request). */
__attribute__((warn_unused_result)) int replay_setting(const struct replay_plan *plan,
                                                       const struct replay_opts *opts,
                                                       struct replay_result *res);

/* Replays plan's history under each of opts[0..n) on up to `threads` threads (0: one per CPU),
 * into res[0..n). `progress`: one line on stderr, when it is a terminal, counting the settings
 * done. Returns 0 when every replay returned 0, else -1 (each failure said why). */
__attribute__((warn_unused_result)) int replay_settings(const struct replay_plan *plan,
                                                        const struct replay_opts *opts,
                                                        struct replay_result *res, size_t n,
                                                        unsigned threads, bool progress);

/* The device's capacity as the recording's first OOM saw it (reserved bytes then plus the free
 * bytes the driver reported), or REPLAY_UNLIMITED when it recorded none. */
uint64_t replay_capacity_from_ooms(const struct snapshot *snap, size_t device);

/* `base` (PYTORCH_CUDA_ALLOC_CONF syntax) with `key` set to `value`, or removed when value is
 * NULL (an existing `key:` item replaced; `[...]` lists kept whole), into out. */
void replay_conf_with(const char *base, const char *key, const char *value, char *out, size_t len);

/* The snapshot's own settings string, or "" (PyTorch's defaults) after one line on stderr naming
 * `path` when they do not parse. */
const char *replay_recorded_conf(const struct snapshot *snap, const char *path);

#endif
