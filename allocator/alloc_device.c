/* alloc_device.c: per-device state and the helpers the malloc and free paths share: spares, the
 * free-block sets, the segment tree and address range, trace events, streams and the pointer
 * map's growth. The malloc path itself is in alloc_malloc.c, the free side in alloc_free.c. */
#include "allocator/alloc_device.h"

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/cuprof_errors.h"

#define SPARE_BATCH 64

int
alloc_device_init(struct alloc_device *dev, int index, const struct alloc_config *config,
                  const struct device_ops *ops, const struct trace_sink *sink)
{
    memset(dev, 0, sizeof(*dev));
    if (block_map_init(&dev->map) != 0)
        return -CUPROF_EHOSTMEM;
    alloc_lock_init(&dev->lock);
    dev->index = index;
    dev->config = config;
    dev->ops = ops;
    dev->sink = sink != NULL && sink->record != NULL ? sink : NULL;
    dev->traced = dev->sink != NULL ? TRACE_ACTIONS_ALL : 0;
    dev->expandable = alloc_device_serves_expandable(dev);
    dev->small.is_small = true;
    dev->large.is_small = false;
    atomic_init(&dev->range.lo, UINT64_MAX);
    atomic_init(&dev->range.hi, 0);
    /* PyTorch keeps max_split_size as int64: SIZE_MAX (unset) reads as -1. */
    memory_stats_init(&dev->stats,
                      config->max_split_size == SIZE_MAX ? -1 : (int64_t)config->max_split_size);
    return 0;
}

bool
alloc_device_serves_expandable(const struct alloc_device *dev)
{
    /* Without VMM calls in the backend, expandable_segments:True gets ordinary segments. */
    const struct device_ops *ops = dev->ops;
    return dev->config->expandable_segments && ops->vmm_reserve != NULL && ops->vmm_map != NULL &&
           ops->vmm_unmap != NULL && ops->vmm_release != NULL &&
           (ops->vmm_supported == NULL || ops->vmm_supported(ops->ctx, dev->index));
}

void
alloc_device_destroy(struct alloc_device *dev)
{
    struct alloc_chunk *c = dev->chunks;
    while (c != NULL) {
        struct alloc_chunk *next = c->next;
        free(c);
        c = next;
    }
    dev->chunks = NULL;
    block_map_destroy(&dev->map);
}

/* One malloc'd chunk: header, then `count` items of `item_size`. */
static void *
chunk_new(size_t count, size_t item_size, struct alloc_chunk **hdr)
{
    size_t head =
        (sizeof(struct alloc_chunk) + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1);
    char *mem = calloc(1, head + count * item_size);
    if (mem == NULL)
        return NULL;
    *hdr = (struct alloc_chunk *)(void *)mem;
    return mem + head;
}

int
alloc_device_refill_unlocking(struct alloc_device *dev, size_t aux)
{
    size_t nb = dev->spare_block_count < alloc_device_blocks_per_malloc(dev) ? SPARE_BATCH : 0;
    size_t ns = dev->spare_segment_count < 1 ? SPARE_BATCH / 4 : 0;
    size_t na = dev->spare_aux_count < aux ? aux + SPARE_BATCH : 0;
    struct alloc_chunk *hb = NULL, *hs = NULL, *ha = NULL;
    struct alloc_block *blocks = NULL;
    struct alloc_segment *segs = NULL;
    struct alloc_aux *auxs = NULL;
    int rc = 0;
    /* Host memory is only ever malloc'd here, with the device lock dropped. */
    alloc_lock_release(&dev->lock);
    if (nb)
        blocks = chunk_new(nb, sizeof(*blocks), &hb);
    if (ns)
        segs = chunk_new(ns, sizeof(*segs), &hs);
    if (na)
        auxs = chunk_new(na, sizeof(*auxs), &ha);
    alloc_lock_acquire(&dev->lock);
    if ((nb && blocks == NULL) || (ns && segs == NULL) || (na && auxs == NULL))
        rc = -CUPROF_EHOSTMEM;
    if (blocks != NULL) {
        hb->next = dev->chunks;
        dev->chunks = hb;
        for (size_t i = 0; i < nb; i++)
            alloc_device_put_block_locked(dev, &blocks[i]);
    }
    if (segs != NULL) {
        hs->next = dev->chunks;
        dev->chunks = hs;
        for (size_t i = 0; i < ns; i++) {
            segs[i].next_spare = dev->spare_segments;
            dev->spare_segments = &segs[i];
            dev->spare_segment_count++;
        }
    }
    if (auxs != NULL) {
        ha->next = dev->chunks;
        dev->chunks = ha;
        for (size_t i = 0; i < na; i++)
            alloc_device_put_aux_locked(dev, &auxs[i]);
    }
    return rc;
}

int
alloc_device_reserve_blocks_unlocking(struct alloc_device *dev, size_t blocks)
{
    while (dev->spare_block_count < blocks) {
        size_t n = blocks - dev->spare_block_count;
        struct alloc_chunk *hb = NULL;
        if (n < SPARE_BATCH)
            n = SPARE_BATCH;
        alloc_lock_release(&dev->lock);
        struct alloc_block *more = chunk_new(n, sizeof(*more), &hb);
        alloc_lock_acquire(&dev->lock);
        if (more == NULL)
            return -CUPROF_EHOSTMEM;
        hb->next = dev->chunks;
        dev->chunks = hb;
        for (size_t i = 0; i < n; i++)
            alloc_device_put_block_locked(dev, &more[i]);
    }
    return 0;
}

struct alloc_segment *
alloc_device_take_segment_locked(struct alloc_device *dev)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    struct alloc_segment *s = dev->spare_segments;
    dev->spare_segments = s->next_spare;
    dev->spare_segment_count--;
    memset(s, 0, sizeof(*s));
    return s;
}

void
alloc_device_drop_segment_locked(struct alloc_device *dev, struct alloc_segment *seg)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    avl_remove(&dev->segments, &seg->node);
    seg->head = NULL;
    seg->next_spare = dev->spare_segments;
    dev->spare_segments = seg;
    dev->spare_segment_count++;
}

struct alloc_aux *
alloc_device_take_aux_locked(struct alloc_device *dev)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    struct alloc_aux *a = dev->spare_aux;
    dev->spare_aux = a->next;
    dev->spare_aux_count--;
    memset(a, 0, sizeof(*a));
    return a;
}

void
alloc_device_put_aux_locked(struct alloc_device *dev, struct alloc_aux *a)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    a->block = NULL;
    a->event = NULL;
    a->next = dev->spare_aux;
    dev->spare_aux = a;
    dev->spare_aux_count++;
}

void
alloc_device_pool_link_locked(struct alloc_pool *pool, struct alloc_block *b)
{
    struct avl_node *parent = NULL, *n = pool->blocks.root;
    int left = 0;
    while (n != NULL) {
        parent = n;
        left = alloc_block_less(b->stream, b->size, b->addr, alloc_block_of(n));
        n = left ? n->left : n->right;
    }
    avl_link(&pool->blocks, &b->node, parent, left);
}

void
alloc_device_pool_move_locked(struct alloc_pool *pool, struct alloc_block *b)
{
    /* Called for tree members only; insert_into_blocks' stamp as on every re-insert. */
    avl_remove(&pool->blocks, &b->node);
    b->gc_count_base = pool->get_free_blocks_call_count;
    alloc_device_pool_link_locked(pool, b);
}

void
alloc_device_record_locked(struct alloc_device *dev, enum trace_action action, uint8_t pool,
                           uint64_t addr, uint64_t size, uint64_t stream, uint32_t stack_id,
                           uint64_t device_free, uint16_t owner)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    struct trace_event ev = {
        .action = (uint8_t)action,
        .pool = pool,
        .device = (int16_t)dev->index,
        .stack_id = stack_id,
        .addr = addr,
        .size = size,
        .stream = stream,
        .device_free = device_free,
        .owner = owner,
    };
    dev->sink->record(dev->sink->ctx, &ev);
}

void
alloc_device_note_stream_locked(struct alloc_device *dev, uint64_t stream)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    for (size_t i = 0; i < dev->stream_count; i++) {
        if (dev->streams[i] == stream)
            return;
    }
    if (dev->stream_count < ALLOC_DEVICE_MAX_STREAMS)
        dev->streams[dev->stream_count++] = stream;
    else
        dev->streams_overflow = true;
}

void
alloc_device_forget_stream_locked(struct alloc_device *dev, uint64_t stream)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    for (size_t i = 0; i < dev->stream_count; i++) {
        if (dev->streams[i] == stream) {
            dev->streams[i] = dev->streams[--dev->stream_count];
            return;
        }
    }
}

struct alloc_block *
alloc_device_new_segment_locked(struct alloc_device *dev, uint64_t addr, size_t size,
                                uint64_t stream, bool is_small, uint8_t pool)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    struct alloc_segment *seg = alloc_device_take_segment_locked(dev);
    struct alloc_block *b = alloc_device_take_block_locked(dev);
    seg->addr = addr;
    seg->size = size;
    seg->stream = stream;
    seg->head = b;
    seg->is_small = is_small;
    seg->pool = pool;
    b->seg = seg;
    b->addr = addr;
    b->size = size;
    b->stream = stream;
    b->is_small = is_small;
    alloc_device_link_segment_locked(dev, seg);
    return b;
}

void
alloc_device_link_segment_locked(struct alloc_device *dev, struct alloc_segment *seg)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    /* Only this device's lock holder writes the range; readers tolerate a stale (narrower)
     * value only for pointers they cannot have been handed yet. */
    if (seg->addr < atomic_load_explicit(&dev->range.lo, memory_order_relaxed))
        atomic_store_explicit(&dev->range.lo, seg->addr, memory_order_relaxed);
    if (seg->addr + seg->size > atomic_load_explicit(&dev->range.hi, memory_order_relaxed))
        atomic_store_explicit(&dev->range.hi, seg->addr + seg->size, memory_order_relaxed);
    struct avl_node *parent = NULL, *n = dev->segments.root;
    int left = 0;
    while (n != NULL) {
        parent = n;
        struct alloc_segment *s =
            (struct alloc_segment *)(void *)((char *)n - offsetof(struct alloc_segment, node));
        left = seg->addr < s->addr;
        n = left ? n->left : n->right;
    }
    avl_link(&dev->segments, &seg->node, parent, left);
}

/* Segments never overlap, so the last one starting below the end decides. A device that says
 * otherwise is not believed: the range never enters the tables. */
bool
alloc_device_new_range_plausible_locked(const struct alloc_device *dev, uint64_t addr, size_t size)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    if (addr == 0 || size == 0 || addr + size < addr)
        return false;
    const struct avl_node *n = dev->segments.root;
    while (n != NULL) {
        const struct alloc_segment *s =
            (const struct alloc_segment *)(const void *)((const char *)n -
                                                         offsetof(struct alloc_segment, node));
        if (s->addr < addr + size) {
            if (s->addr + s->size > addr)
                return false;
            n = n->right;
        } else {
            n = n->left;
        }
    }
    return true;
}

void
alloc_device_grow_map(struct alloc_device *dev, size_t count)
{
    struct alloc_block **fresh = calloc(count, sizeof(*fresh));
    struct alloc_block **old = NULL;
    if (fresh == NULL)
        return; /* longer chains, still correct */
    alloc_lock_acquire(&dev->lock);
    if (block_map_grow_count(&dev->map) == count) {
        old = block_map_rehash(&dev->map, fresh, count);
        fresh = NULL;
    }
    alloc_lock_release(&dev->lock);
    free(old);
    free(fresh);
}
