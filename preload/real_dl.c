/* real_dl.c: the real dlsym and RTLD_NEXT emulation (see real_dl.h). */
#include "preload/real_dl.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

typedef void *(*dlsym_fn)(void *, const char *);

static _Atomic(dlsym_fn) real_dlsym_ptr;

REAL_DL_UNINSTRUMENTED static dlsym_fn
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

REAL_DL_UNINSTRUMENTED void *
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

REAL_DL_UNINSTRUMENTED static struct link_map *
map_of(const void *addr)
{
    Dl_info info;
    struct link_map *map = NULL;
    if (dladdr1(addr, &info, (void **)&map, RTLD_DL_LINKMAP) == 0)
        return NULL;
    return map;
}

typedef void *(*dlopen_fn)(const char *, int);
typedef int (*dlclose_fn)(void *);

/* libc's own dlopen/dlclose, not a sanitizer's interceptors: those are not callable yet while a
 * sanitizer runtime initialises, and that is exactly when it asks for its RTLD_NEXT symbols. */
REAL_DL_UNINSTRUMENTED static void *
real_libc(const char *name)
{
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        void *p = dlvsym(RTLD_NEXT, name, versions[i]);
        if (p != NULL)
            return p;
    }
    return NULL;
}

REAL_DL_UNINSTRUMENTED static dlopen_fn
real_fn(const char *name)
{
    void *p = real_libc(name);
    dlopen_fn fn;
    memcpy(&fn, &p, sizeof fn);
    return fn;
}

REAL_DL_UNINSTRUMENTED static dlclose_fn
real_fn_close(void)
{
    void *p = real_libc("dlclose");
    dlclose_fn fn;
    memcpy(&fn, &p, sizeof fn);
    return fn;
}

static _Atomic(dlclose_fn) real_dlclose_ptr;

int
real_dl_close(void *handle)
{
    dlclose_fn fn = atomic_load_explicit(&real_dlclose_ptr, memory_order_acquire);
    if (fn == NULL) {
        /* Idempotent: two racing threads store the same pointer. */
        fn = real_fn_close();
        if (fn == NULL)
            return -1;
        atomic_store_explicit(&real_dlclose_ptr, fn, memory_order_release);
    }
    return fn(handle);
}

static const char self_anchor = 0;

/* True when `map` comes before libcuprof in load order. */
REAL_DL_UNINSTRUMENTED static bool
precedes_self(const struct link_map *map)
{
    const struct link_map *mine = map_of(&self_anchor);
    if (mine == NULL || map == mine)
        return false;
    for (const struct link_map *m = mine->l_prev; m != NULL; m = m->l_prev)
        if (m == map)
            return true;
    return false;
}

/* strcmp without the sanitizers' interceptor (not callable while they initialise). */
REAL_DL_UNINSTRUMENTED static bool
same_name(const char *a, const char *b)
{
    while (*a != '\0' && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

/* libcuprof's own exported definition of `name`, read from its dynamic symbol table (linked
 * with --hash-style=both, so DT_HASH gives the symbol count). No dlopen, no allocation. */
REAL_DL_UNINSTRUMENTED void *
real_dl_own_symbol(const char *name)
{
    const struct link_map *mine = map_of(&self_anchor);
    if (mine == NULL)
        return NULL;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const Elf32_Word *hash = NULL;
    for (const ElfW(Dyn) *d = mine->l_ld; d->d_tag != DT_NULL; d++) {
        /* ld.so has relocated these entries on this architecture; be safe if it has not. */
        ElfW(Addr) p = d->d_un.d_ptr < mine->l_addr ? d->d_un.d_ptr + mine->l_addr : d->d_un.d_ptr;
        if (d->d_tag == DT_SYMTAB)
            symtab = (const ElfW(Sym) *)p;
        else if (d->d_tag == DT_STRTAB)
            strtab = (const char *)p;
        else if (d->d_tag == DT_HASH)
            hash = (const Elf32_Word *)p;
    }
    if (symtab == NULL || strtab == NULL || hash == NULL)
        return NULL;
    for (Elf32_Word i = 0; i < hash[1]; i++) { /* hash[1] = nchain = number of symbols */
        const ElfW(Sym) *sym = &symtab[i];
        if (sym->st_shndx != SHN_UNDEF && ELF64_ST_BIND(sym->st_info) != STB_LOCAL &&
            same_name(strtab + sym->st_name, name))
            return (void *)(mine->l_addr + sym->st_value);
    }
    return NULL;
}

REAL_DL_UNINSTRUMENTED void *
real_dl_next(const void *caller, const char *name)
{
    struct link_map *self = map_of(caller);
    if (self == NULL)
        return real_dl_dlsym(RTLD_NEXT, name);
    /* Walk the objects after the caller's in load order; the first one that defines `name`
     * itself (not through its dependencies) is what glibc's RTLD_NEXT would find. */
    if (precedes_self(self)) {
        /* A caller loaded before us (a sanitizer runtime, another preload): what follows it is
         * us, then what follows us. Answered without dlopen, which allocates: sanitizer runtimes
         * ask while they initialise, when their malloc cannot run yet. */
        void *sym = real_dl_own_symbol(name);
        return sym != NULL ? sym : real_dl_dlsym(RTLD_NEXT, name);
    }
    dlopen_fn open_fn = real_fn("dlopen");
    dlclose_fn close_fn = real_fn_close();
    if (open_fn == NULL || close_fn == NULL)
        return NULL;
    for (struct link_map *m = self->l_next; m != NULL; m = m->l_next) {
        void *handle = open_fn(m->l_name[0] != '\0' ? m->l_name : NULL, RTLD_LAZY | RTLD_NOLOAD);
        if (handle == NULL)
            continue;
        void *sym = real_dl_dlsym(handle, name);
        close_fn(handle);
        if (sym != NULL && map_of(sym) == m)
            return sym;
    }
    return NULL;
}

REAL_DL_UNINSTRUMENTED bool
real_dl_is_self(const void *addr)
{
    static _Atomic(struct link_map *) mine;
    struct link_map *m = atomic_load_explicit(&mine, memory_order_relaxed);
    if (m == NULL) {
        m = map_of(&self_anchor);
        atomic_store_explicit(&mine, m, memory_order_relaxed);
    }
    return m != NULL && map_of(addr) == m;
}
