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

/* Divisions configured for the power-of-two interval that holds `size` (0 or 1 = none). */
size_t alloc_policy_divisions(const struct alloc_config *config, size_t size);
/* PyTorch's roundup_power2_next_division: `size` rounded up to the next 1/d of its interval. */
size_t alloc_policy_next_division(size_t size, size_t divisions);
/* PyTorch's round_size: the block size actually handed out for a request. */
size_t alloc_policy_round_size(const struct alloc_config *config, size_t size);
/* Small pool iff the rounded size is at most 1 MiB. */
bool alloc_policy_is_small(size_t rounded);
/* PyTorch's get_allocation_size: bytes asked of the device for a new segment. */
size_t alloc_policy_segment_size(size_t rounded);
/* PyTorch's should_split for a free block of block_size serving `size` (rounded). */
bool alloc_policy_should_split(const struct alloc_config *config, bool small, size_t block_size,
                               size_t size);
/* PyTorch's two oversize guards in get_free_block: may a cached block of `candidate` bytes
 * serve a rounded request of `size`? */
bool alloc_policy_may_use(const struct alloc_config *config, size_t size, size_t candidate);
/* PyTorch's format_size: "1024 bytes", "1.50 KiB", "2.00 MiB", "3.00 GiB". */
void alloc_policy_format_size(uint64_t bytes, char *buf, size_t len);

#endif
