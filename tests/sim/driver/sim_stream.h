/* sim_stream: queued copies and memsets for the memcpy/memset entry points.
 * Lock: takes dev->streams_lock then the stream's lock; call with no sim lock held. Hot path: no.
 */
#ifndef SIM_STREAM_H
#define SIM_STREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "sim_driver.h"

/* Queues a copy (or memset) on `s`; with `wait`, returns once the stream has executed it. */
CUresult sim_stream_copy(struct CUstream_st *s, void *dst, const void *src, size_t n, bool wait)
    __attribute__((warn_unused_result));
CUresult sim_stream_set(struct CUstream_st *s, void *dst, int val, size_t n, bool wait)
    __attribute__((warn_unused_result));
/* The 2D forms: `rows` rows of `n` bytes, each pitch bytes after the one before. */
CUresult sim_stream_copy_2d(struct CUstream_st *s, void *dst, size_t dst_pitch, const void *src,
                            size_t src_pitch, size_t n, size_t rows, bool wait)
    __attribute__((warn_unused_result));
CUresult sim_stream_set_2d(struct CUstream_st *s, void *dst, size_t dst_pitch, int val, size_t n,
                           size_t rows, bool wait) __attribute__((warn_unused_result));

#endif
