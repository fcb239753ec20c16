/* span_map.c: linear probing with backward-shift deletion (no tombstones). */
#include "cli/span_map.h"

#include <stdlib.h>
#include <string.h>

static size_t
slot_of(uint64_t addr, size_t cap)
{
    /* Fibonacci hashing: device addresses share their low bits (512-byte alignment). */
    return (size_t)((addr * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

void
span_map_init(struct span_map *map)
{
    memset(map, 0, sizeof(*map));
}

void
span_map_free(struct span_map *map)
{
    free(map->slots);
    memset(map, 0, sizeof(*map));
}

static int
grow(struct span_map *map)
{
    size_t cap = map->cap ? map->cap * 2 : 64;
    struct span_map_item *slots = calloc(cap, sizeof(*slots));
    if (slots == NULL)
        return -1;
    for (size_t i = 0; i < map->cap; i++) {
        if (map->slots[i].addr == 0)
            continue;
        size_t j = slot_of(map->slots[i].addr, cap);
        while (slots[j].addr != 0)
            j = (j + 1) & (cap - 1);
        slots[j] = map->slots[i];
    }
    free(map->slots);
    map->slots = slots;
    map->cap = cap;
    return 0;
}

int
span_map_put(struct span_map *map, uint64_t addr, uint64_t size, uint32_t stack)
{
    if (addr == 0)
        return 0;
    if ((map->count + 1) * 4 > map->cap * 3 && grow(map) != 0)
        return -1;
    size_t i = slot_of(addr, map->cap);
    while (map->slots[i].addr != 0 && map->slots[i].addr != addr)
        i = (i + 1) & (map->cap - 1);
    if (map->slots[i].addr == 0)
        map->count++;
    map->slots[i].addr = addr;
    map->slots[i].size = size;
    map->slots[i].stack = stack;
    return 0;
}

struct span_map_item *
span_map_get(const struct span_map *map, uint64_t addr)
{
    if (map->cap == 0 || addr == 0)
        return NULL;
    size_t i = slot_of(addr, map->cap);
    while (map->slots[i].addr != 0) {
        if (map->slots[i].addr == addr)
            return &map->slots[i];
        i = (i + 1) & (map->cap - 1);
    }
    return NULL;
}

bool
span_map_remove(struct span_map *map, uint64_t addr, struct span_map_item *removed)
{
    struct span_map_item *item = span_map_get(map, addr);
    if (item == NULL)
        return false;
    if (removed != NULL)
        *removed = *item;
    size_t mask = map->cap - 1;
    size_t hole = (size_t)(item - map->slots);
    size_t j = hole;
    /* Shift later members of the probe run back so lookups never stop at the hole. */
    for (;;) {
        j = (j + 1) & mask;
        if (map->slots[j].addr == 0)
            break;
        size_t home = slot_of(map->slots[j].addr, map->cap);
        bool movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
        if (movable) {
            map->slots[hole] = map->slots[j];
            hole = j;
        }
    }
    map->slots[hole].addr = 0;
    map->count--;
    return true;
}

static int
cmp_addr(const void *a, const void *b)
{
    uint64_t x = ((const struct span_map_item *)a)->addr;
    uint64_t y = ((const struct span_map_item *)b)->addr;
    return (x > y) - (x < y);
}

size_t
span_map_sorted(const struct span_map *map, struct span_map_item **out)
{
    *out = NULL;
    if (map->count == 0)
        return 0;
    struct span_map_item *items = malloc(map->count * sizeof(*items));
    if (items == NULL)
        return (size_t)-1;
    size_t n = 0;
    for (size_t i = 0; i < map->cap; i++)
        if (map->slots[i].addr != 0)
            items[n++] = map->slots[i];
    qsort(items, n, sizeof(*items), cmp_addr);
    *out = items;
    return n;
}
