/* alloc_expand.c: PyTorch's ExpandableSegment and the allocator code around it
 * (find_expandable_block, map_block, try_allocate_expandable_block, unmap_block,
 * release_expandable_segment, get_free_block's expandable rule), over device_ops' vmm_* calls. */
#include "allocator/alloc_expand.h"

#include <string.h>

#include "allocator/cuprof_errors.h"

/* ---- The unmapped set of a pool, ordered by (stream, addr): PyTorch's BlockComparatorAddress. */

static bool
addr_less(uint64_t stream, uint64_t addr, const struct alloc_block *b)
{
    if (stream != b->stream)
        return stream < b->stream;
    return addr < b->addr;
}

static void
unmapped_insert_locked(struct alloc_pool *pool, struct alloc_block *b)
{
    struct avl_node *parent = NULL, *n = pool->unmapped.root;
    int left = 0;
    while (n != NULL) {
        parent = n;
        left = addr_less(b->stream, b->addr, alloc_block_of(n));
        n = left ? n->left : n->right;
    }
    b->unmapped = true;
    b->in_pool = false;
    avl_link(&pool->unmapped, &b->node, parent, left);
}

static void
unmapped_erase_locked(struct alloc_pool *pool, struct alloc_block *b)
{
    avl_remove(&pool->unmapped, &b->node);
    b->unmapped = false;
}

/* First unmapped block >= (stream, addr 0), or NULL. */
static struct alloc_block *
unmapped_lower_bound_locked(struct alloc_pool *pool, uint64_t stream)
{
    struct avl_node *n = pool->unmapped.root, *best = NULL;
    while (n != NULL) {
        if (addr_less(stream, 0, alloc_block_of(n))) {
            best = n;
            n = n->left;
        } else {
            n = n->right;
        }
    }
    return alloc_block_or_null(best);
}

/* ---- Block surgery shared by map and unmap. */

/* dst absorbs its neighbour src (prev or next), which must be in the same state; src's struct
 * goes back to the spares once the caller took it out of its set. */
static void
absorb_locked(struct alloc_device *dev, struct alloc_block *dst, struct alloc_block *src)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    if (dst->prev == src) {
        dst->addr = src->addr;
        dst->prev = src->prev;
        if (dst->prev != NULL)
            dst->prev->next = dst;
        else
            dst->seg->head = dst;
    } else {
        dst->next = src->next;
        if (dst->next != NULL)
            dst->next->prev = dst;
    }
    dst->size += src->size;
    alloc_device_put_block_locked(dev, src);
}

/* PyTorch's try_merge_blocks for a block that just changed state: merges a free mapped src
 * (in the pool) into a mapped dst, or an unmapped src into an unmapped dst. */
static void
merge_same_state_locked(struct alloc_device *dev, struct alloc_pool *pool, struct alloc_block *dst,
                        struct alloc_block *src)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    if (src == NULL)
        return;
    if (dst->unmapped && src->unmapped) {
        unmapped_erase_locked(pool, src);
        absorb_locked(dev, dst, src);
    } else if (!dst->unmapped && src->in_pool) {
        alloc_device_pool_erase_locked(pool, src);
        absorb_locked(dev, dst, src);
    }
}

/* A new block of `size` at `addr` in b's segment, linked right after `after` (or at the head). */
static struct alloc_block *
new_piece_locked(struct alloc_device *dev, struct alloc_block *like, struct alloc_block *after,
                 uint64_t addr, size_t size)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    struct alloc_block *p = alloc_device_take_block_locked(dev);
    p->seg = like->seg;
    p->addr = addr;
    p->size = size;
    p->stream = like->stream;
    p->is_small = like->is_small;
    p->prev = after;
    p->next = after != NULL ? after->next : like->seg->head;
    if (p->next != NULL)
        p->next->prev = p;
    if (after != NULL)
        after->next = p;
    else
        like->seg->head = p;
    return p;
}

/* PyTorch's `allocatable`: a block a growth may cover (free, no events, no stream uses). */
static bool
allocatable(const struct alloc_block *b)
{
    return b != NULL && !b->allocated && b->event_count == 0 && b->stream_uses == NULL;
}

/* ---- get_free_block's rule. */

static size_t
expandable_size(const struct alloc_block *b)
{
    return b->size + (b->next != NULL && b->next->unmapped ? b->next->size : 0);
}

struct alloc_block *
alloc_expand_pick_locked(struct alloc_device *dev, struct alloc_pool *pool, uint64_t stream,
                         size_t size, struct alloc_block *b)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    /* The walk goes through the ordered set, so `recent` joins the tree first. */
    alloc_device_pool_flush_locked(pool);
    b = alloc_device_pool_lower_bound_locked(pool, stream, size);
    if (dev->config->expandable_segments) {
        /* PyTorch: best fit counts the address space an expandable block can still grow into. */
        struct alloc_block *n;
        while (b->seg->expandable && (n = alloc_block_or_null(avl_next(&b->node))) != NULL &&
               n->stream == stream && expandable_size(n) < expandable_size(b))
            b = n;
        return b;
    }
    /* PyTorch: turned off after some were made, expandable blocks serve no new request. */
    do
        b = alloc_block_or_null(avl_next(&b->node));
    while (b != NULL && b->seg->expandable && b->stream == stream);
    return b != NULL && b->stream == stream ? b : NULL;
}

/* ---- Growth. */

/* A new reservation for (stream, pool) as one unmapped block (find_expandable_block's end). */
static int
new_segment_locked(struct alloc_device *dev, struct alloc_pool *pool, uint64_t stream,
                   struct alloc_block **out)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    const struct device_ops *ops = dev->ops;
    size_t page = alloc_expand_page_size(pool->is_small);
    size_t free_b = 0, total_b = 0, gran = 0;
    int rc = ops->mem_info(ops->ctx, dev->index, &free_b, &total_b);
    if (rc != 0)
        return rc;
    if (total_b == 0)
        return -CUPROF_EDRIVER;
    /* PyTorch assumes its pages are whole multiples of the device's granularity; say so. */
    if (ops->vmm_granularity != NULL) {
        if ((rc = ops->vmm_granularity(ops->ctx, dev->index, &gran)) != 0)
            return rc;
        if (gran == 0 || page % gran != 0)
            return -CUPROF_EDRIVER;
    }
    size_t size = alloc_expand_reservation_size(total_b, page);
    uint64_t addr = 0;
    if ((rc = ops->vmm_reserve(ops->ctx, dev->index, size, &addr)) != 0)
        return rc;
    if (!alloc_device_new_range_plausible_locked(dev, addr, size))
        return -CUPROF_EDRIVER; /* not believed, so not ours to give back either */
    struct alloc_block *b = alloc_device_new_segment_locked(dev, addr, size, stream, pool->is_small,
                                                            TRACE_POOL_DEFAULT);
    b->seg->expandable = true;
    b->seg->page = page;
    b->seg->serial = ++dev->expandable_made;
    unmapped_insert_locked(pool, b);
    dev->expandable_count++;
    *out = b;
    return 0;
}

/* PyTorch's find_expandable_block: the lowest-addressed unmapped block of the stream (or the
 * free block just before it) from which free and unmapped blocks reach `size` bytes; else a new
 * reservation. */
static int
find_locked(struct alloc_device *dev, struct alloc_pool *pool, uint64_t stream, size_t size,
            struct alloc_block **out)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    for (struct alloc_block *u = unmapped_lower_bound_locked(pool, stream);
         u != NULL && u->stream == stream; u = alloc_block_or_null(avl_next(&u->node))) {
        struct alloc_block *c = allocatable(u->prev) ? u->prev : u;
        size_t bytes = 0;
        for (struct alloc_block *b = c; bytes < size && allocatable(b); b = b->next)
            bytes += b->size;
        if (bytes >= size) {
            *out = c;
            return 0;
        }
    }
    return new_segment_locked(dev, pool, stream, out);
}

/* PyTorch's mapAndSetAccess after cuMemMap: the owning device got access (vmm_map), now every
 * peer in the order they were added, one cuMemSetAccess each over the whole range mapped. */
static int
grant_peers_locked(struct alloc_device *dev, uint64_t addr, size_t size)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    const struct device_ops *ops = dev->ops;
    for (size_t i = 0; ops->vmm_set_access != NULL && i < dev->peer_count; i++) {
        int rc = ops->vmm_set_access(ops->ctx, dev->index, addr, size, dev->peers[i]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* PyTorch's map_block: maps the pages under the first `size` bytes of the unmapped block
 * to_map, leaves the rest unmapped behind it, merges with free neighbours and caches the result
 * (to_map is that free block afterwards). */
static int
map_block_locked(struct alloc_device *dev, struct alloc_pool *pool, struct alloc_block *to_map,
                 size_t size, uint32_t stack_id)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    struct alloc_segment *seg = to_map->seg;
    size_t page = seg->page;
    uint64_t at = to_map->addr; /* unmapped blocks start on a page */
    size_t count = (size + page - 1) / page;
    int rc = dev->ops->vmm_map(dev->ops->ctx, dev->index, at, page, count);
    if (rc != 0)
        return rc; /* all or nothing: the range is as it was */
    if ((rc = grant_peers_locked(dev, at, count * page)) != 0) {
        /* PyTorch raises with the pages mapped; cuprof keeps the call all or nothing. */
        (void)dev->ops->vmm_unmap(dev->ops->ctx, dev->index, at, page, count);
        return rc;
    }
    size_t mapped = count * page;
    unmapped_erase_locked(pool, to_map);
    if (mapped < to_map->size) {
        struct alloc_block *rest =
            new_piece_locked(dev, to_map, to_map, at + mapped, to_map->size - mapped);
        unmapped_insert_locked(pool, rest);
        to_map->size = mapped;
    }
    merge_same_state_locked(dev, pool, to_map, to_map->prev);
    merge_same_state_locked(dev, pool, to_map, to_map->next);
    alloc_device_pool_insert_locked(pool, to_map);
    /* PyTorch: a mapping counts as a device allocation and as reserved memory, not a segment. */
    dev->total_allocated += mapped;
    memory_stats_add_pool(dev->stats.reserved_bytes, memory_stats_pool(seg->is_small),
                          (int64_t)mapped);
    dev->stats.num_device_alloc++;
    alloc_device_trace_locked(dev, TRACE_SEGMENT_MAP, TRACE_POOL_DEFAULT, at, mapped, seg->stream,
                              stack_id, 0, dev->request_owner);
    if (seg->stack_id == 0 && to_map->prev == NULL)
        seg->stack_id = stack_id;
    return 0;
}

int
alloc_expand_allocate_locked(struct alloc_device *dev, struct alloc_pool *pool, uint64_t stream,
                             size_t size, uint32_t stack_id, struct alloc_block **out)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    struct alloc_block *c = NULL;
    int rc = find_locked(dev, pool, stream, size, &c);
    if (rc != 0)
        return rc;
    /* c starts a run of free and unmapped blocks: unmapped [-> free ...] or free -> unmapped. */
    if (c->unmapped) {
        size_t want = c->size < size ? c->size : size;
        if ((rc = map_block_locked(dev, pool, c, want, stack_id)) != 0)
            return rc;
    }
    while (c->size < size) {
        /* c is free and mapped, an unmapped block follows: mapping it merges c into it. */
        struct alloc_block *n = c->next;
        size_t left = size - c->size;
        if ((rc = map_block_locked(dev, pool, n, left < n->size ? left : n->size, stack_id)) != 0)
            return rc;
        c = n;
    }
    alloc_device_pool_erase_locked(pool, c);
    *out = c;
    return 0;
}

int
alloc_expand_map_at_locked(struct alloc_device *dev, struct alloc_pool *pool, uint64_t stream,
                           uint64_t addr, size_t size)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    struct alloc_block *u = unmapped_lower_bound_locked(pool, stream);
    while (u != NULL && u->stream == stream && !(u->addr <= addr && addr - u->addr < u->size))
        u = alloc_block_or_null(avl_next(&u->node));
    if (u == NULL || u->stream != stream) {
        int rc = new_segment_locked(dev, pool, stream, &u);
        if (rc != 0)
            return rc;
    }
    struct alloc_segment *seg = u->seg;
    if (addr < u->addr || addr - u->addr >= u->size || size == 0 || size > u->size ||
        addr - u->addr > u->size - size || (addr - seg->addr) % seg->page != 0 ||
        size % seg->page != 0)
        return -CUPROF_EINVAL;
    if (addr > u->addr) {
        /* The pages before the range stay unmapped, as their own block. */
        unmapped_erase_locked(pool, u);
        struct alloc_block *before = new_piece_locked(dev, u, u->prev, u->addr, addr - u->addr);
        u->size -= before->size;
        u->addr = addr;
        unmapped_insert_locked(pool, before);
        unmapped_insert_locked(pool, u);
    }
    return map_block_locked(dev, pool, u, size, 0);
}

/* ---- Peer devices. */

int
alloc_expand_add_peer_locked(struct alloc_device *dev, int peer)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    for (size_t i = 0; i < dev->peer_count; i++)
        if (dev->peers[i] == peer)
            return 0; /* PyTorch's addPeerAccess: already there, nothing to do */
    dev->peers[dev->peer_count++] = (int16_t)peer;
    const struct device_ops *ops = dev->ops;
    if (ops->vmm_set_access == NULL || dev->expandable_count == 0)
        return 0;
    /* Each live segment in the order they were made (a handful: one per stream and pool), and
     * in it each run of mapped pages, lowest first (ExpandableSegment::addPeer). */
    int first = 0;
    uint64_t after = 0;
    for (;;) {
        struct alloc_segment *seg = NULL;
        for (struct avl_node *n = avl_first(&dev->segments); n != NULL; n = avl_next(n)) {
            struct alloc_segment *s =
                (struct alloc_segment *)(void *)((char *)n - offsetof(struct alloc_segment, node));
            if (s->expandable && s->serial > after && (seg == NULL || s->serial < seg->serial))
                seg = s;
        }
        if (seg == NULL)
            return first;
        after = seg->serial;
        for (struct alloc_block *b = seg->head; b != NULL;) {
            if (b->unmapped) {
                b = b->next;
                continue;
            }
            uint64_t start = b->addr;
            size_t size = 0;
            for (; b != NULL && !b->unmapped; b = b->next)
                size += b->size;
            /* PyTorch raises at the first failure; cuprof gives the rest access all the same. */
            int rc = ops->vmm_set_access(ops->ctx, dev->index, start, size, peer);
            if (first == 0)
                first = rc;
        }
    }
}

void
alloc_expand_drop_peer_locked(struct alloc_device *dev, int peer)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    for (size_t i = 0; i < dev->peer_count; i++)
        if (dev->peers[i] == peer) {
            memmove(&dev->peers[i], &dev->peers[i + 1],
                    (dev->peer_count - i - 1) * sizeof(dev->peers[0]));
            dev->peer_count--;
            return;
        }
}

/* ---- Shrinking. */

size_t
alloc_expand_release_blocks_needed_locked(struct alloc_device *dev)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    size_t n = 0;
    struct alloc_pool *pools[2] = {&dev->large, &dev->small};
    if (dev->expandable_count == 0)
        return 0;
    for (int i = 0; i < 2; i++) {
        alloc_device_pool_flush_locked(pools[i]);
        for (struct avl_node *x = avl_first(&pools[i]->blocks); x != NULL; x = avl_next(x))
            n += alloc_block_of(x)->seg->expandable ? 2 : 0;
    }
    return n;
}

/* PyTorch's release_expandable_segment: nothing is mapped any more, the range goes back. */
static void
release_segment_locked(struct alloc_device *dev, struct alloc_pool *pool, struct alloc_block *b)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    struct alloc_segment *seg = b->seg;
    unmapped_erase_locked(pool, b);
    /* A failed release leaks address space only; PyTorch raises, cuprof forgets the range. */
    (void)dev->ops->vmm_release(dev->ops->ctx, dev->index, seg->addr, seg->size);
    dev->expandable_count--;
    alloc_device_drop_segment_locked(dev, seg);
    alloc_device_put_block_locked(dev, b);
}

/* Moves the whole pages [addr, addr + size) inside the free mapped block b to the unmapped set:
 * the free pieces before and after stay cached, b becomes the unmapped part and merges with
 * unmapped neighbours; stats and trace as PyTorch's unmap_block. */
static int
make_unmapped_locked(struct alloc_device *dev, struct alloc_pool *pool, struct alloc_block *b,
                     uint64_t addr, size_t size, bool call_device)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    struct alloc_segment *seg = b->seg;
    if (call_device) {
        /* PyTorch: cuMemUnmap/cuMemRelease do not wait for the GPU, so the stream is drained
         * first (its result does not change what is unmapped). */
        if (dev->ops->stream_synchronize != NULL)
            (void)dev->ops->stream_synchronize(dev->ops->ctx, dev->index, seg->stream);
        int rc = dev->ops->vmm_unmap(dev->ops->ctx, dev->index, addr, seg->page, size / seg->page);
        if (rc != 0)
            return rc; /* still mapped and cached: nothing changed */
    }
    alloc_device_pool_erase_locked(pool, b);
    size_t before = (size_t)(addr - b->addr);
    size_t after = b->size - before - size;
    if (before > 0)
        alloc_device_pool_insert_locked(pool, new_piece_locked(dev, b, b->prev, b->addr, before));
    if (after > 0)
        alloc_device_pool_insert_locked(pool, new_piece_locked(dev, b, b, addr + size, after));
    b->addr = addr;
    b->size = size;
    b->unmapped = true;
    merge_same_state_locked(dev, pool, b, b->prev);
    merge_same_state_locked(dev, pool, b, b->next);
    unmapped_insert_locked(pool, b);
    dev->total_allocated -= size;
    memory_stats_sub_pool(dev->stats.reserved_bytes, memory_stats_pool(seg->is_small),
                          (int64_t)size);
    dev->stats.num_device_free++;
    alloc_device_trace_locked(dev, TRACE_SEGMENT_UNMAP, TRACE_POOL_DEFAULT, addr, size, seg->stream,
                              seg->stack_id, 0, 0);
    return 0;
}

/* PyTorch's unmap_block: unmaps the pages that lie wholly inside the free block b, if any. */
static void
unmap_block_locked(struct alloc_device *dev, struct alloc_pool *pool, struct alloc_block *b)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    struct alloc_segment *seg = b->seg;
    size_t page = seg->page;
    uint64_t first, end;
    if (!alloc_expand_pages_inside(seg, b->addr, b->size, &first, &end))
        return;
    /* A failed unmap leaves the block mapped and cached; PyTorch raises, cuprof goes on. */
    (void)make_unmapped_locked(dev, pool, b, seg->addr + first * page, (size_t)(end - first) * page,
                               true);
}

/* The segment whose range holds addr, or NULL. */
static struct alloc_segment *
segment_at_locked(struct alloc_device *dev, uint64_t addr)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    struct avl_node *n = dev->segments.root;
    while (n != NULL) {
        struct alloc_segment *s =
            (struct alloc_segment *)(void *)((char *)n - offsetof(struct alloc_segment, node));
        if (addr < s->addr)
            n = n->left;
        else if (addr - s->addr >= s->size)
            n = n->right;
        else
            return s;
    }
    return NULL;
}

int
alloc_expand_unmap_at_locked(struct alloc_device *dev, uint64_t addr, size_t size)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    struct alloc_segment *seg = segment_at_locked(dev, addr);
    if (seg == NULL || !seg->expandable || size == 0 || (addr - seg->addr) % seg->page != 0 ||
        size % seg->page != 0)
        return -CUPROF_EINVAL;
    struct alloc_pool *pool = alloc_device_pool_of(dev, seg->is_small);
    alloc_device_pool_flush_locked(pool);
    struct alloc_block *b = seg->head;
    while (b != NULL && !(addr >= b->addr && addr - b->addr < b->size))
        b = b->next;
    if (b == NULL || !b->in_pool || b->size - (addr - b->addr) < size)
        return -CUPROF_EINVAL;
    return make_unmapped_locked(dev, pool, b, addr, size, true);
}

void
alloc_expand_release_pool_locked(struct alloc_device *dev, struct alloc_pool *pool)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    if (dev->expandable_count == 0)
        return;
    alloc_device_pool_flush_locked(pool);
    /* The pieces an unmap leaves are smaller than their block, so they sort before the walk's
     * next stop: as in PyTorch, only the blocks free when the walk began are unmapped. */
    struct alloc_block *b = alloc_block_or_null(avl_first(&pool->blocks));
    while (b != NULL) {
        struct alloc_block *next = alloc_block_or_null(avl_next(&b->node));
        if (b->seg->expandable) {
            unmap_block_locked(dev, pool, b);
            if (b->unmapped && b->prev == NULL && b->next == NULL)
                release_segment_locked(dev, pool, b);
        }
        b = next;
    }
    alloc_device_pool_flush_locked(pool);
}

void
alloc_expand_forget_segment_locked(struct alloc_device *dev, struct alloc_segment *seg)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    struct alloc_pool *pool = alloc_device_pool_of(dev, seg->is_small);
    alloc_device_pool_flush_locked(pool);
    struct alloc_block *b = seg->head;
    while (b != NULL) {
        if (!b->unmapped)
            (void)make_unmapped_locked(dev, pool, b, b->addr, b->size, false);
        b = b->unmapped ? b->next : b; /* b absorbed its unmapped neighbours */
    }
    /* One unmapped block spans the reservation now; the driver already dropped the range. */
    b = seg->head;
    unmapped_erase_locked(pool, b);
    dev->expandable_count--;
    alloc_device_drop_segment_locked(dev, seg);
    alloc_device_put_block_locked(dev, b);
}
