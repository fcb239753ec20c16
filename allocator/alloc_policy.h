/* alloc_policy.h: PyTorch's pure size rules: rounding, pools, segment sizes, split and oversize.
 * Locking: none (pure functions of their arguments).
 * Hot path: yes, every malloc; no allocation, no side effects. */
#ifndef CUPROF_ALLOC_POLICY_H
#define CUPROF_ALLOC_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocator/alloc_config.h"

#define ALLOC_MIN_BLOCK_SIZE  ((size_t)512)       /* kMinBlockSize */
#define ALLOC_SMALL_SIZE      ((size_t)1 << 20)   /* kSmallSize: largest small-pool block */
#define ALLOC_SMALL_BUFFER    ((size_t)2 << 20)   /* kSmallBuffer: small-pool segment */
#define ALLOC_LARGE_BUFFER    ((size_t)20 << 20)  /* kLargeBuffer: segment for 1-10 MiB */
#define ALLOC_MIN_LARGE_ALLOC ((size_t)10 << 20)  /* kMinLargeAlloc: own segment from here */
#define ALLOC_ROUND_LARGE     ((size_t)2 << 20)   /* kRoundLarge */
#define ALLOC_MAX_REQUEST     ((uint64_t)1 << 60) /* PyTorch refuses 1 EiB and more */

/* PyTorch's roundup_power2_next_division: `size` rounded up to the next 1/d of its interval. */
size_t alloc_policy_next_division(size_t size, size_t divisions);

/* The rules below are static inline: every malloc runs them, and a call each costs more than
 * their bodies. */

static inline unsigned
alloc_policy_log2_floor(size_t v)
{
    return v ? 63u - (unsigned)__builtin_clzll((unsigned long long)v) : 0;
}

/* Divisions configured for the power-of-two interval that holds `size` (0 or 1 = none). */
static inline size_t
alloc_policy_divisions(const struct alloc_config *config, size_t size)
{
    /* Interval 0 holds everything below 2 MiB, interval i holds [2^(20+i), 2^(21+i)). */
    unsigned lg = alloc_policy_log2_floor(size);
    unsigned idx = lg > 20 ? lg - 20 : 0;
    if (idx >= ALLOC_CONFIG_ROUNDUP_INTERVALS)
        idx = ALLOC_CONFIG_ROUNDUP_INTERVALS - 1;
    return config->roundup_power2_divisions[idx];
}

/* PyTorch's round_size: the block size actually handed out for a request. */
static inline size_t
alloc_policy_round_size(const struct alloc_config *config, size_t size)
{
    if (size < ALLOC_MIN_BLOCK_SIZE)
        return ALLOC_MIN_BLOCK_SIZE;
    size_t d = alloc_policy_divisions(config, size);
    /* PyTorch: power-of-two divisions apply only when d > 1 and size > 512 * d. */
    if (d > 1 && size > ALLOC_MIN_BLOCK_SIZE * d)
        return alloc_policy_next_division(size, d);
    return (size + ALLOC_MIN_BLOCK_SIZE - 1) & ~(ALLOC_MIN_BLOCK_SIZE - 1);
}

/* Small pool iff the rounded size is at most 1 MiB. */
static inline bool
alloc_policy_is_small(size_t rounded)
{
    return rounded <= ALLOC_SMALL_SIZE;
}

/* PyTorch's get_allocation_size: bytes asked of the device for a new segment. */
static inline size_t
alloc_policy_segment_size(size_t rounded)
{
    if (rounded <= ALLOC_SMALL_SIZE)
        return ALLOC_SMALL_BUFFER;
    if (rounded < ALLOC_MIN_LARGE_ALLOC)
        return ALLOC_LARGE_BUFFER;
    return (rounded + ALLOC_ROUND_LARGE - 1) & ~(ALLOC_ROUND_LARGE - 1);
}

/* PyTorch's should_split for a free block of block_size serving `size` (rounded). */
static inline bool
alloc_policy_should_split(const struct alloc_config *config, bool small, size_t block_size,
                          size_t size)
{
    size_t remaining = block_size - size;
    /* PyTorch: with expandable_segments:True the small pool's 512-byte rule holds for every
     * block, expandable or not (the setting decides, not the block). */
    if (small || config->expandable_segments)
        return remaining >= ALLOC_MIN_BLOCK_SIZE;
    /* PyTorch: large-pool leftovers of 1 MiB or less stay attached to the allocation. */
    return size < config->max_split_size && remaining > ALLOC_SMALL_SIZE;
}

/* PyTorch's two oversize guards in get_free_block: may a cached block of `candidate` bytes
 * serve a rounded request of `size`? */
static inline bool
alloc_policy_may_use(const struct alloc_config *config, size_t size, size_t candidate)
{
    size_t ms = config->max_split_size;
    /* PyTorch: requests below max_split_size never take an oversize block ... */
    if (size < ms && candidate >= ms)
        return false;
    /* ... and an oversize request takes one only if it wastes less than the rounding limit. */
    if (size >= ms && candidate >= size + config->max_non_split_rounding_size)
        return false;
    return true;
}

/* Whether cuprof's cache, not the program, ran the device out of memory for a request of
 * `request` bytes: the driver had less free (`driver_free`) than the request, but without the
 * cache it would hold only the program's live bytes as requested (`live`), so the cache's
 * reserved bytes (`reserved`, live ones included) plus the driver's free bytes are what the
 * request could have had, capped by `cap` (a memory fraction the user set; 0: none), into *reach.
 * The shim's OOM message and `cuprof explain` both ask it. */
static inline bool
alloc_policy_cache_caused(uint64_t live, uint64_t request, uint64_t reserved, uint64_t driver_free,
                          uint64_t cap, uint64_t *reach)
{
    *reach = reserved + driver_free;
    if (cap > 0 && cap < *reach)
        *reach = cap;
    return request > driver_free && live <= reserved && live + request <= *reach;
}

/* PyTorch's format_size: "1024 bytes", "1.50 KiB", "2.00 MiB", "3.00 GiB". */
void alloc_policy_format_size(uint64_t bytes, char *buf, size_t len);

#endif
