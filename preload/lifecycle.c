/* lifecycle.c: constructor, fork handlers and the exit dump of libcuprof. */
#include "preload/lifecycle.h"

#include <pthread.h>
#include <stdlib.h>

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
#include "preload/nvtx.h"
#include "preload/runtime.h"
#include "preload/shim_vmm.h"
#include "preload/stream_id.h"
#include "snapshot/python_frames.h"
#include "snapshot/stacks.h"
#include "snapshot/trace_ring.h"
#include "snapshot/unloaded_modules.h"

atomic_bool lifecycle_forked;
static struct cuprof_runtime *lifecycle_rt; /* written once by lifecycle_register */
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
    dumper_fork_prepare();
    for (int d = 0; d < lifecycle_rt->device_count; d++)
        allocator_lock_device(lifecycle_rt->alloc, d);
    /* Leaf locks (never held across another lock), taken last. */
    cuda_backend_fork_prepare();
    shim_vmm_fork_prepare();
}

static void
lifecycle_fork_parent(void)
{
    shim_vmm_fork_parent();
    cuda_backend_fork_parent();
    for (int d = lifecycle_rt->device_count - 1; d >= 0; d--)
        allocator_unlock_device(lifecycle_rt->alloc, d);
    dumper_fork_parent();
}

/* The child keeps its parent's history and blocks (inherited, as the memory is): its snapshots
 * show them under its own pid, with the sequence number starting again at 0. */
static void
lifecycle_fork_child(void)
{
    /* The futex locks are plain words: the child resets them (a release could try to wake a
     * parent thread that was waiting, which the child does not have). */
    allocator_reset_after_fork(lifecycle_rt->alloc);
    trace_ring_reset_after_fork(lifecycle_rt->ring);
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

/* Registered after the CUDA runtime's own start-up, so (atexit being LIFO) it runs before the
 * runtime's teardown releases contexts; it makes no device call either way. */
static void
lifecycle_at_exit(void)
{
    /* Written once: the dumper knows when the last snapshot is (at exit or by a signal). */
    bool exit_dump = (lifecycle_rt->config->dump_on & CONFIG_DUMP_ON_EXIT) != 0 &&
                     !atomic_load(&lifecycle_idle_child);
    dumper_exit(lifecycle_rt, exit_dump); /* a failure was logged */
}

void
lifecycle_register(struct cuprof_runtime *rt)
{
    lifecycle_rt = rt;
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
