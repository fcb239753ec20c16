/* replay_start.c: the starting state of a replay that begins mid-run: the segments and live blocks
 *   at the first entry (rebuilt backwards from the snapshot, as MemoryViz does) recreated in the
 *   allocator at their recorded addresses, with the free gaps between them cached; and what the
 *   recording's later decisions prove about the unsplit remainders the snapshot does not show. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "allocator/alloc_policy.h"
#include "allocator/allocator.h"
#include "allocator/trace_sink.h"
#include "cli/analysis.h"
#include "cli/replay.h"

/* The trace's allocs and frees by address, to see where free blocks of the starting state began
 * (pytorch-allocator.md §6.5): a block is always handed out from the start of a free block. */
struct addr_index {
    uint64_t addr;
    size_t index;
};

struct replay_index {
    struct addr_index *allocs, *frees;
    size_t nallocs, nfrees;
};

static int
addr_index_cmp(const void *a, const void *b)
{
    const struct addr_index *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static int
index_fill(const struct snap_device_trace *t, struct replay_index *ix)
{
    size_t n = t ? t->count : 0;
    ix->allocs = malloc((n + 1) * sizeof(struct addr_index));
    ix->frees = malloc((n + 1) * sizeof(struct addr_index));
    ix->nallocs = ix->nfrees = 0;
    if (ix->allocs == NULL || ix->frees == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const struct snap_entry *e = &t->entries[i];
        if (e->action == TRACE_ALLOC)
            ix->allocs[ix->nallocs++] = (struct addr_index){e->addr, i};
        else if (e->action == TRACE_FREE_REQUESTED || e->action == TRACE_FREE_COMPLETED)
            ix->frees[ix->nfrees++] = (struct addr_index){e->addr, i};
    }
    qsort(ix->allocs, ix->nallocs, sizeof(struct addr_index), addr_index_cmp);
    qsort(ix->frees, ix->nfrees, sizeof(struct addr_index), addr_index_cmp);
    return 0;
}

/* The first item at an address >= addr. */
static size_t
addr_index_lower(const struct addr_index *v, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Where the free block in [lo, hi) behind the live block at `owner` began: the first address the
 * trace allocates in the gap while that block is still live; 0 when the trace never does. */
static uint64_t
gap_start(const struct replay_index *ix, uint64_t owner, uint64_t lo, uint64_t hi)
{
    size_t f = addr_index_lower(ix->frees, ix->nfrees, owner);
    size_t freed_at = f < ix->nfrees && ix->frees[f].addr == owner ? ix->frees[f].index : SIZE_MAX;
    uint64_t start = 0;
    size_t first = freed_at;
    for (size_t i = addr_index_lower(ix->allocs, ix->nallocs, lo);
         i < ix->nallocs && ix->allocs[i].addr < hi; i++)
        if (ix->allocs[i].index < first) {
            first = ix->allocs[i].index;
            start = ix->allocs[i].addr;
        }
    return start;
}

/* ---- Expandable reservations at the first entry (pytorch-allocator.md §2.11): a snapshot shows
 * their mapped runs, not their bases. */

struct start_reservation {
    uint64_t stream, base, end; /* base: the lowest address the recording shows in it */
    bool small, made;
};

/* The replay device's reservation size for a pool, as allocator/alloc_expand.h computes it from
 * the total the fake device reports (cli/replay_device.c: the recorded card's when known). */
static uint64_t
reservation_size(const struct replay_run *r, bool small)
{
    uint64_t total = replay_device_total(&r->dev);
    uint64_t page = small ? ALLOC_SMALL_BUFFER : ALLOC_LARGE_BUFFER, space = total + total / 8;
    return (space + page - 1) / page * page;
}

static bool
inside(uint64_t addr, uint64_t base, uint64_t size)
{
    return addr >= base && addr - base < size;
}

/* The pool of the mapped pages [addr, addr + size) as the allocs inside them tell (small-pool
 * requests are at most 1 MiB): the first one from entry `from` on (forward), or the last one
 * before it (backward), while the pages stay mapped: past an unmap (forward) or the map that made
 * them (backward) the addresses may be another reservation's (a released range is reused).
 * Returns false when no alloc tells. */
static bool
allocs_tell_small(const struct snap_device_trace *t, size_t from, bool forward, uint64_t addr,
                  uint64_t size, bool *small)
{
    uint8_t stop = forward ? TRACE_SEGMENT_UNMAP : TRACE_SEGMENT_MAP;
    for (size_t k = from; t != NULL && (forward ? k < t->count : k-- > 0); k += forward) {
        const struct snap_entry *e = &t->entries[k];
        if (e->action == stop && e->addr < addr + size && addr < e->addr + e->size)
            return false;
        if (e->action == TRACE_ALLOC && inside(e->addr, addr, size)) {
            *small = e->size <= ALLOC_SMALL_SIZE;
            return true;
        }
    }
    return false;
}

/* The pool of a run the trace unmaps later (not in the snapshot): the allocs inside it say;
 * else only small-pool runs are not whole 20 MiB pages. */
static bool
run_is_small(const struct snap_device_trace *t, const struct analysis_segment *run)
{
    bool small;
    if (allocs_tell_small(t, 0, true, run->addr, run->size, &small))
        return small;
    return run->size % ALLOC_LARGE_BUFFER != 0;
}

/* The pool of the pages entry i maps or unmaps: only small-pool ones are not whole 20 MiB
 * pages; else the allocs inside them after the entry say, or those before it. */
static bool
pages_are_small(const struct snap_device_trace *t, size_t i)
{
    const struct snap_entry *m = &t->entries[i];
    bool small;
    if (m->size % ALLOC_LARGE_BUFFER != 0)
        return true;
    if (m->action == TRACE_SEGMENT_MAP)
        return allocs_tell_small(t, i + 1, true, m->addr, m->size, &small) && small;
    return allocs_tell_small(t, i, false, m->addr, m->size, &small) && small;
}

/* Groups the expandable runs into reservations (same stream and pool, within one reservation's
 * size), then walks the trace's maps and unmaps as the device saw them: one outside every known
 * reservation starts a new reservation there (PyTorch maps a new one from its base) unless that
 * range would run into a reservation of the starting state of its stream and pool, whose base it
 * then lowers. A run is taken to begin at from[] (one page lower when it is rebuilt with the page
 * before it: lead_piece). Fills res (one per run at most) and each run's reservation in of[]. */
static size_t
group_reservations(const struct replay_run *r, const struct snap_device_trace *t,
                   const struct analysis_segment *seg, const bool *small, const uint64_t *from,
                   size_t nseg, struct start_reservation *res, size_t *of)
{
    size_t nres = 0;
    for (size_t s = 0; s < nseg; s++) {
        if (!seg[s].is_expandable)
            continue;
        uint64_t size = reservation_size(r, small[s]), end = seg[s].addr + seg[s].size;
        size_t g = 0;
        while (g < nres && !(res[g].stream == seg[s].stream && res[g].small == small[s] &&
                             end - res[g].base <= size))
            g++;
        if (g == nres)
            res[nres++] = (struct start_reservation){seg[s].stream, from[s], end, small[s], false};
        res[g].end = end;
        of[s] = g;
    }
    uint64_t made[64]; /* bases of the reservations the trace makes (a handful) */
    size_t nmade = 0, large = reservation_size(r, false);
    for (size_t i = 0; t != NULL && i < t->count && nres > 0; i++) {
        const struct snap_entry *e = &t->entries[i];
        if (e->action != TRACE_SEGMENT_MAP && e->action != TRACE_SEGMENT_UNMAP)
            continue;
        bool known = false;
        for (size_t k = 0; k < nres && !known; k++)
            known = inside(e->addr, res[k].base, reservation_size(r, res[k].small));
        for (size_t k = 0; k < nmade && !known; k++)
            known = inside(e->addr, made[k], large);
        if (known)
            continue;
        /* The nearest reservation of the starting state above the address. */
        size_t g = nres;
        for (size_t k = 0; k < nres; k++)
            if (res[k].base > e->addr && (g == nres || res[k].base < res[g].base))
                g = k;
        if (g < nres && res[g].stream == e->stream && res[g].small == pages_are_small(t, i) &&
            (e->action == TRACE_SEGMENT_UNMAP ||
             e->addr + reservation_size(r, res[g].small) > res[g].base))
            res[g].base = e->addr;
        else if (nmade < sizeof(made) / sizeof(made[0]))
            made[nmade++] = e->addr;
    }
    return nres;
}

/* A block of the starting state that holds the free piece behind it until the end. */
struct shrink {
    uint64_t addr, size, stream;
    uint32_t stack;
};

/* Says once per command what the starting state had to assume about reservations. */
static void
say_assumed(const struct start_reservation *res, size_t nres)
{
    /* Once per command, whichever of its replays (threads, for tune) gets here first. */
    static atomic_bool said;
    if (nres == 0 || atomic_exchange(&said, true))
        return;
    fprintf(stderr,
            "cuprof: replay: %zu expandable reservation%s in use when the history begins: each "
            "assumed to start at the lowest address the recording shows in it (0x%" PRIx64
            "%s) and to be as large as on the replayed device\n",
            nres, nres == 1 ? "" : "s", res[0].base, nres > 1 ? ", ..." : "");
}

/* Makes segment s of the starting state, empty and cached: an ordinary segment by one request
 * that needs exactly it, or an expandable run by mapping its pages from `from`. Returns false on
 * a miss. */
static bool
make_segment(struct replay_run *r, const struct analysis_segment *seg, bool small, uint64_t stream,
             uint64_t from, struct start_reservation *res)
{
    uint64_t addr;
    if (res != NULL) {
        if (!res->made)
            r->dev.forced_addr = res->base;
        int rc = allocator_map_expandable(r->alloc, (int)r->device, stream, small, from,
                                          seg->addr + seg->size - from);
        r->dev.forced_addr = 0;
        res->made = true;
        return rc == 0;
    }
    r->dev.forced_addr = seg->addr;
    int rc = allocator_malloc(r->alloc, (int)r->device, small ? 512 : seg->size, stream, 0, &addr);
    r->dev.forced_addr = 0;
    if (rc != 0 || allocator_free(r->alloc, addr, 0) != 0)
        return false;
    return addr == seg->addr;
}

/* Holds a free gap [cursor, next) (or a segment's free tail) with fillers from the segment's
 * own pool (small-pool requests are at most 1 MiB). Returns where the gap ends. */
static uint64_t
fill_gap(struct replay_run *r, uint64_t stream, bool small, uint64_t cursor, uint64_t next,
         uint64_t *fillers, size_t *nfill, size_t *misses)
{
    while (next > cursor) {
        uint64_t piece = next - cursor, addr;
        if (small && piece > (1u << 20))
            piece = 1u << 20;
        if (allocator_malloc(r->alloc, (int)r->device, piece, stream, 0, &addr) != 0) {
            (*misses)++;
            return next;
        }
        /* Held until the state stands wherever it landed (freed with the others). */
        fillers[(*nfill)++] = addr;
        if (addr != cursor) {
            (*misses)++;
            return next;
        }
        cursor += piece;
    }
    return cursor;
}

/* A free piece of 1 MiB or less at the start of a large-pool expandable run, in front of a live
 * block: its size, else 0. No large-pool request can hold it while the blocks behind it are
 * placed (a request of 1 MiB or less is a small-pool one), and no block before it in the run can
 * take it. PyTorch reaches this state only by unmapping: a free block is handed out from its
 * start and merges with its free neighbours, so a free large-pool block smaller than any request
 * is a split remainder (behind the block split from it) or what unmap_block leaves of a free
 * block after its last whole page, [floor(end), end), whose page before is then unmapped. So the
 * replay does the same: it maps the page before the run too, holds that page and the piece with
 * one request, places the blocks, then frees the request and unmaps that page again. */
static uint64_t
lead_piece(const struct analysis_segment *seg, const struct span_map_item *live, size_t nlive)
{
    size_t lo = 0, hi = nlive;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (live[mid].addr < seg->addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == nlive || live[lo].addr - seg->addr >= seg->size)
        return 0;
    uint64_t piece = live[lo].addr - seg->addr;
    return piece <= ALLOC_SMALL_SIZE ? piece : 0;
}

/* The bytes the live block `blk` takes when rebuilt at `cursor`, with `limit` where the next
 * block (or the segment) begins: its rounded size, or more where PyTorch left the rest in it.
 * Sets *guess when nothing recorded proves the size. An expandable block given more than its
 * rounded size is to be shrunk back once every other free block is held. */
static uint64_t
rebuilt_size(const struct replay_run *r, const struct alloc_config *config,
             const struct replay_index *ix, const struct span_map_item *blk, uint64_t cursor,
             uint64_t limit, bool small, bool expandable, bool *guess)
{
    uint64_t size = alloc_policy_round_size(config, blk->size);
    if (small)
        return size;
    if (expandable) {
        /* PyTorch splits every expandable block (remaining >= 512): the free block behind it
         * begins at its rounded end. One of 1 MiB or less in the large pool no filler can hold
         * (those requests are small-pool ones): the block takes it for now. */
        return limit > cursor + size && limit - cursor - size <= ALLOC_SMALL_SIZE ? limit - cursor
                                                                                  : size;
    }
    /* An oversize block is never split: it holds the rest of its segment. */
    if (size >= config->max_split_size)
        return limit - cursor;
    if (limit <= cursor + size)
        return size;
    /* PyTorch: a remainder of 1 MiB or less behind a large block stays in it; later it may border
     * a larger free block, whose start the trace's first alloc there shows. */
    uint64_t begins = gap_start(ix, blk->addr, cursor + size, limit);
    if (begins != 0)
        return begins - cursor;
    if (limit - cursor - size <= ALLOC_SMALL_SIZE)
        return limit - cursor; /* every free large-pool block is larger than 1 MiB */
    /* Unknown: no remainder, or what a later decision proved (learnt from earlier runs). */
    const struct span_map_item *learnt =
        r->remainders ? span_map_get(r->remainders, blk->addr) : NULL;
    *guess = true;
    if (learnt != NULL && learnt->size > size && learnt->size < limit - cursor)
        return learnt->size;
    return size;
}

/* The work of rebuilding one starting state: the segments and live blocks at the first entry,
 * and what holds the state together until it stands. */
struct rebuild {
    struct replay_run *r;
    const struct alloc_config *config;
    const struct replay_index *ix;
    const struct snap_device_trace *t;
    size_t *misses;
    struct analysis_segment *seg; /* the segments, by address */
    size_t nseg;
    struct span_map_item *live; /* the live blocks, by address */
    size_t nlive, b;            /* b: the next live block to place */
    bool *small_of;             /* per segment: its pool */
    uint64_t *from;             /* per segment: where it is made (lead_piece: a page lower) */
    struct start_reservation *res;
    size_t *res_of; /* per segment: its reservation */
    size_t nres;
    uint64_t *fillers; /* requests holding free gaps until every block stands */
    size_t nfill;
    struct shrink *shrink;
    size_t nshrink;
    uint64_t *leads; /* requests holding the page before a run and its lead piece */
    size_t nlead;
};

/* Reads the state at the first entry and sizes the work arrays. Returns 0 or -1. */
static int
rebuild_begin(struct rebuild *w)
{
    struct replay_run *r = w->r;
    if (analysis_segment_list_at(r->snap, r->device, 0, &w->seg, &w->nseg) != 0 ||
        analysis_live_at(r->snap, r->device, 0, &w->live, &w->nlive) != 0)
        return -1;
    /* Fillers: at most one per gap, or one per MiB of a small segment; a lead placed elsewhere. */
    size_t cap = 2 * w->nlive + 1;
    for (size_t s = 0; s < w->nseg; s++)
        cap += 2 + (size_t)(w->seg[s].size >> 20);
    w->fillers = malloc(cap * sizeof(uint64_t));
    w->small_of = malloc((w->nseg + 1) * sizeof(bool));
    w->res_of = malloc((w->nseg + 1) * sizeof(size_t));
    w->res = malloc((w->nseg + 1) * sizeof(*w->res));
    w->shrink = malloc((w->nlive + 1) * sizeof(*w->shrink));
    w->from = malloc((w->nseg + 1) * sizeof(uint64_t));
    w->leads = malloc((w->nseg + 1) * sizeof(uint64_t));
    r->nguesses = 0;
    r->guesses = malloc((w->nlive + 1) * sizeof(struct replay_guess));
    return w->fillers && w->small_of && w->res_of && w->res && w->shrink && w->from && w->leads &&
                   r->guesses
               ? 0
               : -1;
}

/* Each segment's pool and where it is made; the reservations of the expandable runs. */
static void
rebuild_plan(struct rebuild *w)
{
    for (size_t s = 0; s < w->nseg; s++) {
        const struct analysis_segment *seg = &w->seg[s];
        /* A segment the trace frees later is not in the snapshot: PyTorch's small-pool segments
         * are exactly 2 MiB (large ones never are). */
        w->small_of[s] = seg->index != UINT32_MAX ? seg->is_small
                         : seg->is_expandable     ? run_is_small(w->t, seg)
                                                  : seg->size == ALLOC_SMALL_BUFFER;
        bool lead = w->config->expandable_segments && seg->is_expandable && !w->small_of[s] &&
                    lead_piece(seg, w->live, w->nlive) != 0;
        w->from[s] = seg->addr - (lead ? ALLOC_LARGE_BUFFER : 0);
    }
    /* With the setting off the recorded runs stand as ordinary segments (nothing maps them). */
    if (w->config->expandable_segments) {
        w->nres = group_reservations(w->r, w->t, w->seg, w->small_of, w->from, w->nseg, w->res,
                                     w->res_of);
        say_assumed(w->res, w->nres);
    }
}

/* The page before expandable run s and the free piece at its start, held by one request.
 * Returns where the run's first block begins. */
static uint64_t
hold_lead(struct rebuild *w, size_t s)
{
    const struct analysis_segment *seg = &w->seg[s];
    uint64_t cursor = seg->addr + lead_piece(seg, w->live, w->nlive), addr;
    if (allocator_malloc(w->r->alloc, (int)w->r->device, cursor - w->from[s], seg->stream, 0,
                         &addr) != 0) {
        (*w->misses)++;
    } else if (addr != w->from[s]) {
        (*w->misses)++;
        w->fillers[w->nfill++] = addr; /* freed with the fillers */
    } else {
        w->leads[w->nlead++] = addr;
    }
    return cursor;
}

/* Rebuilds live block w->b of segment `seg` at *cursor, the end of the gap before it, and moves
 * *cursor past it (or to the next block when it could not be placed). Returns 0 or -1. */
static int
place_block(struct rebuild *w, const struct analysis_segment *seg, bool small, bool expandable,
            uint64_t *cursor)
{
    struct replay_run *r = w->r;
    const struct span_map_item *blk = &w->live[w->b];
    uint64_t end = seg->addr + seg->size, addr;
    uint64_t rounded = alloc_policy_round_size(w->config, blk->size);
    uint64_t limit =
        w->b + 1 < w->nlive && w->live[w->b + 1].addr < end ? w->live[w->b + 1].addr : end;
    bool guess = false;
    uint64_t size =
        rebuilt_size(r, w->config, w->ix, blk, *cursor, limit, small, expandable, &guess);
    if (expandable && size != rounded)
        w->shrink[w->nshrink++] = (struct shrink){*cursor, rounded, seg->stream, blk->stack};
    if (allocator_malloc(r->alloc, (int)r->device, size, seg->stream, blk->stack, &addr) != 0) {
        (*w->misses)++;
        *cursor = limit;
        return 0;
    }
    /* A block placed elsewhere is still live (the program frees it later): mapped all the same,
     * so its bytes stay counted exactly as long as the recording's. */
    if (span_map_put(&r->addr_of, blk->addr, addr, REPLAY_BLOCK_CACHED) != 0)
        return -1;
    if (addr != *cursor) {
        (*w->misses)++;
        *cursor = limit;
        return 0;
    }
    if (guess)
        r->guesses[r->nguesses++] = (struct replay_guess){*cursor, size, rounded, limit, true};
    *cursor += size;
    return 0;
}

/* Makes segment s and places its live blocks, their gaps held by fillers. Returns 0 or -1. */
static int
rebuild_segment(struct rebuild *w, size_t s)
{
    const struct analysis_segment *seg = &w->seg[s];
    uint64_t start = seg->addr, end = seg->addr + seg->size, cursor = start;
    bool small = w->small_of[s], expandable = seg->is_expandable && w->nres > 0;
    if (!make_segment(w->r, seg, small, seg->stream, expandable ? w->from[s] : start,
                      expandable ? &w->res[w->res_of[s]] : NULL))
        (*w->misses)++;
    if (expandable && w->from[s] < start)
        cursor = hold_lead(w, s);
    for (; w->b < w->nlive && w->live[w->b].addr < start; w->b++)
        (*w->misses)++;
    for (; cursor < end; w->b++) {
        bool have = w->b < w->nlive && w->live[w->b].addr < end;
        uint64_t next = have ? w->live[w->b].addr : end;
        cursor = fill_gap(w->r, seg->stream, small, cursor, next, w->fillers, &w->nfill, w->misses);
        if (!have)
            break;
        if (place_block(w, seg, small, expandable, &cursor) != 0)
            return -1;
    }
    return 0;
}

/* Once every block stands: the blocks that took a free piece behind them give it back, and the
 * pages before the runs go again. */
static int
rebuild_settle(struct rebuild *w)
{
    struct replay_run *r = w->r;
    /* Highest address first: a block freed for this borders no free piece (the piece of a block
     * before it would, were that block shrunk first: both merged, the exact size came from the
     * piece's start), and every other free block of its pool is a piece of 1 MiB or less, too
     * small for a large request, so asking for the exact size takes its start. */
    for (size_t j = w->nshrink; j > 0; j--) {
        const struct shrink *sh = &w->shrink[j - 1];
        uint64_t got = 0;
        if (allocator_free(r->alloc, sh->addr, 0) != 0 ||
            allocator_malloc(r->alloc, (int)r->device, sh->size, sh->stream, sh->stack, &got) !=
                0) {
            (*w->misses)++;
            (void)span_map_remove(&r->addr_of, sh->addr, NULL);
        } else if (got != sh->addr) {
            (*w->misses)++;
            if (span_map_put(&r->addr_of, sh->addr, got, REPLAY_BLOCK_CACHED) != 0)
                return -1;
        }
    }
    /* Now that every other free block is held, each lead unmaps exactly its page (lead_piece),
     * and the free piece behind it stays. */
    for (size_t i = 0; i < w->nlead; i++)
        if (allocator_free(r->alloc, w->leads[i], 0) != 0 ||
            allocator_unmap_expandable(r->alloc, (int)r->device, w->leads[i], ALLOC_LARGE_BUFFER) !=
                0)
            (*w->misses)++;
    return 0;
}

/* Frees the fillers (the gaps they held become the cached free blocks) and the work arrays. */
static void
rebuild_end(struct rebuild *w)
{
    for (size_t i = 0; i < w->nfill; i++)
        if (allocator_free(w->r->alloc, w->fillers[i], 0) != 0)
            (*w->misses)++;
    free(w->leads);
    free(w->from);
    free(w->shrink);
    free(w->fillers);
    free(w->small_of);
    free(w->res_of);
    free(w->res);
    free(w->seg);
    free(w->live);
}

static int
rebuild(struct replay_run *r, const struct alloc_config *config, const struct replay_index *ix,
        size_t *misses)
{
    struct rebuild w = {.r = r, .config = config, .ix = ix, .misses = misses};
    w.t = r->device < r->snap->device_count ? &r->snap->device_traces[r->device] : NULL;
    int rc = rebuild_begin(&w);
    if (rc == 0)
        rebuild_plan(&w);
    for (size_t s = 0; rc == 0 && s < w.nseg; s++)
        rc = rebuild_segment(&w, s);
    for (; rc == 0 && w.b < w.nlive; w.b++)
        (*misses)++;
    if (rc == 0)
        rc = rebuild_settle(&w);
    rebuild_end(&w);
    return rc;
}

struct replay_index *
replay_index_build(const struct snap_device_trace *t)
{
    struct replay_index *ix = calloc(1, sizeof(*ix));
    if (ix != NULL && index_fill(t, ix) != 0) {
        replay_index_free(ix);
        ix = NULL;
    }
    return ix;
}

void
replay_index_free(struct replay_index *ix)
{
    if (ix == NULL)
        return;
    free(ix->allocs);
    free(ix->frees);
    free(ix);
}

int
replay_start_state(struct replay_run *r, const struct alloc_config *config, size_t *misses)
{
    /* The index is the plan's, shared by its replays; one of its own without one. */
    const struct snap_device_trace *t =
        r->device < r->snap->device_count ? &r->snap->device_traces[r->device] : NULL;
    struct replay_index *own = r->index == NULL ? replay_index_build(t) : NULL;
    const struct replay_index *ix = r->index != NULL ? r->index : own;
    int rc = ix != NULL ? rebuild(r, config, ix, misses) : -1;
    replay_index_free(own);
    return rc;
}

/* The guess whose owner starts at `owner` (by_end: whose free block starts at `owner`), or NULL.
 * Guesses are in address order, and so are the ends of their owners. */
static struct replay_guess *
guess_find(const struct replay_run *r, uint64_t addr, bool by_end)
{
    size_t lo = 0, hi = r->nguesses;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct replay_guess *g = &r->guesses[mid];
        uint64_t key = by_end ? g->owner + g->size : g->owner;
        if (key == addr)
            return &r->guesses[mid];
        if (key < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

void
replay_guess_freed(struct replay_run *r, uint64_t addr)
{
    struct replay_guess *g = guess_find(r, addr, false);
    if (g != NULL)
        g->live = false;
}

/* The size of the free block at addr in the replay (0 when there is none). */
static int
free_block_size(struct replay_run *r, uint64_t addr, uint64_t *size)
{
    size_t got_seg, got_blk;
    *size = 0;
    struct segment_info *segs;
    struct block_info *blks;
    int rc = replay_copy_state(r, &segs, &got_seg, &blks, &got_blk);
    for (size_t i = 0; rc == 0 && i < got_blk; i++)
        if (blks[i].addr == addr && blks[i].state == BLOCK_INACTIVE)
            *size = blks[i].size;
    free(segs);
    free(blks);
    return rc == 0 ? 0 : -1;
}

int
replay_start_learn(struct replay_run *r, uint64_t got, uint64_t rounded)
{
    struct replay_guess *g = guess_find(r, got, true);
    if (g == NULL || !g->live || allocator_free(r->alloc, got, 0) != 0)
        return 0;
    uint64_t free_size;
    if (free_block_size(r, got, &free_size) != 0)
        return -1;
    if (free_size < rounded)
        return 0;
    /* The smallest remainder that makes the free block too small for this request. */
    uint64_t grown = g->size + (free_size - rounded + ALLOC_MIN_BLOCK_SIZE);
    if (grown - g->rounded > ALLOC_SMALL_SIZE || g->owner + grown >= g->limit ||
        g->limit - (g->owner + grown) <= ALLOC_SMALL_SIZE)
        return 0;
    return span_map_put(r->remainders, g->owner, grown, 0) != 0 ? -1 : 1;
}
