/* rtld_next_lib.c: a second preloaded library of the usual kind: its wrappers find the next
 * definition with dlsym(RTLD_NEXT, ...). With cuprof's dlsym in front, RTLD_NEXT must still mean
 * "next after THIS library", or getpid() would call itself forever. Prints its counts at exit. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static _Atomic unsigned long getpid_calls;
static _Atomic unsigned long alloc_calls;
static _Thread_local int depth;

__attribute__((visibility("default"))) pid_t
getpid(void)
{
    pid_t (*next)(void);
    void *p = dlsym(RTLD_NEXT, "getpid");
    memcpy(&next, &p, sizeof next);
    if (++depth > 1) { /* our own getpid came back: RTLD_NEXT was resolved for the wrong caller */
        fprintf(stderr, "rtld_next_lib: getpid recursed\n");
        _exit(3);
    }
    atomic_fetch_add(&getpid_calls, 1);
    pid_t pid = next();
    depth--;
    return pid;
}

__attribute__((visibility("default"))) CUresult
cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
    CUresult (*next)(CUdeviceptr *, size_t);
    void *p = dlsym(RTLD_NEXT, "cuMemAlloc_v2");
    Dl_info mine, found;
    if (p == NULL ||
        (dladdr(p, &found) && dladdr(&alloc_calls, &mine) && found.dli_fbase == mine.dli_fbase)) {
        fprintf(stderr, "rtld_next_lib: no next cuMemAlloc_v2\n");
        _exit(4);
    }
    memcpy(&next, &p, sizeof next);
    atomic_fetch_add(&alloc_calls, 1);
    return next(dptr, size);
}

__attribute__((destructor)) static void
report(void)
{
    fprintf(stderr, "rtld_next_lib: getpid=%lu cuMemAlloc_v2=%lu\n", atomic_load(&getpid_calls),
            atomic_load(&alloc_calls));
}
