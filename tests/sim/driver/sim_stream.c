/* Streams as real queues (one worker thread each), the legacy and per-thread default streams,
 * and events that complete when their stream reaches them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim_config.h"
#include "sim_driver.h"
#include "sim_graph.h"
#include "sim_stream.h"

enum sim_op_type { OP_COPY, OP_SET, OP_HOSTFN, OP_CALLBACK, OP_RECORD, OP_WAIT_EVENT, OP_FREE };

struct sim_dep {
    struct CUstream_st *s;
    uint64_t seq;
};

struct sim_op {
    enum sim_op_type type;
    void *dst;
    const void *src;
    size_t n;
    /* Copies and memsets: `rows` rows of n bytes, the pitches apart (1 row for a plain one). */
    size_t rows, dst_pitch, src_pitch;
    int val;
    CUhostFn fn;
    CUstreamCallback callback; /* OP_CALLBACK: callback(callback_stream, CUDA_SUCCESS, arg) */
    CUstream callback_stream;
    void *arg;
    struct CUevent_st *ev;
    uint64_t gen;
    struct sim_dep *deps;
    int ndeps;
    struct sim_op *next;
};

static pthread_once_t pts_once = PTHREAD_ONCE_INIT;
static pthread_key_t pts_key;
#define SIM_MAX_DEVICES 64
static _Thread_local struct CUstream_st *pts[SIM_MAX_DEVICES];

static void
stream_ref(struct CUstream_st *s)
{
    atomic_fetch_add(&s->refs, 1);
}

static void
stream_unref(struct CUstream_st *s)
{
    if (atomic_fetch_sub(&s->refs, 1) == 1 && !s->legacy) {
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->cond);
        free(s);
    }
}

static void
stream_setup(struct CUstream_st *s, struct sim_device *dev, struct CUctx_st *ctx, unsigned flags,
             int priority)
{
    s->dev = dev;
    s->ctx = ctx;
    s->flags = flags;
    s->priority = priority;
    atomic_init(&s->refs, 1);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
}

CUresult
sim_stream_init_legacy(struct sim_device *dev)
{
    stream_setup(&dev->legacy, dev, &dev->primary, 0, 0);
    dev->legacy.legacy = true;
    return CUDA_SUCCESS;
}

static void
run_op(struct sim_op *op)
{
    switch (op->type) {
    case OP_COPY:
        for (size_t r = 0; r < op->rows; r++)
            memmove((char *)op->dst + r * op->dst_pitch, (const char *)op->src + r * op->src_pitch,
                    op->n);
        break;
    case OP_SET:
        for (size_t r = 0; r < op->rows; r++)
            memset((char *)op->dst + r * op->dst_pitch, op->val, op->n);
        break;
    case OP_HOSTFN:
        op->fn(op->arg);
        break;
    case OP_CALLBACK: /* no device errors are simulated: every callback hears of success */
        op->callback(op->callback_stream, CUDA_SUCCESS, op->arg);
        break;
    case OP_RECORD: /* completed by complete_record, once the stream has counted it */
        break;
    case OP_WAIT_EVENT:
        pthread_mutex_lock(&op->ev->lock);
        while (op->ev->done_gen < op->gen)
            pthread_cond_wait(&op->ev->cond, &op->ev->lock);
        pthread_mutex_unlock(&op->ev->lock);
        break;
    case OP_FREE: {
        /* Validated and marked when queued, so this cannot fail. */
        CUresult r = sim_mem_free_now((uintptr_t)op->dst, true);
        (void)r;
        break;
    }
    }
}

/* An event completes together with its stream's count of completed work (lock order: the
 * stream's, then the event's): a thread woken by cuEventSynchronize finds the stream past the
 * record, and one woken by cuStreamSynchronize finds the event done, as on a real device. */
static void
complete_record(struct sim_op *op)
{
    pthread_mutex_lock(&op->ev->lock);
    if (op->gen > op->ev->done_gen) {
        op->ev->done_gen = op->gen;
        clock_gettime(CLOCK_MONOTONIC, &op->ev->when);
    }
    pthread_cond_broadcast(&op->ev->cond);
    pthread_mutex_unlock(&op->ev->lock);
}

static void *
stream_worker(void *arg)
{
    struct CUstream_st *s = arg;
    unsigned long delay = sim_config_get()->stream_delay_us;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        while (!s->head && !s->stopping)
            pthread_cond_wait(&s->cond, &s->lock);
        struct sim_op *op = s->head;
        pthread_mutex_unlock(&s->lock);
        if (!op)
            break;
        for (int i = 0; i < op->ndeps; i++) {
            struct CUstream_st *t = op->deps[i].s;
            pthread_mutex_lock(&t->lock);
            while (t->completed < op->deps[i].seq)
                pthread_cond_wait(&t->cond, &t->lock);
            pthread_mutex_unlock(&t->lock);
            stream_unref(t);
        }
        if (delay) {
            /* Simulated kernel time for every queued operation. */
            struct timespec ts = {.tv_sec = (time_t)(delay / 1000000),
                                  .tv_nsec = (long)(delay % 1000000) * 1000};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
            }
        }
        run_op(op);
        free(op->deps);
        pthread_mutex_lock(&s->lock);
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        s->completed++;
        atomic_fetch_sub_explicit(&s->dev->pending_ops, 1, memory_order_release);
        if (op->type == OP_RECORD) /* under s->lock: no one sees the stream idle before it */
            complete_record(op);
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        if (op->ev)
            sim_event_unref(op->ev);
        free(op);
    }
    return NULL;
}

/* Adds a dependency on everything `t` has queued so far (legacy-stream synchronisation). */
static bool
add_dep(struct sim_op *op, struct CUstream_st *t, int *cap)
{
    pthread_mutex_lock(&t->lock);
    uint64_t seq = t->submitted, done = t->completed;
    pthread_mutex_unlock(&t->lock);
    if (seq == done)
        return true;
    if (op->ndeps == *cap) {
        int ncap = *cap ? *cap * 2 : 4;
        struct sim_dep *d = realloc(op->deps, (size_t)ncap * sizeof(*d));
        if (!d)
            return false;
        op->deps = d;
        *cap = ncap;
    }
    stream_ref(t);
    op->deps[op->ndeps++] = (struct sim_dep){t, seq};
    return true;
}

static void
op_discard(struct sim_op *op)
{
    if (op->ev)
        sim_event_unref(op->ev);
    free(op);
}

static CUresult
submit(struct CUstream_st *s, struct sim_op *op, bool wait)
{
    struct sim_device *dev = s->dev;
    int cap = 0;
    bool ok = true;
    if (sim_capture_active()) {
        bool taken = false;
        CUresult r = sim_capture_submit(s, op, wait, &taken);
        if (taken) {
            if (r != CUDA_SUCCESS)
                op_discard(op);
            return r;
        }
    }
    /* Legacy default stream semantics: it waits for all blocking streams, and blocking streams
     * wait for it. The device-wide lock makes the captured dependencies acyclic. */
    pthread_mutex_lock(&dev->streams_lock);
    if (s->legacy) {
        for (struct CUstream_st *t = dev->streams; t && ok; t = t->next)
            if (!(t->flags & CU_STREAM_NON_BLOCKING))
                ok = add_dep(op, t, &cap);
    } else if (!(s->flags & CU_STREAM_NON_BLOCKING)) {
        ok = add_dep(op, &dev->legacy, &cap);
    }
    if (!ok) {
        pthread_mutex_unlock(&dev->streams_lock);
        for (int i = 0; i < op->ndeps; i++)
            stream_unref(op->deps[i].s);
        free(op->deps);
        if (op->ev)
            sim_event_unref(op->ev);
        free(op);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&s->lock);
    if (!s->has_worker) {
        if (pthread_create(&s->worker, NULL, stream_worker, s) != 0) {
            pthread_mutex_unlock(&s->lock);
            pthread_mutex_unlock(&dev->streams_lock);
            for (int i = 0; i < op->ndeps; i++)
                stream_unref(op->deps[i].s);
            free(op->deps);
            if (op->ev)
                sim_event_unref(op->ev);
            free(op);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        s->has_worker = true;
    }
    uint64_t seq = ++s->submitted;
    atomic_fetch_add_explicit(&dev->pending_ops, 1, memory_order_relaxed);
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&dev->streams_lock);
    if (wait) {
        pthread_mutex_lock(&s->lock);
        while (s->completed < seq)
            pthread_cond_wait(&s->cond, &s->lock);
        pthread_mutex_unlock(&s->lock);
    }
    return CUDA_SUCCESS;
}

void
sim_stream_sync(struct CUstream_st *s)
{
    pthread_mutex_lock(&s->lock);
    uint64_t target = s->submitted;
    while (s->completed < target)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

void
sim_device_sync(struct sim_device *dev)
{
    /* Nothing queued, by this thread or any other whose submission it could have seen: every
     * operation's effects are visible through the acquire. */
    if (atomic_load_explicit(&dev->pending_ops, memory_order_acquire) == 0)
        return;
    size_t n = 0, cap = 16;
    struct CUstream_st **list = malloc(cap * sizeof(*list));
    pthread_mutex_lock(&dev->streams_lock);
    for (struct CUstream_st *t = dev->streams; t && list; t = t->next) {
        if (n == cap) {
            struct CUstream_st **l = realloc(list, cap * 2 * sizeof(*l));
            if (!l)
                break;
            list = l;
            cap *= 2;
        }
        stream_ref(t);
        list[n++] = t;
    }
    pthread_mutex_unlock(&dev->streams_lock);
    sim_stream_sync(&dev->legacy);
    for (size_t i = 0; i < n; i++) {
        sim_stream_sync(list[i]);
        stream_unref(list[i]);
    }
    free(list);
}

static CUresult
stream_create(struct CUstream_st **out, struct sim_device *dev, struct CUctx_st *ctx,
              unsigned flags, int priority, bool per_thread)
{
    struct CUstream_st *s = calloc(1, sizeof(*s));
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    stream_setup(s, dev, ctx, flags, priority);
    s->per_thread = per_thread;
    pthread_mutex_lock(&dev->streams_lock);
    s->next = dev->streams;
    dev->streams = s;
    pthread_mutex_unlock(&dev->streams_lock);
    *out = s;
    return CUDA_SUCCESS;
}

static void
stream_destroy(struct CUstream_st *s)
{
    struct sim_device *dev = s->dev;
    if (sim_capture_active())
        sim_capture_forget_stream(s);
    pthread_mutex_lock(&dev->streams_lock);
    for (struct CUstream_st **pp = &dev->streams; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    pthread_mutex_unlock(&dev->streams_lock);
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    bool join = s->has_worker;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    /* Queued work still runs to completion, as on a real device. */
    if (join)
        pthread_join(s->worker, NULL);
    stream_unref(s);
}

/* Every stream lock of every device, in the order submit takes them: a device's streams_lock,
 * then its streams. (`fn` runs on each stream with its lock held.) */
static void
each_stream(void (*fn)(struct CUstream_st *))
{
    for (int i = 0; i < sim.ndev; i++) {
        struct sim_device *dev = &sim.devs[i];
        fn(&dev->legacy);
        for (struct CUstream_st *t = dev->streams; t; t = t->next)
            fn(t);
    }
}

static void
lock_stream(struct CUstream_st *s)
{
    pthread_mutex_lock(&s->lock);
}

static void
unlock_stream(struct CUstream_st *s)
{
    pthread_mutex_unlock(&s->lock);
}

/* In a forked child: the stream's worker did not survive, and the work queued in the parent is
 * the parent's. The stream starts idle (a new submission starts a worker) and its condition
 * variable anew, as no thread of the parent waits on it here. */
static void
reset_stream_in_child(struct CUstream_st *s)
{
    s->head = s->tail = NULL; /* the ops stay with the parent (freeing them here could race) */
    s->completed = s->submitted;
    s->has_worker = false;
    pthread_cond_init(&s->cond, NULL);
    pthread_mutex_unlock(&s->lock);
}

void
sim_stream_fork_lock(void)
{
    for (int i = 0; i < sim.ndev; i++)
        pthread_mutex_lock(&sim.devs[i].streams_lock);
    each_stream(lock_stream);
}

void
sim_stream_fork_unlock(bool child)
{
    each_stream(child ? reset_stream_in_child : unlock_stream);
    for (int i = sim.ndev; i-- > 0;) {
        if (child) /* every stream of the child starts idle */
            atomic_store_explicit(&sim.devs[i].pending_ops, 0, memory_order_relaxed);
        pthread_mutex_unlock(&sim.devs[i].streams_lock);
    }
}

static void
pts_destructor(void *unused)
{
    (void)unused;
    for (int i = 0; i < SIM_MAX_DEVICES; i++)
        if (pts[i]) {
            stream_destroy(pts[i]);
            pts[i] = NULL;
        }
}

static void
pts_key_init(void)
{
    (void)pthread_key_create(&pts_key, pts_destructor);
}

static CUresult
per_thread_stream(struct CUctx_st *ctx, struct CUstream_st **out)
{
    int d = ctx->dev->ordinal;
    if (!pts[d]) {
        pthread_once(&pts_once, pts_key_init);
        CUresult r = stream_create(&pts[d], ctx->dev, &ctx->dev->primary, 0, 0, true);
        if (r != CUDA_SUCCESS)
            return r;
        (void)pthread_setspecific(pts_key, pts);
    }
    *out = pts[d];
    return CUDA_SUCCESS;
}

CUresult
sim_stream_resolve(CUstream h, bool ptsz, struct CUstream_st **out)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (h == CU_STREAM_PER_THREAD || (h == NULL && ptsz))
        return per_thread_stream(ctx, out);
    if (h == NULL || h == CU_STREAM_LEGACY) {
        *out = &ctx->dev->legacy;
        return CUDA_SUCCESS;
    }
    for (int i = 0; i < sim.ndev; i++) {
        struct sim_device *dev = &sim.devs[i];
        pthread_mutex_lock(&dev->streams_lock);
        for (struct CUstream_st *t = dev->streams; t; t = t->next)
            if (t == h && !t->per_thread) {
                pthread_mutex_unlock(&dev->streams_lock);
                *out = t;
                return CUDA_SUCCESS;
            }
        pthread_mutex_unlock(&dev->streams_lock);
    }
    /* A real driver's behaviour with a destroyed handle is undefined; tests that must never
     * pass one ask to hear about it. */
    if (sim_config_get()->strict_handles)
        fprintf(stderr, "cuprof: sim: stream handle %p is not a live stream\n", (void *)h);
    return CUDA_ERROR_INVALID_HANDLE;
}

static struct sim_op *
op_new(enum sim_op_type type)
{
    struct sim_op *op = calloc(1, sizeof(*op));
    if (op)
        op->type = type;
    return op;
}

/* Only copies, memsets, host functions and callbacks become graph nodes (records and waits shape
 * the capture, frees are graph memory): their fields are all plain values. */
struct sim_op *
sim_op_clone(const struct sim_op *op)
{
    struct sim_op *c = op_new(op->type);
    if (c) {
        *c = *op;
        c->deps = NULL;
        c->ndeps = 0;
        c->next = NULL;
        c->ev = NULL;
    }
    return c;
}

void
sim_op_free(struct sim_op *op)
{
    op_discard(op);
}

CUresult
sim_stream_submit_op(struct CUstream_st *s, struct sim_op *op)
{
    return submit(s, op, false);
}

CUresult
sim_stream_enqueue_free(struct CUstream_st *s, uintptr_t ptr)
{
    struct sim_op *op = op_new(OP_FREE);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->dst = (void *)ptr;
    return submit(s, op, false);
}

CUresult
sim_stream_copy(struct CUstream_st *s, void *dst, const void *src, size_t n, bool wait)
{
    return sim_stream_copy_2d(s, dst, 0, src, 0, n, 1, wait);
}

CUresult
sim_stream_copy_2d(struct CUstream_st *s, void *dst, size_t dst_pitch, const void *src,
                   size_t src_pitch, size_t n, size_t rows, bool wait)
{
    struct sim_op *op = op_new(OP_COPY);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->dst = dst;
    op->src = src;
    op->n = n;
    op->rows = rows;
    op->dst_pitch = dst_pitch;
    op->src_pitch = src_pitch;
    return submit(s, op, wait);
}

CUresult
sim_stream_set(struct CUstream_st *s, void *dst, int val, size_t n, bool wait)
{
    return sim_stream_set_2d(s, dst, 0, val, n, 1, wait);
}

CUresult
sim_stream_set_2d(struct CUstream_st *s, void *dst, size_t dst_pitch, int val, size_t n,
                  size_t rows, bool wait)
{
    struct sim_op *op = op_new(OP_SET);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->dst = dst;
    op->val = val;
    op->n = n;
    op->rows = rows;
    op->dst_pitch = dst_pitch;
    return submit(s, op, wait);
}

/* ---- stream entry points ---- */

CUresult
cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    /* Priorities clamp to the device range [-5, 0] like the real driver. */
    if (priority < -5)
        priority = -5;
    if (priority > 0)
        priority = 0;
    return stream_create(phStream, ctx->dev, ctx, flags, priority, false);
}

CUresult
cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    return cuStreamCreateWithPriority(phStream, Flags, 0);
}

CUresult
cuStreamDestroy_v2(CUstream hStream)
{
    struct CUstream_st *s;
    if (hStream == NULL || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD)
        return sim_check_init() != CUDA_SUCCESS ? CUDA_ERROR_NOT_INITIALIZED
                                                : CUDA_ERROR_INVALID_HANDLE;
    CUresult r = sim_stream_resolve(hStream, false, &s);
    if (r != CUDA_SUCCESS)
        return r;
    stream_destroy(s);
    return CUDA_SUCCESS;
}

CUresult
cuStreamDestroy(CUstream hStream)
{
    return cuStreamDestroy_v2(hStream);
}

static CUresult
stream_synchronize(CUstream h, bool ptsz)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (sim_capture_active() && (r = sim_capture_check_sync(s, NULL)) != CUDA_SUCCESS)
        return r;
    /* Legacy-stream work already depends on the blocking streams' earlier work. */
    sim_stream_sync(s);
    return CUDA_SUCCESS;
}

CUresult
cuStreamSynchronize(CUstream hStream)
{
    return stream_synchronize(hStream, false);
}

CUresult
cuStreamSynchronize_ptsz(CUstream hStream)
{
    return stream_synchronize(hStream, true);
}

static CUresult
stream_query(CUstream h, bool ptsz)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (sim_capture_active() && (r = sim_capture_check_sync(s, NULL)) != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&s->lock);
    bool done = s->completed == s->submitted;
    pthread_mutex_unlock(&s->lock);
    return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult
cuStreamQuery(CUstream hStream)
{
    return stream_query(hStream, false);
}

CUresult
cuStreamQuery_ptsz(CUstream hStream)
{
    return stream_query(hStream, true);
}

static CUresult
stream_wait_event(CUstream h, CUevent ev, unsigned flags, bool ptsz)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_capture_active()) {
        bool taken = false;
        r = sim_capture_wait(s, ev, &taken);
        if (taken)
            return r;
    }
    pthread_mutex_lock(&ev->lock);
    uint64_t gen = ev->record_gen;
    pthread_mutex_unlock(&ev->lock);
    if (gen == 0)
        return CUDA_SUCCESS; /* never recorded: nothing to wait for */
    struct sim_op *op = op_new(OP_WAIT_EVENT);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    atomic_fetch_add(&ev->refs, 1);
    op->ev = ev;
    op->gen = gen;
    return submit(s, op, false);
}

CUresult
cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    return stream_wait_event(hStream, hEvent, Flags, false);
}

CUresult
cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    return stream_wait_event(hStream, hEvent, Flags, true);
}

static CUresult
stream_get_ctx(CUstream h, CUcontext *pctx, bool ptsz)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = s->legacy || s->per_thread ? sim_ctx_current() : s->ctx;
    return CUDA_SUCCESS;
}

CUresult
cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    return stream_get_ctx(hStream, pctx, false);
}

CUresult
cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx)
{
    return stream_get_ctx(hStream, pctx, true);
}

static CUresult
stream_get_device(CUstream h, CUdevice *device, bool ptsz)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = s->dev->ordinal;
    return CUDA_SUCCESS;
}

CUresult
cuStreamGetDevice(CUstream hStream, CUdevice *device)
{
    return stream_get_device(hStream, device, false);
}

CUresult
cuStreamGetDevice_ptsz(CUstream hStream, CUdevice *device)
{
    return stream_get_device(hStream, device, true);
}

static CUresult
launch_host_func(CUstream h, CUhostFn fn, void *data, bool ptsz)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_op *op = op_new(OP_HOSTFN);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->fn = fn;
    op->arg = data;
    return submit(s, op, false);
}

CUresult
cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    return launch_host_func(hStream, fn, userData, false);
}

CUresult
cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    return launch_host_func(hStream, fn, userData, true);
}

static CUresult
stream_add_callback(CUstream h, CUstreamCallback callback, void *data, unsigned flags, bool ptsz)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!callback || flags != 0) /* flags: reserved, must be 0 */
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_op *op = op_new(OP_CALLBACK);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->callback = callback;
    op->callback_stream = h; /* the handle the caller named, as the driver passes it back */
    op->arg = data;
    return submit(s, op, false);
}

CUresult
cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags)
{
    return stream_add_callback(hStream, callback, userData, flags, false);
}

CUresult
cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback, void *userData,
                         unsigned int flags)
{
    return stream_add_callback(hStream, callback, userData, flags, true);
}

/* The default streams have priority 0 and flags 0 (blocking). */
static CUresult
stream_get_priority(CUstream h, int *priority, bool ptsz)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!priority)
        return CUDA_ERROR_INVALID_VALUE;
    *priority = s->priority;
    return CUDA_SUCCESS;
}

CUresult
cuStreamGetPriority(CUstream hStream, int *priority)
{
    return stream_get_priority(hStream, priority, false);
}

CUresult
cuStreamGetPriority_ptsz(CUstream hStream, int *priority)
{
    return stream_get_priority(hStream, priority, true);
}

static CUresult
stream_get_flags(CUstream h, unsigned *flags, bool ptsz)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = s->flags;
    return CUDA_SUCCESS;
}

CUresult
cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
    return stream_get_flags(hStream, flags, false);
}

CUresult
cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags)
{
    return stream_get_flags(hStream, flags, true);
}

/* ---- event records (sim_event.c has the rest of the events) ---- */

static CUresult
event_record(CUevent ev, CUstream h, unsigned flags, bool ptsz)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_capture_active()) {
        bool taken = false;
        r = sim_capture_record(s, ev, &taken);
        if (taken)
            return r;
    }
    struct sim_op *op = op_new(OP_RECORD);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    atomic_fetch_add(&ev->refs, 1);
    pthread_mutex_lock(&ev->lock);
    op->gen = ++ev->record_gen;
    pthread_mutex_unlock(&ev->lock);
    op->ev = ev;
    return submit(s, op, false);
}

CUresult
cuEventRecord(CUevent hEvent, CUstream hStream)
{
    return event_record(hEvent, hStream, 0, false);
}

CUresult
cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    return event_record(hEvent, hStream, 0, true);
}

CUresult
cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    return event_record(hEvent, hStream, flags, false);
}

CUresult
cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    return event_record(hEvent, hStream, flags, true);
}
