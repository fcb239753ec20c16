/* label_table.h: the texts of annotations (cuprof_annotate's marks, NVTX ranges' names and memory
 *   regions' names), each interned once with its kind and numbered from 1.
 * Locking: lookups of a known label are lock-free (an open-addressing table published with
 *   release stores); inserting a new one, and reading a text back by id, take one private mutex.
 * Hot path: label_table_intern of a known label is (no malloc, no lock); NVTX calls it. */
#ifndef CUPROF_LABEL_TABLE_H
#define CUPROF_LABEL_TABLE_H

#include <stdint.h>

#include "snapshot/snapshot_model.h"

struct label_table;

/* NULL when out of memory. */
struct label_table *label_table_create(void);
void label_table_destroy(struct label_table *t);

/* The id (>= 1) of (text, stage), interning a copy of text the first time; 0 when text is NULL,
 * host memory ran out or the table holds LABEL_TABLE_MAX labels. Interning a SNAP_STAGE_START
 * label also interns its SNAP_STAGE_END twin with the next id, so a range's end is start id + 1
 * (asking for a SNAP_STAGE_END label directly gives that twin's id). Thread-safe. */
uint32_t label_table_intern(struct label_table *t, const char *text, enum snap_stage stage);

/* The text and stage of an id (the text is valid until label_table_destroy); NULL for id 0 or
 * an id never handed out. Takes the mutex: dump time, not the hot path. */
const char *label_table_text(struct label_table *t, uint32_t id, enum snap_stage *stage);

#define LABEL_TABLE_MAX ((uint32_t)1 << 20)

/* In the child after fork(): re-initialises the mutex another thread may have held. */
void label_table_reset_after_fork(struct label_table *t);

#endif
