/* python_frames.c: finds CPython's exported symbols with dlsym, reads the calling thread's frame
 * chain through per-version field offsets (the layouts table, checked against CPython's headers
 * by tests/unit/python), and interns (code object, instruction offset) pairs.
 *
 * Why reading is safe without the GIL: the frames read are the calling thread's own, and this
 * thread is inside a CUDA call, so none of them can finish or be freed while we read; each code
 * object is kept alive by its frame, each name by its code object. Nothing is written to any
 * Python object. PyCode_Addr2Line only reads the code object's line table. Every pointer read is
 * type-checked (code, str) before its fields are used; an unexpected type ends the walk. */
#include "snapshot/python_frames.h"
#include "snapshot/loader_gate.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/* Offsets of CPython 3.9 to 3.13 (x86-64 and aarch64 share them: LP64, natural alignment). */
static const struct python_layout layouts[] = {
    {.minor = 9,
     .tstate_frame = 24,
     .frame_previous = 24,
     .frame_code = 32,
     .frame_instr = 104,
     .owner_generator = -1,
     .owner_cstack = -1,
     .code_name = 112,
     .code_filename = 104,
     .code_firstlineno = 40,
     .str_length = 16,
     .str_state = 32,
     .str_ascii_size = 48,
     .str_compact_size = 72},
    {.minor = 10,
     .tstate_frame = 24,
     .frame_previous = 24,
     .frame_code = 32,
     .frame_instr = 96,
     .lasti_in_code_units = true,
     .owner_generator = -1,
     .owner_cstack = -1,
     .code_name = 112,
     .code_filename = 104,
     .code_firstlineno = 40,
     .str_length = 16,
     .str_state = 32,
     .str_ascii_size = 48,
     .str_compact_size = 72},
    {.minor = 11,
     .tstate_frame = 56,
     .via_cframe = true,
     .cframe_current = 8,
     .interpreter_frames = true,
     .frame_previous = 48,
     .frame_code = 32,
     .frame_instr = 56,
     .frame_owner = 69,
     .frame_is_entry = 68,
     .owner_generator = 1,
     .owner_cstack = -1,
     .code_name = 120,
     .code_qualname = 128,
     .code_filename = 112,
     .code_firstlineno = 72,
     .code_adaptive = 184,
     .code_firsttraceable = 168,
     .str_length = 16,
     .str_state = 32,
     .str_ascii_size = 48,
     .str_compact_size = 72},
    {.minor = 12,
     .tstate_frame = 56,
     .via_cframe = true,
     .cframe_current = 0,
     .interpreter_frames = true,
     .frame_previous = 8,
     .frame_code = 0,
     .frame_instr = 56,
     .frame_owner = 70,
     .owner_generator = 1,
     .owner_cstack = 3,
     .code_name = 120,
     .code_qualname = 128,
     .code_filename = 112,
     .code_firstlineno = 68,
     .code_adaptive = 192,
     .code_firsttraceable = 176,
     .str_length = 16,
     .str_state = 32,
     .str_ascii_size = 40,
     .str_compact_size = 56},
    {.minor = 13,
     .tstate_frame = 72,
     .interpreter_frames = true,
     .frame_previous = 8,
     .frame_code = 0,
     .frame_instr = 56,
     .frame_owner = 70,
     .owner_generator = 1,
     .owner_cstack = 3,
     .code_name = 120,
     .code_qualname = 128,
     .code_filename = 112,
     .code_firstlineno = 68,
     .code_adaptive = 200,
     .code_firsttraceable = 184,
     .str_length = 16,
     .str_state = 32,
     .str_ascii_size = 40,
     .str_compact_size = 56},
};

/* PyASCIIObject.state bits, the same in 3.9 to 3.13. */
#define STR_KIND(state)   (((state) >> 2) & 7u)
#define STR_COMPACT       0x20u
#define STR_ASCII         0x40u
#define OBJECT_TYPE       8 /* offsetof(PyObject, ob_type) in a build with the GIL */
#define NAME_MAX_BYTES    512u
#define WALK_MAX_FRAMES   4096u /* a longer chain is cut: a cycle can only come from a bad read */
#define RECHECK_SECONDS   1
#define TABLE_FIRST_SLOTS ((size_t)1024)
#define ARENA_CHUNK       ((size_t)1 << 20)
#define MAX_FRAMES        ((size_t)1 << 20) /* distinct (code, instruction) pairs kept */

/* The interpreter's entry points and types, found once. Published by g_state = STATE_READY. */
struct interpreter {
    const struct python_layout *layout;
    int (*is_initialized)(void);
    int (*is_finalizing)(void); /* NULL where not exported */
    void *(*this_thread_state)(void);
    int (*gil_check)(void);
    int (*addr2line)(void *code, int offset);
    const void *code_type, *str_type, *frame_type; /* frame_type: 3.9/3.10 only */
    uintptr_t eval_lo, eval_hi; /* the eval loop's code, when its size is known */
    char name[48];              /* "CPython 3.11.7" */
};

enum state { STATE_UNKNOWN, STATE_ABSENT, STATE_READY, STATE_UNSUPPORTED };

/* One interned thing: a code object (key: code, name, qualname, filename, first line) or a frame
 * (key: its code entry, instruction offset). */
struct pf_entry {
    uint64_t hash;
    uintptr_t key[5];
    const char *name, *filename;
    int line;
    uint32_t id; /* frames only: token = TOKEN_BIT | id */
};

struct pf_table {
    size_t mask;
    _Atomic(struct pf_entry *) slots[];
};

struct pf_index {
    _Atomic(struct pf_table *) table;
    size_t used; /* protected by g_insert_lock */
};

static _Atomic int g_state = STATE_UNKNOWN;
static _Atomic bool g_enabled = true;
static struct interpreter g_interp;
static char g_reason[128];
static pthread_mutex_t g_discover_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic long g_next_check; /* CLOCK_MONOTONIC_COARSE seconds */
static unsigned long long g_loads_seen;
static _Atomic uint64_t g_gil_held, g_gil_released;

static pthread_mutex_t g_insert_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pf_index g_codes, g_frames;
static _Atomic(struct pf_entry *) *g_by_id; /* mmap'd, MAX_FRAMES slots */
static _Atomic uint32_t g_frame_count;
static char *g_arena_pos, *g_arena_end; /* protected by g_insert_lock */

void
python_frames_enable(bool enabled)
{
    atomic_store(&g_enabled, enabled);
}

const struct python_layout *
python_frames_layout(int minor)
{
    for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
        if (layouts[i].minor == minor)
            return &layouts[i];
    return NULL;
}

/* ---- Discovery ---------------------------------------------------------------------------- */

static void *
find(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

/* memcpy: ISO C has no object-to-function pointer conversion. */
#define FIND_FN(dst, name)                                                                         \
    do {                                                                                           \
        void *sym_ = find(name);                                                                   \
        memcpy(&(dst), &sym_, sizeof(dst));                                                        \
    } while (0)

static int
loads_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs))
        *(unsigned long long *)data = info->dlpi_adds;
    return 1;
}

static unsigned long long
objects_loaded(void)
{
    unsigned long long adds = 0;
    loader_gate_iterate(loads_cb, &adds);
    return adds;
}

static void
eval_loop_range(struct interpreter *in)
{
    void *eval = find("_PyEval_EvalFrameDefault");
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (eval == NULL || dladdr1(eval, &info, (void **)&sym, RTLD_DL_SYMENT) == 0 || sym == NULL ||
        sym->st_size == 0)
        return;
    in->eval_lo = (uintptr_t)eval;
    in->eval_hi = (uintptr_t)eval + sym->st_size;
}

/* "3.11.7 (main, ...)" -> minor 11 and "CPython 3.11.7". */
static int
parse_version(struct interpreter *in)
{
    const char *(*get_version)(void);
    FIND_FN(get_version, "Py_GetVersion");
    const unsigned long *hex = find("Py_Version"); /* 3.11+: no call needed */
    char text[32] = "";
    int major = 0, minor = 0;
    if (hex != NULL) {
        major = (int)(*hex >> 24);
        minor = (int)((*hex >> 16) & 0xff);
        snprintf(text, sizeof(text), "%d.%d.%d", major, minor, (int)((*hex >> 8) & 0xff));
    } else if (get_version != NULL) {
        const char *v = get_version();
        if (sscanf(v, "%d.%d", &major, &minor) != 2)
            return -1;
        size_t n = strcspn(v, " ");
        snprintf(text, sizeof(text), "%.*s", (int)(n < 20 ? n : 20), v);
    } else {
        return -1;
    }
    snprintf(in->name, sizeof(in->name), "CPython %s", text);
    return major == 3 ? minor : -1;
}

static enum state
unsupported(const char *why)
{
    snprintf(g_reason, sizeof(g_reason), "native frames only: %s", why);
    return STATE_UNSUPPORTED;
}

/* Looks for an interpreter among the loaded objects. Caller holds g_discover_lock. */
static enum state
discover_locked(void)
{
    struct interpreter in = {0};
    FIND_FN(in.is_initialized, "Py_IsInitialized");
    FIND_FN(in.this_thread_state, "PyGILState_GetThisThreadState");
    if (in.is_initialized == NULL || in.this_thread_state == NULL)
        return STATE_ABSENT;
    int minor = parse_version(&in);
    in.layout = python_frames_layout(minor);
    g_interp = in; /* the name, for the status even when unsupported */
    if (sizeof(void *) != 8)
        return unsupported("a 32-bit process");
    if (in.layout == NULL)
        return unsupported("this CPython version is not covered (3.9 to 3.13 are)");
    FIND_FN(in.is_finalizing, minor >= 13 ? "Py_IsFinalizing" : "_Py_IsFinalizing");
    FIND_FN(in.gil_check, "PyGILState_Check");
    FIND_FN(in.addr2line, "PyCode_Addr2Line");
    in.code_type = find("PyCode_Type");
    in.str_type = find("PyUnicode_Type");
    in.frame_type = in.layout->interpreter_frames ? NULL : find("PyFrame_Type");
    const void *type_type = find("PyType_Type");
    if (in.gil_check == NULL || in.addr2line == NULL || in.code_type == NULL ||
        in.str_type == NULL || type_type == NULL ||
        (!in.layout->interpreter_frames && in.frame_type == NULL))
        return unsupported("the interpreter does not export the symbols cuprof reads");
    /* A free-threaded build moves ob_type: then nothing here would be read right. */
    if (*(const void *const *)((const char *)in.code_type + OBJECT_TYPE) != type_type)
        return unsupported("the interpreter's object layout is not the default build's");
    eval_loop_range(&in);
    g_interp = in;
    return STATE_READY;
}

static long
coarse_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (long)ts.tv_sec;
}

/* Looks again when an object was loaded since the last look (an interpreter dlopen'ed by an
 * embedding program), at most once a second unless `now`. Returns the state. */
static int
look_again(bool now)
{
    int s = atomic_load_explicit(&g_state, memory_order_acquire);
    long t = coarse_seconds();
    if (s != STATE_UNKNOWN && s != STATE_ABSENT)
        return s;
    if (!now && s == STATE_ABSENT && t < atomic_load_explicit(&g_next_check, memory_order_relaxed))
        return s;
    if (now)
        pthread_mutex_lock(&g_discover_lock);
    else if (pthread_mutex_trylock(&g_discover_lock) != 0)
        return s; /* another thread is looking: this capture goes without */
    s = atomic_load_explicit(&g_state, memory_order_relaxed);
    if (s == STATE_UNKNOWN || s == STATE_ABSENT) {
        unsigned long long loads = objects_loaded();
        if (s == STATE_UNKNOWN || loads != g_loads_seen) {
            g_loads_seen = loads;
            s = discover_locked();
            atomic_store_explicit(&g_state, s, memory_order_release);
        }
        atomic_store_explicit(&g_next_check, t + RECHECK_SECONDS, memory_order_relaxed);
    }
    pthread_mutex_unlock(&g_discover_lock);
    return s;
}

/* The interpreter whose frames to read, or NULL. */
static const struct interpreter *
interpreter_get(void)
{
    if (!atomic_load_explicit(&g_enabled, memory_order_relaxed))
        return NULL;
    return look_again(false) == STATE_READY ? &g_interp : NULL;
}

/* ---- Interning ---------------------------------------------------------------------------- */

static void *
map_zeroed(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void *
arena_alloc_locked(size_t bytes)
{
    bytes = (bytes + 15) & ~(size_t)15;
    if (bytes > ARENA_CHUNK)
        return NULL;
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

static uint64_t
key_hash(const uintptr_t key[5])
{
    uint64_t h = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < 5; i++) {
        h = (h ^ key[i]) * 0xff51afd7ed558ccdu;
        h ^= h >> 31;
    }
    return h;
}

static struct pf_entry *
index_find(struct pf_index *ix, uint64_t h, const uintptr_t key[5])
{
    struct pf_table *t = atomic_load_explicit(&ix->table, memory_order_acquire);
    if (t == NULL)
        return NULL;
    for (size_t i = h & t->mask;; i = (i + 1) & t->mask) {
        struct pf_entry *e = atomic_load_explicit(&t->slots[i], memory_order_acquire);
        if (e == NULL)
            return NULL;
        if (e->hash == h && memcmp(e->key, key, sizeof(e->key)) == 0)
            return e;
    }
}

static void
table_put(struct pf_table *t, struct pf_entry *e)
{
    size_t i = e->hash & t->mask;
    while (atomic_load_explicit(&t->slots[i], memory_order_relaxed) != NULL)
        i = (i + 1) & t->mask;
    atomic_store_explicit(&t->slots[i], e, memory_order_release);
}

/* Keeps the table at most half full; the old table is never unmapped (a reader may be in it). */
static bool
index_make_room_locked(struct pf_index *ix)
{
    struct pf_table *t = atomic_load_explicit(&ix->table, memory_order_relaxed);
    size_t slots = t == NULL ? TABLE_FIRST_SLOTS : t->mask + 1;
    if (t != NULL && (ix->used + 1) * 2 <= slots)
        return true;
    if (t != NULL)
        slots *= 2;
    struct pf_table *bigger = map_zeroed(sizeof(*bigger) + slots * sizeof(bigger->slots[0]));
    if (bigger == NULL)
        return false;
    bigger->mask = slots - 1;
    for (size_t i = 0; t != NULL && i <= t->mask; i++) {
        struct pf_entry *e = atomic_load_explicit(&t->slots[i], memory_order_relaxed);
        if (e != NULL)
            table_put(bigger, e);
    }
    atomic_store_explicit(&ix->table, bigger, memory_order_release);
    return true;
}

static void
index_add_locked(struct pf_index *ix, struct pf_entry *e)
{
    table_put(atomic_load_explicit(&ix->table, memory_order_relaxed), e);
    ix->used++;
}

static const void *
type_of(const char *object)
{
    return *(const void *const *)(object + OBJECT_TYPE);
}

/* Appends code point c as UTF-8; returns the new length, or `n` when it would not fit. */
static size_t
put_utf8(char *out, size_t n, size_t cap, uint32_t c)
{
    if (c < 0x80 && n + 1 <= cap) {
        out[n] = (char)c;
        return n + 1;
    }
    if (c < 0x800 && n + 2 <= cap) {
        out[n] = (char)(0xc0 | (c >> 6));
        out[n + 1] = (char)(0x80 | (c & 0x3f));
        return n + 2;
    }
    if (c >= 0x800 && c < 0x10000 && n + 3 <= cap) {
        out[n] = (char)(0xe0 | (c >> 12));
        out[n + 1] = (char)(0x80 | ((c >> 6) & 0x3f));
        out[n + 2] = (char)(0x80 | (c & 0x3f));
        return n + 3;
    }
    if (c >= 0x10000 && c < 0x110000 && n + 4 <= cap) {
        out[n] = (char)(0xf0 | (c >> 18));
        out[n + 1] = (char)(0x80 | ((c >> 12) & 0x3f));
        out[n + 2] = (char)(0x80 | ((c >> 6) & 0x3f));
        out[n + 3] = (char)(0x80 | (c & 0x3f));
        return n + 4;
    }
    return n;
}

/* A copy of a str object's text in the arena ("?" for anything but a compact str). Caller holds
 * g_insert_lock. NULL only when out of memory. */
static const char *
copy_str_locked(const struct interpreter *in, const char *str)
{
    const struct python_layout *L = in->layout;
    char text[NAME_MAX_BYTES];
    size_t n = 0;
    if (str != NULL && type_of(str) == in->str_type) {
        unsigned state = *(const unsigned *)(str + L->str_state);
        size_t length = (size_t) * (const intptr_t *)(str + L->str_length);
        unsigned kind = STR_KIND(state);
        const char *data =
            str + ((state & STR_ASCII) != 0 ? L->str_ascii_size : L->str_compact_size);
        if ((state & STR_COMPACT) == 0 || (kind != 1 && kind != 2 && kind != 4))
            length = 0;
        for (size_t i = 0; i < length; i++) {
            uint32_t c = kind == 1   ? ((const uint8_t *)data)[i]
                         : kind == 2 ? ((const uint16_t *)data)[i]
                                     : ((const uint32_t *)data)[i];
            size_t grown = put_utf8(text, n, sizeof(text) - 1, c);
            if (grown == n)
                break; /* cut at the limit, on a character boundary */
            n = grown;
        }
    }
    if (n == 0)
        text[n++] = '?';
    char *copy = arena_alloc_locked(n + 1);
    if (copy != NULL) {
        memcpy(copy, text, n);
        copy[n] = '\0';
    }
    return copy;
}

static const char *
code_field(const char *code, size_t offset)
{
    return offset == 0 ? NULL : *(const char *const *)(code + offset);
}

/* The interned entry of a code object, made on first sight. The key holds the name and file
 * objects too, so a code object freed and replaced at the same address is a new entry. */
static struct pf_entry *
code_entry(const struct interpreter *in, const char *code)
{
    const struct python_layout *L = in->layout;
    const char *name = code_field(code, L->code_name);
    const char *qualname = code_field(code, L->code_qualname);
    const char *filename = code_field(code, L->code_filename);
    int firstlineno = *(const int *)(code + L->code_firstlineno);
    uintptr_t key[5] = {(uintptr_t)code, (uintptr_t)name, (uintptr_t)qualname, (uintptr_t)filename,
                        (uintptr_t)(unsigned)firstlineno};
    uint64_t h = key_hash(key);
    struct pf_entry *e = index_find(&g_codes, h, key);
    if (e != NULL)
        return e;
    pthread_mutex_lock(&g_insert_lock);
    e = index_find(&g_codes, h, key);
    if (e == NULL && index_make_room_locked(&g_codes) &&
        (e = arena_alloc_locked(sizeof(*e))) != NULL) {
        e->hash = h;
        memcpy(e->key, key, sizeof(key));
        e->name = copy_str_locked(in, qualname != NULL ? qualname : name);
        e->filename = copy_str_locked(in, filename);
        e->line = firstlineno;
        if (e->name != NULL && e->filename != NULL)
            index_add_locked(&g_codes, e);
        else
            e = NULL;
    }
    pthread_mutex_unlock(&g_insert_lock);
    return e;
}

/* The token of (code, instruction byte offset), or 0 when the table is full. */
static uintptr_t
frame_token(const struct interpreter *in, const char *code, int offset)
{
    struct pf_entry *c = code_entry(in, code);
    if (c == NULL)
        return 0;
    uintptr_t key[5] = {(uintptr_t)c, (uintptr_t)(unsigned)offset, 0, 0, 0};
    uint64_t h = key_hash(key);
    struct pf_entry *e = index_find(&g_frames, h, key);
    if (e != NULL)
        return PYTHON_FRAME_TOKEN_BIT | e->id;
    int line = offset < 0 ? c->line : in->addr2line((void *)code, offset);
    uintptr_t token = 0;
    pthread_mutex_lock(&g_insert_lock);
    e = index_find(&g_frames, h, key);
    uint32_t id = atomic_load_explicit(&g_frame_count, memory_order_relaxed) + 1;
    if (e != NULL) {
        token = PYTHON_FRAME_TOKEN_BIT | e->id;
    } else if (id < MAX_FRAMES && index_make_room_locked(&g_frames) &&
               (g_by_id != NULL || (g_by_id = map_zeroed(MAX_FRAMES * sizeof(*g_by_id))) != NULL) &&
               (e = arena_alloc_locked(sizeof(*e))) != NULL) {
        e->hash = h;
        memcpy(e->key, key, sizeof(key));
        e->name = c->name;
        e->filename = c->filename;
        e->line = line > 0 ? line : c->line;
        e->id = id;
        atomic_store_explicit(&g_by_id[id], e, memory_order_release);
        atomic_store_explicit(&g_frame_count, id, memory_order_release);
        index_add_locked(&g_frames, e);
        token = PYTHON_FRAME_TOKEN_BIT | id;
    }
    pthread_mutex_unlock(&g_insert_lock);
    return token;
}

bool
python_frames_get(uintptr_t token, const char **name, const char **filename, int *line)
{
    uintptr_t id = token & ~PYTHON_FRAME_TOKEN_BIT;
    if (!python_frames_is_token(token) || id == 0 ||
        id > atomic_load_explicit(&g_frame_count, memory_order_acquire))
        return false;
    const struct pf_entry *e = atomic_load_explicit(&g_by_id[id], memory_order_acquire);
    if (e == NULL)
        return false;
    *name = e->name;
    *filename = e->filename;
    *line = e->line;
    return true;
}

/* ---- Capture ------------------------------------------------------------------------------ */

static const char *
read_ptr(const char *base, size_t offset)
{
    return *(const char *const *)(base + offset);
}

static void
push(struct python_capture *out, uintptr_t token, bool group_end)
{
    if (token == 0 || out->count >= PYTHON_FRAMES_MAX)
        return;
    out->tokens[out->count] = token;
    out->group_end[out->count] = group_end;
    out->count++;
}

static void
end_group(struct python_capture *out)
{
    if (out->count > 0)
        out->group_end[out->count - 1] = true;
}

/* 3.9/3.10: a chain of frame objects, each run by its own call of the eval loop. */
static void
walk_frame_objects(const struct interpreter *in, const char *frame, struct python_capture *out)
{
    const struct python_layout *L = in->layout;
    for (unsigned steps = 0; frame != NULL && steps < WALK_MAX_FRAMES; steps++) {
        if (type_of(frame) != in->frame_type)
            return;
        const char *code = read_ptr(frame, L->frame_code);
        if (code == NULL || type_of(code) != in->code_type)
            return;
        int lasti = *(const int *)(frame + L->frame_instr);
        int offset = lasti < 0 ? -1 : (L->lasti_in_code_units ? lasti * 2 : lasti);
        push(out, frame_token(in, code, offset), true);
        frame = read_ptr(frame, L->frame_previous);
    }
}

/* 3.11+: interpreter frames; one eval-loop call runs several of them. 3.11 flags the first
 * frame of each call (is_entry); 3.12+ puts a frame owned by the C stack below it. */
static void
walk_interpreter_frames(const struct interpreter *in, const char *frame, struct python_capture *out)
{
    const struct python_layout *L = in->layout;
    for (unsigned steps = 0; frame != NULL && steps < WALK_MAX_FRAMES;
         steps++, frame = read_ptr(frame, L->frame_previous)) {
        int owner = *(const signed char *)(frame + L->frame_owner);
        if (owner == L->owner_cstack) {
            end_group(out);
            continue;
        }
        const char *code = read_ptr(frame, L->frame_code);
        if (code == NULL || type_of(code) != in->code_type)
            continue; /* 3.13: a frame whose executable is not code */
        const char *instr = read_ptr(frame, L->frame_instr);
        intptr_t offset = instr - (code + L->code_adaptive);
        int first_traceable = *(const int *)(code + L->code_firsttraceable);
        /* CPython's _PyFrame_IsIncomplete: a frame still being set up has run nothing. */
        if (owner != L->owner_generator && offset < (intptr_t)first_traceable * 2)
            continue;
        bool entry = L->frame_is_entry != 0 && *(const bool *)(frame + L->frame_is_entry);
        push(out, frame_token(in, code, offset > INT32_MAX ? -1 : (int)offset), entry);
    }
}

void
python_frames_capture(struct python_capture *out)
{
    out->count = 0;
    const struct interpreter *in = interpreter_get();
    if (in == NULL || !in->is_initialized() || (in->is_finalizing && in->is_finalizing()))
        return;
    const char *tstate = in->this_thread_state();
    if (tstate == NULL)
        return;
    const struct python_layout *L = in->layout;
    const char *frame = read_ptr(tstate, L->tstate_frame);
    if (L->via_cframe && frame != NULL)
        frame = read_ptr(frame, L->cframe_current);
    if (frame == NULL)
        return;
    atomic_fetch_add_explicit(in->gil_check() ? &g_gil_held : &g_gil_released, 1,
                              memory_order_relaxed);
    if (L->interpreter_frames)
        walk_interpreter_frames(in, frame, out);
    else
        walk_frame_objects(in, frame, out);
    end_group(out);
}

bool
python_frames_is_eval_loop(uintptr_t ip)
{
    if (atomic_load_explicit(&g_state, memory_order_acquire) != STATE_READY)
        return false;
    /* A return address lies after its call: (lo, hi]. */
    return ip > g_interp.eval_lo && ip <= g_interp.eval_hi;
}

size_t
python_frames_merge(const uintptr_t *native, size_t native_count, const struct python_capture *py,
                    uintptr_t *out, size_t cap)
{
    size_t n = 0, p = 0;
    for (size_t i = 0; i < native_count && n < cap; i++) {
        if (p < py->count && python_frames_is_eval_loop(native[i])) {
            bool last;
            do {
                last = py->group_end[p];
                if (n < cap)
                    out[n++] = py->tokens[p];
                p++;
            } while (!last && p < py->count);
            continue;
        }
        out[n++] = native[i];
    }
    for (; p < py->count && n < cap; p++)
        out[n++] = py->tokens[p];
    return n;
}

void
python_frames_status(struct python_frames_status *out)
{
    int s = look_again(true);
    *out = (struct python_frames_status){0};
    out->captures_gil_held = atomic_load(&g_gil_held);
    out->captures_gil_released = atomic_load(&g_gil_released);
    if (s == STATE_READY || s == STATE_UNSUPPORTED)
        out->interpreter = g_interp.name[0] != '\0' ? g_interp.name : "CPython";
    if (s == STATE_READY)
        out->frames =
            atomic_load(&g_enabled) ? "captured" : "native frames only: CUPROF_PYTHON_FRAMES=off";
    else if (s == STATE_UNSUPPORTED)
        out->frames = g_reason;
}

void
python_frames_reset_after_fork(void)
{
    pthread_mutex_init(&g_insert_lock, NULL);
    pthread_mutex_init(&g_discover_lock, NULL);
}
