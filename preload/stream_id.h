/* stream_id.h: stream handles <-> the allocator's stream keys. 0, CU_STREAM_LEGACY and
 *   CU_STREAM_PER_THREAD are not objects: the legacy stream becomes key 0, a per-thread default
 *   stream (CU_STREAM_PER_THREAD, or 0 through a _ptsz entry point) a key unique to its thread.
 * Locking: none (thread-local cache of the thread id).
 * Hot path: yes. */
#ifndef CUPROF_STREAM_ID_H
#define CUPROF_STREAM_ID_H

#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>

/* Real handles are pointers (8-byte aligned); per-thread keys end in binary 010 so they never
 * collide with one: (tid << 3) | 2. */
uint64_t stream_id_per_thread(void);
/* In a fork child (run by its only thread): that thread has a new id and a new per-thread
 * stream, so the key inherited from the parent's thread is dropped. */
void stream_id_reset_after_fork(void);

static inline uint64_t
stream_id_from_cu(CUstream stream, bool per_thread_entry)
{
    if (stream == CU_STREAM_LEGACY || (stream == NULL && !per_thread_entry))
        return 0;
    if (stream == CU_STREAM_PER_THREAD || stream == NULL)
        return stream_id_per_thread();
    return (uint64_t)(uintptr_t)stream;
}

/* The handle to use from the calling thread. Another thread's per-thread stream cannot be
 * named here: the legacy stream, which synchronizes with every blocking stream, stands in. */
static inline CUstream
stream_id_to_cu(uint64_t id)
{
    if (id == 0)
        return CU_STREAM_LEGACY;
    if ((id & 7u) == 2u)
        return id == stream_id_per_thread() ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
    return (CUstream)(uintptr_t)id;
}

#endif
