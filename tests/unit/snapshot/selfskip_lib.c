/* selfskip_lib.c: a shared library standing in for libcuprof.so (it links snapshot/stacks.c),
 * built without debug info: its innermost frames must be dropped from captured stacks, and its
 * C++-mangled symbol must come out demangled from the ELF symbol table. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot/stacks.h"

#define EXPORT       __attribute__((visibility("default")))
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

EXPORT uint32_t selfskip_capture(void);
EXPORT bool selfskip_get(uint32_t id, const uintptr_t **ips, size_t *count);
EXPORT uint32_t selfskip_mangled(void) __asm__("_ZN11cuprof_test7mangledEv");

__attribute__((noinline)) static uint32_t
selfskip_inner(void)
{
    uint32_t id = stacks_capture(0); /* skip 0: only the own-module rule drops these frames */
    KEEP_FRAME();
    return id;
}

__attribute__((noinline)) uint32_t
selfskip_capture(void)
{
    stacks_configure(STACKS_ALL, 0);
    uint32_t id = selfskip_inner();
    KEEP_FRAME();
    return id;
}

bool
selfskip_get(uint32_t id, const uintptr_t **ips, size_t *count)
{
    return stacks_get(id, ips, count);
}

__attribute__((noinline)) uint32_t
selfskip_mangled(void)
{
    KEEP_FRAME();
    return 7;
}
