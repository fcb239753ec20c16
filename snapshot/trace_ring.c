/* trace_ring.c: per-device ring buffers of trace_record, plus the annotation label table.
 * Annotations (NVTX ranges and marks, cuprof_annotate) live in a second ring per device with a
 * lock of their own, so that a thread emitting NVTX never holds a lock the allocator's appends
 * take. Each annotation notes how many allocator entries came before it (`at`, read from an
 * atomic counter under the annotations' lock); readers merge the two rings by it. An entry's
 * position in the merged history (trace_ring_end's numbering): allocator entry a is
 * a + the number of annotations with at <= a; annotation j (counted from the first ever) is
 * at_j + j. Both are fixed once the entry exists: an annotation made after entry a was appended
 * reads at > a. */
#include "snapshot/trace_ring.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "allocator/alloc_lock.h"
#include "allocator/cuprof_errors.h"
#include "snapshot/label_table.h"

/* Every lock of the history counts in alloc_lock_depth (alloc_lock.h): an exit in a signal
 * handler that interrupted its holder must not wait for it. */
static inline void
ring_mutex_lock(pthread_mutex_t *mutex)
{
    alloc_lock_depth++;
    pthread_mutex_lock(mutex);
}

static inline void
ring_mutex_unlock(pthread_mutex_t *mutex)
{
    pthread_mutex_unlock(mutex);
    alloc_lock_depth--;
}

static_assert(sizeof(struct trace_record) == 40, "trace_record must stay 40 bytes");

/* One annotation: its label and time, and the allocator entries recorded before it. */
struct ring_note {
    int64_t time_us;
    uint64_t at;
    uint32_t label_id;
};

/* Locks: `lock` (allocator appends, readers, changes) before `notes_lock` (annotations, readers,
 * changes); an annotation takes notes_lock alone. */
struct ring_device {
    pthread_mutex_t lock;
    struct trace_record *buf; /* protected by lock; mmap'd, capacity entries */
    size_t capacity;          /* protected by lock; 0 when history is off */
    size_t next;              /* protected by lock; slot the next record goes to */
    size_t count;             /* protected by lock; <= capacity */
    uint64_t dropped;         /* protected by lock; overwritten since the last clear */
    uint64_t cleared;         /* protected by lock; recorded before the last clear */

    /* cleared + dropped + count, written under lock and read by annotations without it: the one
     * line both sides touch, alone on it. */
    _Alignas(64) _Atomic uint64_t appended;

    _Alignas(64) pthread_mutex_t notes_lock;
    struct ring_note *notes; /* protected by notes_lock; mmap'd, notes_capacity entries */
    size_t notes_capacity;   /* protected by notes_lock; = capacity (changed under both locks) */
    size_t notes_next;       /* protected by notes_lock */
    size_t notes_count;      /* protected by notes_lock; <= notes_capacity */
    uint64_t notes_dropped;  /* protected by notes_lock; overwritten since the last clear */
    uint64_t notes_cleared;  /* protected by notes_lock */
    uint64_t gone_at;        /* protected by notes_lock; the newest overwritten or cleared
                                annotation's `at` (allocator entries before it are gone too) */
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

/* Lazily backed: a 10^6-entry ring costs RSS only for the entries written. */
static void *
ring_map(size_t entries, size_t size)
{
    if (entries == 0)
        return NULL;
    if (entries > SIZE_MAX / size)
        return MAP_FAILED;
    return mmap(NULL, entries * size, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}

static void
ring_unmap(void *buf, size_t entries, size_t size)
{
    if (buf != NULL)
        munmap(buf, entries * size);
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
    /* Cache-line aligned, whole lines: nothing else the program writes shares a line with a
     * device's annotations or its entries. */
    size_t size = sizeof(struct trace_ring) + (size_t)device_count * sizeof(struct ring_device);
    size = (size + 63) / 64 * 64;
    struct trace_ring *ring = aligned_alloc(64, size);
    if (ring == NULL)
        return NULL;
    memset(ring, 0, size);
    ring->device_count = device_count;
    ring->max_entries = max_entries;
    ring->labels = labels;
    atomic_init(&ring->mode, (int)mode);
    pthread_mutex_init(&ring->mode_lock, NULL);
    size_t cap = ring_capacity_for(mode, max_entries);
    for (int d = 0; d < device_count; d++) {
        struct ring_device *dev = &ring->devices[d];
        pthread_mutex_init(&dev->lock, NULL);
        pthread_mutex_init(&dev->notes_lock, NULL);
        atomic_init(&dev->appended, 0);
        dev->buf = ring_map(cap, sizeof(*dev->buf));
        dev->notes = ring_map(cap, sizeof(*dev->notes));
        dev->capacity = dev->notes_capacity = cap;
        if (dev->buf == MAP_FAILED || dev->notes == MAP_FAILED) {
            if (dev->buf == MAP_FAILED)
                dev->buf = NULL;
            if (dev->notes == MAP_FAILED)
                dev->notes = NULL;
            ring->device_count = d + 1;
            trace_ring_destroy(ring);
            return NULL;
        }
    }
    return ring;
}

void
trace_ring_destroy(struct trace_ring *ring)
{
    if (ring == NULL)
        return;
    for (int d = 0; d < ring->device_count; d++) {
        struct ring_device *dev = &ring->devices[d];
        ring_unmap(dev->buf, dev->capacity, sizeof(*dev->buf));
        ring_unmap(dev->notes, dev->notes_capacity, sizeof(*dev->notes));
        pthread_mutex_destroy(&dev->lock);
        pthread_mutex_destroy(&dev->notes_lock);
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
    ring_mutex_lock(&dev->lock);
    if (dev->capacity > 0) {
        dev->buf[dev->next] = *rec;
        if (++dev->next == dev->capacity)
            dev->next = 0;
        if (dev->count < dev->capacity)
            dev->count++;
        else
            dev->dropped++;
        atomic_store_explicit(&dev->appended, dev->cleared + dev->dropped + dev->count,
                              memory_order_release);
    }
    ring_mutex_unlock(&dev->lock);
}

/* Appends one annotation to a device's notes; never takes the allocator entries' lock. */
static void
ring_note_append(struct ring_device *dev, uint32_t label_id, int64_t time_us)
{
    ring_mutex_lock(&dev->notes_lock);
    if (dev->notes_capacity > 0) {
        struct ring_note *slot = &dev->notes[dev->notes_next];
        if (dev->notes_count == dev->notes_capacity) {
            dev->gone_at = slot->at; /* the oldest, overwritten now */
            dev->notes_dropped++;
        } else {
            dev->notes_count++;
        }
        /* Read under notes_lock, so readers holding it see every annotation with its count. */
        *slot = (struct ring_note){.time_us = time_us,
                                   .at = atomic_load_explicit(&dev->appended, memory_order_acquire),
                                   .label_id = label_id};
        if (++dev->notes_next == dev->notes_capacity)
            dev->notes_next = 0;
    }
    ring_mutex_unlock(&dev->notes_lock);
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
    int64_t when = time_us != 0 ? time_us : now_us();
    for (int d = 0; d < ring->device_count; d++)
        ring_note_append(&ring->devices[d], label_id, when);
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

/* ---- Reading: the two rings of a device merged, with both its locks held. */

static void
ring_lock_both(struct ring_device *dev)
{
    ring_mutex_lock(&dev->lock);
    ring_mutex_lock(&dev->notes_lock);
}

static void
ring_unlock_both(struct ring_device *dev)
{
    ring_mutex_unlock(&dev->notes_lock);
    ring_mutex_unlock(&dev->lock);
}

/* The merged history as held now. Allocator entries [a_oldest, a_end) and annotations
 * [n_oldest, n_end) are in their rings (numbered from the first ever); the newest `kept` merged
 * entries, ending at merged position `end`, are the history: older held ones come before
 * something already overwritten or cleared, so they count as dropped. */
struct ring_view {
    const struct ring_device *dev;
    uint64_t a_oldest, a_end;
    uint64_t n_oldest, n_end;
    uint64_t end, kept;
};

static const struct ring_note *
view_note(const struct ring_view *v, uint64_t j)
{
    const struct ring_device *dev = v->dev;
    return &dev->notes[(dev->notes_next + dev->notes_capacity - (size_t)(v->n_end - j)) %
                       dev->notes_capacity];
}

static size_t
view_entry_slot(const struct ring_view *v, uint64_t a)
{
    const struct ring_device *dev = v->dev;
    return (dev->next + dev->capacity - (size_t)(v->a_end - a)) % dev->capacity;
}

/* The first held annotation j with key(j) >= bound (n_end when none): `at` and at + j only grow
 * with j. */
static uint64_t
view_first_note(const struct ring_view *v, uint64_t bound, bool by_position)
{
    uint64_t lo = v->n_oldest, hi = v->n_end;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        uint64_t key = view_note(v, mid)->at + (by_position ? mid : 0);
        if (key < bound)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static struct ring_view
ring_view_locked(const struct ring_device *dev)
{
    struct ring_view v = {.dev = dev};
    v.a_end = dev->cleared + dev->dropped + dev->count;
    v.a_oldest = v.a_end - dev->count;
    v.n_end = dev->notes_cleared + dev->notes_dropped + dev->notes_count;
    v.n_oldest = v.n_end - dev->notes_count;
    v.end = v.a_end + v.n_end;
    if (dev->capacity == 0)
        return v;
    /* Allocator entries after the newest lost annotation, annotations after the newest lost
     * allocator entry (a_oldest - 1): the history has no hole. */
    uint64_t a_first = v.a_oldest > dev->gone_at ? v.a_oldest : dev->gone_at;
    uint64_t entries = v.a_end > a_first ? v.a_end - a_first : 0;
    uint64_t notes = v.n_end - view_first_note(&v, v.a_oldest, false);
    v.kept = entries + notes < dev->capacity ? entries + notes : dev->capacity;
    return v;
}

/* Copies n merged entries from merged position `from` (within the history), oldest first;
 * returns how many (n, unless the two rings disagree with the view: then what was there). */
static size_t
view_copy(const struct ring_view *v, uint64_t from, struct trace_record *out, size_t n)
{
    const struct ring_device *dev = v->dev;
    uint64_t j = view_first_note(v, from, true); /* annotations before `from`: j */
    uint64_t a = from - j;
    size_t done = 0;
    while (done < n) {
        if (j < v->n_end && view_note(v, j)->at <= a) {
            const struct ring_note *note = view_note(v, j++);
            out[done++] = (struct trace_record){
                .time_us = note->time_us, .stack_id = note->label_id, .action = TRACE_ANNOTATE};
            continue;
        }
        /* A run of allocator entries up to the next annotation's place. */
        uint64_t limit = j < v->n_end ? view_note(v, j)->at : v->a_end;
        size_t run = limit - a < n - done ? (size_t)(limit - a) : n - done;
        if (run == 0 || limit > v->a_end)
            break; /* never spin or read past the ring, whatever its counters say */
        size_t slot = view_entry_slot(v, a);
        size_t first = dev->capacity - slot < run ? dev->capacity - slot : run;
        memcpy(out + done, dev->buf + slot, first * sizeof(*out));
        memcpy(out + done + first, dev->buf, (run - first) * sizeof(*out));
        done += run;
        a += run;
    }
    return done;
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
    ring_lock_both(dev);
    size_t n = (size_t)ring_view_locked(dev).kept;
    ring_unlock_both(dev);
    return n;
}

size_t
trace_ring_copy_newest(struct trace_ring *ring, int device, struct trace_record *out, size_t cap,
                       uint64_t *dropped, uint64_t *end)
{
    struct ring_device *dev = ring_device(ring, device);
    size_t n = 0;
    uint64_t lost = 0, last = 0;
    if (dev != NULL) {
        ring_lock_both(dev);
        struct ring_view v = ring_view_locked(dev);
        n = v.kept < cap ? (size_t)v.kept : cap;
        n = view_copy(&v, v.end - n, out, n);
        lost = v.end - v.kept - dev->cleared - dev->notes_cleared;
        last = v.end;
        ring_unlock_both(dev);
    }
    if (dropped != NULL)
        *dropped = lost;
    if (end != NULL)
        *end = last;
    return n;
}

size_t
trace_ring_copy_locked(struct trace_ring *ring, int device, struct trace_record *out, size_t cap,
                       uint64_t *dropped)
{
    return trace_ring_copy_newest(ring, device, out, cap, dropped, NULL);
}

uint64_t
trace_ring_dropped(struct trace_ring *ring, int device)
{
    struct ring_device *dev = ring_device(ring, device);
    if (dev == NULL)
        return 0;
    ring_lock_both(dev);
    struct ring_view v = ring_view_locked(dev);
    uint64_t n = v.end - v.kept - dev->cleared - dev->notes_cleared;
    ring_unlock_both(dev);
    return n;
}

uint64_t
trace_ring_end(struct trace_ring *ring, int device)
{
    struct ring_device *dev = ring_device(ring, device);
    if (dev == NULL)
        return 0;
    ring_lock_both(dev);
    uint64_t end = ring_view_locked(dev).end;
    ring_unlock_both(dev);
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
    ring_lock_both(dev);
    struct ring_view v = ring_view_locked(dev);
    uint64_t oldest = v.end - v.kept;
    uint64_t start = from < oldest ? oldest : from > v.end ? v.end : from;
    size_t n = v.end - start < cap ? (size_t)(v.end - start) : cap;
    n = view_copy(&v, start, out, n);
    ring_unlock_both(dev);
    *first = start;
    return n;
}

/* Drops every annotation of a device (both locks held). */
static void
ring_notes_clear_locked(struct ring_device *dev)
{
    dev->notes_cleared += dev->notes_dropped + dev->notes_count;
    dev->notes_dropped = 0;
    dev->notes_count = 0;
    dev->notes_next = 0;
    dev->gone_at = dev->cleared + dev->dropped + dev->count;
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
        ring_lock_both(dev);
        dev->cleared += dev->dropped + dev->count;
        dev->next = 0;
        dev->count = 0;
        dev->dropped = 0;
        ring_notes_clear_locked(dev);
        ring_unlock_both(dev);
    }
}

/* Copies the newest min(count, cap) allocator entries, oldest first. Caller holds dev->lock. */
static size_t
ring_entries_out_locked(const struct ring_device *dev, struct trace_record *out, size_t cap)
{
    size_t n = dev->count < cap ? dev->count : cap;
    if (n == 0)
        return 0;
    size_t start = (dev->next + dev->capacity - n) % dev->capacity;
    size_t first = dev->capacity - start < n ? dev->capacity - start : n;
    memcpy(out, dev->buf + start, first * sizeof(*out));
    memcpy(out + first, dev->buf, (n - first) * sizeof(*out));
    return n;
}

/* The same for annotations; the newest one left out becomes gone_at. Caller holds notes_lock. */
static size_t
ring_notes_out_locked(struct ring_device *dev, struct ring_note *out, size_t cap)
{
    size_t n = dev->notes_count < cap ? dev->notes_count : cap;
    size_t start = dev->notes_capacity == 0
                       ? 0
                       : (dev->notes_next + dev->notes_capacity - n) % dev->notes_capacity;
    if (n < dev->notes_count)
        dev->gone_at = dev->notes[(start + dev->notes_capacity - 1) % dev->notes_capacity].at;
    if (n == 0)
        return 0;
    size_t first = dev->notes_capacity - start < n ? dev->notes_capacity - start : n;
    memcpy(out, dev->notes + start, first * sizeof(*out));
    memcpy(out + first, dev->notes, (n - first) * sizeof(*out));
    return n;
}

int
trace_ring_set_mode(struct trace_ring *ring, enum history_mode mode, size_t max_entries)
{
    if (ring == NULL || mode < HISTORY_ALL || mode > HISTORY_OFF)
        return -CUPROF_EINVAL;
    ring_mutex_lock(&ring->mode_lock);
    size_t cap = ring_capacity_for(mode, max_entries);
    int n = ring->device_count;
    /* Allocate every new buffer before touching any ring, so a failure changes nothing. */
    struct trace_record **fresh = calloc((size_t)n + 1, sizeof(*fresh));
    struct ring_note **fresh_notes = calloc((size_t)n + 1, sizeof(*fresh_notes));
    bool ok = fresh != NULL && fresh_notes != NULL;
    for (int d = 0; ok && d < n; d++) {
        fresh[d] = ring_map(cap, sizeof(**fresh));
        fresh_notes[d] = ring_map(cap, sizeof(**fresh_notes));
        ok = fresh[d] != MAP_FAILED && fresh_notes[d] != MAP_FAILED;
    }
    if (!ok) {
        for (int d = 0; fresh != NULL && fresh_notes != NULL && d < n; d++) {
            if (fresh[d] != MAP_FAILED)
                ring_unmap(fresh[d], cap, sizeof(**fresh));
            if (fresh_notes[d] != MAP_FAILED)
                ring_unmap(fresh_notes[d], cap, sizeof(**fresh_notes));
        }
        free(fresh);
        free(fresh_notes);
        ring_mutex_unlock(&ring->mode_lock);
        return -CUPROF_EHOSTMEM;
    }
    if (mode == HISTORY_OFF)
        atomic_store(&ring->mode, (int)mode); /* stop appends before the swap */
    for (int d = 0; d < n; d++) {
        struct ring_device *dev = &ring->devices[d];
        ring_lock_both(dev);
        struct trace_record *old = dev->buf;
        struct ring_note *old_notes = dev->notes;
        size_t old_cap = dev->capacity;
        size_t kept = ring_entries_out_locked(dev, fresh[d], cap);
        size_t kept_notes = ring_notes_out_locked(dev, fresh_notes[d], cap);
        if (mode == HISTORY_OFF) {
            dev->cleared += dev->dropped + dev->count;
            dev->dropped = 0; /* PyTorch: enabled=None clears the history. */
            dev->count = 0;
            ring_notes_clear_locked(dev);
            kept = kept_notes = 0;
        } else {
            dev->dropped += dev->count - kept;
            dev->notes_dropped += dev->notes_count - kept_notes;
        }
        dev->buf = fresh[d];
        dev->notes = fresh_notes[d];
        dev->capacity = dev->notes_capacity = cap;
        dev->count = kept;
        dev->next = cap == 0 ? 0 : kept % cap;
        dev->notes_count = kept_notes;
        dev->notes_next = cap == 0 ? 0 : kept_notes % cap;
        ring_unlock_both(dev);
        ring_unmap(old, old_cap, sizeof(*old));             /* outside the device's locks */
        ring_unmap(old_notes, old_cap, sizeof(*old_notes)); /* the same capacity */
    }
    free(fresh);
    free(fresh_notes);
    ring->max_entries = max_entries;
    atomic_store(&ring->mode, (int)mode);
    ring_mutex_unlock(&ring->mode_lock);
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
    ring_mutex_lock(&dev->lock);
    size_t cap = dev->capacity;
    ring_mutex_unlock(&dev->lock);
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
    for (int d = 0; d < ring->device_count; d++) {
        pthread_mutex_init(&ring->devices[d].lock, NULL);
        pthread_mutex_init(&ring->devices[d].notes_lock, NULL);
    }
}
