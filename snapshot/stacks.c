/* stacks.c: the capture (libunwind's unw_backtrace, else cuprof's unwinder, else glibc's
 * backtrace; chosen once) and a grow-only intern table of instruction-pointer arrays.
 * Readers probe an open-addressing table without locks; writers take `insert_lock`, copy the
 * stack into an mmap'd arena, publish it in the id directory and then in the table. A grown
 * table replaces the old one atomically; the old one is never unmapped (a reader may be probing
 * it), which costs at most the size of the final table again. */
#define UNW_LOCAL_ONLY
#include "snapshot/stacks.h"

#include "snapshot/elf_imports.h"
#include "snapshot/loader_gate.h"
#include "snapshot/python_frames.h"
#include "snapshot/unloaded_modules.h"
#include "snapshot/unwind.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

struct stack_entry {
    uint64_t hash;
    uint32_t id;
    uint32_t count;
    uintptr_t ips[];
};

struct stack_table {
    size_t mask; /* slots - 1; slots is a power of two */
    _Atomic(struct stack_entry *) slots[];
};

#define DIR_PAGE_BITS       12u
#define DIR_PAGE            ((size_t)1 << DIR_PAGE_BITS)
#define DIR_TOP             ((size_t)4096)
#define STACKS_MAX_COUNT    (DIR_TOP * DIR_PAGE - 1) /* ids are 1..16M-1 */
#define TABLE_INITIAL_SLOTS ((size_t)4096)
#define ARENA_CHUNK         ((size_t)1 << 20)
#define SPARE_FRAMES        8u
#define SKIP_MAX            64u
#define OWN_FRAMES          1 /* unw_backtrace's first frame is its caller, stacks_capture */

_Atomic int stacks_mode_setting = STACKS_ALLOC;
static _Atomic unsigned g_depth = STACKS_DEFAULT_DEPTH;
static _Atomic bool g_python_only;
_Static_assert(PYTHON_FRAMES_MAX <= STACKS_MAX_DEPTH, "a Python-only stack must fit a stack");

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_insert_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(struct stack_table *) g_table;
static _Atomic uint32_t g_count;            /* ids 1..g_count are published */
static struct stack_entry **g_dir[DIR_TOP]; /* protected by g_insert_lock (writes) */
static char *g_arena_pos, *g_arena_end;     /* protected by g_insert_lock */
static size_t g_table_used;                 /* protected by g_insert_lock */

/* The executable range of the shared object holding this code, when it is not the main program
 * (libcuprof.so): innermost frames inside it are cuprof's, never the application's. */
static uintptr_t g_own_lo, g_own_hi;

void
stacks_configure(enum stack_mode mode, unsigned depth)
{
    if (mode >= STACKS_ALL && mode <= STACKS_NONE)
        atomic_store(&stacks_mode_setting, (int)mode);
    if (depth == 0)
        depth = STACKS_DEFAULT_DEPTH;
    atomic_store(&g_depth, depth > STACKS_MAX_DEPTH ? STACKS_MAX_DEPTH : depth);
}

void
stacks_set_python_only(bool python_only)
{
    atomic_store(&g_python_only, python_only);
}

unsigned
stacks_depth(void)
{
    return atomic_load_explicit(&g_depth, memory_order_relaxed);
}

static void *
map_zeroed(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static struct stack_table *
table_new(size_t slots)
{
    struct stack_table *t = map_zeroed(sizeof(*t) + slots * sizeof(t->slots[0]));
    if (t != NULL)
        t->mask = slots - 1;
    return t;
}

static int
own_range_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t self = (uintptr_t)data;
    uintptr_t lo, hi;
    unloaded_modules_code_range(info, &lo, &hi);
    if (self < lo || self >= hi)
        return 0;
    /* The first object dl_iterate_phdr reports is the main program: leave its frames alone. */
    if (info->dlpi_name != NULL && info->dlpi_name[0] != '\0') {
        g_own_lo = lo;
        g_own_hi = hi;
    }
    return 1;
}

/* libunwind is dlopen'ed RTLD_LOCAL, never linked: as a dependency of a preloaded library its
 * _Unwind_* exports would take over every C++ exception in the program (measured 35x slower
 * throws). Without it, cuprof's own unwinder does the same job at the same speed; glibc's
 * backtrace() (libgcc's unwinder, 20-50x slower) is the last resort. */
typedef int (*backtrace_fn)(void **, int);
static _Atomic(backtrace_fn) g_backtrace = backtrace;
/* Set in stacks_init; libunwind gives way to cuprof's unwinder once code is unloaded. */
static _Atomic int g_unwinder = STACKS_UNWINDER_LIBGCC;
static _Atomic int g_first_unwinder = STACKS_UNWINDER_LIBUNWIND;
static _Atomic bool g_chosen;

/* Whole walks go through loader_gate: libgcc's (dl_iterate_phdr at every frame where glibc is
 * older than 2.35), and libunwind's when its dl_iterate_phdr could not be rebound. */
static atomic_bool g_gate_walks;

struct rebind_count {
    struct elf_image image;
    unsigned slots;
    int error;
};

static bool
gate_import(void **slot, const char *name, void *context)
{
    struct rebind_count *c = context;
    if (strcmp(name, "dl_iterate_phdr") != 0)
        return true;
    loader_gate_iterate_fn gated = loader_gate_iterate;
    void *target;
    memcpy(&target, &gated, sizeof target);
    int error = elf_imports_write(&c->image, slot, target);
    if (error == 0)
        c->slots++;
    else
        c->error = error;
    return true;
}

/* libunwind asks dl_iterate_phdr about every address it has not seen: its calls go through
 * loader_gate, so that a fork waits for them (loader_gate.h). Before anyone else uses it: a lazy
 * binding resolved after this would put the loader's target back. */
static bool
gate_libunwind(void *lib)
{
    struct rebind_count c;
    memset(&c, 0, sizeof c);
    if (!elf_image_of_handle(lib, &c.image))
        return false;
    elf_imports_each(&c.image, gate_import, &c);
    return c.slots > 0 && c.error == 0;
}

static bool
load_libunwind(void)
{
    void *lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        return false;
    void *sym = dlsym(lib, "unw_backtrace");
    if (sym == NULL)
        return false;
    if (!gate_libunwind(lib))
        atomic_store(&g_gate_walks, true);
    backtrace_fn fn;
    memcpy(&fn, &sym, sizeof(fn));
    atomic_store(&g_backtrace, fn);
    return true;
}

/* cuprof's unwinder where allowed and it runs (its own slow path goes through loader_gate), else
 * libgcc's through glibc's backtrace (whole walks through the gate). */
static void
use_own_or_libgcc(bool own_allowed)
{
    bool own = own_allowed && unwind_init();
    atomic_store(&g_backtrace, own ? unwind_backtrace : unwind_libc_backtrace());
    atomic_store(&g_gate_walks, !own);
    atomic_store(&g_unwinder, own ? STACKS_UNWINDER_CUPROF : STACKS_UNWINDER_LIBGCC);
}

static void
load_unwinder(void)
{
    atomic_store(&g_chosen, true);
    int first = atomic_load(&g_first_unwinder);
    if (first <= STACKS_UNWINDER_LIBUNWIND && load_libunwind())
        atomic_store(&g_unwinder, STACKS_UNWINDER_LIBUNWIND);
    else
        use_own_or_libgcc(first <= STACKS_UNWINDER_CUPROF);
}

int
stacks_set_first_unwinder(enum stacks_unwinder first)
{
    if (atomic_load(&g_chosen))
        return -1;
    atomic_store(&g_first_unwinder, (int)first);
    return 0;
}

static void
stacks_init(void)
{
    load_unwinder();
    atomic_store(&g_table, table_new(TABLE_INITIAL_SLOTS));
    loader_gate_iterate(own_range_cb, (void *)(uintptr_t)&stacks_init);
}

enum stacks_unwinder
stacks_unwinder(void)
{
    pthread_once(&g_once, stacks_init);
    return (enum stacks_unwinder)atomic_load(&g_unwinder);
}

/* libunwind's unw_backtrace keeps a per-thread cache of frames by address that nothing flushes
 * (unw_flush_cache leaves it alone): after an unload, stacks through code mapped where the old
 * code was would follow the old code's frames. cuprof's unwinder can forget its rules, and
 * libgcc's looks every frame's FDE up anew. */
bool
stacks_forget_code(void)
{
    unwind_forget_rules();
    if (!atomic_load(&g_chosen) || atomic_load(&g_unwinder) != STACKS_UNWINDER_LIBUNWIND)
        return false;
    pthread_once(&g_once, stacks_init); /* the choice is made: wait until it is published */
    use_own_or_libgcc(true);
    return true;
}

/* Two independent multiply lanes halve the dependency chain of a 32-frame hash. */
static uint64_t
stack_hash(const uintptr_t *ips, size_t n)
{
    uint64_t a = 0x9e3779b97f4a7c15u ^ n, b = 0xc2b2ae3d27d4eb4fu;
    size_t i = 0;
    for (; i + 1 < n; i += 2) {
        a = (a ^ ips[i]) * 0xff51afd7ed558ccdu;
        b = (b ^ ips[i + 1]) * 0xc4ceb9fe1a85ec53u;
        a ^= a >> 29;
        b ^= b >> 31;
    }
    if (i < n)
        a = (a ^ ips[i]) * 0xff51afd7ed558ccdu;
    uint64_t h = (a ^ (b * 0x9e3779b97f4a7c15u));
    return h ^ (h >> 32);
}

static struct stack_entry *
table_find(struct stack_table *t, uint64_t h, const uintptr_t *ips, size_t n)
{
    for (size_t i = h & t->mask;; i = (i + 1) & t->mask) {
        struct stack_entry *e = atomic_load_explicit(&t->slots[i], memory_order_acquire);
        if (e == NULL)
            return NULL;
        if (e->hash == h && e->count == n && memcmp(e->ips, ips, n * sizeof(*ips)) == 0)
            return e;
    }
}

static void
table_put(struct stack_table *t, struct stack_entry *e)
{
    size_t i = e->hash & t->mask;
    while (atomic_load_explicit(&t->slots[i], memory_order_relaxed) != NULL)
        i = (i + 1) & t->mask;
    atomic_store_explicit(&t->slots[i], e, memory_order_release);
}

static struct stack_entry *
dir_get(uint32_t id)
{
    return g_dir[id >> DIR_PAGE_BITS][id & (DIR_PAGE - 1)];
}

/* Keeps the table at most half full. Caller holds g_insert_lock. */
static bool
table_make_room_locked(void)
{
    struct stack_table *t = atomic_load_explicit(&g_table, memory_order_relaxed);
    if (t == NULL)
        return false;
    if ((g_table_used + 1) * 2 <= t->mask + 1)
        return true;
    struct stack_table *bigger = table_new((t->mask + 1) * 2);
    if (bigger == NULL)
        return false;
    uint32_t n = atomic_load_explicit(&g_count, memory_order_relaxed);
    for (uint32_t id = 1; id <= n; id++)
        table_put(bigger, dir_get(id));
    atomic_store_explicit(&g_table, bigger, memory_order_release);
    return true;
}

static void *
arena_alloc_locked(size_t bytes)
{
    bytes = (bytes + 15) & ~(size_t)15;
    if ((size_t)(g_arena_end - g_arena_pos) < bytes) {
        char *chunk = map_zeroed(ARENA_CHUNK);
        if (chunk == NULL)
            return NULL;
        g_arena_pos = chunk;
        g_arena_end = chunk + ARENA_CHUNK;
    }
    void *p = g_arena_pos;
    g_arena_pos += bytes;
    return p;
}

static uint32_t
stacks_insert(uint64_t h, const uintptr_t *ips, size_t n)
{
    uint32_t id = 0;
    pthread_mutex_lock(&g_insert_lock);
    struct stack_table *t = atomic_load_explicit(&g_table, memory_order_relaxed);
    struct stack_entry *e = t == NULL ? NULL : table_find(t, h, ips, n);
    if (e != NULL) { /* another thread inserted it since our lock-free probe */
        id = e->id;
        goto out;
    }
    uint32_t next = atomic_load_explicit(&g_count, memory_order_relaxed) + 1;
    if (next > STACKS_MAX_COUNT || !table_make_room_locked())
        goto out;
    struct stack_entry ***page = &g_dir[next >> DIR_PAGE_BITS];
    if (*page == NULL && (*page = map_zeroed(DIR_PAGE * sizeof(**page))) == NULL)
        goto out;
    e = arena_alloc_locked(sizeof(*e) + n * sizeof(*ips));
    if (e == NULL)
        goto out;
    e->hash = h;
    e->id = next;
    e->count = (uint32_t)n;
    memcpy(e->ips, ips, n * sizeof(*ips));
    (*page)[next & (DIR_PAGE - 1)] = e;
    atomic_store_explicit(&g_count, next, memory_order_release);
    table_put(atomic_load_explicit(&g_table, memory_order_relaxed), e);
    g_table_used++;
    id = next;
out:
    pthread_mutex_unlock(&g_insert_lock);
    return id;
}

uint32_t
stacks_intern(const uintptr_t *ips, size_t count)
{
    if (count == 0)
        return 0;
    if (count > STACKS_MAX_DEPTH)
        count = STACKS_MAX_DEPTH;
    pthread_once(&g_once, stacks_init);
    uint64_t h = stack_hash(ips, count);
    struct stack_table *t = atomic_load_explicit(&g_table, memory_order_acquire);
    struct stack_entry *e = t == NULL ? NULL : table_find(t, h, ips, count);
    if (e != NULL)
        return e->id;
    return stacks_insert(h, ips, count);
}

/* Fills ips (room for STACKS_MAX_DEPTH) with at most `depth` frames of the calling thread,
 * outermost cuprof frame and everything inside it dropped (see stacks_capture). Always inlined
 * into its callers, so that `first` counts the same frames for each of them. */
static inline __attribute__((always_inline)) size_t
capture_ips(unsigned skip, unsigned depth, uintptr_t *ips)
{
    pthread_once(&g_once, stacks_init);
    if (skip > SKIP_MAX)
        skip = SKIP_MAX;
    if (depth > STACKS_MAX_DEPTH)
        depth = STACKS_MAX_DEPTH;
    void *buf[STACKS_MAX_DEPTH + SKIP_MAX + OWN_FRAMES + SPARE_FRAMES];
    unsigned first = skip + OWN_FRAMES;
    /* Inside libcuprof.so, a few spare frames so that dropping cuprof's own innermost frames
     * still leaves `depth`; linked into the program, there is nothing to drop. */
    unsigned spare = g_own_hi != 0 ? SPARE_FRAMES : 0;
    bool gate = atomic_load_explicit(&g_gate_walks, memory_order_relaxed);
    if (gate)
        loader_gate_enter();
    int n =
        atomic_load_explicit(&g_backtrace, memory_order_relaxed)(buf, (int)(first + depth + spare));
    if (gate)
        loader_gate_leave();
    if (n <= (int)first)
        return 0;
    /* Everything at or inside the outermost cuprof frame is cuprof's doing: a runtime wrapper of
     * ours that called the real cudaMalloc, which came back through our driver wrapper. */
    size_t i = first;
    for (size_t k = first; k < (size_t)n; k++)
        if ((uintptr_t)buf[k] >= g_own_lo && (uintptr_t)buf[k] < g_own_hi)
            i = k + 1;
    size_t count = (size_t)n - i;
    if (count > depth)
        count = depth;
    uintptr_t native[STACKS_MAX_DEPTH];
    for (size_t k = 0; k < count; k++)
        native[k] = (uintptr_t)buf[i + k];
    /* The thread's Python frames take the place of the eval loop's native frames; they come on
     * top of the native depth (they are what a Python user wants to see, and cheap to read). */
    struct python_capture py;
    python_frames_capture(&py);
    if (py.count > 0 && atomic_load_explicit(&g_python_only, memory_order_relaxed)) {
        memcpy(ips, py.tokens, py.count * sizeof(*ips));
        return py.count;
    }
    if (py.count > 0)
        return python_frames_merge(native, count, &py, ips, STACKS_MAX_DEPTH);
    memcpy(ips, native, count * sizeof(*ips));
    return count;
}

__attribute__((noinline)) uint32_t
stacks_capture(unsigned skip)
{
    if (stacks_mode() == STACKS_NONE)
        return 0;
    uintptr_t ips[STACKS_MAX_DEPTH];
    size_t count = capture_ips(skip, stacks_depth(), ips);
    uint32_t id = stacks_intern(ips, count);
    /* Keeps this frame on the stack (no tail call), so OWN_FRAMES stays exact. */
    __asm__ volatile("" ::: "memory");
    return id;
}

__attribute__((noinline)) size_t
stacks_backtrace(unsigned skip, uintptr_t *ips, size_t cap)
{
    uintptr_t all[STACKS_MAX_DEPTH];
    size_t count = capture_ips(skip, STACKS_MAX_DEPTH, all);
    if (count > cap)
        count = cap;
    if (count > 0)
        memcpy(ips, all, count * sizeof(*ips));
    /* As in stacks_capture: no tail call. */
    __asm__ volatile("" ::: "memory");
    return count;
}

__attribute__((noinline)) size_t
stacks_callers(unsigned skip, uintptr_t *ips, size_t depth)
{
    /* capture_ips may write more than depth: a Python thread's frames come on top of the native
     * ones (up to STACKS_MAX_DEPTH), and ips holds only depth. */
    uintptr_t all[STACKS_MAX_DEPTH];
    size_t count =
        capture_ips(skip, depth < STACKS_MAX_DEPTH ? (unsigned)depth : STACKS_MAX_DEPTH, all);
    if (count > depth)
        count = depth;
    if (count > 0)
        memcpy(ips, all, count * sizeof(*ips));
    /* As in stacks_capture: no tail call. */
    __asm__ volatile("" ::: "memory");
    return count;
}

bool
stacks_get(uint32_t id, const uintptr_t **ips, size_t *count)
{
    if (id == 0 || id > atomic_load_explicit(&g_count, memory_order_acquire))
        return false;
    const struct stack_entry *e = dir_get(id);
    *ips = e->ips;
    *count = e->count;
    return true;
}

size_t
stacks_count(void)
{
    return atomic_load_explicit(&g_count, memory_order_acquire);
}

static _Atomic double g_frame_ns;

static double
clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

void
stacks_warm_up(void)
{
    pthread_once(&g_once, stacks_init);
    void *buf[64];
    double best = 0;
    /* The first capture fills caches; the fastest of the others is what a capture costs. */
    for (int i = 0; i < 4; i++) {
        double t0 = clock_ns();
        int n = atomic_load_explicit(&g_backtrace, memory_order_relaxed)(buf, 64);
        double per_frame = n > 0 ? (clock_ns() - t0) / n : 0;
        if (i > 0 && (best == 0 || per_frame < best))
            best = per_frame;
    }
    atomic_store(&g_frame_ns, best);
}

double
stacks_frame_ns(void)
{
    return atomic_load(&g_frame_ns);
}

/* A thread of the parent may have been inside libunwind at the fork, holding one of its mutexes
 * (its rule cache's, taken at every frame it has not seen): the child inherits it locked, with
 * no thread to release it, and its first stack would wait forever. The child walks with cuprof's
 * unwinder, which takes no lock, or libgcc's (whose locks glibc resets at fork). */
void
stacks_reset_after_fork(void)
{
    pthread_mutex_init(&g_insert_lock, NULL);
    if (atomic_load(&g_first_unwinder) == STACKS_UNWINDER_LIBUNWIND)
        atomic_store(&g_first_unwinder, STACKS_UNWINDER_CUPROF);
    if (atomic_load(&g_chosen) && atomic_load(&g_unwinder) == STACKS_UNWINDER_LIBUNWIND)
        use_own_or_libgcc(true);
}
