/* Virtual memory management: cuMemCreate handles are ranges of a per-device memfd; mapping one
 * into a reserved range aliases the same pages, so data written through one mapping is seen
 * through another, as on a GPU. Each mapping knows which devices may read and write it
 * (cuMemSetAccess); a copy run by another device faults. One global lock: VMM calls are rare.
 * SIMCUDA_VMM_LOG names a file that gets one line per VMM call that succeeded. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim_config.h"
#include "sim_driver.h"

struct sim_vmm_handle {
    struct sim_device *dev;
    struct sim_heap_seg *phys; /* offsets in dev->memfd; dev->vmm_phys */
    size_t size;
    int refs; /* the handle itself + one per mapping; protected by vmm_lock */
    bool released;
    struct sim_vmm_handle *next;
};

struct sim_vmm_map {
    uintptr_t start;
    size_t size;
    struct sim_vmm_handle *h;
    uint64_t readable, writable; /* device ordinals (bit d), as cuMemSetAccess set them */
    uint64_t id;                 /* CU_POINTER_ATTRIBUTE_BUFFER_ID */
    struct sim_vmm_map *next;
};

struct sim_vmm_range {
    uintptr_t start;
    size_t size;
    struct sim_vmm_range *next;
};

static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_vmm_handle *handles; /* protected by vmm_lock */
static struct sim_vmm_map *maps;       /* protected by vmm_lock */
static struct sim_vmm_range *ranges;   /* protected by vmm_lock */

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_fd = -1;

static void
log_open(void)
{
    const char *path = getenv("SIMCUDA_VMM_LOG");
    if (path == NULL || *path == '\0')
        return;
    log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0)
        fprintf(stderr, "cuprof: sim: SIMCUDA_VMM_LOG=\"%s\": cannot open the file\n", path);
}

void
sim_vmm_log(const char *fmt, ...)
{
    pthread_once(&log_once, log_open);
    if (log_fd < 0)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    /* One write per line on an O_APPEND file: lines of several threads never interleave. */
    (void)!write(log_fd, line, (size_t)n);
}

void
sim_vmm_fork_lock(void)
{
    pthread_mutex_lock(&vmm_lock);
}

void
sim_vmm_fork_unlock(void)
{
    pthread_mutex_unlock(&vmm_lock);
}

static bool
page_multiple(size_t v)
{
    return v % SIM_PAGE == 0;
}

static struct sim_vmm_handle *
handle_find_locked(CUmemGenericAllocationHandle handle)
{
    for (struct sim_vmm_handle *h = handles; h; h = h->next)
        if ((CUmemGenericAllocationHandle)(uintptr_t)h == handle && !h->released)
            return h;
    return NULL;
}

static void
handle_unref_locked(struct sim_vmm_handle *h)
{
    if (--h->refs > 0)
        return;
    for (struct sim_vmm_handle **pp = &handles; *pp; pp = &(*pp)->next)
        if (*pp == h) {
            *pp = h->next;
            break;
        }
    sim_vmm_log("physfree %#llx %d %zu", (unsigned long long)(uintptr_t)h, h->dev->ordinal,
                h->size);
    pthread_mutex_lock(&h->dev->lock);
    sim_heap_free(&h->dev->vmm_phys, h->phys);
    pthread_mutex_unlock(&h->dev->lock);
    free(h);
}

bool
sim_vmm_reserved(uintptr_t ptr)
{
    bool found = false;
    pthread_mutex_lock(&vmm_lock);
    for (struct sim_vmm_range *r = ranges; r && !found; r = r->next)
        found = ptr >= r->start && ptr - r->start < r->size;
    pthread_mutex_unlock(&vmm_lock);
    return found;
}

/* The mapping holding ptr (any: accessible by some device or not), or NULL. */
static struct sim_vmm_map *
map_any_at_locked(uintptr_t ptr)
{
    for (struct sim_vmm_map *m = maps; m; m = m->next)
        if (ptr >= m->start && ptr - m->start < m->size)
            return m;
    return NULL;
}

/* The mapping holding ptr that some device may access, or NULL. */
static struct sim_vmm_map *
map_at_locked(uintptr_t ptr)
{
    struct sim_vmm_map *m = map_any_at_locked(ptr);
    return m != NULL && m->readable != 0 ? m : NULL;
}

CUresult
sim_vmm_check_access(uintptr_t ptr, size_t len, int device, bool write)
{
    uint64_t bit = (uint64_t)1 << device;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&vmm_lock);
    for (struct sim_vmm_map *m = maps; m && r == CUDA_SUCCESS; m = m->next)
        if (ptr < m->start + m->size && m->start < ptr + len &&
            !((write ? m->writable : m->readable) & bit))
            r = CUDA_ERROR_ILLEGAL_ADDRESS;
    pthread_mutex_unlock(&vmm_lock);
    return r;
}

/* Like the driver, an access may run across mappings that lie back to back in one reserved
 * range (an expandable segment maps one handle per page): every byte must be mapped. */
CUresult
sim_vmm_lookup(uintptr_t ptr, size_t len, struct sim_device **dev, uintptr_t *base, size_t *size,
               uint64_t *id)
{
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&vmm_lock);
    struct sim_vmm_map *first = map_at_locked(ptr);
    if (first) {
        uintptr_t end = first->start + first->size;
        bool covered = true;
        while (covered && len > end - ptr) {
            struct sim_vmm_map *m = map_at_locked(end);
            covered = m != NULL && m->h->dev == first->h->dev;
            if (covered)
                end = m->start + m->size;
        }
        if (covered) {
            *dev = first->h->dev;
            *base = first->start;
            *size = first->size;
            if (id != NULL)
                *id = first->id;
            r = CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&vmm_lock);
    return r;
}

CUresult
cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                              CUmemAllocationGranularity_flags option)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!granularity || !prop ||
        (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
         option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_config_get()->no_vmm) /* a device without virtual memory management */
        return CUDA_ERROR_NOT_SUPPORTED;
    *granularity = SIM_PAGE;
    return CUDA_SUCCESS;
}

CUresult
cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
            unsigned long long flags)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!handle || !prop || flags != 0 || size == 0 || !page_multiple(size) ||
        prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_config_get()->no_vmm)
        return CUDA_ERROR_NOT_SUPPORTED;
    struct sim_device *dev = sim_device_get(prop->location.id);
    if (!dev)
        return CUDA_ERROR_INVALID_DEVICE;
    sim_busy_wait_us(sim_config_get()->malloc_us);
    /* Both rules count this call: `alloc` counts every device allocation, `create` this one. */
    int err = sim_fail_check(SIM_FAIL_ALLOC, size);
    int create_err = sim_fail_check(SIM_FAIL_CREATE, size);
    if (err || create_err)
        return (CUresult)(err ? err : create_err);
    struct sim_vmm_handle *h = calloc(1, sizeof(*h));
    if (!h)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&dev->lock);
    err = sim_heap_alloc(&dev->vmm_phys, size, SIM_PAGE, size, &h->phys);
    pthread_mutex_unlock(&dev->lock);
    if (err) {
        free(h);
        return (CUresult)err;
    }
    h->dev = dev;
    h->size = size;
    h->refs = 1;
    pthread_mutex_lock(&vmm_lock);
    h->next = handles;
    handles = h;
    sim_vmm_log("create %#llx %d %zu", (unsigned long long)(uintptr_t)h, dev->ordinal, size);
    pthread_mutex_unlock(&vmm_lock);
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
    return CUDA_SUCCESS;
}

/* Memory stays alive until the last mapping of a released handle goes. */
CUresult
cuMemRelease(CUmemGenericAllocationHandle handle)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&vmm_lock);
    struct sim_vmm_handle *h = handle_find_locked(handle);
    if (h) {
        h->released = true;
        sim_vmm_log("release %#llx", (unsigned long long)handle);
        handle_unref_locked(h);
    }
    pthread_mutex_unlock(&vmm_lock);
    return h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult
cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                    unsigned long long flags)
{
    (void)addr; /* only a hint */
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ptr || size == 0 || !page_multiple(size) || flags != 0 ||
        (alignment & (alignment - 1)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (alignment < SIM_PAGE)
        alignment = SIM_PAGE;
    if (size > SIZE_MAX - alignment)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_vmm_range *rg = malloc(sizeof(*rg));
    void *raw =
        mmap(NULL, size + alignment, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (!rg || raw == MAP_FAILED) {
        free(rg);
        if (raw != MAP_FAILED)
            munmap(raw, size + alignment);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    uintptr_t start = ((uintptr_t)raw + alignment - 1) & ~(uintptr_t)(alignment - 1);
    if (start > (uintptr_t)raw)
        munmap(raw, start - (uintptr_t)raw);
    if ((uintptr_t)raw + alignment > start)
        munmap((void *)(start + size), (uintptr_t)raw + alignment - start);
    rg->start = start;
    rg->size = size;
    pthread_mutex_lock(&vmm_lock);
    rg->next = ranges;
    ranges = rg;
    sim_vmm_log("reserve %#llx %zu", (unsigned long long)start, size);
    pthread_mutex_unlock(&vmm_lock);
    *ptr = start;
    return CUDA_SUCCESS;
}

CUresult
cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_vmm_range *found = NULL;
    pthread_mutex_lock(&vmm_lock);
    bool mapped = false;
    for (struct sim_vmm_map *m = maps; m; m = m->next)
        mapped |= m->start >= ptr && m->start - ptr < size;
    for (struct sim_vmm_range **pp = &ranges; *pp && !mapped; pp = &(*pp)->next)
        if ((*pp)->start == ptr && (*pp)->size == size) {
            found = *pp;
            *pp = found->next;
            sim_vmm_log("addressfree %#llx %zu", (unsigned long long)ptr, size);
            break;
        }
    pthread_mutex_unlock(&vmm_lock);
    if (!found)
        return CUDA_ERROR_INVALID_VALUE;
    munmap((void *)found->start, found->size);
    free(found);
    return CUDA_SUCCESS;
}

CUresult
cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
         unsigned long long flags)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (flags != 0 || size == 0 || !page_multiple(size) || !page_multiple(offset) ||
        !page_multiple(ptr))
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_vmm_map *m = calloc(1, sizeof(*m));
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&vmm_lock);
    struct sim_vmm_handle *h = handle_find_locked(handle);
    bool inside = false, overlap = false;
    for (struct sim_vmm_range *rg = ranges; rg; rg = rg->next)
        inside |=
            ptr >= rg->start && ptr - rg->start < rg->size && size <= rg->size - (ptr - rg->start);
    for (struct sim_vmm_map *o = maps; o; o = o->next)
        overlap |= ptr < o->start + o->size && o->start < ptr + size;
    if (!h || !inside || offset > h->size || size > h->size - offset) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (overlap) {
        r = CUDA_ERROR_ALREADY_MAPPED;
    } else if (mmap((void *)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->dev->memfd,
                    (off_t)(h->phys->start + offset)) == MAP_FAILED) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        /* Inaccessible until cuMemSetAccess, like the real driver. */
        m->start = ptr;
        m->size = size;
        m->id = sim_mem_new_buffer_id();
        m->h = h;
        h->refs++;
        m->next = maps;
        maps = m;
        m = NULL;
        sim_vmm_log("map %#llx %zu %#llx", (unsigned long long)ptr, size,
                    (unsigned long long)handle);
    }
    pthread_mutex_unlock(&vmm_lock);
    free(m);
    return r;
}

CUresult
cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&vmm_lock);
    bool partial = false, any = false;
    for (struct sim_vmm_map *m = maps; m; m = m->next) {
        bool over = ptr < m->start + m->size && m->start < ptr + size;
        bool whole = m->start >= ptr && m->start + m->size <= ptr + size;
        partial |= over && !whole;
        any |= whole;
    }
    if (partial || !any) {
        pthread_mutex_unlock(&vmm_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (struct sim_vmm_map **pp = &maps; *pp;) {
        struct sim_vmm_map *m = *pp;
        if (m->start >= ptr && m->start + m->size <= ptr + size) {
            *pp = m->next;
            mmap((void *)m->start, m->size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
            sim_vmm_log("unmap %#llx %zu", (unsigned long long)m->start, m->size);
            handle_unref_locked(m->h);
            free(m);
        } else {
            pp = &m->next;
        }
    }
    pthread_mutex_unlock(&vmm_lock);
    return CUDA_SUCCESS;
}

/* Every descriptor sets one device's access to the whole range (the last one for a device
 * wins); the host mapping is readable/writable when some device's access is. */
CUresult
cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!desc || count == 0 || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
            !sim_device_get(desc[i].location.id))
            return CUDA_ERROR_INVALID_DEVICE;
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&vmm_lock);
    /* The range must be covered by whole mappings. */
    size_t covered = 0;
    for (struct sim_vmm_map *m = maps; m; m = m->next)
        if (m->start >= ptr && m->start + m->size <= ptr + size)
            covered += m->size;
    if (covered != size) {
        pthread_mutex_unlock(&vmm_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    char line[400];
    int len = snprintf(line, sizeof(line), "setaccess %#llx %zu", (unsigned long long)ptr, size);
    for (size_t i = 0; i < count; i++)
        if (len > 0 && (size_t)len < sizeof(line))
            len += snprintf(line + len, sizeof(line) - (size_t)len, " %d:%d", desc[i].location.id,
                            (int)desc[i].flags);
    for (struct sim_vmm_map *m = maps; m; m = m->next) {
        if (!(m->start >= ptr && m->start + m->size <= ptr + size))
            continue;
        for (size_t i = 0; i < count; i++) {
            uint64_t bit = (uint64_t)1 << desc[i].location.id;
            m->readable &= ~bit;
            m->writable &= ~bit;
            if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE)
                m->readable |= bit;
            if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
                m->writable |= bit;
        }
        (void)mprotect((void *)m->start, m->size,
                       m->writable   ? PROT_READ | PROT_WRITE
                       : m->readable ? PROT_READ
                                     : PROT_NONE);
    }
    sim_vmm_log("%s", line);
    pthread_mutex_unlock(&vmm_lock);
    return CUDA_SUCCESS;
}

CUresult
cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!flags || !location)
        return CUDA_ERROR_INVALID_VALUE;
    if (location->type != CU_MEM_LOCATION_TYPE_DEVICE || !sim_device_get(location->id))
        return CUDA_ERROR_INVALID_DEVICE;
    uint64_t bit = (uint64_t)1 << location->id;
    pthread_mutex_lock(&vmm_lock);
    struct sim_vmm_map *m = map_any_at_locked(ptr);
    if (m != NULL)
        *flags = (m->writable & bit)   ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                 : (m->readable & bit) ? CU_MEM_ACCESS_FLAGS_PROT_READ
                                       : CU_MEM_ACCESS_FLAGS_PROT_NONE;
    pthread_mutex_unlock(&vmm_lock);
    return m != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
