/* rt_driver: the cudart 13 bootstrap. dlopen("libcuda.so.1", RTLD_NOW), dlsym the handle for
 * cuGetProcAddress_v2, probe it, swap to the pointer the driver returns for
 * "cuGetProcAddress"@12000, then resolve every entry with an explicit (name, version, flags).
 * Never links to the driver: no NEEDED libcuda, no undefined cu* symbol. */
#include "rt_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

struct rt_driver rt_drv;

static pthread_once_t rt_driver_once = PTHREAD_ONCE_INIT;
static CUresult rt_driver_status = CUDA_ERROR_NOT_INITIALIZED;

/* One entry of the table: where it goes and how it is asked for. */
struct rt_driver_entry {
    const char *name;
    int version;
    cuuint64_t flags;
    const char *sym;
    size_t offset;
};

static const struct rt_driver_entry rt_driver_entries[] = {
#define RT_DRV(field, name, version, flags, type, sym)                                             \
    {name, version, flags, sym, offsetof(struct rt_driver, field)},
#include "rt_driver.def"
#undef RT_DRV
};

/* Stores a resolved pointer into the field at the entry's offset (every field is a function
 * pointer; converting through void * keeps to POSIX dlsym's guarantee). */
static void
rt_driver_store(const struct rt_driver_entry *e, void *fn)
{
    memcpy((char *)&rt_drv + e->offset, &fn, sizeof fn);
}

/* Real cudart behaviour when cuGetProcAddress_v2 is missing (old or stub driver): dlsym every
 * versioned exported name. */
static void
rt_driver_fill_dlsym(void)
{
    size_t n = sizeof rt_driver_entries / sizeof rt_driver_entries[0];
    for (size_t i = 0; i < n; i++)
        rt_driver_store(&rt_driver_entries[i], dlsym(rt_drv.handle, rt_driver_entries[i].sym));
    rt_drv.via_get_proc = 0;
}

/* Fills the table through the stored cuGetProcAddress pointer; a lookup that fails leaves the slot
 * NULL (RT_CALL then answers CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER like cudart's stubs).
 * cuInit keeps the bootstrap's answer: NVIDIA's runtime asks each (name, version, flags) once. */
static void
rt_driver_fill_get_proc(void *init_fn)
{
    size_t n = sizeof rt_driver_entries / sizeof rt_driver_entries[0];
    for (size_t i = 0; i < n; i++) {
        const struct rt_driver_entry *e = &rt_driver_entries[i];
        void *fn = NULL;
        CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
        if (e->offset == offsetof(struct rt_driver, cuInit))
            fn = init_fn;
        else if (rt_drv.get_proc(e->name, &fn, e->version, e->flags, &st) != CUDA_SUCCESS ||
                 st != CU_GET_PROC_ADDRESS_SUCCESS)
            fn = NULL;
        rt_driver_store(e, fn);
    }
    rt_drv.via_get_proc = 1;
}

static void
rt_driver_load_once(void)
{
    rt_drv.handle = dlopen("libcuda.so.1", RTLD_NOW);
    if (rt_drv.handle == NULL) {
        rt_driver_status = CUDA_ERROR_SHARED_OBJECT_INIT_FAILED;
        return;
    }
    void *sym = dlsym(rt_drv.handle, "cuGetProcAddress_v2");
    if (sym == NULL) {
        rt_driver_fill_dlsym();
        rt_driver_status = CUDA_SUCCESS;
        return;
    }
    memcpy(&rt_drv.get_proc, &sym, sizeof sym);

    /* The probe: the stub libcuda answers "" with CUDA_ERROR_STUB_LIBRARY. */
    void *fn = NULL;
    if (rt_drv.get_proc("", &fn, 0, 0, NULL) == CUDA_ERROR_STUB_LIBRARY) {
        rt_driver_fill_dlsym();
        rt_driver_status = CUDA_ERROR_STUB_LIBRARY;
        return;
    }
    /* cudart asks for cuInit and for cuGetProcAddress itself at 11030 and 12000, then sends every
     * later lookup through the 12000 answer (an interposer may hand back its own wrapper here). */
    void *init_fn = NULL;
    if (rt_drv.get_proc("cuInit", &init_fn, 2000, 0, NULL) != CUDA_SUCCESS)
        init_fn = NULL;
    fn = NULL;
    (void)rt_drv.get_proc("cuGetProcAddress", &fn, 11030, 0, NULL);
    fn = NULL;
    if (rt_drv.get_proc("cuGetProcAddress", &fn, 12000, 0, NULL) == CUDA_SUCCESS && fn != NULL)
        memcpy(&rt_drv.get_proc, &fn, sizeof fn);
    rt_driver_fill_get_proc(init_fn);
    rt_driver_status = CUDA_SUCCESS;
}

CUresult
rt_driver_load(void)
{
    if (pthread_once(&rt_driver_once, rt_driver_load_once) != 0)
        return CUDA_ERROR_UNKNOWN;
    return rt_driver_status;
}
