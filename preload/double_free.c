/* double_free.c: double-free diagnostics from the trace history (see double_free.h). */
#include "preload/double_free.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "allocator/allocator.h"
#include "snapshot/stacks.h"
#include "snapshot/trace_ring.h"

struct history_hit {
    bool allocated;
    bool freed;
    uint32_t alloc_stack;
    uint32_t free_stack;
    int64_t free_time_us;
    int device;
};

/* One context reset: its device and the trace clock around the allocator's drop (end_us 0 while
 * it runs). Slots are reused round robin; a reader racing a writer at worst misnames a reset. */
struct reset_window {
    _Atomic int64_t begin_us;
    _Atomic int64_t end_us;
    atomic_int device;
};

static struct reset_window resets[DOUBLE_FREE_RESETS];
static atomic_uint reset_count;

/* The trace ring's clock (snapshot/trace_ring.c): CLOCK_REALTIME in microseconds. */
static int64_t
now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

unsigned
double_free_reset_begin(int device)
{
    unsigned token = atomic_fetch_add(&reset_count, 1u);
    struct reset_window *w = &resets[token % DOUBLE_FREE_RESETS];
    atomic_store(&w->end_us, 0);
    atomic_store(&w->device, device);
    atomic_store(&w->begin_us, now_us());
    return token;
}

void
double_free_reset_end(unsigned token)
{
    atomic_store(&resets[token % DOUBLE_FREE_RESETS].end_us, now_us());
}

/* True when a reset of `device` recorded a free at time_us (its drop bracketed that time). */
static bool
freed_by_reset(int device, int64_t time_us)
{
    for (size_t i = 0; i < DOUBLE_FREE_RESETS; i++) {
        const struct reset_window *w = &resets[i];
        int64_t end = atomic_load(&w->end_us);
        if (end != 0 && atomic_load(&w->device) == device && atomic_load(&w->begin_us) <= time_us &&
            time_us <= end)
            return true;
    }
    return false;
}

/* Newest alloc of addr on one device, and whether a free followed it. */
static void
scan_device(struct cuprof_runtime *rt, int device, uint64_t addr, struct history_hit *hit)
{
    allocator_lock_device(rt->alloc, device);
    size_t count = trace_ring_count_locked(rt->ring, device);
    allocator_unlock_device(rt->alloc, device);
    if (count == 0)
        return;
    /* Entries recorded between the count and the copy are simply not seen. */
    struct trace_record *records = malloc(count * sizeof *records);
    if (records == NULL)
        return;
    allocator_lock_device(rt->alloc, device);
    size_t n = trace_ring_copy_locked(rt->ring, device, records, count, NULL);
    allocator_unlock_device(rt->alloc, device);
    for (size_t i = n; i-- > 0;) {
        const struct trace_record *r = &records[i];
        if (r->addr != addr)
            continue;
        if (r->action == TRACE_FREE_REQUESTED && !hit->freed) {
            hit->freed = true;
            hit->free_stack = r->stack_id;
            hit->free_time_us = r->time_us;
        } else if (r->action == TRACE_ALLOC) {
            hit->allocated = true;
            hit->alloc_stack = r->stack_id;
            hit->device = device;
            break;
        }
    }
    free(records);
}

/* "fn+0x1a (libfoo.so) < main+0x20 (app)": innermost first, at most 8 frames. */
static void
format_stack(uint32_t id, char *buf, size_t len)
{
    const uintptr_t *ips;
    size_t count;
    size_t used = 0;
    buf[0] = '\0';
    if (id == 0 || !stacks_get(id, &ips, &count)) {
        snprintf(buf, len, "(no stack recorded)");
        return;
    }
    for (size_t i = 0; i < count && i < 8 && used < len; i++) {
        Dl_info info;
        const char *sep = i ? " < " : "";
        int n;
        if (dladdr((void *)ips[i], &info) != 0 && info.dli_sname != NULL)
            n = snprintf(buf + used, len - used, "%s%s+0x%lx", sep, info.dli_sname,
                         (unsigned long)(ips[i] - (uintptr_t)info.dli_saddr));
        else if (dladdr((void *)ips[i], &info) != 0 && info.dli_fname != NULL)
            n = snprintf(buf + used, len - used, "%s%s+0x%lx", sep, info.dli_fname,
                         (unsigned long)(ips[i] - (uintptr_t)info.dli_fbase));
        else
            n = snprintf(buf + used, len - used, "%s0x%lx", sep, (unsigned long)ips[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

bool
double_free_report(struct cuprof_runtime *rt, uint64_t addr, uint32_t this_free_stack)
{
    if (rt == NULL || rt->alloc == NULL || rt->ring == NULL)
        return false;
    struct history_hit hit = {0};
    for (int d = 0; d < allocator_device_count(rt->alloc) && !hit.allocated; d++)
        scan_device(rt, d, addr, &hit);
    if (!hit.allocated || !hit.freed)
        return false;
    if (!runtime_log_info())
        return true;
    char alloc_stack[1024], first_free[1024], again[1024], line[3300];
    format_stack(hit.alloc_stack, alloc_stack, sizeof alloc_stack);
    format_stack(this_free_stack, again, sizeof again);
    int n;
    if (freed_by_reset(hit.device, hit.free_time_us)) {
        /* The reset's free carries the alloc stack only as a stand-in: not a place to show. */
        n = snprintf(line, sizeof line,
                     "cuprof: stale free of device pointer 0x%llx (device %d): it was freed by "
                     "cudaDeviceReset/context reset of device %d; allocated at %s; freed again "
                     "at %s\n",
                     (unsigned long long)addr, hit.device, hit.device, alloc_stack, again);
    } else {
        format_stack(hit.free_stack, first_free, sizeof first_free);
        n = snprintf(line, sizeof line,
                     "cuprof: double free of device pointer 0x%llx (device %d): allocated at %s; "
                     "freed at %s; freed again at %s\n",
                     (unsigned long long)addr, hit.device, alloc_stack, first_free, again);
    }
    if (n > 0) {
        size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
        if (write(STDERR_FILENO, line, len) < 0)
            return true;
    }
    return true;
}
