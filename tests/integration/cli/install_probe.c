/* install_probe.c: a CUDA program with no link to any CUDA library (so no build-tree RUNPATH):
 * dlopens libcudart.so.13 from the library path, allocates and frees 3 MiB, then prints the path
 * of every CUDA or cuprof library mapped into it ("install_probe: lib PATH"), for the install
 * test to check which copies `cuprof run --sim` made it load. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef int (*malloc_fn)(void **, size_t);
typedef int (*free_fn)(void *);

/* Object <-> function pointers as POSIX allows, without ISO C casts. */
#define TO_FN(dst, src) memcpy(&(dst), &(src), sizeof(dst))

static void
print_libraries(void)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4096], last[4096] = "";
    while (maps != NULL && fgets(line, sizeof line, maps) != NULL) {
        char *path = strchr(line, '/');
        if (path == NULL)
            continue;
        path[strcspn(path, "\n")] = '\0';
        const char *base = strrchr(path, '/') + 1;
        bool ours = strncmp(base, "libcuda.", 8) == 0 || strncmp(base, "libcudart.", 10) == 0 ||
                    strncmp(base, "libcuprof", 9) == 0;
        if (ours && strcmp(path, last) != 0) {
            printf("install_probe: lib %s\n", path);
            snprintf(last, sizeof last, "%s", path);
        }
    }
    if (maps != NULL)
        fclose(maps);
}

int
main(void)
{
    void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
    if (rt == NULL) {
        printf("install_probe: %s\n", dlerror());
        return 1;
    }
    malloc_fn cuda_malloc;
    free_fn cuda_free;
    void *m = dlsym(rt, "cudaMalloc"), *f = dlsym(rt, "cudaFree");
    TO_FN(cuda_malloc, m);
    TO_FN(cuda_free, f);
    if (cuda_malloc == NULL || cuda_free == NULL)
        return 1;
    void *p = NULL;
    int rm = cuda_malloc(&p, 3 << 20);
    int rf = cuda_free(p);
    printf("install_probe: cudaMalloc=%d cudaFree=%d\n", rm, rf);
    print_libraries();
    return rm == 0 && rf == 0 ? 0 : 1;
}
