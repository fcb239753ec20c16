/* exports.c: every CUDA symbol libcuprof.so exports, as one-line stubs that hand over to the
 *   core (PipeWire's v4l2 shim style), generated from preload/entry_points.def (as libcuprof.map
 *   is; tests/integration/preload/check_exports.py checks the list independently).
 * Locking: none here.
 * Hot path: yes (one extra call per intercepted function). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>

#include "preload/dump_signal.h"
#include "preload/end_signals.h"
#include "preload/entry_points.h"
#include "preload/exec_dump.h"
#include "preload/hooks.h"
#include "preload/lifecycle.h"
#include "preload/real_dl.h"
#include "preload/shim_capture.h"
#include "preload/shim_ctx.h"
#include "preload/shim_driver_memory.h"
#include "preload/shim_mem.h"
#include "preload/shim_peer.h"
#include "preload/shim_query.h"
#include "preload/shim_rt.h"
#include "preload/shim_vmm.h"
#include "preload/signal_stand_in.h"
#include "preload/unload.h"

#define EXPORT __attribute__((visibility("default")))

/* libcuda exports the older ABIs under their plain names too; cuda.h maps those names to _v2. */
#undef cuGetProcAddress
#undef cuDevicePrimaryCtxReset
#undef cuDevicePrimaryCtxRelease
#undef cuStreamBeginCapture

/* ---- dlsym: the program's return address identifies the caller for RTLD_NEXT. */
EXPORT REAL_DL_UNINSTRUMENTED void *
dlsym(void *handle, const char *name)
{
    return hooks_dlsym(handle, name, __builtin_return_address(0));
}

/* ---- dlclose: an unmapped library's code must not be walked with what the unwinders learnt. */
EXPORT REAL_DL_UNINSTRUMENTED int
dlclose(void *handle)
{
    return unload_dlclose(handle);
}

/* ---- _exit and _Exit: they skip atexit, where the exit snapshot is written (lifecycle.h). */
EXPORT REAL_DL_UNINSTRUMENTED void
_exit(int status)
{
    lifecycle_immediate_exit(status, LIFECYCLE_EXIT_POSIX);
}

EXPORT REAL_DL_UNINSTRUMENTED void
_Exit(int status)
{
    lifecycle_immediate_exit(status, LIFECYCLE_EXIT_C99);
}

/* ---- abort: it skips exit's handlers too (lifecycle.h). */
EXPORT REAL_DL_UNINSTRUMENTED void
abort(void)
{
    lifecycle_abort();
}

/* ---- The exec family: an exec skips exit's handlers too; the image's snapshot comes first
 * (exec_dump.h). */
EXPORT int
execve(const char *path, char *const argv[], char *const envp[])
{
    return exec_dump_execve(path, argv, envp);
}

EXPORT int
execv(const char *path, char *const argv[])
{
    return exec_dump_execv(path, argv);
}

EXPORT int
execvp(const char *file, char *const argv[])
{
    return exec_dump_execvp(file, argv);
}

EXPORT int
execvpe(const char *file, char *const argv[], char *const envp[])
{
    return exec_dump_execvpe(file, argv, envp);
}

EXPORT int
fexecve(int fd, char *const argv[], char *const envp[])
{
    return exec_dump_fexecve(fd, argv, envp);
}

EXPORT int
execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
    return exec_dump_execveat(dirfd, path, argv, envp, flags);
}

/* The l forms' arguments up to the terminating NULL, as glibc counts them (E2BIG past INT_MAX). */
#define EXEC_ARG_COUNT(first, argc)                                                                \
    ptrdiff_t argc = 1;                                                                            \
    do {                                                                                           \
        va_list count_;                                                                            \
        va_start(count_, first);                                                                   \
        while (argc < INT_MAX && va_arg(count_, char *) != NULL)                                   \
            argc++;                                                                                \
        va_end(count_);                                                                            \
        if (argc >= INT_MAX) {                                                                     \
            errno = E2BIG;                                                                         \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

/* argv[0..argc] from the l form's arguments (argv[argc] is their NULL), then execle's
 * environment into *envp when asked for. */
static void
exports_gather_args(char **argv, ptrdiff_t argc, const char *first, va_list *rest,
                    char *const **envp)
{
    argv[0] = (char *)first;
    for (ptrdiff_t i = 1; i <= argc; i++)
        argv[i] = va_arg(*rest, char *);
    if (envp != NULL)
        *envp = va_arg(*rest, char *const *);
}

/* An l form: its arguments gathered (with execle's environment when `with_env`), then `call`. */
#define EXEC_L_FORM(name, with_env, call)                                                          \
    EXPORT int name(const char *file, const char *arg, ...)                                        \
    {                                                                                              \
        EXEC_ARG_COUNT(arg, argc);                                                                 \
        char *argv[argc + 1];                                                                      \
        char *const *envp = NULL;                                                                  \
        va_list ap;                                                                                \
        va_start(ap, arg);                                                                         \
        exports_gather_args(argv, argc, arg, &ap, (with_env) ? &envp : NULL);                      \
        va_end(ap);                                                                                \
        return call;                                                                               \
    }
EXEC_L_FORM(execl, false, exec_dump_execv(file, argv))
EXEC_L_FORM(execlp, false, exec_dump_execvp(file, argv))
EXEC_L_FORM(execle, true, exec_dump_execve(file, argv, envp))
#undef EXEC_L_FORM
#undef EXEC_ARG_COUNT

/* ---- sigaction and signal(3)'s family: where cuprof's handler stands in for a default action
 * (end_signals.h), for the program's own in `cuprof run` (signal_stand_in.h) or for
 * CUPROF_SIGNAL's (dump_signal.h), the program is told its own. */
EXPORT REAL_DL_UNINSTRUMENTED int
sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (signal_stand_in_covers(sig))
        return signal_stand_in_sigaction(sig, act, old);
    if (dump_signal_covers(sig))
        return dump_signal_sigaction(sig, act, old);
    return end_signals_sigaction(sig, act, old);
}

#define SIGNAL_SETTER(name, sysv)                                                                  \
    EXPORT end_signals_handler_fn name(int sig, end_signals_handler_fn handler);                   \
    EXPORT REAL_DL_UNINSTRUMENTED end_signals_handler_fn name(int sig,                             \
                                                              end_signals_handler_fn handler)      \
    {                                                                                              \
        static end_signals_setter_fn next;                                                         \
        if (signal_stand_in_covers(sig))                                                           \
            return signal_stand_in_set_handler(sig, handler, sysv);                                \
        if (dump_signal_covers(sig))                                                               \
            return dump_signal_set_handler(sig, handler, sysv);                                    \
        return end_signals_set_handler(#name, &next, sig, handler);                                \
    }
SIGNAL_SETTER(signal, false)
SIGNAL_SETTER(bsd_signal, false)
SIGNAL_SETTER(sysv_signal, true)
#undef SIGNAL_SETTER

/* ---- Every row of entry_points.def that cuprof wraps, as a stub named as libcuda.so.1 or
 * libcudart exports it (cuda.h's macros would add _v2: the three it redefines are undone above).
 * The declaration first: cuda.h declares neither the _ptsz twins nor the 7.0 ABIs' plain names.
 * Runtime stubs are reached only with a shared libcudart; their unversioned names interpose
 * cudaMalloc@libcudart.so.13. They jump through their routes (shim_rt.h). */
#define DRIVER_WRAPPER(field, exported, lookup, min_version, max_version, ptsz, pfn, wrapper,      \
                       params, args)                                                               \
    EXPORT CUresult CUDAAPI exported params;                                                       \
    EXPORT CUresult CUDAAPI exported params                                                        \
    {                                                                                              \
        return wrapper args;                                                                       \
    }
#define DRIVER_LOOKUP DRIVER_WRAPPER
#define DRIVER_CALLED ENTRY_POINT_IGNORE
#define RUNTIME_WRAPPER(exported, wrapper, params, args)                                           \
    EXPORT cudaError_t CUDARTAPI exported params;                                                  \
    EXPORT cudaError_t CUDARTAPI exported params                                                   \
    {                                                                                              \
        return atomic_load_explicit(&shim_rt_route_##exported, memory_order_acquire) args;         \
    }
#include "preload/entry_points.def"
#undef DRIVER_LOOKUP
#undef DRIVER_WRAPPER
#undef DRIVER_CALLED
#undef RUNTIME_WRAPPER
