/* addr_map.h: an open-addressing hash map from a device address to a live block (size, stack),
 *   used by the command to replay a trace forwards and backwards.
 * Locking: none: one map belongs to one command thread.
 * Hot path: no (command line), but O(1) per trace entry so 10^6-entry histories stay fast. */
#ifndef CUPROF_CLI_ADDR_MAP_H
#define CUPROF_CLI_ADDR_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct addr_map_item {
    uint64_t addr; /* 0 marks an empty slot: address 0 is never a live block */
    uint64_t size;
    uint32_t stack;
};

struct addr_map {
    struct addr_map_item *slots;
    size_t cap; /* power of two */
    size_t count;
};

void addr_map_init(struct addr_map *map);
void addr_map_free(struct addr_map *map);
/* Inserts or replaces. Returns 0, or -1 when host memory runs out. */
__attribute__((warn_unused_result)) int addr_map_put(struct addr_map *map, uint64_t addr,
                                                     uint64_t size, uint32_t stack);
/* The item at addr, or NULL. */
struct addr_map_item *addr_map_get(const struct addr_map *map, uint64_t addr);
/* Removes addr; true when it was there (and *removed, if not NULL, gets a copy). */
bool addr_map_remove(struct addr_map *map, uint64_t addr, struct addr_map_item *removed);
/* Copies every item into a malloc'd array sorted by address (*out = NULL when empty).
 * Returns the count, or (size_t)-1 when host memory runs out. */
size_t addr_map_sorted(const struct addr_map *map, struct addr_map_item **out);

#endif
