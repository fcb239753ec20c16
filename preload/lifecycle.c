/* lifecycle.c: constructor, fork handlers and the exit dump of libcuprof (at exit and _exit). */
#include "preload/lifecycle.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "allocator/allocator.h"
#include "preload/config.h"
#include "preload/control.h"
#include "preload/cuda_backend.h"
#include "preload/dumper.h"
#include "preload/end_signals.h"
#include "preload/signal_stand_in.h"
#include "preload/layers.h"
#include "preload/library_usage.h"
#include "preload/oom_log.h"
#include "preload/real_dl.h"
#include "preload/stderr_out.h"
#include "preload/nvtx.h"
#include "preload/runtime.h"
#include "preload/shim_vmm.h"
#include "preload/stream_id.h"
#include "snapshot/python_frames.h"
#include "snapshot/stacks.h"
#include "snapshot/trace_ring.h"
#include "snapshot/unloaded_modules.h"
#include "snapshot/unwind.h"

atomic_bool lifecycle_forked;
/* Written once by lifecycle_register; read by _exit in any thread. */
static _Atomic(struct cuprof_runtime *) lifecycle_rt;
/* The process whose allocations cuprof holds: a vfork child (no fork handler runs in it) shares
 * its parent's memory, and so these variables, but not its pid. */
static _Atomic pid_t lifecycle_pid;
/* glibc's _exit and _Exit (or a later interposer's), found by the constructor. */
typedef void (*lifecycle_exit_fn)(int);
static _Atomic(lifecycle_exit_fn) lifecycle_next_exit[2];
static atomic_bool lifecycle_oom_claimed;
/* A forked child that has not made an intercepted call writes no exit dump: a DataLoader-style
 * worker would otherwise write a copy of its parent's state at every exit. */
static atomic_bool lifecycle_idle_child;

/* Priority 101: the first constructor of libcuprof, so a bad CUPROF_* value stops the program
 * before anything is intercepted (a CUDA call from an earlier library's constructor parses the
 * configuration lazily through runtime_get instead). */
__attribute__((constructor(101))) static void
lifecycle_constructor(void)
{
    signal_stand_in_start(); /* before a bad value can end the program: `cuprof run` counts on it */
    static const char *const exit_names[2] = {"_exit", "_Exit"};
    for (int i = 0; i < 2; i++) {
        void *sym = real_dl_dlsym(RTLD_NEXT, exit_names[i]);
        lifecycle_exit_fn fn;
        memcpy(&fn, &sym, sizeof fn);
        atomic_store(&lifecycle_next_exit[i], fn);
    }
    const struct cuprof_config *config = runtime_config();
    /* Another interposer preloaded ahead of us would otherwise see every call first and forward
     * it around us; off mode stays a pure pass-through. */
    if ((enum cuprof_mode)config->mode != CUPROF_MODE_OFF)
        layers_start();
}

/* Fork: hold the dump lock and every device lock across fork() so the child's copies are
 * consistent and unlocked; no CUDA call is made in any of these handlers. */
static void
lifecycle_fork_prepare(void)
{
    struct cuprof_runtime *rt = atomic_load(&lifecycle_rt);
    dumper_fork_prepare();
    for (int d = 0; d < rt->device_count; d++)
        allocator_lock_device(rt->alloc, d);
    /* Leaf locks (never held across another lock), taken last. */
    cuda_backend_fork_prepare();
    shim_vmm_fork_prepare();
}

static void
lifecycle_fork_parent(void)
{
    struct cuprof_runtime *rt = atomic_load(&lifecycle_rt);
    shim_vmm_fork_parent();
    cuda_backend_fork_parent();
    for (int d = rt->device_count - 1; d >= 0; d--)
        allocator_unlock_device(rt->alloc, d);
    dumper_fork_parent();
}

/* The child keeps its parent's history and blocks (inherited, as the memory is): its snapshots
 * show them under its own pid, with the sequence number starting again at 0. */
static void
lifecycle_fork_child(void)
{
    /* The futex locks are plain words: the child resets them (a release could try to wake a
     * parent thread that was waiting, which the child does not have). */
    struct cuprof_runtime *rt = atomic_load(&lifecycle_rt);
    atomic_store(&lifecycle_pid, getpid());
    allocator_reset_after_fork(rt->alloc);
    trace_ring_reset_after_fork(rt->ring);
    nvtx_reset_after_fork(); /* and the labels' */
    cuda_backend_reset_after_fork();
    shim_vmm_reset_after_fork();
    stream_id_reset_after_fork();
    stacks_reset_after_fork();
    unloaded_modules_reset_after_fork();
    python_frames_reset_after_fork();
    library_usage_reset_after_fork();
    oom_log_reset_after_fork();
    dumper_fork_child();
    end_signals_fork_child();
    control_fork_child();
    atomic_store(&lifecycle_oom_claimed, false);
    atomic_store(&lifecycle_idle_child, true);
    atomic_store(&lifecycle_forked, true);
}

static bool
lifecycle_wants_exit_dump(const struct cuprof_runtime *rt)
{
    return (rt->config->dump_on & CONFIG_DUMP_ON_EXIT) != 0 && !atomic_load(&lifecycle_idle_child);
}

/* Registered after the CUDA runtime's own start-up, so (atexit being LIFO) it runs before the
 * runtime's teardown releases contexts; it makes no device call either way. */
static void
lifecycle_at_exit(void)
{
    struct cuprof_runtime *rt = atomic_load(&lifecycle_rt);
    /* Written once: the dumper knows when the last snapshot is (at exit or by a signal). */
    dumper_exit(rt, lifecycle_wants_exit_dump(rt)); /* a failure was logged */
}

/* Before _exit: what exit's handlers would have done, where that cannot deadlock. */
static void
lifecycle_before_immediate_exit(void)
{
    struct cuprof_runtime *rt = atomic_load(&lifecycle_rt);
    /* A forked child that made no CUDA call (a subprocess whose exec failed) has nothing to do. */
    if (rt == NULL || atomic_load(&lifecycle_pid) != getpid() ||
        atomic_load(&lifecycle_idle_child) ||
        (rt->config->dump_on &
         (CONFIG_DUMP_ON_EXIT | CONFIG_DUMP_ON_SIGNAL | CONFIG_DUMP_ON_TERM)) == 0)
        return;
    /* A handler may have interrupted this very thread inside cuprof, malloc or the loader, whose
     * locks the dump takes: it runs only where the whole stack shows no signal frame. */
    enum unwind_context where = unwind_caller_context();
    if (where == UNWIND_CONTEXT_PLAIN) {
        lifecycle_at_exit();
        control_stop(); /* as its atexit handler would */
        return;
    }
    if (!lifecycle_wants_exit_dump(rt) || !runtime_log_info())
        return;
    /* Constant lines: this may be a signal handler. */
    static const char in_handler[] = "cuprof: _exit in a signal handler: no exit snapshot (writing "
                                     "one there could deadlock the program)\n";
    static const char unknown[] = "cuprof: _exit from code cuprof cannot unwind: no exit snapshot "
                                  "(call cuprof_dump_snapshot before _exit)\n";
    if (where == UNWIND_CONTEXT_SIGNAL_HANDLER)
        (void)stderr_out_write(in_handler, sizeof in_handler - 1);
    else
        (void)stderr_out_write(unknown, sizeof unknown - 1);
}

void
lifecycle_immediate_exit(int status, enum lifecycle_exit_kind kind)
{
    lifecycle_before_immediate_exit();
    lifecycle_exit_fn next = atomic_load(&lifecycle_next_exit[kind]);
    if (next != NULL)
        next(status);
    for (;;) /* called before the constructor, or no libc _exit to find: the system call */
        syscall(SYS_exit_group, status);
}

void
lifecycle_register(struct cuprof_runtime *rt)
{
    atomic_store(&lifecycle_pid, getpid());
    atomic_store(&lifecycle_rt, rt);
    /* _exit's stack check needs cuprof's unwinder ready: loading it there could deadlock. */
    if ((rt->config->dump_on & CONFIG_DUMP_ON_EXIT) != 0)
        (void)unwind_init();
    if (pthread_atfork(lifecycle_fork_prepare, lifecycle_fork_parent, lifecycle_fork_child) != 0)
        runtime_log("cuprof: pthread_atfork failed: a forked child may deadlock in cuprof");
    /* With `signal` or `term` alone it still stops the signal dumps before _exit. */
    if ((rt->config->dump_on &
         (CONFIG_DUMP_ON_EXIT | CONFIG_DUMP_ON_SIGNAL | CONFIG_DUMP_ON_TERM)) != 0 &&
        atexit(lifecycle_at_exit) != 0)
        runtime_log("cuprof: atexit failed: no snapshot will be written at exit");
}

void
lifecycle_resume_after_fork_slow(struct cuprof_runtime *rt)
{
    if (!atomic_exchange(&lifecycle_forked, false))
        return;
    atomic_store(&lifecycle_idle_child, false);
    dumper_resume(rt);
    control_resume(rt);
}

bool
lifecycle_claim_oom_dump(void)
{
    return !atomic_exchange(&lifecycle_oom_claimed, true);
}
