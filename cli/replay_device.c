/* replay_device.c: the in-process fake device of `cuprof replay`: recorded segment addresses where
 *   the sizes agree, else fresh ones above every recorded address; expandable reservations where
 *   the recording mapped; events complete at once, or when the replay reaches the recorded
 *   free_completed they stand for. */
#include <stdint.h>
#include <stdlib.h>

#include "allocator/cuprof_errors.h"
#include "allocator/trace_sink.h"
#include "cli/replay.h"

/* A fresh address above every recorded one and every reservation (one made at a recorded
 * address may reach past the bump when the replayed reservations are larger than recorded). */
static uint64_t
fresh_addr(struct fake_device *f, size_t size)
{
    const uint64_t align = 2u << 20;
    for (size_t k = 0; k < f->nreserved; k++)
        if (f->reserved[k].addr + f->reserved[k].size > f->bump)
            f->bump = (f->reserved[k].addr + f->reserved[k].size + align - 1) & ~(align - 1);
    uint64_t addr = f->bump;
    f->bump += (size + align - 1) & ~(align - 1);
    return addr;
}

static int
fake_segment_alloc(void *ctx, int device, size_t size, uint64_t *addr)
{
    struct fake_device *f = ctx;
    (void)device;
    if (f->used + size > f->capacity)
        return -CUPROF_ENOMEM;
    *addr = 0;
    if (f->forced_addr != 0) {
        *addr = f->forced_addr;
        f->forced_addr = 0;
    }
    for (size_t i = f->cursor; *addr == 0 && f->trace && i < f->trace->count; i++) {
        const struct snap_entry *e = &f->trace->entries[i];
        if (e->action != TRACE_SEGMENT_ALLOC)
            continue;
        if (e->size == size && span_map_get(&f->live, e->addr) == NULL) {
            *addr = e->addr;
            f->cursor = i + 1;
        }
        break;
    }
    if (*addr == 0)
        *addr = fresh_addr(f, size);
    if (span_map_put(&f->live, *addr, size, 0) != 0)
        return -CUPROF_EHOSTMEM;
    f->used += size;
    if (f->made_count < sizeof(f->made) / sizeof(f->made[0]))
        f->made[f->made_count++] = size;
    return 0;
}

static int
fake_segment_free(void *ctx, int device, uint64_t addr, size_t size)
{
    struct fake_device *f = ctx;
    (void)device;
    (void)span_map_remove(&f->live, addr, NULL);
    f->used -= size;
    return 0;
}

static int
fake_mem_info(void *ctx, int device, size_t *free_bytes, size_t *total)
{
    struct fake_device *f = ctx;
    (void)device;
    *free_bytes = f->capacity - f->used;
    *total = replay_device_total(f);
    return 0;
}

uint64_t
replay_device_total(const struct fake_device *f)
{
    if (f->total != 0)
        return f->total;
    /* An unlimited replay still needs a card size for expandable reservations (1 1/8 of it):
     * the recorded card's when the snapshot says it, so reservations are as large as PyTorch
     * (or cuprof) made them there. */
    uint64_t card = f->card_total != 0 ? f->card_total : REPLAY_VMM_TOTAL;
    return f->capacity > card ? card : f->capacity;
}

/* ---- Expandable segments: a reservation starts where the request's next recorded segment_map
 * outside every live reservation does (PyTorch maps a new reservation from its base), else at a
 * fresh address; pages are charged to the capacity. */

static int
fake_vmm_reserve(void *ctx, int device, size_t size, uint64_t *addr)
{
    struct fake_device *f = ctx;
    (void)device;
    /* The starting state's reservations are made where the recording says (forced_addr). */
    *addr = f->forced_addr;
    f->forced_addr = 0;
    for (size_t i = f->cursor; *addr == 0 && f->trace && i < f->trace->count; i++) {
        const struct snap_entry *e = &f->trace->entries[i];
        if (e->action != TRACE_SEGMENT_MAP)
            break;
        /* Taken only where the whole range is free: a reservation larger than the recorded one
         * (the card's size unknown) may reach the next recorded reservation. */
        bool overlaps = e->addr > UINT64_MAX - size;
        for (size_t k = 0; k < f->nreserved && !overlaps; k++)
            overlaps = e->addr < f->reserved[k].addr + f->reserved[k].size &&
                       f->reserved[k].addr < e->addr + size;
        if (!overlaps)
            *addr = e->addr;
    }
    if (*addr == 0)
        *addr = fresh_addr(f, size);
    if (f->nreserved == sizeof(f->reserved) / sizeof(f->reserved[0]))
        return -CUPROF_ENOMEM;
    f->reserved[f->nreserved].addr = *addr;
    f->reserved[f->nreserved++].size = size;
    return 0;
}

static int
fake_vmm_release(void *ctx, int device, uint64_t addr, size_t size)
{
    struct fake_device *f = ctx;
    (void)device;
    (void)size;
    for (size_t k = 0; k < f->nreserved; k++)
        if (f->reserved[k].addr == addr) {
            f->reserved[k] = f->reserved[--f->nreserved];
            break;
        }
    return 0;
}

static int
fake_vmm_map(void *ctx, int device, uint64_t addr, size_t page, size_t count)
{
    struct fake_device *f = ctx;
    (void)device;
    (void)addr;
    if (f->used + page * count > f->capacity)
        return -CUPROF_ENOMEM;
    f->used += page * count;
    if (f->made_count < sizeof(f->made) / sizeof(f->made[0]))
        f->made[f->made_count++] = page * count;
    return 0;
}

static int
fake_vmm_unmap(void *ctx, int device, uint64_t addr, size_t page, size_t count)
{
    struct fake_device *f = ctx;
    (void)device;
    (void)addr;
    f->used -= page * count;
    return 0;
}

struct fake_event {
    uint64_t key; /* non-zero while pending under that key */
};

static int
fake_event_create(void *ctx, int device, void **event)
{
    (void)ctx;
    (void)device;
    *event = calloc(1, sizeof(struct fake_event));
    return *event ? 0 : -CUPROF_EHOSTMEM;
}

static int
fake_event_record(void *ctx, void *event, uint64_t stream)
{
    struct fake_device *f = ctx;
    struct fake_event *ev = event;
    (void)stream;
    ev->key = 0;
    if (f->event_key != 0) {
        /* Without a map entry the allocator falls back to a device synchronize: at once. */
        if (span_map_put(&f->pending_events, f->event_key, (uint64_t)(uintptr_t)ev, 0) != 0)
            return -CUPROF_EHOSTMEM;
        ev->key = f->event_key;
    }
    return 0;
}

static int
fake_event_query(void *ctx, void *event, bool *complete)
{
    (void)ctx;
    *complete = ((struct fake_event *)event)->key == 0;
    return 0;
}

/* Waiting for an event (empty_cache, a retry) completes it, as on a device. */
static int
fake_event_synchronize(void *ctx, void *event)
{
    struct fake_device *f = ctx;
    struct fake_event *ev = event;
    if (ev->key != 0)
        (void)span_map_remove(&f->pending_events, ev->key, NULL);
    ev->key = 0;
    return 0;
}

static int
fake_event_destroy(void *ctx, void *event)
{
    (void)fake_event_synchronize(ctx, event);
    free(event);
    return 0;
}

bool
replay_device_complete(struct fake_device *f, uint64_t key)
{
    struct span_map_item item;
    if (key == 0 || !span_map_remove(&f->pending_events, key, &item))
        return false;
    ((struct fake_event *)(uintptr_t)item.size)->key = 0;
    return true;
}

/* A device-wide wait (the allocator's fallback when it has no event) completes every event. */
static int
fake_synchronize(void *ctx, int device)
{
    struct fake_device *f = ctx;
    (void)device;
    for (size_t i = 0; i < f->pending_events.cap; i++)
        if (f->pending_events.slots[i].addr != 0)
            ((struct fake_event *)(uintptr_t)f->pending_events.slots[i].size)->key = 0;
    span_map_free(&f->pending_events);
    span_map_init(&f->pending_events);
    return 0;
}

void
replay_device_ops(struct fake_device *f, struct device_ops *ops)
{
    *ops = (struct device_ops){
        .ctx = f,
        .segment_alloc = fake_segment_alloc,
        .segment_free = fake_segment_free,
        .mem_info = fake_mem_info,
        .event_create = fake_event_create,
        .event_record = fake_event_record,
        .event_query = fake_event_query,
        .event_synchronize = fake_event_synchronize,
        .event_destroy = fake_event_destroy,
        .synchronize = fake_synchronize,
        .vmm_reserve = fake_vmm_reserve,
        .vmm_map = fake_vmm_map,
        .vmm_unmap = fake_vmm_unmap,
        .vmm_release = fake_vmm_release,
    };
}

int
replay_copy_state(struct replay_run *r, struct segment_info **segs, size_t *nseg,
                  struct block_info **blks, size_t *nblk)
{
    size_t segments, blocks;
    *nseg = *nblk = 0;
    allocator_lock_device(r->alloc, (int)r->device);
    allocator_count_locked(r->alloc, (int)r->device, &segments, &blocks);
    *segs = malloc((segments + 1) * sizeof(**segs));
    *blks = malloc((blocks + 1) * sizeof(**blks));
    int rc = *segs != NULL && *blks != NULL
                 ? allocator_copy_locked(r->alloc, (int)r->device, *segs, segments + 1, *blks,
                                         blocks + 1, nseg, nblk)
                 : -1;
    allocator_unlock_device(r->alloc, (int)r->device);
    return rc == 0 ? 0 : -1;
}
