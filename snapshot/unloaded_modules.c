/* unloaded_modules.c: the objects the program unloaded (see unloaded_modules.h). A small array,
 * most recent last; lookups walk it backwards. */
#include "snapshot/unloaded_modules.h"

#include "snapshot/loader_gate.h"

#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct entry {
    char *path;
    uintptr_t base, lo, hi;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry *g_modules; /* protected by g_lock */
static size_t g_count, g_cap;   /* protected by g_lock */
static _Atomic uint64_t g_noted;

void
unloaded_modules_add(const char *path, uintptr_t base, uintptr_t lo, uintptr_t hi)
{
    size_t len = strlen(path);
    if (len == 0 || len >= UNLOADED_PATH_MAX || lo >= hi)
        return;
    char *copy = strdup(path);
    if (copy == NULL)
        return;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_count; i++) {
        if (g_modules[i].base == base && strcmp(g_modules[i].path, path) == 0) {
            free(g_modules[i].path);
            memmove(&g_modules[i], &g_modules[i + 1], (g_count - i - 1) * sizeof(*g_modules));
            g_count--;
            break;
        }
    }
    if (g_count == UNLOADED_MODULES_MAX) {
        free(g_modules[0].path);
        memmove(&g_modules[0], &g_modules[1], (g_count - 1) * sizeof(*g_modules));
        g_count--;
    }
    if (g_count == g_cap) {
        size_t cap = g_cap != 0 ? g_cap * 2 : 8;
        struct entry *grown = realloc(g_modules, cap * sizeof(*grown));
        if (grown == NULL) {
            pthread_mutex_unlock(&g_lock);
            free(copy);
            return;
        }
        g_modules = grown;
        g_cap = cap;
    }
    g_modules[g_count++] = (struct entry){copy, base, lo, hi};
    pthread_mutex_unlock(&g_lock);
    atomic_fetch_add_explicit(&g_noted, 1, memory_order_release);
}

void
unloaded_modules_code_range(const struct dl_phdr_info *info, uintptr_t *lo, uintptr_t *hi)
{
    *lo = UINTPTR_MAX;
    *hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        *lo = start < *lo ? start : *lo;
        *hi = start + ph->p_memsz > *hi ? start + ph->p_memsz : *hi;
    }
}

struct overlap_query {
    uintptr_t lo, hi;
    bool overlaps;
};

static int
overlap_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct overlap_query *q = data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
        if (start < q->hi && q->lo < end) {
            q->overlaps = true;
            return 1;
        }
    }
    return 0;
}

bool
unloaded_modules_find(uintptr_t addr, struct unloaded_module *out)
{
    bool found = false;
    pthread_mutex_lock(&g_lock);
    for (size_t i = g_count; i-- > 0;) {
        const struct entry *e = &g_modules[i];
        if (addr >= e->lo && addr < e->hi) {
            strcpy(out->path, e->path); /* shorter than UNLOADED_PATH_MAX: checked when added */
            out->base = e->base;
            out->lo = e->lo;
            out->hi = e->hi;
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    if (!found)
        return false;
    struct overlap_query q = {out->lo, out->hi, false};
    loader_gate_iterate(overlap_cb, &q);
    return !q.overlaps;
}

static int
loader_counts_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    unsigned long long *counts = data;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
        counts[0] = info->dlpi_adds;
        counts[1] = info->dlpi_subs;
    }
    return 1; /* the loader's own counters: every object reports the same */
}

void
unloaded_modules_loader_counts(unsigned long long *adds, unsigned long long *subs)
{
    unsigned long long counts[2] = {0, 0};
    loader_gate_iterate(loader_counts_cb, counts);
    *adds = counts[0];
    *subs = counts[1];
}

uint64_t
unloaded_modules_count(void)
{
    return atomic_load_explicit(&g_noted, memory_order_acquire);
}

void
unloaded_modules_reset_after_fork(void)
{
    pthread_mutex_init(&g_lock, NULL);
}
