/* fake_device.c: the in-process device behind allocator tests (see fake_device.h). */
#include "fake_device.h"

#include <string.h>

#include "allocator/cuprof_errors.h"

void
fake_device_init(struct fake_device *fake, size_t capacity)
{
    memset(fake, 0, sizeof(*fake));
    for (int d = 0; d < FAKE_DEVICES; d++) {
        fake->capacity[d] = capacity;
        fake->next_addr[d] = FAKE_BASE + ((uint64_t)d << 40);
        fake->vmm_next[d] = FAKE_VMM_BASE + ((uint64_t)d << 40);
    }
    fake->keep_trace = true;
}

static int
f_segment_alloc(void *ctx, int device, size_t size, uint64_t *addr)
{
    struct fake_device *f = ctx;
    if (f->fail_next_alloc) {
        int rc = f->fail_next_alloc;
        f->fail_next_alloc = 0;
        return rc;
    }
    if (size > f->capacity[device] - f->used[device])
        return -CUPROF_ENOMEM;
    if (f->lie_once) {
        f->lie_once = false;
        *addr = f->lie_addr;
        return 0;
    }
    f->segment_allocs++;
    f->used[device] += size;
    *addr = f->next_addr[device];
    f->next_addr[device] += (size + ((uint64_t)2 << 20) - 1) & ~(((uint64_t)2 << 20) - 1);
    return 0;
}

static int
f_segment_free(void *ctx, int device, uint64_t addr, size_t size)
{
    struct fake_device *f = ctx;
    (void)addr;
    f->segment_frees++;
    f->used[device] -= size;
    return 0;
}

static int
f_mem_info(void *ctx, int device, size_t *free_bytes, size_t *total_bytes)
{
    struct fake_device *f = ctx;
    *free_bytes = f->capacity[device] - f->used[device];
    *total_bytes = f->capacity[device];
    return 0;
}

static int
f_event_create(void *ctx, int device, void **event)
{
    struct fake_device *f = ctx;
    (void)device;
    if (f->event_count >= FAKE_MAX_EVENTS)
        return 2;
    f->event_creates++;
    struct fake_event *e = &f->events[f->event_count++];
    memset(e, 0, sizeof(*e));
    *event = e;
    return 0;
}

static int
f_event_record(void *ctx, void *event, uint64_t stream)
{
    struct fake_device *f = ctx;
    struct fake_event *e = event;
    f->event_records++;
    e->stream = stream;
    e->recorded = true;
    e->done = f->auto_complete;
    return 0;
}

static int
f_event_query(void *ctx, void *event, bool *complete)
{
    struct fake_device *f = ctx;
    struct fake_event *e = event;
    f->event_queries++;
    if (f->event_query_error != 0)
        return f->event_query_error;
    *complete = e->done;
    return 0;
}

static int
f_event_synchronize(void *ctx, void *event)
{
    struct fake_device *f = ctx;
    struct fake_event *e = event;
    f->event_syncs++;
    if (f->event_sync_error != 0)
        return f->event_sync_error;
    e->done = true;
    return 0;
}

static int
f_event_destroy(void *ctx, void *event)
{
    struct fake_device *fake = ctx;
    (void)event;
    fake->event_destroys++;
    return 0;
}

static int
f_synchronize(void *ctx, int device)
{
    struct fake_device *f = ctx;
    (void)device;
    f->syncs++;
    return 0;
}

static int
f_vmm_granularity(void *ctx, int device, size_t *granularity)
{
    (void)ctx;
    (void)device;
    *granularity = FAKE_GRANULARITY;
    return 0;
}

static int
f_vmm_reserve(void *ctx, int device, size_t size, uint64_t *addr)
{
    struct fake_device *f = ctx;
    if (size == 0 || size % FAKE_GRANULARITY != 0)
        return 1; /* CUDA_ERROR_INVALID_VALUE */
    f->vmm_reserves++;
    *addr = f->vmm_next[device];
    f->vmm_next[device] += size;
    return 0;
}

static int
f_vmm_release(void *ctx, int device, uint64_t addr, size_t size)
{
    struct fake_device *f = ctx;
    (void)device;
    for (size_t i = 0; i < f->page_count; i++)
        if (f->page_addr[i] >= addr && f->page_addr[i] < addr + size)
            return 1; /* still mapped: the driver refuses */
    f->vmm_releases++;
    return 0;
}

static size_t
page_index(const struct fake_device *f, uint64_t addr)
{
    for (size_t i = 0; i < f->page_count; i++)
        if (f->page_addr[i] == addr)
            return i;
    return SIZE_MAX;
}

bool
fake_device_mapped(const struct fake_device *fake, uint64_t addr)
{
    for (size_t i = 0; i < fake->page_count; i++)
        if (addr >= fake->page_addr[i] && addr - fake->page_addr[i] < fake->page_size[i])
            return true;
    return false;
}

bool
fake_device_accessible(const struct fake_device *fake, uint64_t addr, int device)
{
    for (size_t i = 0; i < fake->page_count; i++)
        if (addr >= fake->page_addr[i] && addr - fake->page_addr[i] < fake->page_size[i])
            return (fake->page_access[i] >> device) & 1;
    return false;
}

static void
log_call(struct fake_device *f, char kind, int device, uint64_t addr, size_t size, int peer)
{
    if (f->call_count < FAKE_MAX_CALLS)
        f->calls[f->call_count++] = (struct fake_vmm_call){kind, device, addr, size, peer};
}

static int
f_vmm_map(void *ctx, int device, uint64_t addr, size_t page, size_t count)
{
    struct fake_device *f = ctx;
    if (page == 0 || page % FAKE_GRANULARITY != 0 || addr % FAKE_GRANULARITY != 0 || count == 0)
        return 1;
    if (f->vmm_error != 0) {
        int rc = f->vmm_error;
        f->vmm_error = 0;
        return rc;
    }
    for (size_t i = 0; i < count; i++)
        if (page_index(f, addr + i * page) != SIZE_MAX || f->page_count + count > FAKE_MAX_PAGES)
            return 1;
    /* cuMemCreate one page at a time; a failure releases the pages of this call again. */
    for (size_t i = 0; i < count; i++) {
        if (f->fail_create_at > 0 && --f->fail_create_at == 0)
            return -CUPROF_ENOMEM;
        if (page > f->capacity[device] - f->used[device] - i * page)
            return -CUPROF_ENOMEM;
        f->pages_created++;
    }
    for (size_t i = 0; i < count; i++) {
        f->page_addr[f->page_count] = addr + i * page;
        f->page_size[f->page_count] = page;
        f->page_access[f->page_count] = 1u << device;
        f->page_device[f->page_count++] = device;
    }
    f->used[device] += count * page;
    f->pages_mapped += (long)count;
    f->vmm_map_calls++;
    log_call(f, 'M', device, addr, count * page, device);
    return 0;
}

/* cuMemSetAccess: the range must be whole mapped pages of `device`. */
static int
f_vmm_set_access(void *ctx, int device, uint64_t addr, size_t size, int peer)
{
    struct fake_device *f = ctx;
    if (f->set_access_error != 0) {
        int rc = f->set_access_error;
        f->set_access_error = 0;
        return rc;
    }
    if (size == 0 || peer < 0 || peer >= FAKE_DEVICES)
        return 1;
    for (uint64_t a = addr; a < addr + size;) {
        size_t k = page_index(f, a);
        if (k == SIZE_MAX || f->page_device[k] != device || a + f->page_size[k] > addr + size)
            return 1;
        a += f->page_size[k];
    }
    for (uint64_t a = addr; a < addr + size;) {
        size_t k = page_index(f, a);
        f->page_access[k] |= 1u << peer;
        a += f->page_size[k];
    }
    log_call(f, 'A', device, addr, size, peer);
    return 0;
}

static int
f_vmm_unmap(void *ctx, int device, uint64_t addr, size_t page, size_t count)
{
    struct fake_device *f = ctx;
    for (size_t i = 0; i < count; i++) {
        size_t k = page_index(f, addr + i * page);
        if (k == SIZE_MAX || f->page_size[k] != page || f->page_device[k] != device)
            return 1;
    }
    for (size_t i = 0; i < count; i++) {
        size_t k = page_index(f, addr + i * page);
        f->page_count--;
        f->page_addr[k] = f->page_addr[f->page_count];
        f->page_size[k] = f->page_size[f->page_count];
        f->page_device[k] = f->page_device[f->page_count];
        f->page_access[k] = f->page_access[f->page_count];
    }
    f->used[device] -= count * page;
    f->pages_unmapped += (long)count;
    f->vmm_unmap_calls++;
    log_call(f, 'U', device, addr, count * page, device);
    return 0;
}

static int
f_stream_synchronize(void *ctx, int device, uint64_t stream)
{
    struct fake_device *f = ctx;
    (void)device;
    f->stream_syncs++;
    f->last_stream_sync = stream;
    return 0;
}

struct device_ops
fake_device_ops(struct fake_device *fake)
{
    struct device_ops ops = fake_device_ops_no_vmm(fake);
    ops.vmm_granularity = f_vmm_granularity;
    ops.vmm_reserve = f_vmm_reserve;
    ops.vmm_map = f_vmm_map;
    ops.vmm_unmap = f_vmm_unmap;
    ops.vmm_release = f_vmm_release;
    ops.vmm_set_access = f_vmm_set_access;
    ops.stream_synchronize = f_stream_synchronize;
    return ops;
}

struct device_ops
fake_device_ops_no_vmm(struct fake_device *fake)
{
    struct device_ops ops = {
        .ctx = fake,
        .segment_alloc = f_segment_alloc,
        .segment_free = f_segment_free,
        .mem_info = f_mem_info,
        .event_create = f_event_create,
        .event_record = f_event_record,
        .event_query = f_event_query,
        .event_synchronize = f_event_synchronize,
        .event_destroy = f_event_destroy,
        .synchronize = f_synchronize,
    };
    return ops;
}

static void
f_record(void *ctx, const struct trace_event *event)
{
    struct fake_device *f = ctx;
    if (f->keep_trace && f->trace_count < FAKE_MAX_TRACE)
        f->trace[f->trace_count++] = *event;
}

struct trace_sink
fake_device_sink(struct fake_device *fake)
{
    struct trace_sink sink = {.ctx = fake, .record = f_record};
    return sink;
}

void
fake_device_complete(struct fake_device *fake, uint64_t stream)
{
    for (size_t i = 0; i < fake->event_count; i++) {
        struct fake_event *e = &fake->events[i];
        if (e->recorded && (stream == UINT64_MAX || e->stream == stream))
            e->done = true;
    }
}
