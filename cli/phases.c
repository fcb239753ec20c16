/* phases.c: annotations found in a history, and each phase's figures from the series. */
#include "cli/phases.h"

#include <stdlib.h>
#include <string.h>

#include "allocator/trace_sink.h"
#include "cli/cli_util.h"

static bool
same_label(const char *a, const char *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* The figures of the phase of entries [from, to): bytes before its first entry, peaks after each
 * of its entries. */
static void
measure(struct phase_mark *m, const struct device_analysis *a, size_t from, size_t to)
{
    m->live = a->live_series[from];
    m->reserved = a->reserved_series[from];
    m->peak_live = a->live_series[from + 1];
    m->peak_reserved = a->reserved_series[from + 1];
    m->peak_live_at = from + 1;
    for (size_t k = from + 2; k <= to; k++) {
        if (a->live_series[k] > m->peak_live) {
            m->peak_live = a->live_series[k];
            m->peak_live_at = k;
        }
        if (a->reserved_series[k] > m->peak_reserved)
            m->peak_reserved = a->reserved_series[k];
    }
    m->growth = cli_add_i64(cli_i64(a->live_series[to]), -cli_i64(m->live));
}

int
phases_marks(const struct snapshot *snap, size_t device, const struct device_analysis *a,
             struct phase_mark **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (device >= snap->device_count || a->live_series == NULL)
        return 0;
    const struct snap_device_trace *t = &snap->device_traces[device];
    size_t cap = 0;
    const char *metadata = NULL; /* PyTorch's, as the entries so far carried it */
    for (size_t i = 0; i < t->count; i++) {
        const struct snap_entry *e = &t->entries[i];
        const char *label = e->has_label ? snapshot_entry_label(t, i) : NULL;
        bool mark = e->action == TRACE_ANNOTATE;
        if (!mark) {
            mark = !same_label(label, metadata);
            metadata = label;
        }
        if (!mark)
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            struct phase_mark *grown = realloc(*out, cap * sizeof(**out));
            if (grown == NULL) {
                free(*out);
                *out = NULL;
                *n = 0;
                return -1;
            }
            *out = grown;
        }
        (*out)[(*n)++] =
            (struct phase_mark){.entry = i,
                                .label = e->action == TRACE_ANNOTATE && !label ? "" : label,
                                .has_time = e->has_time,
                                .time_us = e->time_us};
    }
    for (size_t k = 0; k < *n; k++)
        measure(&(*out)[k], a, (*out)[k].entry, k + 1 < *n ? (*out)[k + 1].entry : a->count);
    return 0;
}

struct by_label {
    const struct phase_mark *m;
    size_t index;
};

static int
label_order(const void *x, const void *y)
{
    const struct by_label *p = x, *q = y;
    const char *a = p->m->label, *b = q->m->label;
    int c = a == NULL || b == NULL ? (a != NULL) - (b != NULL) : strcmp(a, b);
    return c != 0 ? c : (p->index > q->index) - (p->index < q->index);
}

static int
first_seen(const void *x, const void *y)
{
    const struct phase_label *p = x, *q = y;
    return (p->first_entry > q->first_entry) - (p->first_entry < q->first_entry);
}

int
phases_by_label(const struct phase_mark *marks, size_t n, struct phase_label **out, size_t *nl)
{
    *out = NULL;
    *nl = 0;
    if (n == 0)
        return 0;
    struct by_label *v = malloc(n * sizeof(*v));
    *out = calloc(n, sizeof(**out));
    if (v == NULL || *out == NULL) {
        free(v);
        free(*out);
        *out = NULL;
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = (struct by_label){&marks[i], i};
    if (n > 1)
        qsort(v, n, sizeof(*v), label_order);
    for (size_t i = 0; i < n; i++) {
        const struct phase_mark *m = v[i].m;
        if (i == 0 || !same_label(v[i - 1].m->label, m->label)) /* its first mark */
            (*out)[(*nl)++] = (struct phase_label){.label = m->label, .first_entry = m->entry};
        struct phase_label *l = &(*out)[*nl - 1];
        if (++l->count == 1 || m->peak_live > l->peak_live) {
            l->peak_live = m->peak_live;
            l->peak_live_at = m->peak_live_at;
        }
        if (m->peak_reserved > l->peak_reserved)
            l->peak_reserved = m->peak_reserved;
        l->growth = cli_add_i64(l->growth, m->growth);
    }
    /* In the order each label first appears. */
    if (*nl > 1)
        qsort(*out, *nl, sizeof(**out), first_seen);
    free(v);
    return 0;
}
