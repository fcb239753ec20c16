/* dlopen_alloc_app.c: loads the library argv[1] (a copy of tests/apps' libruntime_user.so under
 * another name) and allocates and frees 1 MiB through it twice, so that the device calls come
 * from an object of that name. Prints "dlopen_alloc: ok" or what failed. */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>

typedef int (*alloc_fn)(void **, size_t);
typedef int (*free_fn)(void *);

int
main(int argc, char **argv)
{
    void *lib = argc > 1 ? dlopen(argv[1], RTLD_NOW) : NULL;
    alloc_fn alloc = lib != NULL ? (alloc_fn)(size_t)dlsym(lib, "runtime_user_alloc") : NULL;
    free_fn release = lib != NULL ? (free_fn)(size_t)dlsym(lib, "runtime_user_free") : NULL;
    if (alloc == NULL || release == NULL) {
        printf("dlopen_alloc: cannot load %s\n", argc > 1 ? argv[1] : "(no argument)");
        return 1;
    }
    for (int i = 0; i < 2; i++) {
        void *p = NULL;
        int e = alloc(&p, (size_t)1 << 20);
        if (e != 0 || release(p) != 0) {
            printf("dlopen_alloc: error %d\n", e);
            return 1;
        }
    }
    printf("dlopen_alloc: ok\n");
    return 0;
}
