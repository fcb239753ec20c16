/* library_table.h: which shared object (or Python package) made a device call: the first frame
 *   outside the CUDA driver and runtime (cuprof's own frames never reach it), one row per loaded
 *   object's path, Python package's folder or user's Python file.
 * Locking: lookups read published arrays without a lock; learning a new object takes a private
 *   mutex after dl_iterate_phdr ran. Never call it with an allocator lock held.
 * Hot path: yes: a scan of the known address ranges; the loader is asked once per new object. */
#ifndef CUPROF_LIBRARY_TABLE_H
#define CUPROF_LIBRARY_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Rows, "(unknown)" included; objects past the last row are counted as "(unknown)". */
#define LIBRARY_TABLE_MAX 256
/* No stack, a stack that never leaves the CUDA libraries, or a full table. */
#define LIBRARY_UNKNOWN 0

/* The library of the first frame of `ips` (innermost first) that lies outside libcuda*,
 * libcudart* and libcuprof*; frames in no loaded object (JIT code) are passed over too. Where
 * Python frames (python_frames.h tokens) lie further out, the interpreter's objects (python,
 * libpython, libffi, _ctypes) are passed over as well, and the library is the Python package whose
 * code made the call: a native module's or a Python frame's package under the interpreter's
 * library directories (".../site-packages/numba" is "numba"), or the user's Python file. */
uint16_t library_table_of_ips(const uintptr_t *ips, size_t count);
/* The same for an interned stack (stacks.h); LIBRARY_UNKNOWN for id 0. */
uint16_t library_table_of_stack(uint32_t stack_id);
/* The same for the calling thread's own stack, unwound only a few frames past cuprof's: for calls
 * that captured no stack (CUPROF_STACKS=none, a free-only setting). */
uint16_t library_table_of_caller(void);

/* Rows in use (row 0 is "(unknown)"); rows are never removed. */
size_t library_table_count(void);
/* The row's object path as the loader names it (the program's from /proc/self/exe); "" for
 * LIBRARY_UNKNOWN or a row not in use. */
const char *library_table_path(uint16_t library);
/* True for the main program's row. */
bool library_table_is_program(uint16_t library);

/* In the child after fork(): the mutex may have been held by a thread that does not exist. */
void library_table_reset_after_fork(void);

#endif
