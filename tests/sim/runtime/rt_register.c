/* rt_register: the registration calls of nvcc-generated host code (a constructor per .cu file
 * calls __cudaRegisterFatBinary, then __cudaRegisterFunction / __cudaRegisterVar per entity, then
 * __cudaRegisterFatBinaryEnd; atexit calls __cudaUnregisterFatBinary), and the symbol calls that
 * use the variables. No code ever runs: a module is its fat binary's architectures, its kernels'
 * names and its variables' storage. */
#include "rt_register.h"

#include "rt_api.h"
#include "rt_driver.h"
#include "rt_state.h"

#include <fatbinary_section.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct rt_module {
    void *fatbin; /* first: *handle is the wrapper the program registered, as in cudart */
    int arch_sass;
    int arch_ptx;
    CUlibrary library; /* the driver's library of the fat binary, loaded at its first launch;
                          protected by rt_register.lock */
};

struct rt_kernel {
    struct rt_module *module;
    const void *host_fun;
    const char *name;
    int max_dyn_smem; /* protected by rt_register.lock */
    int carveout;     /* protected by rt_register.lock */
    CUkernel handle;  /* the driver's kernel, asked at its first launch; protected by lock */
};

struct rt_var {
    struct rt_module *module;
    const void *host_var; /* the host shadow (or, for __managed__, the pointer nvcc derefs) */
    void *storage;        /* zeroed, 256-byte aligned, owned by the runtime */
    size_t size;
};

/* Pointer arrays: a kernel's address is its cudaKernel_t and must not move while registered. */
static struct {
    pthread_mutex_t lock;
    struct rt_kernel **kernels; /* protected by lock */
    size_t n_kernels, cap_kernels;
    struct rt_var **vars; /* protected by lock */
    size_t n_vars, cap_vars;
} rt_register = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Appends p to a growing pointer array; false when out of memory. */
static bool
rt_register_push_locked(void ***array, size_t *n, size_t *cap, void *p)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        void **a = realloc(*array, c * sizeof *a);
        if (a == NULL)
            return false;
        *array = a;
        *cap = c;
    }
    (*array)[(*n)++] = p;
    return true;
}

/* fatbinary header and entry layout as nvcc writes it (little endian): the header is
 * {u32 magic 0xBA55ED50, u16 version, u16 header size, u64 payload size}; each entry is
 * {u16 kind (1 PTX, 2 ELF), u16, u32 header size, u64 payload size, u32, u32, u32, u32 arch}. */
#define RT_FATBIN_MAGIC    0xBA55ED50u
#define RT_FATBIN_KIND_PTX 1
#define RT_FATBIN_KIND_ELF 2

static uint32_t
rt_register_u32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The newest SASS and PTX architectures of a registered fat binary (0 when unreadable). */
static void
rt_register_archs(const void *fatCubin, int *sass, int *ptx)
{
    *sass = *ptx = 0;
    const __fatBinC_Wrapper_t *w = fatCubin;
    if (w == NULL || (unsigned)w->magic != FATBINC_MAGIC || w->data == NULL)
        return;
    const unsigned char *h = (const unsigned char *)w->data;
    if (rt_register_u32(h) != RT_FATBIN_MAGIC)
        return;
    uint16_t hsize;
    uint64_t total;
    memcpy(&hsize, h + 6, sizeof hsize);
    memcpy(&total, h + 8, sizeof total);
    /* Offsets from the first entry, so that nothing points past the image. */
    const unsigned char *base = h + hsize;
    for (uint64_t off = 0; total >= 32 && off <= total - 32;) {
        const unsigned char *e = base + off;
        uint16_t kind;
        uint32_t ehsize;
        uint64_t payload;
        memcpy(&kind, e, sizeof kind);
        memcpy(&ehsize, e + 4, sizeof ehsize);
        memcpy(&payload, e + 8, sizeof payload);
        int arch = (int)rt_register_u32(e + 28);
        if (kind == RT_FATBIN_KIND_ELF && arch > *sass)
            *sass = arch;
        if (kind == RT_FATBIN_KIND_PTX && arch > *ptx)
            *ptx = arch;
        if (ehsize < 32 || ehsize > total - off || payload > total - off - ehsize)
            break;
        off += ehsize + payload;
    }
    if (*ptx == 0)
        *ptx = *sass;
}

RT_EXPORT void **CUDARTAPI
__cudaRegisterFatBinary(void *fatCubin)
{
    struct rt_module *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    m->fatbin = fatCubin;
    rt_register_archs(fatCubin, &m->arch_sass, &m->arch_ptx);
    return (void **)m;
}

RT_EXPORT void CUDARTAPI
__cudaRegisterFatBinaryEnd(void **fatCubinHandle)
{
    (void)fatCubinHandle; /* cudart loads modules lazily; so does this one (there is nothing) */
}

RT_EXPORT void CUDARTAPI
__cudaUnregisterFatBinary(void **fatCubinHandle)
{
    struct rt_module *m = (struct rt_module *)fatCubinHandle;
    if (m == NULL)
        return;
    pthread_mutex_lock(&rt_register.lock);
    size_t j = 0;
    for (size_t i = 0; i < rt_register.n_kernels; i++) {
        if (rt_register.kernels[i]->module == m)
            free(rt_register.kernels[i]);
        else
            rt_register.kernels[j++] = rt_register.kernels[i];
    }
    rt_register.n_kernels = j;
    j = 0;
    for (size_t i = 0; i < rt_register.n_vars; i++) {
        if (rt_register.vars[i]->module == m) {
            free(rt_register.vars[i]->storage);
            free(rt_register.vars[i]);
        } else {
            rt_register.vars[j++] = rt_register.vars[i];
        }
    }
    rt_register.n_vars = j;
    CUlibrary library = m->library;
    pthread_mutex_unlock(&rt_register.lock);
    if (library != NULL) /* its kernels' code goes with it, as at cudart's exit */
        (void)RT_CALL(cuLibraryUnload, library);
    free(m);
}

RT_EXPORT void CUDARTAPI
__cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                       const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim,
                       dim3 *gDim, int *wSize)
{
    (void)deviceFun, (void)thread_limit, (void)tid, (void)bid, (void)bDim, (void)gDim, (void)wSize;
    if (fatCubinHandle == NULL || hostFun == NULL)
        return;
    struct rt_kernel *k = calloc(1, sizeof *k);
    if (k == NULL)
        return;
    *k = (struct rt_kernel){.module = (struct rt_module *)fatCubinHandle,
                            .host_fun = hostFun,
                            .name = deviceName,
                            .max_dyn_smem = RT_REGISTER_SMEM_DEFAULT,
                            .carveout = -1};
    pthread_mutex_lock(&rt_register.lock);
    bool ok = rt_register_push_locked((void ***)&rt_register.kernels, &rt_register.n_kernels,
                                      &rt_register.cap_kernels, k);
    pthread_mutex_unlock(&rt_register.lock);
    if (!ok)
        free(k);
}

/* Variables get zeroed runtime-owned memory: initialisers written in device code live in the
 * cubin, which nothing here reads. Not device memory of the simulated driver, so no profiler
 * sees an allocation (on a GPU module globals come with the module load, not cuMemAlloc). */
static void *
rt_register_add_var(void **fatCubinHandle, const void *host_var, size_t size)
{
    if (fatCubinHandle == NULL || host_var == NULL)
        return NULL;
    size_t rounded = (size + 255) & ~(size_t)255;
    struct rt_var *v = calloc(1, sizeof *v);
    void *storage = rounded && rounded >= size ? aligned_alloc(256, rounded) : NULL;
    if (v == NULL || storage == NULL) {
        free(v);
        free(storage);
        return NULL;
    }
    memset(storage, 0, rounded);
    *v = (struct rt_var){.module = (struct rt_module *)fatCubinHandle,
                         .host_var = host_var,
                         .storage = storage,
                         .size = size};
    pthread_mutex_lock(&rt_register.lock);
    bool ok = rt_register_push_locked((void ***)&rt_register.vars, &rt_register.n_vars,
                                      &rt_register.cap_vars, v);
    pthread_mutex_unlock(&rt_register.lock);
    if (!ok) {
        free(v);
        free(storage);
        return NULL;
    }
    return storage;
}

RT_EXPORT void CUDARTAPI
__cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress, const char *deviceName,
                  int ext, size_t size, int constant, int global)
{
    (void)deviceAddress, (void)deviceName, (void)ext, (void)constant, (void)global;
    (void)rt_register_add_var(fatCubinHandle, hostVar, size);
}

RT_EXPORT void CUDARTAPI
__cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress, char *deviceAddress,
                         const char *deviceName, int ext, size_t size, int constant, int global)
{
    (void)deviceAddress, (void)deviceName, (void)ext, (void)constant, (void)global;
    /* Host code reads a __managed__ variable through *hostVarPtrAddress; cudart fills it when
     * the module loads (__cudaInitModule). The storage is host memory here, so it can at once. */
    void *storage = rt_register_add_var(fatCubinHandle, hostVarPtrAddress, size);
    if (storage != NULL)
        *hostVarPtrAddress = storage;
}

RT_EXPORT char CUDARTAPI
__cudaInitModule(void **fatCubinHandle)
{
    /* Called before the first host access to a __managed__ variable: needs a context. */
    return fatCubinHandle != NULL && rt_state_ctx() == cudaSuccess;
}

/* The kernel for a host stub or a handle; NULL if neither. */
static struct rt_kernel *
rt_register_kernel_locked(const void *func)
{
    for (size_t i = 0; i < rt_register.n_kernels; i++) {
        struct rt_kernel *k = rt_register.kernels[i];
        if (k->host_fun == func || (const void *)k == func)
            return k;
    }
    return NULL;
}

/* What NVIDIA's runtime 13.0 answers for a function it does not know (measured with driver 580
 * on an H200: cudaLaunchKernel, cudaFuncGetAttributes and cudaFuncSetAttribute): NULL is no
 * device function, any other pointer no handle it gave out. */
static enum cudaError
rt_register_unknown_function(const void *func)
{
    return func == NULL ? cudaErrorInvalidDeviceFunction : cudaErrorInvalidResourceHandle;
}

enum cudaError
rt_register_kernel_find(const void *func, struct rt_register_kernel *out)
{
    enum cudaError e = rt_register_unknown_function(func);
    pthread_mutex_lock(&rt_register.lock);
    struct rt_kernel *k = func ? rt_register_kernel_locked(func) : NULL;
    if (k != NULL) {
        *out = (struct rt_register_kernel){.name = k->name,
                                           .arch_sass = k->module->arch_sass,
                                           .arch_ptx = k->module->arch_ptx,
                                           .max_dyn_smem = k->max_dyn_smem,
                                           .carveout = k->carveout};
        e = cudaSuccess;
    }
    pthread_mutex_unlock(&rt_register.lock);
    return e;
}

/* The image the driver is given for a fat binary: its data, as cudart passes it (the simulated
 * driver parses none). */
static const void *
rt_register_image(const struct rt_module *m)
{
    const __fatBinC_Wrapper_t *w = m->fatbin;
    return w != NULL && (unsigned)w->magic == FATBINC_MAGIC && w->data != NULL
               ? (const void *)w->data
               : m->fatbin;
}

CUresult
rt_register_kernel_driver(const void *func, CUfunction *out)
{
    pthread_mutex_lock(&rt_register.lock);
    struct rt_kernel *k = func ? rt_register_kernel_locked(func) : NULL;
    CUresult r = k != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    if (r == CUDA_SUCCESS && k->module->library == NULL)
        r = RT_CALL(cuLibraryLoadData, &k->module->library, rt_register_image(k->module), NULL,
                    NULL, 0, NULL, NULL, 0);
    if (r == CUDA_SUCCESS && k->handle == NULL)
        r = RT_CALL(cuLibraryGetKernel, &k->handle, k->module->library, k->name);
    if (r == CUDA_SUCCESS)
        *out = (CUfunction)(void *)k->handle;
    pthread_mutex_unlock(&rt_register.lock);
    return r;
}

enum cudaError
rt_register_kernel_handle(const void *func, void **handle)
{
    enum cudaError e = rt_register_unknown_function(func);
    pthread_mutex_lock(&rt_register.lock);
    for (size_t i = 0; func && i < rt_register.n_kernels; i++) {
        if (rt_register.kernels[i]->host_fun == func) {
            *handle = rt_register.kernels[i];
            e = cudaSuccess;
            break;
        }
    }
    pthread_mutex_unlock(&rt_register.lock);
    return e;
}

enum cudaError
rt_register_kernel_set(const void *func, enum cudaFuncAttribute attr, int value)
{
    enum cudaError e = rt_register_unknown_function(func);
    pthread_mutex_lock(&rt_register.lock);
    struct rt_kernel *k = func ? rt_register_kernel_locked(func) : NULL;
    if (k != NULL) {
        if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize)
            k->max_dyn_smem = value;
        else if (attr == cudaFuncAttributePreferredSharedMemoryCarveout)
            k->carveout = value;
        e = cudaSuccess;
    }
    pthread_mutex_unlock(&rt_register.lock);
    return e;
}

enum cudaError
rt_register_symbol(const void *symbol, void **storage, size_t *size)
{
    enum cudaError e = cudaErrorInvalidSymbol;
    pthread_mutex_lock(&rt_register.lock);
    for (size_t i = 0; symbol && i < rt_register.n_vars; i++) {
        struct rt_var *v = rt_register.vars[i];
        if (v->host_var == symbol || v->storage == symbol) {
            *storage = v->storage;
            *size = v->size;
            e = cudaSuccess;
            break;
        }
    }
    pthread_mutex_unlock(&rt_register.lock);
    return e;
}

/* ---- the symbol calls ---- */

RT_EXPORT cudaError_t CUDARTAPI
cudaGetSymbolAddress(void **devPtr, const void *symbol)
{
    if (devPtr == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    size_t size = 0;
    return rt_state_ret(rt_register_symbol(symbol, devPtr, &size));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaGetSymbolSize(size_t *size, const void *symbol)
{
    if (size == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    void *storage = NULL;
    return rt_state_ret(rt_register_symbol(symbol, &storage, size));
}

/* The variable's bytes [offset, offset + count) after the runtime's checks; `to` selects the
 * directions cudaMemcpyToSymbol accepts (else those of cudaMemcpyFromSymbol). */
static cudaError_t
rt_register_symbol_range(const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind,
                         bool to, uintptr_t *at)
{
    RT_CTX_OR_RETURN();
    enum cudaMemcpyKind other = to ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    if (kind != other && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
        return rt_state_ret(cudaErrorInvalidMemcpyDirection);
    void *storage = NULL;
    size_t size = 0;
    enum cudaError e = rt_register_symbol(symbol, &storage, &size);
    if (e != cudaSuccess)
        return rt_state_ret(e);
    if (offset > size || count > size - offset)
        return rt_state_ret(cudaErrorInvalidValue);
    *at = (uintptr_t)storage + offset;
    return cudaSuccess;
}

/* Copies go through the driver's unified copies (which accept the runtime-owned storage), so
 * they are ordered with the stream's other work exactly like any other copy. */
static cudaError_t
rt_register_copy(uintptr_t dst, uintptr_t src, size_t count, PFN_cuMemcpy_v4000 fn)
{
    if (count == 0)
        return cudaSuccess;
    if (dst == 0 || src == 0)
        return rt_state_ret(cudaErrorInvalidValue);
    if (fn == NULL)
        return rt_state_ret(cudaErrorCallRequiresNewerDriver);
    return rt_state_cu(fn((CUdeviceptr)dst, (CUdeviceptr)src, count));
}

static cudaError_t
rt_register_copy_async(uintptr_t dst, uintptr_t src, size_t count, cudaStream_t stream,
                       PFN_cuMemcpyAsync_v4000 fn)
{
    if (count == 0)
        return cudaSuccess;
    if (dst == 0 || src == 0)
        return rt_state_ret(cudaErrorInvalidValue);
    if (fn == NULL)
        return rt_state_ret(cudaErrorCallRequiresNewerDriver);
    return rt_state_cu(fn((CUdeviceptr)dst, (CUdeviceptr)src, count, (CUstream)stream));
}

static cudaError_t
rt_register_to_symbol(const void *symbol, const void *src, size_t count, size_t offset,
                      enum cudaMemcpyKind kind, PFN_cuMemcpy_v4000 fn)
{
    uintptr_t at = 0;
    cudaError_t e = rt_register_symbol_range(symbol, count, offset, kind, true, &at);
    return e != cudaSuccess ? e : rt_register_copy(at, (uintptr_t)src, count, fn);
}

static cudaError_t
rt_register_from_symbol(void *dst, const void *symbol, size_t count, size_t offset,
                        enum cudaMemcpyKind kind, PFN_cuMemcpy_v4000 fn)
{
    uintptr_t at = 0;
    cudaError_t e = rt_register_symbol_range(symbol, count, offset, kind, false, &at);
    return e != cudaSuccess ? e : rt_register_copy((uintptr_t)dst, at, count, fn);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
                   enum cudaMemcpyKind kind)
{
    return rt_register_to_symbol(symbol, src, count, offset, kind, rt_drv.cuMemcpy);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t count, size_t offset,
                        enum cudaMemcpyKind kind)
{
    return rt_register_to_symbol(symbol, src, count, offset, kind, rt_drv.cuMemcpy_ptds);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count, size_t offset,
                     enum cudaMemcpyKind kind)
{
    return rt_register_from_symbol(dst, symbol, count, offset, kind, rt_drv.cuMemcpy);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemcpyFromSymbol_ptds(void *dst, const void *symbol, size_t count, size_t offset,
                          enum cudaMemcpyKind kind)
{
    return rt_register_from_symbol(dst, symbol, count, offset, kind, rt_drv.cuMemcpy_ptds);
}

static cudaError_t
rt_register_to_symbol_async(const void *symbol, const void *src, size_t count, size_t offset,
                            enum cudaMemcpyKind kind, cudaStream_t stream,
                            PFN_cuMemcpyAsync_v4000 fn)
{
    uintptr_t at = 0;
    cudaError_t e = rt_register_symbol_range(symbol, count, offset, kind, true, &at);
    return e != cudaSuccess ? e : rt_register_copy_async(at, (uintptr_t)src, count, stream, fn);
}

static cudaError_t
rt_register_from_symbol_async(void *dst, const void *symbol, size_t count, size_t offset,
                              enum cudaMemcpyKind kind, cudaStream_t stream,
                              PFN_cuMemcpyAsync_v4000 fn)
{
    uintptr_t at = 0;
    cudaError_t e = rt_register_symbol_range(symbol, count, offset, kind, false, &at);
    return e != cudaSuccess ? e : rt_register_copy_async((uintptr_t)dst, at, count, stream, fn);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count, size_t offset,
                        enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return rt_register_to_symbol_async(symbol, src, count, offset, kind, stream,
                                       rt_drv.cuMemcpyAsync);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemcpyToSymbolAsync_ptsz(const void *symbol, const void *src, size_t count, size_t offset,
                             enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return rt_register_to_symbol_async(symbol, src, count, offset, kind, stream,
                                       rt_drv.cuMemcpyAsync_ptsz);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t count, size_t offset,
                          enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return rt_register_from_symbol_async(dst, symbol, count, offset, kind, stream,
                                         rt_drv.cuMemcpyAsync);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemcpyFromSymbolAsync_ptsz(void *dst, const void *symbol, size_t count, size_t offset,
                               enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return rt_register_from_symbol_async(dst, symbol, count, offset, kind, stream,
                                         rt_drv.cuMemcpyAsync_ptsz);
}
