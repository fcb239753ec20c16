/* embed.c: a C program that embeds CPython (linked to libpython, as Blender or a game engine
 * would) and allocates device memory before the interpreter starts, from Python code it runs,
 * and after the interpreter is gone. The test expects Python frames on the middle allocation
 * only, with main() still below them. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cuda_runtime_api.h>
#include <stdio.h>

static const char program[] =
    "import ctypes\n"
    "rt = ctypes.CDLL('libcudart.so.13')\n"
    "def embedded_alloc(size):\n"
    "    p = ctypes.c_void_p()\n"
    "    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size)) == 0\n"
    "    return p\n"
    "kept = embedded_alloc(16 * 1024)\n";

static int
native_alloc(size_t size)
{
    void *p = NULL;
    cudaError_t rc = cudaMalloc(&p, size);
    if (rc != cudaSuccess) {
        fprintf(stderr, "embed: cudaMalloc(%zu) = %d\n", size, (int)rc);
        return 1;
    }
    return 0;
}

int
main(void)
{
    if (native_alloc(15 * 1024) != 0)
        return 1;
    Py_Initialize();
    int rc = PyRun_SimpleString(program);
    if (Py_FinalizeEx() != 0 || rc != 0) {
        fprintf(stderr, "embed: the Python part failed\n");
        return 1;
    }
    if (native_alloc(17 * 1024) != 0)
        return 1;
    printf("embed: 3 allocations\n");
    return 0;
}
