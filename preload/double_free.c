/* double_free.c: double-free diagnostics from the trace history (see double_free.h). */
#include "preload/double_free.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allocator/allocator.h"
#include "snapshot/stacks.h"
#include "snapshot/trace_ring.h"

struct history_hit {
    bool allocated;
    bool freed;
    uint32_t alloc_stack;
    uint32_t free_stack;
    int device;
};

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
    format_stack(hit.free_stack, first_free, sizeof first_free);
    format_stack(this_free_stack, again, sizeof again);
    int n = snprintf(line, sizeof line,
                     "cuprof: double free of device pointer 0x%llx (device %d): allocated at %s; "
                     "freed at %s; freed again at %s\n",
                     (unsigned long long)addr, hit.device, alloc_stack, first_free, again);
    if (n > 0) {
        size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
        if (write(STDERR_FILENO, line, len) < 0)
            return true;
    }
    return true;
}
