/* unload.c: dlclose as the program sees it (see unload.h). */
#include "preload/unload.h"

#include "preload/real_dl.h"
#include "preload/runtime.h"
#include "snapshot/loader_gate.h"
#include "snapshot/stacks.h"
#include "snapshot/unloaded_modules.h"

#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The shared objects mapped at one moment: where each is, its name in one buffer of all names
 * (the loader frees an unloaded object's name with it). */
struct object {
    size_t name; /* offset in names */
    uintptr_t base, lo, hi;
    bool present; /* still mapped after the dlclose */
};
struct objects {
    struct object *v;
    size_t n, cap;
    char *names;
    size_t names_len, names_cap;
    bool failed; /* out of memory: nothing is noted */
};

static bool
objects_push_name(struct objects *o, const char *name, size_t *at)
{
    size_t len = strlen(name) + 1;
    if (o->names_len + len > o->names_cap) {
        size_t cap = o->names_cap != 0 ? o->names_cap * 2 : 4096;
        while (cap < o->names_len + len)
            cap *= 2;
        char *grown = realloc(o->names, cap);
        if (grown == NULL)
            return false;
        o->names = grown;
        o->names_cap = cap;
    }
    memcpy(o->names + o->names_len, name, len);
    *at = o->names_len;
    o->names_len += len;
    return true;
}

static int
objects_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct objects *o = data;
    uintptr_t lo, hi;
    unloaded_modules_code_range(info, &lo, &hi);
    /* The main program (no name) is never unloaded; an object without code has no frames. */
    if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0' || lo >= hi || o->failed)
        return 0;
    if (o->n == o->cap) {
        size_t cap = o->cap != 0 ? o->cap * 2 : 64;
        struct object *grown = realloc(o->v, cap * sizeof(*grown));
        if (grown == NULL) {
            o->failed = true;
            return 0;
        }
        o->v = grown;
        o->cap = cap;
    }
    struct object *ob = &o->v[o->n];
    *ob = (struct object){0, info->dlpi_addr, lo, hi, false};
    if (!objects_push_name(o, info->dlpi_name, &ob->name)) {
        o->failed = true;
        return 0;
    }
    o->n++;
    return 0;
}

/* Marks each object of `before` that is mapped now (same base, same name). */
static int
still_mapped_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct objects *before = data;
    if (info->dlpi_name == NULL)
        return 0;
    for (size_t i = 0; i < before->n; i++) {
        struct object *ob = &before->v[i];
        if (!ob->present && ob->base == info->dlpi_addr &&
            strcmp(before->names + ob->name, info->dlpi_name) == 0) {
            ob->present = true;
            break;
        }
    }
    return 0;
}

/* Each object of `before` that is gone, for the dumps to come (its path made absolute while the
 * working directory is still the one it was loaded from). */
static void
note_unloaded(struct objects *before)
{
    if (before->failed)
        return;
    loader_gate_iterate(still_mapped_cb, before);
    for (size_t i = 0; i < before->n; i++) {
        const struct object *ob = &before->v[i];
        if (ob->present)
            continue;
        char real[PATH_MAX];
        const char *name = before->names + ob->name;
        unloaded_modules_add(realpath(name, real) != NULL ? real : name, ob->base, ob->lo, ob->hi);
    }
}

/* How many objects the loader has unmapped so far. */
static unsigned long long
objects_removed(void)
{
    unsigned long long adds, subs;
    unloaded_modules_loader_counts(&adds, &subs);
    return subs;
}

static const char *
unwinder_name(enum stacks_unwinder u)
{
    return u == STACKS_UNWINDER_CUPROF ? "cuprof's unwinder" : "libgcc's unwinder";
}

int
unload_dlclose(void *handle)
{
    unsigned long long removed = objects_removed();
    struct objects before = {0};
    loader_gate_iterate(objects_cb, &before);
    int rc = real_dl_close(handle);
    int saved_errno = errno;
    /* A dlclose that only dropped a reference unmapped nothing: nothing to forget. */
    bool unmapped = objects_removed() != removed;
    if (unmapped)
        note_unloaded(&before);
    free(before.v);
    free(before.names);
    if (unmapped && stacks_forget_code() && runtime_log_info())
        runtime_log("cuprof: a shared object was unloaded: stacks by %s from now on (libunwind "
                    "would keep walking new code there with the unloaded code's frames)",
                    unwinder_name(stacks_unwinder()));
    errno = saved_errno;
    return rc;
}
