/* block_map.c: sharded chained hash of live blocks by address (PyTorch keeps 67 shards). */
#include "allocator/block_map.h"

#include <stdlib.h>

#include "allocator/alloc_device.h"
#include "allocator/cuprof_errors.h"

#define INITIAL_BUCKETS 64

static inline uint64_t
mix(uint64_t x)
{
    /* splitmix64 finalizer: device addresses differ mostly in their middle bits. */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static inline struct block_map_shard *
shard_of(struct block_map *map, uint64_t h)
{
    return &map->shards[h & (BLOCK_MAP_SHARDS - 1)];
}

static inline size_t
bucket_of(const struct block_map_shard *s, uint64_t h)
{
    return (size_t)(h >> 6) & (s->bucket_count - 1);
}

int
block_map_init(struct block_map *map)
{
    for (size_t i = 0; i < BLOCK_MAP_SHARDS; i++) {
        struct block_map_shard *s = &map->shards[i];
        s->buckets = calloc(INITIAL_BUCKETS, sizeof(*s->buckets));
        s->bucket_count = INITIAL_BUCKETS;
        s->count = 0;
        if (s->buckets == NULL || pthread_mutex_init(&s->lock, NULL) != 0) {
            free(s->buckets);
            s->buckets = NULL;
            for (size_t j = 0; j < i; j++) {
                free(map->shards[j].buckets);
                pthread_mutex_destroy(&map->shards[j].lock);
            }
            return -CUPROF_EHOSTMEM;
        }
    }
    return 0;
}

void
block_map_destroy(struct block_map *map)
{
    for (size_t i = 0; i < BLOCK_MAP_SHARDS; i++) {
        free(map->shards[i].buckets);
        map->shards[i].buckets = NULL;
        pthread_mutex_destroy(&map->shards[i].lock);
    }
}

bool
block_map_insert(struct block_map *map, struct alloc_block *block)
{
    uint64_t h = mix(block->addr);
    struct block_map_shard *s = shard_of(map, h);
    pthread_mutex_lock(&s->lock);
    size_t i = bucket_of(s, h);
    block->hash_next = s->buckets[i];
    s->buckets[i] = block;
    s->count++;
    bool crowded = s->count > 2 * s->bucket_count;
    pthread_mutex_unlock(&s->lock);
    return crowded;
}

struct alloc_block *
block_map_take(struct block_map *map, uint64_t addr, bool external)
{
    uint64_t h = mix(addr);
    struct block_map_shard *s = shard_of(map, h);
    struct alloc_block *found = NULL;
    pthread_mutex_lock(&s->lock);
    for (struct alloc_block **link = &s->buckets[bucket_of(s, h)]; *link != NULL;
         link = &(*link)->hash_next) {
        struct alloc_block *b = *link;
        if (b->addr == addr && b->seg->external == external) {
            *link = b->hash_next;
            b->hash_next = NULL;
            s->count--;
            found = b;
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}

void
block_map_remove(struct block_map *map, struct alloc_block *block)
{
    uint64_t h = mix(block->addr);
    struct block_map_shard *s = shard_of(map, h);
    pthread_mutex_lock(&s->lock);
    for (struct alloc_block **link = &s->buckets[bucket_of(s, h)]; *link != NULL;
         link = &(*link)->hash_next) {
        if (*link == block) {
            *link = block->hash_next;
            block->hash_next = NULL;
            s->count--;
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
}

bool
block_map_find(struct block_map *map, uint64_t addr, int *device, size_t *size, bool *external)
{
    uint64_t h = mix(addr);
    struct block_map_shard *s = shard_of(map, h);
    bool found = false;
    pthread_mutex_lock(&s->lock);
    for (struct alloc_block *b = s->buckets[bucket_of(s, h)]; b != NULL; b = b->hash_next) {
        if (b->addr == addr) {
            *device = b->device;
            *size = b->size;
            *external = b->seg->external;
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}

struct alloc_block *
block_map_get(struct block_map *map, uint64_t addr)
{
    uint64_t h = mix(addr);
    struct block_map_shard *s = shard_of(map, h);
    struct alloc_block *b;
    pthread_mutex_lock(&s->lock);
    for (b = s->buckets[bucket_of(s, h)]; b != NULL; b = b->hash_next) {
        if (b->addr == addr)
            break;
    }
    pthread_mutex_unlock(&s->lock);
    return b;
}

void
block_map_grow(struct block_map *map, uint64_t addr)
{
    struct block_map_shard *s = shard_of(map, mix(addr));
    pthread_mutex_lock(&s->lock);
    size_t old_count = s->bucket_count;
    bool crowded = s->count > 2 * old_count;
    pthread_mutex_unlock(&s->lock);
    if (!crowded)
        return;
    struct alloc_block **fresh = calloc(old_count * 2, sizeof(*fresh));
    if (fresh == NULL)
        return; /* longer chains, still correct */
    pthread_mutex_lock(&s->lock);
    struct alloc_block **old = NULL;
    if (s->bucket_count == old_count) {
        old = s->buckets;
        s->buckets = fresh;
        s->bucket_count = old_count * 2;
        for (size_t i = 0; i < old_count; i++) {
            struct alloc_block *b = old[i];
            while (b != NULL) {
                struct alloc_block *next = b->hash_next;
                size_t j = bucket_of(s, mix(b->addr));
                b->hash_next = fresh[j];
                fresh[j] = b;
                b = next;
            }
        }
        fresh = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    free(old);
    free(fresh);
}
