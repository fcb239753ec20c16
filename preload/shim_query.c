/* shim_query.c: query wrappers (see shim_query.h). */
#include "preload/shim_query.h"

#include <stdatomic.h>
#include <stdbool.h>

#include "allocator/allocator.h"
#include "preload/guard.h"
#include "preload/runtime.h"
#include "preload/real_cuda.h"
#include "preload/shim_call.h"

CUresult
shim_query_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
    REAL_CUDA_OR_FAIL(real, cuMemGetInfo_v2)
    CUresult res = real->cuMemGetInfo_v2(free_bytes, total_bytes);
    /* Without cuprof's cache the memory it keeps for no block of the program would be the
     * driver's: programs size their work by this figure (a fraction of the free memory), so it
     * must not shrink because cuprof caches. Memory the cache hands back when the driver runs
     * short, nothing else, is added: a request of the figure then succeeds as without cuprof. */
    struct cuprof_runtime *rt;
    int device;
    if (res != CUDA_SUCCESS || free_bytes == NULL || total_bytes == NULL ||
        (device = shim_call_ready_device(&rt)) < 0 || rt->mode != CUPROF_MODE_CACHE)
        return res;
    size_t releasable = allocator_releasable_bytes(rt->alloc, device);
    if (*free_bytes <= *total_bytes)
        *free_bytes +=
            releasable < *total_bytes - *free_bytes ? releasable : *total_bytes - *free_bytes;
    return res;
}

/* An address no allocation ever covers (page 0 is never mapped): asked in ptr's place when ptr
 * lies in cuprof's memory but in no block the program holds, so the program gets the driver's
 * own answer for a pointer to nothing, as it would without cuprof. */
#define NOWHERE ((CUdeviceptr)0x1000)

static atomic_bool ipc_refusal_logged; /* one line per process */

/* Where ptr falls among the blocks cuprof handed out (allocator_range_of): each block answers
 * as an allocation of its own, of the size the program asked for. */
static enum alloc_range
range_of(CUdeviceptr ptr, struct alloc_range_block *block)
{
    struct cuprof_runtime *rt = shim_call_runtime_if_ready();
    if (guard_active() || rt == NULL || rt->alloc == NULL)
        return ALLOC_RANGE_NOT_OURS;
    return allocator_range_of(rt->alloc, ptr, block);
}

/* What cuIpcGetMemHandle answers for a block cuprof cut from its own segment: the driver's
 * handle only where the block starts the segment (the handle names the whole segment, opened at
 * its start elsewhere); stream-ordered memory is never legacy-IPC capable: the driver refuses it
 * with CUDA_ERROR_INVALID_VALUE, and cudaIpcGetMemHandle with cudaErrorInvalidValue. */
enum ipc_answer { IPC_DRIVER, IPC_STREAM_ORDERED, IPC_CUT };

static enum ipc_answer
ipc_answer(const struct alloc_range_block *block)
{
    if (block->whole)
        return IPC_DRIVER;
    if (block->stream_ordered)
        return IPC_STREAM_ORDERED;
    return block->base == block->segment ? IPC_DRIVER : IPC_CUT;
}

/* The attributes a block of the cache answers itself, in place of the segment's (the driver's):
 * its range, its own buffer ID, and legacy IPC capability as cuIpcGetMemHandle would grant it.
 * False for the others. */
static bool
block_attribute(void *data, CUpointer_attribute attribute, const struct alloc_range_block *block)
{
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = (CUdeviceptr)block->base;
        return true;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = block->size;
        return true;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        if (block->whole)
            return false;
        *(unsigned long long *)data = block->buffer_id;
        return true;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        if (ipc_answer(block) == IPC_DRIVER)
            return false;
        *(unsigned int *)data = 0; /* NVIDIA's driver 580 writes 4 bytes (measured) */
        return true;
    default:
        return false;
    }
}

CUresult
shim_query_address_range(CUdeviceptr *base, size_t *size, CUdeviceptr dptr)
{
    REAL_CUDA_OR_FAIL(real, cuMemGetAddressRange_v2)
    struct alloc_range_block block;
    switch (range_of(dptr, &block)) {
    case ALLOC_RANGE_BLOCK:
        if (base != NULL)
            *base = (CUdeviceptr)block.base;
        if (size != NULL)
            *size = block.size;
        return CUDA_SUCCESS;
    case ALLOC_RANGE_NONE:
        return real->cuMemGetAddressRange_v2(base, size, NOWHERE);
    default:
        return real->cuMemGetAddressRange_v2(base, size, dptr);
    }
}

CUresult
shim_query_pointer_attribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    REAL_CUDA_OR_FAIL(real, cuPointerGetAttribute)
    struct alloc_range_block block;
    enum alloc_range range = data != NULL ? range_of(ptr, &block) : ALLOC_RANGE_NOT_OURS;
    if (range == ALLOC_RANGE_NONE)
        return real->cuPointerGetAttribute(data, attribute, NOWHERE);
    if (range == ALLOC_RANGE_BLOCK && block_attribute(data, attribute, &block))
        return CUDA_SUCCESS;
    return real->cuPointerGetAttribute(data, attribute, ptr);
}

CUresult
shim_query_pointer_attributes(unsigned int count, CUpointer_attribute *attributes, void **data,
                              CUdeviceptr ptr)
{
    REAL_CUDA_OR_FAIL(real, cuPointerGetAttributes)
    struct alloc_range_block block;
    enum alloc_range range =
        attributes != NULL && data != NULL ? range_of(ptr, &block) : ALLOC_RANGE_NOT_OURS;
    /* The driver answers every attribute (and validates them); a block's own are corrected. */
    CUresult result = real->cuPointerGetAttributes(count, attributes, data,
                                                   range == ALLOC_RANGE_NONE ? NOWHERE : ptr);
    if (result != CUDA_SUCCESS || range == ALLOC_RANGE_NOT_OURS)
        return result;
    for (unsigned int i = 0; i < count; i++) {
        if (data[i] == NULL)
            continue;
        if (range == ALLOC_RANGE_BLOCK)
            (void)block_attribute(data[i], attributes[i], &block);
        /* A pointer to nothing is its own host pointer (NVIDIA's driver 580 says so). */
        if (range == ALLOC_RANGE_NONE && attributes[i] == CU_POINTER_ATTRIBUTE_HOST_POINTER &&
            *(void **)data[i] == (void *)NOWHERE)
            *(void **)data[i] = (void *)ptr;
    }
    return result;
}

CUresult
shim_query_ipc_handle(CUipcMemHandle *handle, CUdeviceptr dptr)
{
    REAL_CUDA_OR_FAIL(real, cuIpcGetMemHandle)
    struct alloc_range_block block;
    switch (range_of(dptr, &block)) {
    case ALLOC_RANGE_NONE:
        return real->cuIpcGetMemHandle(handle, NOWHERE);
    case ALLOC_RANGE_BLOCK:
        if (ipc_answer(&block) == IPC_DRIVER)
            break; /* the driver's own allocation, or the segment opens where the block starts */
        if (ipc_answer(&block) == IPC_STREAM_ORDERED)
            return CUDA_ERROR_INVALID_VALUE; /* as the driver answers without cuprof */
        /* The driver's handle names the whole segment, which another process opens at its
         * start, not at this block: it would read and write the wrong memory. Measured with
         * PyTorch's shared CUDA tensors on an H200. Refused, loudly. */
        if (!atomic_exchange(&ipc_refusal_logged, true))
            runtime_log("cuprof: cuIpcGetMemHandle(0x%llx): cache mode cut this block from a "
                        "larger allocation, so another process would open the handle at the "
                        "wrong address; refused with CUDA_ERROR_NOT_SUPPORTED. Run programs that "
                        "share device memory through CUDA IPC with CUPROF_MODE=trace",
                        (unsigned long long)dptr);
        return CUDA_ERROR_NOT_SUPPORTED;
    default:
        break;
    }
    return real->cuIpcGetMemHandle(handle, dptr);
}
