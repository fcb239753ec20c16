/* static_cudart.h: tells whether a program carries NVIDIA's CUDA runtime linked into it (nvcc's
 *   default, -cudart static), which cannot run on the simulated device, from its ELF file alone.
 * Locking: none (single-threaded command).
 * Hot path: no (once per `cuprof run --sim`). */
#ifndef CUPROF_CLI_STATIC_CUDART_H
#define CUPROF_CLI_STATIC_CUDART_H

#include <stdbool.h>
#include <stddef.h>

/* The rest of the line after "PROG ": the simulated driver (tests/sim/driver/sim_context.c)
 * prints the same text when such a runtime asks it for a private table. */
#define STATIC_CUDART_NOTE                                                                         \
    "carries NVIDIA's CUDA runtime (linked statically, nvcc's default), which needs a real "       \
    "CUDA driver: on the simulated device every CUDA call fails (\"operation not supported\"); "   \
    "rebuild it with `nvcc -cudart shared ...` to run it on the simulated runtime"

/* PROG as execvp would find it: PROG itself when it holds a '/', else the first executable
 * regular file named PROG in $PATH (glibc's default path when PATH is unset). */
bool static_cudart_resolve(const char *prog, char *out, size_t len);

/* True when PATH is an ELF file holding NVIDIA's runtime: it loads libcuda.so.1 and asks it for
 * cuGetExportTable itself (both names as data, not as dynamic imports), and has no libcudart
 * among its DT_NEEDED. Works on stripped files; a script or a non-ELF file is never flagged. */
bool static_cudart_linked(const char *path);

#endif
