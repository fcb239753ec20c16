/* library_hint.c: the line about libraries that cache device memory themselves (see
 * library_hint.h). */
#include "preload/library_hint.h"

#include <string.h>

#include "preload/config.h"
#include "preload/runtime.h"

_Atomic uint64_t library_hint_seen[LIBRARY_TABLE_MAX / 64];
static atomic_bool hint_given;

/* Object names (their start: versions follow) and Python package folders, with the allocator. */
static const struct {
    const char *name;
    bool prefix; /* an object's name starts with it; else a package folder's name equals it */
    const char *cacher;
} cachers[] = {
    {"libc10_cuda.so", true, "PyTorch's caching allocator"},
    {"libtorch_cuda.so", true, "PyTorch's caching allocator"},
    {"torch", false, "PyTorch's caching allocator"},
    {"xla_extension", true, "XLA's allocator (JAX)"},
    {"xla_cuda_plugin", true, "XLA's allocator (JAX)"},
    {"jaxlib", false, "XLA's allocator (JAX)"},
    {"jax_plugins", false, "XLA's allocator (JAX)"},
    {"libtensorflow_framework.so", true, "TensorFlow's allocator"},
    {"_pywrap_tensorflow_internal", true, "TensorFlow's allocator"},
    {"tensorflow", false, "TensorFlow's allocator"},
    {"cupy", false, "CuPy's memory pool"},
    {"cupy_backends", false, "CuPy's memory pool"},
};

const char *
library_hint_cacher(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *name = slash != NULL ? slash + 1 : path;
    for (size_t i = 0; i < sizeof cachers / sizeof cachers[0]; i++) {
        size_t n = strlen(cachers[i].name);
        if (cachers[i].prefix ? strncmp(name, cachers[i].name, n) == 0
                              : strcmp(name, cachers[i].name) == 0)
            return cachers[i].cacher;
    }
    return NULL;
}

void
library_hint_note_slow(uint16_t library)
{
    uint64_t bit = (uint64_t)1 << (library % 64);
    if (atomic_fetch_or(&library_hint_seen[library / 64], bit) & bit)
        return; /* another thread looked at it */
    if (runtime_config()->mode != CUPROF_MODE_CACHE || atomic_load(&hint_given))
        return;
    const char *path = library_table_path(library);
    const char *cacher = library_hint_cacher(path);
    if (cacher == NULL || atomic_exchange(&hint_given, true) || !runtime_log_info())
        return;
    const char *slash = strrchr(path, '/');
    runtime_log("cuprof: %s (%s) caches device memory itself, and in cache mode cuprof's cache "
                "sits under it: two caches hold more memory than one (the job can run out "
                "sooner) and CUDA IPC of its blocks is refused; CUPROF_MODE=trace records it as "
                "it runs without cuprof",
                slash != NULL ? slash + 1 : path, cacher);
}
