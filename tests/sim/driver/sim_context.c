/* cuInit, device queries, primary and created contexts, the per-thread context stack, and the
 * error-name tables. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "sim_config.h"
#include "sim_driver.h"
#include "sim_graph.h"

struct sim_state sim;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

#define SIM_CTX_STACK 32
static _Thread_local struct CUctx_st *ctx_stack[SIM_CTX_STACK];
static _Thread_local int ctx_depth;

static void
release_anon(void *arg, uintptr_t start, size_t len)
{
    (void)arg;
    /* The device pages go back to the OS, like a real free returning physical memory; lazily
     * (MADV_FREE), so a program that frees and allocates again reuses them without page faults
     * (MADV_DONTNEED made every test program's uncached run ~1.7x slower). Their contents are
     * then undefined, as a real cudaMalloc's are. */
    (void)madvise((void *)start, len, MADV_FREE);
}

static void
release_memfd(void *arg, uintptr_t start, size_t len)
{
    struct sim_device *dev = arg;
    (void)fallocate(dev->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)start,
                    (off_t)len);
}

static CUresult
device_init(struct sim_device *dev, int ordinal, size_t capacity)
{
    dev->ordinal = ordinal;
    dev->capacity = (capacity + SIM_PAGE - 1) / SIM_PAGE * SIM_PAGE;
    /* Slack beyond the capacity so fragmentation of the address space never causes an OOM that
     * the 2 MiB page accounting would not. */
    size_t slack = dev->capacity / 4;
    if (slack < ((size_t)64 << 20))
        slack = (size_t)64 << 20;
    dev->reserve = dev->capacity + slack / SIM_PAGE * SIM_PAGE;
    void *raw = mmap(NULL, dev->reserve + SIM_PAGE, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) {
        fprintf(stderr, "cuprof: sim: cannot reserve %zu bytes for device %d: %s\n", dev->reserve,
                ordinal, strerror(errno));
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    uintptr_t aligned = ((uintptr_t)raw + SIM_PAGE - 1) & ~(uintptr_t)(SIM_PAGE - 1);
    if (aligned > (uintptr_t)raw)
        munmap(raw, aligned - (uintptr_t)raw);
    munmap((void *)(aligned + dev->reserve),
           (uintptr_t)raw + dev->reserve + SIM_PAGE - aligned - dev->reserve);
    dev->base = (void *)aligned;
    /* A device's memory comes in 2 MiB pages; backing them with the host's huge pages where it
     * offers them (transparent huge pages, "madvise" mode) makes first touches one fault per
     * 2 MiB instead of 512: most of a test program's system time. */
    (void)madvise(dev->base, dev->reserve, MADV_HUGEPAGE);
    dev->memfd = memfd_create("simcuda-vmm", MFD_CLOEXEC);
    if (dev->memfd < 0 || ftruncate(dev->memfd, (off_t)dev->capacity) != 0) {
        fprintf(stderr, "cuprof: sim: cannot create VMM backing for device %d: %s\n", ordinal,
                strerror(errno));
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_init(&dev->lock, NULL);
    pthread_mutex_init(&dev->streams_lock, NULL);
    if (sim_heap_init(&dev->heap, aligned, dev->reserve, &dev->used_pages,
                      dev->capacity / SIM_PAGE) != 0 ||
        sim_heap_init(&dev->vmm_phys, 0, dev->capacity, &dev->used_pages,
                      dev->capacity / SIM_PAGE) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    dev->heap.release = release_anon;
    dev->vmm_phys.release = release_memfd;
    dev->vmm_phys.release_arg = dev;
    dev->context_pages = (sim_config_get()->context_mem + SIM_PAGE - 1) / SIM_PAGE;
    dev->primary = (struct CUctx_st){.dev = dev, .primary = true};
    dev->default_pool = (struct CUmemPoolHandle_st){.dev = dev, .is_default = true};
    return sim_stream_init_legacy(dev);
}

static void
fork_prepare(void)
{
    sim_graph_lock();
    sim_stream_fork_lock();
    sim_fail_fork_lock();
    sim_host_fork_lock();
    sim_vmm_fork_lock();
    for (int i = 0; i < sim.ndev; i++)
        pthread_mutex_lock(&sim.devs[i].lock);
}

static void
fork_done(bool child)
{
    for (int i = sim.ndev; i-- > 0;)
        pthread_mutex_unlock(&sim.devs[i].lock);
    sim_vmm_fork_unlock();
    sim_host_fork_unlock();
    sim_fail_fork_unlock();
    sim_stream_fork_unlock(child);
    sim_graph_unlock();
}

static void
fork_parent(void)
{
    fork_done(false);
}

static void
fork_child(void)
{
    fork_done(true);
}

static void
init_all(void)
{
    const struct sim_config *cfg = sim_config_get();
    if (cfg->error) {
        sim.init_error = cfg->error;
        return;
    }
    if (cfg->devices == 0) {
        sim.init_error = CUDA_ERROR_NO_DEVICE;
        return;
    }
    sim.devs = calloc((size_t)cfg->devices, sizeof(*sim.devs));
    if (!sim.devs) {
        sim.init_error = CUDA_ERROR_OUT_OF_MEMORY;
        return;
    }
    for (int i = 0; i < cfg->devices; i++) {
        CUresult r = device_init(&sim.devs[i], i, cfg->mem);
        if (r != CUDA_SUCCESS) {
            sim.init_error = r;
            return;
        }
    }
    sim.ndev = cfg->devices;
    (void)pthread_atfork(fork_prepare, fork_parent, fork_child);
    atomic_store_explicit(&sim.initialized, true, memory_order_release);
}

CUresult
cuInit(unsigned int Flags)
{
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&init_once, init_all);
    return sim.init_error ? (CUresult)sim.init_error : CUDA_SUCCESS;
}

CUresult
cuDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = SIM_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

struct sim_device *
sim_device_get(CUdevice d)
{
    return d >= 0 && d < sim.ndev ? &sim.devs[d] : NULL;
}

CUresult
sim_device_require(CUdevice d, struct sim_device **out)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    *out = sim_device_get(d);
    return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult
cuDeviceGetCount(int *count)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = sim.ndev;
    return CUDA_SUCCESS;
}

CUresult
cuDeviceGet(CUdevice *device, int ordinal)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_get(ordinal))
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult
cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_get(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "cuprof simulated GPU %d", dev);
    return CUDA_SUCCESS;
}

CUresult
cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_device *d = sim_device_get(dev);
    if (!d)
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = d->capacity;
    return CUDA_SUCCESS;
}

static int
attribute_value(CUdevice_attribute a, int ordinal)
{
    /* An H100-like device; anything not listed reads as 0 (unsupported feature). */
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
        return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
        return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
        return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
        return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
        return 49152;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
        return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
        return 32;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
        return 512;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT:
        return 32;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        return 132;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        return 9;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
        return 2048;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
        return 3;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
        return ordinal + 1;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
        return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
        return 50 << 20;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
        return 1980000;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
        return 2619000;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
        return sim_config_get()->no_vmm ? 0 : 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:
        return CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    default:
        return 0;
    }
}

CUresult
cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pi || (int)attrib < 1 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_get(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *pi = attribute_value(attrib, dev);
    return CUDA_SUCCESS;
}

/* ---- contexts ---- */

/* A context takes its own device memory while it lives (SIMCUDA_CONTEXT_MEM), so cuMemGetInfo's
 * used bytes exceed what the program allocated, as on a real GPU. False when it does not fit. */
static bool
ctx_charge_locked(struct sim_device *d)
{
    if (d->used_pages + d->context_pages > d->capacity / SIM_PAGE)
        return false;
    d->used_pages += d->context_pages;
    return true;
}

static void
ctx_uncharge_locked(struct sim_device *d)
{
    d->used_pages -= d->context_pages;
}

struct CUctx_st *
sim_ctx_current(void)
{
    return ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
}

CUresult
sim_ctx_require(struct CUctx_st **out)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct CUctx_st *c = sim_ctx_current();
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&c->dev->lock);
    bool dead = c->destroyed || (c->primary && c->dev->primary_refs == 0);
    pthread_mutex_unlock(&c->dev->lock);
    if (dead)
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = c;
    return CUDA_SUCCESS;
}

/* True when ctx is one of the driver's contexts and alive (a released primary context or a
 * destroyed one is not). Compared by address only: a handle the driver never made is never
 * dereferenced. */
bool
sim_ctx_live(const struct CUctx_st *ctx)
{
    for (int d = 0; d < sim.ndev; d++) {
        struct sim_device *dev = &sim.devs[d];
        bool found = false, live = false;
        pthread_mutex_lock(&dev->lock);
        if (ctx == &dev->primary) {
            found = true;
            live = dev->primary_refs > 0;
        }
        for (const struct CUctx_st *c = dev->created; c && !found; c = c->next)
            if (c == ctx) {
                found = true;
                live = !c->destroyed;
            }
        pthread_mutex_unlock(&dev->lock);
        if (found)
            return live;
    }
    return false;
}

CUresult
cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_device *d = sim_device_get(dev);
    if (!d)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&d->lock);
    bool fits = d->primary_refs > 0 || ctx_charge_locked(d);
    if (fits)
        d->primary_refs++;
    pthread_mutex_unlock(&d->lock);
    if (!fits)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *pctx = &d->primary;
    return CUDA_SUCCESS;
}

/* Frees every allocation of `ctx` after its device's queues drained (reset / destroy); its peer
 * access, both ways, goes with it. */
static void
ctx_teardown(struct CUctx_st *ctx)
{
    sim_device_sync(ctx->dev);
    (void)sim_device_free_owned(ctx->dev, ctx);
    sim_peer_forget(ctx);
    pthread_mutex_lock(&ctx->dev->lock);
    ctx->limits_set = 0; /* a new context starts from the default limits */
    ctx->dev->used_pages -= ctx->stack_pages;
    ctx->stack_pages = 0;
    pthread_mutex_unlock(&ctx->dev->lock);
}

CUresult
cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_device *d = sim_device_get(dev);
    if (!d)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&d->lock);
    if (d->primary_refs == 0) {
        pthread_mutex_unlock(&d->lock);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    bool last = --d->primary_refs == 0;
    if (last)
        ctx_uncharge_locked(d);
    pthread_mutex_unlock(&d->lock);
    /* The last release destroys the primary context with all its memory. */
    if (last)
        ctx_teardown(&d->primary);
    return CUDA_SUCCESS;
}

CUresult
cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return cuDevicePrimaryCtxRelease_v2(dev);
}

CUresult
cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_device *d = sim_device_get(dev);
    if (!d)
        return CUDA_ERROR_INVALID_DEVICE;
    ctx_teardown(&d->primary);
    pthread_mutex_lock(&d->lock);
    d->primary.flags = 0;
    pthread_mutex_unlock(&d->lock);
    return CUDA_SUCCESS;
}

CUresult
cuDevicePrimaryCtxReset(CUdevice dev)
{
    return cuDevicePrimaryCtxReset_v2(dev);
}

CUresult
cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_device *d = sim_device_get(dev);
    if (!d)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&d->lock);
    *flags = d->primary.flags;
    *active = d->primary_refs > 0;
    pthread_mutex_unlock(&d->lock);
    return CUDA_SUCCESS;
}

CUresult
cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_device *d = sim_device_get(dev);
    if (!d)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&d->lock);
    d->primary.flags = flags;
    pthread_mutex_unlock(&d->lock);
    return CUDA_SUCCESS;
}

CUresult
cuCtxGetCurrent(CUcontext *pctx)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = sim_ctx_current();
    return CUDA_SUCCESS;
}

CUresult
cuCtxSetCurrent(CUcontext ctx)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ctx) {
        if (ctx_depth)
            ctx_depth--;
        return CUDA_SUCCESS;
    }
    if (ctx_depth == 0)
        ctx_depth = 1;
    ctx_stack[ctx_depth - 1] = ctx;
    return CUDA_SUCCESS;
}

CUresult
cuCtxPushCurrent_v2(CUcontext ctx)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == SIM_CTX_STACK)
        return CUDA_ERROR_OUT_OF_MEMORY;
    ctx_stack[ctx_depth++] = ctx;
    return CUDA_SUCCESS;
}

CUresult
cuCtxPushCurrent(CUcontext ctx)
{
    return cuCtxPushCurrent_v2(ctx);
}

CUresult
cuCtxPopCurrent_v2(CUcontext *pctx)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (ctx_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct CUctx_st *c = ctx_stack[--ctx_depth];
    if (pctx)
        *pctx = c;
    return CUDA_SUCCESS;
}

CUresult
cuCtxPopCurrent(CUcontext *pctx)
{
    return cuCtxPopCurrent_v2(pctx);
}

CUresult
cuCtxGetDevice(CUdevice *device)
{
    struct CUctx_st *c;
    CUresult r = sim_ctx_require(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = c->dev->ordinal;
    return CUDA_SUCCESS;
}

/* CUDA 13: the context is explicit; NULL means the current one. */
CUresult
cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    if (!ctx)
        return cuCtxGetDevice(device);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = ctx->dev->ordinal;
    return CUDA_SUCCESS;
}

CUresult
cuCtxSynchronize(void)
{
    struct CUctx_st *c;
    CUresult r = sim_ctx_require(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (sim_capture_active() && (r = sim_capture_check_unsafe()) != CUDA_SUCCESS)
        return r;
    int err = sim_fail_check(SIM_FAIL_SYNC, 0); /* a capture's refusal, on demand */
    if (err != 0)
        return (CUresult)err;
    sim_device_sync(c->dev);
    return CUDA_SUCCESS;
}

CUresult
cuCtxSynchronize_v2(CUcontext ctx)
{
    if (!ctx)
        return cuCtxSynchronize();
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    sim_device_sync(ctx->dev);
    return CUDA_SUCCESS;
}

CUresult
cuCtxGetFlags(unsigned int *flags)
{
    struct CUctx_st *c;
    CUresult r = sim_ctx_require(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&c->dev->lock);
    *flags = c->flags;
    pthread_mutex_unlock(&c->dev->lock);
    return CUDA_SUCCESS;
}

/* No profiling tool here: starting and stopping its collection is accepted in a context and
 * changes nothing. */
CUresult
cuProfilerStart(void)
{
    struct CUctx_st *c;
    return sim_ctx_require(&c);
}

CUresult
cuProfilerStop(void)
{
    struct CUctx_st *c;
    return sim_ctx_require(&c);
}

CUresult
cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    struct CUctx_st *c;
    CUresult r = sim_ctx_require(&c);
    if (r != CUDA_SUCCESS)
        return r;
    /* cuStreamCreateWithPriority clamps to this range; a NULL pointer is not written. */
    if (leastPriority)
        *leastPriority = 0;
    if (greatestPriority)
        *greatestPriority = -5;
    return CUDA_SUCCESS;
}

/* A limit's value before cuCtxSetLimit: the documented defaults (stack 1 KiB, printf FIFO 1 MiB,
 * device malloc heap 8 MiB, 2048 pending launches), a 64-byte L2 fetch granularity and no
 * persisting L2. False for a limit this compute capability 9.0 device lacks: the sync depth
 * (compute capability < 9.0 only) and the CIG limits (no CIG contexts here). */
static bool
limit_default(CUlimit limit, size_t *value)
{
    switch (limit) {
    case CU_LIMIT_STACK_SIZE:
        *value = 1024;
        return true;
    case CU_LIMIT_PRINTF_FIFO_SIZE:
        *value = (size_t)1 << 20;
        return true;
    case CU_LIMIT_MALLOC_HEAP_SIZE:
        *value = (size_t)8 << 20;
        return true;
    case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT:
        *value = 2048;
        return true;
    case CU_LIMIT_MAX_L2_FETCH_GRANULARITY:
        *value = 64;
        return true;
    case CU_LIMIT_PERSISTING_L2_CACHE_SIZE:
        *value = 0;
        return true;
    default:
        return false;
    }
}

CUresult
cuCtxSetLimit(CUlimit limit, size_t value)
{
    struct CUctx_st *c;
    CUresult r = sim_ctx_require(&c);
    if (r != CUDA_SUCCESS)
        return r;
    size_t unused;
    if (!limit_default(limit, &unused))
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    /* cuda.h: the granularity ranges over 0..128 bytes and may be clamped. */
    if (limit == CU_LIMIT_MAX_L2_FETCH_GRANULARITY && value > 128)
        value = 128;
    pthread_mutex_lock(&c->dev->lock);
    /* A larger stack is device memory for every thread the device can hold, taken now: the
     * driver answers CUDA_ERROR_OUT_OF_MEMORY when it does not fit (cuda.h) and keeps the old. */
    if (limit == CU_LIMIT_STACK_SIZE) {
        size_t pages = sim_module_stack_pages(value);
        if (pages > c->stack_pages && !sim_module_charge_locked(c->dev, pages - c->stack_pages)) {
            pthread_mutex_unlock(&c->dev->lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (pages < c->stack_pages)
            c->dev->used_pages -= c->stack_pages - pages;
        c->stack_pages = pages;
    }
    c->limits[limit] = value;
    c->limits_set |= 1u << limit;
    pthread_mutex_unlock(&c->dev->lock);
    return CUDA_SUCCESS;
}

CUresult
cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
    struct CUctx_st *c;
    CUresult r = sim_ctx_require(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pvalue)
        return CUDA_ERROR_INVALID_VALUE;
    size_t value;
    if (!limit_default(limit, &value))
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    pthread_mutex_lock(&c->dev->lock);
    if (c->limits_set & (1u << limit))
        value = c->limits[limit];
    pthread_mutex_unlock(&c->dev->lock);
    *pvalue = value;
    return CUDA_SUCCESS;
}

/* Every ABI of cuCtxCreate: a context of its own on `dev`, made current (pushed). Affinity and
 * creation parameters change nothing here. */
static CUresult
ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_device *d = sim_device_get(dev);
    if (!d)
        return CUDA_ERROR_INVALID_DEVICE;
    if (ctx_depth == SIM_CTX_STACK)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct CUctx_st *c = calloc(1, sizeof(*c));
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->dev = d;
    c->flags = flags;
    /* Kept on the device list after destruction so stale handles stay readable. */
    pthread_mutex_lock(&d->lock);
    if (!ctx_charge_locked(d)) {
        pthread_mutex_unlock(&d->lock);
        free(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->next = d->created;
    d->created = c;
    pthread_mutex_unlock(&d->lock);
    ctx_stack[ctx_depth++] = c;
    *pctx = c;
    return CUDA_SUCCESS;
}

CUresult
cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
               CUdevice dev)
{
    (void)ctxCreateParams;
    return ctx_create(pctx, flags, dev);
}

CUresult
cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams, unsigned int flags,
               CUdevice dev)
{
    (void)paramsArray, (void)numParams;
    return ctx_create(pctx, flags, dev);
}

CUresult
cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return ctx_create(pctx, flags, dev);
}

CUresult
cuCtxDestroy_v2(CUcontext ctx)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (ctx->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&ctx->dev->lock);
    bool was = ctx->destroyed;
    ctx->destroyed = true;
    if (!was)
        ctx_uncharge_locked(ctx->dev);
    pthread_mutex_unlock(&ctx->dev->lock);
    if (was)
        return CUDA_ERROR_INVALID_CONTEXT;
    ctx_teardown(ctx);
    for (int i = 0; i < ctx_depth; i++)
        if (ctx_stack[i] == ctx) {
            memmove(&ctx_stack[i], &ctx_stack[i + 1],
                    (size_t)(ctx_depth - i - 1) * sizeof(ctx_stack[0]));
            ctx_depth--;
            i--;
        }
    return CUDA_SUCCESS;
}

CUresult
cuCtxDestroy(CUcontext ctx)
{
    return cuCtxDestroy_v2(ctx);
}

/* ---- errors and private tables ---- */

CUresult
cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    switch (error) {
#define SIM_ERROR(name, text)                                                                      \
    case name:                                                                                     \
        *pStr = #name;                                                                             \
        return CUDA_SUCCESS;
#include "sim_errors.def"
#undef SIM_ERROR
    default:
        *pStr = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult
cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    switch (error) {
#define SIM_ERROR(name, text)                                                                      \
    case name:                                                                                     \
        *pStr = text;                                                                              \
        return CUDA_SUCCESS;
#include "sim_errors.def"
#undef SIM_ERROR
    default:
        *pStr = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
}

void
sim_busy_wait_us(unsigned long us)
{
    if (!us)
        return;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((unsigned long)((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000) <
             us);
}
