/* cuGetProcAddress (4-argument ABI of 11.3-11.8) and cuGetProcAddress_v2: (base name, version,
 * per-thread flag) -> entry point, from the explicit table in sim_procaddr.def; and
 * cuGetExportTable, the private tables the simulator does not have. */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_config.h"
#include "sim_driver.h"

struct sim_proc {
    const char *name;
    int version;
    bool per_thread;
    void (*fn)(void); /* any entry point; returned through void * as POSIX dlsym does */
};

_Static_assert(sizeof(void (*)(void)) == sizeof(void *), "function and data pointers differ");

static const struct sim_proc procs[] = {
#define SIM_PROC_LEGACY(base, version, function) {#base, version, false, (void (*)(void))function},
#define SIM_PROC_PER_THREAD(base, version, function)                                               \
    {#base, version, true, (void (*)(void))function},
#include "sim_procaddr.def"
#undef SIM_PROC_LEGACY
#undef SIM_PROC_PER_THREAD
};

/* Newest row of `name` with version <= cudaVersion, in the given stream flavour. */
static const struct sim_proc *
newest(const char *name, int version, bool per_thread, bool *name_known)
{
    const struct sim_proc *best = NULL;
    for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
        if (strcmp(procs[i].name, name) != 0)
            continue;
        *name_known = true;
        if (procs[i].per_thread == per_thread && procs[i].version <= version &&
            (!best || procs[i].version > best->version))
            best = &procs[i];
    }
    return best;
}

/* The real driver answers an unknown symbol or a too-low version with CUDA_ERROR_NOT_FOUND
 * (*pfn = NULL) and says which in symbolStatus. */
static CUresult
lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
       CUdriverProcAddressQueryResult *symbolStatus)
{
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    if (cudaVersion > SIM_DRIVER_VERSION ||
        (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                               CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    bool known = false;
    const struct sim_proc *p = NULL;
    if (!sim_fail_proc_hidden(symbol)) {
        if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
            p = newest(symbol, cudaVersion, true, &known);
        if (!p)
            p = newest(symbol, cudaVersion, false, &known);
    }
    if (!p) {
        if (symbolStatus)
            *symbolStatus = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                  : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    memcpy(pfn, &p->fn, sizeof(*pfn));
    if (symbolStatus)
        *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

CUresult
cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                    CUdriverProcAddressQueryResult *symbolStatus)
{
    return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

CUresult
cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return lookup(symbol, pfn, cudaVersion, flags, NULL);
}

/* Said once per process: NVIDIA's runtime asks for several tables. `cuprof run` sets
 * SIMCUDA_EXPORT_TABLE_NOTE=0 when it has already said the same before running the program. */
static atomic_flag export_table_noted = ATOMIC_FLAG_INIT;

/* Who asked: NVIDIA's runtime linked into the program (nvcc's default), or NVIDIA's shared
 * libcudart loaded instead of the simulated one. The text after the program's name is the line
 * cli/static_cudart.h prints. */
static void
note_export_table(const void *caller)
{
    const char *quiet = getenv("SIMCUDA_EXPORT_TABLE_NOTE");
    if ((quiet != NULL && strcmp(quiet, "0") == 0) || atomic_flag_test_and_set(&export_table_noted))
        return;
    Dl_info info;
    struct link_map *from = NULL, *main_map = NULL;
    void *self = dlopen(NULL, RTLD_LAZY | RTLD_NOLOAD);
    if (self != NULL) {
        if (dlinfo(self, RTLD_DI_LINKMAP, &main_map) != 0)
            main_map = NULL;
        dlclose(self);
    }
    bool known = dladdr1(caller, &info, (void **)&from, RTLD_DL_LINKMAP) != 0 && from != NULL;
    if (!known || from == main_map)
        fprintf(stderr,
                "cuprof: sim: %s carries NVIDIA's CUDA runtime (linked statically, nvcc's "
                "default), which needs a real CUDA driver: on the simulated device every CUDA "
                "call fails (\"operation not supported\"); rebuild it with "
                "`nvcc -cudart shared ...` to run it on the simulated runtime\n",
                program_invocation_name);
    else
        fprintf(stderr,
                "cuprof: sim: %s is NVIDIA's CUDA runtime, which needs a real CUDA driver: on "
                "the simulated device every CUDA call fails (\"operation not supported\"); put "
                "the simulated libcudart.so.13 before it on LD_LIBRARY_PATH\n",
                info.dli_fname);
}

/* The simulator has none of the driver's private tables (cudart's cuGetExportTable UUIDs). */
CUresult
cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    if (!ppExportTable || !pExportTableId)
        return CUDA_ERROR_INVALID_VALUE;
    note_export_table(__builtin_return_address(0));
    *ppExportTable = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}
