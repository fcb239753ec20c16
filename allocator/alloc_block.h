/* alloc_block.h: the allocator's block and segment records (PyTorch's Block and its segment),
 *   shared by the pools, the pointer map and the snapshot copier.
 * Locking: every field is protected by the owning device's lock.
 * Hot path: the structs are; nothing here is a function. */
#ifndef CUPROF_ALLOC_BLOCK_H
#define CUPROF_ALLOC_BLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocator/avl.h"

struct alloc_block;

/* A device allocation: the chain of blocks from `head` tiles [addr, addr + size). An expandable
 * segment is a reserved virtual range instead: its blocks tile the whole reservation, and the
 * unmapped ones (no device memory behind them) are in their pool's `unmapped` set. */
struct alloc_segment {
    struct avl_node node; /* dev->segments, ordered by addr */
    uint64_t addr;
    size_t size;
    uint64_t stream;
    struct alloc_block *head;
    struct alloc_segment *next_spare;
    uint32_t stack_id; /* stack of the request that allocated the segment */
    bool is_small;
    uint8_t pool;    /* enum trace_pool */
    bool external;   /* allocator_track_external: never cached, never freed by us */
    bool expandable; /* expandable_segments: grows and shrinks by mapping pages */
    size_t page;     /* expandable: bytes per mapped page (2 MiB small pool, 20 MiB large) */
    uint64_t serial; /* expandable: creation order on its device (PyTorch's expandable_segments_) */
    uint64_t context; /* external: the tag of the context it belongs to (0: untagged) */
};

/* A stream use (PyTorch's stream_uses entry) or, once recorded, an outstanding event. */
struct alloc_aux {
    struct alloc_aux *next;
    uint64_t stream;
    void *event;
    struct alloc_block *block;
};

struct alloc_block {
    struct avl_node node;     /* pool->blocks while free, ordered by (stream, size, addr);
                                 pool->unmapped while unmapped, ordered by (stream, addr) */
    struct alloc_block *prev; /* address neighbours inside the segment */
    struct alloc_block *next;
    struct alloc_block *hash_next; /* dev->map chain (protected by the device lock) */
    struct alloc_segment *seg;
    uint64_t addr;
    size_t size;
    size_t requested_size;
    uint64_t stream;
    struct alloc_aux *stream_uses;
    uint64_t gc_count_base;
    uint64_t buffer_id;     /* CU_POINTER_ATTRIBUTE_BUFFER_ID of the allocation it serves now: 0
                               until the first query draws one (allocator_range_of); zeroed at
                               every handout */
    uint32_t stack_id;      /* malloc's stack */
    uint32_t free_stack_id; /* free's stack, for a free_completed that comes later */
    int event_count;
    int16_t device;
    uint16_t owner; /* allocator_malloc_owned's tag, carried by the block's trace events */
    bool allocated;
    bool is_small;
    bool in_pool;
    bool unmapped;       /* expandable segments: free address space with no memory behind it */
    bool stream_ordered; /* handed out for a stream-ordered request (cudaMallocAsync) */
};

#endif
