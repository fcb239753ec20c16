/* span_map.h: an open-addressing hash map from a start address to the span of device memory there
 *   (its size and the stack that made it): the live blocks or segments when the commands replay a
 *   trace forwards and backwards. Any non-zero 64-bit key works (call sites key it by stack + 1).
 * Locking: none: one map belongs to one command thread.
 * Hot path: no (command line), but O(1) per trace entry so 10^6-entry histories stay fast. */
#ifndef CUPROF_CLI_SPAN_MAP_H
#define CUPROF_CLI_SPAN_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct span_map_item {
    uint64_t addr; /* the key; 0 marks an empty slot: address 0 is never a live block */
    uint64_t size;
    uint32_t stack;
};

struct span_map {
    struct span_map_item *slots;
    size_t cap; /* power of two */
    size_t count;
};

void span_map_init(struct span_map *map);
void span_map_free(struct span_map *map);
/* Inserts or replaces. Returns 0, or -1 when host memory runs out. */
__attribute__((warn_unused_result)) int span_map_put(struct span_map *map, uint64_t addr,
                                                     uint64_t size, uint32_t stack);
/* The item at addr, or NULL. */
struct span_map_item *span_map_get(const struct span_map *map, uint64_t addr);
/* Removes addr; true when it was there (and *removed, if not NULL, gets a copy). */
bool span_map_remove(struct span_map *map, uint64_t addr, struct span_map_item *removed);
/* Copies every item into a malloc'd array sorted by address (*out = NULL when empty).
 * Returns the count, or (size_t)-1 when host memory runs out. */
size_t span_map_sorted(const struct span_map *map, struct span_map_item **out);

#endif
