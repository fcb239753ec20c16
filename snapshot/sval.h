/* sval.h: the value tree the snapshot readers build (None, bool, int, float, str, list, tuple,
 *   dict), allocated in a throw-away arena; shared containers (pickle memo) are shared pointers.
 * Locking: none: a tree belongs to the reading thread.
 * Hot path: no (the command line and tests). */
#ifndef CUPROF_SVAL_H
#define CUPROF_SVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct snapshot_arena;

enum sval_type {
    SVAL_NONE = 0,
    SVAL_BOOL,
    SVAL_INT,    /* fits int64_t: u.i */
    SVAL_UINT,   /* in [2^63, 2^64): u.u (PyTorch writes size_t -1 as 18446744073709551615) */
    SVAL_BIGINT, /* any other Python int: out of range, u.s is its decimal text for messages */
    SVAL_FLOAT,
    SVAL_STR,
    SVAL_LIST,
    SVAL_TUPLE,
    SVAL_DICT,
};

struct sval_seq;

struct sval {
    uint8_t type;  /* enum sval_type */
    uint8_t flags; /* SVAL_MEMO, and the pickle reader's own bits */
    uint8_t place; /* pickle reader only: where a container sits in a snapshot (streaming) */
    uint32_t slot; /* pickle reader only: its index there (the d of device_traces[d]) */
    union {
        bool b;
        int64_t i;
        uint64_t u;
        double f;
        const char *s;        /* interned in the target model's arena */
        struct sval_seq *seq; /* list, tuple, dict */
    } u;
};

/* The container went through the pickle memo: the file may refer to it more than once (a
 * container without it is referenced from one place only). */
#define SVAL_MEMO 1u

/* Items of a list or tuple; a dict holds 2*len items: key, value, key, value... Room for 8, then
 * for the next power of two (sval_seq_append). */
struct sval_seq {
    struct sval *items;
    uint32_t len; /* elements (pairs for a dict) */
    uint32_t tag; /* 0 from the readers, then the consumer's: snapshot_import keeps the stack of a
                   * memoized frame list, and the frame of a frame dict, there (index + 1) */
};

/* A new empty container from the arena (NULL on OOM). */
struct sval_seq *sval_seq_new(struct snapshot_arena *arena);
/* Appends n values (2*pairs for a dict: pass n = 2*pairs and pairs = true). 0 or -CUPROF_E*. */
__attribute__((warn_unused_result)) int sval_seq_append(struct snapshot_arena *arena,
                                                        struct sval_seq *seq,
                                                        const struct sval *vals, size_t n,
                                                        bool pairs);

/* Dict lookup by key string (NULL when absent or not a dict); with a repeated key the last one
 * wins, as in Python's dict. */
const struct sval *sval_get(const struct sval *dict, const char *key);
/* Sequence access for lists and tuples (NULL/0 for anything else). */
size_t sval_len(const struct sval *v);
const struct sval *sval_at(const struct sval *v, size_t i);
const char *sval_type_name(const struct sval *v);
/* The value as one short line for messages: 18446744073709551615, -5, 1.5, "text" (quoted,
 * cut to ~40 bytes), or the type name for containers. Returns buf. */
const char *sval_text(const struct sval *v, char *buf, size_t len);

#endif
