/* replay.h: the pieces of `cuprof replay` besides its loop: the fake device the allocator replays
 *   on, and the starting state of a history that begins mid-run, rebuilt in the allocator.
 * Locking: none (single-threaded command).
 * Hot path: no; once per replayed setting. */
#ifndef CUPROF_CLI_REPLAY_H
#define CUPROF_CLI_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocator/alloc_config.h"
#include "allocator/allocator.h"
#include "allocator/device_ops.h"
#include "cli/span_map.h"
#include "snapshot/snapshot_model.h"

/* The capacity of a replay whose device size is unknown (no --memory, no recorded OOM). */
#define REPLAY_UNLIMITED (UINT64_MAX / 4)

/* Card size an unlimited replay reports (expandable reservations are 1 1/8 of it). */
#define REPLAY_VMM_TOTAL ((uint64_t)80 << 30)

/* The fake device: recorded segment addresses where the sizes agree, else fresh ones. */
struct fake_device {
    const struct snap_device_trace *trace;
    size_t cursor; /* next recorded segment_alloc to offer */
    uint64_t forced_addr;
    uint64_t bump, used, capacity;
    uint64_t card_total;  /* the recorded card's total bytes (cuprof.device_footprint), or 0 */
    uint64_t total;       /* the total it reports when set; else min(capacity, card) */
    struct span_map live; /* segment addr -> size */
    /* Segments made by the current request (for --check). */
    uint64_t made[8];
    size_t made_count;
    /* Events: one recorded while event_key is non-zero stays pending until
     * replay_device_complete(key), as a recorded free_requested waits for its free_completed;
     * any other completes at once. */
    uint64_t event_key;
    struct span_map pending_events; /* key -> the pending event (its address as the size) */
    /* Expandable reservations (one per stream and pool: a handful). */
    struct {
        uint64_t addr, size;
    } reserved[64];
    size_t nreserved;
};

/* The card's total the fake device reports (cuMemGetInfo's total): reservations of expandable
 * segments and a fraction cap are sized from it. */
uint64_t replay_device_total(const struct fake_device *f);
/* The device_ops of a fake device (ctx is f). */
void replay_device_ops(struct fake_device *f, struct device_ops *ops);
/* Completes the pending event recorded under `key`; false when there is none. */
bool replay_device_complete(struct fake_device *f, uint64_t key);

/* A free block of the starting state whose start is a guess: it lies behind a live large block
 * (its owner) that may hold an unsplit remainder of up to 1 MiB no trace entry shows. */
struct replay_guess {
    uint64_t owner;   /* the live block's address (recorded = replayed in the starting state) */
    uint64_t size;    /* the owner's rebuilt size: rounded request + remainder so far */
    uint64_t rounded; /* its rounded request */
    uint64_t limit;   /* where the free block behind it ends (next live block or segment end) */
    bool live;        /* the owner was not freed yet in this replay */
};

/* What replay_run.addr_of's `stack` field says of a replayed block. */
enum replay_block_kind {
    REPLAY_BLOCK_CACHED = 0,   /* from the allocator's pools */
    REPLAY_BLOCK_EXTERNAL = 1, /* managed/VMM/driver-pool memory, only tracked */
    REPLAY_BLOCK_PENDING = 2,  /* free requested, waiting for its recorded free_completed */
};

/* The trace's allocs and frees by address, to see where free blocks of the starting state
 * began: built once per history, read by every replay of it. */
struct replay_index;
/* t NULL: an empty index. NULL when host memory runs out. */
struct replay_index *replay_index_build(const struct snap_device_trace *t);
void replay_index_free(struct replay_index *ix);

/* One replay of one setting. */
struct replay_run {
    const struct snapshot *snap;
    size_t device;
    struct allocator *alloc;
    struct fake_device dev;
    struct span_map addr_of; /* recorded address -> replayed address (size), kind (stack) */
    bool check;
    const struct replay_index *index; /* the plan's, or NULL (replay_start_state builds one) */
    /* Unsplit remainders learnt by earlier replays: owner address -> its whole block size. */
    struct span_map *remainders;
    /* The guessed free blocks of the starting state, by owner address. */
    struct replay_guess *guesses;
    size_t nguesses;
};

/* Recreates the state at the first entry in r->alloc: each segment at its address, carved so that
 * the blocks live then sit at their recorded addresses (r->addr_of maps them), the free gaps
 * between them cached. r->alloc has no rounding divisions yet (every size asked here is exact);
 * `config` says how the blocks were rounded and split when they were made (the recorded
 * settings) and whether expandable runs are rebuilt as runs. Counts what could not be placed in
 * *misses (a block placed elsewhere is still live, and mapped); fills r->guesses (free with
 * free()). Returns 0, or -1 when host memory runs out. */
__attribute__((warn_unused_result)) int
replay_start_state(struct replay_run *r, const struct alloc_config *config, size_t *misses);

/* A copy of the replay device's segments and blocks (allocator_copy_locked under its lock):
 * *segs and *blks are malloc'ed (free both, also on failure). Returns 0 or -1. */
int replay_copy_state(struct replay_run *r, struct segment_info **segs, size_t *nseg,
                      struct block_info **blks, size_t *nblk);

/* The replay freed the block at `addr`: a guess it owned no longer stands. */
void replay_guess_freed(struct replay_run *r, uint64_t addr);

/* The replay handed out `got` for a request of `rounded` bytes where the recording did not. When
 * `got` is a guessed free block whose owner is still live, the recording proves that block was
 * smaller than `rounded`: its owner held a larger unsplit remainder. Learns the smallest such
 * remainder into r->remainders (the block at `got` is freed to measure it: the replay must stop)
 * and returns 1; 0 when the difference has another cause (or the remainder would exceed what
 * PyTorch leaves unsplit); -1 when host memory runs out. */
__attribute__((warn_unused_result)) int replay_start_learn(struct replay_run *r, uint64_t got,
                                                           uint64_t rounded);

#endif
