/* program_pools.c: NVTX heaps and regions per device, their trace events, the block-free sink and
 * the dump's copy. */
#include "snapshot/program_pools.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/cuprof_errors.h"

struct pools_device {
    struct avl_tree heaps;     /* protected by the device's allocator lock */
    struct avl_tree regions;   /* protected by the device's allocator lock: all heaps' */
    struct pool_node *retired; /* protected by the device's allocator lock */
};

struct program_pools {
    int device_count;
    struct trace_sink next;
    atomic_bool active;
    struct pools_device devices[];
};

#define NODE(n) ((struct pool_node *)(void *)(n)) /* node is the first member */

struct program_pools *
program_pools_create(int device_count, struct trace_sink next)
{
    if (device_count < 0)
        return NULL;
    /* Whole cache lines of its own: the allocator reads it on every event, and a line shared with
     * memory another thread writes (an NVTX thread's, say) would slow every event down. */
    size_t size = sizeof(struct program_pools) + (size_t)device_count * sizeof(struct pools_device);
    size = (size + 63) / 64 * 64;
    struct program_pools *pp = aligned_alloc(64, size);
    if (pp == NULL)
        return NULL;
    memset(pp, 0, size);
    pp->device_count = device_count;
    pp->next = next;
    atomic_init(&pp->active, false);
    return pp;
}

static void
free_tree(struct avl_tree *t)
{
    struct avl_node *n;
    while ((n = avl_first(t)) != NULL) {
        avl_remove(t, n);
        free(NODE(n));
    }
}

void
program_pools_destroy(struct program_pools *pp)
{
    if (pp == NULL)
        return;
    for (int d = 0; d < pp->device_count; d++) {
        free_tree(&pp->devices[d].heaps);
        free_tree(&pp->devices[d].regions);
        program_pools_free_retired(pp->devices[d].retired);
    }
    free(pp);
}

bool
program_pools_active(const struct program_pools *pp)
{
    return pp != NULL && atomic_load_explicit(&pp->active, memory_order_relaxed);
}

static struct pools_device *
device_at(struct program_pools *pp, int device)
{
    return pp != NULL && device >= 0 && device < pp->device_count ? &pp->devices[device] : NULL;
}

/* ---- The trees: the node at or below addr, and inserting at addr. */

static struct pool_node *
floor_node(const struct avl_tree *t, uint64_t addr)
{
    struct avl_node *n = t->root, *best = NULL;
    while (n != NULL) {
        if (NODE(n)->addr <= addr) {
            best = n;
            n = n->right;
        } else {
            n = n->left;
        }
    }
    return best != NULL ? NODE(best) : NULL;
}

static void
insert(struct avl_tree *t, struct pool_node *node)
{
    struct avl_node *parent = NULL, **at = &t->root;
    int left = 0;
    while (*at != NULL) {
        parent = *at;
        left = node->addr < NODE(parent)->addr;
        at = left ? &parent->left : &parent->right;
    }
    avl_link(t, &node->node, parent, left);
}

static void
retire(struct pools_device *dev, struct avl_tree *t, struct pool_node *node)
{
    avl_remove(t, &node->node);
    node->retired = dev->retired;
    dev->retired = node;
}

/* The node containing addr in t, or NULL. */
static struct pool_node *
containing(const struct avl_tree *t, uint64_t addr)
{
    struct pool_node *n = floor_node(t, addr);
    return n != NULL && addr - n->addr < n->size ? n : NULL;
}

/* ---- Events: every one NVTX makes is the program's own allocator's (TRACE_POOL_NVTX). */

static void
emit(struct program_pools *pp, int device, uint8_t action, uint64_t addr, uint64_t size,
     const struct pool_node *heap, uint32_t stack_id)
{
    struct trace_event ev = {.action = action,
                             .pool = TRACE_POOL_NVTX,
                             .device = (int16_t)device,
                             .stack_id = stack_id,
                             .addr = addr,
                             .size = size,
                             .stream = heap->stream,
                             .owner = heap->owner};
    pp->next.record(pp->next.ctx, &ev);
}

static void
emit_free(struct program_pools *pp, int device, uint64_t addr, uint64_t size,
          const struct pool_node *heap, uint32_t stack_id)
{
    emit(pp, device, TRACE_FREE_REQUESTED, addr, size, heap, stack_id);
    emit(pp, device, TRACE_FREE_COMPLETED, addr, size, heap, stack_id);
}

/* Frees every region of `heap` (in address order). */
static void
free_regions(struct program_pools *pp, int device, const struct pool_node *heap, uint32_t stack_id)
{
    struct pools_device *dev = &pp->devices[device];
    struct pool_node *r = floor_node(&dev->regions, heap->addr);
    if (r == NULL || r->addr < heap->addr) {
        struct avl_node *n = r != NULL ? avl_next(&r->node) : avl_first(&dev->regions);
        r = n != NULL ? NODE(n) : NULL;
    }
    while (r != NULL && r->addr - heap->addr < heap->size) {
        struct avl_node *next = avl_next(&r->node);
        emit_free(pp, device, r->addr, r->size, heap, stack_id ? stack_id : r->stack_id);
        retire(dev, &dev->regions, r);
        r = next != NULL ? NODE(next) : NULL;
    }
}

/* ---- NVTX's operations. */

int
program_pools_heap_add_locked(struct program_pools *pp, int device, struct pool_node *heap,
                              uint32_t stack_id)
{
    struct pools_device *dev = device_at(pp, device);
    if (dev == NULL || heap->size == 0 || heap->addr + heap->size < heap->addr)
        return -CUPROF_EINVAL;
    struct pool_node *below = floor_node(&dev->heaps, heap->addr + heap->size - 1);
    if (below != NULL && below->addr + below->size > heap->addr)
        return -CUPROF_EINVAL; /* overlaps a heap */
    heap->name_id = 0;
    insert(&dev->heaps, heap);
    atomic_store_explicit(&pp->active, true, memory_order_relaxed);
    /* The block's allocation becomes the pool: only its regions are the program's blocks now. */
    emit_free(pp, device, heap->addr, heap->requested, heap, stack_id);
    return 0;
}

static int
heap_clear(struct program_pools *pp, int device, uint64_t addr, uint32_t stack_id, bool remove)
{
    struct pools_device *dev = device_at(pp, device);
    struct pool_node *heap = dev != NULL ? floor_node(&dev->heaps, addr) : NULL;
    if (heap == NULL || heap->addr != addr)
        return -CUPROF_EINVAL;
    free_regions(pp, device, heap, stack_id);
    if (remove) {
        /* The block is the program's allocation again, made where it was. */
        emit(pp, device, TRACE_ALLOC, heap->addr, heap->requested, heap, heap->stack_id);
        retire(dev, &dev->heaps, heap);
    }
    return 0;
}

int
program_pools_heap_remove_locked(struct program_pools *pp, int device, uint64_t addr,
                                 uint32_t stack_id)
{
    return heap_clear(pp, device, addr, stack_id, true);
}

int
program_pools_heap_reset_locked(struct program_pools *pp, int device, uint64_t addr,
                                uint32_t stack_id)
{
    struct pools_device *dev = device_at(pp, device);
    if (addr != 0 || dev == NULL)
        return heap_clear(pp, device, addr, stack_id, false);
    for (struct avl_node *h = avl_first(&dev->heaps); h != NULL; h = avl_next(h))
        (void)heap_clear(pp, device, NODE(h)->addr, stack_id, false);
    return 0;
}

int
program_pools_region_add_locked(struct program_pools *pp, int device, uint64_t heap_addr,
                                struct pool_node *region)
{
    struct pools_device *dev = device_at(pp, device);
    struct pool_node *heap = dev != NULL ? floor_node(&dev->heaps, heap_addr) : NULL;
    uint64_t end = region->addr + region->size;
    if (heap == NULL || heap->addr != heap_addr || region->size == 0 || end < region->addr ||
        region->addr < heap->addr || end > heap->addr + heap->size)
        return -CUPROF_EINVAL;
    struct pool_node *below = floor_node(&dev->regions, end - 1);
    if (below != NULL && below->addr + below->size > region->addr)
        return -CUPROF_EINVAL; /* overlaps a region */
    region->name_id = 0;
    insert(&dev->regions, region);
    emit(pp, device, TRACE_ALLOC, region->addr, region->size, heap, region->stack_id);
    return 0;
}

/* The region starting exactly at addr and its heap, or NULL. */
static struct pool_node *
region_at(struct pools_device *dev, uint64_t addr, struct pool_node **heap)
{
    struct pool_node *r = dev != NULL ? floor_node(&dev->regions, addr) : NULL;
    if (r == NULL || r->addr != addr)
        return NULL;
    *heap = containing(&dev->heaps, addr);
    return *heap != NULL ? r : NULL;
}

int
program_pools_region_resize_locked(struct program_pools *pp, int device, uint64_t addr,
                                   uint64_t size, uint32_t stack_id)
{
    struct pools_device *dev = device_at(pp, device);
    struct pool_node *heap = NULL, *r = region_at(dev, addr, &heap);
    if (r == NULL || size == 0 || addr + size < addr || addr + size > heap->addr + heap->size)
        return -CUPROF_EINVAL;
    struct avl_node *next = avl_next(&r->node);
    if (next != NULL && NODE(next)->addr < addr + size)
        return -CUPROF_EINVAL; /* would run into the next region */
    emit_free(pp, device, addr, r->size, heap, stack_id);
    r->size = size;
    emit(pp, device, TRACE_ALLOC, addr, size, heap, r->stack_id);
    if (r->name_id != 0)
        emit(pp, device, TRACE_ANNOTATE, addr, size, heap, r->name_id);
    return 0;
}

int
program_pools_region_remove_locked(struct program_pools *pp, int device, uint64_t addr,
                                   uint32_t stack_id)
{
    struct pools_device *dev = device_at(pp, device);
    struct pool_node *heap = NULL, *r = region_at(dev, addr, &heap);
    if (r == NULL)
        return -CUPROF_EINVAL;
    emit_free(pp, device, addr, r->size, heap, stack_id ? stack_id : r->stack_id);
    retire(dev, &dev->regions, r);
    return 0;
}

int
program_pools_region_name_locked(struct program_pools *pp, int device, uint64_t addr,
                                 uint32_t name_id)
{
    struct pools_device *dev = device_at(pp, device);
    struct pool_node *heap = NULL, *r = region_at(dev, addr, &heap);
    if (r == NULL || name_id == 0)
        return -CUPROF_EINVAL;
    r->name_id = name_id;
    /* PyTorch's newest "annotate" action: user_metadata attached to a live allocation. */
    emit(pp, device, TRACE_ANNOTATE, addr, r->size, heap, name_id);
    return 0;
}

uint64_t
program_pools_heap_of_locked(struct program_pools *pp, int device, uint64_t addr)
{
    struct pools_device *dev = device_at(pp, device);
    struct pool_node *heap = dev != NULL ? containing(&dev->heaps, addr) : NULL;
    return heap != NULL ? heap->addr : 0;
}

struct pool_node *
program_pools_take_retired_locked(struct program_pools *pp, int device)
{
    struct pools_device *dev = device_at(pp, device);
    if (dev == NULL)
        return NULL;
    struct pool_node *list = dev->retired;
    dev->retired = NULL;
    return list;
}

void
program_pools_free_retired(struct pool_node *list)
{
    while (list != NULL) {
        struct pool_node *next = list->retired;
        free(list);
        list = next;
    }
}

/* ---- The sink. */

static void
pools_record(void *ctx, const struct trace_event *event)
{
    struct program_pools *pp = ctx;
    /* The program frees a block that is still a registered heap: its regions go first. */
    if (__builtin_expect(event->action == TRACE_FREE_REQUESTED, 0) &&
        event->pool != TRACE_POOL_NVTX && program_pools_active(pp)) {
        struct pools_device *dev = device_at(pp, event->device);
        struct pool_node *heap = dev != NULL ? floor_node(&dev->heaps, event->addr) : NULL;
        if (heap != NULL && heap->addr == event->addr)
            (void)heap_clear(pp, event->device, event->addr, event->stack_id, true);
    }
    pp->next.record(pp->next.ctx, event);
}

struct trace_sink
program_pools_sink(struct program_pools *pp)
{
    return (struct trace_sink){.ctx = pp, .record = pools_record};
}

/* ---- The dump's copy. */

void
program_pools_count_locked(struct program_pools *pp, int device, size_t *heaps, size_t *regions)
{
    struct pools_device *dev = device_at(pp, device);
    *heaps = dev != NULL ? dev->heaps.count : 0;
    *regions = dev != NULL ? dev->regions.count : 0;
}

bool
program_pools_copy_locked(struct program_pools *pp, int device, struct pool_heap_info *heaps,
                          size_t heap_cap, size_t *heap_count, struct pool_region_info *regions,
                          size_t region_cap, size_t *region_count)
{
    struct pools_device *dev = device_at(pp, device);
    *heap_count = *region_count = 0;
    if (dev == NULL)
        return true;
    if (dev->heaps.count > heap_cap || dev->regions.count > region_cap)
        return false;
    struct avl_node *r = avl_first(&dev->regions);
    for (struct avl_node *h = avl_first(&dev->heaps); h != NULL; h = avl_next(h)) {
        const struct pool_node *heap = NODE(h);
        struct pool_heap_info *out = &heaps[(*heap_count)++];
        *out = (struct pool_heap_info){heap->addr, heap->size, *region_count, 0};
        while (r != NULL && NODE(r)->addr < heap->addr)
            r = avl_next(r); /* (every region lies in a heap: none is skipped) */
        for (; r != NULL && NODE(r)->addr - heap->addr < heap->size; r = avl_next(r)) {
            const struct pool_node *n = NODE(r);
            regions[(*region_count)++] =
                (struct pool_region_info){n->addr, n->size, n->stack_id, n->name_id};
            out->region_count++;
        }
    }
    return true;
}
