/* stats_json.c: the flat memory_stats dict as JSON, written by hand (keys are plain ASCII). */
#include "stats/stats_json.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>

struct json_out {
    char *buf;
    size_t len;
    size_t pos;
};

/* Counts every byte, writes what fits (snprintf semantics). */
static void
advance(struct json_out *o, int n)
{
    if (n > 0)
        o->pos += (size_t)n;
}

static char *
at(struct json_out *o, size_t *room)
{
    *room = o->pos < o->len ? o->len - o->pos : 0;
    return *room ? o->buf + o->pos : NULL;
}

static void
put_text(struct json_out *o, const char *text)
{
    size_t room;
    char *p = at(o, &room);
    advance(o, snprintf(p, room, "%s", text));
}

static void
put_pair(struct json_out *o, bool first, const char *key, int64_t value)
{
    size_t room;
    char *p = at(o, &room);
    advance(o, snprintf(p, room, "%s\"%s\": %" PRId64, first ? "" : ", ", key, value));
}

static void
json_one(struct json_out *o, const struct memory_stats *stats)
{
    struct memory_stat_kv kv[MEMORY_STATS_KEY_COUNT];
    size_t n = memory_stats_flatten(stats, kv, MEMORY_STATS_KEY_COUNT);

    put_text(o, "{");
    for (size_t i = 0; i < n; i++)
        put_pair(o, i == 0, kv[i].key, kv[i].value);
    put_text(o, "}");
}

size_t
stats_json(const struct memory_stats *stats, char *buf, size_t len)
{
    struct json_out o = {buf, len, 0};
    if (len > 0)
        buf[0] = '\0';
    json_one(&o, stats);
    return o.pos;
}

size_t
stats_json_devices(const struct memory_stats *stats, int count, char *buf, size_t len)
{
    struct json_out o = {buf, len, 0};
    if (len > 0)
        buf[0] = '\0';
    put_text(&o, "[");
    for (int d = 0; d < count; d++) {
        if (d > 0)
            put_text(&o, ", ");
        json_one(&o, &stats[d]);
    }
    put_text(&o, "]");
    return o.pos;
}
