/* control_sample.c: `top`'s one-second samples (see control_sample.h). */
#include "preload/control_sample.h"

#include <stdlib.h>

#include "allocator/allocator.h"
#include "preload/runtime.h"

#define SAMPLES_KEPT   600 /* ten minutes */
#define SAMPLE_DEVICES 64

struct sample_device {
    int64_t allocated, reserved; /* the counters at the last sample */
};

struct sample_state {
    int devices;
    int64_t (*allocated)[SAMPLES_KEPT]; /* allocated[device][slot] */
    int64_t (*reserved)[SAMPLES_KEPT];
    struct sample_device *last;
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
    }
    samples.count = samples.next = 0;
    if (samples.allocated == NULL || samples.reserved == NULL || samples.last == NULL) {
        samples.devices = 0;
        return -1;
    }
    samples.devices = devices;
    return 0;
}

static void
sample_device(struct cuprof_runtime *rt, int d, size_t slot)
{
    struct memory_stats st;
    allocator_get_stats(rt->alloc, d, &st);
    struct sample_device now = {st.allocated_bytes[STAT_ALL].current,
                                st.reserved_bytes[STAT_ALL].current};
    samples.allocated[d][slot] = now.allocated;
    samples.reserved[d][slot] = now.reserved;
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
