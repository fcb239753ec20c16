/* library_hint.h: one line, once per process, when a library that caches device memory itself
 *   (PyTorch, JAX/XLA, TensorFlow, CuPy) allocates through cuprof's cache: two caches hold more
 *   memory than one, and CUDA IPC of blocks cut from cuprof's segments is refused, so such a
 *   program is better recorded in trace mode (docs/recipes/pytorch.md, troubleshooting).
 * Locking: none (atomics); the line is written with no cuprof lock held.
 * Hot path: library_hint_note, one relaxed load per allocating call once the library was seen. */
#ifndef CUPROF_LIBRARY_HINT_H
#define CUPROF_LIBRARY_HINT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "preload/library_table.h"

/* The library rows already looked at, one bit each. */
extern _Atomic uint64_t library_hint_seen[LIBRARY_TABLE_MAX / 64];

/* The allocator that caches, in words ("PyTorch's caching allocator"), when `path` (a library
 * row's object path or Python package folder) is one of them; NULL otherwise. */
const char *library_hint_cacher(const char *path);

void library_hint_note_slow(uint16_t library);

/* An allocating call of `library` (library_table.h) is about to reach cuprof: on the first call
 * of a library that caches, in cache mode, the line (CUPROF_LOG=info and up). */
static inline void
library_hint_note(uint16_t library)
{
    if (library == LIBRARY_UNKNOWN || library >= LIBRARY_TABLE_MAX)
        return;
    uint64_t bit = (uint64_t)1 << (library % 64);
    if ((atomic_load_explicit(&library_hint_seen[library / 64], memory_order_relaxed) & bit) == 0)
        library_hint_note_slow(library);
}

#endif
