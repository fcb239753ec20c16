/* sim_heap: address-ordered first-fit sub-allocator that carves one range into segments and
 * charges 2 MiB "physical" pages against a shared capacity counter.
 * Lock: the caller's (the owning device's dev->lock); not thread-safe itself. Hot path: no. */
#ifndef SIM_HEAP_H
#define SIM_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_PAGE ((size_t)2 << 20)

struct sim_heap_seg {
    uintptr_t start;
    size_t size; /* bytes the segment covers (rounded) */
    size_t req;  /* bytes the caller asked for (0 for free segments) */
    bool used;
    void *owner;                        /* context that owns a used segment */
    unsigned kind;                      /* caller-defined tag for used segments */
    void *pool;                         /* memory pool for stream-ordered allocations, else NULL */
    bool free_queued;                   /* a cuMemFreeAsync is pending on this segment */
    const void *graph;                  /* the graph that owns this allocation, else NULL */
    bool graph_live;                    /* a graph allocation the program holds now */
    bool unbacked;                      /* an address range with no page charged (yet) */
    bool graph_backed_now;              /* sim_mem_graph_back's mark, while it runs */
    uint64_t buffer_id;                 /* CU_POINTER_ATTRIBUTE_BUFFER_ID (set by the caller) */
    struct sim_heap_seg *prev, *next;   /* address order, all segments */
    struct sim_heap_seg *fprev, *fnext; /* free segments only */
    struct sim_heap_seg *hnext;         /* hash chain of used segments by start */
};

struct sim_heap {
    uintptr_t base;
    size_t size;
    size_t *used_pages; /* shared capacity counter (several heaps may share one device) */
    size_t cap_pages;
    uint32_t *page_refs; /* live segments touching each page */
    struct sim_heap_seg *first;
    struct sim_heap_seg *free_list;
    struct sim_heap_seg **buckets;
    size_t nbuckets;
    size_t live;
    /* Called with each page run whose last user went away (madvise / hole punching). */
    void (*release)(void *arg, uintptr_t start, size_t len);
    void *release_arg;
};

int sim_heap_init(struct sim_heap *h, uintptr_t base, size_t size, size_t *used_pages,
                  size_t cap_pages) __attribute__((warn_unused_result));
void sim_heap_fini(struct sim_heap *h);
/* 0, or CUDA_ERROR_OUT_OF_MEMORY when no range fits within the capacity. */
int sim_heap_alloc(struct sim_heap *h, size_t size, size_t align, size_t req,
                   struct sim_heap_seg **out) __attribute__((warn_unused_result));
/* An address range alone, its pages charged later (sim_heap_back): a graph allocation's address
 * is fixed when the graph is built, its memory is taken when the graph first runs. 0, or
 * CUDA_ERROR_OUT_OF_MEMORY. */
int sim_heap_alloc_unbacked(struct sim_heap *h, size_t size, size_t align, size_t req,
                            struct sim_heap_seg **out) __attribute__((warn_unused_result));
/* Charges an unbacked segment's pages (those no other segment holds yet); false, charging none,
 * when they do not fit in the capacity. True for a backed segment. */
bool sim_heap_back(struct sim_heap *h, struct sim_heap_seg *seg);
/* Undoes sim_heap_back (a graph whose other allocations did not fit runs with none). */
void sim_heap_unback(struct sim_heap *h, struct sim_heap_seg *seg);
struct sim_heap_seg *sim_heap_find(const struct sim_heap *h, uintptr_t start);
struct sim_heap_seg *sim_heap_find_containing(const struct sim_heap *h, uintptr_t addr);
void sim_heap_free(struct sim_heap *h, struct sim_heap_seg *seg);
/* Frees every used segment whose owner is `owner` (context destruction); returns the count. */
size_t sim_heap_free_owned(struct sim_heap *h, const void *owner);

#endif
