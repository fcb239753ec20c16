/* lifecycle.c: constructor, fork handlers and the exit dump of libcuprof (at exit, _exit,
 * quick_exit and exec). */
#include "preload/lifecycle.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "allocator/alloc_lock.h"
#include "allocator/allocator.h"
#include "preload/config.h"
#include "preload/control.h"
#include "preload/cuda_backend.h"
#include "preload/dumper.h"
#include "preload/end_signals.h"
#include "preload/exec_dump.h"
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
/* The triggers whose dumps the end of the program concerns: with `signal` or `term` alone, the
 * end still waits for a signal dump in flight and lets no later one start. */
#define LIFECYCLE_END_TRIGGERS (CONFIG_DUMP_ON_EXIT | CONFIG_DUMP_ON_SIGNAL | CONFIG_DUMP_ON_TERM)

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
    exec_dump_start();
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

/* How long an exit in a signal handler waits for the dumper thread: ample for a full history
 * (10^7 entries a second are written), bounded where the handler interrupted a lock it needs. */
static unsigned
lifecycle_handler_exit_timeout_s(const struct cuprof_runtime *rt)
{
    uint64_t entries =
        rt->config->max_entries * (uint64_t)(rt->device_count > 0 ? rt->device_count : 1);
    return 10u + (unsigned)(entries / 500000u);
}

/* exit() in a signal handler (a ^C handler that calls exit is common C): the handler may have
 * interrupted this thread holding a lock the dump takes, and a dump here would wait for itself
 * forever. Holding cuprof's (alloc_lock_depth): none. Otherwise (a lock of malloc's or the
 * loader's is possible) the dumper thread writes it, with time to give up. */
static void
lifecycle_exit_in_handler(struct cuprof_runtime *rt)
{
    bool exit_dump = lifecycle_wants_exit_dump(rt);
    static const char inside[] =
        "cuprof: exit in a signal handler that interrupted cuprof: no exit "
        "snapshot (the interrupted code holds a lock it needs)\n";
    if (alloc_lock_depth != 0) {
        if (exit_dump && runtime_log_info())
            (void)stderr_out_write(inside, sizeof inside - 1);
        return;
    }
    if (dumper_exit_on_thread(exit_dump, lifecycle_handler_exit_timeout_s(rt)) || !exit_dump)
        return;
    static const char failed[] = "cuprof: exit in a signal handler: no exit snapshot (the dumper "
                                 "thread is off, or could not write it in time)\n";
    if (runtime_log_info())
        (void)stderr_out_write(failed, sizeof failed - 1);
}

/* Registered after the CUDA runtime's own start-up, so (atexit being LIFO) it runs before the
 * runtime's teardown releases contexts; it makes no device call either way. */
static void
lifecycle_at_exit(void)
{
    struct cuprof_runtime *rt = atomic_load(&lifecycle_rt);
    if (unwind_caller_context() == UNWIND_CONTEXT_SIGNAL_HANDLER) {
        lifecycle_exit_in_handler(rt);
        return;
    }
    /* Written once: the dumper knows when the last snapshot is (at exit or by a signal). */
    dumper_exit(rt, lifecycle_wants_exit_dump(rt)); /* a failure was logged */
}

/* Two constant lines (this may be a signal handler) for an image ending where no snapshot may be
 * written: in a signal handler, or in code cuprof cannot unwind. */
struct lifecycle_no_dump_lines {
    const char *in_handler, *unknown;
};
#define LIFECYCLE_NO_DUMP(what)                                                                    \
    {                                                                                              \
        "cuprof: " what                                                                            \
        " in a signal handler: no exit snapshot (writing one there could deadlock "                \
        "the program)\n",                                                                          \
            "cuprof: " what " from code cuprof cannot unwind: no exit snapshot (call "             \
            "cuprof_dump_snapshot before " what ")\n"                                              \
    }

bool
lifecycle_image_end_due(void)
{
    struct cuprof_runtime *rt = atomic_load(&lifecycle_rt);
    /* A forked child that made no CUDA call (a subprocess whose exec failed) has nothing to do. */
    return rt != NULL && atomic_load(&lifecycle_pid) == getpid() &&
           !atomic_load(&lifecycle_idle_child) &&
           (rt->config->dump_on & LIFECYCLE_END_TRIGGERS) != 0;
}

/* True when this image's end may do what exit's handlers would: lifecycle_image_end_due, on a
 * stack without a signal frame. */
static bool
lifecycle_may_end_here(const struct lifecycle_no_dump_lines *lines)
{
    if (!lifecycle_image_end_due())
        return false;
    /* A handler may have interrupted this very thread inside cuprof, malloc or the loader, whose
     * locks the dump takes: it runs only where the whole stack shows no signal frame. */
    enum unwind_context where = unwind_caller_context();
    if (where == UNWIND_CONTEXT_PLAIN)
        return true;
    if (lifecycle_wants_exit_dump(atomic_load(&lifecycle_rt)) && runtime_log_info()) {
        const char *line =
            where == UNWIND_CONTEXT_SIGNAL_HANDLER ? lines->in_handler : lines->unknown;
        (void)stderr_out_write(line, strlen(line));
    }
    return false;
}

/* What exit's handlers would have done, where that cannot deadlock: _exit and quick_exit skip
 * them. */
static void
lifecycle_end_without_exit_handlers(const struct lifecycle_no_dump_lines *lines)
{
    if (lifecycle_may_end_here(lines)) {
        lifecycle_at_exit();
        control_stop(); /* as its atexit handler would */
    }
}

bool
lifecycle_before_exec(void)
{
    static const struct lifecycle_no_dump_lines lines = LIFECYCLE_NO_DUMP("exec");
    if (!lifecycle_may_end_here(&lines))
        return false;
    struct cuprof_runtime *rt = atomic_load(&lifecycle_rt);
    dumper_before_exec(rt, lifecycle_wants_exit_dump(rt));
    return true;
}

void
lifecycle_exec_failed(void)
{
    dumper_exec_failed();
}

/* quick_exit runs its own handlers instead of exit's (C11 allows it in a signal handler). */
static void
lifecycle_at_quick_exit(void)
{
    static const struct lifecycle_no_dump_lines lines = LIFECYCLE_NO_DUMP("quick_exit");
    lifecycle_end_without_exit_handlers(&lines);
}

void
lifecycle_immediate_exit(int status, enum lifecycle_exit_kind kind)
{
    static const struct lifecycle_no_dump_lines lines = LIFECYCLE_NO_DUMP("_exit");
    lifecycle_end_without_exit_handlers(&lines);
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
    /* The stack check of _exit, quick_exit and exec needs cuprof's unwinder ready: loading it
     * there could deadlock. */
    if ((rt->config->dump_on & LIFECYCLE_END_TRIGGERS) != 0)
        (void)unwind_init();
    if (pthread_atfork(lifecycle_fork_prepare, lifecycle_fork_parent, lifecycle_fork_child) != 0)
        runtime_log("cuprof: pthread_atfork failed: a forked child may deadlock in cuprof");
    if ((rt->config->dump_on & LIFECYCLE_END_TRIGGERS) == 0)
        return;
    if (atexit(lifecycle_at_exit) != 0)
        runtime_log("cuprof: atexit failed: no snapshot will be written at exit");
    if (at_quick_exit(lifecycle_at_quick_exit) != 0)
        runtime_log("cuprof: at_quick_exit failed: no snapshot will be written at quick_exit");
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
