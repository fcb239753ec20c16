/* Page-locked host memory: cuMemHostAlloc/cuMemAllocHost blocks (anonymous mappings, not charged
 * to any device) and ranges of the program's own memory made known by cuMemHostRegister. Both
 * are "host memory CUDA knows" for pointer attributes and mapped device pointers (unified
 * addressing: the device pointer is the host address). */
#include <stdlib.h>
#include <sys/mman.h>

#include "sim_driver.h"

struct sim_host_block {
    uintptr_t start;
    size_t size;
    unsigned flags;  /* CU_MEMHOSTALLOC_* or CU_MEMHOSTREGISTER_* as given */
    bool registered; /* cuMemHostRegister'ed program memory, not ours to unmap */
    uint64_t id;     /* CU_POINTER_ATTRIBUTE_BUFFER_ID */
    struct sim_host_block *next;
};

static pthread_mutex_t host_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_host_block *host_blocks; /* protected by host_lock */

void
sim_host_fork_lock(void)
{
    pthread_mutex_lock(&host_lock);
}

void
sim_host_fork_unlock(void)
{
    pthread_mutex_unlock(&host_lock);
}

static struct sim_host_block *
block_containing_locked(uintptr_t p)
{
    for (struct sim_host_block *b = host_blocks; b; b = b->next)
        if (p >= b->start && p - b->start < b->size)
            return b;
    return NULL;
}

bool
sim_host_find(uintptr_t p, uintptr_t *base, size_t *size, uint64_t *id)
{
    pthread_mutex_lock(&host_lock);
    struct sim_host_block *b = block_containing_locked(p);
    if (b) {
        *base = b->start;
        *size = b->size;
        if (id != NULL)
            *id = b->id;
    }
    pthread_mutex_unlock(&host_lock);
    return b != NULL;
}

/* Adds [start, start+size) unless it overlaps a known block (false then). */
static bool
block_add(struct sim_host_block *b)
{
    bool overlaps = false;
    pthread_mutex_lock(&host_lock);
    for (struct sim_host_block *o = host_blocks; o && !overlaps; o = o->next)
        overlaps = b->start < o->start + o->size && o->start < b->start + b->size;
    if (!overlaps) {
        b->next = host_blocks;
        host_blocks = b;
    }
    pthread_mutex_unlock(&host_lock);
    return !overlaps;
}

/* Unlinks the block starting at p that is (registered) or is not (allocated) registered. */
static struct sim_host_block *
block_take(void *p, bool registered)
{
    struct sim_host_block *found = NULL;
    pthread_mutex_lock(&host_lock);
    for (struct sim_host_block **pp = &host_blocks; *pp; pp = &(*pp)->next)
        if ((*pp)->start == (uintptr_t)p && (*pp)->registered == registered) {
            found = *pp;
            *pp = found->next;
            break;
        }
    pthread_mutex_unlock(&host_lock);
    return found;
}

CUresult
cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pp || bytesize == 0 ||
        (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                             CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_host_block *b = calloc(1, sizeof(*b));
    void *p = mmap(NULL, bytesize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!b || p == MAP_FAILED) {
        free(b);
        if (p != MAP_FAILED)
            munmap(p, bytesize);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    b->start = (uintptr_t)p;
    b->size = bytesize;
    b->flags = Flags;
    b->id = sim_mem_new_buffer_id();
    (void)block_add(b); /* a fresh mapping overlaps nothing we know */
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult
cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    return cuMemHostAlloc(pp, bytesize, 0);
}

CUresult
cuMemFreeHost(void *p)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_host_block *found = block_take(p, false);
    if (!found)
        return CUDA_ERROR_INVALID_VALUE;
    munmap((void *)found->start, found->size);
    free(found);
    return CUDA_SUCCESS;
}

/* cuda.h: only memory from cuMemHostAlloc has allocation flags; any address inside it will do. */
CUresult
cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pFlags)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&host_lock);
    struct sim_host_block *b = block_containing_locked((uintptr_t)p);
    bool allocated = b && !b->registered;
    if (allocated)
        *pFlags = b->flags;
    pthread_mutex_unlock(&host_lock);
    return allocated ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult
cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    uintptr_t base;
    size_t size;
    if (!pdptr || Flags != 0 || !sim_host_find((uintptr_t)p, &base, &size, NULL))
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)(uintptr_t)p; /* unified addressing: the same address */
    return CUDA_SUCCESS;
}

static CUresult
host_register(void *p, size_t bytesize, unsigned flags)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    unsigned known = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                     CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
    if (!p || bytesize == 0 || (flags & ~known) || (uintptr_t)p > UINTPTR_MAX - bytesize ||
        sim_mem_is_device_va((uintptr_t)p))
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & CU_MEMHOSTREGISTER_IOMEMORY) /* no device's I/O memory is simulated */
        return CUDA_ERROR_NOT_SUPPORTED;
    struct sim_host_block *b = calloc(1, sizeof(*b));
    if (!b)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *b = (struct sim_host_block){.start = (uintptr_t)p,
                                 .size = bytesize,
                                 .flags = flags,
                                 .registered = true,
                                 .id = sim_mem_new_buffer_id()};
    if (!block_add(b)) {
        free(b);
        return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    }
    return CUDA_SUCCESS;
}

CUresult
cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    return host_register(p, bytesize, Flags);
}

CUresult
cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    return host_register(p, bytesize, Flags);
}

/* cuda.h: p must be the base address of a registered range. */
CUresult
cuMemHostUnregister(void *p)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_host_block *found = block_take(p, true);
    if (!found)
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    free(found);
    return CUDA_SUCCESS;
}
