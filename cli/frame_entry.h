/* frame_entry.h: a stack cut down to where the user's code enters a library, for reports. Frames
 *   inside a stripped library (its "libfoo.so+0x1a2b" offsets) collapse into the library's named
 *   entry point, shown as `cublasCreate_v2 (libcublas.so.13)`; where Python frames are present,
 *   frames inside the interpreter's library directories (the standard library, site-packages)
 *   give way to the user's code, the package's entry point kept as a frame
 *   `via numba.cuda.api.to_device` (cli_util.h's CLI_VIA_PREFIX) in its place.
 * Locking: none (single-threaded command).
 * Hot path: no; once per distinct frame and stack, after a snapshot is read. */
#ifndef CUPROF_CLI_FRAME_ENTRY_H
#define CUPROF_CLI_FRAME_ENTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot/snapshot_model.h"

/* "libcublas.so.13+0x5b45ed" in the module libcublas.so.13: the symbolizer's name for an address
 * without a symbol (snapshot/symbolize.c). */
bool frame_entry_is_bare(const struct snap_frame *frame);

/* A frame (Python or native) of a file in the interpreter's library directories. */
bool frame_entry_is_library(const struct snap_frame *frame);

/* What each frame of the model is, decided once; frames added later are neither. */
struct frame_entry_facts {
    uint8_t *flags;
    size_t count;
};
/* 0, or -1 when host memory runs out. */
__attribute__((warn_unused_result)) int frame_entry_facts_make(const struct snapshot *snap,
                                                               struct frame_entry_facts *out);
void frame_entry_facts_free(struct frame_entry_facts *facts);

/* Rewrites frames[0..*n) (innermost first, the frames a report keeps) in place: library runs give
 * way (only when `python`, and only when a frame outside them remains), then stripped runs
 * collapse. New frames (via frames, entry points named by their module's file name) are added to
 * snap. *n never grows. Returns 0, or -1 when host memory runs out. */
__attribute__((warn_unused_result)) int frame_entry_rewrite(struct snapshot *snap,
                                                            const struct frame_entry_facts *facts,
                                                            bool python, uint32_t *frames,
                                                            size_t *n);

#endif
