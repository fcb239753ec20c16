/* memory_stats.c: initialisation, resets and the flat key view of PyTorch's memory_stats. */
#include "stats/memory_stats.h"

#include <string.h>

/* One flat key and where its value lives inside struct memory_stats. */
struct stat_key {
    const char *key;
    size_t offset;
};

#define COUNTER_AT(base, field) ((base) + offsetof(struct stat_counter, field))
#define POOL_AT(name, pool)                                                                        \
    (offsetof(struct memory_stats, name) + (size_t)(pool) * sizeof(struct stat_counter))
#define COUNTER_KEYS(prefix, base)                                                                 \
    {prefix ".current", COUNTER_AT(base, current)}, {prefix ".peak", COUNTER_AT(base, peak)},      \
        {prefix ".allocated", COUNTER_AT(base, allocated)},                                        \
        {prefix ".freed", COUNTER_AT(base, freed)},

/* Every key, in .def order; memory_stats_flatten sorts them. */
static const struct stat_key stat_keys[] = {
#define STAT_ARRAY(name, kind, label)                                                              \
    COUNTER_KEYS(#name ".all", POOL_AT(name, STAT_ALL))                                            \
    COUNTER_KEYS(#name ".small_pool", POOL_AT(name, STAT_SMALL_POOL))                              \
    COUNTER_KEYS(#name ".large_pool", POOL_AT(name, STAT_LARGE_POOL))
#define STAT_SINGLE(name, label) COUNTER_KEYS(#name, offsetof(struct memory_stats, name))
#define STAT_SCALAR(name, reset) {#name, offsetof(struct memory_stats, name)},
#include "stats/memory_stats.def"
#undef STAT_ARRAY
#undef STAT_SINGLE
#undef STAT_SCALAR
};

_Static_assert(sizeof(stat_keys) / sizeof(stat_keys[0]) == MEMORY_STATS_KEY_COUNT,
               "memory_stats.def and MEMORY_STATS_KEY_COUNT disagree");

static int64_t
stat_value(const struct memory_stats *stats, size_t offset)
{
    int64_t v;
    memcpy(&v, (const char *)stats + offset, sizeof(v));
    return v;
}

static void
stat_set(struct memory_stats *stats, size_t offset, int64_t v)
{
    memcpy((char *)stats + offset, &v, sizeof(v));
}

void
memory_stats_init(struct memory_stats *stats, int64_t max_split_size)
{
    memset(stats, 0, sizeof(*stats));
    stats->max_split_size = max_split_size;
}

static void
counter_reset_peak(struct stat_counter *c)
{
    c->peak = c->current;
}

static void
counter_reset_accumulated(struct stat_counter *c)
{
    c->allocated = 0;
    c->freed = 0;
}

void
memory_stats_settle_all(struct memory_stats *stats)
{
#define STAT_ARRAY(name, kind, label)                                                              \
    stats->name[STAT_ALL].current =                                                                \
        stats->name[STAT_SMALL_POOL].current + stats->name[STAT_LARGE_POOL].current;               \
    stats->name[STAT_ALL].allocated =                                                              \
        stats->name[STAT_SMALL_POOL].allocated + stats->name[STAT_LARGE_POOL].allocated;           \
    stats->name[STAT_ALL].freed =                                                                  \
        stats->name[STAT_SMALL_POOL].freed + stats->name[STAT_LARGE_POOL].freed;
#define STAT_SINGLE(name, label)
#define STAT_SCALAR(name, reset)
#include "stats/memory_stats.def"
#undef STAT_ARRAY
#undef STAT_SINGLE
#undef STAT_SCALAR
}

void
memory_stats_reset_peak(struct memory_stats *stats)
{
#define STAT_ARRAY(name, kind, label)                                                              \
    for (int p = 0; p < STAT_POOL_COUNT; p++)                                                      \
        counter_reset_peak(&stats->name[p]);
#define STAT_SINGLE(name, label) counter_reset_peak(&stats->name);
#define STAT_SCALAR(name, reset)
#include "stats/memory_stats.def"
#undef STAT_ARRAY
#undef STAT_SINGLE
#undef STAT_SCALAR
}

void
memory_stats_reset_accumulated(struct memory_stats *stats)
{
#define STAT_ARRAY(name, kind, label)                                                              \
    for (int p = 0; p < STAT_POOL_COUNT; p++)                                                      \
        counter_reset_accumulated(&stats->name[p]);
#define STAT_SINGLE(name, label) counter_reset_accumulated(&stats->name);
#define STAT_SCALAR(name, reset)                                                                   \
    if (reset)                                                                                     \
        stats->name = 0;
#include "stats/memory_stats.def"
#undef STAT_ARRAY
#undef STAT_SINGLE
#undef STAT_SCALAR
}

size_t
memory_stats_flatten(const struct memory_stats *stats, struct memory_stat_kv *out, size_t cap)
{
    struct memory_stat_kv all[MEMORY_STATS_KEY_COUNT];

    /* Insertion sort: Python sorts the keys by code point, which strcmp matches for ASCII. */
    for (size_t i = 0; i < MEMORY_STATS_KEY_COUNT; i++) {
        struct memory_stat_kv kv = {stat_keys[i].key, stat_value(stats, stat_keys[i].offset)};
        size_t j = i;
        while (j > 0 && strcmp(all[j - 1].key, kv.key) > 0) {
            all[j] = all[j - 1];
            j--;
        }
        all[j] = kv;
    }
    size_t n = cap < MEMORY_STATS_KEY_COUNT ? cap : MEMORY_STATS_KEY_COUNT;
    if (n > 0)
        memcpy(out, all, n * sizeof(*out));
    return MEMORY_STATS_KEY_COUNT;
}

static const struct stat_key *
find_key(const char *key)
{
    for (size_t i = 0; i < MEMORY_STATS_KEY_COUNT; i++) {
        if (strcmp(stat_keys[i].key, key) == 0)
            return &stat_keys[i];
    }
    return NULL;
}

size_t
memory_stats_from_flat(const struct memory_stat_kv *kv, size_t count, struct memory_stats *out)
{
    size_t known = 0;

    memory_stats_init(out, -1);
    for (size_t i = 0; i < count; i++) {
        const struct stat_key *k = kv[i].key ? find_key(kv[i].key) : NULL;
        if (!k)
            continue;
        stat_set(out, k->offset, kv[i].value);
        known++;
    }
    return known;
}

bool
memory_stats_get(const struct memory_stats *stats, const char *key, int64_t *value)
{
    const struct stat_key *k = find_key(key);
    if (!k)
        return false;
    *value = stat_value(stats, k->offset);
    return true;
}
