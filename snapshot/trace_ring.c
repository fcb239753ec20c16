/* trace_ring.c: per-device ring buffers of trace_record, plus the annotation label table. */
#include "snapshot/trace_ring.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "allocator/cuprof_errors.h"
#include "snapshot/label_table.h"

static_assert(sizeof(struct trace_record) == 40, "trace_record must stay 40 bytes");

struct ring_device {
    pthread_mutex_t lock;
    struct trace_record *buf; /* protected by lock; mmap'd, capacity entries */
    size_t capacity;          /* protected by lock; 0 when history is off */
    size_t next;              /* protected by lock; slot the next record goes to */
    size_t count;             /* protected by lock; <= capacity */
    uint64_t dropped;         /* protected by lock; overwritten since the last clear */
    uint64_t cleared;         /* protected by lock; recorded before the last clear: entry
                                 positions (trace_ring_end) go on from cleared + dropped */
};

struct trace_ring {
    int device_count;
    _Atomic int mode;           /* enum history_mode; read without a lock on the hot path */
    size_t max_entries;         /* protected by mode_lock */
    pthread_mutex_t mode_lock;  /* serialises set_mode calls */
    struct label_table *labels; /* annotations' texts (its own locking) */
    bool owns_labels;           /* made by trace_ring_create (else the caller's) */
    struct ring_device devices[];
};

static struct trace_record *
ring_buf_alloc(size_t entries)
{
    if (entries == 0)
        return NULL;
    if (entries > SIZE_MAX / sizeof(struct trace_record))
        return MAP_FAILED;
    /* Lazily backed: a 10^6-entry ring costs RSS only for the entries written. */
    return mmap(NULL, entries * sizeof(struct trace_record), PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}

static void
ring_buf_free(struct trace_record *buf, size_t entries)
{
    if (buf != NULL)
        munmap(buf, entries * sizeof(struct trace_record));
}

static size_t
ring_capacity_for(enum history_mode mode, size_t max_entries)
{
    if (mode == HISTORY_OFF)
        return 0;
    if (mode == HISTORY_STATE)
        return 1; /* PyTorch: "state" forces max_entries to 1. */
    return max_entries == 0 ? TRACE_RING_DEFAULT_ENTRIES : max_entries;
}

struct trace_ring *
trace_ring_create(int device_count, size_t max_entries, enum history_mode mode)
{
    struct label_table *labels = label_table_create();
    struct trace_ring *ring =
        labels != NULL ? trace_ring_create_labeled(device_count, max_entries, mode, labels) : NULL;
    if (ring == NULL)
        label_table_destroy(labels);
    else
        ring->owns_labels = true;
    return ring;
}

struct trace_ring *
trace_ring_create_labeled(int device_count, size_t max_entries, enum history_mode mode,
                          struct label_table *labels)
{
    if (device_count < 0 || mode < HISTORY_ALL || mode > HISTORY_OFF || labels == NULL)
        return NULL;
    struct trace_ring *ring =
        calloc(1, sizeof(*ring) + (size_t)device_count * sizeof(struct ring_device));
    if (ring == NULL)
        return NULL;
    ring->device_count = device_count;
    ring->max_entries = max_entries;
    ring->labels = labels;
    atomic_init(&ring->mode, (int)mode);
    pthread_mutex_init(&ring->mode_lock, NULL);
    size_t cap = ring_capacity_for(mode, max_entries);
    for (int d = 0; d < device_count; d++) {
        struct ring_device *dev = &ring->devices[d];
        pthread_mutex_init(&dev->lock, NULL);
        dev->buf = ring_buf_alloc(cap);
        if (dev->buf == MAP_FAILED) {
            dev->buf = NULL;
            ring->device_count = d + 1;
            trace_ring_destroy(ring);
            return NULL;
        }
        dev->capacity = cap;
    }
    return ring;
}

void
trace_ring_destroy(struct trace_ring *ring)
{
    if (ring == NULL)
        return;
    for (int d = 0; d < ring->device_count; d++) {
        ring_buf_free(ring->devices[d].buf, ring->devices[d].capacity);
        pthread_mutex_destroy(&ring->devices[d].lock);
    }
    if (ring->owns_labels)
        label_table_destroy(ring->labels);
    pthread_mutex_destroy(&ring->mode_lock);
    free(ring);
}

static int64_t
now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Appends one record to a device's ring. */
static inline void
ring_append(struct ring_device *dev, const struct trace_record *rec)
{
    pthread_mutex_lock(&dev->lock);
    if (dev->capacity > 0) {
        dev->buf[dev->next] = *rec;
        if (++dev->next == dev->capacity)
            dev->next = 0;
        if (dev->count < dev->capacity)
            dev->count++;
        else
            dev->dropped++;
    }
    pthread_mutex_unlock(&dev->lock);
}

void
trace_ring_record(struct trace_ring *ring, const struct trace_event *event)
{
    if (atomic_load_explicit(&ring->mode, memory_order_relaxed) == HISTORY_OFF)
        return;
    if (event->device < 0 || event->device >= ring->device_count)
        return;
    struct trace_record rec = {
        .addr = event->action == TRACE_OOM ? event->device_free : event->addr,
        .size = event->size,
        .stream = event->stream,
        .time_us = now_us(),
        .stack_id = event->stack_id,
        .action = event->action,
        .pool = event->pool,
    };
    ring_append(&ring->devices[event->device], &rec);
}

void
trace_ring_annotate(struct trace_ring *ring, uint32_t label_id)
{
    trace_ring_annotate_at(ring, label_id, 0);
}

void
trace_ring_annotate_at(struct trace_ring *ring, uint32_t label_id, int64_t time_us)
{
    if (ring == NULL || label_id == 0 ||
        atomic_load_explicit(&ring->mode, memory_order_relaxed) == HISTORY_OFF)
        return;
    struct trace_record rec = {.time_us = time_us != 0 ? time_us : now_us(),
                               .stack_id = label_id,
                               .action = TRACE_ANNOTATE};
    for (int d = 0; d < ring->device_count; d++)
        ring_append(&ring->devices[d], &rec);
}

static void
ring_sink_record(void *ctx, const struct trace_event *event)
{
    trace_ring_record(ctx, event);
}

struct trace_sink
trace_ring_sink(struct trace_ring *ring)
{
    return (struct trace_sink){.ctx = ring, .record = ring_sink_record};
}

static struct ring_device *
ring_device(struct trace_ring *ring, int device)
{
    if (ring == NULL || device < 0 || device >= ring->device_count)
        return NULL;
    return &ring->devices[device];
}

size_t
trace_ring_count_locked(struct trace_ring *ring, int device)
{
    struct ring_device *dev = ring_device(ring, device);
    if (dev == NULL)
        return 0;
    pthread_mutex_lock(&dev->lock);
    size_t n = dev->count;
    pthread_mutex_unlock(&dev->lock);
    return n;
}

/* Copies the newest min(count, cap) entries, oldest first. Caller holds dev->lock. */
static size_t
ring_copy_out_locked(const struct ring_device *dev, struct trace_record *out, size_t cap)
{
    size_t n = dev->count < cap ? dev->count : cap;
    if (n == 0)
        return 0;
    /* The oldest wanted entry sits n slots before `next`, wrapping around the buffer. */
    size_t start = (dev->next + dev->capacity - n) % dev->capacity;
    size_t first = dev->capacity - start < n ? dev->capacity - start : n;
    memcpy(out, dev->buf + start, first * sizeof(*out));
    memcpy(out + first, dev->buf, (n - first) * sizeof(*out));
    return n;
}

size_t
trace_ring_copy_locked(struct trace_ring *ring, int device, struct trace_record *out, size_t cap,
                       uint64_t *dropped)
{
    struct ring_device *dev = ring_device(ring, device);
    if (dev == NULL) {
        if (dropped != NULL)
            *dropped = 0;
        return 0;
    }
    pthread_mutex_lock(&dev->lock);
    size_t n = ring_copy_out_locked(dev, out, cap);
    if (dropped != NULL)
        *dropped = dev->dropped;
    pthread_mutex_unlock(&dev->lock);
    return n;
}

uint64_t
trace_ring_dropped(struct trace_ring *ring, int device)
{
    struct ring_device *dev = ring_device(ring, device);
    if (dev == NULL)
        return 0;
    pthread_mutex_lock(&dev->lock);
    uint64_t n = dev->dropped;
    pthread_mutex_unlock(&dev->lock);
    return n;
}

uint64_t
trace_ring_end(struct trace_ring *ring, int device)
{
    struct ring_device *dev = ring_device(ring, device);
    if (dev == NULL)
        return 0;
    pthread_mutex_lock(&dev->lock);
    uint64_t end = dev->cleared + dev->dropped + dev->count;
    pthread_mutex_unlock(&dev->lock);
    return end;
}

size_t
trace_ring_copy_from(struct trace_ring *ring, int device, uint64_t from, struct trace_record *out,
                     size_t cap, uint64_t *first)
{
    struct ring_device *dev = ring_device(ring, device);
    if (dev == NULL) {
        *first = from;
        return 0;
    }
    pthread_mutex_lock(&dev->lock);
    uint64_t oldest = dev->cleared + dev->dropped, end = oldest + dev->count;
    uint64_t start = from < oldest ? oldest : from > end ? end : from;
    size_t n = end - start < cap ? (size_t)(end - start) : cap;
    if (n > 0) {
        /* The newest entry (position end - 1) sits just before `next`. */
        size_t slot = (dev->next + dev->capacity - (size_t)(end - start)) % dev->capacity;
        size_t part = dev->capacity - slot < n ? dev->capacity - slot : n;
        memcpy(out, dev->buf + slot, part * sizeof(*out));
        memcpy(out + part, dev->buf, (n - part) * sizeof(*out));
    }
    pthread_mutex_unlock(&dev->lock);
    *first = start;
    return n;
}

void
trace_ring_clear(struct trace_ring *ring, int device)
{
    if (ring == NULL)
        return;
    for (int d = 0; d < ring->device_count; d++) {
        if (device != -1 && device != d)
            continue;
        struct ring_device *dev = &ring->devices[d];
        pthread_mutex_lock(&dev->lock);
        dev->cleared += dev->dropped + dev->count;
        dev->next = 0;
        dev->count = 0;
        dev->dropped = 0;
        pthread_mutex_unlock(&dev->lock);
    }
}

int
trace_ring_set_mode(struct trace_ring *ring, enum history_mode mode, size_t max_entries)
{
    if (ring == NULL || mode < HISTORY_ALL || mode > HISTORY_OFF)
        return -CUPROF_EINVAL;
    pthread_mutex_lock(&ring->mode_lock);
    size_t cap = ring_capacity_for(mode, max_entries);
    int n = ring->device_count;
    /* Allocate every new buffer before touching any ring, so a failure changes nothing. */
    struct trace_record **fresh = calloc((size_t)n + 1, sizeof(*fresh));
    bool ok = fresh != NULL;
    for (int d = 0; ok && d < n; d++) {
        fresh[d] = ring_buf_alloc(cap);
        ok = fresh[d] != MAP_FAILED;
        if (!ok)
            fresh[d] = NULL;
    }
    if (!ok) {
        for (int d = 0; fresh != NULL && d < n; d++)
            ring_buf_free(fresh[d], cap);
        free(fresh);
        pthread_mutex_unlock(&ring->mode_lock);
        return -CUPROF_EHOSTMEM;
    }
    if (mode == HISTORY_OFF)
        atomic_store(&ring->mode, (int)mode); /* stop appends before the swap */
    for (int d = 0; d < n; d++) {
        struct ring_device *dev = &ring->devices[d];
        pthread_mutex_lock(&dev->lock);
        struct trace_record *old = dev->buf;
        size_t old_cap = dev->capacity;
        size_t kept = ring_copy_out_locked(dev, fresh[d], cap);
        if (mode == HISTORY_OFF) {
            dev->cleared += dev->dropped + dev->count;
            dev->dropped = 0; /* PyTorch: enabled=None clears the history. */
        } else {
            dev->dropped += dev->count - kept;
        }
        dev->buf = fresh[d];
        dev->capacity = cap;
        dev->count = kept;
        dev->next = cap == 0 ? 0 : kept % cap;
        pthread_mutex_unlock(&dev->lock);
        ring_buf_free(old, old_cap); /* outside the device lock */
    }
    free(fresh);
    ring->max_entries = max_entries;
    atomic_store(&ring->mode, (int)mode);
    pthread_mutex_unlock(&ring->mode_lock);
    return 0;
}

enum history_mode
trace_ring_mode(struct trace_ring *ring)
{
    return (enum history_mode)atomic_load(&ring->mode);
}

uint32_t
trace_ring_traced_actions(struct trace_ring *ring)
{
    return trace_ring_mode(ring) == HISTORY_OFF ? 0 : TRACE_ACTIONS_ALL;
}

size_t
trace_ring_capacity(struct trace_ring *ring)
{
    if (ring == NULL || ring->device_count == 0)
        return 0;
    struct ring_device *dev = &ring->devices[0];
    pthread_mutex_lock(&dev->lock);
    size_t cap = dev->capacity;
    pthread_mutex_unlock(&dev->lock);
    return cap;
}

uint32_t
trace_ring_intern_label(struct trace_ring *ring, const char *label)
{
    return trace_ring_intern_stage(ring, label, SNAP_STAGE_MARK);
}

uint32_t
trace_ring_intern_stage(struct trace_ring *ring, const char *label, enum snap_stage stage)
{
    return ring != NULL ? label_table_intern(ring->labels, label, stage) : 0;
}

const char *
trace_ring_label(struct trace_ring *ring, uint32_t id)
{
    return trace_ring_label_stage(ring, id, NULL);
}

const char *
trace_ring_label_stage(struct trace_ring *ring, uint32_t id, enum snap_stage *stage)
{
    return ring != NULL ? label_table_text(ring->labels, id, stage) : NULL;
}

void
trace_ring_reset_after_fork(struct trace_ring *ring)
{
    if (ring == NULL)
        return;
    pthread_mutex_init(&ring->mode_lock, NULL);
    if (ring->owns_labels)
        label_table_reset_after_fork(ring->labels);
    for (int d = 0; d < ring->device_count; d++)
        pthread_mutex_init(&ring->devices[d].lock, NULL);
}
