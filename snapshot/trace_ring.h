/* trace_ring.h: per-device bounded history of allocator events (PyTorch's trace ring buffer).
 * Locking: each device's ring has its own tiny mutex for the allocator's entries and another for
 *   annotations (NVTX ranges and marks), so an annotating thread never holds a lock the
 *   allocator's appends take; readers take both and merge. Labels are snapshot/label_table.h's
 *   (a known one is found lock-free).
 * Hot path: trace_ring_sink().record is (no malloc, no logging); everything else is not. */
#ifndef CUPROF_TRACE_RING_H
#define CUPROF_TRACE_RING_H

#include <stddef.h>
#include <stdint.h>

#include "allocator/trace_sink.h"
#include "snapshot/snapshot_model.h"

/* CUPROF_HISTORY; PyTorch's _record_memory_history(enabled="all"|"state"|None). */
enum history_mode { HISTORY_ALL, HISTORY_STATE, HISTORY_OFF };

/* One history entry: 40 bytes. time_us is microseconds since the Unix epoch, read from
 * CLOCK_REALTIME (vDSO) at record time, so no conversion is needed at dump time. */
struct trace_record {
    uint64_t addr; /* device_free for TRACE_OOM, 0 for TRACE_ANNOTATE */
    uint64_t size;
    uint64_t stream;
    int64_t time_us;
    uint32_t stack_id; /* interned stack (snapshot/stacks.h), or label id for TRACE_ANNOTATE */
    uint8_t action;    /* enum trace_action */
    uint8_t pool;      /* enum trace_pool */
};

#define TRACE_RING_DEFAULT_ENTRIES ((size_t)1000000)

struct trace_ring;

/* NULL if out of memory. max_entries 0 means TRACE_RING_DEFAULT_ENTRIES; HISTORY_STATE keeps 1
 * entry whatever max_entries says (PyTorch). Ring storage is mmap'd lazily (RSS grows with use). */
struct trace_ring *trace_ring_create(int device_count, size_t max_entries, enum history_mode mode);
/* The same with the caller's label table (created before the ring: NVTX names ranges before the
 * first CUDA call), which the ring uses but never destroys or resets after fork. */
struct label_table;
struct trace_ring *trace_ring_create_labeled(int device_count, size_t max_entries,
                                             enum history_mode mode, struct label_table *labels);
void trace_ring_destroy(struct trace_ring *ring);

/* The allocator's sink: record appends one trace_event to its device's ring, overwriting the
 * oldest entry when full (and counting it as dropped). Events for devices outside
 * [0, device_count) and every event in HISTORY_OFF are ignored. */
struct trace_sink trace_ring_sink(struct trace_ring *ring);
void trace_ring_record(struct trace_ring *ring, const struct trace_event *event);

/* Called with the allocator's device lock held, so the copy is consistent with the block table;
 * the ring's own locks are taken inside. copy writes min(count, cap) entries, oldest first (the
 * newest `cap` when cap is short) and sets *dropped (may be NULL) to the entries overwritten
 * since the last clear. Returns the number written. copy_newest also sets *end (may be NULL) to
 * trace_ring_end as of the copy (an annotation may come between two calls). */
size_t trace_ring_count_locked(struct trace_ring *ring, int device);
size_t trace_ring_copy_locked(struct trace_ring *ring, int device, struct trace_record *out,
                              size_t cap, uint64_t *dropped);
size_t trace_ring_copy_newest(struct trace_ring *ring, int device, struct trace_record *out,
                              size_t cap, uint64_t *dropped, uint64_t *end);
uint64_t trace_ring_dropped(struct trace_ring *ring, int device);

/* Positions: each entry a device's ring records gets the next number from 0, never reused (a
 * clear or a switch to HISTORY_OFF skips the numbers of the entries it drops), so a reader can
 * come back later for what was recorded since. trace_ring_end is the position the next entry
 * will get; called under the allocator's device lock it matches the stats copied there (an
 * annotation made later numbers after it).
 * trace_ring_copy_from copies up to cap entries from position `from` on, oldest first, returns
 * how many and sets *first to the position of the first one copied: greater than `from` when
 * older entries were overwritten or cleared meanwhile. Only the ring's own lock is taken. */
uint64_t trace_ring_end(struct trace_ring *ring, int device);
size_t trace_ring_copy_from(struct trace_ring *ring, int device, uint64_t from,
                            struct trace_record *out, size_t cap, uint64_t *first);

/* Empties the history (and its dropped count) of one device, or of all with device -1. */
void trace_ring_clear(struct trace_ring *ring, int device);

/* PyTorch _record_memory_history semantics: HISTORY_OFF stops recording and clears (storage is
 * released); HISTORY_STATE keeps 1 entry; HISTORY_ALL keeps max(1, max_entries) (0 means the
 * default). On a resize the newest entries that fit are kept and the others count as dropped.
 * Returns 0 or -CUPROF_EHOSTMEM (the previous mode then stays in force). */
__attribute__((warn_unused_result)) int
trace_ring_set_mode(struct trace_ring *ring, enum history_mode mode, size_t max_entries);
enum history_mode trace_ring_mode(struct trace_ring *ring);
/* The events the ring keeps in its current mode (allocator_set_traced_actions): all, or none in
 * HISTORY_OFF. */
uint32_t trace_ring_traced_actions(struct trace_ring *ring);
size_t trace_ring_capacity(struct trace_ring *ring);

/* cuprof_annotate: interns a label (copied) and returns its id (>= 1), or 0 when out of memory
 * or label is NULL. The same text always gets the same id. Not for the allocator lock (mallocs
 * the first time). trace_ring_intern_stage does the same for a range's start or end
 * (snapshot/label_table.h: the end's id is the start's + 1); a known label costs no lock. */
uint32_t trace_ring_intern_label(struct trace_ring *ring, const char *label);
uint32_t trace_ring_intern_stage(struct trace_ring *ring, const char *label, enum snap_stage stage);
/* The label's text (valid until trace_ring_destroy), or NULL for an unknown id; _stage also says
 * what it marks (stage may be NULL). */
const char *trace_ring_label(struct trace_ring *ring, uint32_t id);
const char *trace_ring_label_stage(struct trace_ring *ring, uint32_t id, enum snap_stage *stage);

/* Records one TRACE_ANNOTATE entry of label `label_id` in every device's ring, all with one
 * time (cuprof_annotate, NVTX marks and ranges). Takes each device's annotation lock in turn,
 * never an allocator lock nor the lock of the allocator's entries. */
void trace_ring_annotate(struct trace_ring *ring, uint32_t label_id);
/* The same at a given time (microseconds since the Unix epoch; 0 means now): NVTX events made
 * before the ring existed. */
void trace_ring_annotate_at(struct trace_ring *ring, uint32_t label_id, int64_t time_us);

/* In the child after fork(): re-initialises the locks another thread may have held. */
void trace_ring_reset_after_fork(struct trace_ring *ring);

#endif
