/* lifecycle.c: constructor, fork handlers and the exit dump of libcuprof (at exit, _exit,
 * quick_exit and exec). */
#include "preload/lifecycle.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
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
#include "snapshot/loader_gate.h"
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
/* glibc's abort (or a later interposer's), found by the constructor. */
typedef void (*lifecycle_abort_fn)(void);
static _Atomic(lifecycle_abort_fn) lifecycle_next_abort;
/* This thread is in abort already: an abort inside the dump goes straight to glibc's. */
static _Thread_local bool lifecycle_aborting __attribute__((tls_model("initial-exec")));
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
    void *next_abort = real_dl_dlsym(RTLD_NEXT, "abort");
    lifecycle_abort_fn abort_fn;
    memcpy(&abort_fn, &next_abort, sizeof abort_fn);
    atomic_store(&lifecycle_next_abort, abort_fn);
    exec_dump_start();
    const struct cuprof_config *config = runtime_config();
    /* Another interposer preloaded ahead of us would otherwise see every call first and forward
     * it around us; off mode stays a pure pass-through. */
    if ((enum cuprof_mode)config->mode != CUPROF_MODE_OFF)
        layers_start();
}

/* Fork: hold the dump lock and every device lock across fork() so the child's copies are
 * consistent and unlocked, and let no cuprof or libunwind loader walk be under way (glibc 2.36
 * leaves the child the loader's lock held otherwise); no CUDA call is made in these handlers. */
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
    /* Last: the calls it waits for hold none of the locks above. */
    loader_gate_close_for_fork();
}

static void
lifecycle_fork_parent(void)
{
    struct cuprof_runtime *rt = atomic_load(&lifecycle_rt);
    loader_gate_open_after_fork();
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
    loader_gate_reset_after_fork();
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

/* The constant lines (this may be a signal handler) of an image's end that writes no snapshot,
 * for the function `what` that ended it. */
struct lifecycle_end_lines {
    const char *in_handler, *unknown, *interrupted, *timed_out;
};
#define LIFECYCLE_END_LINES(what)                                                                  \
    {                                                                                              \
        "cuprof: " what " in a signal handler: no exit snapshot (writing one there could "         \
        "deadlock the program)\n",                                                                 \
            "cuprof: " what " from code cuprof cannot unwind: no exit snapshot (call "             \
            "cuprof_dump_snapshot before " what ")\n",                                             \
            "cuprof: " what " in a signal handler that interrupted cuprof: no exit snapshot (the " \
            "interrupted code holds a lock it needs)\n",                                           \
            "cuprof: " what                                                                        \
            " in a signal handler: no exit snapshot (the dumper thread is off, or "                \
            "could not write it in time)\n"                                                        \
    }

static void
lifecycle_say(const struct cuprof_runtime *rt, const char *line)
{
    if (lifecycle_wants_exit_dump(rt) && runtime_log_info())
        (void)stderr_out_write(line, strlen(line));
}

/* What exit's handlers do, on this thread; it makes no device call. */
static void
lifecycle_exit_dump_here(void)
{
    struct cuprof_runtime *rt = atomic_load(&lifecycle_rt);
    /* Written once: the dumper knows when the last snapshot is (at exit or by a signal). */
    dumper_exit(rt, lifecycle_wants_exit_dump(rt)); /* a failure was logged */
}

/* How long an end in a signal handler waits for the dumper thread: ample for a full history
 * (10^7 entries a second are written), bounded where the handler interrupted a lock it needs. */
static unsigned
lifecycle_handler_exit_timeout_s(const struct cuprof_runtime *rt)
{
    uint64_t entries =
        rt->config->max_entries * (uint64_t)(rt->device_count > 0 ? rt->device_count : 1);
    return 10u + (unsigned)(entries / 500000u);
}

/* exit, _exit or quick_exit in a signal handler (a ^C handler that ends the program is common C):
 * the handler may have interrupted this thread holding a lock the dump takes, and a dump here
 * would wait for itself forever. Holding one of cuprof's (alloc_lock_depth): none. Otherwise (one
 * of malloc's or the loader's is possible) the dumper thread writes it, with time to give up. */
static void
lifecycle_exit_in_handler(const struct lifecycle_end_lines *lines)
{
    struct cuprof_runtime *rt = atomic_load(&lifecycle_rt);
    if (alloc_lock_depth != 0)
        lifecycle_say(rt, lines->interrupted);
    else if (!dumper_exit_on_thread(lifecycle_wants_exit_dump(rt), "",
                                    lifecycle_handler_exit_timeout_s(rt)))
        lifecycle_say(rt, lines->timed_out);
}

/* Registered after the CUDA runtime's own start-up, so (atexit being LIFO) it runs before the
 * runtime's teardown releases contexts. */
static void
lifecycle_at_exit(void)
{
    static const struct lifecycle_end_lines lines = LIFECYCLE_END_LINES("exit");
    /* Code cuprof cannot unwind (a JIT without unwind tables) is no handler as far as it knows. */
    if (unwind_caller_context() == UNWIND_CONTEXT_SIGNAL_HANDLER)
        lifecycle_exit_in_handler(&lines);
    else
        lifecycle_exit_dump_here();
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

/* What exit's handlers would have done: _exit and quick_exit skip them. Where the stack cannot be
 * walked, nothing: the code there may hold any lock. */
static void
lifecycle_end_without_exit_handlers(const struct lifecycle_end_lines *lines)
{
    if (!lifecycle_image_end_due())
        return;
    enum unwind_context where = unwind_caller_context();
    if (where == UNWIND_CONTEXT_PLAIN)
        lifecycle_exit_dump_here();
    else if (where == UNWIND_CONTEXT_SIGNAL_HANDLER)
        lifecycle_exit_in_handler(lines);
    else
        lifecycle_say(atomic_load(&lifecycle_rt), lines->unknown);
    control_stop(); /* as its atexit handler would */
}

bool
lifecycle_before_exec(void)
{
    static const struct lifecycle_end_lines lines = LIFECYCLE_END_LINES("exec");
    if (!lifecycle_image_end_due())
        return false;
    struct cuprof_runtime *rt = atomic_load(&lifecycle_rt);
    /* The dump lock stays held across the exec: not from a handler, whose thread may hold it. */
    enum unwind_context where = unwind_caller_context();
    if (where != UNWIND_CONTEXT_PLAIN) {
        lifecycle_say(rt,
                      where == UNWIND_CONTEXT_SIGNAL_HANDLER ? lines.in_handler : lines.unknown);
        return false;
    }
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
    static const struct lifecycle_end_lines lines = LIFECYCLE_END_LINES("quick_exit");
    lifecycle_end_without_exit_handlers(&lines);
}

void
lifecycle_immediate_exit(int status, enum lifecycle_exit_kind kind)
{
    static const struct lifecycle_end_lines lines = LIFECYCLE_END_LINES("_exit");
    lifecycle_end_without_exit_handlers(&lines);
    lifecycle_exit_fn next = atomic_load(&lifecycle_next_exit[kind]);
    if (next != NULL)
        next(status);
    for (;;) /* called before the constructor, or no libc _exit to find: the system call */
        syscall(SYS_exit_group, status);
}

void
lifecycle_abort(void)
{
    static const struct lifecycle_end_lines lines = {
        NULL, NULL,
        "cuprof: abort in a signal handler that interrupted cuprof: no snapshot (the interrupted "
        "code holds a lock it needs)\n",
        "cuprof: abort: no snapshot (the dumper thread is off, or could not write it in time)\n"};
    if (!lifecycle_aborting && lifecycle_image_end_due()) {
        lifecycle_aborting = true;
        struct cuprof_runtime *rt = atomic_load(&lifecycle_rt);
        /* The program is failing: its heap may be damaged, and this thread may hold a lock of
         * malloc's. The dumper thread, with its own, writes while this one waits. */
        if (alloc_lock_depth != 0)
            lifecycle_say(rt, lines.interrupted);
        else if (!dumper_exit_on_thread(lifecycle_wants_exit_dump(rt), "ended by abort",
                                        lifecycle_handler_exit_timeout_s(rt)))
            lifecycle_say(rt, lines.timed_out);
        control_stop();
    }
    lifecycle_abort_fn next = atomic_load(&lifecycle_next_abort);
    if (next != NULL)
        next();
    for (;;) { /* no glibc abort to find: SIGABRT at its default action */
        signal(SIGABRT, SIG_DFL);
        raise(SIGABRT);
        syscall(SYS_exit_group, 128 + SIGABRT);
    }
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
