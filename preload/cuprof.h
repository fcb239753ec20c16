/* cuprof.h: the public C API of libcuprof.so (PyTorch's memory-management calls for C/C++).
 * Locking: every call is thread-safe.
 * Hot path: no. */
#ifndef CUPROF_H
#define CUPROF_H

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version string, e.g. "0.1.0". */
const char *cuprof_version(void);

#ifdef __cplusplus
}
#endif

#endif
