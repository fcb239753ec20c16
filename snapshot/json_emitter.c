/* json_emitter.c: the emitter as compact JSON (the same structure as the pickle; current
 * pytorch.org/memory_viz tries JSON first). Tuples become arrays; nothing is memoized. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "allocator/cuprof_errors.h"
#include "snapshot/emitter.h"

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
    after_value(e);
}

static void
put_quoted(struct emitter *e, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    emitter_put_byte(e, '"');
    size_t run = 0; /* bytes that need no escaping, written in one go */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
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

static void
j_integer(struct emitter *e, int64_t v)
{
    char b[24];
    char *p = b + sizeof(b);
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        *--p = '-';
    before_value(e);
    emitter_put(e, p, (size_t)(b + sizeof(b) - p));
    after_value(e);
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
    (void)e;
    (void)kind;
    (void)id;
    return false;
}

static void
j_memo_put(struct emitter *e, enum emitter_memo kind, uint32_t id)
{
    (void)e;
    (void)kind;
    (void)id;
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
    .string = j_string,
    .boolean = j_boolean,
    .none = j_none,
    .real = j_real,
    .memo_get = j_memo_get,
    .memo_put = j_memo_put,
    .finish = j_finish,
};

struct emitter *
json_emitter_create(int (*write)(void *ctx, const void *buf, size_t len), void *ctx)
{
    struct emitter *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return NULL;
    e->ops = &json_ops;
    e->write = write;
    e->write_ctx = ctx;
    return e;
}
