/* memory_stats.h: PyTorch's per-device memory_stats counters, their update rules and resets, and
 * the flat "allocated_bytes.all.current" key/value view sorted as torch.cuda.memory_stats() is.
 * Locking: none inside; the allocator updates a device's counters under that device's lock.
 * Hot path: the increase/decrease helpers are static inline, allocate nothing and never fail. */
#ifndef CUPROF_MEMORY_STATS_H
#define CUPROF_MEMORY_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* PyTorch's Stat (named so it does not clash with <sys/stat.h>). */
struct stat_counter {
    int64_t current;
    int64_t peak;
    int64_t allocated;
    int64_t freed;
};

/* PyTorch's StatType: index into every stat array. */
enum stat_pool {
    STAT_ALL = 0,
    STAT_SMALL_POOL = 1,
    STAT_LARGE_POOL = 2,
    STAT_POOL_COUNT = 3,
};

enum stat_kind {
    STAT_KIND_BYTES,
    STAT_KIND_COUNT,
};

/* One device's counters; fields are generated from memory_stats.def. */
struct memory_stats {
#define STAT_ARRAY(name, kind, label) struct stat_counter name[STAT_POOL_COUNT];
#define STAT_SINGLE(name, label)      struct stat_counter name;
#define STAT_SCALAR(name, reset)      int64_t name;
#include "stats/memory_stats.def"
#undef STAT_ARRAY
#undef STAT_SINGLE
#undef STAT_SCALAR
};

/* 9 arrays x 3 pools x 4 fields + 2 singles x 4 fields + 6 scalars. */
#define MEMORY_STATS_KEY_COUNT 122

/* One flat key ("reserved_bytes.large_pool.peak") and its value. Keys are static strings. */
struct memory_stat_kv {
    const char *key;
    int64_t value;
};

/* Zeroes every counter and sets max_split_size (PyTorch writes SIZE_MAX as -1). */
void memory_stats_init(struct memory_stats *stats, int64_t max_split_size);

/* PyTorch's Stat::increase: current += n, peak = max(peak, current), allocated += n. */
static inline void
memory_stats_increase(struct stat_counter *stat, int64_t n)
{
    stat->current += n;
    if (stat->current > stat->peak)
        stat->peak = stat->current;
    stat->allocated += n;
}

/* PyTorch's Stat::decrease: current -= n, freed += n (peak untouched). */
static inline void
memory_stats_decrease(struct stat_counter *stat, int64_t n)
{
    stat->current -= n;
    stat->freed += n;
}

/* Applies to `all` and to `pool` of a stat array, as PyTorch's for_each_selected_stat_type does.
 * pool == STAT_ALL updates `all` once. */
static inline void
memory_stats_increase_pool(struct stat_counter *array, enum stat_pool pool, int64_t n)
{
    memory_stats_increase(&array[STAT_ALL], n);
    if (pool != STAT_ALL)
        memory_stats_increase(&array[pool], n);
}

static inline void
memory_stats_decrease_pool(struct stat_counter *array, enum stat_pool pool, int64_t n)
{
    memory_stats_decrease(&array[STAT_ALL], n);
    if (pool != STAT_ALL)
        memory_stats_decrease(&array[pool], n);
}

/* Net change: increase when delta > 0, decrease by -delta when delta < 0, nothing when 0
 * (PyTorch's handling of the net inactive_split change in free_block). */
static inline void
memory_stats_update_pool(struct stat_counter *array, enum stat_pool pool, int64_t delta)
{
    if (delta > 0)
        memory_stats_increase_pool(array, pool, delta);
    else if (delta < 0)
        memory_stats_decrease_pool(array, pool, -delta);
}

/* The same updates with `all` kept lazily, for the allocator's hot path (about a tenth of a
 * cached malloc/free pair): only the pool's counter moves, and `all`'s peak, which takes the sum
 * of the two pools' currents after each add (what `all`'s current would be then, since every
 * update goes to `all` and one pool). memory_stats_settle_all then writes `all`'s current,
 * allocated and freed as the pools' sums. Arrays updated only these ways read exactly as with
 * the eager helpers once settled. `pool` is STAT_SMALL_POOL or STAT_LARGE_POOL. */
static inline void
memory_stats_add_pool(struct stat_counter *array, enum stat_pool pool, int64_t n)
{
    memory_stats_increase(&array[pool], n);
    int64_t all = array[STAT_SMALL_POOL].current + array[STAT_LARGE_POOL].current;
    if (all > array[STAT_ALL].peak)
        array[STAT_ALL].peak = all;
}

static inline void
memory_stats_sub_pool(struct stat_counter *array, enum stat_pool pool, int64_t n)
{
    memory_stats_decrease(&array[pool], n);
}

/* memory_stats_update_pool's lazy form. */
static inline void
memory_stats_net_pool(struct stat_counter *array, enum stat_pool pool, int64_t delta)
{
    if (delta > 0)
        memory_stats_add_pool(array, pool, delta);
    else if (delta < 0)
        memory_stats_sub_pool(array, pool, -delta);
}

/* Writes every array's `all` current, allocated and freed as the sums of its two pools'. */
void memory_stats_settle_all(struct memory_stats *stats);

/* Small or large pool of a block or segment, from PyTorch's pool flag. */
static inline enum stat_pool
memory_stats_pool(bool is_small)
{
    return is_small ? STAT_SMALL_POOL : STAT_LARGE_POOL;
}

/* reset_peak_memory_stats: peak = current on every array and single stat. */
void memory_stats_reset_peak(struct memory_stats *stats);
/* reset_accumulated_memory_stats: allocated = freed = 0 on every array and single stat, and the
 * five num_* counters to 0 (max_split_size is kept). */
void memory_stats_reset_accumulated(struct memory_stats *stats);

/* Writes up to `cap` flat entries, sorted by key as torch.cuda.memory_stats() orders them.
 * Returns MEMORY_STATS_KEY_COUNT (the number a full listing needs, even when cap is smaller). */
size_t memory_stats_flatten(const struct memory_stats *stats, struct memory_stat_kv *out,
                            size_t cap);

/* Rebuilds counters from flat entries (any order). Keys it does not know (newer PyTorch keys)
 * are skipped; keys absent from kv stay 0 (max_split_size: -1). Returns how many entries were
 * recognised. */
size_t memory_stats_from_flat(const struct memory_stat_kv *kv, size_t count,
                              struct memory_stats *out);

/* Looks one flat key up. Returns false (and leaves *value) for an unknown key. */
__attribute__((warn_unused_result)) bool memory_stats_get(const struct memory_stats *stats,
                                                          const char *key, int64_t *value);

#endif
