/* pickle_reader.c: the pickle VM for snapshot files. Opcode meanings follow CPython's
 * Lib/pickle.py; only the data opcodes of protocols 2-5 are accepted (no globals, no objects).
 *
 * Speed and memory: a file is read a window at a time (the file never sits in memory whole);
 * with a stream consumer, each container is tagged when it is created with where it sits
 * (root, segments list, device_traces, device_traces[d], a record of one of those lists), and
 * records appended to the two big lists go to the consumer a batch at a time. A record dict that
 * the memo does not hold lives in a scratch arena, reused once its batch is taken: a 10^7-entry
 * history never exists as a tree. A scratch container that goes anywhere else (the memo, another
 * container, the result) is first copied into the tree ("settled"). A trace's plain records
 * (cuprof's entries: all ints and memo fetches) are not even built: each goes to the consumer as
 * its items are decoded (take_records), so an entry costs one pass over its bytes. */
#include "snapshot/pickle_reader.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allocator/cuprof_errors.h"
#include "snapshot/pickle_data.h"
#include "snapshot/snapshot_arena.h"
#include "snapshot/snapshot_model.h"

#define PICKLE_WINDOW (1u << 20) /* bytes read from a file at a time */

/* sval.place: where a container was built (a guess the consumer checks against the tree). */
enum place { PLACE_NONE = 0, PLACE_ROOT, PLACE_SEGMENTS, PLACE_TRACES, PLACE_TRACE, PLACE_RECORD };
#define SVAL_SCRATCH 0x80u /* sval.flags: the container lives in vm->scratch */
#define SVAL_FETCHED 0x40u /* sval.flags, on the stack: pushed by a memo fetch */

struct vm {
    const unsigned char *p, *end; /* the bytes at hand: [start, end) */
    const unsigned char *start;
    uint64_t base; /* input offset of `start` */
    uint64_t size; /* the input's length */
    int fd;        /* -1: all of it is in memory */
    unsigned char *window;
    size_t window_cap;
    struct snapshot_arena *tree, *scratch;
    size_t scratch_live; /* scratch containers not yet taken or settled */
    struct snapshot *strings;
    struct pickle_stream *stream;
    const char *key_segments, *key_traces; /* interned: compared by address */
    bool rooted;
    struct sval *stack;
    size_t sp, stack_cap;
    size_t marks[PICKLE_MAX_MARKS];
    int mark_count;
    int taken_mark;    /* the MARK (its level, 1-based) whose batch had records handed over one by
                        * one (take_record): they are not on the stack; 0: none */
    struct sval *memo; /* a slot holds a value when its SVAL_MEMO flag is set */
    size_t memo_cap;
    size_t memo_len; /* slots set so far: len(memo) in CPython, MEMOIZE's index */
    char *err;
    size_t err_len;
};

static int
fail(struct vm *vm, int code, const char *fmt, ...)
{
    if (vm->err_len > 0) {
        int n =
            snprintf(vm->err, vm->err_len,
                     "byte %llu: ", (unsigned long long)(vm->base + (uint64_t)(vm->p - vm->start)));
        if (n >= 0 && (size_t)n < vm->err_len) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(vm->err + n, vm->err_len - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return code;
}

static int
oom(struct vm *vm)
{
    return fail(vm, -CUPROF_EHOSTMEM, "out of memory");
}

/* ---- Input: makes n bytes available at vm->p, reading the file on. 0, -CUPROF_EFORMAT when the
 * input ends first (no message), -CUPROF_EIO or -CUPROF_EHOSTMEM (with a message). */

static int
refill(struct vm *vm, uint64_t n)
{
    uint64_t pos = vm->base + (uint64_t)(vm->p - vm->start);
    if (vm->fd < 0 || n > vm->size - pos)
        return -CUPROF_EFORMAT;
    size_t have = (size_t)(vm->end - vm->p), want = (size_t)n;
    if (want > vm->window_cap || vm->window_cap == 0) {
        size_t cap = want > PICKLE_WINDOW ? want : PICKLE_WINDOW;
        unsigned char *w = malloc(cap);
        if (w == NULL)
            return oom(vm);
        if (have > 0)
            memcpy(w, vm->p, have);
        free(vm->window);
        vm->window = w;
        vm->window_cap = cap;
    } else if (have > 0) {
        memmove(vm->window, vm->p, have);
    }
    uint64_t left = vm->size - pos - have; /* bytes of the input not read yet */
    size_t room = vm->window_cap - have, goal = room < left ? room : (size_t)left;
    size_t got = 0;
    while (got < goal) {
        ssize_t r = read(vm->fd, vm->window + have + got, goal - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return fail(vm, -CUPROF_EIO, "read error: %s", strerror(errno));
        if (r == 0)
            break; /* the file got shorter: whatever is missing reads as truncated */
        got += (size_t)r;
    }
    vm->base = pos;
    vm->start = vm->p = vm->window;
    vm->end = vm->window + have + got;
    return have + got >= want ? 0 : -CUPROF_EFORMAT;
}

static inline int
fill(struct vm *vm, uint64_t n)
{
    return (uint64_t)(vm->end - vm->p) >= n ? 0 : refill(vm, n);
}

static int
need(struct vm *vm, uint64_t n, const char *what)
{
    int rc = fill(vm, n);
    if (rc == -CUPROF_EFORMAT)
        return fail(vm, rc, "truncated pickle (%s needs %llu more bytes)", what,
                    (unsigned long long)n);
    return rc;
}

static inline uint64_t
le(const unsigned char *p, size_t n)
{
    switch (n) { /* opcode arguments have fixed widths: the loop folds away */
    case 1:
        return p[0];
    case 2:
        return (uint64_t)p[0] | (uint64_t)p[1] << 8;
    case 4:
        return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
    default: {
        uint64_t v = 0;
        for (size_t i = 0; i < n; i++)
            v |= (uint64_t)p[i] << (8 * i);
        return v;
    }
    }
}

/* An opcode's little-endian argument of n bytes. */
static inline int
arg(struct vm *vm, size_t n, const char *what, uint64_t *v)
{
    int rc = need(vm, n, what);
    if (rc == 0) {
        *v = le(vm->p, n);
        vm->p += n;
    }
    return rc;
}

/* ---- The stack, scratch containers and where a new container sits. */

static int
push_grow(struct vm *vm, struct sval v)
{
    size_t cap = vm->stack_cap ? vm->stack_cap * 2 : 256;
    struct sval *s = realloc(vm->stack, cap * sizeof(*s));
    if (s == NULL)
        return oom(vm);
    vm->stack = s;
    vm->stack_cap = cap;
    vm->stack[vm->sp++] = v;
    return 0;
}

static inline int
push(struct vm *vm, struct sval v)
{
    if (vm->sp == vm->stack_cap)
        return push_grow(vm, v);
    vm->stack[vm->sp++] = v;
    return 0;
}

/* Copies a scratch container into the tree before it is kept anywhere but a taken batch. */
static int
settle(struct vm *vm, struct sval *v)
{
    if (!(v->flags & SVAL_SCRATCH))
        return 0;
    const struct sval_seq *old = v->u.seq;
    struct sval_seq *seq = sval_seq_new(vm->tree);
    size_t n = v->type == SVAL_DICT ? (size_t)old->len * 2 : old->len;
    if (seq == NULL || sval_seq_append(vm->tree, seq, old->items, n, v->type == SVAL_DICT) != 0)
        return oom(vm);
    v->u.seq = seq;
    v->flags &= (uint8_t)~SVAL_SCRATCH;
    vm->scratch_live--;
    return 0;
}

static inline int
settle_all(struct vm *vm, struct sval *items, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int rc = items[i].flags & SVAL_SCRATCH ? settle(vm, &items[i]) : 0;
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Which big list a key of the root dict names. */
static enum place
key_place(const struct vm *vm, const struct sval *key)
{
    if (key->type != SVAL_STR)
        return PLACE_NONE;
    return key->u.s == vm->key_segments ? PLACE_SEGMENTS
           : key->u.s == vm->key_traces ? PLACE_TRACES
                                        : PLACE_NONE;
}

/* Where a new container of `type` goes, from what lies on the stack: the item of a one-item
 * APPEND/SETITEM (the container right below: CPython's form for one-item lists and dicts), or
 * the next item of a MARK batch (the container below the innermost MARK). Lists are placed
 * under the root and under device_traces, dicts as records of the two big lists. */
static void
locate(struct vm *vm, uint8_t type, struct sval *v)
{
    if (vm->stream == NULL)
        return;
    if (vm->sp == 0) {
        if (!vm->rooted) /* the first container: a dict, or PyTorch 1.13's bare segment list */
            v->place = type == SVAL_LIST   ? PLACE_SEGMENTS
                       : type == SVAL_DICT ? PLACE_ROOT
                                           : PLACE_NONE;
        vm->rooted = true;
        return;
    }
    size_t m = vm->mark_count > 0 ? vm->marks[vm->mark_count - 1] : 0;
    if (m > vm->sp)
        return; /* items below the MARK were taken: pop_mark refuses it later */
    const struct sval *top = &vm->stack[vm->sp - 1];
    bool is_list = type == SVAL_LIST, is_dict = type == SVAL_DICT;
    size_t slot = UINT32_MAX;
    if (vm->sp > m) { /* one-item forms */
        if (is_dict && (top->place == PLACE_SEGMENTS || top->place == PLACE_TRACE))
            v->place = PLACE_RECORD;
        else if (is_list && top->place == PLACE_TRACES)
            slot = top->u.seq->len;
        else if (is_list && vm->sp - m >= 2 && vm->stack[vm->sp - 2].place == PLACE_ROOT)
            v->place = (uint8_t)key_place(vm, top);
    }
    if (v->place == PLACE_NONE && slot == UINT32_MAX && m > 0) { /* the next item of a batch */
        const struct sval *parent = &vm->stack[m - 1];
        size_t above = vm->sp - m;
        if (is_list && parent->place == PLACE_ROOT && above % 2 == 1)
            v->place = (uint8_t)key_place(vm, top);
        else if (is_list && parent->place == PLACE_TRACES)
            slot = parent->u.seq->len + above;
        else if (is_dict && (parent->place == PLACE_SEGMENTS || parent->place == PLACE_TRACE))
            v->place = PLACE_RECORD;
    }
    if (slot < UINT32_MAX) {
        v->place = PLACE_TRACE;
        v->slot = (uint32_t)slot;
    }
}

/* A new container holding items[0..n) (moved from the stack: settled first). */
static int
new_seq(struct vm *vm, uint8_t type, struct sval *items, size_t n, struct sval *out)
{
    int rc = settle_all(vm, items, n);
    if (rc != 0)
        return rc;
    struct sval_seq *seq = sval_seq_new(vm->tree);
    if (seq == NULL || sval_seq_append(vm->tree, seq, items, n, type == SVAL_DICT) != 0)
        return oom(vm);
    *out = (struct sval){.type = type, .u.seq = seq};
    return 0;
}

/* Records were handed over one by one for the batch of an open MARK, and an opcode does what
 * the stack without them would not show (closes that MARK otherwise than by APPENDS, reaches
 * below it, stops the pickle): the consumer is told, and the file is read again without it. */
static void
misplaced(struct vm *vm)
{
    vm->stream->shared = true;
    vm->taken_mark = 0;
}

/* An opcode is about to use stack[lowest..sp). */
static inline void
reach(struct vm *vm, size_t lowest)
{
    if (vm->taken_mark != 0 && lowest < vm->marks[vm->taken_mark - 1])
        misplaced(vm);
}

/* Items above the innermost MARK; the MARK is removed. `appends`: APPENDS closes it. */
static int
pop_mark(struct vm *vm, size_t *first, bool appends)
{
    if (vm->mark_count == 0)
        return fail(vm, -CUPROF_EFORMAT, "opcode needs a MARK but none is open");
    if (vm->taken_mark == vm->mark_count) {
        if (appends)
            vm->taken_mark = 0;
        else
            misplaced(vm);
    }
    *first = vm->marks[--vm->mark_count];
    if (*first > vm->sp) /* an opcode took items from below the MARK (CPython cannot) */
        return fail(vm, -CUPROF_EFORMAT, "stack underflow below a MARK");
    return 0;
}

/* ---- Opcodes. */

static int
op_proto(struct vm *vm)
{
    int rc = need(vm, 1, "PROTO");
    if (rc != 0)
        return rc;
    if (vm->p[0] < 2 || vm->p[0] > 5)
        return fail(vm, -CUPROF_EFORMAT, "unsupported pickle protocol %u", vm->p[0]);
    vm->p++;
    return 0;
}

static int
op_mark(struct vm *vm)
{
    if (vm->mark_count == PICKLE_MAX_MARKS)
        return fail(vm, -CUPROF_EFORMAT, "nesting deeper than %d levels", PICKLE_MAX_MARKS);
    vm->marks[vm->mark_count++] = vm->sp;
    return 0;
}

/* The bytes a plain record and the opcode after it can take (pickle_data_record: MARK, 32 values
 * of at most 10 bytes, SETITEMS). */
#define RECORD_MAX_BYTES 352

static int give(struct vm *vm, const struct sval *target, size_t first);

/* A record's EMPTY_DICT was just read in the batch of a trace (the innermost MARK's, which holds
 * only whole items): it and the plain records that follow it go to the consumer one by one while
 * each is whole in the window and followed by the next record or the batch's APPENDS. Items
 * already above the MARK (records read the long way: a frame list not seen before) go to the
 * consumer first, as if their batch ended there, so the list keeps its order. 0: the last record
 * read was taken (its EMPTY_DICT consumed, nothing to push); 1: it is for the opcode loop. */
static int
take_records(struct vm *vm)
{
    size_t m = vm->marks[vm->mark_count - 1];
    struct sval items[PICKLE_DATA_RECORD_ITEMS];
    for (;;) {
        uint64_t pos = vm->base + (uint64_t)(vm->p - vm->start), left = vm->size - pos;
        int rc = fill(vm, left < RECORD_MAX_BYTES ? left : RECORD_MAX_BYTES);
        if (rc != 0)
            return rc;
        const unsigned char *after = vm->p;
        size_t n = pickle_data_record(vm->p, vm->end, vm->memo, vm->memo_cap, items, &after);
        if (n == 0 || after == vm->end || (*after != '}' && *after != 'e'))
            return 1;
        if (vm->sp > m) {
            if ((rc = give(vm, &vm->stack[m - 1], m)) != 0)
                return rc;
            vm->taken_mark = vm->mark_count;
        }
        const struct sval *list = &vm->stack[m - 1];
        rc = vm->stream->take_record(vm->stream->ctx, list->slot, list->u.seq, items, n);
        if (rc != 0)
            return rc;
        vm->taken_mark = vm->mark_count;
        vm->p = after;
        if (*after == 'e')
            return 0;
        vm->p++; /* the next record's EMPTY_DICT */
    }
}

/* EMPTY_DICT, EMPTY_LIST, EMPTY_TUPLE. A record dict lives in the scratch arena. */
static int
op_empty(struct vm *vm, uint8_t type)
{
    struct sval v = {.type = type};
    locate(vm, type, &v);
    bool scratch = v.place == PLACE_RECORD && type == SVAL_DICT;
    size_t m = vm->mark_count > 0 ? vm->marks[vm->mark_count - 1] : 0;
    if (scratch && vm->stream->take_record != NULL && m > 0 && m <= vm->sp &&
        vm->stack[m - 1].place == PLACE_TRACE &&
        (vm->taken_mark == 0 || vm->taken_mark == vm->mark_count)) {
        int rc = take_records(vm);
        if (rc <= 0)
            return rc;
    }
    if (scratch && vm->scratch == NULL && (vm->scratch = snapshot_arena_create()) == NULL)
        return oom(vm);
    v.u.seq = sval_seq_new(scratch ? vm->scratch : vm->tree);
    if (v.u.seq == NULL)
        return oom(vm);
    if (scratch) {
        v.flags |= SVAL_SCRATCH;
        vm->scratch_live++;
        struct sval items[PICKLE_DATA_RECORD_ITEMS];
        const unsigned char *after = vm->p;
        size_t n = vm->mark_count < PICKLE_MAX_MARKS
                       ? pickle_data_record(vm->p, vm->end, vm->memo, vm->memo_cap, items, &after)
                       : 0;
        vm->p = after;
        if (n > 0 && sval_seq_append(vm->scratch, v.u.seq, items, n, true) != 0)
            return oom(vm);
    }
    return push(vm, v);
}

/* A batch appended to one of the big lists goes to the consumer; 1 when it declines. */
static int
give(struct vm *vm, const struct sval *target, size_t first)
{
    enum pickle_list which = target->place == PLACE_SEGMENTS ? PICKLE_SEGMENTS : PICKLE_TRACE;
    size_t n = vm->sp - first;
    int rc =
        vm->stream->take(vm->stream->ctx, which, target->slot, target->u.seq, vm->stack + first, n);
    if (rc != 0)
        return rc;
    for (size_t i = first; i < vm->sp; i++)
        if (vm->stack[i].flags & SVAL_SCRATCH)
            vm->scratch_live--;
    vm->sp = first;
    if (vm->scratch_live == 0 && vm->scratch != NULL)
        snapshot_arena_reset(vm->scratch);
    return 0;
}

/* APPEND(S)/SETITEM(S): add stack[first..sp) to the container just below them. */
static int
add_items(struct vm *vm, size_t first, bool dict)
{
    if (first == 0)
        return fail(vm, -CUPROF_EFORMAT, "%s without a container", dict ? "SETITEMS" : "APPENDS");
    struct sval *target = &vm->stack[first - 1];
    size_t n = vm->sp - first;
    if (target->type != (dict ? SVAL_DICT : SVAL_LIST))
        return fail(vm, -CUPROF_EFORMAT, "%s on a %s", dict ? "SETITEMS" : "APPENDS",
                    sval_type_name(target));
    if (dict && n % 2 != 0)
        return fail(vm, -CUPROF_EFORMAT, "SETITEMS with an odd number of items");
    /* Filling a container reached through the memo (never done by CPython's or cuprof's
     * pickler, which fill a container right after making it): records taken before may have
     * seen it unfinished. */
    if ((target->flags & SVAL_FETCHED) && vm->stream != NULL)
        vm->stream->shared = true;
    int rc;
    if (!dict && vm->stream != NULL &&
        (target->place == PLACE_SEGMENTS || target->place == PLACE_TRACE) &&
        (rc = give(vm, target, first)) <= 0)
        return rc;
    if ((rc = settle_all(vm, vm->stack + first, n)) != 0)
        return rc;
    struct snapshot_arena *arena = target->flags & SVAL_SCRATCH ? vm->scratch : vm->tree;
    if (sval_seq_append(arena, target->u.seq, vm->stack + first, n, dict) != 0)
        return oom(vm);
    vm->sp = first;
    return 0;
}

/* APPEND, SETITEM: one item (or key and value) on the container below. */
static int
op_add_one(struct vm *vm, bool dict)
{
    if (vm->sp < (dict ? 3u : 2u))
        return fail(vm, -CUPROF_EFORMAT, "stack underflow");
    reach(vm, vm->sp - (dict ? 3 : 2));
    return add_items(vm, vm->sp - (dict ? 2 : 1), dict);
}

/* APPENDS, SETITEMS: everything above the innermost MARK. */
static int
op_add_marked(struct vm *vm, bool dict)
{
    size_t first = 0;
    int rc = pop_mark(vm, &first, !dict);
    return rc != 0 ? rc : add_items(vm, first, dict);
}

/* DICT, LIST, TUPLE: a container of everything above the innermost MARK. */
static int
op_build(struct vm *vm, uint8_t type)
{
    size_t first = 0;
    int rc = pop_mark(vm, &first, false);
    if (rc != 0)
        return rc;
    size_t n = vm->sp - first;
    if (type == SVAL_DICT && n % 2 != 0)
        return fail(vm, -CUPROF_EFORMAT, "DICT with an odd number of items");
    struct sval v;
    if ((rc = new_seq(vm, type, n > 0 ? vm->stack + first : NULL, n, &v)) != 0)
        return rc;
    vm->sp = first;
    locate(vm, type, &v);
    return push(vm, v);
}

/* TUPLE1..3: the top n items. */
static int
op_tuple_n(struct vm *vm, size_t n)
{
    if (vm->sp < n)
        return fail(vm, -CUPROF_EFORMAT, "stack underflow");
    reach(vm, vm->sp - n);
    struct sval v;
    int rc = new_seq(vm, SVAL_TUPLE, vm->stack + vm->sp - n, n, &v);
    if (rc != 0)
        return rc;
    vm->sp -= n;
    return push(vm, v);
}

/* SHORT_BINUNICODE, BINUNICODE, BINUNICODE8: a length of `width` bytes, then the text. */
static int
op_string(struct vm *vm, size_t width, const char *what)
{
    uint64_t n;
    int rc = arg(vm, width, what, &n);
    if (rc != 0)
        return rc;
    if ((rc = fill(vm, n)) != 0)
        return rc != -CUPROF_EFORMAT
                   ? rc
                   : fail(vm, rc, "truncated pickle (string of %llu bytes)", (unsigned long long)n);
    const char *s = snapshot_intern_n(vm->strings, (const char *)vm->p, (size_t)n);
    if (s == NULL)
        return oom(vm);
    vm->p += n;
    return push(vm, (struct sval){.type = SVAL_STR, .u.s = s});
}

/* BININT1, BININT2 (unsigned), BININT (signed 32-bit). */
static int
op_int(struct vm *vm, size_t width, const char *what)
{
    uint64_t u;
    int rc = arg(vm, width, what, &u);
    if (rc != 0)
        return rc;
    int64_t i = width == 4 ? (int32_t)(uint32_t)u : (int64_t)u;
    return push(vm, (struct sval){.type = SVAL_INT, .u.i = i});
}

/* LONG1/LONG4: a Python int of any size (pickle_data.h says how it is typed). */
static int
op_long(struct vm *vm, size_t width, const char *what)
{
    uint64_t n;
    int rc = arg(vm, width, what, &n);
    if (rc != 0 || (rc = need(vm, n, "LONG")) != 0)
        return rc;
    char text[PICKLE_DATA_TEXT];
    struct sval v;
    pickle_data_long(vm->p, (size_t)n, (size_t)(vm->end - vm->p), &v, text, sizeof(text));
    vm->p += n;
    if (v.type == SVAL_BIGINT && (v.u.s = snapshot_intern(vm->strings, text)) == NULL)
        return oom(vm);
    return push(vm, v);
}

/* BINFLOAT: a big-endian double. */
static int
op_float(struct vm *vm)
{
    int rc = need(vm, 8, "BINFLOAT");
    if (rc != 0)
        return rc;
    uint64_t u = 0;
    for (int i = 0; i < 8; i++)
        u = (u << 8) | vm->p[i];
    vm->p += 8;
    struct sval v = {.type = SVAL_FLOAT};
    memcpy(&v.u.f, &u, sizeof(u));
    return push(vm, v);
}

/* MEMOIZE, BINPUT, LONG_BINPUT: the top of the stack, which may now be referred to again. */
static int
memo_store(struct vm *vm, uint64_t index)
{
    if (vm->sp == 0)
        return fail(vm, -CUPROF_EFORMAT, "memo store with an empty stack");
    reach(vm, vm->sp - 1);
    /* A file cannot define more memo entries than it has bytes: bounds hostile indices. */
    if (index >= vm->size)
        return fail(vm, -CUPROF_EFORMAT, "memo index %llu out of range", (unsigned long long)index);
    bool fresh = index >= vm->memo_cap || !(vm->memo[index].flags & SVAL_MEMO);
    if (index >= vm->memo_cap) {
        size_t cap = vm->memo_cap ? vm->memo_cap : 256;
        while (cap <= index)
            cap *= 2;
        struct sval *m = realloc(vm->memo, cap * sizeof(*m));
        if (m == NULL)
            return oom(vm);
        memset(m + vm->memo_cap, 0, (cap - vm->memo_cap) * sizeof(*m));
        vm->memo = m;
        vm->memo_cap = cap;
    }
    struct sval *top = &vm->stack[vm->sp - 1];
    int rc = settle(vm, top);
    if (rc != 0)
        return rc;
    top->flags |= SVAL_MEMO;
    vm->memo[index] = *top;
    vm->memo_len += fresh; /* BINPUT counts too: a file may mix it with MEMOIZE */
    return 0;
}

/* BINGET, LONG_BINGET. A big list given to the consumer and fetched again is in the tree
 * twice, and empty: the consumer is told (and for the root and device_traces too). */
static int
memo_fetch(struct vm *vm, uint64_t index)
{
    if (index >= vm->memo_cap || !(vm->memo[index].flags & SVAL_MEMO))
        return fail(vm, -CUPROF_EFORMAT, "memo index %llu was never stored",
                    (unsigned long long)index);
    const struct sval *v = &vm->memo[index];
    if (v->place != PLACE_NONE && v->place != PLACE_RECORD && vm->stream != NULL)
        vm->stream->shared = true; /* also root and device_traces: records inside them could
                                    * have been taken while they were unfinished */
    struct sval copy = *v;
    copy.flags |= SVAL_FETCHED;
    return push(vm, copy);
}

/* MEMOIZE, BINPUT, LONG_BINPUT. */
static int
op_memo_store(struct vm *vm, unsigned char op)
{
    uint64_t index = vm->memo_len;
    int rc = op == 'q'   ? arg(vm, 1, "BINPUT", &index)
             : op == 'r' ? arg(vm, 4, "LONG_BINPUT", &index)
                         : 0;
    return rc != 0 ? rc : memo_store(vm, index);
}

/* BINGET, LONG_BINGET. */
static inline int
op_memo_fetch(struct vm *vm, size_t width, const char *what)
{
    uint64_t index;
    int rc = arg(vm, width, what, &index);
    return rc != 0 ? rc : memo_fetch(vm, index);
}

static int
op_stop(struct vm *vm, bool *stop)
{
    if (vm->sp == 0)
        return fail(vm, -CUPROF_EFORMAT, "STOP with an empty stack");
    if (vm->taken_mark != 0)
        misplaced(vm);
    *stop = true;
    return settle(vm, &vm->stack[vm->sp - 1]);
}

static int
step(struct vm *vm, unsigned char op, bool *stop)
{
    uint64_t skip;
    switch (op) {
    case 0x80: /* PROTO */
        return op_proto(vm);
    case 0x95: /* FRAME: a length hint only */
        return arg(vm, 8, "FRAME", &skip);
    case '.':
        return op_stop(vm, stop);
    case '(':
        return op_mark(vm);
    case '}':
        return op_empty(vm, SVAL_DICT);
    case ']':
        return op_empty(vm, SVAL_LIST);
    case ')':
        return op_empty(vm, SVAL_TUPLE);
    case 'a': /* APPEND */
    case 's': /* SETITEM */
        return op_add_one(vm, op == 's');
    case 'e': /* APPENDS */
    case 'u': /* SETITEMS */
        return op_add_marked(vm, op == 'u');
    case 'd':
        return op_build(vm, SVAL_DICT);
    case 'l':
        return op_build(vm, SVAL_LIST);
    case 't':
        return op_build(vm, SVAL_TUPLE);
    case 0x85: /* TUPLE1..3 */
    case 0x86:
    case 0x87:
        return op_tuple_n(vm, (size_t)(op - 0x84));
    case 0x8c:
        return op_string(vm, 1, "SHORT_BINUNICODE");
    case 'X':
        return op_string(vm, 4, "BINUNICODE");
    case 0x8d:
        return op_string(vm, 8, "BINUNICODE8");
    case 'K':
        return op_int(vm, 1, "BININT1");
    case 'M':
        return op_int(vm, 2, "BININT2");
    case 'J':
        return op_int(vm, 4, "BININT");
    case 0x8a:
        return op_long(vm, 1, "LONG1");
    case 0x8b:
        return op_long(vm, 4, "LONG4");
    case 'G':
        return op_float(vm);
    case 'N':
        return push(vm, (struct sval){.type = SVAL_NONE});
    case 0x88: /* NEWTRUE, NEWFALSE */
    case 0x89:
        return push(vm, (struct sval){.type = SVAL_BOOL, .u.b = op == 0x88});
    case 0x94: /* MEMOIZE */
    case 'q':  /* BINPUT */
    case 'r':  /* LONG_BINPUT */
        return op_memo_store(vm, op);
    case 'h':
        return op_memo_fetch(vm, 1, "BINGET");
    case 'j':
        return op_memo_fetch(vm, 4, "LONG_BINGET");
    default:
        vm->p--;
        return fail(vm, -CUPROF_EFORMAT,
                    "unsupported pickle opcode 0x%02x (only plain data is read: dicts, lists, "
                    "tuples, strings, numbers)",
                    op);
    }
}

static int
run(struct vm *vm, struct sval *out)
{
    int rc = fill(vm, 1);
    if (rc == -CUPROF_EIO || rc == -CUPROF_EHOSTMEM)
        return rc;
    if (rc != 0 || vm->p[0] != 0x80)
        return fail(vm, -CUPROF_EFORMAT, "not a pickle of protocol 2 or later (no PROTO opcode)");
    bool stop = false;
    while (!stop) {
        if ((rc = fill(vm, 1)) != 0)
            return rc != -CUPROF_EFORMAT ? rc : fail(vm, rc, "truncated pickle (no STOP opcode)");
        unsigned char op = *vm->p++;
        if ((rc = step(vm, op, &stop)) != 0)
            return rc;
    }
    *out = vm->stack[vm->sp - 1];
    return 0;
}

int
pickle_read_input(const struct pickle_input *in, struct snapshot_arena *tree,
                  struct snapshot *strings, struct pickle_stream *stream, struct sval *out,
                  char *err, size_t err_len)
{
    struct vm vm = {.p = in->data,
                    .start = in->data,
                    .end = in->fd < 0 ? in->data + in->len : in->data,
                    .size = in->len,
                    .fd = in->fd,
                    .tree = tree,
                    .strings = strings,
                    .stream = stream,
                    .err = err,
                    .err_len = err_len};
    int rc = 0;
    if (stream != NULL) {
        vm.key_segments = snapshot_intern(strings, "segments");
        vm.key_traces = snapshot_intern(strings, "device_traces");
        if (vm.key_segments == NULL || vm.key_traces == NULL)
            rc = oom(&vm);
    }
    if (rc == 0)
        rc = run(&vm, out);
    free(vm.stack);
    free(vm.memo);
    free(vm.window);
    snapshot_arena_destroy(vm.scratch);
    return rc;
}

int
pickle_read(const unsigned char *data, size_t len, struct snapshot_arena *tree,
            struct snapshot *strings, struct sval *out, char *err, size_t err_len)
{
    struct pickle_input in = {.data = data, .len = len, .fd = -1};
    return pickle_read_input(&in, tree, strings, NULL, out, err, err_len);
}
