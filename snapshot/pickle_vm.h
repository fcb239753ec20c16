/* pickle_vm.h: the pickle reader's machine (input window, stack, MARKs, memo) as its two files
 *   share it: pickle_reader.c runs the opcodes, pickle_place.c decides where a container sits and
 *   what goes to the stream consumer; the input and stack helpers both use. Internal to them.
 * Locking: none: one reading thread.
 * Hot path: no (the readers), but per entry of a 10^7-entry history. */
#ifndef CUPROF_PICKLE_VM_H
#define CUPROF_PICKLE_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocator/cuprof_errors.h"
#include "snapshot/pickle_reader.h"
#include "snapshot/sval.h"

/* sval.place: where a container was built (a guess the consumer checks against the tree). */
enum pickle_place {
    PLACE_NONE = 0,
    PLACE_ROOT,
    PLACE_SEGMENTS,
    PLACE_TRACES,
    PLACE_TRACE,
    PLACE_RECORD
};
#define SVAL_SCRATCH 0x80u /* sval.flags: the container lives in pickle_vm.scratch */
#define SVAL_FETCHED 0x40u /* sval.flags, on the stack: pushed by a memo fetch */

struct pickle_vm {
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

/* Formats "byte N: " and the message into vm->err; returns `code`. */
__attribute__((format(printf, 3, 4))) int pickle_vm_fail(struct pickle_vm *vm, int code,
                                                         const char *fmt, ...);
/* pickle_vm_fail with "out of memory": -CUPROF_EHOSTMEM. */
int pickle_vm_oom(struct pickle_vm *vm);

/* Input: makes n bytes available at vm->p, reading the file on. 0, -CUPROF_EFORMAT when the
 * input ends first (no message), -CUPROF_EIO or -CUPROF_EHOSTMEM (with a message). */
int pickle_vm_refill(struct pickle_vm *vm, uint64_t n);

/* Input: the first n bytes of vm->fd, already read by the caller, into the window. 0 or
 * -CUPROF_EHOSTMEM (with a message). */
int pickle_vm_head(struct pickle_vm *vm, const unsigned char *head, size_t n);

static inline int
pickle_vm_fill(struct pickle_vm *vm, uint64_t n)
{
    return (uint64_t)(vm->end - vm->p) >= n ? 0 : pickle_vm_refill(vm, n);
}

/* -CUPROF_EFORMAT with the message of an input that ends before `what`'s n bytes. */
int pickle_vm_truncated(struct pickle_vm *vm, uint64_t n, const char *what);

/* pickle_vm_fill, with a message naming `what` when the input ends first (every opcode's
 * argument: inline, the message out of line). */
static inline int
pickle_vm_need(struct pickle_vm *vm, uint64_t n, const char *what)
{
    int rc = pickle_vm_fill(vm, n);
    return rc == -CUPROF_EFORMAT ? pickle_vm_truncated(vm, n, what) : rc;
}

/* Pushes v after growing the stack; 0 or -CUPROF_EHOSTMEM. */
int pickle_vm_push_grow(struct pickle_vm *vm, struct sval v);

static inline int
pickle_vm_push(struct pickle_vm *vm, struct sval v)
{
    if (vm->sp == vm->stack_cap)
        return pickle_vm_push_grow(vm, v);
    vm->stack[vm->sp++] = v;
    return 0;
}

#endif
