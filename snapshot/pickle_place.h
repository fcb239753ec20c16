/* pickle_place.h: where a container the pickle reader builds sits in a snapshot (root, segments,
 *   device_traces, one device's trace, a record of one of the big lists), and what goes to the
 *   stream consumer: batches of records, plain trace entries one by one as they are decoded, and
 *   scratch records copied into the tree ("settled") when they go anywhere else.
 * Locking: none: one reading thread.
 * Hot path: no (the readers), but per entry of a 10^7-entry history. */
#ifndef CUPROF_PICKLE_PLACE_H
#define CUPROF_PICKLE_PLACE_H

#include "snapshot/pickle_vm.h"

/* Copies a scratch container into the tree before it is kept anywhere but a taken batch (v
 * itself is updated); the same for each of items[0..n). 0 or -CUPROF_EHOSTMEM. */
int pickle_place_settle(struct pickle_vm *vm, struct sval *v);
int pickle_place_settle_all(struct pickle_vm *vm, struct sval *items, size_t n);

/* Sets v->place (and v->slot) for a new container of `type` from what lies on the stack. */
void pickle_place_locate(struct pickle_vm *vm, uint8_t type, struct sval *v);

/* The batch stack[first..sp) appended to the big list `target` goes to the consumer (and off the
 * stack): 0, 1 when the consumer declines (nothing changed), or a negative error. */
int pickle_place_give(struct pickle_vm *vm, const struct sval *target, size_t first);

/* A record's EMPTY_DICT was just read: when it opens a plain entry of a trace's batch, it and the
 * plain entries after it go to the consumer's take_record. 0: the last record read was taken
 * (nothing to push); 1: it is for the opcode loop; or a negative error. */
int pickle_place_take_records(struct pickle_vm *vm);

/* Records were handed over one by one for the batch of an open MARK, and an opcode does what
 * the stack without them would not show (closes that MARK otherwise than by APPENDS, reaches
 * below it, stops the pickle): the consumer is told, and the file is read again without it. */
void pickle_place_misplaced(struct pickle_vm *vm);

/* An opcode is about to use stack[lowest..sp). */
static inline void
pickle_place_reach(struct pickle_vm *vm, size_t lowest)
{
    if (vm->taken_mark != 0 && lowest < vm->marks[vm->taken_mark - 1])
        pickle_place_misplaced(vm);
}

#endif
