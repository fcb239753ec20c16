/* memory_summary.c: torch.cuda.memory_summary()'s table, cell for cell. */
#include "stats/memory_summary.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

/* Appends with snprintf semantics: counts every byte, writes what fits. */
struct text_out {
    char *buf;
    size_t len;
    size_t pos;
};

static void out_printf(struct text_out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
out_printf(struct text_out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n;
    if (o->pos < o->len)
        n = vsnprintf(o->buf + o->pos, o->len - o->pos, fmt, ap);
    else
        n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->pos += (size_t)n;
}

/* Python's // (floor division) for a positive divisor. */
static int64_t
floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && (a < 0))
        q--;
    return q;
}

#define CELL_LEN 32

/* PyTorch's _format_size: the unit comes from pref (the row's `all` value); keep dividing by
 * 1024 while pref >= 768 KiB. pref is divided as a float, sz with integer division. */
static void
format_size(char *cell, int64_t sz, int64_t pref)
{
    static const char *const units[] = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double p = (double)pref;
    size_t u = 0;
    for (size_t i = 1; i < sizeof(units) / sizeof(units[0]); i++) {
        if (p < 768.0 * 1024.0)
            break;
        u = i;
        sz = floor_div(sz, 1024);
        p /= 1024.0;
    }
    snprintf(cell, CELL_LEN, "%6" PRId64 " %s", sz, units[u]);
}

/* PyTorch's _format_count: K and M steps of 1000 while pref >= 750 000. */
static void
format_count(char *cell, int64_t cnt, int64_t pref)
{
    static const char *const units[] = {" ", "K", "M"};
    double p = (double)pref;
    size_t u = 0;
    for (size_t i = 1; i < sizeof(units) / sizeof(units[0]); i++) {
        if (p < 750.0 * 1000.0)
            break;
        u = i;
        cnt = floor_div(cnt, 1000);
        p /= 1000.0;
    }
    snprintf(cell, CELL_LEN, "%7" PRId64 " %s ", cnt, units[u]);
}

static void
format_cell(char *cell, enum stat_kind kind, int64_t v, int64_t pref)
{
    if (kind == STAT_KIND_BYTES)
        format_size(cell, v, pref);
    else
        format_count(cell, v, pref);
}

/* One table row; the units of every column come from `pref` (the metric's `all` row). */
static void
out_row(struct text_out *o, const char *label, enum stat_kind kind, const struct stat_counter *c,
        const struct stat_counter *pref)
{
    char cur[CELL_LEN], peak[CELL_LEN], alloc[CELL_LEN], freed[CELL_LEN];
    format_cell(cur, kind, c->current, pref->current);
    format_cell(peak, kind, c->peak, pref->peak);
    format_cell(alloc, kind, c->allocated, pref->allocated);
    format_cell(freed, kind, c->freed, pref->freed);
    out_printf(o, "| %-21s | %s | %s | %s | %s |\n", label, cur, peak, alloc, freed);
}

#define RULE_EQ   "==========================================================================="
#define RULE_DASH "---------------------------------------------------------------------------"

static void
summary_one(struct text_out *o, const struct memory_stats *s, int device, bool abbreviated)
{
    out_printf(o, "|" RULE_EQ "|\n");
    out_printf(o, "| %16s PyTorch CUDA memory summary, device ID %-17d |\n", "", device);
    out_printf(o, "|" RULE_DASH "|\n");
    out_printf(o, "|  %9s CUDA OOMs: %-12" PRId64 " | %6s cudaMalloc retries: %-8" PRId64 "  |\n",
               "", s->num_ooms, "", s->num_alloc_retries);
    out_printf(o, "|" RULE_EQ "|\n");
    out_printf(o,
               "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n");

    /* PyTorch: the metric row, then large pool before small pool. */
#define STAT_ARRAY(name, kind, label)                                                              \
    out_printf(o, "|" RULE_DASH "|\n");                                                            \
    out_row(o, label, kind, &s->name[STAT_ALL], &s->name[STAT_ALL]);                               \
    if (!abbreviated) {                                                                            \
        out_row(o, "      from large pool", kind, &s->name[STAT_LARGE_POOL], &s->name[STAT_ALL]);  \
        out_row(o, "      from small pool", kind, &s->name[STAT_SMALL_POOL], &s->name[STAT_ALL]);  \
    }
#define STAT_SINGLE(name, label)                                                                   \
    out_printf(o, "|" RULE_DASH "|\n");                                                            \
    out_row(o, label, STAT_KIND_COUNT, &s->name, &s->name);
#define STAT_SCALAR(name, reset)
#include "stats/memory_stats.def"
#undef STAT_ARRAY
#undef STAT_SINGLE
#undef STAT_SCALAR

    out_printf(o, "|" RULE_EQ "|\n");
}

size_t
memory_summary(const struct memory_stats *stats, int device, bool abbreviated, char *buf,
               size_t len)
{
    struct text_out o = {buf, len, 0};
    if (len > 0)
        buf[0] = '\0';
    summary_one(&o, stats, device, abbreviated);
    return o.pos;
}

size_t
memory_summary_devices(const struct memory_stats *stats, int count, bool abbreviated, char *buf,
                       size_t len)
{
    struct text_out o = {buf, len, 0};
    if (len > 0)
        buf[0] = '\0';
    for (int d = 0; d < count; d++)
        summary_one(&o, &stats[d], d, abbreviated);
    return o.pos;
}
