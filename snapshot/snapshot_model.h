/* snapshot_model.h: one snapshot in memory (PyTorch 2.x `_snapshot()` plus cuprof's section), as
 *   built by a live dump or by a reader, and consumed by the writers and by `cuprof`.
 * Locking: none: a model is owned by one thread.
 * Hot path: no (dump time and the command line only). */
#ifndef CUPROF_SNAPSHOT_MODEL_H
#define CUPROF_SNAPSHOT_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Flat arrays, not a tree: a 10^6-entry history is one array of compact entries, and frames and
 * stacks are shared by index (the writers memoize them, as PyTorch's pickles do). */

/* PyTorch's frame dict: {"name", "filename", "line"}. Strings live in the model's arena. */
struct snap_frame {
    const char *name;
    const char *filename;
    int64_t line; /* 1..INT32_MAX, or SNAP_LINE_UNKNOWN */
};
/* PyTorch's own "unknown" for C++ frames; the readers map size_t -1 and other impossible lines
 * to it, so no writer or report ever shows 18446744073709551615. */
#define SNAP_LINE_UNKNOWN 0
/* No size in a snapshot can exceed the 57-bit virtual address space of 5-level paging: larger
 * values are garbage, and refusing them keeps every sum cuprof forms far from 64-bit overflow. */
#define SNAP_MAX_BYTES (UINT64_C(1) << 57)

/* A stack is a run of frame indices, innermost first. stacks[0] is always the empty stack, so a
 * stack index of 0 means "frames: []". */
struct snap_stack {
    uint32_t first; /* index into snapshot.stack_frames */
    uint32_t count;
};

struct snap_block {
    uint64_t addr;
    uint64_t size;
    uint64_t requested_size;
    uint32_t stack;    /* index into snapshot.stacks */
    uint8_t state;     /* enum block_state (allocator/allocator.h) */
    uint8_t pool;      /* enum trace_pool: TRACE_POOL_NVTX inside a program's own pool */
    const char *label; /* user_metadata: an NVTX region's name (in the arena), or NULL */
};

struct snap_segment {
    int32_t device;
    uint64_t addr;
    uint64_t total_size;
    uint64_t allocated_size;
    uint64_t active_size;
    uint64_t requested_size;
    uint64_t stream;
    bool is_small; /* segment_type "small" or "large" */
    bool is_expandable;
    int64_t pool_id[2];  /* segment_pool_id; (0, 0) for the default pool */
    uint8_t cuprof_pool; /* enum trace_pool: cuprof's own tag (managed, VMM, trace, ...) */
    uint32_t stack;
    uint32_t first_block; /* index into snapshot.blocks; blocks in address order */
    uint32_t block_count;
};

/* 40 bytes: a 10^7-entry history is 400 MB in memory, less than its pickle (45 bytes an entry). */
struct snap_entry {
    uint8_t action; /* enum trace_action (allocator/trace_sink.h) */
    uint8_t pool;   /* enum trace_pool */
    bool has_time;
    bool has_label; /* the text is kept beside the entries: snapshot_entry_label */
    uint32_t stack; /* index into snapshot.stacks */
    union {
        uint64_t addr;
        uint64_t device_free; /* oom entries, which have no address (as in PyTorch's own) */
    };
    uint64_t size;
    uint64_t stream;
    int64_t time_us; /* microseconds since the Unix epoch */
};
_Static_assert(sizeof(struct snap_entry) == 40, "a trace entry stays 40 bytes");

/* What an annotation is: a mark (cuprof_annotate, nvtxMark) or a range's start or end (an NVTX
 * range; PyTorch's external_annotations "stage": "START"/"END"). An annotate entry with an
 * address names that allocation instead (an NVTX memory region's name: PyTorch's newest
 * "annotate" action, attaching user_metadata to a live allocation). */
enum snap_stage { SNAP_STAGE_MARK = 0, SNAP_STAGE_START = 1, SNAP_STAGE_END = 2 };

/* The text of a labelled entry: an annotation (cuprof_annotate) or PyTorch's user_metadata. */
struct snap_label {
    size_t entry;     /* its index in the trace */
    const char *text; /* in the model's arena */
    uint8_t stage;    /* enum snap_stage (annotate entries) */
};

struct snap_device_trace {
    struct snap_entry *entries; /* oldest first */
    size_t count;
    uint64_t dropped;          /* entries the ring overwrote before this dump */
    struct snap_label *labels; /* one per entry with has_label, in entry order */
    size_t label_count;
};

/* One "key": int value pair (memory_stats with PyTorch's flat key names). */
struct snap_stat {
    const char *key;
    int64_t value;
};

/* One "key": "value" pair (cuprof.config: every effective setting, as text). */
struct snap_setting {
    const char *key;
    const char *value;
};

struct snap_allocator_settings {
    const char *alloc_conf; /* "PYTORCH_CUDA_ALLOC_CONF": the raw settings string */
    int64_t max_split_size; /* SIZE_MAX is written as -1, as PyTorch does */
    double garbage_collection_threshold;
    bool expandable_segments;
    bool release_lock_on_cudamalloc;
    uint32_t roundup_power2_divisions[16];
    int64_t pinned_num_register_threads; /* PyTorch's pinned host allocator settings: 1, False */
    bool pinned_use_cuda_host_register;
};

/* "cuprof"."python": the interpreter cuprof found and whether its frames are in the stacks. */
struct snap_python {
    bool present;
    const char *interpreter; /* "CPython 3.11.7" */
    const char *frames;      /* "captured" or "native frames only: <reason>" */
    int64_t captures_gil_held, captures_gil_released;
};
struct snap_library;
struct snap_footprint;
struct snap_oom_message;

/* cuprof's own section ("cuprof" key); absent in snapshots PyTorch wrote. */
struct snap_cuprof {
    bool present;
    const char *version;
    const char *mode; /* "cache", "trace" or "off" */
    /* The cache asked a segment of just the request before an OOM (alloc_config.h): a replay of
     * this recording takes the same step. False in older files and PyTorch's. */
    bool fit_segment_on_oom;
    const char *host;
    int64_t pid;
    int64_t rank; /* -1 when no rank variable was set */
    const char **argv;
    size_t argc;
    struct snap_setting *config;
    size_t config_count;
    struct snap_stat **stats;       /* per device: an array of stats */
    size_t *stats_count;            /* per device */
    uint64_t *dropped_entries;      /* per device (same as device_traces[d].dropped) */
    struct snap_library *libraries; /* snapshot_usage.h: device memory by library */
    size_t library_count;
    struct snap_footprint *footprints; /* snapshot_usage.h: the driver's used bytes per device */
    size_t footprint_count;
    struct snap_oom_message *oom_messages; /* snapshot_oom.h: each OOM's message */
    size_t oom_message_count;
    struct snap_python python;
};

struct snapshot {
    struct snap_segment *segments; /* sorted by (device, addr) */
    size_t segment_count;
    struct snap_block *blocks;
    size_t block_count;
    struct snap_device_trace *device_traces;
    size_t device_count;
    struct snap_frame *frames;
    size_t frame_count;
    uint32_t *stack_frames; /* frame indices, referenced by snap_stack */
    size_t stack_frame_count;
    struct snap_stack *stacks; /* stacks[0] is the empty stack */
    size_t stack_count;
    bool has_allocator_settings;
    struct snap_allocator_settings allocator_settings;
    struct snap_cuprof cuprof;
    /* Reading only: one line per field name the reader could not use, e.g. `run.pickle:
     * segments[0].blocks[1]: field "size" is -5: not a size in bytes; segment skipped`. The
     * command line prints them after "cuprof: ". */
    const char **warnings;
    size_t warning_count;
    struct snapshot_arena *arena; /* owns every string and array above */
};

/* The label of trace entry i (NULL when it has none): a binary search among the trace's labels. */
const char *snapshot_entry_label(const struct snap_device_trace *trace, size_t i);

/* ---- Building a model (snapshot_model.c). Every array grows only through these helpers; strings
 * are interned in the model's arena. Fallible helpers return 0 or -CUPROF_EHOSTMEM. */

/* A model with `device_count` empty device traces and stacks[0] = the empty stack; NULL on OOM. */
struct snapshot *snapshot_create(size_t device_count);
void snapshot_free(struct snapshot *snap);

/* Grows device_traces (and the per-device cuprof arrays) to at least `device_count` devices. */
__attribute__((warn_unused_result)) int snapshot_set_device_count(struct snapshot *snap,
                                                                  size_t device_count);
/* One shared copy per distinct string; bytes that are not UTF-8 become \xHH. NULL on OOM. */
const char *snapshot_intern(struct snapshot *snap, const char *s);
const char *snapshot_intern_n(struct snapshot *snap, const char *s, size_t len);
/* Deduplicated: the same (name, filename, line) gives the same index. */
__attribute__((warn_unused_result)) int snapshot_add_frame(struct snapshot *snap, const char *name,
                                                           const char *filename, int64_t line,
                                                           uint32_t *index);
/* The same for strings already interned in this model (snapshot_intern's results). */
__attribute__((warn_unused_result)) int snapshot_add_frame_interned(struct snapshot *snap,
                                                                    const char *name,
                                                                    const char *filename,
                                                                    int64_t line, uint32_t *index);
/* Deduplicated: the same frame-index sequence gives the same stack index; count 0 gives 0. */
__attribute__((warn_unused_result)) int
snapshot_add_stack(struct snapshot *snap, const uint32_t *frames, size_t count, uint32_t *index);
/* Appends a segment (its first_block/block_count are set here: blocks follow with add_block). */
__attribute__((warn_unused_result)) int snapshot_add_segment(struct snapshot *snap,
                                                             const struct snap_segment *segment);
/* Appends a block to the last segment added. */
__attribute__((warn_unused_result)) int snapshot_add_block(struct snapshot *snap,
                                                           const struct snap_block *block);
/* Appends a trace entry to device_traces[device] (grows the device count if needed); its
 * has_label is cleared: labelled entries come through snapshot_add_labeled_entry. */
__attribute__((warn_unused_result)) int snapshot_add_entry(struct snapshot *snap, size_t device,
                                                           const struct snap_entry *entry);
/* The same with a label (copied, interned). */
__attribute__((warn_unused_result)) int snapshot_add_labeled_entry(struct snapshot *snap,
                                                                   size_t device,
                                                                   const struct snap_entry *entry,
                                                                   const char *label);
/* The same for an annotation with its stage (SNAP_STAGE_MARK is snapshot_add_labeled_entry). */
__attribute__((warn_unused_result)) int
snapshot_add_annotation(struct snapshot *snap, size_t device, const struct snap_entry *entry,
                        const char *label, enum snap_stage stage);
/* One annotation to merge into a trace by time (PyTorch's external_annotations). */
struct snap_annotation {
    const char *name;
    enum snap_stage stage;
    int64_t time_us;
};
/* Inserts annotations (any order) into device_traces[device] where their times fall: a start
 * before the entries of its microsecond, an end after them; a trace without times gets them at
 * its end. 0 or -CUPROF_EHOSTMEM (the trace is then unchanged). */
__attribute__((warn_unused_result)) int snapshot_merge_annotations(struct snapshot *snap,
                                                                   size_t device,
                                                                   struct snap_annotation *ann,
                                                                   size_t count);
/* The stage of trace entry i's label (SNAP_STAGE_MARK when it has none). */
enum snap_stage snapshot_entry_stage(const struct snap_device_trace *trace, size_t i);
/* Makes room for `count` more entries on `device` (one allocation for a whole ring copy). */
__attribute__((warn_unused_result)) int snapshot_reserve_entries(struct snapshot *snap,
                                                                 size_t device, size_t count);
/* cuprof section helpers (they set cuprof.present). Strings and arrays are copied. */
__attribute__((warn_unused_result)) int snapshot_add_config(struct snapshot *snap, const char *key,
                                                            const char *value);
__attribute__((warn_unused_result)) int snapshot_set_argv(struct snapshot *snap,
                                                          const char *const *argv, size_t argc);
__attribute__((warn_unused_result)) int snapshot_set_stats(struct snapshot *snap, size_t device,
                                                           const struct snap_stat *stats,
                                                           size_t count);

#endif
