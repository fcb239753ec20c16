/* alloc_config.h: the allocator's settings (PyTorch's PYTORCH_CUDA_ALLOC_CONF) and their parser.
 * Locking: none: a config is filled once before the allocator is created, then read-only.
 * Hot path: no (parsed once at start-up). */
#ifndef CUPROF_ALLOC_CONFIG_H
#define CUPROF_ALLOC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ALLOC_CONFIG_ROUNDUP_INTERVALS 16

/* How a block freed by cudaFree/cuMemFree becomes reusable. */
enum free_sync {
    FREE_SYNC_DEVICE = 0, /* default: synchronize the device, like the real cudaFree */
    FREE_SYNC_EVENTS = 1, /* record an event on every stream in use; reusable when they complete */
    FREE_SYNC_NONE = 2,   /* trust the program */
};

struct alloc_config {
    bool caching; /* false: every request is its own device allocation (trace mode) */
    /* cuprof's shim only, not a CUPROF_ALLOC_CONF key (PyTorch has no such step, and replays
     * must not take it): when the segment PyTorch's rules ask for cannot be had even after the
     * release and retry, one more try with a segment of just the rounded request before OOM. */
    bool fit_segment_on_oom;
    size_t max_split_size;              /* SIZE_MAX when unset (PyTorch's default) */
    size_t max_non_split_rounding_size; /* default 20 MiB */
    uint32_t roundup_power2_divisions[ALLOC_CONFIG_ROUNDUP_INTERVALS];
    double garbage_collection_threshold; /* 0 = off */
    double per_process_memory_fraction;  /* 0 = no limit set */
    bool expandable_segments;
    bool release_lock_on_cudamalloc;
    size_t release_threshold;   /* bytes, for stream-ordered pools (release_threshold_mb) */
    bool release_threshold_set; /* release_threshold_mb was given: set the default pools' */
    enum free_sync free_sync;
    char raw[512]; /* the settings string as given (allocator_settings) */
};

/* PyTorch's defaults (caching on, no max split, no rounding divisions, no GC, no fraction, no
 * fit_segment_on_oom). */
void alloc_config_defaults(struct alloc_config *config);

/* An `err` of this many bytes holds any message whole (the longest quote an item as long as the
 * longest settings string accepted, then list every key). */
#define ALLOC_CONFIG_ERR_LEN 5120

/* Parses PyTorch's `key:value,key:value` syntax into *config (starting from the defaults).
 * Returns 0, or -CUPROF_EINVAL with one line in `err` naming the bad item and what is accepted,
 * e.g. `bad value "max_split_size_mb:abc": expected an integer number of MiB >= 20`. */
__attribute__((warn_unused_result)) int
alloc_config_parse(const char *text, struct alloc_config *config, char *err, size_t err_len);

#endif
