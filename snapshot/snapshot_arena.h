/* snapshot_arena.h: bump memory for one snapshot model (strings, arrays) plus string interning;
 *   everything is released at once by snapshot_arena_destroy.
 * Locking: none: an arena belongs to the one thread that builds or reads its model.
 * Hot path: no (dump time and the command line only). */
#ifndef CUPROF_SNAPSHOT_ARENA_H
#define CUPROF_SNAPSHOT_ARENA_H

#include <stddef.h>
#include <stdint.h>

struct snapshot_arena;

/* Returns NULL when host memory runs out. */
struct snapshot_arena *snapshot_arena_create(void);
void snapshot_arena_destroy(struct snapshot_arena *arena);

/* `size` bytes aligned to 16, zero-filled; NULL when host memory runs out. Freed with the arena. */
void *snapshot_arena_alloc(struct snapshot_arena *arena, size_t size);

/* The same without the zero fill, for memory the caller writes before reading. */
void *snapshot_arena_alloc_bytes(struct snapshot_arena *arena, size_t size);

/* Forgets everything allocated (and interned) so far, keeping one chunk for what comes next. */
void snapshot_arena_reset(struct snapshot_arena *arena);

/* One shared copy of each distinct string (equal strings give the same pointer). Bytes that are
 * not valid UTF-8, and NULs, become the four characters \xHH (text_escape.h's rule), so every
 * writer can emit the string as text and a reader can still tell which byte it was. NULL on
 * OOM. */
const char *snapshot_arena_intern(struct snapshot_arena *arena, const char *s, size_t len);

/* Maps in the whole pages of [p, p + len), memory the caller is about to write in full, in one
 * call (MADV_POPULATE_WRITE, Linux 5.14 on) instead of a page fault per 4 KiB: several times
 * cheaper, and on the VMs these tools run on a fault costs 10-40 us. Does nothing where the
 * kernel cannot. */
void snapshot_arena_prefault(void *p, size_t len);

/* Bytes held by the arena (for the benchmark's bytes-per-entry figure). */
size_t snapshot_arena_bytes(const struct snapshot_arena *arena);

#endif
