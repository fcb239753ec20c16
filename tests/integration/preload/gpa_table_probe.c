/* gpa_table_probe.c: for each (name, version, flags) line of a lookup list (the format of
 * cudart-13.0-lookups.txt), asks the driver's own cuGetProcAddress_v2 and the one a program gets
 * from dlsym on the driver (libcuprof's when it is preloaded), and prints
 * "NAME VERSION FLAGS DRIVER_RC SHIM_RC SWAPPED", SWAPPED 1 when the two pointers differ.
 * The driver's own comes from libc's dlsym, looked up by version in libc itself, so a preloaded
 * dlsym cannot answer it. Usage: gpa_table_probe LIST */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef void *(*dlsym_fn)(void *, const char *);
typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t,
                              CUdriverProcAddressQueryResult *);

/* Object <-> function pointers as POSIX allows, without ISO C casts. */
#define TO_FN(dst, src) memcpy(&(dst), &(src), sizeof(dst))

static dlsym_fn
libc_dlsym(void)
{
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    dlsym_fn fn = NULL;
    for (size_t i = 0; libc != NULL && fn == NULL && i < sizeof versions / sizeof versions[0];
         i++) {
        void *p = dlvsym(libc, "dlsym", versions[i]);
        if (p != NULL)
            TO_FN(fn, p);
    }
    return fn;
}

int
main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gpa_table_probe LIST\n");
        return 2;
    }
    FILE *list = fopen(argv[1], "r");
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    dlsym_fn real_dlsym = libc_dlsym();
    if (list == NULL || drv == NULL || real_dlsym == NULL) {
        fprintf(stderr, "gpa_table_probe: cannot open %s, libcuda.so.1 or libc's dlsym\n", argv[1]);
        return 2;
    }
    gpa_v2_fn own, shim;
    void *p = real_dlsym(drv, "cuGetProcAddress_v2");
    TO_FN(own, p);
    p = dlsym(drv, "cuGetProcAddress_v2");
    TO_FN(shim, p);
    if (own == NULL || shim == NULL) {
        fprintf(stderr, "gpa_table_probe: libcuda.so.1 has no cuGetProcAddress_v2\n");
        return 2;
    }
    char line[512];
    int rows = 0;
    while (fgets(line, sizeof line, list) != NULL) {
        char name[256];
        int version;
        unsigned long long flags;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (sscanf(line, "(empty name) %d %llu", &version, &flags) == 2)
            name[0] = '\0';
        else if (sscanf(line, "%255s %d %llu", name, &version, &flags) != 3) {
            fprintf(stderr, "gpa_table_probe: bad line: %s", line);
            return 2;
        }
        void *a = NULL, *b = NULL;
        CUdriverProcAddressQueryResult sa, sb;
        CUresult ra = own(name, &a, version, flags, &sa);
        CUresult rb = shim(name, &b, version, flags, &sb);
        printf("%s %d %llu %d %d %d\n", name[0] ? name : "(empty name)", version, flags, (int)ra,
               (int)rb, a != b);
        rows++;
    }
    fclose(list);
    fprintf(stderr, "gpa_table_probe: %d lookups\n", rows);
    return 0;
}
