/* block_map.h: pointer -> block map for the blocks handed out, split into shards so that frees
 *   on different devices (and different addresses) do not serialize on one lock.
 * Locking: one mutex per shard inside; callers may hold a device lock (order: device, shard).
 * Hot path: insert/take are; they never malloc (growth is done by block_map_grow, lock-free of
 *   device locks). */
#ifndef CUPROF_BLOCK_MAP_H
#define CUPROF_BLOCK_MAP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BLOCK_MAP_SHARDS 64

struct alloc_block;

struct block_map_shard {
    pthread_mutex_t lock;
    struct alloc_block **buckets; /* protected by lock; chained through block->hash_next */
    size_t bucket_count;          /* protected by lock; a power of two */
    size_t count;                 /* protected by lock */
    char pad[64];
};

struct block_map {
    struct block_map_shard shards[BLOCK_MAP_SHARDS];
};

/* Returns 0 or -CUPROF_EHOSTMEM. */
__attribute__((warn_unused_result)) int block_map_init(struct block_map *map);
void block_map_destroy(struct block_map *map);

/* Adds an allocated block (keyed by block->addr). Returns true when its shard is crowded and
 * block_map_grow(map, addr) should be called once no lock is held. */
bool block_map_insert(struct block_map *map, struct alloc_block *block);
/* Removes and returns the block at exactly addr whose `external` flag matches, or NULL. */
struct alloc_block *block_map_take(struct block_map *map, uint64_t addr, bool external);
/* Removes `block` if present (allocator_forget_device). */
void block_map_remove(struct block_map *map, struct alloc_block *block);
/* Finds the block at exactly addr and copies what a caller may need under the shard lock. */
bool block_map_find(struct block_map *map, uint64_t addr, int *device, size_t *size,
                    bool *external);
/* The block at exactly addr, or NULL. The caller must hold the lock of the device the block
 * belongs to (learned from block_map_find) before dereferencing it. */
struct alloc_block *block_map_get(struct block_map *map, uint64_t addr);
/* Doubles the buckets of addr's shard if it is still crowded; mallocs with no lock held. */
void block_map_grow(struct block_map *map, uint64_t addr);

#endif
