/* plot_snapshot.c: writes a training-shaped snapshot of ENTRIES trace entries (PyTorch's
 * layout, cuprof's writer) for `bench_plot` and the report page's tests: parameters allocated
 * first and kept, then iterations of a forward pass that stacks one activation per layer (with a
 * temporary each) and a backward pass that frees them in reverse, each pass annotated; segments
 * of 64 MiB made as needed. Stacks are Python-like user frames under the allocator's machinery.
 * With --midrun the history keeps only its last 90% (the blocks older than that are live at its
 * start, as in a ring that wrapped).
 * Usage: plot_snapshot ENTRIES OUT.pickle [--midrun] */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "allocator/trace_sink.h"
#include "snapshot/snapshot_model.h"
#include "snapshot/snapshot_write.h"

#define SEGMENT   (64u << 20)
#define SLOT      (2u << 20)
#define SLOTS     (SEGMENT / SLOT)
#define LAYERS    24
#define PARAMS    40
#define BASE      0x7f2000000000ull
#define SEG_SPACE 0x10000000ull

struct gen {
    struct snapshot *s;
    size_t target, skip; /* entries to write; entries to leave out at the start */
    size_t made;         /* entries generated (written or skipped) */
    int64_t now;
    uint64_t seed;
    uint64_t *slot_size; /* per slot: requested size of its live block, 0 = free */
    uint32_t *slot_stack;
    uint32_t *free_slots;
    size_t nfree, nslots, nsegs;
    uint32_t stacks[4][LAYERS + PARAMS]; /* per phase and layer */
};

static uint64_t
rnd(struct gen *g)
{
    g->seed ^= g->seed << 13;
    g->seed ^= g->seed >> 7;
    g->seed ^= g->seed << 17;
    return g->seed;
}

static void
die(const char *what)
{
    fprintf(stderr, "plot_snapshot: %s\n", what);
    exit(1);
}

static void
entry(struct gen *g, unsigned action, uint64_t addr, uint64_t size, uint32_t stack,
      const char *label)
{
    g->now += 1 + (int64_t)(rnd(g) % 4);
    if (g->made++ < g->skip)
        return;
    struct snap_entry e = {.action = (uint8_t)action,
                           .stack = stack,
                           .addr = addr,
                           .size = size,
                           .has_time = true,
                           .time_us = g->now};
    int rc =
        label ? snapshot_add_labeled_entry(g->s, 0, &e, label) : snapshot_add_entry(g->s, 0, &e);
    if (rc != 0)
        die("out of memory");
}

static uint64_t
slot_addr(size_t slot)
{
    return BASE + (slot / SLOTS) * SEG_SPACE + (slot % SLOTS) * SLOT;
}

static size_t
take_slot(struct gen *g)
{
    if (g->nfree == 0) {
        size_t seg = g->nsegs++;
        g->nslots += SLOTS;
        g->slot_size = realloc(g->slot_size, g->nslots * sizeof(uint64_t));
        g->slot_stack = realloc(g->slot_stack, g->nslots * sizeof(uint32_t));
        g->free_slots = realloc(g->free_slots, g->nslots * sizeof(uint32_t));
        if (!g->slot_size || !g->slot_stack || !g->free_slots)
            die("out of memory");
        for (size_t k = 0; k < SLOTS; k++) {
            size_t slot = seg * SLOTS + (SLOTS - 1 - k);
            g->slot_size[slot] = 0;
            g->free_slots[g->nfree++] = (uint32_t)slot;
        }
        entry(g, TRACE_SEGMENT_ALLOC, BASE + seg * SEG_SPACE, SEGMENT, g->stacks[0][0], NULL);
    }
    return g->free_slots[--g->nfree];
}

static size_t
alloc(struct gen *g, uint64_t size, uint32_t stack)
{
    size_t slot = take_slot(g);
    g->slot_size[slot] = size;
    g->slot_stack[slot] = stack;
    entry(g, TRACE_ALLOC, slot_addr(slot), size, stack, NULL);
    return slot;
}

static void
release(struct gen *g, size_t slot)
{
    uint64_t size = g->slot_size[slot];
    entry(g, TRACE_FREE_REQUESTED, slot_addr(slot), size, g->slot_stack[slot], NULL);
    entry(g, TRACE_FREE_COMPLETED, slot_addr(slot), size, g->slot_stack[slot], NULL);
    g->slot_size[slot] = 0;
    g->free_slots[g->nfree++] = (uint32_t)slot;
}

/* One stack per phase and layer: user frames (innermost first) over the machinery. */
static void
make_stacks(struct gen *g)
{
    static const char *const phase[] = {"init_params", "forward", "backward", "optimizer_step"};
    for (int p = 0; p < 4; p++)
        for (int k = 0; k < LAYERS + PARAMS; k++) {
            char name[96], file[96];
            uint32_t f[8];
            size_t n = 0;
            struct {
                const char *name, *file;
                int64_t line;
            } frames[8] = {
                {"cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.13", 0},
                {"c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc",
                 "c10/cuda/CUDACachingAllocator.cpp", 1180},
                {name, file, 30 + k},
                {phase[p], "/home/user/model/train.py", 60 + 10 * p},
                {"train_step", "/home/user/model/train.py", 42},
                {"main", "/home/user/model/train.py", 120},
            };
            snprintf(name, sizeof name, "%s.layer%d", p == 0 ? "Param" : "Block", k % 30);
            snprintf(file, sizeof file, "/home/user/model/layers_%d.py", k % 5);
            for (int i = 0; i < 6; i++)
                if (snapshot_add_frame(g->s, frames[i].name, frames[i].file, frames[i].line,
                                       &f[n++]) != 0)
                    die("out of memory");
            if (snapshot_add_stack(g->s, f, n, &g->stacks[p][k]) != 0)
                die("out of memory");
        }
}

static void
iteration(struct gen *g, int it)
{
    char label[64];
    size_t act[LAYERS];
    snprintf(label, sizeof label, "iteration %d forward", it);
    entry(g, TRACE_ANNOTATE, 0, 0, 0, label);
    for (int k = 0; k < LAYERS; k++) {
        uint64_t size = (256u << 10) + (uint64_t)k * (56u << 10) + rnd(g) % 4096;
        act[k] = alloc(g, size, g->stacks[1][k]);
        size_t tmp = alloc(g, 4096 + rnd(g) % (512u << 10), g->stacks[1][PARAMS + k % LAYERS]);
        release(g, tmp);
    }
    snprintf(label, sizeof label, "iteration %d backward", it);
    entry(g, TRACE_ANNOTATE, 0, 0, 0, label);
    for (int k = LAYERS - 1; k >= 0; k--) {
        size_t grad = alloc(g, 8192 + rnd(g) % (1u << 20), g->stacks[2][k]);
        release(g, grad);
        release(g, act[k]);
    }
    if (it % 40 == 39) /* a slow leak: the optimizer's state grows */
        (void)alloc(g, 64u << 10, g->stacks[3][it / 40 % LAYERS]);
}

/* The final table: every segment with its live blocks and the free rest. */
static void
write_segments(struct gen *g)
{
    for (size_t seg = 0; seg < g->nsegs; seg++) {
        struct snap_segment s = {.device = 0,
                                 .addr = BASE + seg * SEG_SPACE,
                                 .total_size = SEGMENT,
                                 .stack = g->stacks[0][0]};
        if (snapshot_add_segment(g->s, &s) != 0)
            die("out of memory");
        for (size_t k = 0; k < SLOTS; k++) {
            size_t slot = seg * SLOTS + k;
            uint64_t size = g->slot_size[slot], rounded = (size + 511) / 512 * 512;
            struct snap_block b = {.addr = slot_addr(slot), .size = SLOT};
            if (size != 0) {
                b = (struct snap_block){.addr = slot_addr(slot),
                                        .size = rounded,
                                        .requested_size = size,
                                        .stack = g->slot_stack[slot],
                                        .state = BLOCK_ACTIVE_ALLOCATED};
                if (snapshot_add_block(g->s, &b) != 0)
                    die("out of memory");
                if (rounded == SLOT)
                    continue;
                b = (struct snap_block){.addr = slot_addr(slot) + rounded, .size = SLOT - rounded};
            }
            if (snapshot_add_block(g->s, &b) != 0)
                die("out of memory");
        }
    }
}

int
main(int argc, char **argv)
{
    if (argc < 3)
        die("usage: plot_snapshot ENTRIES OUT.pickle [--midrun]");
    struct gen g = {.target = strtoull(argv[1], NULL, 10),
                    .now = 1700000000000000,
                    .seed = 88172645463325252ull};
    if (argc > 3 && strcmp(argv[3], "--midrun") == 0)
        g.skip = g.target / 9; /* 10% of the whole */
    g.s = snapshot_create(1);
    if (g.s == NULL || snapshot_reserve_entries(g.s, 0, g.target + 400) != 0)
        die("out of memory");
    make_stacks(&g);
    size_t params[PARAMS];
    for (int k = 0; k < PARAMS; k++)
        params[k] = alloc(&g, (1u << 20) + (uint64_t)k * 4096, g.stacks[0][LAYERS + k]);
    (void)params;
    for (int it = 0; g.made < g.target + g.skip; it++)
        iteration(&g, it);
    write_segments(&g);
    if (snapshot_write_file(argv[2], g.s, SNAPSHOT_FORMAT_AUTO, FILE_PUBLISH_REPLACE, NULL, 0) != 0)
        die("cannot write the snapshot");
    printf("%zu entries\n", g.s->device_traces[0].count);
    snapshot_free(g.s);
    free(g.slot_size);
    free(g.slot_stack);
    free(g.free_slots);
    return 0;
}
