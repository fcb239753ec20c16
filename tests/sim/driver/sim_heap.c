/* First-fit sub-allocator over one address range, with 2 MiB page charging. */
#include "sim_heap.h"

#include <cuda.h>
#include <stdlib.h>

#define SIM_HEAP_BUCKETS ((size_t)1 << 16)

static size_t
bucket_of(const struct sim_heap *h, uintptr_t start)
{
    return (size_t)(((uint64_t)start >> 9) * UINT64_C(0x9E3779B97F4A7C15) >> 48) % h->nbuckets;
}

static void
free_list_push(struct sim_heap *h, struct sim_heap_seg *s)
{
    s->fprev = NULL;
    s->fnext = h->free_list;
    if (h->free_list)
        h->free_list->fprev = s;
    h->free_list = s;
}

static void
free_list_remove(struct sim_heap *h, struct sim_heap_seg *s)
{
    if (s->fprev)
        s->fprev->fnext = s->fnext;
    else
        h->free_list = s->fnext;
    if (s->fnext)
        s->fnext->fprev = s->fprev;
    s->fprev = s->fnext = NULL;
}

int
sim_heap_init(struct sim_heap *h, uintptr_t base, size_t size, size_t *used_pages, size_t cap_pages)
{
    *h = (struct sim_heap){.base = base,
                           .size = size,
                           .used_pages = used_pages,
                           .cap_pages = cap_pages,
                           .nbuckets = SIM_HEAP_BUCKETS};
    size_t npages = (size + SIM_PAGE - 1) / SIM_PAGE;
    h->page_refs = calloc(npages ? npages : 1, sizeof(*h->page_refs));
    h->buckets = calloc(h->nbuckets, sizeof(*h->buckets));
    struct sim_heap_seg *all = calloc(1, sizeof(*all));
    if (!h->page_refs || !h->buckets || !all) {
        free(h->page_refs);
        free(h->buckets);
        free(all);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    all->start = base;
    all->size = size;
    h->first = all;
    free_list_push(h, all);
    return 0;
}

void
sim_heap_fini(struct sim_heap *h)
{
    struct sim_heap_seg *s = h->first;
    while (s) {
        struct sim_heap_seg *n = s->next;
        free(s);
        s = n;
    }
    free(h->page_refs);
    free(h->buckets);
    *h = (struct sim_heap){0};
}

static size_t
new_pages_needed(const struct sim_heap *h, uintptr_t start, size_t size)
{
    size_t first = (start - h->base) / SIM_PAGE, last = (start + size - 1 - h->base) / SIM_PAGE;
    size_t n = 0;
    for (size_t p = first; p <= last; p++)
        n += h->page_refs[p] == 0;
    return n;
}

static void
charge(struct sim_heap *h, uintptr_t start, size_t size)
{
    size_t first = (start - h->base) / SIM_PAGE, last = (start + size - 1 - h->base) / SIM_PAGE;
    for (size_t p = first; p <= last; p++)
        if (h->page_refs[p]++ == 0)
            (*h->used_pages)++;
}

/* Drops the page references of one segment; hands runs of now-unused pages to release(). */
static void
uncharge(struct sim_heap *h, uintptr_t start, size_t size)
{
    size_t first = (start - h->base) / SIM_PAGE, last = (start + size - 1 - h->base) / SIM_PAGE;
    size_t run = 0, run_len = 0;
    for (size_t p = first; p <= last + 1; p++) {
        bool released = false;
        if (p <= last && --h->page_refs[p] == 0) {
            (*h->used_pages)--;
            released = true;
        }
        if (released) {
            if (run_len == 0)
                run = p;
            run_len++;
        } else if (run_len) {
            if (h->release)
                h->release(h->release_arg, h->base + run * SIM_PAGE, run_len * SIM_PAGE);
            run_len = 0;
        }
    }
}

/* A range of `size` at `align`; its pages charged when `backed` (and then only within the
 * capacity). */
static int
alloc_range(struct sim_heap *h, size_t size, size_t align, size_t req, bool backed,
            struct sim_heap_seg **out)
{
    struct sim_heap_seg *f = h->free_list;
    uintptr_t a = 0;
    for (; f; f = f->fnext) {
        a = (f->start + align - 1) & ~(uintptr_t)(align - 1);
        if (a < f->start || a - f->start > f->size || f->size - (a - f->start) < size)
            continue;
        if (!backed || *h->used_pages + new_pages_needed(h, a, size) <= h->cap_pages)
            break;
    }
    if (!f)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_heap_seg *left = NULL, *right = NULL;
    if (a > f->start && !(left = calloc(1, sizeof(*left))))
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (f->size - (a - f->start) > size && !(right = calloc(1, sizeof(*right)))) {
        free(left);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (left) {
        left->start = f->start;
        left->size = a - f->start;
        left->prev = f->prev;
        left->next = f;
        if (f->prev)
            f->prev->next = left;
        else
            h->first = left;
        f->prev = left;
        f->start = a;
        f->size -= left->size;
        free_list_push(h, left);
    }
    if (right) {
        right->start = a + size;
        right->size = f->size - size;
        right->prev = f;
        right->next = f->next;
        if (f->next)
            f->next->prev = right;
        f->next = right;
        f->size = size;
        free_list_push(h, right);
    }
    free_list_remove(h, f);
    f->used = true;
    f->req = req;
    f->owner = NULL;
    f->kind = 0;
    f->pool = NULL;
    f->free_queued = false;
    f->graph = NULL;
    f->graph_live = false;
    f->unbacked = !backed;
    size_t b = bucket_of(h, f->start);
    f->hnext = h->buckets[b];
    h->buckets[b] = f;
    if (backed)
        charge(h, f->start, f->size);
    h->live++;
    *out = f;
    return 0;
}

int
sim_heap_alloc(struct sim_heap *h, size_t size, size_t align, size_t req, struct sim_heap_seg **out)
{
    return alloc_range(h, size, align, req, true, out);
}

int
sim_heap_alloc_unbacked(struct sim_heap *h, size_t size, size_t align, size_t req,
                        struct sim_heap_seg **out)
{
    return alloc_range(h, size, align, req, false, out);
}

bool
sim_heap_back(struct sim_heap *h, struct sim_heap_seg *seg)
{
    if (!seg->unbacked)
        return true;
    if (*h->used_pages + new_pages_needed(h, seg->start, seg->size) > h->cap_pages)
        return false;
    charge(h, seg->start, seg->size);
    seg->unbacked = false;
    return true;
}

void
sim_heap_unback(struct sim_heap *h, struct sim_heap_seg *seg)
{
    if (seg->unbacked)
        return;
    uncharge(h, seg->start, seg->size);
    seg->unbacked = true;
}

struct sim_heap_seg *
sim_heap_find(const struct sim_heap *h, uintptr_t start)
{
    if (start < h->base || start - h->base >= h->size)
        return NULL;
    for (struct sim_heap_seg *s = h->buckets[bucket_of(h, start)]; s; s = s->hnext)
        if (s->start == start)
            return s;
    return NULL;
}

struct sim_heap_seg *
sim_heap_find_containing(const struct sim_heap *h, uintptr_t addr)
{
    if (addr < h->base || addr - h->base >= h->size)
        return NULL;
    struct sim_heap_seg *s = sim_heap_find(h, addr);
    if (s)
        return s;
    for (s = h->first; s; s = s->next)
        if (addr >= s->start && addr - s->start < s->size)
            return s->used && addr - s->start < s->req ? s : NULL;
    return NULL;
}

static void
absorb_next(struct sim_heap *h, struct sim_heap_seg *s)
{
    struct sim_heap_seg *n = s->next;
    free_list_remove(h, n);
    s->size += n->size;
    s->next = n->next;
    if (n->next)
        n->next->prev = s;
    free(n);
}

void
sim_heap_free(struct sim_heap *h, struct sim_heap_seg *seg)
{
    struct sim_heap_seg **pp = &h->buckets[bucket_of(h, seg->start)];
    while (*pp != seg)
        pp = &(*pp)->hnext;
    *pp = seg->hnext;
    seg->hnext = NULL;
    if (!seg->unbacked)
        uncharge(h, seg->start, seg->size);
    seg->unbacked = false;
    seg->used = false;
    seg->req = 0;
    seg->owner = NULL;
    seg->pool = NULL;
    h->live--;
    free_list_push(h, seg);
    if (seg->next && !seg->next->used)
        absorb_next(h, seg);
    if (seg->prev && !seg->prev->used)
        absorb_next(h, seg->prev);
}

size_t
sim_heap_free_owned(struct sim_heap *h, const void *owner)
{
    size_t n = 0;
    struct sim_heap_seg *s = h->first;
    while (s) {
        struct sim_heap_seg *next = s->next;
        if (s->used && s->owner == owner) {
            struct sim_heap_seg *prev = s->prev;
            sim_heap_free(h, s);
            n++;
            /* Merging may have freed `next` or `s`; restart from the surviving neighbour. */
            next = prev ? prev->next : h->first;
        }
        s = next;
    }
    return n;
}
