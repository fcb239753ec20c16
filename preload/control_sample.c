/* control_sample.c: `top`'s one-second samples, each its second's peak (see control_sample.h).
 * The peak is rebuilt backwards from the counters' values at the sample through the alloc/free
 * and segment entries the ring recorded since the previous sample: no work is added where the
 * program allocates, and the program's own peak counters (and its resets of them) are not
 * involved. Entries carry the requested size where allocated_bytes counts the rounded block, so
 * an allocated peak may come out a rounding short; it never leaves [the larger end value, the
 * earlier value + everything allocated in the second]. */
#include "preload/control_sample.h"

#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "preload/runtime.h"
#include "snapshot/trace_ring.h"

#define SAMPLES_KEPT   600 /* ten minutes */
#define SAMPLE_DEVICES 64
#define WALK_CHUNK     512       /* entries copied per hold of the ring's lock */
#define WALK_MAX       (1 << 16) /* entries read per device and sample, at most */

struct sample_device {
    uint64_t position;                       /* the ring's end at the last sample */
    int64_t allocated, reserved;             /* the counters then */
    int64_t allocated_total, reserved_total; /* everything added to them so far (stat.allocated) */
};

struct sample_state {
    int devices;
    int64_t (*allocated)[SAMPLES_KEPT]; /* allocated[device][slot]: the interval's peak */
    int64_t (*reserved)[SAMPLES_KEPT];
    struct sample_device *last;
    struct trace_record *chunk; /* WALK_CHUNK entries */
    size_t count, next;
    int64_t last_ms;
};

static struct sample_state samples;

int
control_sample_start(const struct cuprof_runtime *rt)
{
    int devices = rt->device_count < SAMPLE_DEVICES ? rt->device_count : SAMPLE_DEVICES;
    size_t n = (size_t)devices + 1;
    if (samples.allocated == NULL) { /* a forked child keeps its parent's buffers */
        samples.allocated = calloc(n, sizeof(*samples.allocated));
        samples.reserved = calloc(n, sizeof(*samples.reserved));
        samples.last = calloc(n, sizeof(*samples.last));
        samples.chunk = malloc(WALK_CHUNK * sizeof(*samples.chunk));
    }
    samples.count = samples.next = 0;
    if (samples.allocated == NULL || samples.reserved == NULL || samples.last == NULL ||
        samples.chunk == NULL) {
        samples.devices = 0;
        return -1;
    }
    samples.devices = devices;
    return 0;
}

/* What an entry did to allocated (da) and reserved (dr) bytes. */
static void
entry_delta(const struct trace_record *r, int64_t *da, int64_t *dr)
{
    int64_t size = (int64_t)r->size;
    *da = *dr = 0;
    switch (r->action) {
    case TRACE_ALLOC:
        *da = size;
        break;
    case TRACE_FREE_REQUESTED: /* allocated_bytes drops at the request, as in PyTorch */
        *da = -size;
        break;
    case TRACE_SEGMENT_ALLOC:
    case TRACE_SEGMENT_MAP:
        *dr = size;
        break;
    case TRACE_SEGMENT_FREE:
    case TRACE_SEGMENT_UNMAP:
        *dr = -size;
        break;
    default:
        break;
    }
}

/* Walks back from the values at position `end` (*peak_a, *peak_r hold them) through the entries
 * recorded since `from`, newest first, raising the peaks to every value passed on the way. Stops
 * at what the ring no longer holds and after WALK_MAX entries. */
static void
walk_back(struct trace_ring *ring, int device, uint64_t from, uint64_t end, int64_t *peak_a,
          int64_t *peak_r)
{
    int64_t a = *peak_a, r = *peak_r;
    uint64_t pos = end, walked = 0;
    while (pos > from && walked < WALK_MAX) {
        uint64_t want = pos - from < WALK_CHUNK ? pos - from : WALK_CHUNK, first = 0;
        size_t n =
            trace_ring_copy_from(ring, device, pos - want, samples.chunk, (size_t)want, &first);
        if (first != pos - want || n != want)
            break; /* overwritten or cleared meanwhile: what is older is unknown */
        for (size_t i = n; i-- > 0;) {
            int64_t da, dr;
            entry_delta(&samples.chunk[i], &da, &dr);
            a -= da; /* the value before this entry */
            r -= dr;
            *peak_a = a > *peak_a ? a : *peak_a;
            *peak_r = r > *peak_r ? r : *peak_r;
        }
        pos -= want;
        walked += want;
    }
}

/* The interval's peak of one counter: the walk's answer, kept within what is certain. */
static int64_t
bounded(int64_t walked, int64_t before, int64_t now, int64_t total_before, int64_t total_now)
{
    int64_t low = before > now ? before : now;
    if (walked < low)
        walked = low;
    if (total_now >= total_before && walked > before + (total_now - total_before))
        walked = before + (total_now - total_before); /* never more than was allocated */
    return walked;
}

static void
sample_device(struct cuprof_runtime *rt, int d, size_t slot)
{
    struct memory_stats st;
    allocator_lock_device(rt->alloc, d);
    allocator_get_stats_locked(rt->alloc, d, &st);
    uint64_t end = trace_ring_end(rt->ring, d); /* consistent with st: recorded under this lock */
    allocator_unlock_device(rt->alloc, d);
    struct sample_device now = {
        end, st.allocated_bytes[STAT_ALL].current, st.reserved_bytes[STAT_ALL].current,
        st.allocated_bytes[STAT_ALL].allocated, st.reserved_bytes[STAT_ALL].allocated};
    int64_t peak_a = now.allocated, peak_r = now.reserved;
    if (samples.count > 0) {
        const struct sample_device *was = &samples.last[d];
        if (was->position <= end)
            walk_back(rt->ring, d, was->position, end, &peak_a, &peak_r);
        peak_a = bounded(peak_a, was->allocated, now.allocated, was->allocated_total,
                         now.allocated_total);
        peak_r =
            bounded(peak_r, was->reserved, now.reserved, was->reserved_total, now.reserved_total);
    }
    samples.allocated[d][slot] = peak_a;
    samples.reserved[d][slot] = peak_r;
    samples.last[d] = now;
}

int64_t
control_sample_tick(struct cuprof_runtime *rt, int64_t now_ms)
{
    if (samples.count > 0 && now_ms - samples.last_ms < CONTROL_SAMPLE_MS)
        return CONTROL_SAMPLE_MS - (now_ms - samples.last_ms);
    samples.last_ms = now_ms;
    for (int d = 0; d < samples.devices; d++)
        sample_device(rt, d, samples.next);
    samples.next = (samples.next + 1) % SAMPLES_KEPT;
    if (samples.count < SAMPLES_KEPT)
        samples.count++;
    return CONTROL_SAMPLE_MS;
}

void
control_sample_put_json(struct control_json *b)
{
    control_json_printf(b, ",\"sample_interval_ms\":%d,\"samples\":[", CONTROL_SAMPLE_MS);
    size_t n = samples.count;
    size_t start = (samples.next + SAMPLES_KEPT - n) % SAMPLES_KEPT;
    for (int d = 0; d < samples.devices; d++) {
        control_json_printf(b, "%s{\"device\":%d,\"allocated\":[", d ? "," : "", d);
        for (size_t i = 0; i < n; i++)
            control_json_printf(b, "%s%lld", i ? "," : "",
                                (long long)samples.allocated[d][(start + i) % SAMPLES_KEPT]);
        control_json_printf(b, "],\"reserved\":[");
        for (size_t i = 0; i < n; i++)
            control_json_printf(b, "%s%lld", i ? "," : "",
                                (long long)samples.reserved[d][(start + i) % SAMPLES_KEPT]);
        control_json_put(b, "]}", 2);
    }
    control_json_put(b, "]", 1);
}
