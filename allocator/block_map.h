/* block_map.h: one device's pointer -> block map for the blocks it handed out (a chained hash).
 * Locking: none inside; each device owns one map, protected by that device's lock, so a lookup
 *   takes no lock beyond the device lock the caller needs anyway.
 * Hot path: insert/take are; they never malloc (growth: the caller mallocs with no lock held). */
#ifndef CUPROF_BLOCK_MAP_H
#define CUPROF_BLOCK_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocator/alloc_block.h"

struct block_map {
    struct alloc_block **buckets; /* chained through block->hash_next */
    size_t bucket_count;          /* a power of two */
    unsigned shift;               /* 64 - log2(bucket_count) */
    size_t count;
};

/* Returns 0 or -CUPROF_EHOSTMEM. */
__attribute__((warn_unused_result)) int block_map_init(struct block_map *map);
void block_map_destroy(struct block_map *map);

/* Removes `block` if present (allocator_forget_device). */
void block_map_remove(struct block_map *map, struct alloc_block *block);
/* The block at exactly addr, or NULL. */
struct alloc_block *block_map_get(const struct block_map *map, uint64_t addr);
/* Bucket count the map should grow to, or 0 when it is not crowded. */
size_t block_map_grow_count(const struct block_map *map);
/* Moves every block into `fresh` (zeroed, `count` buckets, count == block_map_grow_count) and
 * returns the old bucket array for the caller to free once unlocked. */
struct alloc_block **block_map_rehash(struct block_map *map, struct alloc_block **fresh,
                                      size_t count);

/* The bucket of an address: device addresses are 512-byte aligned and differ in their middle
 * bits, and the top bits of the golden-ratio product mix all of them. */
static inline size_t
block_map_bucket_of(const struct block_map *map, uint64_t addr)
{
    return (size_t)((addr * 0x9e3779b97f4a7c15ULL) >> map->shift);
}

/* Adds an allocated block (keyed by block->addr). Returns true when the map is crowded: the
 * caller should then call block_map_grow_count/block_map_rehash (mallocing with no lock held).
 * (Inline, as block_map_take: one of each per malloc/free pair.) */
static inline bool
block_map_insert(struct block_map *map, struct alloc_block *block)
{
    size_t i = block_map_bucket_of(map, block->addr);
    block->hash_next = map->buckets[i];
    map->buckets[i] = block;
    map->count++;
    return map->count > 2 * map->bucket_count;
}

/* Removes and returns the block at exactly addr whose `external` flag matches, or NULL. */
static inline struct alloc_block *
block_map_take(struct block_map *map, uint64_t addr, bool external)
{
    for (struct alloc_block **link = &map->buckets[block_map_bucket_of(map, addr)]; *link != NULL;
         link = &(*link)->hash_next) {
        struct alloc_block *b = *link;
        if (b->addr == addr && b->seg->external == external) {
            *link = b->hash_next;
            b->hash_next = NULL;
            map->count--;
            return b;
        }
    }
    return NULL;
}

#endif
