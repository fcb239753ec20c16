/* layers.c: other interposers, and binding imports to cuprof when one precedes it (see
 * layers.h). */
#include "preload/layers.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "preload/real_dl.h"
#include "preload/stderr_out.h"
#include "snapshot/elf_imports.h"
#include "snapshot/loader_gate.h"

typedef void *(*dlsym_fn)(void *, const char *);

static _Atomic(dlsym_fn) next_dlsym;

/* The first `dlsym` of the global scope that is not ours: a layer's when one is preloaded (before
 * or after us), else glibc's. Idempotent: racing threads store the same pointer. */
REAL_DL_UNINSTRUMENTED static dlsym_fn
find_next_dlsym(void)
{
    void *p = real_dl_dlsym(RTLD_DEFAULT, "dlsym");
    if (p == NULL || real_dl_is_self(p))
        p = real_dl_dlsym(RTLD_NEXT, "dlsym"); /* relative to libcuprof: what follows us */
    dlsym_fn fn = NULL;
    if (p != NULL && !real_dl_is_self(p))
        memcpy(&fn, &p, sizeof fn);
    return fn;
}

REAL_DL_UNINSTRUMENTED void *
layers_dlsym(void *handle, const char *name)
{
    dlsym_fn fn = atomic_load_explicit(&next_dlsym, memory_order_acquire);
    if (fn == NULL) {
        fn = find_next_dlsym();
        if (fn == NULL)
            return real_dl_dlsym(handle, name);
        atomic_store_explicit(&next_dlsym, fn, memory_order_release);
    }
    return fn(handle, name);
}

/* ---- Binding imports when a layer precedes cuprof. */

enum { MAX_OBJECTS = 1024 };

struct loaded_object {
    struct elf_image image;
    uintptr_t lo, hi; /* extent of its PT_LOAD segments */
    const char *name;
};

struct rebind_result {
    unsigned slots;
    int error;                /* first errno */
    const char *error_object; /* where it happened */
};

static pthread_mutex_t rebind_lock = PTHREAD_MUTEX_INITIALIZER;
/* protected by rebind_lock */
static struct loaded_object objects[MAX_OBJECTS];
static size_t object_count;
static ElfW(Addr) bound_bases[MAX_OBJECTS]; /* objects already processed */
static size_t bound_count;
static unsigned long long seen_adds;
static uintptr_t layer_lo, layer_hi; /* the layer ahead of us */
static const char *layer_name;
/* end protected by rebind_lock */
static const char layers_anchor; /* an address inside libcuprof */
static atomic_bool layer_ahead;
static atomic_bool started_logged; /* layers_log_start said its line */
static struct rebind_result start_result;
static size_t start_objects;

struct collect {
    unsigned long long adds;
    bool first_only;
};

/* dl_iterate_phdr callback: records every object, in load order. No dl* call in here (the
 * loader's write lock is held). */
static int
collect_object(struct dl_phdr_info *info, size_t size, void *data)
{
    struct collect *c = data;
    (void)size;
    c->adds = info->dlpi_adds;
    if (c->first_only)
        return 1;
    if (object_count == MAX_OBJECTS)
        return 1;
    struct loaded_object *o = &objects[object_count++];
    memset(o, 0, sizeof *o);
    elf_image_from_phdrs(info, &o->image);
    o->name = info->dlpi_name != NULL ? info->dlpi_name : "";
    o->lo = UINTPTR_MAX;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD) {
            if (start < o->lo)
                o->lo = start;
            if (start + ph->p_memsz > o->hi)
                o->hi = start + ph->p_memsz;
        }
    }
    return 0;
}

static bool
contains(const struct loaded_object *o, uintptr_t addr)
{
    return addr >= o->lo && addr < o->hi;
}

static const struct loaded_object *
object_at(uintptr_t addr)
{
    for (size_t i = 0; i < object_count; i++)
        if (contains(&objects[i], addr))
            return &objects[i];
    return NULL;
}

/* Objects whose imports stay as they are: the loader, the vDSO, libc, the driver itself (its own
 * internal references are the driver's business), sanitizer runtimes. */
static bool
never_rebound(const char *name)
{
    static const char *const skip[] = {"ld-linux", "linux-vdso", "libc.so", "libcuda.so",
                                       "libasan",  "libubsan",   "libtsan", "liblsan"};
    for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
        if (strstr(name, skip[i]) != NULL)
            return true;
    return false;
}

struct rebind_walk {
    const struct loaded_object *object;
    struct rebind_result *result;
};

/* Points o's imports of cuprof's names at cuprof where they are bound to the layer ahead, or not
 * bound yet (lazy binding: the slot still points into o's own PLT). */
static bool
rebind_import(void **slot, const char *name, void *context)
{
    struct rebind_walk *w = context;
    const struct loaded_object *o = w->object;
    struct rebind_result *r = w->result;
    if ((strncmp(name, "cu", 2) != 0 && strcmp(name, "dlsym") != 0) ||
        strncmp(name, "cuprof_", 7) == 0)
        return true;
    void *mine = real_dl_own_symbol(name);
    if (mine == NULL)
        return true;
    uintptr_t bound = (uintptr_t)__atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (bound == (uintptr_t)mine)
        return true;
    if (!contains(o, bound) && !(bound >= layer_lo && bound < layer_hi))
        return true; /* bound elsewhere on purpose (a version, DT_SYMBOLIC): left alone */
    int error = elf_imports_write(&o->image, slot, mine);
    if (error == 0) {
        r->slots++;
    } else if (r->error == 0) {
        r->error = error;
        r->error_object = o->name;
    }
    return true;
}

static bool
already_bound(ElfW(Addr) base)
{
    for (size_t i = 0; i < bound_count; i++)
        if (bound_bases[i] == base)
            return true;
    return false;
}

/* Collects the loaded objects and rebinds those not yet processed. Holds rebind_lock. */
static struct rebind_result
rebind_locked(size_t *objects_changed)
{
    struct rebind_result r = {0, 0, NULL};
    struct collect c = {0, false};
    object_count = 0;
    loader_gate_iterate(collect_object, &c);
    seen_adds = c.adds;
    const struct loaded_object *self = object_at((uintptr_t)&layers_anchor);
    *objects_changed = 0;
    bool after_self = false;
    for (size_t i = 0; i < object_count; i++) {
        const struct loaded_object *o = &objects[i];
        if (o == self) {
            after_self = true;
            continue;
        }
        /* The program itself, and what follows libcuprof; never the preloads ahead of us. */
        if ((i != 0 && !after_self) || never_rebound(o->name) || o->image.dynamic == NULL ||
            already_bound(o->image.base) || bound_count == MAX_OBJECTS)
            continue;
        bound_bases[bound_count++] = o->image.base;
        unsigned before = r.slots;
        struct rebind_walk walk = {o, &r};
        elf_imports_each(&o->image, rebind_import, &walk);
        if (r.slots != before)
            (*objects_changed)++;
    }
    return r;
}

static void layers_rebind_new_objects_slow(void);

/* One line saying why some imports still bypass cuprof; after the start-up line only. */
static void
say_failure(const struct rebind_result *r)
{
    if (r->error == 0 || !atomic_load(&started_logged))
        return;
    char line[600];
    int n = snprintf(line, sizeof line,
                     "cuprof: %s is preloaded before libcuprof.so, and %s's imports could not be "
                     "bound to cuprof (%s): calls made through it bypass cuprof; preload "
                     "libcuprof.so first\n",
                     layer_name, r->error_object[0] != '\0' ? r->error_object : "the program",
                     strerror(r->error));
    if (n > 0 && !stderr_out_write(line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1))
        return;
}

void
layers_start(void)
{
    void *first = real_dl_dlsym(RTLD_DEFAULT, "dlsym");
    if (first == NULL || real_dl_is_self(first))
        return;
    pthread_mutex_lock(&rebind_lock);
    struct collect c = {0, false};
    object_count = 0;
    loader_gate_iterate(collect_object, &c);
    const struct loaded_object *self = object_at((uintptr_t)&layers_anchor);
    const struct loaded_object *layer = object_at((uintptr_t)first);
    /* A layer is ahead when its dlsym comes from an object loaded before libcuprof (glibc's
     * own always follows the preloads). */
    bool ahead = self != NULL && layer != NULL && layer != &objects[0] && layer < self;
    if (ahead) {
        layer_lo = layer->lo;
        layer_hi = layer->hi;
        layer_name = layer->name;
        start_result = rebind_locked(&start_objects);
        atomic_store_explicit(&layer_ahead, true, memory_order_release);
    }
    pthread_mutex_unlock(&rebind_lock);
}

void
layers_log_start(void)
{
    if (!atomic_load_explicit(&layer_ahead, memory_order_acquire) ||
        atomic_exchange(&started_logged, true))
        return;
    char line[600];
    int n = snprintf(line, sizeof line,
                     "cuprof: %s is preloaded before libcuprof.so and hands out its own CUDA "
                     "entry points: %u imports in %zu objects now reach cuprof first, and cuprof's "
                     "own driver calls go on through that layer\n",
                     layer_name, start_result.slots, start_objects);
    if (n > 0 && !stderr_out_write(line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1))
        return;
    say_failure(&start_result);
}

/* Reached from every dlsym, sanitizer runtimes' start-up included: the first check must not be
 * instrumented (their shadow memory may not exist yet); a layer is never ahead by then. */
REAL_DL_UNINSTRUMENTED void
layers_rebind_new_objects(void)
{
    if (!atomic_load_explicit(&layer_ahead, memory_order_acquire))
        return;
    layers_rebind_new_objects_slow();
}

static void
layers_rebind_new_objects_slow(void)
{
    struct collect c = {0, true};
    loader_gate_iterate(collect_object, &c);
    pthread_mutex_lock(&rebind_lock);
    if (c.adds == seen_adds) {
        pthread_mutex_unlock(&rebind_lock);
        return;
    }
    size_t changed = 0;
    struct rebind_result r = rebind_locked(&changed);
    pthread_mutex_unlock(&rebind_lock);
    say_failure(&r);
}

bool
layers_ahead(void)
{
    return atomic_load_explicit(&layer_ahead, memory_order_acquire);
}
