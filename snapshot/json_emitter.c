/* json_emitter.c: the emitter as compact JSON (the same structure as the pickle; current
 * pytorch.org/memory_viz tries JSON first). Tuples become arrays. JSON has no references, so a
 * memoized frame list is written in full every time, but its text is formatted once and then
 * copied (an entry is mostly its frames: 1.5 kB at depth 16). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "allocator/cuprof_errors.h"
#include "snapshot/emitter.h"

/* Rendered frame lists are kept up to this many bytes in all (10^4 stacks of depth 16: 14 MB). */
#define JSON_CACHE_MAX (64u << 20)

struct json_span {
    uint32_t off; /* in json_cache.text (< JSON_CACHE_MAX) */
    uint32_t len; /* 0: not rendered yet */
};

/* e->impl of a caching JSON emitter. */
struct json_cache {
    struct json_span *spans; /* per stack id */
    size_t span_count;
    char *text; /* every rendered list, back to back */
    size_t text_len, text_cap;
    int rec_depth;        /* the level of the list being recorded, or -1 */
    uint32_t rec_id;      /* its stack id */
    size_t rec_start;     /* where its text starts in e->buf (after its '[') */
    uint64_t rec_written; /* e->bytes_written when it started: a flush in between cancels it */
};

/* The recorded list just got its ']': keep "[" + its text, within the budget. */
static void
record_end(struct emitter *e, struct json_cache *c)
{
    c->rec_depth = -1;
    size_t len = e->len - c->rec_start + 1;
    if (e->bytes_written != c->rec_written || c->text_len + len > JSON_CACHE_MAX)
        return;
    if (c->text_len + len > c->text_cap) {
        size_t cap = c->text_cap ? c->text_cap * 2 : 65536;
        while (cap < c->text_len + len)
            cap *= 2;
        char *t = realloc(c->text, cap);
        if (t == NULL)
            return; /* not kept: rendered again next time */
        c->text = t;
        c->text_cap = cap;
    }
    c->text[c->text_len] = '[';
    memcpy(c->text + c->text_len + 1, e->buf + c->rec_start, len - 1);
    c->spans[c->rec_id] = (struct json_span){.off = (uint32_t)c->text_len, .len = (uint32_t)len};
    c->text_len += len;
}

static void
before_value(struct emitter *e)
{
    if (e->depth > 0) {
        struct emitter_level *l = &e->levels[e->depth - 1];
        if (l->kind != EMITTER_DICT && l->count > 0)
            emitter_put_byte(e, ',');
    }
}

static void
after_value(struct emitter *e)
{
    if (e->depth > 0)
        e->levels[e->depth - 1].count++;
}

static void
j_begin(struct emitter *e, int kind)
{
    before_value(e);
    if (e->depth == EMITTER_MAX_DEPTH) {
        if (e->error == 0)
            e->error = -CUPROF_EINVAL;
        return;
    }
    e->levels[e->depth++] = (struct emitter_level){.kind = (uint8_t)kind};
    emitter_put_byte(e, kind == EMITTER_DICT ? '{' : '[');
}

static void
j_end(struct emitter *e)
{
    if (e->depth == 0) {
        if (e->error == 0)
            e->error = -CUPROF_EINVAL;
        return;
    }
    struct emitter_level *l = &e->levels[--e->depth];
    emitter_put_byte(e, l->kind == EMITTER_DICT ? '}' : ']');
    struct json_cache *c = e->impl;
    if (c != NULL && c->rec_depth == e->depth + 1)
        record_end(e, c);
    after_value(e);
}

/* Nonzero when one of the 8 bytes in x is below 0x20, '"', '\\' or '<' (bytes >= 0x80, UTF-8,
 * need no escape): the classic "has a byte less than n" and "has a zero byte" word tricks. */
static uint64_t
needs_escape8(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    uint64_t quote = x ^ (ones * '"'), backslash = x ^ (ones * '\\'), lt = x ^ (ones * '<');
    return (((x - ones * 0x20) & ~x) | ((quote - ones) & ~quote) |
            ((backslash - ones) & ~backslash) | ((lt - ones) & ~lt)) &
           highs;
}

/* '<' is escaped too (\u003c), so that JSON inside an HTML <script> (cuprof plot) cannot close
 * it; every JSON reader reads it back as '<'. */
static bool
needs_escape(unsigned char c)
{
    return c < 0x20 || c == '"' || c == '\\' || c == '<';
}

static bool
plain_text(const char *s, size_t len)
{
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t x;
        memcpy(&x, s + i, 8);
        if (needs_escape8(x))
            return false;
    }
    for (; i < len; i++)
        if (needs_escape((unsigned char)s[i]))
            return false;
    return true;
}

static void
put_escaped(struct emitter *e, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t run = 0; /* bytes that need no escaping, written in one go */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!needs_escape(c))
            continue;
        emitter_put(e, s + run, i - run);
        run = i + 1;
        char esc[6] = {'\\', 0};
        size_t n = 2;
        switch (c) {
        case '"':
            esc[1] = '"';
            break;
        case '\\':
            esc[1] = '\\';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\t':
            esc[1] = 't';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15u];
            n = 6;
        }
        emitter_put(e, esc, n);
    }
    emitter_put(e, s + run, len - run);
}

static void
put_quoted(struct emitter *e, const char *s, size_t len)
{
    if (plain_text(s, len) && len + 2 <= EMITTER_BUFFER - e->len) {
        unsigned char *o = e->buf + e->len; /* the common case: one copy into the buffer */
        o[0] = '"';
        memcpy(o + 1, s, len);
        o[len + 1] = '"';
        e->len += len + 2;
        return;
    }
    emitter_put_byte(e, '"');
    put_escaped(e, s, len);
    emitter_put_byte(e, '"');
}

static void
j_key(struct emitter *e, const char *key, size_t len, bool literal)
{
    (void)literal;
    if (e->depth == 0 || e->levels[e->depth - 1].kind != EMITTER_DICT) {
        if (e->error == 0)
            e->error = -CUPROF_EINVAL;
        return;
    }
    if (e->levels[e->depth - 1].count > 0)
        emitter_put_byte(e, ',');
    put_quoted(e, key, len);
    emitter_put_byte(e, ':');
}

/* The decimal digits of u, with a '-' in front when negative. */
static void
put_decimal(struct emitter *e, uint64_t u, bool negative)
{
    static const char pairs[] =
        "000102030405060708091011121314151617181920212223242526272829303132333435363738394041424344"
        "454647484950515253545556575859606162636465666768697071727374757677787980818283848586878889"
        "90919293949596979899";
    char b[24];
    char *p = b + sizeof(b);
    while (u >= 100) { /* two digits a division */
        unsigned r = (unsigned)(u % 100);
        u /= 100;
        p -= 2;
        memcpy(p, pairs + 2 * r, 2);
    }
    if (u >= 10) {
        p -= 2;
        memcpy(p, pairs + 2 * u, 2);
    } else {
        *--p = (char)('0' + u);
    }
    if (negative)
        *--p = '-';
    before_value(e);
    emitter_put(e, p, (size_t)(b + sizeof(b) - p));
    after_value(e);
}

static void
j_integer(struct emitter *e, int64_t v)
{
    put_decimal(e, v < 0 ? 0 - (uint64_t)v : (uint64_t)v, v < 0);
}

static void
j_uinteger(struct emitter *e, uint64_t v)
{
    put_decimal(e, v, false);
}

static void
j_string(struct emitter *e, const char *s, size_t len, bool literal)
{
    (void)literal;
    before_value(e);
    put_quoted(e, s, len);
    after_value(e);
}

static void
j_boolean(struct emitter *e, bool v)
{
    before_value(e);
    if (v)
        emitter_put(e, "true", 4);
    else
        emitter_put(e, "false", 5);
    after_value(e);
}

static void
j_none(struct emitter *e)
{
    before_value(e);
    emitter_put(e, "null", 4);
    after_value(e);
}

/* The shortest text that reads back as the same double, with a '.' or exponent so that Python's
 * json reads a float (Python's repr does the same). */
static void
j_real(struct emitter *e, double v)
{
    if (!isfinite(v)) {
        j_none(e);
        return;
    }
    char b[40];
    int n = 0;
    for (int prec = 1; prec <= 17; prec++) {
        n = snprintf(b, sizeof(b) - 3, "%.*g", prec, v);
        if (strtod(b, NULL) == v)
            break;
    }
    if (strpbrk(b, ".en") == NULL) {
        memcpy(b + n, ".0", 3);
        n += 2;
    }
    before_value(e);
    emitter_put(e, b, (size_t)n);
    after_value(e);
}

static bool
j_memo_get(struct emitter *e, enum emitter_memo kind, uint32_t id)
{
    struct json_cache *c = e->impl;
    if (c == NULL || kind != EMITTER_MEMO_STACK || id >= c->span_count || c->spans[id].len == 0)
        return false;
    const struct json_span *sp = &c->spans[id];
    before_value(e);
    emitter_put(e, c->text + sp->off, sp->len);
    after_value(e);
    return true;
}

/* Called right after the list's '[': its text is recorded from here to its ']' (j_end). */
static void
j_memo_put(struct emitter *e, enum emitter_memo kind, uint32_t id)
{
    struct json_cache *c = e->impl;
    if (c == NULL || kind != EMITTER_MEMO_STACK || id >= c->span_count || c->rec_depth >= 0)
        return;
    if (EMITTER_BUFFER - e->len < EMITTER_BUFFER / 4)
        emitter_flush(e); /* room for the whole list, so that no flush cuts the recording */
    c->rec_depth = e->depth;
    c->rec_id = id;
    c->rec_start = e->len;
    c->rec_written = e->bytes_written;
}

static void
j_destroy(struct emitter *e)
{
    struct json_cache *c = e->impl;
    if (c != NULL) {
        free(c->spans);
        free(c->text);
        free(c);
    }
}

static void
j_finish(struct emitter *e)
{
    emitter_put_byte(e, '\n');
}

static const struct emitter_ops json_ops = {
    .begin = j_begin,
    .end = j_end,
    .key = j_key,
    .integer = j_integer,
    .uinteger = j_uinteger,
    .string = j_string,
    .boolean = j_boolean,
    .none = j_none,
    .real = j_real,
    .memo_get = j_memo_get,
    .memo_put = j_memo_put,
    .finish = j_finish,
    .destroy = j_destroy,
};

struct emitter *
json_emitter_create(int (*write)(void *ctx, const void *buf, size_t len), void *ctx)
{
    return emitter_create(&json_ops, write, ctx);
}

struct emitter *
json_emitter_create_cached(int (*write)(void *ctx, const void *buf, size_t len), void *ctx,
                           size_t stack_count)
{
    struct emitter *e = json_emitter_create(write, ctx);
    if (e == NULL || stack_count == 0)
        return e;
    struct json_cache *c = calloc(1, sizeof(*c));
    if (c == NULL || (c->spans = calloc(stack_count, sizeof(*c->spans))) == NULL) {
        free(c);
        emitter_destroy(e);
        return NULL;
    }
    c->span_count = stack_count;
    c->rec_depth = -1;
    e->impl = c;
    return e;
}
