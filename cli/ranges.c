/* ranges.c: ranges matched start to end, live bytes per range and per range name. */
#include "cli/ranges.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/trace_sink.h"
#include "cli/cli_util.h"
#include "cli/span_map.h"

#define PHASES_NAME_WIDTH  30
#define PHASES_PLOT_RANGES 5000 /* ranges listed in plot's data (all count in the names) */

/* ---- The highest live bytes over a run of states: a max-tree of state indices. */

struct max_tree {
    size_t n;
    size_t *node; /* node[n + k] = k; node[i] = the index of the larger of its two children */
    const uint64_t *v;
};

static int
max_tree_build(struct max_tree *t, const uint64_t *v, size_t n)
{
    t->n = n;
    t->v = v;
    t->node = n > 0 ? malloc(2 * n * sizeof(size_t)) : NULL;
    if (n > 0 && t->node == NULL)
        return -1;
    for (size_t k = 0; k < n; k++)
        t->node[n + k] = k;
    for (size_t i = n; i-- > 1;) {
        size_t l = t->node[2 * i], r = t->node[2 * i + 1];
        t->node[i] = v[r] > v[l] ? r : l;
    }
    return 0;
}

/* The index of the highest value in [lo, hi] (the first of equal ones is not promised). */
static size_t
max_tree_query(const struct max_tree *t, size_t lo, size_t hi)
{
    size_t best = lo;
    for (size_t l = lo + t->n, r = hi + t->n + 1; l < r; l /= 2, r /= 2) {
        if (l & 1) {
            size_t k = t->node[l++];
            if (t->v[k] > t->v[best])
                best = k;
        }
        if (r & 1) {
            size_t k = t->node[--r];
            if (t->v[k] > t->v[best])
                best = k;
        }
    }
    return best;
}

/* ---- Matching. */

/* Per name while matching: the ranges of that name still open (a stack). */
struct open_list {
    size_t *range;
    size_t n, cap;
};

struct matcher {
    struct device_ranges *p;
    struct span_map by_text; /* interned text pointer -> name index */
    struct open_list *open;  /* per name */
    size_t name_cap, range_cap;
    uint32_t depth; /* ranges of any name open now */
};

static long
name_index(struct matcher *m, const char *text)
{
    uint64_t key = (uint64_t)(uintptr_t)text; /* the model interns texts: one pointer per text */
    struct span_map_item *it = span_map_get(&m->by_text, key);
    if (it != NULL)
        return (long)it->size;
    struct device_ranges *p = m->p;
    if (p->name_count == m->name_cap) {
        size_t cap = m->name_cap ? m->name_cap * 2 : 16;
        struct range_name *names = realloc(p->names, cap * sizeof(*names));
        struct open_list *open = names != NULL ? realloc(m->open, cap * sizeof(*open)) : NULL;
        if (names != NULL)
            p->names = names;
        if (open == NULL)
            return -1;
        m->open = open;
        m->name_cap = cap;
    }
    p->names[p->name_count] = (struct range_name){.text = text};
    m->open[p->name_count] = (struct open_list){0};
    if (span_map_put(&m->by_text, key, p->name_count, 0) != 0)
        return -1;
    return (long)p->name_count++;
}

static struct range_span *
new_range(struct matcher *m, uint32_t name, size_t start, bool unknown)
{
    struct device_ranges *p = m->p;
    if (p->range_count == m->range_cap) {
        size_t cap = m->range_cap ? m->range_cap * 2 : 64;
        struct range_span *r = realloc(p->ranges, cap * sizeof(*r));
        if (r == NULL)
            return NULL;
        p->ranges = r;
        m->range_cap = cap;
    }
    struct range_span *r = &p->ranges[p->range_count++];
    *r = (struct range_span){.name = name,
                             .start = start,
                             .end = RANGE_OPEN,
                             .depth = m->depth,
                             .start_unknown = unknown};
    return r;
}

static int
open_push(struct open_list *o, size_t range)
{
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 4;
        size_t *grown = realloc(o->range, cap * sizeof(size_t));
        if (grown == NULL)
            return -1;
        o->range = grown;
        o->cap = cap;
    }
    o->range[o->n++] = range;
    return 0;
}

/* One START or END annotation at entry i. */
static int
match_one(struct matcher *m, const char *text, enum snap_stage stage, size_t i)
{
    long name = name_index(m, text);
    if (name < 0)
        return -1;
    struct open_list *o = &m->open[name];
    if (stage == SNAP_STAGE_START) {
        if (new_range(m, (uint32_t)name, i, false) == NULL)
            return -1;
        m->depth++;
        return open_push(o, m->p->range_count - 1);
    }
    if (o->n > 0) {
        m->p->ranges[o->range[--o->n]].end = i;
        m->depth--;
        return 0;
    }
    struct range_span *r = new_range(m, (uint32_t)name, 0, true); /* started before the history */
    if (r == NULL)
        return -1;
    r->end = i;
    return 0;
}

static int
match_all(struct matcher *m, const struct snap_device_trace *t)
{
    for (size_t k = 0; k < t->label_count; k++) {
        const struct snap_label *l = &t->labels[k];
        const struct snap_entry *e = &t->entries[l->entry];
        if (e->action != TRACE_ANNOTATE || e->addr != 0)
            continue; /* an allocation's name (an NVTX memory region's), not a phase */
        if (l->stage == SNAP_STAGE_MARK)
            m->p->marks++;
        else if (match_one(m, l->text, (enum snap_stage)l->stage, l->entry) != 0)
            return -1;
    }
    return 0;
}

/* Live bytes and peaks of every range, then the per-name figures. */
static int
measure(struct device_ranges *p, const struct device_analysis *a)
{
    struct max_tree tree;
    if (max_tree_build(&tree, a->live_series, a->count + 1) != 0)
        return -1;
    for (size_t i = 0; i < p->range_count; i++) {
        struct range_span *r = &p->ranges[i];
        size_t lo = r->start_unknown ? 0 : r->start + 1;
        size_t hi = r->end == RANGE_OPEN ? a->count : r->end + 1;
        if (hi > a->count)
            hi = a->count;
        if (lo > hi)
            lo = hi;
        r->live_start = a->live_series[lo];
        r->live_end = a->live_series[hi];
        r->peak_at = max_tree_query(&tree, lo, hi);
        r->peak = a->live_series[r->peak_at];
        struct range_name *n = &p->names[r->name];
        n->calls++;
        if (r->end == RANGE_OPEN)
            n->open++;
        else
            n->growth = cli_add_i64(n->growth, cli_i64(r->live_end) - cli_i64(r->live_start));
        if (n->calls == 1 || r->peak > n->peak) {
            n->peak = r->peak;
            n->peak_range = i;
        }
        if (r->peak - r->live_start > n->max_rise)
            n->max_rise = r->peak - r->live_start;
    }
    free(tree.node);
    return 0;
}

static int
cmp_peak(const void *x, const void *y, void *names)
{
    const struct range_name *a = &((struct range_name *)names)[*(const uint32_t *)x];
    const struct range_name *b = &((struct range_name *)names)[*(const uint32_t *)y];
    if (a->peak != b->peak)
        return a->peak < b->peak ? 1 : -1;
    return strcmp(a->text, b->text);
}

/* Names by peak, highest first; the ranges' name indices follow. */
static int
sort_names(struct device_ranges *p)
{
    uint32_t *order = malloc((p->name_count + 1) * sizeof(uint32_t));
    uint32_t *rank = malloc((p->name_count + 1) * sizeof(uint32_t));
    struct range_name *sorted = malloc((p->name_count + 1) * sizeof(*sorted));
    if (order == NULL || rank == NULL || sorted == NULL) {
        free(order);
        free(rank);
        free(sorted);
        return -1;
    }
    for (uint32_t i = 0; i < p->name_count; i++)
        order[i] = i;
    qsort_r(order, p->name_count, sizeof(uint32_t), cmp_peak, p->names);
    for (uint32_t i = 0; i < p->name_count; i++) {
        sorted[i] = p->names[order[i]];
        rank[order[i]] = i;
    }
    for (size_t i = 0; i < p->range_count; i++)
        p->ranges[i].name = rank[p->ranges[i].name];
    free(p->names);
    p->names = sorted;
    free(order);
    free(rank);
    return 0;
}

int
ranges_run(const struct snapshot *snap, size_t device, const struct device_analysis *a,
           struct device_ranges *out)
{
    memset(out, 0, sizeof(*out));
    if (device >= snap->device_count || a->live_series == NULL)
        return 0;
    struct matcher m = {.p = out};
    span_map_init(&m.by_text);
    int rc = match_all(&m, &snap->device_traces[device]);
    for (size_t i = 0; i < out->name_count; i++)
        free(m.open[i].range);
    free(m.open);
    span_map_free(&m.by_text);
    if (rc == 0)
        rc = measure(out, a);
    if (rc == 0 && out->name_count > 1)
        rc = sort_names(out);
    if (rc != 0)
        ranges_free(out);
    return rc;
}

void
ranges_free(struct device_ranges *p)
{
    free(p->ranges);
    free(p->names);
    memset(p, 0, sizeof(*p));
}

size_t
ranges_open_at(const struct device_ranges *p, size_t at, char *buf, size_t len)
{
    size_t open = 0, used = 0;
    if (len > 0)
        buf[0] = '\0';
    for (size_t i = 0; i < p->range_count; i++) {
        const struct range_span *r = &p->ranges[i];
        if (!(r->start_unknown || r->start < at) || (r->end != RANGE_OPEN && r->end < at))
            continue;
        char safe[256];
        const char *name = cli_term(p->names[r->name].text, safe, sizeof safe);
        if (used < len) {
            int w = snprintf(buf + used, len - used, "%s%s", open ? " > " : "", name);
            used += w > 0 ? (size_t)w : 0;
        }
        open++;
    }
    return open;
}

/* "+1.50 MiB", "-512 bytes", "+0 bytes". */
static const char *
signed_size(int64_t v, char *buf, size_t len)
{
    char s[32];
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    snprintf(buf, len, "%c%s", v < 0 ? '-' : '+', cli_size(mag, s, sizeof s));
    return buf;
}

/* Characters of UTF-8 text (a terminal column each, for the names cuprof shows). */
static size_t
columns(const char *s)
{
    size_t n = 0;
    for (; *s != '\0'; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

/* A range name escaped for a terminal, cut with "..." past the column, then padded to it. */
static void
print_name(FILE *out, const char *text)
{
    char safe[256];
    const char *name = cli_term(text, safe, sizeof safe);
    size_t cols = columns(name), shown = 0;
    for (const char *c = name; *c != '\0'; c++) {
        bool starts = ((unsigned char)*c & 0xc0) != 0x80;
        if (starts && cols > PHASES_NAME_WIDTH && shown == PHASES_NAME_WIDTH - 3) {
            fputs("...", out);
            shown += 3;
            break;
        }
        shown += starts;
        fputc(*c, out);
    }
    for (; shown < PHASES_NAME_WIDTH; shown++)
        fputc(' ', out);
}

static void
print_names(FILE *out, const struct device_ranges *p, size_t top)
{
    fprintf(out, "  %-*s %6s  %-12s %-12s %s\n", PHASES_NAME_WIDTH, "range", "calls", "peak",
            "rise", "growth (end - start, all calls)");
    for (size_t i = 0; i < p->name_count && i < top; i++) {
        const struct range_name *n = &p->names[i];
        char s1[32], s2[32], s3[40];
        fputs("  ", out);
        print_name(out, n->text);
        fprintf(out, " %6zu  %-12s %-12s %s", n->calls, cli_size(n->peak, s1, sizeof s1),
                cli_size(n->max_rise, s2, sizeof s2),
                n->calls > n->open ? signed_size(n->growth, s3, sizeof s3) : "-");
        if (n->open > 0)
            fprintf(out, " (%zu still open)", n->open);
        fputc('\n', out);
    }
    if (p->name_count > top)
        fprintf(out, "  ... %zu more range names\n", p->name_count - top);
}

void
ranges_print(FILE *out, const struct snapshot *snap, size_t device, const struct device_analysis *a,
             const struct device_ranges *p, size_t top)
{
    if (p->range_count == 0)
        return;
    fprintf(out,
            "phases (NVTX ranges): %zu range%s of %zu name%s, %zu mark%s; live bytes: the "
            "highest inside a range (peak), its largest rise above the range's start (rise)\n",
            p->range_count, p->range_count == 1 ? "" : "s", p->name_count,
            p->name_count == 1 ? "" : "s", p->marks, p->marks == 1 ? "" : "s");
    print_names(out, p, top);
    char open[512];
    if (ranges_open_at(p, a->count, open, sizeof open) > 0)
        fprintf(out, "  open at the end: %s\n", open);
    const struct snap_device_trace *t = &snap->device_traces[device];
    for (size_t i = 0; i < t->count; i++) {
        if (t->entries[i].action != TRACE_OOM)
            continue;
        size_t n = ranges_open_at(p, i + 1, open, sizeof open);
        fprintf(out, "  OOM at entry %zu: %s%s\n", i, n > 0 ? "inside " : "outside every range",
                open);
    }
}

int
ranges_report(FILE *out, const struct snapshot *snap, size_t device,
              const struct device_analysis *a, size_t top)
{
    struct device_ranges p;
    if (ranges_run(snap, device, a, &p) != 0)
        return -1;
    ranges_print(out, snap, device, a, &p, top);
    ranges_free(&p);
    return 0;
}

void
ranges_emit(struct emitter *e, const struct snapshot *snap, size_t device,
            const struct device_analysis *a, const struct device_ranges *p)
{
    if (p->range_count == 0)
        return;
    emitter_key(e, "ranges");
    emitter_begin_dict(e);
    cli_json_key_u64(e, "range_count", p->range_count);
    emitter_key(e, "names");
    emitter_begin_list(e);
    for (size_t i = 0; i < p->name_count; i++) {
        const struct range_name *n = &p->names[i];
        emitter_begin_dict(e);
        cli_json_key_string(e, "name", n->text);
        cli_json_key_u64(e, "calls", n->calls);
        cli_json_key_u64(e, "open", n->open);
        cli_json_key_u64(e, "peak", n->peak);
        cli_json_key_u64(e, "peak_at", p->ranges[n->peak_range].peak_at);
        cli_json_key_u64(e, "rise", n->max_rise);
        cli_json_key_int(e, "growth", n->growth);
        emitter_end(e);
    }
    emitter_end(e);
    emitter_key(e, "ranges"); /* [name, start, end (-1: open), live_start, peak, live_end, depth] */
    emitter_begin_list(e);
    for (size_t i = 0; i < p->range_count && i < PHASES_PLOT_RANGES; i++) {
        const struct range_span *r = &p->ranges[i];
        emitter_begin_list(e);
        emitter_u64(e, r->name);
        emitter_int(e, r->start_unknown ? -1 : (int64_t)r->start);
        emitter_int(e, r->end == RANGE_OPEN ? -1 : (int64_t)r->end);
        emitter_u64(e, r->live_start);
        emitter_u64(e, r->peak);
        emitter_u64(e, r->live_end);
        emitter_u64(e, r->depth);
        emitter_end(e);
    }
    emitter_end(e);
    emitter_end(e);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (mem != NULL) {
        ranges_print(mem, snap, device, a, p, SIZE_MAX);
        fclose(mem);
        cli_json_key_string(e, "ranges_text", text);
    }
    free(text);
}
