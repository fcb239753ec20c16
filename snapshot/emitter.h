/* emitter.h: a small streaming serializer interface (dict, list, tuple, key, int, string, bool,
 *   none, float, memo references) with pickle and JSON implementations, buffered through a write
 *   callback, so one walk of a snapshot model can produce either format without building a tree.
 * Locking: none: an emitter belongs to the thread that writes one file.
 * Hot path: no (dump time), but the per-value cost matters for 10^6-entry snapshots. */
#ifndef CUPROF_EMITTER_H
#define CUPROF_EMITTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define EMITTER_MAX_DEPTH 32
/* Bytes handed to `write` at a time. A file takes its bytes fastest in large pieces: each
 * write(2) costs page-cache bookkeeping of its own (a 154 MB JSON snapshot written to a file and
 * fsynced: 0.12-0.15 s in 64 KiB pieces, about 0.10 s in 1 MiB ones on the test VMs). */
#define EMITTER_BUFFER (1024u * 1024u)

/* Objects a writer may memoize: each one is written once, then referred back to (pickle only). */
enum emitter_memo {
    EMITTER_MEMO_FRAME = 0, /* a frame dict, by frame index */
    EMITTER_MEMO_STACK = 1, /* a frame list, by stack index */
    EMITTER_MEMO_KINDS
};

struct emitter;

struct emitter_ops {
    void (*begin)(struct emitter *e, int kind); /* enum emitter_level_kind */
    void (*end)(struct emitter *e);
    void (*key)(struct emitter *e, const char *key, size_t len, bool literal);
    void (*integer)(struct emitter *e, int64_t v);
    void (*uinteger)(struct emitter *e, uint64_t v); /* NULL: written as integer((int64_t)v) */
    void (*string)(struct emitter *e, const char *s, size_t len, bool literal);
    void (*boolean)(struct emitter *e, bool v);
    void (*none)(struct emitter *e);
    void (*real)(struct emitter *e, double v);
    bool (*memo_get)(struct emitter *e, enum emitter_memo kind, uint32_t id);
    void (*memo_put)(struct emitter *e, enum emitter_memo kind, uint32_t id);
    void (*finish)(struct emitter *e);
    void (*destroy)(struct emitter *e); /* frees the implementation's own state; may be NULL */
};

enum emitter_level_kind { EMITTER_DICT = 1, EMITTER_LIST = 2, EMITTER_TUPLE = 3 };

struct emitter_level {
    uint8_t kind;   /* enum emitter_level_kind */
    uint32_t count; /* items (pairs for a dict) in the current batch (pickle) or so far (JSON) */
    uint32_t total; /* items so far */
};

struct emitter {
    const struct emitter_ops *ops;
    int (*write)(void *ctx, const void *buf, size_t len); /* 0 or a negative -CUPROF_E* */
    void *write_ctx;
    int error; /* sticky: the first failure; every later call does nothing */
    uint64_t bytes_written;
    size_t len;
    struct emitter_level levels[EMITTER_MAX_DEPTH];
    int depth;                          /* levels in use */
    uint32_t *memo[EMITTER_MEMO_KINDS]; /* pickle: memo index + 1 per object, 0 = not yet */
    size_t memo_cap[EMITTER_MEMO_KINDS];
    uint32_t memo_next;
    const char *literal_keys[256]; /* pickle: memoized constant strings, by pointer */
    uint32_t literal_memo[256];
    void *impl; /* the implementation's own state (JSON: rendered frame lists) */
    /* When set, full buffers are handed over instead of written: it takes the `len` bytes at
     * *buf and sets *buf to the buffer to fill next (EMITTER_BUFFER bytes); 0 or -CUPROF_E*. */
    int (*exchange)(void *ctx, unsigned char **buf, size_t len);
    unsigned char *buf; /* EMITTER_BUFFER bytes being filled: storage, or the exchange's */
    unsigned char storage[EMITTER_BUFFER];
};

/* Emitters write through `write`; pass the number of distinct frames and stacks so pickle can
 * memoize them (0 when unknown: objects are then written in full each time). NULL on OOM. */
struct emitter *pickle_emitter_create(int (*write)(void *ctx, const void *buf, size_t len),
                                      void *ctx, size_t frame_count, size_t stack_count);
struct emitter *json_emitter_create(int (*write)(void *ctx, const void *buf, size_t len),
                                    void *ctx);
/* The same, keeping the text of up to `stack_count` frame lists (EMITTER_MEMO_STACK ids) once
 * rendered, so a stack that many entries share is formatted once and then copied: the JSON
 * still holds every frame list in full. */
struct emitter *json_emitter_create_cached(int (*write)(void *ctx, const void *buf, size_t len),
                                           void *ctx, size_t stack_count);
/* From now on, hands full buffers to `exchange` (with the emitter's write ctx) instead of
 * copying them out through `write`, so that a sink may write one while the next is filled. */
void emitter_exchange_buffers(struct emitter *e,
                              int (*exchange)(void *ctx, unsigned char **buf, size_t len));
/* Writes the trailer and flushes; returns the first error seen (0 if none). */
__attribute__((warn_unused_result)) int emitter_finish(struct emitter *e);
void emitter_destroy(struct emitter *e);

/* For the implementations: a zeroed emitter writing through `write`, or NULL on OOM. */
struct emitter *emitter_create(const struct emitter_ops *ops,
                               int (*write)(void *ctx, const void *buf, size_t len), void *ctx);

/* Buffered output shared by the implementations. */
void emitter_flush(struct emitter *e);
/* What no buffer holds at once (the buffer flushed first). */
void emitter_put_large(struct emitter *e, const void *p, size_t n);
static inline void
emitter_put(struct emitter *e, const void *p, size_t n)
{
    if (n > EMITTER_BUFFER - e->len) {
        emitter_flush(e);
        if (n > EMITTER_BUFFER) {
            emitter_put_large(e, p, n);
            return;
        }
    }
    memcpy(e->buf + e->len, p, n);
    e->len += n;
}
static inline void
emitter_put_byte(struct emitter *e, unsigned char c)
{
    if (e->len == EMITTER_BUFFER)
        emitter_flush(e);
    e->buf[e->len++] = c;
}

/* The interface a walker uses. Keys and strings marked `literal` are string constants that live
 * for the whole write (pickle memoizes them by address). */
static inline void
emitter_begin_dict(struct emitter *e)
{
    e->ops->begin(e, EMITTER_DICT);
}
static inline void
emitter_begin_list(struct emitter *e)
{
    e->ops->begin(e, EMITTER_LIST);
}
static inline void
emitter_begin_tuple(struct emitter *e)
{
    e->ops->begin(e, EMITTER_TUPLE);
}
static inline void
emitter_end(struct emitter *e)
{
    e->ops->end(e);
}
static inline void
emitter_key(struct emitter *e, const char *literal_key)
{
    e->ops->key(e, literal_key, strlen(literal_key), true);
}
static inline void
emitter_key_string(struct emitter *e, const char *key)
{
    e->ops->key(e, key, strlen(key), false);
}
static inline void
emitter_int(struct emitter *e, int64_t v)
{
    e->ops->integer(e, v);
}
/* Unsigned values as PyTorch writes them: cast to int64 (SIZE_MAX becomes -1). */
static inline void
emitter_uint(struct emitter *e, uint64_t v)
{
    e->ops->integer(e, (int64_t)v);
}
/* Unsigned values in full (JSON: 2^64 - 1 stays 18446744073709551615); an emitter without an
 * unsigned path (pickle) writes them as emitter_uint does. */
static inline void
emitter_u64(struct emitter *e, uint64_t v)
{
    if (e->ops->uinteger != NULL)
        e->ops->uinteger(e, v);
    else
        e->ops->integer(e, (int64_t)v);
}
static inline void
emitter_string(struct emitter *e, const char *s)
{
    e->ops->string(e, s, strlen(s), false);
}
static inline void
emitter_symbol(struct emitter *e, const char *literal)
{
    e->ops->string(e, literal, strlen(literal), true);
}
static inline void
emitter_bool(struct emitter *e, bool v)
{
    e->ops->boolean(e, v);
}
static inline void
emitter_none(struct emitter *e)
{
    e->ops->none(e);
}
static inline void
emitter_float(struct emitter *e, double v)
{
    e->ops->real(e, v);
}
/* True when the object was already written: a back-reference (pickle) or a copy of its text
 * (JSON) was emitted in its place. Otherwise the caller writes it, calling emitter_memo_put right
 * after its begin_dict/begin_list. */
static inline bool
emitter_memo_get(struct emitter *e, enum emitter_memo kind, uint32_t id)
{
    return e->ops->memo_get(e, kind, id);
}
static inline void
emitter_memo_put(struct emitter *e, enum emitter_memo kind, uint32_t id)
{
    e->ops->memo_put(e, kind, id);
}

#endif
