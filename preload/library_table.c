/* library_table.c: address ranges of loaded objects, learned lazily from dl_iterate_phdr, each
 * mapped to a library row or to "pass over" (the CUDA libraries, cuprof, addresses in no object).
 * Ranges and rows are append-only fixed arrays published by an atomic count, so readers never
 * lock and never see a half-written entry. In a stack with Python frames the interpreter's own
 * objects (python, libpython, libffi, _ctypes) are passed over too, and the library is the Python
 * package whose code made the call: a Python frame's file, or a native module's, under the
 * interpreter's library directories names its package (snapshot/python_paths.h); the user's own
 * Python file is its own row. */
#include "preload/library_table.h"
#include "snapshot/loader_gate.h"

#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "snapshot/python_frames.h"
#include "snapshot/python_paths.h"
#include "snapshot/stacks.h"

#define LIBRARY_PATH_MAX 512
#define RANGES_MAX       1024
#define CALLER_DEPTH     16 /* frames past cuprof's: enough to leave libcudart's */
#define NO_OBJECT_SPAN   4096
#define PASS_OVER        UINT16_MAX
#define TOKEN_CACHE      1024 /* Python frames' rows, direct-mapped by frame id */

struct module_range {
    uintptr_t lo, hi;
    uint16_t library; /* a row, or PASS_OVER */
    uint16_t package; /* the Python package holding the object (a row), or LIBRARY_UNKNOWN */
    bool interpreter; /* python, libpython, libffi, _ctypes: passed over beside Python frames */
};

struct library_row {
    char path[LIBRARY_PATH_MAX];
    bool is_program;
};

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct module_range ranges[RANGES_MAX]; /* written under table_lock before publishing */
static _Atomic size_t range_count;
static struct library_row rows[LIBRARY_TABLE_MAX]; /* written under table_lock before publishing */
static _Atomic size_t row_count = 1;               /* row 0: "(unknown)" */

/* (frame id << 16 | row) of Python frames seen; a slot is overwritten by a later frame. */
static _Atomic uint64_t token_rows[TOKEN_CACHE];

static const struct module_range *
find_range(uintptr_t ip)
{
    size_t n = atomic_load_explicit(&range_count, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        if (ip >= ranges[i].lo && ip < ranges[i].hi)
            return &ranges[i];
    }
    return NULL;
}

/* What dl_iterate_phdr says about the object holding `ip`. */
struct object_query {
    uintptr_t ip;
    uintptr_t lo, hi;
    char path[LIBRARY_PATH_MAX];
    bool found;
    bool is_program;
    unsigned seen;
};

static int
object_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct object_query *q = data;
    bool first = q->seen++ == 0; /* the loader reports the main program first */
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    bool inside = false;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        uintptr_t end = start + ph->p_memsz;
        lo = start < lo ? start : lo;
        hi = end > hi ? end : hi;
        inside = inside || (q->ip >= start && q->ip < end);
    }
    if (!inside)
        return 0;
    q->found = true;
    q->lo = lo;
    q->hi = hi;
    q->is_program = first || info->dlpi_name == NULL || info->dlpi_name[0] == '\0';
    if (!q->is_program)
        snprintf(q->path, sizeof q->path, "%s", info->dlpi_name);
    return 1;
}

/* The CUDA runtime and driver make the device call on someone's behalf; cuprof's frames are
 * dropped by the capture already, but a layer may hand calls back through it. */
static bool
passed_over(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash == NULL ? path : slash + 1;
    return strncmp(base, "libcuda.so", 10) == 0 || strncmp(base, "libcudart.so", 12) == 0 ||
           strncmp(base, "libcuprof.so", 12) == 0;
}

/* The interpreter's objects: they make a call on behalf of the Python code above them. */
static bool
interpreter_object(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash == NULL ? path : slash + 1;
    if (strncmp(base, "libpython", 9) == 0 || strncmp(base, "libffi", 6) == 0 ||
        strncmp(base, "_ctypes", 7) == 0)
        return true;
    if (strncmp(base, "python", 6) != 0)
        return false;
    for (const char *p = base + 6; *p != '\0'; p++)
        if (strchr("0123456789.dmtu", *p) == NULL)
            return false;
    return true;
}

/* The row for `path` (its first len bytes), added if new. Caller holds table_lock. */
static uint16_t
row_for_locked(const char *path, size_t len, bool is_program)
{
    char want[LIBRARY_PATH_MAX];
    snprintf(want, sizeof want, "%.*s", (int)(len < sizeof want ? len : sizeof want - 1), path);
    size_t n = atomic_load_explicit(&row_count, memory_order_relaxed);
    for (size_t i = 1; i < n; i++)
        if (rows[i].is_program == is_program && strcmp(rows[i].path, want) == 0)
            return (uint16_t)i;
    if (n == LIBRARY_TABLE_MAX)
        return LIBRARY_UNKNOWN;
    snprintf(rows[n].path, sizeof rows[n].path, "%s", want);
    rows[n].is_program = is_program;
    atomic_store_explicit(&row_count, n + 1, memory_order_release);
    return (uint16_t)n;
}

/* The row of the Python package holding `path` (".../site-packages/numba"), LIBRARY_UNKNOWN for a
 * file outside the interpreter's library directories. Caller holds table_lock. */
static uint16_t
package_row_locked(const char *path)
{
    struct python_path p;
    python_path_classify(path, &p);
    if (!python_path_is_library(&p) || path[0] == '<') /* "<frozen runpy>": no folder */
        return LIBRARY_UNKNOWN;
    return row_for_locked(path, p.rel + p.package_len, false);
}

/* First sight of an address: ask the loader (no lock held), then publish under the lock. */
static struct module_range
learn(uintptr_t ip)
{
    struct object_query q = {.ip = ip};
    loader_gate_iterate(object_cb, &q);
    if (q.found && q.is_program) {
        ssize_t n = readlink("/proc/self/exe", q.path, sizeof q.path - 1);
        q.path[n > 0 ? (size_t)n : 0] = '\0';
        if (n <= 0)
            snprintf(q.path, sizeof q.path, "%s", program_invocation_name);
    }
    struct module_range r = {.lo = q.lo, .hi = q.hi, .library = PASS_OVER};
    pthread_mutex_lock(&table_lock);
    const struct module_range *known = find_range(ip);
    if (known != NULL) {
        r = *known;
    } else {
        if (q.found && !passed_over(q.path)) {
            r.library = row_for_locked(q.path, strlen(q.path), q.is_program);
            r.package = package_row_locked(q.path);
            r.interpreter = interpreter_object(q.path);
        }
        if (!q.found) { /* remember a page of it, so JIT code is not looked up every time */
            r.lo = ip & ~(uintptr_t)(NO_OBJECT_SPAN - 1);
            r.hi = r.lo + NO_OBJECT_SPAN;
        }
        size_t n = atomic_load_explicit(&range_count, memory_order_relaxed);
        if (n < RANGES_MAX) {
            ranges[n] = r;
            atomic_store_explicit(&range_count, n + 1, memory_order_release);
        }
    }
    pthread_mutex_unlock(&table_lock);
    return r;
}

/* The row of a Python frame: its package, or its own file (the user's code). */
static uint16_t
token_row(uintptr_t token)
{
    uint64_t id = token & ~PYTHON_FRAME_TOKEN_BIT;
    _Atomic uint64_t *slot = &token_rows[id % TOKEN_CACHE];
    uint64_t cached = atomic_load_explicit(slot, memory_order_relaxed);
    if (cached >> 16 == id)
        return (uint16_t)(cached & 0xffff);
    const char *name, *file;
    int line;
    if (!python_frames_get(token, &name, &file, &line))
        return LIBRARY_UNKNOWN;
    pthread_mutex_lock(&table_lock);
    uint16_t row = package_row_locked(file);
    if (row == LIBRARY_UNKNOWN)
        row = row_for_locked(file, strlen(file), false);
    pthread_mutex_unlock(&table_lock);
    atomic_store_explicit(slot, id << 16 | row, memory_order_relaxed);
    return row;
}

static bool
python_follows(const uintptr_t *ips, size_t from, size_t count)
{
    for (size_t i = from; i < count; i++)
        if (python_frames_is_token(ips[i]))
            return true;
    return false;
}

uint16_t
library_table_of_ips(const uintptr_t *ips, size_t count)
{
    uint16_t interpreter = LIBRARY_UNKNOWN; /* the first interpreter object, if no Python follows */
    for (size_t i = 0; i < count; i++) {
        if (python_frames_is_token(ips[i])) {
            uint16_t row = token_row(ips[i]);
            if (row != LIBRARY_UNKNOWN)
                return row;
            continue;
        }
        /* Return addresses: the call instruction is the byte before (a noreturn call may be the
         * last instruction of an object). */
        uintptr_t ip = ips[i] > 0 ? ips[i] - 1 : 0;
        const struct module_range *known = find_range(ip);
        struct module_range r = known != NULL ? *known : learn(ip);
        if (r.library == PASS_OVER)
            continue;
        if (r.interpreter) {
            if (!python_follows(ips, i + 1, count))
                return interpreter != LIBRARY_UNKNOWN ? interpreter : r.library;
            if (interpreter == LIBRARY_UNKNOWN)
                interpreter = r.library;
            continue;
        }
        bool python = interpreter != LIBRARY_UNKNOWN || python_follows(ips, i + 1, count);
        return python && r.package != LIBRARY_UNKNOWN ? r.package : r.library;
    }
    return interpreter;
}

uint16_t
library_table_of_stack(uint32_t stack_id)
{
    const uintptr_t *ips;
    size_t count;
    if (!stacks_get(stack_id, &ips, &count))
        return LIBRARY_UNKNOWN;
    return library_table_of_ips(ips, count);
}

__attribute__((noinline)) uint16_t
library_table_of_caller(void)
{
    uintptr_t ips[CALLER_DEPTH];
    size_t count = stacks_callers(0, ips, CALLER_DEPTH);
    return library_table_of_ips(ips, count);
}

size_t
library_table_count(void)
{
    return atomic_load_explicit(&row_count, memory_order_acquire);
}

const char *
library_table_path(uint16_t library)
{
    if (library == LIBRARY_UNKNOWN || library >= library_table_count())
        return "";
    return rows[library].path;
}

bool
library_table_is_program(uint16_t library)
{
    return library != LIBRARY_UNKNOWN && library < library_table_count() &&
           rows[library].is_program;
}

void
library_table_reset_after_fork(void)
{
    pthread_mutex_init(&table_lock, NULL);
}
