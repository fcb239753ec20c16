/* alloc_policy.c: PyTorch's size rules (CUDACachingAllocator.cpp round_size, get_allocation_size,
 * should_split, get_free_block's oversize guards, format_size) as pure functions. */
#include "allocator/alloc_policy.h"

#include <stdio.h>

static unsigned
log2_floor(size_t v)
{
    unsigned r = 0;
    while (v >>= 1)
        r++;
    return r;
}

size_t
alloc_policy_divisions(const struct alloc_config *config, size_t size)
{
    /* Interval 0 holds everything below 2 MiB, interval i holds [2^(20+i), 2^(21+i)). */
    unsigned lg = size ? log2_floor(size) : 0;
    unsigned idx = lg > 20 ? lg - 20 : 0;
    if (idx >= ALLOC_CONFIG_ROUNDUP_INTERVALS)
        idx = ALLOC_CONFIG_ROUNDUP_INTERVALS - 1;
    return config->roundup_power2_divisions[idx];
}

size_t
alloc_policy_next_division(size_t size, size_t divisions)
{
    if ((size & (size - 1)) == 0)
        return size;
    size_t floor2 = (size_t)1 << log2_floor(size);
    size_t step = floor2 >> log2_floor(divisions);
    if (step == 0)
        return floor2 * 2;
    size_t down = size & ~(step - 1);
    return down == size ? size : down + step;
}

size_t
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

bool
alloc_policy_is_small(size_t rounded)
{
    return rounded <= ALLOC_SMALL_SIZE;
}

size_t
alloc_policy_segment_size(size_t rounded)
{
    if (rounded <= ALLOC_SMALL_SIZE)
        return ALLOC_SMALL_BUFFER;
    if (rounded < ALLOC_MIN_LARGE_ALLOC)
        return ALLOC_LARGE_BUFFER;
    return (rounded + ALLOC_ROUND_LARGE - 1) & ~(ALLOC_ROUND_LARGE - 1);
}

bool
alloc_policy_should_split(const struct alloc_config *config, bool small, size_t block_size,
                          size_t size)
{
    size_t remaining = block_size - size;
    /* cuprof serves expandable_segments with ordinary segments, so their 512-byte split rule
     * is not applied: the large-pool rule below holds whatever that key says. */
    if (small)
        return remaining >= ALLOC_MIN_BLOCK_SIZE;
    /* PyTorch: large-pool leftovers of 1 MiB or less stay attached to the allocation. */
    return size < config->max_split_size && remaining > ALLOC_SMALL_SIZE;
}

bool
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

void
alloc_policy_format_size(uint64_t bytes, char *buf, size_t len)
{
    if (bytes <= 1024)
        snprintf(buf, len, "%llu bytes", (unsigned long long)bytes);
    else if (bytes <= 1048576)
        snprintf(buf, len, "%.2f KiB", (double)bytes / 1024.0);
    else if (bytes <= 1073741824)
        snprintf(buf, len, "%.2f MiB", (double)bytes / 1048576.0);
    else
        snprintf(buf, len, "%.2f GiB", (double)bytes / 1073741824.0);
}
