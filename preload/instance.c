/* instance.c: the first copy of libcuprof in the global scope serves, later copies stay inert
 * (see instance.h). */
#include "preload/instance.h"

#include <dlfcn.h>
#include <stdatomic.h>

#include "preload/real_dl.h"
#include "preload/runtime.h"

enum { INSTANCE_UNKNOWN, INSTANCE_IN_CHARGE, INSTANCE_INERT };

static atomic_int instance_state;
static atomic_bool instance_logged;

/* The cuprof_version the program would call: another copy's when one precedes this one. */
REAL_DL_UNINSTRUMENTED static void *
instance_first_version(void)
{
    return real_dl_dlsym(RTLD_DEFAULT, "cuprof_version");
}

REAL_DL_UNINSTRUMENTED bool
instance_inert(void)
{
    int state = atomic_load_explicit(&instance_state, memory_order_relaxed);
    if (state == INSTANCE_UNKNOWN) {
        void *first = instance_first_version();
        state = first != NULL && !real_dl_is_self(first) ? INSTANCE_INERT : INSTANCE_IN_CHARGE;
        atomic_store_explicit(&instance_state, state, memory_order_relaxed);
    }
    return state == INSTANCE_INERT;
}

REAL_DL_UNINSTRUMENTED bool
instance_preloaded(void)
{
    static atomic_int preloaded; /* 0 unknown, 1 yes, 2 no */
    int state = atomic_load_explicit(&preloaded, memory_order_relaxed);
    if (state == 0) {
        /* The main program's handle searches its own list: itself, LD_PRELOAD and its
         * dependencies, never a library dlopen'ed without RTLD_GLOBAL. */
        void *program = dlopen(NULL, RTLD_LAZY);
        void *found = program != NULL ? real_dl_dlsym(program, "cuprof_version") : NULL;
        state = found != NULL && real_dl_is_self(found) ? 1 : 2;
        if (program != NULL)
            dlclose(program);
        atomic_store_explicit(&preloaded, state, memory_order_relaxed);
    }
    return state == 1;
}

void
instance_log_inert(void)
{
    if (!instance_inert() || atomic_exchange(&instance_logged, true))
        return;
    Dl_info first, self;
    void *first_version = instance_first_version();
    if (first_version == NULL || dladdr(first_version, &first) == 0 || first.dli_fname == NULL)
        first.dli_fname = "?";
    if (dladdr(&instance_state, &self) == 0 || self.dli_fname == NULL)
        self.dli_fname = "?";
    runtime_log("cuprof: %s is loaded ahead of %s: that copy profiles this process, this one "
                "stays inert",
                first.dli_fname, self.dli_fname);
}
