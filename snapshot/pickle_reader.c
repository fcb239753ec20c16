/* pickle_reader.c: the pickle VM for snapshot files: its opcodes. Opcode meanings follow
 * CPython's Lib/pickle.py; only the data opcodes of protocols 2-5 are accepted (no globals, no
 * objects). The machine's state, input window and stack are pickle_vm.h's; where a container sits
 * and what goes to a stream consumer, pickle_place.c's.
 *
 * Speed and memory: a file is read a window at a time (the file never sits in memory whole); with
 * a stream consumer, a snapshot's segments and history go to it as they are read, never into the
 * tree (pickle_place.c). */
#include "snapshot/pickle_reader.h"

#include <stdlib.h>
#include <string.h>

#include "allocator/cuprof_errors.h"
#include "snapshot/pickle_data.h"
#include "snapshot/pickle_place.h"
#include "snapshot/pickle_vm.h"
#include "snapshot/snapshot_arena.h"
#include "snapshot/snapshot_model.h"

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
arg(struct pickle_vm *vm, size_t n, const char *what, uint64_t *v)
{
    int rc = pickle_vm_need(vm, n, what);
    if (rc == 0) {
        *v = le(vm->p, n);
        vm->p += n;
    }
    return rc;
}

/* A new container holding items[0..n) (moved from the stack: settled first). */
static int
new_seq(struct pickle_vm *vm, uint8_t type, struct sval *items, size_t n, struct sval *out)
{
    int rc = pickle_place_settle_all(vm, items, n);
    if (rc != 0)
        return rc;
    struct sval_seq *seq = sval_seq_new(vm->tree);
    if (seq == NULL || sval_seq_append(vm->tree, seq, items, n, type == SVAL_DICT) != 0)
        return pickle_vm_oom(vm);
    *out = (struct sval){.type = type, .u.seq = seq};
    return 0;
}

/* Items above the innermost MARK; the MARK is removed. `appends`: APPENDS closes it. */
static int
pop_mark(struct pickle_vm *vm, size_t *first, bool appends)
{
    if (vm->mark_count == 0)
        return pickle_vm_fail(vm, -CUPROF_EFORMAT, "opcode needs a MARK but none is open");
    if (vm->taken_mark == vm->mark_count) {
        if (appends)
            vm->taken_mark = 0;
        else
            pickle_place_misplaced(vm);
    }
    *first = vm->marks[--vm->mark_count];
    if (*first > vm->sp) /* an opcode took items from below the MARK (CPython cannot) */
        return pickle_vm_fail(vm, -CUPROF_EFORMAT, "stack underflow below a MARK");
    return 0;
}

/* ---- Opcodes. */

static int
op_proto(struct pickle_vm *vm)
{
    int rc = pickle_vm_need(vm, 1, "PROTO");
    if (rc != 0)
        return rc;
    if (vm->p[0] < 2 || vm->p[0] > 5)
        return pickle_vm_fail(vm, -CUPROF_EFORMAT, "unsupported pickle protocol %u", vm->p[0]);
    vm->p++;
    return 0;
}

static int
op_mark(struct pickle_vm *vm)
{
    if (vm->mark_count == PICKLE_MAX_MARKS)
        return pickle_vm_fail(vm, -CUPROF_EFORMAT, "nesting deeper than %d levels",
                              PICKLE_MAX_MARKS);
    vm->marks[vm->mark_count++] = vm->sp;
    return 0;
}

/* EMPTY_DICT, EMPTY_LIST, EMPTY_TUPLE. A record dict lives in the scratch arena. */
static int
op_empty(struct pickle_vm *vm, uint8_t type)
{
    struct sval v = {.type = type};
    pickle_place_locate(vm, type, &v);
    bool scratch = v.place == PLACE_RECORD && type == SVAL_DICT;
    int rc = scratch ? pickle_place_take_records(vm) : 1;
    if (rc <= 0)
        return rc;
    if (scratch && vm->scratch == NULL && (vm->scratch = snapshot_arena_create()) == NULL)
        return pickle_vm_oom(vm);
    v.u.seq = sval_seq_new(scratch ? vm->scratch : vm->tree);
    if (v.u.seq == NULL)
        return pickle_vm_oom(vm);
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
            return pickle_vm_oom(vm);
    }
    return pickle_vm_push(vm, v);
}

/* APPEND(S)/SETITEM(S): add stack[first..sp) to the container just below them. */
static int
add_items(struct pickle_vm *vm, size_t first, bool dict)
{
    if (first == 0)
        return pickle_vm_fail(vm, -CUPROF_EFORMAT, "%s without a container",
                              dict ? "SETITEMS" : "APPENDS");
    struct sval *target = &vm->stack[first - 1];
    size_t n = vm->sp - first;
    if (target->type != (dict ? SVAL_DICT : SVAL_LIST))
        return pickle_vm_fail(vm, -CUPROF_EFORMAT, "%s on a %s", dict ? "SETITEMS" : "APPENDS",
                              sval_type_name(target));
    if (dict && n % 2 != 0)
        return pickle_vm_fail(vm, -CUPROF_EFORMAT, "SETITEMS with an odd number of items");
    /* Filling a container reached through the memo (never done by CPython's or cuprof's
     * pickler, which fill a container right after making it): records taken before may have
     * seen it unfinished. */
    if ((target->flags & SVAL_FETCHED) && vm->stream != NULL)
        vm->stream->shared = true;
    int rc;
    if (!dict && vm->stream != NULL &&
        (target->place == PLACE_SEGMENTS || target->place == PLACE_TRACE) &&
        (rc = pickle_place_give(vm, target, first)) <= 0)
        return rc;
    if ((rc = pickle_place_settle_all(vm, vm->stack + first, n)) != 0)
        return rc;
    struct snapshot_arena *arena = target->flags & SVAL_SCRATCH ? vm->scratch : vm->tree;
    if (sval_seq_append(arena, target->u.seq, vm->stack + first, n, dict) != 0)
        return pickle_vm_oom(vm);
    vm->sp = first;
    return 0;
}

/* APPEND, SETITEM: one item (or key and value) on the container below. */
static int
op_add_one(struct pickle_vm *vm, bool dict)
{
    if (vm->sp < (dict ? 3u : 2u))
        return pickle_vm_fail(vm, -CUPROF_EFORMAT, "stack underflow");
    pickle_place_reach(vm, vm->sp - (dict ? 3 : 2));
    return add_items(vm, vm->sp - (dict ? 2 : 1), dict);
}

/* APPENDS, SETITEMS: everything above the innermost MARK. */
static int
op_add_marked(struct pickle_vm *vm, bool dict)
{
    size_t first = 0;
    int rc = pop_mark(vm, &first, !dict);
    return rc != 0 ? rc : add_items(vm, first, dict);
}

/* DICT, LIST, TUPLE: a container of everything above the innermost MARK. */
static int
op_build(struct pickle_vm *vm, uint8_t type)
{
    size_t first = 0;
    int rc = pop_mark(vm, &first, false);
    if (rc != 0)
        return rc;
    size_t n = vm->sp - first;
    if (type == SVAL_DICT && n % 2 != 0)
        return pickle_vm_fail(vm, -CUPROF_EFORMAT, "DICT with an odd number of items");
    struct sval v;
    if ((rc = new_seq(vm, type, n > 0 ? vm->stack + first : NULL, n, &v)) != 0)
        return rc;
    vm->sp = first;
    pickle_place_locate(vm, type, &v);
    return pickle_vm_push(vm, v);
}

/* TUPLE1..3: the top n items. */
static int
op_tuple_n(struct pickle_vm *vm, size_t n)
{
    if (vm->sp < n)
        return pickle_vm_fail(vm, -CUPROF_EFORMAT, "stack underflow");
    pickle_place_reach(vm, vm->sp - n);
    struct sval v;
    int rc = new_seq(vm, SVAL_TUPLE, vm->stack + vm->sp - n, n, &v);
    if (rc != 0)
        return rc;
    vm->sp -= n;
    return pickle_vm_push(vm, v);
}

/* SHORT_BINUNICODE, BINUNICODE, BINUNICODE8: a length of `width` bytes, then the text. */
static int
op_string(struct pickle_vm *vm, size_t width, const char *what)
{
    uint64_t n;
    int rc = arg(vm, width, what, &n);
    if (rc != 0)
        return rc;
    if ((rc = pickle_vm_fill(vm, n)) != 0)
        return rc != -CUPROF_EFORMAT
                   ? rc
                   : pickle_vm_fail(vm, rc, "truncated pickle (string of %llu bytes)",
                                    (unsigned long long)n);
    const char *s = snapshot_intern_n(vm->strings, (const char *)vm->p, (size_t)n);
    if (s == NULL)
        return pickle_vm_oom(vm);
    vm->p += n;
    return pickle_vm_push(vm, (struct sval){.type = SVAL_STR, .u.s = s});
}

/* BININT1, BININT2 (unsigned), BININT (signed 32-bit). */
static int
op_int(struct pickle_vm *vm, size_t width, const char *what)
{
    uint64_t u;
    int rc = arg(vm, width, what, &u);
    if (rc != 0)
        return rc;
    int64_t i = width == 4 ? (int32_t)(uint32_t)u : (int64_t)u;
    return pickle_vm_push(vm, (struct sval){.type = SVAL_INT, .u.i = i});
}

/* LONG1/LONG4: a Python int of any size (pickle_data.h says how it is typed). */
static int
op_long(struct pickle_vm *vm, size_t width, const char *what)
{
    uint64_t n;
    int rc = arg(vm, width, what, &n);
    if (rc != 0 || (rc = pickle_vm_need(vm, n, "LONG")) != 0)
        return rc;
    char text[PICKLE_DATA_TEXT];
    struct sval v;
    pickle_data_long(vm->p, (size_t)n, (size_t)(vm->end - vm->p), &v, text, sizeof(text));
    vm->p += n;
    if (v.type == SVAL_BIGINT && (v.u.s = snapshot_intern(vm->strings, text)) == NULL)
        return pickle_vm_oom(vm);
    return pickle_vm_push(vm, v);
}

/* BINFLOAT: a big-endian double. */
static int
op_float(struct pickle_vm *vm)
{
    int rc = pickle_vm_need(vm, 8, "BINFLOAT");
    if (rc != 0)
        return rc;
    uint64_t u = 0;
    for (int i = 0; i < 8; i++)
        u = (u << 8) | vm->p[i];
    vm->p += 8;
    struct sval v = {.type = SVAL_FLOAT};
    memcpy(&v.u.f, &u, sizeof(u));
    return pickle_vm_push(vm, v);
}

/* MEMOIZE, BINPUT, LONG_BINPUT: the top of the stack, which may now be referred to again. */
static int
memo_store(struct pickle_vm *vm, uint64_t index)
{
    if (vm->sp == 0)
        return pickle_vm_fail(vm, -CUPROF_EFORMAT, "memo store with an empty stack");
    pickle_place_reach(vm, vm->sp - 1);
    /* A pickle cannot have stored more memo entries than it has bytes so far (each store is an
     * opcode): bounds hostile indices, also in a stream of unknown length. */
    if (index >= vm->base + (uint64_t)(vm->p - vm->start))
        return pickle_vm_fail(vm, -CUPROF_EFORMAT, "memo index %llu out of range",
                              (unsigned long long)index);
    bool fresh = index >= vm->memo_cap || !(vm->memo[index].flags & SVAL_MEMO);
    if (index >= vm->memo_cap) {
        size_t cap = vm->memo_cap ? vm->memo_cap : 256;
        while (cap <= index)
            cap *= 2;
        struct sval *m = realloc(vm->memo, cap * sizeof(*m));
        if (m == NULL)
            return pickle_vm_oom(vm);
        memset(m + vm->memo_cap, 0, (cap - vm->memo_cap) * sizeof(*m));
        vm->memo = m;
        vm->memo_cap = cap;
    }
    struct sval *top = &vm->stack[vm->sp - 1];
    int rc = pickle_place_settle(vm, top);
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
memo_fetch(struct pickle_vm *vm, uint64_t index)
{
    if (index >= vm->memo_cap || !(vm->memo[index].flags & SVAL_MEMO))
        return pickle_vm_fail(vm, -CUPROF_EFORMAT, "memo index %llu was never stored",
                              (unsigned long long)index);
    const struct sval *v = &vm->memo[index];
    if (v->place != PLACE_NONE && v->place != PLACE_RECORD && vm->stream != NULL)
        vm->stream->shared = true; /* also root and device_traces: records inside them could
                                    * have been taken while they were unfinished */
    struct sval copy = *v;
    copy.flags |= SVAL_FETCHED;
    return pickle_vm_push(vm, copy);
}

/* MEMOIZE, BINPUT, LONG_BINPUT. */
static int
op_memo_store(struct pickle_vm *vm, unsigned char op)
{
    uint64_t index = vm->memo_len;
    int rc = op == 'q'   ? arg(vm, 1, "BINPUT", &index)
             : op == 'r' ? arg(vm, 4, "LONG_BINPUT", &index)
                         : 0;
    return rc != 0 ? rc : memo_store(vm, index);
}

/* BINGET, LONG_BINGET. */
static inline int
op_memo_fetch(struct pickle_vm *vm, size_t width, const char *what)
{
    uint64_t index;
    int rc = arg(vm, width, what, &index);
    return rc != 0 ? rc : memo_fetch(vm, index);
}

static int
op_stop(struct pickle_vm *vm, bool *stop)
{
    if (vm->sp == 0)
        return pickle_vm_fail(vm, -CUPROF_EFORMAT, "STOP with an empty stack");
    if (vm->taken_mark != 0)
        pickle_place_misplaced(vm);
    *stop = true;
    return pickle_place_settle(vm, &vm->stack[vm->sp - 1]);
}

static int
step(struct pickle_vm *vm, unsigned char op, bool *stop)
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
        return pickle_vm_push(vm, (struct sval){.type = SVAL_NONE});
    case 0x88: /* NEWTRUE, NEWFALSE */
    case 0x89:
        return pickle_vm_push(vm, (struct sval){.type = SVAL_BOOL, .u.b = op == 0x88});
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
        return pickle_vm_fail(
            vm, -CUPROF_EFORMAT,
            "unsupported pickle opcode 0x%02x (only plain data is read: dicts, lists, "
            "tuples, strings, numbers)",
            op);
    }
}

static int
run(struct pickle_vm *vm, struct sval *out)
{
    int rc = pickle_vm_fill(vm, 1);
    if (rc == -CUPROF_EIO || rc == -CUPROF_EHOSTMEM)
        return rc;
    if (rc != 0 || vm->p[0] != 0x80)
        return pickle_vm_fail(vm, -CUPROF_EFORMAT,
                              "not a pickle of protocol 2 or later (no PROTO opcode)");
    bool stop = false;
    while (!stop) {
        if ((rc = pickle_vm_fill(vm, 1)) != 0)
            return rc != -CUPROF_EFORMAT
                       ? rc
                       : pickle_vm_fail(vm, rc, "truncated pickle (no STOP opcode)");
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
    struct pickle_vm vm = {.p = in->data,
                           .start = in->data,
                           .end = in->fd < 0 ? in->data + in->len : in->data,
                           .size = in->len,
                           .fd = in->fd,
                           .tree = tree,
                           .strings = strings,
                           .stream = stream,
                           .err = err,
                           .err_len = err_len};
    int rc = in->fd >= 0 && in->head_len > 0 ? pickle_vm_head(&vm, in->data, in->head_len) : 0;
    if (rc == 0 && stream != NULL) {
        vm.key_segments = snapshot_intern(strings, "segments");
        vm.key_traces = snapshot_intern(strings, "device_traces");
        if (vm.key_segments == NULL || vm.key_traces == NULL)
            rc = pickle_vm_oom(&vm);
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
