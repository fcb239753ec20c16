/* double_free.c: double-free diagnostics from the trace history (see double_free.h). */
#include "preload/double_free.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "preload/stderr_out.h"
#include "allocator/allocator.h"
#include "snapshot/stacks.h"
#include "snapshot/symbolize.h"
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

/* The frames of a report: at most this many, from the first one outside CUDA and cuprof. */
#define REPORT_FRAMES 8
#define REPORT_STACK  2048 /* bytes of one formatted stack */

/* True for an ip inside a CUDA library (libcuda*, libcudart*: NVIDIA's and the simulated ones
 * share the sonames) or inside cuprof: a report starts at the program's first frame. */
static bool
cuda_or_cuprof_frame(uintptr_t ip)
{
    Dl_info info;
    if (ip == 0 || dladdr((void *)(ip - 1), &info) == 0 || info.dli_fname == NULL)
        return false;
    const char *base = strrchr(info.dli_fname, '/');
    base = base != NULL ? base + 1 : info.dli_fname;
    return strncmp(base, "libcuda", 7) == 0 || strncmp(base, "libcuprof", 9) == 0;
}

/* Appends one frame: "fn (file:line)", or "fn (file)" without a line. */
static size_t
append_frame(char *buf, size_t len, size_t used, const char *sep, const struct symbolized_frame *f)
{
    if (used >= len)
        return used;
    int n;
    if (f->line > 0)
        n = snprintf(buf + used, len - used, "%s%s (%s:%lld)", sep, f->name, f->filename,
                     (long long)f->line);
    else
        n = snprintf(buf + used, len - used, "%s%s (%s)", sep, f->name, f->filename);
    if (n < 0)
        return used;
    return used + (size_t)n < len ? used + (size_t)n : len;
}

/* "fn (file.c:12) < main (file.c:40)": innermost first, from the first frame outside CUDA and
 * cuprof, at most REPORT_FRAMES (inlined frames counted). `sym` NULL (out of memory): raw
 * addresses. `none` is written when there are no frames. */
static void
format_ips(struct symbolizer *sym, const uintptr_t *ips, size_t count, char *buf, size_t len,
           const char *none)
{
    size_t first = 0;
    while (first < count && cuda_or_cuprof_frame(ips[first]))
        first++;
    /* Only CUDA frames (a call from a CUDA library's own thread): show them rather than none. */
    if (first == count)
        first = 0;
    size_t used = 0, shown = 0;
    buf[0] = '\0';
    for (size_t i = first; i < count && shown < REPORT_FRAMES; i++) {
        struct symbolized_frame frames[REPORT_FRAMES];
        size_t n = 0;
        if (sym == NULL || symbolizer_lookup(sym, ips[i], frames, REPORT_FRAMES, &n) != 0) {
            frames[0] = (struct symbolized_frame){"??", "??", 0};
            char raw[32];
            (void)snprintf(raw, sizeof raw, "0x%lx", (unsigned long)ips[i]);
            frames[0].name = raw;
            used = append_frame(buf, len, used, shown ? " < " : "", &frames[0]);
            shown++;
            continue;
        }
        for (size_t k = 0; k < n && k < REPORT_FRAMES && shown < REPORT_FRAMES; k++, shown++)
            used = append_frame(buf, len, used, shown ? " < " : "", &frames[k]);
    }
    if (shown == 0)
        (void)snprintf(buf, len, "%s", none);
}

static void
format_stack(struct symbolizer *sym, uint32_t id, char *buf, size_t len, const char *none)
{
    const uintptr_t *ips = NULL;
    size_t count = 0;
    if (id == 0 || !stacks_get(id, &ips, &count))
        count = 0;
    format_ips(sym, ips, count, buf, len, none);
}

/* Writes line[0..n) (n from snprintf into cap bytes); a cut line still ends in a newline. */
static void
write_line(char *line, int n, size_t cap)
{
    if (n <= 0)
        return;
    size_t len = (size_t)n < cap ? (size_t)n : cap - 1;
    if (len == cap - 1)
        line[len - 1] = '\n';
    (void)stderr_out_write(line, len); /* dropped where stderr is gone: nothing else to tell */
}

bool
double_free_report(struct cuprof_runtime *rt, uint64_t addr)
{
    if (rt == NULL || rt->alloc == NULL || rt->ring == NULL)
        return false;
    /* The stack of this (bad) free is taken whatever CUPROF_STACKS says: an error path. */
    uintptr_t again_ips[STACKS_MAX_DEPTH];
    size_t again_count = stacks_backtrace(0, again_ips, STACKS_MAX_DEPTH);
    struct history_hit hit = {0};
    for (int d = 0; d < allocator_device_count(rt->alloc) && !hit.allocated; d++)
        scan_device(rt, d, addr, &hit);
    if (!hit.allocated || !hit.freed)
        return false;
    if (!runtime_log_info())
        return true;
    /* No lock is held here: symbolizing reads debug info and mallocs. */
    struct symbolizer *sym = symbolizer_create();
    const char *not_recorded = stacks_mode() == STACKS_NONE
                                   ? "(stack not recorded: CUPROF_STACKS=none)"
                                   : "(no stack recorded)";
    char *alloc_stack = malloc(REPORT_STACK), *first_free = malloc(REPORT_STACK);
    char *again = malloc(REPORT_STACK), *line = malloc(3 * REPORT_STACK + 512);
    size_t cap = 3 * REPORT_STACK + 512;
    if (alloc_stack == NULL || first_free == NULL || again == NULL || line == NULL) {
        char oom[] = "cuprof: double free of a device pointer (no host memory to say more)\n";
        write_line(oom, (int)sizeof oom - 1, sizeof oom);
        goto out;
    }
    format_stack(sym, hit.alloc_stack, alloc_stack, REPORT_STACK, not_recorded);
    format_ips(sym, again_ips, again_count, again, REPORT_STACK, "(no stack)");
    int n;
    if (freed_by_reset(hit.device, hit.free_time_us)) {
        /* The reset's free carries the alloc stack only as a stand-in: not a place to show. */
        n = snprintf(line, cap,
                     "cuprof: stale free of device pointer 0x%llx (device %d): it was freed by "
                     "cudaDeviceReset/context reset of device %d; allocated at %s; freed again "
                     "at %s\n",
                     (unsigned long long)addr, hit.device, hit.device, alloc_stack, again);
    } else {
        /* Without a free stack the allocator records the alloc stack in its place (PyTorch's
         * snapshots do the same): that is no place the block was freed. */
        if (hit.free_stack == 0 || hit.free_stack == hit.alloc_stack)
            (void)snprintf(first_free, REPORT_STACK,
                           "(stack not recorded: CUPROF_STACKS=all records it)");
        else
            format_stack(sym, hit.free_stack, first_free, REPORT_STACK, "(no stack)");
        n = snprintf(line, cap,
                     "cuprof: double free of device pointer 0x%llx (device %d): freed at %s; "
                     "allocated at %s; first freed at %s\n",
                     (unsigned long long)addr, hit.device, again, alloc_stack, first_free);
    }
    write_line(line, n, cap);
out:
    free(alloc_stack);
    free(first_free);
    free(again);
    free(line);
    symbolizer_destroy(sym);
    return true;
}
