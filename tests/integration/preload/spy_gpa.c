/* spy_gpa.c: an independent counter of the driver lookups a program makes, preloaded INSTEAD of
 * libcuprof: hands out a counting cuGetProcAddress(_v2) through dlsym like cuprof does, and prints
 * "spy: lookups=N" at exit. Tests compare N with cuprof's CUPROF_LOG=debug count.
 * With SPY_GPA_LOG=FILE it also appends one line per lookup to FILE, "NAME VERSION FLAGS ABI"
 * (NAME "(empty name)" for "", ABI 2 for cuGetProcAddress_v2, 1 for the 4-argument one), the
 * format of cudart-13.0-lookups.txt plus the ABI. */
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef void *(*dlsym_fn)(void *, const char *);
typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t,
                              CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa_v1_fn)(const char *, void **, int, cuuint64_t);

static _Atomic unsigned long lookups;
static _Atomic(gpa_v2_fn) real_v2;
static _Atomic(gpa_v1_fn) real_v1;

static dlsym_fn
real_dlsym(void)
{
    void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    dlsym_fn fn;
    memcpy(&fn, &p, sizeof fn);
    return fn;
}

static CUresult spy_v1(const char *symbol, void **pfn, int version, cuuint64_t flags);

static int log_fd = -1; /* set before main by open_log, then only read */

__attribute__((constructor)) static void
open_log(void)
{
    const char *path = getenv("SPY_GPA_LOG");
    if (path != NULL && path[0] != '\0')
        log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

/* One write per line: lookups from several threads do not interleave within a line. */
static void
log_lookup(const char *symbol, int version, cuuint64_t flags, int abi)
{
    if (log_fd < 0)
        return;
    char line[256];
    const char *name = symbol == NULL ? "(null)" : symbol[0] == '\0' ? "(empty name)" : symbol;
    int n = snprintf(line, sizeof line, "%.200s %d %llu %d\n", name, version,
                     (unsigned long long)flags, abi);
    if (n > 0 && (size_t)n < sizeof line && write(log_fd, line, (size_t)n) != n)
        fprintf(stderr, "spy: SPY_GPA_LOG: short write\n"); /* the test then sees a bad line */
}

/* Object <-> function pointers as POSIX allows, without ISO C casts. */
#define TO_FN(dst, src) memcpy(&(dst), &(src), sizeof(dst))

static CUresult
spy_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
       CUdriverProcAddressQueryResult *status)
{
    atomic_fetch_add(&lookups, 1);
    log_lookup(symbol, version, flags, 2);
    CUresult r = atomic_load(&real_v2)(symbol, pfn, version, flags, status);
    if (r == CUDA_SUCCESS && pfn && *pfn && strcmp(symbol, "cuGetProcAddress") == 0) {
        if (version >= 12000) {
            gpa_v2_fn fn, mine = spy_v2;
            TO_FN(fn, *pfn);
            atomic_store(&real_v2, fn);
            TO_FN(*pfn, mine);
        } else {
            gpa_v1_fn fn, mine = spy_v1;
            TO_FN(fn, *pfn);
            atomic_store(&real_v1, fn);
            TO_FN(*pfn, mine);
        }
    }
    return r;
}

static CUresult
spy_v1(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    atomic_fetch_add(&lookups, 1);
    log_lookup(symbol, version, flags, 1);
    return atomic_load(&real_v1)(symbol, pfn, version, flags);
}

__attribute__((visibility("default"))) void *
dlsym(void *handle, const char *name)
{
    void *sym = real_dlsym()(handle, name);
    if (sym != NULL && handle != RTLD_NEXT && handle != RTLD_DEFAULT &&
        strcmp(name, "cuGetProcAddress_v2") == 0) {
        gpa_v2_fn fn, mine = spy_v2;
        void *out;
        TO_FN(fn, sym);
        atomic_store(&real_v2, fn);
        TO_FN(out, mine);
        return out;
    }
    return sym;
}

__attribute__((destructor)) static void
report(void)
{
    fprintf(stderr, "spy: lookups=%lu\n", atomic_load(&lookups));
}
