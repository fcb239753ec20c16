/* unload_app: allocates through a library, closes it, loads another library that lands at the
 * same address and allocates through it (stacks after an unload, preload/unload.c). The libraries
 * are unwind_reload.S's two variants. First a dlclose that only drops a reference, which returns
 * what glibc's does and unmaps nothing.
 * Usage: unload_app LIB_A LIB_B. Prints each library's lib_entry address; exit 0. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*entry_fn)(void (*)(void));

static void *g_block;

static void
allocate(void)
{
    if (cudaMalloc(&g_block, 4096) != cudaSuccess)
        exit(1);
}

__attribute__((noinline)) static void
through(const char *path)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "unload_app: %s\n", dlerror());
        exit(1);
    }
    void *sym = dlsym(lib, "lib_entry");
    entry_fn entry;
    memcpy(&entry, &sym, sizeof(entry));
    entry(allocate);
    printf("lib_entry at %p\n", sym);
    if (cudaFree(g_block) != cudaSuccess || dlclose(lib) != 0)
        exit(1);
}

__attribute__((noinline)) void
through_first(const char *path)
{
    through(path);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void
through_second(const char *path)
{
    through(path);
    __asm__ volatile("" ::: "memory");
}

int
main(int argc, char **argv)
{
    if (argc != 3)
        return 64;
    /* A second reference dropped: nothing is unmapped. */
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    printf("dlclose of a second reference: %d\n", libc != NULL ? dlclose(libc) : -2);
    through_first(argv[1]);
    through_second(argv[2]);
    return 0;
}
