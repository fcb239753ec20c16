/* frame_filter.h: which frames of a stack belong to the allocation machinery (cuprof, the CUDA
 *   runtime and driver, PyTorch's allocator and unwinder, the Python interpreter's C frames, libc
 *   start-up), and a loaded snapshot's stacks cut down to the rest, so that reports group and name
 *   call sites by the user's frames.
 * Locking: none (single-threaded command).
 * Hot path: no; once per distinct frame and stack, after a snapshot is read. */
#ifndef CUPROF_CLI_FRAME_FILTER_H
#define CUPROF_CLI_FRAME_FILTER_H

#include <stdbool.h>

#include "snapshot/snapshot_model.h"

/* A Python frame: its filename ends in ".py" (PyTorch's frame dicts for Python code). */
bool frame_filter_is_python(const struct snap_frame *frame);

/* Whether `frame` is machinery. The interpreter's C frames (python, libpython, CPython sources,
 * libffi, _ctypes, _PyEval_... names) are hidden only when the stack holds Python frames: without
 * them they are the only trace of how the program got there. */
bool frame_filter_hides(const struct snap_frame *frame, bool stack_has_python);

/* Points every stack reference of `snap` (segments, blocks, trace entries) at the stack of its
 * frames that are not hidden; a stack whose every frame would be hidden stays as it is. Stacks
 * that differ only in hidden frames become one stack, so they are one call site.
 * Returns 0, or -1 when host memory runs out (then no reference has changed). */
__attribute__((warn_unused_result)) int frame_filter_apply(struct snapshot *snap);

/* The same twins without the rewrite: adds to `snap` the filtered stack of every stack and sets
 * *map (malloc'd) to each stack's twin for the *count stacks the snapshot had before the call
 * (twins added later are their own). No reference changes: `plot` keeps every frame of a stack
 * for the page to show, beside its call site. Returns 0, or -1 when host memory runs out (then
 * *map is NULL). */
__attribute__((warn_unused_result)) int frame_filter_map(struct snapshot *snap, uint32_t **map,
                                                         size_t *count);

/* cli_load, then frame_filter_apply unless `all_frames`; one line on stderr and CLI_BADUSE when
 * either fails. */
__attribute__((warn_unused_result)) int frame_filter_load(const char *path, bool all_frames,
                                                          struct snapshot **out);

#endif
