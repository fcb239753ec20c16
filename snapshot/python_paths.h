/* python_paths.h: where a file of a Python program lies, from its path alone: in the
 *   interpreter's own library directories (the standard library, site-packages, dist-packages)
 *   or outside them (the user's code), the package a library file belongs to ("numba" for
 *   .../site-packages/numba/cuda/api.py) and its module's dotted name ("numba.cuda.api").
 * Locking: none (pure functions over strings).
 * Hot path: yes (the library of a call with Python frames): no malloc, one pass over the path. */
#ifndef CUPROF_PYTHON_PATHS_H
#define CUPROF_PYTHON_PATHS_H

#include <stdbool.h>
#include <stddef.h>

enum python_path_kind {
    PYTHON_PATH_USER,     /* anything else: the program's own code */
    PYTHON_PATH_STDLIB,   /* .../lib/python3.N/..., .../lib/python3N.zip/..., <frozen NAME> */
    PYTHON_PATH_PACKAGES, /* .../site-packages/..., .../dist-packages/... */
};

struct python_path {
    enum python_path_kind kind;
    size_t rel;         /* library files: where the part under the directory starts in the path */
    size_t package_len; /* its first component ("numba", "six" for six.py, "_ctypes" for
                         * lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so) */
};

/* Classifies `path` (NULL reads as ""). A Python source file or a native module alike: the
 * rules look at folders only, so a package's own shared objects lie in the package too. */
void python_path_classify(const char *path, struct python_path *out);

/* True for the standard library and installed packages. */
static inline bool
python_path_is_library(const struct python_path *p)
{
    return p->kind != PYTHON_PATH_USER;
}

/* The dotted module name of a library file ("numba.cuda.api" for numba/cuda/api.py, "numba.cuda"
 * for numba/cuda/__init__.py, "runpy" for <frozen runpy>) in buf, cut to len; "" for a user
 * file. Returns buf. */
const char *python_path_module(const char *path, const struct python_path *p, char *buf,
                               size_t len);

#endif
