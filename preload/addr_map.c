/* addr_map.c: open addressing with linear probing and tombstones (see addr_map.h). */
#include "preload/addr_map.h"

#include <sys/mman.h>

enum { EMPTY = 0, DELETED = 1 };

static size_t
hash(uint64_t key, size_t cap)
{
    /* Fibonacci hashing: device addresses share their low bits (alignment). */
    return (size_t)((key * UINT64_C(0x9E3779B97F4A7C15)) >> 17) & (cap - 1);
}

static struct addr_map_slot *
find_locked(struct addr_map *map, uint64_t key)
{
    if (map->cap == 0)
        return NULL;
    for (size_t i = hash(key, map->cap), n = 0; n < map->cap; i = (i + 1) & (map->cap - 1), n++) {
        if (map->slots[i].key == key)
            return &map->slots[i];
        if (map->slots[i].key == EMPTY)
            return NULL;
    }
    return NULL;
}

static bool
grow_locked(struct addr_map *map)
{
    size_t live = 0;
    for (size_t i = 0; i < map->cap; i++)
        live += map->slots[i].key > DELETED;
    size_t cap = map->cap ? map->cap : 64;
    while (live * 4 >= cap)
        cap *= 2;
    /* mmap, not malloc: the backend inserts here with the allocator's device lock held (a new
     * segment), where cuprof never calls malloc. Fresh anonymous pages are zero: all EMPTY. */
    void *mem = mmap(NULL, cap * sizeof(struct addr_map_slot), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return false;
    struct addr_map_slot *slots = mem;
    for (size_t i = 0; i < map->cap; i++) {
        if (map->slots[i].key <= DELETED)
            continue;
        size_t j = hash(map->slots[i].key, cap);
        while (slots[j].key != EMPTY)
            j = (j + 1) & (cap - 1);
        slots[j] = map->slots[i];
    }
    if (map->slots != NULL)
        munmap(map->slots, map->cap * sizeof(struct addr_map_slot));
    map->slots = slots;
    map->cap = cap;
    map->used = live;
    return true;
}

bool
addr_map_put(struct addr_map *map, uint64_t key, uint64_t a, uint64_t b)
{
    if (key <= DELETED)
        return false;
    bool ok = true;
    pthread_mutex_lock(&map->lock);
    struct addr_map_slot *slot = find_locked(map, key);
    if (slot == NULL) {
        /* Keep at most half the slots used (live + deleted) so probes stay short. */
        if ((map->used + 1) * 2 > map->cap && !grow_locked(map)) {
            ok = false;
        } else {
            size_t i = hash(key, map->cap);
            while (map->slots[i].key > DELETED)
                i = (i + 1) & (map->cap - 1);
            if (map->slots[i].key == EMPTY)
                map->used++;
            slot = &map->slots[i];
        }
    }
    if (slot != NULL) {
        slot->key = key;
        slot->a = a;
        slot->b = b;
    }
    pthread_mutex_unlock(&map->lock);
    return ok;
}

bool
addr_map_get(struct addr_map *map, uint64_t key, uint64_t *a, uint64_t *b)
{
    pthread_mutex_lock(&map->lock);
    struct addr_map_slot *slot = key > DELETED ? find_locked(map, key) : NULL;
    if (slot != NULL) {
        if (a != NULL)
            *a = slot->a;
        if (b != NULL)
            *b = slot->b;
    }
    pthread_mutex_unlock(&map->lock);
    return slot != NULL;
}

bool
addr_map_overlaps(struct addr_map *map, uint64_t lo, uint64_t size, uint64_t *base)
{
    uint64_t hi = lo + size < lo ? UINT64_MAX : lo + size;
    bool found = false;
    pthread_mutex_lock(&map->lock);
    for (size_t i = 0; i < map->cap && !found; i++) {
        const struct addr_map_slot *s = &map->slots[i];
        uint64_t end = s->key + s->b < s->key ? UINT64_MAX : s->key + s->b;
        if (s->key > DELETED && s->key < hi && end > lo) {
            found = true;
            if (base != NULL)
                *base = s->key;
        }
    }
    pthread_mutex_unlock(&map->lock);
    return found;
}

bool
addr_map_remove(struct addr_map *map, uint64_t key, uint64_t *a, uint64_t *b)
{
    pthread_mutex_lock(&map->lock);
    struct addr_map_slot *slot = key > DELETED ? find_locked(map, key) : NULL;
    if (slot != NULL) {
        if (a != NULL)
            *a = slot->a;
        if (b != NULL)
            *b = slot->b;
        slot->key = DELETED;
    }
    pthread_mutex_unlock(&map->lock);
    return slot != NULL;
}

void
addr_map_remove_matching_a(struct addr_map *map, uint64_t value)
{
    pthread_mutex_lock(&map->lock);
    for (size_t i = 0; i < map->cap; i++)
        if (map->slots[i].key > DELETED && map->slots[i].a == value)
            map->slots[i].key = DELETED;
    pthread_mutex_unlock(&map->lock);
}

void
addr_map_fork_prepare(struct addr_map *map)
{
    pthread_mutex_lock(&map->lock);
}

void
addr_map_fork_parent(struct addr_map *map)
{
    pthread_mutex_unlock(&map->lock);
}

void
addr_map_reset_after_fork(struct addr_map *map)
{
    pthread_mutex_init(&map->lock, NULL);
}
