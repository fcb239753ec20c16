/* nvtx_mem.c: NVTX heaps and regions as blocks of the program's own allocator. */
#include "preload/nvtx_mem.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "allocator/allocator.h"
#include "preload/nvtx.h"
#include "preload/nvtx_names.h"
#include "preload/runtime.h"
#include "snapshot/label_table.h"
#include "snapshot/program_pools.h"
#include "snapshot/stacks.h"

#define NVTX_EXPORT __attribute__((visibility("default")))

/* The runtime, only once it exists (pools live on the program's device allocations). */
static struct cuprof_runtime *
mem_runtime(void)
{
    struct cuprof_runtime *rt = atomic_load_explicit(&runtime_ready_value, memory_order_acquire);
    return rt != NULL && rt->pools != NULL ? rt : NULL;
}

static void
mem_unlock(struct cuprof_runtime *rt, int device)
{
    struct pool_node *retired = program_pools_take_retired_locked(rt->pools, device);
    allocator_unlock_device(rt->alloc, device);
    program_pools_free_retired(retired);
}

static void
mem_ignored(const char *what, uint64_t addr, uint64_t size)
{
    if (runtime_log_debug())
        runtime_log("cuprof: debug: NVTX %s at 0x%llx (%llu bytes) is not in a device allocation "
                    "cuprof tracks as the program's heap: not recorded",
                    what, (unsigned long long)addr, (unsigned long long)size);
}

/* An operation on the pool holding addr, under its device's lock; op returns 0 or -EINVAL. */
typedef int (*mem_op)(struct program_pools *pp, int device, uint64_t addr, uint64_t arg,
                      uint32_t stack_id);

static void
mem_apply(mem_op op, const char *what, uint64_t addr, uint64_t arg, uint32_t stack_id)
{
    struct cuprof_runtime *rt = mem_runtime();
    struct live_block blk;
    int dev = rt != NULL ? allocator_lock_live_block(rt->alloc, addr, &blk) : -1;
    int rc = -1;
    if (dev >= 0) {
        rc = op(rt->pools, dev, addr, arg, stack_id);
        mem_unlock(rt, dev);
    }
    if (rc != 0)
        mem_ignored(what, addr, arg);
}

/* ---- Heaps. */

static const nvtxMemVirtualRangeDesc_t *
heap_range(const nvtxMemHeapDesc_t *desc)
{
    if (desc == NULL ||
        desc->structSize < offsetof(nvtxMemHeapDesc_t, typeSpecificDesc) + sizeof(void *) ||
        desc->type != NVTX_MEM_TYPE_VIRTUAL_ADDRESS || desc->typeSpecificDesc == NULL ||
        desc->typeSpecificDescSize < sizeof(nvtxMemVirtualRangeDesc_t))
        return NULL;
    return desc->typeSpecificDesc;
}

static void
heap_add(uint64_t addr, uint64_t size)
{
    static atomic_bool first = true;
    struct cuprof_runtime *rt = mem_runtime();
    struct pool_node *heap = rt != NULL ? calloc(1, sizeof(*heap)) : NULL;
    if (heap == NULL)
        return;
    uint32_t stack_id = stacks_capture(0);
    struct live_block blk;
    int dev = allocator_lock_live_block(rt->alloc, addr, &blk);
    int rc = -1;
    if (dev >= 0) {
        /* The heap is the allocation (or its start): its block is the pool's segment. */
        if (blk.addr == addr && size > 0 && size <= blk.size) {
            *heap = (struct pool_node){.addr = addr,
                                       .size = size,
                                       .stack_id = blk.stack_id,
                                       .requested = blk.requested,
                                       .stream = blk.stream,
                                       .owner = blk.owner};
            rc = program_pools_heap_add_locked(rt->pools, dev, heap, stack_id);
        }
        mem_unlock(rt, dev);
    }
    if (rc != 0) {
        free(heap);
        mem_ignored("heap", addr, size);
    } else if (atomic_exchange(&first, false)) {
        runtime_refresh_traced_actions(rt); /* its block's free must reach the pools' sink */
    }
}

static nvtxMemHeapHandle_t NVTX_API
cb_heap_register(nvtxDomainHandle_t domain, nvtxMemHeapDesc_t const *desc)
{
    (void)domain;
    const nvtxMemVirtualRangeDesc_t *range = heap_range(desc);
    if (range == NULL)
        return NVTX_MEM_HEAP_HANDLE_NO_TOOL;
    heap_add((uint64_t)(uintptr_t)range->ptr, range->size);
    /* NVTX: a virtual-address heap's handle is the address of its memory. */
    return (nvtxMemHeapHandle_t)(uintptr_t)range->ptr;
}

static int
op_heap_remove(struct program_pools *pp, int device, uint64_t addr, uint64_t arg, uint32_t stack_id)
{
    (void)arg;
    return program_pools_heap_remove_locked(pp, device, addr, stack_id);
}

static void NVTX_API
cb_heap_unregister(nvtxDomainHandle_t domain, nvtxMemHeapHandle_t heap)
{
    (void)domain;
    if (heap != NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE)
        mem_apply(op_heap_remove, "heap", (uint64_t)(uintptr_t)heap, 0, stacks_capture(0));
}

static void NVTX_API
cb_heap_reset(nvtxDomainHandle_t domain, nvtxMemHeapHandle_t heap)
{
    (void)domain;
    struct cuprof_runtime *rt = mem_runtime();
    if (rt == NULL)
        return;
    uint32_t stack_id = stacks_capture(0);
    if (heap != NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE) {
        struct live_block blk;
        uint64_t addr = (uint64_t)(uintptr_t)heap;
        int dev = allocator_lock_live_block(rt->alloc, addr, &blk);
        if (dev >= 0) {
            if (program_pools_heap_reset_locked(rt->pools, dev, addr, stack_id) != 0)
                mem_ignored("heap", addr, 0);
            mem_unlock(rt, dev);
        }
        return;
    }
    for (int d = 0; d < rt->device_count; d++) { /* the process-wide heap: every heap */
        allocator_lock_device(rt->alloc, d);
        int rc = program_pools_heap_reset_locked(rt->pools, d, 0, stack_id); /* always 0 */
        (void)rc;
        mem_unlock(rt, d);
    }
}

/* ---- Regions. */

/* The i-th element of a batch's array of `size`-byte elements. */
static const void *
element(const void *array, size_t size, size_t i)
{
    return (const char *)array + i * size;
}

static void
region_add(uint64_t heap, uint64_t addr, uint64_t size, uint32_t stack_id)
{
    struct cuprof_runtime *rt = mem_runtime();
    struct pool_node *region = rt != NULL ? calloc(1, sizeof(*region)) : NULL;
    if (region == NULL)
        return;
    *region = (struct pool_node){.addr = addr, .size = size, .stack_id = stack_id};
    struct live_block blk;
    int dev = allocator_lock_live_block(rt->alloc, addr, &blk);
    int rc = -1;
    if (dev >= 0) {
        rc = program_pools_region_add_locked(rt->pools, dev, heap, region);
        mem_unlock(rt, dev);
    }
    if (rc != 0) {
        free(region);
        mem_ignored("region", addr, size);
    }
}

static void NVTX_API
cb_regions_register(nvtxDomainHandle_t domain, nvtxMemRegionsRegisterBatch_t const *batch)
{
    (void)domain;
    if (batch == NULL || batch->regionType != NVTX_MEM_TYPE_VIRTUAL_ADDRESS ||
        batch->regionDescElementSize < sizeof(nvtxMemVirtualRangeDesc_t) ||
        batch->regionDescElements == NULL)
        return;
    uint32_t stack_id = mem_runtime() != NULL ? stacks_capture(0) : 0;
    for (size_t i = 0; i < batch->regionCount; i++) {
        const nvtxMemVirtualRangeDesc_t *r =
            element(batch->regionDescElements, batch->regionDescElementSize, i);
        if (batch->regionHandleElementsOut != NULL) /* NVTX: the region's address is its handle */
            batch->regionHandleElementsOut[i] = (nvtxMemRegionHandle_t)(uintptr_t)r->ptr;
        if (batch->heap != NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE)
            region_add((uint64_t)(uintptr_t)batch->heap, (uint64_t)(uintptr_t)r->ptr, r->size,
                       stack_id);
    }
}

static int
op_region_resize(struct program_pools *pp, int device, uint64_t addr, uint64_t size,
                 uint32_t stack_id)
{
    return program_pools_region_resize_locked(pp, device, addr, size, stack_id);
}

static void NVTX_API
cb_regions_resize(nvtxDomainHandle_t domain, nvtxMemRegionsResizeBatch_t const *batch)
{
    (void)domain;
    if (batch == NULL || batch->regionType != NVTX_MEM_TYPE_VIRTUAL_ADDRESS ||
        batch->regionDescElementSize < sizeof(nvtxMemVirtualRangeDesc_t) ||
        batch->regionDescElements == NULL || mem_runtime() == NULL)
        return;
    uint32_t stack_id = stacks_capture(0);
    for (size_t i = 0; i < batch->regionDescCount; i++) {
        const nvtxMemVirtualRangeDesc_t *r =
            element(batch->regionDescElements, batch->regionDescElementSize, i);
        mem_apply(op_region_resize, "region", (uint64_t)(uintptr_t)r->ptr, r->size, stack_id);
    }
}

/* A region reference: its pointer, or its handle (which cuprof made its pointer). */
static uint64_t
region_ref(uint32_t type, nvtxMemRegionRef_t ref)
{
    return type == NVTX_MEM_REGION_REF_TYPE_HANDLE ? (uint64_t)(uintptr_t)ref.handle
                                                   : (uint64_t)(uintptr_t)ref.pointer;
}

static int
op_region_remove(struct program_pools *pp, int device, uint64_t addr, uint64_t arg,
                 uint32_t stack_id)
{
    (void)arg;
    return program_pools_region_remove_locked(pp, device, addr, stack_id);
}

static void NVTX_API
cb_regions_unregister(nvtxDomainHandle_t domain, nvtxMemRegionsUnregisterBatch_t const *batch)
{
    (void)domain;
    if (batch == NULL || batch->refElementSize < sizeof(nvtxMemRegionRef_t) ||
        batch->refElements == NULL || mem_runtime() == NULL)
        return;
    uint32_t stack_id = stacks_capture(0);
    for (size_t i = 0; i < batch->refCount; i++) {
        const nvtxMemRegionRef_t *ref = element(batch->refElements, batch->refElementSize, i);
        mem_apply(op_region_remove, "region", region_ref(batch->refType, *ref), 0, stack_id);
    }
}

static int
op_region_name(struct program_pools *pp, int device, uint64_t addr, uint64_t name_id,
               uint32_t stack_id)
{
    (void)stack_id;
    return program_pools_region_name_locked(pp, device, addr, (uint32_t)name_id);
}

static void NVTX_API
cb_regions_name(nvtxDomainHandle_t domain, nvtxMemRegionsNameBatch_t const *batch)
{
    (void)domain;
    if (batch == NULL || batch->regionElementSize < sizeof(nvtxMemRegionNameDesc_t) ||
        batch->regionElements == NULL || mem_runtime() == NULL)
        return;
    for (size_t i = 0; i < batch->regionCount; i++) {
        const nvtxMemRegionNameDesc_t *d =
            element(batch->regionElements, batch->regionElementSize, i);
        char buf[NVTX_NAMES_MAX];
        const char *text =
            nvtx_names_message(NULL, (int32_t)d->nameType, &d->name, buf, sizeof buf);
        uint32_t id = label_table_intern(runtime_labels(), text, SNAP_STAGE_MARK);
        if (id != 0)
            mem_apply(op_region_name, "region", region_ref(d->regionRefType, d->region), id, 0);
    }
}

/* ---- Attaching. */

static const struct {
    unsigned id;
    intptr_t fn;
} mem_slots[] = {
    {NVTX3EXT_CBID_nvtxMemHeapRegister, (intptr_t)cb_heap_register},
    {NVTX3EXT_CBID_nvtxMemHeapUnregister, (intptr_t)cb_heap_unregister},
    {NVTX3EXT_CBID_nvtxMemHeapReset, (intptr_t)cb_heap_reset},
    {NVTX3EXT_CBID_nvtxMemRegionsRegister, (intptr_t)cb_regions_register},
    {NVTX3EXT_CBID_nvtxMemRegionsResize, (intptr_t)cb_regions_resize},
    {NVTX3EXT_CBID_nvtxMemRegionsUnregister, (intptr_t)cb_regions_unregister},
    {NVTX3EXT_CBID_nvtxMemRegionsName, (intptr_t)cb_regions_name},
};

NVTX_EXPORT int
InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t *info)
{
    /* The memory module of a compatible version (same major compatibility, this one or newer). */
    if (info == NULL || info->moduleId != NVTX_EXT_MODULEID_MEM ||
        info->compatId >> 8 != NVTX_EXT_COMPATID_MEM >> 8 ||
        info->compatId < NVTX_EXT_COMPATID_MEM || info->segmentsCount < 1 ||
        info->segments == NULL || info->segments[0].functionSlots == NULL || !nvtx_attachable())
        return 0;
    nvtxExtModuleSegment_t *segment = &info->segments[0];
    for (size_t i = 0; i < sizeof mem_slots / sizeof mem_slots[0]; i++)
        if (mem_slots[i].id < segment->slotCount)
            segment->functionSlots[mem_slots[i].id] = mem_slots[i].fn;
    return 1;
}
