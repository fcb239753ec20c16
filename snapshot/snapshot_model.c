/* snapshot_model.c: building a snapshot model: growable flat arrays, deduplicated frames and
 * stacks, strings interned in the model's arena. */
#include "snapshot/snapshot_model.h"

#include <stdlib.h>
#include <string.h>

#include "allocator/cuprof_errors.h"
#include "allocator/trace_sink.h"
#include "snapshot/snapshot_arena.h"

/* The public model plus the capacities and hash tables only the builder needs. */
struct snapshot_owner {
    struct snapshot pub; /* first: snapshot_free finds the owner from it */
    size_t segment_cap, block_cap, frame_cap, stack_frame_cap, stack_cap, config_cap;
    size_t device_cap;
    size_t *entry_cap;     /* per device */
    size_t *label_cap;     /* per device */
    uint32_t *frame_table; /* open addressing, frame index + 1 (0 = empty) */
    size_t frame_table_cap;
    uint32_t *stack_table; /* stack index + 1 */
    size_t stack_table_cap;
};

static struct snapshot_owner *
owner_of(struct snapshot *snap)
{
    return (struct snapshot_owner *)(void *)snap;
}

/* Grows *array (element size `elem`) so that it can hold `need` elements; the new room is
 * zero-filled unless `raw` (arrays that are only read up to their count). */
static int
grow_array(void **array, size_t *cap, size_t need, size_t elem, bool raw)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 16;
    while (n < need) {
        if (n > SIZE_MAX / 2 / elem)
            return -CUPROF_EHOSTMEM;
        n *= 2;
    }
    void *p = realloc(*array, n * elem);
    if (p == NULL)
        return -CUPROF_EHOSTMEM;
    if (!raw)
        memset((char *)p + *cap * elem, 0, (n - *cap) * elem);
    *array = p;
    *cap = n;
    return 0;
}

static int
grow(void **array, size_t *cap, size_t need, size_t elem)
{
    return grow_array(array, cap, need, elem, false);
}

struct snapshot *
snapshot_create(size_t device_count)
{
    struct snapshot_owner *o = calloc(1, sizeof(*o));
    if (o == NULL)
        return NULL;
    struct snapshot *s = &o->pub;
    s->arena = snapshot_arena_create();
    if (s->arena == NULL || grow((void **)&s->stacks, &o->stack_cap, 1, sizeof(*s->stacks)) != 0 ||
        snapshot_set_device_count(s, device_count) != 0) {
        snapshot_free(s);
        return NULL;
    }
    s->stack_count = 1; /* the empty stack */
    s->allocator_settings.max_split_size = -1;
    s->allocator_settings.alloc_conf = "";
    s->allocator_settings.pinned_num_register_threads = 1;
    s->cuprof.rank = -1;
    return s;
}

void
snapshot_free(struct snapshot *snap)
{
    if (snap == NULL)
        return;
    struct snapshot_owner *o = owner_of(snap);
    for (size_t d = 0; d < o->device_cap; d++) {
        free(snap->device_traces[d].entries);
        free(snap->device_traces[d].labels);
    }
    free(snap->device_traces);
    free(o->entry_cap);
    free(o->label_cap);
    free(snap->segments);
    free(snap->blocks);
    free(snap->frames);
    free(snap->stack_frames);
    free(snap->stacks);
    free(snap->cuprof.config);
    free(snap->cuprof.stats);
    free(snap->cuprof.stats_count);
    free(snap->cuprof.dropped_entries);
    free(snap->warnings);
    free(o->frame_table);
    free(o->stack_table);
    snapshot_arena_destroy(snap->arena);
    free(o);
}

int
snapshot_set_device_count(struct snapshot *snap, size_t device_count)
{
    struct snapshot_owner *o = owner_of(snap);
    if (device_count > o->device_cap) {
        size_t old = o->device_cap, n = device_count;
        void *t = realloc(snap->device_traces, n * sizeof(*snap->device_traces));
        if (t != NULL)
            snap->device_traces = t;
        void *c = realloc(o->entry_cap, n * sizeof(*o->entry_cap));
        if (c != NULL)
            o->entry_cap = c;
        void *lc = realloc(o->label_cap, n * sizeof(*o->label_cap));
        if (lc != NULL)
            o->label_cap = lc;
        void *st = realloc(snap->cuprof.stats, n * sizeof(*snap->cuprof.stats));
        if (st != NULL)
            snap->cuprof.stats = st;
        void *sc = realloc(snap->cuprof.stats_count, n * sizeof(*snap->cuprof.stats_count));
        if (sc != NULL)
            snap->cuprof.stats_count = sc;
        void *de = realloc(snap->cuprof.dropped_entries, n * sizeof(uint64_t));
        if (de != NULL)
            snap->cuprof.dropped_entries = de;
        if (t == NULL || c == NULL || lc == NULL || st == NULL || sc == NULL || de == NULL)
            return -CUPROF_EHOSTMEM; /* what did grow is kept; device_cap still says `old` */
        for (size_t d = old; d < n; d++) {
            snap->device_traces[d] = (struct snap_device_trace){0};
            o->entry_cap[d] = 0;
            o->label_cap[d] = 0;
            snap->cuprof.stats[d] = NULL;
            snap->cuprof.stats_count[d] = 0;
            snap->cuprof.dropped_entries[d] = 0;
        }
        o->device_cap = n;
    }
    if (device_count > snap->device_count)
        snap->device_count = device_count;
    return 0;
}

const char *
snapshot_intern_n(struct snapshot *snap, const char *s, size_t len)
{
    return snapshot_arena_intern(snap->arena, s, len);
}

const char *
snapshot_intern(struct snapshot *snap, const char *s)
{
    return snapshot_arena_intern(snap->arena, s ? s : "", s ? strlen(s) : 0);
}

static uint64_t
mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t
frame_hash(const struct snap_frame *f)
{
    return mix(mix(mix(0, (uintptr_t)f->name), (uintptr_t)f->filename), (uint64_t)f->line);
}

static uint64_t
stack_hash(const uint32_t *frames, size_t count)
{
    uint64_t h = count;
    for (size_t i = 0; i < count; i++)
        h = mix(h, frames[i]);
    return h;
}

/* Rebuilds an index table (values are element index + 1) at twice the size. */
static int
rehash(uint32_t **table, size_t *cap, size_t count,
       uint64_t (*hash_of)(struct snapshot *, uint32_t), struct snapshot *snap)
{
    size_t n = *cap ? *cap * 2 : 1024;
    uint32_t *t = calloc(n, sizeof(*t));
    if (t == NULL)
        return -CUPROF_EHOSTMEM;
    snapshot_arena_prefault(t, n * sizeof(*t)); /* hashing touches every page */
    for (uint32_t i = 0; i < count; i++) {
        size_t j = (size_t)hash_of(snap, i) & (n - 1);
        while (t[j] != 0)
            j = (j + 1) & (n - 1);
        t[j] = i + 1;
    }
    free(*table);
    *table = t;
    *cap = n;
    return 0;
}

static uint64_t
frame_hash_at(struct snapshot *snap, uint32_t i)
{
    return frame_hash(&snap->frames[i]);
}

static uint64_t
stack_hash_at(struct snapshot *snap, uint32_t i)
{
    const struct snap_stack *st = &snap->stacks[i];
    return stack_hash(st->count ? snap->stack_frames + st->first : NULL,
                      st->count); /* NULL+0 is UB */
}

int
snapshot_add_frame(struct snapshot *snap, const char *name, const char *filename, int64_t line,
                   uint32_t *index)
{
    const char *n = snapshot_intern(snap, name), *fn = snapshot_intern(snap, filename);
    if (n == NULL || fn == NULL)
        return -CUPROF_EHOSTMEM;
    return snapshot_add_frame_interned(snap, n, fn, line, index);
}

int
snapshot_add_frame_interned(struct snapshot *snap, const char *name, const char *filename,
                            int64_t line, uint32_t *index)
{
    struct snapshot_owner *o = owner_of(snap);
    struct snap_frame f = {name, filename, line};
    if ((snap->frame_count + 1) * 2 > o->frame_table_cap &&
        rehash(&o->frame_table, &o->frame_table_cap, snap->frame_count, frame_hash_at, snap) != 0)
        return -CUPROF_EHOSTMEM;
    size_t mask = o->frame_table_cap - 1, j = (size_t)frame_hash(&f) & mask;
    for (; o->frame_table[j] != 0; j = (j + 1) & mask) {
        const struct snap_frame *g = &snap->frames[o->frame_table[j] - 1];
        if (g->name == f.name && g->filename == f.filename && g->line == f.line) {
            *index = o->frame_table[j] - 1;
            return 0;
        }
    }
    if (snap->frame_count >= UINT32_MAX - 1 ||
        grow((void **)&snap->frames, &o->frame_cap, snap->frame_count + 1, sizeof(f)) != 0)
        return -CUPROF_EHOSTMEM;
    snap->frames[snap->frame_count] = f;
    *index = (uint32_t)snap->frame_count++;
    o->frame_table[j] = *index + 1;
    return 0;
}

int
snapshot_add_stack(struct snapshot *snap, const uint32_t *frames, size_t count, uint32_t *index)
{
    struct snapshot_owner *o = owner_of(snap);
    if (count == 0) {
        *index = 0;
        return 0;
    }
    if ((snap->stack_count + 1) * 2 > o->stack_table_cap &&
        rehash(&o->stack_table, &o->stack_table_cap, snap->stack_count, stack_hash_at, snap) != 0)
        return -CUPROF_EHOSTMEM;
    size_t mask = o->stack_table_cap - 1, j = (size_t)stack_hash(frames, count) & mask;
    for (; o->stack_table[j] != 0; j = (j + 1) & mask) {
        const struct snap_stack *st = &snap->stacks[o->stack_table[j] - 1];
        if (st->count == count &&
            memcmp(snap->stack_frames + st->first, frames, count * sizeof(*frames)) == 0) {
            *index = o->stack_table[j] - 1;
            return 0;
        }
    }
    if (snap->stack_count >= UINT32_MAX - 1 || count > UINT32_MAX ||
        snap->stack_frame_count + count >= UINT32_MAX ||
        grow((void **)&snap->stacks, &o->stack_cap, snap->stack_count + 1, sizeof(*snap->stacks)) !=
            0 ||
        grow((void **)&snap->stack_frames, &o->stack_frame_cap, snap->stack_frame_count + count,
             sizeof(*frames)) != 0)
        return -CUPROF_EHOSTMEM;
    memcpy(snap->stack_frames + snap->stack_frame_count, frames, count * sizeof(*frames));
    snap->stacks[snap->stack_count] =
        (struct snap_stack){.first = (uint32_t)snap->stack_frame_count, .count = (uint32_t)count};
    snap->stack_frame_count += count;
    *index = (uint32_t)snap->stack_count++;
    o->stack_table[j] = *index + 1;
    return 0;
}

int
snapshot_add_segment(struct snapshot *snap, const struct snap_segment *segment)
{
    struct snapshot_owner *o = owner_of(snap);
    if (grow((void **)&snap->segments, &o->segment_cap, snap->segment_count + 1,
             sizeof(*segment)) != 0)
        return -CUPROF_EHOSTMEM;
    struct snap_segment *s = &snap->segments[snap->segment_count++];
    *s = *segment;
    s->first_block = (uint32_t)snap->block_count;
    s->block_count = 0;
    if (s->device >= 0 && (size_t)s->device >= snap->device_count)
        return snapshot_set_device_count(snap, (size_t)s->device + 1);
    return 0;
}

int
snapshot_add_block(struct snapshot *snap, const struct snap_block *block)
{
    struct snapshot_owner *o = owner_of(snap);
    if (snap->segment_count == 0 || snap->block_count >= UINT32_MAX)
        return -CUPROF_EINVAL;
    if (grow((void **)&snap->blocks, &o->block_cap, snap->block_count + 1, sizeof(*block)) != 0)
        return -CUPROF_EHOSTMEM;
    snap->blocks[snap->block_count++] = *block;
    snap->segments[snap->segment_count - 1].block_count++;
    return 0;
}

int
snapshot_reserve_entries(struct snapshot *snap, size_t device, size_t count)
{
    struct snapshot_owner *o = owner_of(snap);
    if (device >= snap->device_count && snapshot_set_device_count(snap, device + 1) != 0)
        return -CUPROF_EHOSTMEM;
    struct snap_device_trace *t = &snap->device_traces[device];
    if (count > SIZE_MAX - t->count)
        return -CUPROF_EHOSTMEM;
    /* Not zero-filled: a 10^7-entry history is written once, not twice. */
    if (grow_array((void **)&t->entries, &o->entry_cap[device], t->count + count,
                   sizeof(*t->entries), true) != 0)
        return -CUPROF_EHOSTMEM;
    if (count >= 256) /* a reader's batch: its pages in one call rather than fault by fault */
        snapshot_arena_prefault(t->entries + t->count, count * sizeof(*t->entries));
    return 0;
}

int
snapshot_add_entry(struct snapshot *snap, size_t device, const struct snap_entry *entry)
{
    int rc = snapshot_reserve_entries(snap, device, 1);
    if (rc != 0)
        return rc;
    struct snap_device_trace *t = &snap->device_traces[device];
    t->entries[t->count] = *entry;
    t->entries[t->count++].has_label = false;
    return 0;
}

int
snapshot_add_labeled_entry(struct snapshot *snap, size_t device, const struct snap_entry *entry,
                           const char *label)
{
    return snapshot_add_annotation(snap, device, entry, label, SNAP_STAGE_MARK);
}

int
snapshot_add_annotation(struct snapshot *snap, size_t device, const struct snap_entry *entry,
                        const char *label, enum snap_stage stage)
{
    struct snapshot_owner *o = owner_of(snap);
    const char *text = snapshot_intern(snap, label);
    int rc = snapshot_reserve_entries(snap, device, 1);
    if (rc != 0)
        return rc;
    struct snap_device_trace *t = &snap->device_traces[device];
    if (text == NULL || grow_array((void **)&t->labels, &o->label_cap[device], t->label_count + 1,
                                   sizeof(*t->labels), true) != 0)
        return -CUPROF_EHOSTMEM;
    t->labels[t->label_count++] = (struct snap_label){t->count, text, (uint8_t)stage};
    t->entries[t->count] = *entry;
    t->entries[t->count++].has_label = true;
    return 0;
}

/* Entry i's label record, or NULL: a binary search (labels are in entry order). */
static const struct snap_label *
entry_label(const struct snap_device_trace *trace, size_t i)
{
    if (i >= trace->count || !trace->entries[i].has_label)
        return NULL;
    size_t lo = 0, hi = trace->label_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (trace->labels[mid].entry < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < trace->label_count && trace->labels[lo].entry == i ? &trace->labels[lo] : NULL;
}

const char *
snapshot_entry_label(const struct snap_device_trace *trace, size_t i)
{
    const struct snap_label *l = entry_label(trace, i);
    return l != NULL ? l->text : NULL;
}

enum snap_stage
snapshot_entry_stage(const struct snap_device_trace *trace, size_t i)
{
    const struct snap_label *l = entry_label(trace, i);
    return l != NULL ? (enum snap_stage)l->stage : SNAP_STAGE_MARK;
}

static int
cmp_annotation(const void *x, const void *y)
{
    const struct snap_annotation *a = x, *b = y;
    if (a->time_us != b->time_us)
        return a->time_us < b->time_us ? -1 : 1;
    return (a->stage == SNAP_STAGE_END) - (b->stage == SNAP_STAGE_END);
}

/* Whether annotation a goes before entry e (entries without a time keep their place). */
static bool
annotation_first(const struct snap_annotation *a, const struct snap_entry *e)
{
    if (!e->has_time)
        return false;
    return a->time_us < e->time_us || (a->time_us == e->time_us && a->stage == SNAP_STAGE_START);
}

int
snapshot_merge_annotations(struct snapshot *snap, size_t device, struct snap_annotation *ann,
                           size_t count)
{
    struct snapshot_owner *o = owner_of(snap);
    if (count == 0)
        return 0;
    if (device >= snap->device_count && snapshot_set_device_count(snap, device + 1) != 0)
        return -CUPROF_EHOSTMEM;
    struct snap_device_trace *t = &snap->device_traces[device];
    size_t n = t->count + count, nl = t->label_count + count;
    struct snap_entry *entries = malloc(n * sizeof(*entries));
    struct snap_label *labels = malloc(nl * sizeof(*labels));
    bool ok = entries != NULL && labels != NULL;
    for (size_t j = 0; ok && j < count; j++)
        ok = (ann[j].name = snapshot_intern(snap, ann[j].name)) != NULL;
    if (!ok) {
        free(entries);
        free(labels);
        return -CUPROF_EHOSTMEM;
    }
    qsort(ann, count, sizeof(*ann), cmp_annotation);
    size_t i = 0, j = 0, k = 0, m = 0, l = 0; /* old entries, annotations, out, out labels, old */
    while (i < t->count || j < count) {
        if (j < count && (i == t->count || annotation_first(&ann[j], &t->entries[i]))) {
            entries[k] = (struct snap_entry){.action = TRACE_ANNOTATE,
                                             .has_time = true,
                                             .has_label = true,
                                             .time_us = ann[j].time_us};
            labels[m++] = (struct snap_label){k++, ann[j].name, (uint8_t)ann[j].stage};
            j++;
            continue;
        }
        if (l < t->label_count && t->labels[l].entry == i) {
            labels[m] = t->labels[l++];
            labels[m++].entry = k;
        }
        entries[k++] = t->entries[i++];
    }
    free(t->entries);
    free(t->labels);
    t->entries = entries;
    t->labels = labels;
    t->count = n;
    t->label_count = nl;
    o->entry_cap[device] = n;
    o->label_cap[device] = nl;
    return 0;
}

int
snapshot_add_config(struct snapshot *snap, const char *key, const char *value)
{
    struct snapshot_owner *o = owner_of(snap);
    struct snap_setting s = {snapshot_intern(snap, key), snapshot_intern(snap, value)};
    if (s.key == NULL || s.value == NULL ||
        grow((void **)&snap->cuprof.config, &o->config_cap, snap->cuprof.config_count + 1,
             sizeof(s)) != 0)
        return -CUPROF_EHOSTMEM;
    snap->cuprof.config[snap->cuprof.config_count++] = s;
    snap->cuprof.present = true;
    return 0;
}

int
snapshot_set_argv(struct snapshot *snap, const char *const *argv, size_t argc)
{
    if (argc > SIZE_MAX / sizeof(char *))
        return -CUPROF_EHOSTMEM;
    const char **copy = snapshot_arena_alloc(snap->arena, argc * sizeof(char *));
    if (copy == NULL)
        return -CUPROF_EHOSTMEM;
    for (size_t i = 0; i < argc; i++) {
        copy[i] = snapshot_intern(snap, argv[i]);
        if (copy[i] == NULL)
            return -CUPROF_EHOSTMEM;
    }
    snap->cuprof.argv = copy;
    snap->cuprof.argc = argc;
    snap->cuprof.present = true;
    return 0;
}

int
snapshot_set_stats(struct snapshot *snap, size_t device, const struct snap_stat *stats,
                   size_t count)
{
    if (device >= snap->device_count && snapshot_set_device_count(snap, device + 1) != 0)
        return -CUPROF_EHOSTMEM;
    if (count > SIZE_MAX / sizeof(*stats))
        return -CUPROF_EHOSTMEM;
    struct snap_stat *copy = snapshot_arena_alloc(snap->arena, count * sizeof(*stats));
    if (copy == NULL)
        return -CUPROF_EHOSTMEM;
    for (size_t i = 0; i < count; i++) {
        copy[i].key = snapshot_intern(snap, stats[i].key);
        copy[i].value = stats[i].value;
        if (copy[i].key == NULL)
            return -CUPROF_EHOSTMEM;
    }
    snap->cuprof.stats[device] = copy;
    snap->cuprof.stats_count[device] = count;
    snap->cuprof.present = true;
    return 0;
}
