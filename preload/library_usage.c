/* library_usage.c: the counting sink (see library_usage.h). A block's or segment's bytes go back
 * to the library that allocated them, whoever frees them: a block carries its library as the
 * allocator's owner tag (the allocator counts its requested bytes by it); segments (which another
 * library's out-of-memory retry or empty_cache may release) and mapped pages are remembered per
 * address in the maps. */
#include "preload/library_usage.h"

#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "preload/addr_map.h"
#include "preload/library_hint.h"
#include "preload/library_table.h"
#include "snapshot/snapshot_usage.h"

enum usage_kind {
    USAGE_CACHE_RESERVED, /* cuprof's segments, made to serve the library's requests */
    USAGE_PASSTHROUGH,    /* memory the driver handed out directly (managed, VMM, pools, trace) */
    USAGE_DEVICE,         /* reserved + pass-through: what the device holds for the library */
    USAGE_KINDS
};

struct usage_counter {
    uint64_t live;
    uint64_t peak;
};

struct usage_device {
    struct addr_map segments; /* segment address -> (library, bytes) */
    struct usage_counter counters[LIBRARY_TABLE_MAX][USAGE_KINDS]; /* protected by the device's
                                                                      allocator lock */
};

static struct usage_device *usage_devices; /* set once by library_usage_init */
static int usage_device_count;
static struct trace_sink usage_next;

_Static_assert(LIBRARY_UNKNOWN == 0, "library_usage_end_call stores 0");
_Thread_local uint16_t library_usage_current __attribute__((tls_model("initial-exec")));
/* The thread's last call site and its library: a loop allocating from one place asks once. */
_Thread_local const void *library_usage_last_caller __attribute__((tls_model("initial-exec")));
_Thread_local uint16_t library_usage_last_library __attribute__((tls_model("initial-exec")));

static void
add(struct usage_device *u, uint16_t library, enum usage_kind kind, uint64_t bytes)
{
    struct usage_counter *c = &u->counters[library][kind];
    c->live += bytes;
    if (c->live > c->peak)
        c->peak = c->live;
}

static void
sub(struct usage_device *u, uint16_t library, enum usage_kind kind, uint64_t bytes)
{
    struct usage_counter *c = &u->counters[library][kind];
    c->live = c->live > bytes ? c->live - bytes : 0;
}

static void
on_segment(struct usage_device *u, const struct trace_event *ev, bool alloc)
{
    enum usage_kind kind =
        ev->pool == TRACE_POOL_DEFAULT ? USAGE_CACHE_RESERVED : USAGE_PASSTHROUGH;
    uint64_t library = library_usage_current, bytes = ev->size;
    if (alloc) {
        /* Without room to remember the owner the bytes could never be given back: not counted. */
        if (!addr_map_put(&u->segments, ev->addr, library, bytes))
            return;
        add(u, (uint16_t)library, kind, bytes);
        add(u, (uint16_t)library, USAGE_DEVICE, bytes);
    } else if (addr_map_remove(&u->segments, ev->addr, &library, &bytes)) {
        sub(u, (uint16_t)library, kind, bytes);
        sub(u, (uint16_t)library, USAGE_DEVICE, bytes);
    }
}

/* Expandable segments map and unmap pages, and an unmap need not match a map (it takes the free
 * pages of a block, wherever they were mapped from): each 2 MiB piece, the driver's smallest page,
 * remembers the library whose request mapped it. */
#define USAGE_MAP_PIECE ((uint64_t)2 << 20)

static void
on_map(struct usage_device *u, const struct trace_event *ev, bool map)
{
    for (uint64_t at = ev->addr; at < ev->addr + ev->size; at += USAGE_MAP_PIECE) {
        uint64_t library = library_usage_current, bytes = USAGE_MAP_PIECE;
        if (map) {
            if (!addr_map_put(&u->segments, at, library, bytes))
                continue;
            add(u, (uint16_t)library, USAGE_CACHE_RESERVED, bytes);
            add(u, (uint16_t)library, USAGE_DEVICE, bytes);
        } else if (addr_map_remove(&u->segments, at, &library, &bytes)) {
            sub(u, (uint16_t)library, USAGE_CACHE_RESERVED, bytes);
            sub(u, (uint16_t)library, USAGE_DEVICE, bytes);
        }
    }
}

/* Runs under the device's allocator lock, like every sink. */
static void
usage_record(void *ctx, const struct trace_event *ev)
{
    (void)ctx;
    if (usage_next.record != NULL)
        usage_next.record(usage_next.ctx, ev);
    if (ev->device < 0 || ev->device >= usage_device_count)
        return;
    struct usage_device *u = &usage_devices[ev->device];
    uint8_t action = ev->action;
    switch (action) {
    case TRACE_SEGMENT_ALLOC:
        on_segment(u, ev, true);
        break;
    case TRACE_SEGMENT_FREE:
        on_segment(u, ev, false);
        break;
    case TRACE_SEGMENT_MAP:
        on_map(u, ev, true);
        break;
    case TRACE_SEGMENT_UNMAP:
        on_map(u, ev, false);
        break;
    default:
        break;
    }
}

bool
library_usage_init(int device_count, struct trace_sink next, struct trace_sink *sink)
{
    if (device_count <= 0)
        return false;
    struct usage_device *devices = calloc((size_t)device_count, sizeof(*devices));
    if (devices == NULL)
        return false;
    for (int d = 0; d < device_count; d++) {
        pthread_mutex_init(&devices[d].segments.lock, NULL);
    }
    usage_devices = devices;
    usage_device_count = device_count;
    usage_next = next;
    *sink = (struct trace_sink){.ctx = NULL, .record = usage_record};
    return true;
}

uint16_t
library_usage_begin_alloc_slow(uint32_t stack_id, const void *caller)
{
    if (usage_devices == NULL)
        return LIBRARY_UNKNOWN;
    uint16_t library = LIBRARY_UNKNOWN;
    if (stack_id != 0)
        library = library_table_of_stack(stack_id);
    /* No stack (CUPROF_STACKS=none, or the intern table is full): the return address tells,
     * unless the CUDA runtime made the call for someone; then a short unwind does. */
    if (library == LIBRARY_UNKNOWN && caller != NULL) {
        if (caller == library_usage_last_caller) {
            library = library_usage_last_library;
        } else {
            uintptr_t ip = (uintptr_t)caller;
            library = library_table_of_ips(&ip, 1);
            if (library != LIBRARY_UNKNOWN) {
                library_usage_last_caller = caller;
                library_usage_last_library = library;
            }
        }
    }
    if (library == LIBRARY_UNKNOWN)
        library = library_table_of_caller();
    library_hint_note(library);
    library_usage_current = library;
    return library;
}

int
library_usage_collect(struct allocator *alloc, struct snap_library **rows, size_t *count)
{
    *rows = NULL;
    *count = 0;
    if (usage_devices == NULL)
        return 0;
    size_t libraries = library_table_count();
    _Static_assert(LIBRARY_TABLE_MAX <= ALLOC_OWNERS_COUNTED, "every library's blocks counted");
    struct usage_counter(*copy)[USAGE_KINDS] = calloc(libraries, sizeof(*copy));
    struct alloc_owner_bytes *requested = calloc(libraries, sizeof(*requested));
    struct snap_library *out = calloc(libraries * (size_t)usage_device_count, sizeof(*out));
    if (copy == NULL || requested == NULL || out == NULL) {
        free(copy);
        free(requested);
        free(out);
        return -CUPROF_EHOSTMEM;
    }
    size_t n = 0;
    for (int d = 0; d < usage_device_count; d++) {
        allocator_lock_device(alloc, d);
        memcpy(copy, usage_devices[d].counters, libraries * sizeof(*copy));
        allocator_owner_bytes_locked(alloc, d, requested, libraries);
        allocator_unlock_device(alloc, d);
        for (size_t lib = 0; lib < libraries; lib++) {
            const struct usage_counter *c = copy[lib];
            if (requested[lib].requested_peak == 0 && c[USAGE_DEVICE].peak == 0)
                continue; /* never held memory on this device */
            out[n++] = (struct snap_library){
                .device = d,
                .path = library_table_path((uint16_t)lib),
                .is_program = library_table_is_program((uint16_t)lib),
                .cache_requested = requested[lib].requested,
                .cache_requested_peak = requested[lib].requested_peak,
                .cache_reserved = c[USAGE_CACHE_RESERVED].live,
                .cache_reserved_peak = c[USAGE_CACHE_RESERVED].peak,
                .passthrough = c[USAGE_PASSTHROUGH].live,
                .passthrough_peak = c[USAGE_PASSTHROUGH].peak,
                .device_bytes = c[USAGE_DEVICE].live,
                .device_bytes_peak = c[USAGE_DEVICE].peak,
            };
        }
    }
    free(copy);
    free(requested);
    *rows = out;
    *count = n;
    return 0;
}

void
library_usage_reset_after_fork(void)
{
    for (int d = 0; d < usage_device_count; d++) {
        addr_map_reset_after_fork(&usage_devices[d].segments);
    }
    library_table_reset_after_fork();
}
