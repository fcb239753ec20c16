/* fuzz_allocator: libFuzzer target that turns its input into a sequence of allocator operations
 * (malloc, free, stream-ordered free, record_stream, empty_cache, event completion, fraction,
 * stats resets, external tracking, injected device failures) on two fake devices.
 * Oracles: allocator_check_invariants after every operation; live blocks never overlap and lie
 * inside a segment the device handed out; segment frees name exactly a live segment; a double
 * free is refused; reserved bytes equal what the fake device holds; at the end, with everything
 * freed and the cache emptied, nothing is allocated or reserved.
 * Lock: none (one thread). Hot path: n/a (fuzzing). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"

#define NDEV     2
#define MAX_SEG  512
#define MAX_LIVE 256
#define MAX_EVT  1024
#define FAIL_ERR 999 /* a backend error code the allocator must hand up unchanged */

struct fake_seg {
    uint64_t addr;
    size_t size;
};

struct fake_event {
    int device;
    int used;
    int done;
};

struct fake_dev {
    uint64_t next; /* bump pointer: addresses are never reused, so stale ones stand out */
    size_t capacity;
    size_t used;
    struct fake_seg segs[MAX_SEG];
    int nsegs;
};

struct live {
    uint64_t addr;
    size_t size;
    int device;
    int external;
};

struct fuzz {
    struct fake_dev dev[NDEV];
    struct fake_event events[MAX_EVT];
    int fail_next; /* next segment_alloc returns FAIL_ERR */
    struct live live[MAX_LIVE];
    int nlive;
    uint64_t freed[16]; /* recently freed addresses, for double-free probes */
    int nfreed;
    uint64_t ext_next;
    const uint8_t *p, *end;
};

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "fuzz_allocator: " __VA_ARGS__);                                           \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

static unsigned
take(struct fuzz *f, unsigned bytes)
{
    unsigned v = 0;
    for (unsigned i = 0; i < bytes; i++)
        v = (v << 8) | (f->p < f->end ? *f->p++ : 0);
    return v;
}

/* ---- the fake device ---- */
static int
fake_segment_alloc(void *ctx, int device, size_t size, uint64_t *addr)
{
    struct fuzz *f = ctx;
    struct fake_dev *d = &f->dev[device];
    if (f->fail_next) {
        f->fail_next = 0;
        return FAIL_ERR;
    }
    if (size > d->capacity - d->used || d->nsegs == MAX_SEG)
        return -CUPROF_ENOMEM;
    *addr = d->next;
    d->next += (size + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
    d->segs[d->nsegs++] = (struct fake_seg){*addr, size};
    d->used += size;
    return 0;
}

static int
fake_segment_free(void *ctx, int device, uint64_t addr, size_t size)
{
    struct fake_dev *d = &((struct fuzz *)ctx)->dev[device];
    for (int i = 0; i < d->nsegs; i++) {
        if (d->segs[i].addr == addr) {
            if (d->segs[i].size != size)
                FAIL("segment_free(%#llx) with size %zu, allocated %zu", (unsigned long long)addr,
                     size, d->segs[i].size);
            d->used -= size;
            d->segs[i] = d->segs[--d->nsegs];
            return 0;
        }
    }
    FAIL("segment_free of %#llx, not a live segment of device %d", (unsigned long long)addr,
         device);
}

static int
fake_mem_info(void *ctx, int device, size_t *free_bytes, size_t *total_bytes)
{
    struct fake_dev *d = &((struct fuzz *)ctx)->dev[device];
    *free_bytes = d->capacity - d->used;
    *total_bytes = d->capacity;
    return 0;
}

static int
fake_event_create(void *ctx, int device, void **event)
{
    struct fuzz *f = ctx;
    for (int i = 0; i < MAX_EVT; i++) {
        if (!f->events[i].used) {
            f->events[i] = (struct fake_event){device, 1, 1};
            *event = &f->events[i];
            return 0;
        }
    }
    return -CUPROF_EHOSTMEM;
}

static int
fake_event_record(void *ctx, void *event, uint64_t stream)
{
    (void)ctx;
    (void)stream;
    ((struct fake_event *)event)->done = 0;
    return 0;
}

static int
fake_event_query(void *ctx, void *event, bool *complete)
{
    (void)ctx;
    *complete = ((struct fake_event *)event)->done;
    return 0;
}

static int
fake_event_synchronize(void *ctx, void *event)
{
    (void)ctx;
    ((struct fake_event *)event)->done = 1;
    return 0;
}

static int
fake_event_destroy(void *ctx, void *event)
{
    (void)ctx;
    struct fake_event *e = event;
    if (!e->used)
        FAIL("event destroyed twice");
    e->used = 0;
    return 0;
}

static int
fake_synchronize(void *ctx, int device)
{
    struct fuzz *f = ctx;
    for (int i = 0; i < MAX_EVT; i++)
        if (f->events[i].used && f->events[i].device == device)
            f->events[i].done = 1;
    return 0;
}

/* ---- oracles ---- */
static void
check(struct fuzz *f, struct allocator *a, const char *after)
{
    char msg[512];
    if (allocator_check_invariants(a, msg, sizeof msg) != 0)
        FAIL("invariant broken after %s: %s", after, msg);
    for (int dv = 0; dv < NDEV; dv++) {
        struct memory_stats st;
        allocator_get_stats(a, dv, &st);
        size_t held = f->dev[dv].used; /* plus external allocations, which count as reserved */
        for (int i = 0; i < f->nlive; i++)
            if (f->live[i].external && f->live[i].device == dv)
                held += f->live[i].size;
        if (st.reserved_bytes[STAT_ALL].current != (int64_t)held)
            FAIL("after %s: device %d reserved_bytes %lld but the device holds %zu", after, dv,
                 (long long)st.reserved_bytes[STAT_ALL].current, held);
    }
}

static void
add_live(struct fuzz *f, int device, uint64_t addr, size_t size, int external)
{
    const struct fake_dev *d = &f->dev[device];
    int inside = external;
    for (int i = 0; i < d->nsegs && !inside; i++)
        inside = addr >= d->segs[i].addr && addr + size <= d->segs[i].addr + d->segs[i].size;
    if (!inside)
        FAIL("block %#llx+%zu is in no segment of device %d", (unsigned long long)addr, size,
             device);
    for (int i = 0; i < f->nlive; i++) {
        const struct live *l = &f->live[i];
        if (l->device == device && addr < l->addr + l->size && l->addr < addr + size)
            FAIL("block %#llx+%zu overlaps live %#llx+%zu", (unsigned long long)addr, size,
                 (unsigned long long)l->addr, l->size);
    }
    f->live[f->nlive++] = (struct live){addr, size, device, external};
}

static struct live
remove_live(struct fuzz *f, unsigned idx)
{
    struct live l = f->live[idx];
    f->live[idx] = f->live[--f->nlive];
    f->freed[f->nfreed++ % 16] = l.addr;
    return l;
}

static size_t
fuzz_size(struct fuzz *f)
{
    unsigned e = take(f, 1) % 27; /* up to 64 MiB */
    size_t base = (size_t)1 << e;
    return base + take(f, 3) % base;
}

static void
one_op(struct fuzz *f, struct allocator *a)
{
    unsigned op = take(f, 1) % 18;
    int dv = (int)(take(f, 1) % NDEV);
    uint64_t stream = take(f, 1) % 3;
    int rc;
    static const char *names[] = {
        "malloc",   "malloc",         "malloc",         "malloc",      "free",
        "free",     "free_on_stream", "record_stream",  "empty_cache", "process_events",
        "complete", "double_free",    "track_external", "fraction",    "reset_stats",
        "lookup",   "fail_next",      "forget_device"};
    switch (op) {
    case 0:
    case 1:
    case 2:
    case 3: {
        if (f->nlive == MAX_LIVE)
            break;
        size_t size = fuzz_size(f);
        uint64_t addr = 0;
        rc = allocator_malloc(a, dv, size, stream, 0, &addr);
        if (rc == 0)
            add_live(f, dv, addr, size, 0);
        else if (rc != -CUPROF_ENOMEM && rc != FAIL_ERR)
            FAIL("malloc(%zu) returned %d", size, rc);
        break;
    }
    case 4:
    case 5:
    case 6:
        if (f->nlive == 0)
            break;
        {
            struct live l = remove_live(f, take(f, 1) % (unsigned)f->nlive);
            if (l.external)
                rc = allocator_untrack_external(a, l.addr, 0);
            else if (op == 6)
                rc = allocator_free_on_stream(a, l.addr, stream, 0);
            else
                rc = allocator_free(a, l.addr, 0);
            if (rc != 0)
                FAIL("%s(%#llx) returned %d", names[op], (unsigned long long)l.addr, rc);
        }
        break;
    case 7:
        if (f->nlive > 0) {
            struct live *l = &f->live[take(f, 1) % (unsigned)f->nlive];
            if (!l->external && allocator_record_stream(a, l->addr, stream) != 0)
                FAIL("record_stream refused a live block");
        }
        break;
    case 8:
        rc = allocator_empty_cache(a, take(f, 1) % 3 == 0 ? -1 : dv);
        if (rc != 0 && rc != FAIL_ERR)
            FAIL("empty_cache returned %d", rc);
        break;
    case 9:
        allocator_process_events(a, dv);
        break;
    case 10:
        (void)fake_synchronize(f, dv);
        break;
    case 11:
        if (f->nfreed > 0) {
            uint64_t addr = f->freed[take(f, 1) % (unsigned)(f->nfreed < 16 ? f->nfreed : 16)];
            int reused = 0;
            for (int i = 0; i < f->nlive; i++)
                reused |= f->live[i].addr == addr;
            if (!reused && (rc = allocator_free(a, addr, 0)) != -CUPROF_ENOTOWNED)
                FAIL("double free of %#llx returned %d", (unsigned long long)addr, rc);
        }
        break;
    case 12:
        if (f->nlive < MAX_LIVE) {
            size_t size = fuzz_size(f);
            uint64_t addr = f->ext_next;
            f->ext_next += ((uint64_t)size + 4095) & ~(uint64_t)4095;
            if (allocator_track_external(a, dv, addr, size, stream, 1, 0) == 0)
                add_live(f, dv, addr, size, 1);
        }
        break;
    case 13:
        (void)allocator_set_memory_fraction(a, dv, (double)(take(f, 1) % 101) / 100.0);
        break;
    case 14:
        if (take(f, 1) & 1)
            allocator_reset_peak_stats(a, dv);
        else
            allocator_reset_accumulated_stats(a, dv);
        break;
    case 15:
        if (f->nlive > 0) {
            struct live *l = &f->live[take(f, 1) % (unsigned)f->nlive];
            int d = -1;
            uint64_t base = 0;
            size_t bsize = 0;
            uint64_t probe = l->addr + (l->size > 1 ? take(f, 2) % l->size : 0);
            if (!l->external && (!allocator_lookup(a, probe, &d, &base, &bsize) || d != l->device ||
                                 base != l->addr || bsize < l->size))
                FAIL("lookup(%#llx) does not find live block %#llx+%zu", (unsigned long long)probe,
                     (unsigned long long)l->addr, l->size);
        }
        break;
    case 16:
        f->fail_next = 1;
        break;
    case 17: /* a device reset: the driver freed everything of dv, the allocator forgets it */
        allocator_forget_device(a, dv);
        f->dev[dv].nsegs = 0;
        f->dev[dv].used = 0;
        for (int i = 0; i < f->nlive;)
            if (f->live[i].device == dv)
                (void)remove_live(f, (unsigned)i);
            else
                i++;
        break;
    }
    check(f, a, names[op]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct fuzz f;
    memset(&f, 0, sizeof f);
    f.p = data;
    f.end = data + size;
    f.ext_next = 0x500000000000ull;
    struct alloc_config cfg;
    alloc_config_defaults(&cfg);
    unsigned c = take(&f, 2);
    cfg.caching = (c & 7) != 0;
    if (c & 8)
        cfg.max_split_size = (size_t)(20 + take(&f, 1) % 64) << 20;
    if (c & 16)
        for (int i = 0; i < ALLOC_CONFIG_ROUNDUP_INTERVALS; i++)
            cfg.roundup_power2_divisions[i] = 1u << (take(&f, 1) % 5);
    if (c & 32)
        cfg.garbage_collection_threshold = (double)(1 + take(&f, 1) % 98) / 100.0;
    cfg.free_sync = (enum free_sync)((c >> 6) % 3);
    cfg.fit_segment_on_oom = (c & 0x8000) != 0; /* the shim's smaller segment before an OOM */
    for (int d = 0; d < NDEV; d++) {
        f.dev[d].next = 0x100000000000ull * (uint64_t)(d + 1);
        f.dev[d].capacity = (size_t)(64 + (take(&f, 1) % 8) * 64) << 20;
    }
    struct device_ops ops = {
        .ctx = &f,
        .segment_alloc = fake_segment_alloc,
        .segment_free = fake_segment_free,
        .mem_info = fake_mem_info,
        .event_create = fake_event_create,
        .event_record = fake_event_record,
        .event_query = fake_event_query,
        .event_synchronize = fake_event_synchronize,
        .event_destroy = fake_event_destroy,
        .synchronize = fake_synchronize,
    };
    struct allocator *a = allocator_create(&cfg, &ops, NULL, NDEV);
    if (!a)
        return 0;
    for (int n = 0; n < 4096 && f.p < f.end; n++)
        one_op(&f, a);
    /* Free everything, let every event complete, empty the cache: nothing may be left. */
    f.fail_next = 0;
    while (f.nlive > 0) {
        struct live l = remove_live(&f, 0);
        int rc =
            l.external ? allocator_untrack_external(a, l.addr, 0) : allocator_free(a, l.addr, 0);
        if (rc != 0)
            FAIL("final free of %#llx returned %d", (unsigned long long)l.addr, rc);
    }
    for (int d = 0; d < NDEV; d++) {
        (void)fake_synchronize(&f, d);
        allocator_process_events(a, d);
    }
    if (allocator_empty_cache(a, -1) != 0)
        FAIL("final empty_cache failed");
    check(&f, a, "final empty_cache");
    for (int d = 0; d < NDEV; d++) {
        struct memory_stats st;
        allocator_get_stats(a, d, &st);
        if (st.allocated_bytes[STAT_ALL].current != 0 || f.dev[d].used != 0)
            FAIL("device %d: %lld bytes allocated, %zu reserved after freeing everything", d,
                 (long long)st.allocated_bytes[STAT_ALL].current, f.dev[d].used);
    }
    allocator_destroy(a);
    return 0;
}
