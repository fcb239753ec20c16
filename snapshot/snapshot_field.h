/* snapshot_field.h: reads one scalar field of a snapshot's value tree (a Python int of any size,
 *   a whole float, a string) with the range its meaning allows; a value that cannot be used
 *   becomes one warning line per field name, naming the file, the record, the value and why.
 * Locking: none: one reading thread. Hot path: no. */
#ifndef CUPROF_SNAPSHOT_FIELD_H
#define CUPROF_SNAPSHOT_FIELD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot/snapshot_model.h"
#include "snapshot/sval.h"

struct snapshot_field_warning {
    const char *key;  /* the field name: one warning each */
    const char *text; /* the first occurrence's line */
    size_t count;     /* occurrences */
};

/* One reading's warnings; zero-initialize with snap and name (the file, for messages) set. */
struct snapshot_fields {
    struct snapshot *snap;
    const char *name;
    struct snapshot_field_warning *warnings;
    size_t warned_len, warned_cap;
    size_t unlisted; /* warnings past SNAPSHOT_FIELD_MAX_WARNINGS field names: only counted */
};

/* Field names come from the file (a stats dict's keys): the list stays short and linear. */
#define SNAPSHOT_FIELD_MAX_WARNINGS 32

/* What the field readers return (or a negative -CUPROF_EHOSTMEM). */
enum {
    FIELD_OK = 0,
    FIELD_ABSENT = 1, /* absent or None: the caller's default applies */
    FIELD_BAD = 2,    /* present but unusable: already warned with the caller's `then` */
};

/* How an unsigned field reads a value. */
enum snapshot_field_kind {
    FIELD_BITS,  /* any 64-bit pattern: addresses and streams (PyTorch writes pointers as int64),
                  * an OOM's request (any size_t; SIZE_MAX is written as -1, as cuprof writes it) */
    FIELD_BYTES, /* sizes: 0..SNAP_MAX_BYTES */
};

/* Records `NAME: where: field "key" is VALUE: why; then` (`... is missing; then` for v NULL),
 * once per key; later ones are counted. 0 or -CUPROF_EHOSTMEM. */
__attribute__((warn_unused_result)) int snapshot_field_warn(struct snapshot_fields *f,
                                                            const char *where, const char *key,
                                                            const struct sval *v, const char *why,
                                                            const char *then);
/* Moves the warnings into f->snap->warnings, each with how many records it stands for. */
__attribute__((warn_unused_result)) int snapshot_field_publish(struct snapshot_fields *f);
void snapshot_field_free(struct snapshot_fields *f);

/* The integer a value holds, as sign and magnitude. Bools count, as in Python; so do whole
 * floats, which JSON tools write for integers (1e3, 1024.0). False, with *why, otherwise. */
bool snapshot_field_integer(const struct sval *v, bool *neg, uint64_t *mag, const char **why);

/* dict[key] read as described above; FIELD_BAD values are warned with `then` ("ignored",
 * "segment skipped", ...). */
__attribute__((warn_unused_result)) int
snapshot_field_u64(struct snapshot_fields *f, const char *where, const struct sval *dict,
                   const char *key, enum snapshot_field_kind kind, const char *then, uint64_t *out);
__attribute__((warn_unused_result)) int
snapshot_field_i64(struct snapshot_fields *f, const char *where, const struct sval *dict,
                   const char *key, int64_t lo, int64_t hi, const char *then, int64_t *out);
/* The same for a value already found (a dict walked pair by pair: no lookup per key). */
__attribute__((warn_unused_result)) int snapshot_field_i64_value(struct snapshot_fields *f,
                                                                 const char *where, const char *key,
                                                                 const struct sval *v, int64_t lo,
                                                                 int64_t hi, const char *then,
                                                                 int64_t *out);
__attribute__((warn_unused_result)) int snapshot_field_str(struct snapshot_fields *f,
                                                           const char *where,
                                                           const struct sval *dict, const char *key,
                                                           const char *then, const char **out);
/* Any integer (0 = false), as PyTorch's bools; bad values are ignored with a warning. */
__attribute__((warn_unused_result)) int snapshot_field_bool(struct snapshot_fields *f,
                                                            const char *where,
                                                            const struct sval *dict,
                                                            const char *key, bool *out);

#endif
