/* run_diff.c: the comparison of two runs. Nothing is matched by address or stream handle: both
 * differ from run to run (ASLR, the driver's placement), so call sites are matched by their
 * frames' text and segments by what they are (size, pool, the call site that made them). */
#include "cli/run_diff.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/analysis.h"
#include "cli/cli_util.h"

int64_t
run_diff_growth(uint64_t a, uint64_t b)
{
    return cli_add_i64(cli_i64(b), -cli_i64(a));
}

/* ---- Call sites ------------------------------------------------------------------------------ */

/* A growable string. */
struct text {
    char *s;
    size_t len, cap;
    bool failed;
};

static void
text_add(struct text *t, const char *s)
{
    size_t n = strlen(s);
    if (t->failed)
        return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 128;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *grown = realloc(t->s, cap);
        if (grown == NULL) {
            t->failed = true;
            return;
        }
        t->s = grown;
        t->cap = cap;
    }
    memcpy(t->s + t->len, s, n + 1);
    t->len += n;
}

/* The frames of a stack as one key: name, file and (with_lines) line of each. malloc'd; NULL when
 * host memory runs out. */
static char *
site_key(const struct snapshot *snap, uint32_t stack, bool with_lines)
{
    struct text t = {NULL, 0, 0, false};
    text_add(&t, "");
    if (stack < snap->stack_count) {
        const struct snap_stack *st = &snap->stacks[stack];
        for (uint32_t i = 0; i < st->count && st->first + i < snap->stack_frame_count; i++) {
            uint32_t fi = snap->stack_frames[st->first + i];
            const struct snap_frame *f = fi < snap->frame_count ? &snap->frames[fi] : NULL;
            char line[32];
            snprintf(line, sizeof line, "\x1f%" PRId64 "\x1e", f != NULL ? f->line : 0);
            text_add(&t, f != NULL && f->name != NULL ? f->name : "??");
            text_add(&t, "\x1f");
            text_add(&t, f != NULL && f->filename != NULL ? f->filename : "");
            text_add(&t, with_lines ? line : "\x1e");
        }
    }
    if (t.failed) {
        free(t.s);
        return NULL;
    }
    return t.s;
}

/* One run's sites at one instant, each with its keys. */
struct keyed {
    char *key, *loose;
    uint32_t stack;
    uint64_t bytes, count;
    bool matched;
};

static int
by_key(const void *x, const void *y)
{
    return strcmp(((const struct keyed *)x)->key, ((const struct keyed *)y)->key);
}

static int
by_loose(const void *x, const void *y)
{
    const struct keyed *p = x, *q = y;
    int c = strcmp(p->loose, q->loose);
    return c != 0 ? c : (int)p->matched - (int)q->matched;
}

static void
keyed_free(struct keyed *k, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(k[i].key);
        free(k[i].loose);
    }
    free(k);
}

/* The sites of one run after `at` entries, sorted by key, one entry per key. *n is 0 for an
 * absent run. */
static int
keyed_sites(const struct snapshot *snap, size_t device, bool present, size_t at, struct keyed **out,
            size_t *n)
{
    *out = NULL;
    *n = 0;
    if (snap == NULL || !present)
        return 0;
    struct site_total *sites;
    size_t count;
    if (analysis_sites_at(snap, device, at, &sites, &count) != 0)
        return -1;
    struct keyed *k = calloc(count + 1, sizeof(*k));
    int rc = k != NULL ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < count; i++) {
        k[i] = (struct keyed){site_key(snap, sites[i].stack, true),
                              site_key(snap, sites[i].stack, false),
                              sites[i].stack,
                              sites[i].bytes,
                              sites[i].count,
                              false};
        if (k[i].key == NULL || k[i].loose == NULL)
            rc = -1;
    }
    free(sites);
    if (rc != 0) {
        if (k != NULL)
            keyed_free(k, count);
        return -1;
    }
    if (count > 1)
        qsort(k, count, sizeof(*k), by_key);
    /* Two stacks that print alike are one site. */
    size_t m = 0;
    for (size_t i = 0; i < count; i++) {
        if (m > 0 && strcmp(k[m - 1].key, k[i].key) == 0) {
            k[m - 1].bytes += k[i].bytes;
            k[m - 1].count += k[i].count;
            free(k[i].key);
            free(k[i].loose);
        } else {
            k[m++] = k[i];
        }
    }
    *out = k;
    *n = m;
    return 0;
}

static struct run_site
site_row(const struct keyed *a, const struct keyed *b)
{
    struct run_site r = {0};
    if (a != NULL) {
        r.stack_a = a->stack;
        r.bytes_a = a->bytes;
        r.count_a = a->count;
    }
    if (b != NULL) {
        r.stack_b = b->stack;
        r.bytes_b = b->bytes;
        r.count_b = b->count;
    }
    r.growth = run_diff_growth(r.bytes_a, r.bytes_b);
    return r;
}

static int
by_growth(const void *x, const void *y)
{
    const struct run_site *p = x, *q = y;
    if (p->growth != q->growth)
        return p->growth < q->growth ? 1 : -1;
    if (p->bytes_b != q->bytes_b)
        return p->bytes_b < q->bytes_b ? 1 : -1;
    if (p->bytes_a != q->bytes_a)
        return p->bytes_a < q->bytes_a ? 1 : -1;
    return (p->stack_b > q->stack_b) - (p->stack_b < q->stack_b);
}

/* Pairs of equal keys, then pairs of equal loose keys that are the only ones on both sides. */
static size_t
match_sites(struct keyed *a, size_t na, struct keyed *b, size_t nb, struct run_site *rows)
{
    size_t n = 0;
    for (size_t i = 0, j = 0; i < na && j < nb;) {
        int c = strcmp(a[i].key, b[j].key);
        if (c == 0) {
            rows[n++] = site_row(&a[i], &b[j]);
            a[i++].matched = b[j++].matched = true;
        } else if (c < 0) {
            i++;
        } else {
            j++;
        }
    }
    /* Unmatched ones sort first within a loose key (matched = false). */
    if (na > 1)
        qsort(a, na, sizeof(*a), by_loose);
    if (nb > 1)
        qsort(b, nb, sizeof(*b), by_loose);
    for (size_t i = 0, j = 0; i < na && j < nb;) {
        int c = strcmp(a[i].loose, b[j].loose);
        if (c != 0) {
            i += c < 0;
            j += c > 0;
            continue;
        }
        size_t ea = i, eb = j, free_a = 0, free_b = 0;
        for (; ea < na && strcmp(a[ea].loose, a[i].loose) == 0; ea++)
            free_a += !a[ea].matched;
        for (; eb < nb && strcmp(b[eb].loose, b[j].loose) == 0; eb++)
            free_b += !b[eb].matched;
        if (free_a == 1 && free_b == 1) { /* unmatched ones sort first: at i and j */
            rows[n++] = site_row(&a[i], &b[j]);
            a[i].matched = b[j].matched = true;
        }
        i = ea;
        j = eb;
    }
    for (size_t i = 0; i < na; i++)
        if (!a[i].matched)
            rows[n++] = site_row(&a[i], NULL);
    for (size_t j = 0; j < nb; j++)
        if (!b[j].matched)
            rows[n++] = site_row(NULL, &b[j]);
    return n;
}

/* A's sites after at_a entries against B's after at_b. */
static int
compare_sites(const struct snapshot *a, const struct snapshot *b, size_t device,
              const struct run_side *sa, const struct run_side *sb, size_t at_a, size_t at_b,
              struct run_site **out, size_t *count)
{
    struct keyed *ka = NULL, *kb = NULL;
    size_t na = 0, nb = 0;
    *out = NULL;
    *count = 0;
    int rc = keyed_sites(a, device, sa->present, at_a, &ka, &na);
    if (rc == 0)
        rc = keyed_sites(b, device, sb->present, at_b, &kb, &nb);
    struct run_site *rows = rc == 0 ? calloc(na + nb + 1, sizeof(*rows)) : NULL;
    if (rows != NULL) {
        *count = match_sites(ka, na, kb, nb, rows);
        if (*count > 1)
            qsort(rows, *count, sizeof(*rows), by_growth);
        *out = rows;
    }
    keyed_free(ka, na);
    keyed_free(kb, nb);
    return rows != NULL ? 0 : -1;
}

/* ---- Segments -------------------------------------------------------------------------------- */

struct seg_key {
    char *key;
    const struct snap_segment *seg;
    size_t count;
};

static int
seg_by_key(const void *x, const void *y)
{
    return strcmp(((const struct seg_key *)x)->key, ((const struct seg_key *)y)->key);
}

/* One run's segments at the end, one entry per kind, sorted by key. */
static int
segment_kinds(const struct snapshot *snap, size_t device, struct seg_key **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (snap == NULL)
        return 0;
    size_t total = 0;
    for (size_t i = 0; i < snap->segment_count; i++)
        total += (size_t)snap->segments[i].device == device;
    struct seg_key *k = calloc(total + 1, sizeof(*k));
    if (k == NULL)
        return -1;
    size_t m = 0;
    for (size_t i = 0; i < snap->segment_count; i++) {
        const struct snap_segment *s = &snap->segments[i];
        if ((size_t)s->device != device)
            continue;
        char *site = site_key(snap, s->stack, true);
        char head[160];
        snprintf(head, sizeof head, "%020" PRIu64 "|%d%d|%" PRId64 ",%" PRId64 "|%u|",
                 s->total_size, s->is_small, s->is_expandable, s->pool_id[0], s->pool_id[1],
                 s->cuprof_pool);
        size_t len = site != NULL ? strlen(head) + strlen(site) + 1 : 0;
        k[m].key = site != NULL ? malloc(len) : NULL;
        if (k[m].key != NULL)
            snprintf(k[m].key, len, "%s%s", head, site);
        free(site);
        if (k[m].key == NULL) {
            for (size_t j = 0; j < m; j++)
                free(k[j].key);
            free(k);
            return -1;
        }
        k[m].seg = s;
        k[m++].count = 1;
    }
    if (m > 1)
        qsort(k, m, sizeof(*k), seg_by_key);
    size_t u = 0;
    for (size_t i = 0; i < m; i++) {
        if (u > 0 && strcmp(k[u - 1].key, k[i].key) == 0) {
            k[u - 1].count++;
            free(k[i].key);
        } else {
            k[u++] = k[i];
        }
    }
    *out = k;
    *n = u;
    return 0;
}

static struct run_segments
segment_row(const struct seg_key *a, const struct seg_key *b)
{
    const struct snap_segment *s = a != NULL ? a->seg : b->seg;
    struct run_segments r = {.size = s->total_size,
                             .is_small = s->is_small,
                             .is_expandable = s->is_expandable,
                             .pool_id = {s->pool_id[0], s->pool_id[1]},
                             .cuprof_pool = s->cuprof_pool};
    if (a != NULL) {
        r.stack_a = a->seg->stack;
        r.count_a = a->count;
    }
    if (b != NULL) {
        r.stack_b = b->seg->stack;
        r.count_b = b->count;
    }
    return r;
}

/* Most new bytes first, then most released bytes, then the unchanged kinds by size. */
static int
by_change(const void *x, const void *y)
{
    const struct run_segments *p = x, *q = y;
    int64_t dp = run_diff_growth(p->count_a * p->size, p->count_b * p->size);
    int64_t dq = run_diff_growth(q->count_a * q->size, q->count_b * q->size);
    bool cp = dp != 0, cq = dq != 0;
    if (cp != cq)
        return cp ? -1 : 1;
    if (dp != dq)
        return dp < dq ? 1 : -1;
    return p->size != q->size ? (p->size < q->size ? 1 : -1) : 0;
}

static int
compare_segments(const struct snapshot *a, const struct snapshot *b, struct run_device_diff *d)
{
    struct seg_key *ka = NULL, *kb = NULL;
    size_t na = 0, nb = 0;
    int rc = segment_kinds(a, d->device, &ka, &na);
    if (rc == 0)
        rc = segment_kinds(b, d->device, &kb, &nb);
    d->segments = rc == 0 ? calloc(na + nb + 1, sizeof(*d->segments)) : NULL;
    if (d->segments != NULL) {
        size_t n = 0;
        for (size_t i = 0, j = 0; i < na || j < nb;) {
            int c = i >= na ? 1 : j >= nb ? -1 : strcmp(ka[i].key, kb[j].key);
            struct run_segments r = segment_row(c <= 0 ? &ka[i] : NULL, c >= 0 ? &kb[j] : NULL);
            if (r.count_b > r.count_a) {
                d->new_segments += r.count_b - r.count_a;
                d->new_bytes += (r.count_b - r.count_a) * r.size;
            } else {
                d->released_segments += r.count_a - r.count_b;
                d->released_bytes += (r.count_a - r.count_b) * r.size;
            }
            d->segments[n++] = r;
            i += c <= 0;
            j += c >= 0;
        }
        if (n > 1)
            qsort(d->segments, n, sizeof(*d->segments), by_change);
        d->segment_kinds = n;
    }
    for (size_t i = 0; i < na; i++)
        free(ka[i].key);
    for (size_t j = 0; j < nb; j++)
        free(kb[j].key);
    free(ka);
    free(kb);
    return d->segments != NULL ? 0 : -1;
}

/* ---- Both runs ------------------------------------------------------------------------------- */

static int
device_diff(const struct snapshot *a, const struct snapshot *b, struct run_device_diff *d)
{
    if (run_side_make(a, d->device, &d->a) != 0 || run_side_make(b, d->device, &d->b) != 0)
        return -1;
    if (compare_sites(a, b, d->device, &d->a, &d->b, d->a.allocated.at, d->b.allocated.at,
                      &d->at_peak, &d->at_peak_count) != 0 ||
        compare_sites(a, b, d->device, &d->a, &d->b, d->a.entries, d->b.entries, &d->at_end,
                      &d->at_end_count) != 0)
        return -1;
    return compare_segments(a, b, d);
}

int
run_diff_make(const struct snapshot *a, const struct snapshot *b, struct run_diff *out)
{
    memset(out, 0, sizeof(*out));
    size_t na = a != NULL ? analysis_device_count(a) : 0, nb = analysis_device_count(b);
    size_t n = na > nb ? na : nb, present = 0;
    for (size_t d = 0; d < n; d++)
        present += (a != NULL && analysis_device_present(a, d)) || analysis_device_present(b, d);
    out->devices = calloc(present + 1, sizeof(*out->devices));
    if (out->devices == NULL)
        return -1;
    for (size_t d = 0; d < n; d++) {
        if (!(a != NULL && analysis_device_present(a, d)) && !analysis_device_present(b, d))
            continue;
        struct run_device_diff *dev = &out->devices[out->device_count++];
        dev->device = d;
        if (device_diff(a, b, dev) != 0) {
            run_diff_free(out);
            return -1;
        }
        out->end_growth = cli_add_i64(out->end_growth,
                                      run_diff_growth(dev->a.end_allocated, dev->b.end_allocated));
    }
    return 0;
}

void
run_diff_free(struct run_diff *d)
{
    for (size_t i = 0; i < d->device_count; i++) {
        free(d->devices[i].at_peak);
        free(d->devices[i].at_end);
        free(d->devices[i].segments);
    }
    free(d->devices);
    memset(d, 0, sizeof(*d));
}
