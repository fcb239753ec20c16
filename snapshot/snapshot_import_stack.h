/* snapshot_import_stack.h: a snapshot value tree's frame lists -> the model's frames and
 *   stacks (for snapshot_import.c), and the helpers its record importers share: dict fields by
 *   interned key, and where a record is, for messages.
 * Locking: none: one reading thread.
 * Hot path: no (the readers), but per entry of a 10^7-entry history. */
#ifndef CUPROF_SNAPSHOT_IMPORT_STACK_H
#define CUPROF_SNAPSHOT_IMPORT_STACK_H

#include <stddef.h>
#include <stdint.h>

#include "snapshot/snapshot_field.h"
#include "snapshot/sval.h"

/* Where a record is, for messages: formatted only when a message is written. */
struct snapshot_import_where {
    const char *text; /* NULL: device_traces[d][i] */
    size_t d, i;
    char buf[64];
};
const char *snapshot_import_where_text(struct snapshot_import_where *w);

/* The values of `keys` (interned strings, compared by address) in `dict`, NULL where absent;
 * with a repeated key the last one wins, as in Python (and sval_get). Keys usually come in the
 * order given, so one comparison finds each. */
void snapshot_import_fields(const struct sval *dict, const char *const *keys, size_t n,
                            const struct sval **out);

#define SNAPSHOT_IMPORT_FRAME_KEYS 3
struct snapshot_import_stacks {
    struct snapshot *snap;
    struct snapshot_fields *f; /* warnings */
    uint32_t *frame_buf;
    size_t frame_buf_cap;
    const char *frame_keys[SNAPSHOT_IMPORT_FRAME_KEYS]; /* interned */
    const char *unknown;                                /* "??", interned */
};

/* For f->snap. 0 or -CUPROF_EHOSTMEM (free it either way). */
__attribute__((warn_unused_result)) int
snapshot_import_stacks_init(struct snapshot_import_stacks *st, struct snapshot_fields *f);
void snapshot_import_stacks_free(struct snapshot_import_stacks *st);

/* A frames list (absent or None: the empty stack, 0) -> a stack index. What cannot be used is a
 * warning naming `w` (frames that are not a list: no stack; a frame that is not a dict, or its
 * fields: ??). 0 or -CUPROF_EHOSTMEM. */
__attribute__((warn_unused_result)) int snapshot_import_stack(struct snapshot_import_stacks *st,
                                                              struct snapshot_import_where *w,
                                                              const struct sval *frames,
                                                              uint32_t *index);

#endif
