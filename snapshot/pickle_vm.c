/* pickle_vm.c: the pickle reader's messages, input window and stack growth. */
#include "snapshot/pickle_vm.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PICKLE_WINDOW (1u << 20) /* bytes read from a file at a time */

/* A window for `want` bytes from `pos` on: PICKLE_WINDOW, or the rest of a file shorter than that
 * (most snapshots a command reads are tens of KiB: a full window was 256 pages to map in). */
static size_t
window_size(const struct pickle_vm *vm, uint64_t pos, size_t want)
{
    uint64_t left = vm->size > pos ? vm->size - pos : 0;
    size_t cap = left < PICKLE_WINDOW ? (size_t)left : PICKLE_WINDOW;
    return want > cap ? want : cap;
}

int
pickle_vm_fail(struct pickle_vm *vm, int code, const char *fmt, ...)
{
    if (vm->err_len > 0) {
        int n =
            snprintf(vm->err, vm->err_len,
                     "byte %llu: ", (unsigned long long)(vm->base + (uint64_t)(vm->p - vm->start)));
        if (n >= 0 && (size_t)n < vm->err_len) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(vm->err + n, vm->err_len - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return code;
}

int
pickle_vm_oom(struct pickle_vm *vm)
{
    return pickle_vm_fail(vm, -CUPROF_EHOSTMEM, "out of memory");
}

int
pickle_vm_head(struct pickle_vm *vm, const unsigned char *head, size_t n)
{
    size_t cap = window_size(vm, 0, n);
    vm->window = malloc(cap);
    if (vm->window == NULL)
        return pickle_vm_oom(vm);
    memcpy(vm->window, head, n);
    vm->window_cap = cap;
    vm->base = 0;
    vm->start = vm->p = vm->window;
    vm->end = vm->window + n;
    return 0;
}

int
pickle_vm_refill(struct pickle_vm *vm, uint64_t n)
{
    uint64_t pos = vm->base + (uint64_t)(vm->p - vm->start);
    if (vm->fd < 0 || n > vm->size - pos)
        return -CUPROF_EFORMAT;
    size_t have = (size_t)(vm->end - vm->p), want = (size_t)n;
    if (want > vm->window_cap || vm->window_cap == 0) {
        size_t cap = window_size(vm, pos, want);
        unsigned char *w = malloc(cap);
        if (w == NULL)
            return pickle_vm_oom(vm);
        if (have > 0)
            memcpy(w, vm->p, have);
        free(vm->window);
        vm->window = w;
        vm->window_cap = cap;
    } else if (have > 0) {
        memmove(vm->window, vm->p, have);
    }
    uint64_t left = vm->size - pos - have; /* bytes of the input not read yet */
    size_t room = vm->window_cap - have, goal = room < left ? room : (size_t)left;
    size_t got = 0;
    /* A regular file fills the window in one read; a stream gives what it has, and is read on
     * only as far as the opcode needs. */
    while (got < goal && have + got < want) {
        ssize_t r = read(vm->fd, vm->window + have + got, goal - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return pickle_vm_fail(vm, -CUPROF_EIO, "read error: %s", strerror(errno));
        if (r == 0)
            break; /* the file got shorter: whatever is missing reads as truncated */
        got += (size_t)r;
    }
    vm->base = pos;
    vm->start = vm->p = vm->window;
    vm->end = vm->window + have + got;
    return have + got >= want ? 0 : -CUPROF_EFORMAT;
}

int
pickle_vm_truncated(struct pickle_vm *vm, uint64_t n, const char *what)
{
    return pickle_vm_fail(vm, -CUPROF_EFORMAT, "truncated pickle (%s needs %llu more bytes)", what,
                          (unsigned long long)n);
}

int
pickle_vm_push_grow(struct pickle_vm *vm, struct sval v)
{
    size_t cap = vm->stack_cap ? vm->stack_cap * 2 : 256;
    struct sval *s = realloc(vm->stack, cap * sizeof(*s));
    if (s == NULL)
        return pickle_vm_oom(vm);
    vm->stack = s;
    vm->stack_cap = cap;
    vm->stack[vm->sp++] = v;
    return 0;
}
