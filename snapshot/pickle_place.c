/* pickle_place.c: where the pickle reader's containers sit in a snapshot and what goes to the
 * stream consumer. A file says nothing of what its lists mean: each container is tagged when it is
 * created with where it sits (root, segments list, device_traces, device_traces[d], a record of
 * one of those lists), a guess the consumer checks against the finished tree. Records appended to
 * the two big lists go to the consumer a batch at a time; a record dict the memo does not hold
 * lives in a scratch arena, reused once its batch is taken, so a 10^7-entry history never exists
 * as a tree. A trace's plain records (cuprof's entries: all ints and memo fetches) are not even
 * built: each goes to the consumer as its items are decoded, so an entry costs one pass over its
 * bytes. */
#include "snapshot/pickle_place.h"

#include "snapshot/pickle_data.h"
#include "snapshot/snapshot_arena.h"

/* Copies a scratch container into the tree before it is kept anywhere but a taken batch. */
int
pickle_place_settle(struct pickle_vm *vm, struct sval *v)
{
    if (!(v->flags & SVAL_SCRATCH))
        return 0;
    const struct sval_seq *old = v->u.seq;
    struct sval_seq *seq = sval_seq_new(vm->tree);
    size_t n = v->type == SVAL_DICT ? (size_t)old->len * 2 : old->len;
    if (seq == NULL || sval_seq_append(vm->tree, seq, old->items, n, v->type == SVAL_DICT) != 0)
        return pickle_vm_oom(vm);
    v->u.seq = seq;
    v->flags &= (uint8_t)~SVAL_SCRATCH;
    vm->scratch_live--;
    return 0;
}

int
pickle_place_settle_all(struct pickle_vm *vm, struct sval *items, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int rc = items[i].flags & SVAL_SCRATCH ? pickle_place_settle(vm, &items[i]) : 0;
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Which big list a key of the root dict names. */
static enum pickle_place
key_place(const struct pickle_vm *vm, const struct sval *key)
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
void
pickle_place_locate(struct pickle_vm *vm, uint8_t type, struct sval *v)
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

/* Records were handed over one by one for the batch of an open MARK, and an opcode does what
 * the stack without them would not show (closes that MARK otherwise than by APPENDS, reaches
 * below it, stops the pickle): the consumer is told, and the file is read again without it. */
void
pickle_place_misplaced(struct pickle_vm *vm)
{
    vm->stream->shared = true;
    vm->taken_mark = 0;
}

/* The bytes a plain record and the opcode after it can take (pickle_data_record: MARK, 32 values
 * of at most 10 bytes, SETITEMS). */
#define RECORD_MAX_BYTES 352

/* A record's EMPTY_DICT was just read in the batch of a trace (the innermost MARK's, which holds
 * only whole items): it and the plain records that follow it go to the consumer one by one while
 * each is whole in the window and followed by the next record or the batch's APPENDS. Items
 * already above the MARK (records read the long way: a frame list not seen before) go to the
 * consumer first, as if their batch ended there, so the list keeps its order. 0: the last record
 * read was taken (its EMPTY_DICT consumed, nothing to push); 1: it is for the opcode loop. */
int
pickle_place_take_records(struct pickle_vm *vm)
{
    size_t m = vm->mark_count > 0 ? vm->marks[vm->mark_count - 1] : 0;
    if (vm->stream->take_record == NULL || m == 0 || m > vm->sp ||
        vm->stack[m - 1].place != PLACE_TRACE ||
        (vm->taken_mark != 0 && vm->taken_mark != vm->mark_count))
        return 1;
    struct sval items[PICKLE_DATA_RECORD_ITEMS];
    for (;;) {
        uint64_t pos = vm->base + (uint64_t)(vm->p - vm->start), left = vm->size - pos;
        int rc = pickle_vm_fill(vm, left < RECORD_MAX_BYTES ? left : RECORD_MAX_BYTES);
        if (rc != 0)
            return rc;
        const unsigned char *after = vm->p;
        size_t n = pickle_data_record(vm->p, vm->end, vm->memo, vm->memo_cap, items, &after);
        if (n == 0 || after == vm->end || (*after != '}' && *after != 'e'))
            return 1;
        if (vm->sp > m) {
            if ((rc = pickle_place_give(vm, &vm->stack[m - 1], m)) != 0)
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

/* A batch appended to one of the big lists goes to the consumer; 1 when it declines. */
int
pickle_place_give(struct pickle_vm *vm, const struct sval *target, size_t first)
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
