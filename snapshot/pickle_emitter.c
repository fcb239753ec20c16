/* pickle_emitter.c: the emitter as pickle protocol 4, restricted to the opcodes that both
 * CPython's unpickler and MemoryViz.js accept (reference/pytorch-allocator.md §6.2). */
#include <stdlib.h>

#include "allocator/cuprof_errors.h"
#include "snapshot/emitter.h"

#define P_BATCH 1000 /* CPython's BATCHSIZE; MemoryViz spreads a batch into a call */

enum {
    OP_MARK = '(',
    OP_STOP = '.',
    OP_BININT = 'J',
    OP_BININT1 = 'K',
    OP_BININT2 = 'M',
    OP_NONE = 'N',
    OP_BINFLOAT = 'G',
    OP_BINUNICODE = 'X',
    OP_APPENDS = 'e',
    OP_BINGET = 'h',
    OP_LONG_BINGET = 'j',
    OP_SETITEMS = 'u',
    OP_EMPTY_DICT = '}',
    OP_EMPTY_LIST = ']',
    OP_EMPTY_TUPLE = ')',
    OP_PROTO = 0x80,
    OP_TUPLE1 = 0x85,
    OP_TUPLE2 = 0x86,
    OP_TUPLE3 = 0x87,
    OP_NEWTRUE = 0x88,
    OP_NEWFALSE = 0x89,
    OP_LONG1 = 0x8a,
    OP_SHORT_BINUNICODE = 0x8c,
    OP_MEMOIZE = 0x94,
};

static void
put_u32(struct emitter *e, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    emitter_put(e, b, 4);
}

/* A value is about to start inside the innermost container. */
static void
before_value(struct emitter *e)
{
    if (e->depth > 0) {
        struct emitter_level *l = &e->levels[e->depth - 1];
        if (l->kind == EMITTER_LIST && l->count == 0)
            emitter_put_byte(e, OP_MARK);
    }
}

/* A value just ended inside the innermost container: close full batches. */
static void
after_value(struct emitter *e)
{
    if (e->depth == 0)
        return;
    struct emitter_level *l = &e->levels[e->depth - 1];
    l->total++;
    if (l->kind == EMITTER_TUPLE)
        return;
    if (++l->count == P_BATCH) {
        emitter_put_byte(e, l->kind == EMITTER_LIST ? OP_APPENDS : OP_SETITEMS);
        l->count = 0;
    }
}

static void
p_begin(struct emitter *e, int kind)
{
    before_value(e);
    if (e->depth == EMITTER_MAX_DEPTH) {
        if (e->error == 0)
            e->error = -CUPROF_EINVAL;
        return;
    }
    e->levels[e->depth++] = (struct emitter_level){.kind = (uint8_t)kind};
    if (kind == EMITTER_DICT)
        emitter_put_byte(e, OP_EMPTY_DICT);
    else if (kind == EMITTER_LIST)
        emitter_put_byte(e, OP_EMPTY_LIST);
}

static void
p_end(struct emitter *e)
{
    if (e->depth == 0) {
        if (e->error == 0)
            e->error = -CUPROF_EINVAL;
        return;
    }
    struct emitter_level *l = &e->levels[--e->depth];
    if (l->kind == EMITTER_TUPLE) {
        static const unsigned char ops[4] = {OP_EMPTY_TUPLE, OP_TUPLE1, OP_TUPLE2, OP_TUPLE3};
        if (l->total > 3) {
            if (e->error == 0)
                e->error = -CUPROF_EINVAL; /* only short tuples (segment_pool_id) are needed */
            return;
        }
        emitter_put_byte(e, ops[l->total]);
    } else if (l->count > 0) {
        emitter_put_byte(e, l->kind == EMITTER_LIST ? OP_APPENDS : OP_SETITEMS);
    }
    after_value(e);
}

static void
put_memo_ref(struct emitter *e, uint32_t index)
{
    if (index < 256) {
        unsigned char b[2] = {OP_BINGET, (unsigned char)index};
        emitter_put(e, b, 2);
    } else {
        emitter_put_byte(e, OP_LONG_BINGET);
        put_u32(e, index);
    }
}

/* Writes a string, memoizing string constants by address (keys, action and state names). */
static void
put_string(struct emitter *e, const char *s, size_t len, bool literal)
{
    size_t slot = 0;
    if (literal) {
        /* Open addressing by address; a full table just writes the string in full. */
        slot = (size_t)(((uint64_t)(uintptr_t)s * 0x9e3779b97f4a7c15ull) >> 56);
        for (int probe = 0; probe < 16; probe++, slot = (slot + 1) & 255u) {
            if (e->literal_keys[slot] == s) {
                put_memo_ref(e, e->literal_memo[slot]);
                return;
            }
            if (e->literal_keys[slot] == NULL)
                break;
        }
    }
    if (len < 256) {
        unsigned char b[2] = {OP_SHORT_BINUNICODE, (unsigned char)len};
        emitter_put(e, b, 2);
    } else {
        emitter_put_byte(e, OP_BINUNICODE);
        put_u32(e, (uint32_t)len);
    }
    emitter_put(e, s, len);
    if (literal && e->literal_keys[slot] == NULL) {
        emitter_put_byte(e, OP_MEMOIZE);
        e->literal_keys[slot] = s;
        e->literal_memo[slot] = e->memo_next++;
    }
}

static void
p_key(struct emitter *e, const char *key, size_t len, bool literal)
{
    if (e->depth == 0 || e->levels[e->depth - 1].kind != EMITTER_DICT) {
        if (e->error == 0)
            e->error = -CUPROF_EINVAL;
        return;
    }
    if (e->levels[e->depth - 1].count == 0)
        emitter_put_byte(e, OP_MARK);
    put_string(e, key, len, literal);
}

static void
p_integer(struct emitter *e, int64_t v)
{
    before_value(e);
    if (v >= 0 && v < 256) {
        unsigned char b[2] = {OP_BININT1, (unsigned char)v};
        emitter_put(e, b, 2);
    } else if (v >= 0 && v < 65536) {
        unsigned char b[3] = {OP_BININT2, (unsigned char)v, (unsigned char)(v >> 8)};
        emitter_put(e, b, 3);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        emitter_put_byte(e, OP_BININT);
        put_u32(e, (uint32_t)(int32_t)v);
    } else {
        /* Minimal two's-complement length that keeps the sign bit right (≤ 8 bytes). */
        unsigned char b[10];
        uint64_t u = (uint64_t)v;
        size_t n = 8;
        while (n > 1) {
            int64_t lo = -((int64_t)1 << (8 * (n - 1) - 1));
            int64_t hi = ((int64_t)1 << (8 * (n - 1) - 1)) - 1;
            if (v < lo || v > hi)
                break;
            n--;
        }
        b[0] = OP_LONG1;
        b[1] = (unsigned char)n;
        for (size_t i = 0; i < n; i++)
            b[2 + i] = (unsigned char)(u >> (8 * i));
        emitter_put(e, b, 2 + n);
    }
    after_value(e);
}

static void
p_string(struct emitter *e, const char *s, size_t len, bool literal)
{
    before_value(e);
    put_string(e, s, len, literal);
    after_value(e);
}

static void
p_boolean(struct emitter *e, bool v)
{
    before_value(e);
    emitter_put_byte(e, v ? OP_NEWTRUE : OP_NEWFALSE);
    after_value(e);
}

static void
p_none(struct emitter *e)
{
    before_value(e);
    emitter_put_byte(e, OP_NONE);
    after_value(e);
}

static void
p_real(struct emitter *e, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof(u));
    unsigned char b[9];
    b[0] = OP_BINFLOAT;
    for (int i = 0; i < 8; i++)
        b[1 + i] = (unsigned char)(u >> (56 - 8 * i)); /* big-endian */
    before_value(e);
    emitter_put(e, b, 9);
    after_value(e);
}

static bool
p_memo_get(struct emitter *e, enum emitter_memo kind, uint32_t id)
{
    if (id >= e->memo_cap[kind] || e->memo[kind][id] == 0)
        return false;
    before_value(e);
    put_memo_ref(e, e->memo[kind][id] - 1);
    after_value(e);
    return true;
}

static void
p_memo_put(struct emitter *e, enum emitter_memo kind, uint32_t id)
{
    if (id >= e->memo_cap[kind])
        return; /* not memoizable: written in full each time, still correct */
    emitter_put_byte(e, OP_MEMOIZE);
    e->memo[kind][id] = ++e->memo_next;
}

static void
p_finish(struct emitter *e)
{
    emitter_put_byte(e, OP_STOP);
}

static const struct emitter_ops pickle_ops = {
    .begin = p_begin,
    .end = p_end,
    .key = p_key,
    .integer = p_integer,
    .string = p_string,
    .boolean = p_boolean,
    .none = p_none,
    .real = p_real,
    .memo_get = p_memo_get,
    .memo_put = p_memo_put,
    .finish = p_finish,
};

struct emitter *
pickle_emitter_create(int (*write)(void *ctx, const void *buf, size_t len), void *ctx,
                      size_t frame_count, size_t stack_count)
{
    struct emitter *e = emitter_create(&pickle_ops, write, ctx);
    if (e == NULL)
        return NULL;
    size_t counts[EMITTER_MEMO_KINDS] = {frame_count, stack_count};
    for (int k = 0; k < EMITTER_MEMO_KINDS; k++) {
        if (counts[k] == 0)
            continue;
        e->memo[k] = calloc(counts[k], sizeof(uint32_t));
        if (e->memo[k] == NULL) {
            emitter_destroy(e);
            return NULL;
        }
        e->memo_cap[k] = counts[k];
    }
    unsigned char proto[2] = {OP_PROTO, 4};
    emitter_put(e, proto, 2);
    return e;
}
