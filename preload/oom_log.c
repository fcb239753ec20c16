/* oom_log.c: the process's out-of-memory messages (see oom_log.h). */
#include "preload/oom_log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allocator/allocator.h"
#include "allocator/trace_sink.h"
#include "preload/runtime.h"
#include "snapshot/trace_ring.h"

/* Entries looked at, back from the ring's end, for the OOM's own entry (other threads' entries
 * may follow it before the program's thread gets here). */
#define OOM_LOG_LOOKBACK 4096
/* Devices whose OOM count is remembered (to keep each OOM once); later ones are kept each time. */
#define OOM_LOG_DEVICES 64

struct oom_log_entry {
    int device;
    /* Of its oom entry in the device's history (UINT64_MAX: none found); for a driver's own call
     * (api), the position the next entry would take: the state it met. */
    uint64_t position;
    int64_t time_us;
    const char *api; /* the driver's own call refused (a static name), or NULL */
    char message[OOM_LOG_MESSAGE_LEN];
};

static pthread_mutex_t oom_lock = PTHREAD_MUTEX_INITIALIZER;
static struct oom_log_entry oom_kept[OOM_LOG_KEPT]; /* protected by oom_lock; a ring */
static size_t oom_next, oom_count;                  /* protected by oom_lock */
static uint64_t oom_serial[OOM_LOG_DEVICES];        /* protected by oom_lock: num_ooms noted */
static uint64_t oom_logged, oom_held_back;          /* protected by oom_lock */
static int64_t oom_last_log_ns;                     /* protected by oom_lock */
/* Refusals of the driver's own calls per device, every one (the ring keeps a retry once). */
static _Atomic uint64_t driver_refusals[OOM_LOG_DEVICES];

static int64_t
now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t
monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The position and time of the latest oom entry of `device` before `end`; false when the
 * history does not hold one near the end (history off, or a request of 1 EiB or more). */
static bool
find_entry(struct trace_ring *ring, int device, uint64_t end, uint64_t *position, int64_t *time)
{
    uint64_t from = end > OOM_LOG_LOOKBACK ? end - OOM_LOG_LOOKBACK : 0, first = 0;
    struct trace_record *recs = malloc(OOM_LOG_LOOKBACK * sizeof(*recs));
    if (recs == NULL)
        return false;
    size_t n = trace_ring_copy_from(ring, device, from, recs, OOM_LOG_LOOKBACK, &first);
    bool found = false;
    for (size_t i = n; i-- > 0 && !found;) {
        if (first + i >= end || recs[i].action != TRACE_OOM)
            continue;
        *position = first + i;
        *time = recs[i].time_us;
        found = true;
    }
    free(recs);
    return found;
}

/* Stores one OOM in the ring; oom_lock held. */
static void
store_locked(int device, uint64_t position, int64_t time_us, const char *api, const char *message)
{
    struct oom_log_entry *e = &oom_kept[oom_next];
    e->device = device;
    e->position = position;
    e->time_us = time_us;
    e->api = api;
    snprintf(e->message, sizeof e->message, "%s", message);
    oom_next = (oom_next + 1) % OOM_LOG_KEPT;
    oom_count += oom_count < OOM_LOG_KEPT;
}

/* Keeps the message; returns whether to log it now and how many were held back before it. */
static bool
keep(int device, uint64_t serial, uint64_t position, int64_t time_us, const char *message,
     uint64_t *held_back)
{
    bool fresh = true;
    pthread_mutex_lock(&oom_lock);
    if (device >= 0 && device < OOM_LOG_DEVICES) {
        /* The same count: this OOM was noted by the thread that shares it, unless the message
         * changed (a request of 1 EiB or more counts no OOM). A driver's own refusal between the
         * two counts no OOM of the allocator's: passed over. */
        const struct oom_log_entry *last = NULL;
        for (size_t k = 1; k <= oom_count && last == NULL; k++) {
            const struct oom_log_entry *c = &oom_kept[(oom_next + OOM_LOG_KEPT - k) % OOM_LOG_KEPT];
            if (c->api == NULL)
                last = c;
        }
        fresh = serial != oom_serial[device] ||
                (last != NULL && (last->device != device || strcmp(last->message, message) != 0));
        if (serial == oom_serial[device] && fresh)
            position = UINT64_MAX;
        oom_serial[device] = serial;
    }
    bool log = false;
    if (fresh) {
        store_locked(device, position, time_us, NULL, message);
        int64_t now = monotonic_ns();
        log = oom_logged < OOM_LOG_BURST || now - oom_last_log_ns >= 1000000000;
        if (log) {
            oom_logged++;
            oom_last_log_ns = now;
            *held_back = oom_held_back;
            oom_held_back = 0;
        } else {
            oom_held_back++;
        }
    }
    pthread_mutex_unlock(&oom_lock);
    return log;
}

void
oom_log_note(struct cuprof_runtime *rt, int device)
{
    char message[OOM_LOG_MESSAGE_LEN];
    allocator_lock_device(rt->alloc, device);
    uint64_t serial = allocator_last_oom_locked(rt->alloc, device, message, sizeof message);
    uint64_t end = trace_ring_end(rt->ring, device);
    allocator_unlock_device(rt->alloc, device);
    if (message[0] == '\0')
        return;
    uint64_t position = UINT64_MAX;
    int64_t time_us = 0;
    if (!find_entry(rt->ring, device, end, &position, &time_us))
        time_us = now_us();
    uint64_t held_back = 0;
    if (!keep(device, serial, position, time_us, message, &held_back) || !runtime_log_info())
        return;
    if (held_back > 0)
        runtime_log("cuprof: %llu more out-of-memory errors were not logged (after the first %d, "
                    "at most one a second)",
                    (unsigned long long)held_back, OOM_LOG_BURST);
    runtime_log("cuprof: %s", message);
}

/* Whether the history of `device` between positions `from` and `to` holds nothing but the marks
 * of dumps (the first OOM's snapshot records one): the same state. */
static bool
only_dump_marks(struct trace_ring *ring, int device, uint64_t from, uint64_t to)
{
    enum { MARKS_MAX = 4 };
    struct trace_record recs[MARKS_MAX];
    if (to < from || to - from > MARKS_MAX)
        return false;
    uint64_t first = 0;
    size_t n = to > from ? trace_ring_copy_from(ring, device, from, recs, to - from, &first) : 0;
    if (n != to - from || (n > 0 && first != from))
        return false;
    for (size_t i = 0; i < n; i++)
        if (recs[i].action != TRACE_SNAPSHOT)
            return false;
    return true;
}

void
oom_log_note_driver(struct cuprof_runtime *rt, int device, const char *api, const char *message)
{
    if (device >= 0 && device < OOM_LOG_DEVICES)
        atomic_fetch_add_explicit(&driver_refusals[device], 1, memory_order_relaxed);
    uint64_t position = trace_ring_end(rt->ring, device);
    int64_t time_us = now_us();
    /* A program retrying the call meets the same state each time: kept once, so that a loop of
     * refusals does not push the allocator's messages out of the ring. */
    pthread_mutex_lock(&oom_lock);
    const struct oom_log_entry *last =
        oom_count > 0 ? &oom_kept[(oom_next + OOM_LOG_KEPT - 1) % OOM_LOG_KEPT] : NULL;
    bool again = last != NULL && last->api == api && last->device == device;
    uint64_t since = again ? last->position : 0;
    pthread_mutex_unlock(&oom_lock);
    again = again && only_dump_marks(rt->ring, device, since, position);
    pthread_mutex_lock(&oom_lock);
    if (!again)
        store_locked(device, position, time_us, api, message);
    pthread_mutex_unlock(&oom_lock);
}

uint64_t
oom_log_driver_refusals(int device)
{
    return device >= 0 && device < OOM_LOG_DEVICES
               ? atomic_load_explicit(&driver_refusals[device], memory_order_relaxed)
               : 0;
}

size_t
oom_log_copy(struct dump_oom_message *out, char *text, size_t cap)
{
    pthread_mutex_lock(&oom_lock);
    size_t n = oom_count < cap ? oom_count : cap;
    size_t start = (oom_next + OOM_LOG_KEPT - oom_count) % OOM_LOG_KEPT;
    for (size_t i = 0; i < n; i++) {
        const struct oom_log_entry *e = &oom_kept[(start + oom_count - n + i) % OOM_LOG_KEPT];
        char *t = text + i * OOM_LOG_MESSAGE_LEN;
        memcpy(t, e->message, OOM_LOG_MESSAGE_LEN);
        out[i] = (struct dump_oom_message){e->device, e->position, e->time_us, t, e->api};
    }
    pthread_mutex_unlock(&oom_lock);
    return n;
}

void
oom_log_reset_after_fork(void)
{
    pthread_mutex_init(&oom_lock, NULL);
}
