/* python_frames.h: the calling thread's CPython frames (function, file, line), read from the
 *   interpreter found in this process at run time (CPython 3.9 to 3.13, no link to Python), and
 *   interned per code object and instruction as tokens that ride in captured stacks in place of
 *   the interpreter's eval-loop frames.
 * Locking: lookups of a known frame are lock-free; a new frame takes a private mutex.
 * Hot path: python_frames_capture is: no Python API that needs the GIL, no reference count
 *   touched, no Python object created, no malloc (storage grows in mmap'd chunks). */
#ifndef CUPROF_PYTHON_FRAMES_H
#define CUPROF_PYTHON_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A token has the top bit set: no user-space code address on a 64-bit Linux does. */
#define PYTHON_FRAME_TOKEN_BIT ((uintptr_t)1 << 63)

static inline bool
python_frames_is_token(uintptr_t ip)
{
    return (ip & PYTHON_FRAME_TOKEN_BIT) != 0;
}

/* CUPROF_PYTHON_FRAMES: off stops looking for an interpreter. Any time (atomic). */
void python_frames_enable(bool enabled);

/* One capture: tokens innermost first; group_end[i] is true when frame i is the outermost
 * frame run by one call of the interpreter's eval loop (the native frame it replaces). */
#define PYTHON_FRAMES_MAX 256u
struct python_capture {
    size_t count;
    uintptr_t tokens[PYTHON_FRAMES_MAX];
    bool group_end[PYTHON_FRAMES_MAX];
};

/* Reads the calling thread's Python frames into *out (count 0: no interpreter, no Python frame on
 * this thread, or frames that cannot be read safely). Never blocks on the GIL. */
void python_frames_capture(struct python_capture *out);

/* True when `ip`, a return address, lies in the interpreter's eval loop. */
bool python_frames_is_eval_loop(uintptr_t ip);

/* Native return addresses (innermost first) and a capture, merged: each eval-loop native frame
 * gives way to the Python frames it ran; Python frames left over (their eval frames were beyond
 * the native depth) follow the native ones. Writes at most `cap`; returns how many. */
size_t python_frames_merge(const uintptr_t *native, size_t native_count,
                           const struct python_capture *py, uintptr_t *out, size_t cap);

/* The frame behind a token: strings valid for the process lifetime. False for an unknown one. */
bool python_frames_get(uintptr_t token, const char **name, const char **filename, int *line);

/* What the snapshot's "cuprof" section says of Python: interpreter (e.g. "CPython 3.11.7", NULL
 * when none was found), frames ("captured", or "native frames only: <reason>") and how many
 * captures ran with the GIL held by the thread and without it. */
struct python_frames_status {
    const char *interpreter;
    const char *frames;
    uint64_t captures_gil_held;
    uint64_t captures_gil_released;
};
void python_frames_status(struct python_frames_status *out);

/* The field offsets cuprof reads for CPython 3.`minor` (NULL when that version is not covered):
 * checked against CPython's own headers by tests/unit/python. */
struct python_layout {
    int minor;
    /* thread state -> current frame: tstate + frame_holder, then (when via_cframe) +
     * frame_in_holder */
    size_t tstate_frame;
    bool via_cframe;
    size_t cframe_current;
    /* frames: 3.9/3.10 PyFrameObject, 3.11+ _PyInterpreterFrame */
    bool interpreter_frames;
    size_t frame_previous, frame_code, frame_instr, frame_owner, frame_is_entry;
    bool lasti_in_code_units;          /* 3.10: f_lasti counts 2-byte code units */
    int owner_generator, owner_cstack; /* -1: no such owner */
    /* code objects */
    size_t code_name, code_qualname, code_filename, code_firstlineno, code_adaptive,
        code_firsttraceable; /* qualname, adaptive, firsttraceable: 0 = absent */
    /* str objects */
    size_t str_length, str_state, str_ascii_size, str_compact_size;
};
const struct python_layout *python_frames_layout(int minor);

/* In the child after fork(): re-initialises the insert mutex another thread may have held. */
void python_frames_reset_after_fork(void);

#endif
