/* block_map.c: chained hash of one device's live blocks by address (Fibonacci hashing). */
#include "allocator/block_map.h"

#include <stdlib.h>

#include "allocator/alloc_device.h"
#include "allocator/cuprof_errors.h"

#define INITIAL_BUCKETS 64

static unsigned
shift_for(size_t count)
{
    unsigned lg = 0;
    while (((size_t)1 << lg) < count)
        lg++;
    return 64 - lg;
}

int
block_map_init(struct block_map *map)
{
    map->buckets = calloc(INITIAL_BUCKETS, sizeof(*map->buckets));
    map->bucket_count = INITIAL_BUCKETS;
    map->shift = shift_for(INITIAL_BUCKETS);
    map->count = 0;
    return map->buckets == NULL ? -CUPROF_EHOSTMEM : 0;
}

void
block_map_destroy(struct block_map *map)
{
    free(map->buckets);
    map->buckets = NULL;
    map->bucket_count = map->count = 0;
}

void
block_map_remove(struct block_map *map, struct alloc_block *block)
{
    for (struct alloc_block **link = &map->buckets[block_map_bucket_of(map, block->addr)];
         *link != NULL; link = &(*link)->hash_next) {
        if (*link == block) {
            *link = block->hash_next;
            block->hash_next = NULL;
            map->count--;
            return;
        }
    }
}

struct alloc_block *
block_map_get(const struct block_map *map, uint64_t addr)
{
    struct alloc_block *b = map->buckets[block_map_bucket_of(map, addr)];
    while (b != NULL && b->addr != addr)
        b = b->hash_next;
    return b;
}

size_t
block_map_grow_count(const struct block_map *map)
{
    return map->count > 2 * map->bucket_count ? map->bucket_count * 2 : 0;
}

struct alloc_block **
block_map_rehash(struct block_map *map, struct alloc_block **fresh, size_t count)
{
    struct alloc_block **old = map->buckets;
    size_t old_count = map->bucket_count;
    map->buckets = fresh;
    map->bucket_count = count;
    map->shift = shift_for(count);
    for (size_t i = 0; i < old_count; i++) {
        struct alloc_block *b = old[i];
        while (b != NULL) {
            struct alloc_block *next = b->hash_next;
            size_t j = block_map_bucket_of(map, b->addr);
            b->hash_next = fresh[j];
            fresh[j] = b;
            b = next;
        }
    }
    return old;
}
