/* dw_api.c: dlopen of libdw.so.1 and dlsym of every DW_API_FUNCTIONS entry (see dw_api.h). */
#include "snapshot/dw_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static _Atomic bool g_started;
static _Atomic(const char *) g_soname = "libdw.so.1";
static struct dw_api g_api;
static const struct dw_api *g_loaded; /* &g_api once every function resolved */

/* memcpy: ISO C has no object-to-function pointer conversion. */
static bool
resolve(void *lib, const char *name, void *slot, size_t size)
{
    void *sym = dlsym(lib, name);
    if (sym == NULL)
        return false;
    memcpy(slot, &sym, size);
    return true;
}

static void
dw_api_load(void)
{
    atomic_store(&g_started, true);
    /* RTLD_LOCAL: libdw's and libelf's symbols stay out of the program's global scope. */
    void *lib = dlopen(atomic_load(&g_soname), RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        return;
    bool ok = true;
#define DW_API_RESOLVE(name) ok = ok && resolve(lib, #name, &g_api.name, sizeof(g_api.name));
    DW_API_FUNCTIONS(DW_API_RESOLVE)
#undef DW_API_RESOLVE
    if (!ok) {
        dlclose(lib);
        memset(&g_api, 0, sizeof(g_api));
        return;
    }
    g_loaded = &g_api; /* kept loaded for the life of the process */
}

const struct dw_api *
dw_api_get(void)
{
    pthread_once(&g_once, dw_api_load);
    return g_loaded;
}

int
dw_api_set_soname(const char *soname)
{
    if (atomic_load(&g_started))
        return -1;
    atomic_store(&g_soname, soname);
    return 0;
}
