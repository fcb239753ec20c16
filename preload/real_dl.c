/* real_dl.c: the real dlsym and RTLD_NEXT emulation (see real_dl.h). */
#include "preload/real_dl.h"

#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

typedef void *(*dlsym_fn)(void *, const char *);

static _Atomic(dlsym_fn) real_dlsym_ptr;

static dlsym_fn
resolve_real_dlsym(void)
{
    /* x86-64 first, then aarch64, then the 2.34 default version. */
    static const char *const versions[] = {"GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.34"};
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        void *p = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
        if (p != NULL) {
            dlsym_fn fn;
            /* POSIX guarantees dlsym results convert to function pointers; memcpy keeps ISO C. */
            memcpy(&fn, &p, sizeof fn);
            return fn;
        }
    }
    return NULL;
}

void *
real_dl_dlsym(void *handle, const char *name)
{
    dlsym_fn fn = atomic_load_explicit(&real_dlsym_ptr, memory_order_acquire);
    if (fn == NULL) {
        /* Idempotent: two racing threads store the same pointer. */
        fn = resolve_real_dlsym();
        if (fn == NULL)
            return NULL;
        atomic_store_explicit(&real_dlsym_ptr, fn, memory_order_release);
    }
    return fn(handle, name);
}

static struct link_map *
map_of(const void *addr)
{
    Dl_info info;
    struct link_map *map = NULL;
    if (dladdr1(addr, &info, (void **)&map, RTLD_DL_LINKMAP) == 0)
        return NULL;
    return map;
}

void *
real_dl_next(const void *caller, const char *name)
{
    struct link_map *self = map_of(caller);
    if (self == NULL)
        return real_dl_dlsym(RTLD_NEXT, name);
    /* Walk the objects after the caller's in load order; the first one that defines `name`
     * itself (not through its dependencies) is what glibc's RTLD_NEXT would find. */
    for (struct link_map *m = self->l_next; m != NULL; m = m->l_next) {
        void *handle = dlopen(m->l_name[0] != '\0' ? m->l_name : NULL, RTLD_LAZY | RTLD_NOLOAD);
        if (handle == NULL)
            continue;
        void *sym = real_dl_dlsym(handle, name);
        dlclose(handle);
        if (sym != NULL && map_of(sym) == m)
            return sym;
    }
    return NULL;
}

bool
real_dl_is_self(const void *addr)
{
    static const char anchor = 0;
    static _Atomic(struct link_map *) mine;
    struct link_map *m = atomic_load_explicit(&mine, memory_order_relaxed);
    if (m == NULL) {
        m = map_of(&anchor);
        atomic_store_explicit(&mine, m, memory_order_relaxed);
    }
    return m != NULL && map_of(addr) == m;
}
