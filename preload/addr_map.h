/* addr_map.h: a small thread-safe hash map from a 64-bit key (device address, VMM handle) to two
 *   64-bit values; used for cuprof's side tables (owned segments, VMM handles).
 * Locking: one mutex per map, held only inside these calls (never across a CUDA call).
 * Hot path: no: used on cache misses, VMM calls and error paths. */
#ifndef CUPROF_ADDR_MAP_H
#define CUPROF_ADDR_MAP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct addr_map_slot {
    uint64_t key; /* 0 = empty, 1 = deleted (keys 0 and 1 cannot be stored) */
    uint64_t a;
    uint64_t b;
};

struct addr_map {
    pthread_mutex_t lock;
    struct addr_map_slot *slots; /* protected by lock */
    size_t cap;                  /* protected by lock; power of two */
    size_t used;                 /* protected by lock; live + deleted slots */
};

#define ADDR_MAP_INIT                                                                              \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0                                                      \
    }

/* Inserts or replaces. Returns false when host memory ran out (the map is unchanged). */
__attribute__((warn_unused_result)) bool addr_map_put(struct addr_map *map, uint64_t key,
                                                      uint64_t a, uint64_t b);
/* Looks up; fills a and b (either may be NULL) when found. */
bool addr_map_get(struct addr_map *map, uint64_t key, uint64_t *a, uint64_t *b);
/* True when an entry's range [key, key + b) (b taken as a size) overlaps [lo, lo + size); the
 * first such entry's key goes to *base when base is not NULL. A scan of the whole table: for
 * cache misses and error paths only. */
bool addr_map_overlaps(struct addr_map *map, uint64_t lo, uint64_t size, uint64_t *base);
/* Removes; true when the key was present. */
bool addr_map_remove(struct addr_map *map, uint64_t key, uint64_t *a, uint64_t *b);
/* Removes every entry whose `a` equals `value` (e.g. every segment of one device). */
void addr_map_remove_matching_a(struct addr_map *map, uint64_t value);
/* Fork: prepare takes the lock (so no thread is mid-update when fork copies the map), parent
 * releases it; the child re-creates it with addr_map_reset_after_fork. */
void addr_map_fork_prepare(struct addr_map *map);
void addr_map_fork_parent(struct addr_map *map);
/* After fork in the child: the lock may have been held by a thread that no longer exists. */
void addr_map_reset_after_fork(struct addr_map *map);

#endif
