/* shim_init.c: libcuprof.so's start-up (placeholder until the preload shim lands: passes every
 * call through by exporting no CUDA symbol). */
#include "preload/cuprof.h"

__attribute__((visibility("default"))) const char *
cuprof_version(void)
{
    return CUPROF_VERSION;
}
