/* sim_module: the device memory the driver takes for itself, outside every allocation call:
 * kernel code (modules and libraries, loaded eagerly or at first use as CUDA_MODULE_LOADING says:
 * LAZY, the default since CUDA 12.2, or EAGER), texture arrays (mipmapped ones too), and a thread
 * stack larger than the default (cuCtxSetLimit). Each charges the device's pages and fails with
 * CUDA_ERROR_OUT_OF_MEMORY when they do not fit, as a real driver does near the end of memory.
 * No code runs: a launch checks its function and stream, loads the code if lazy loading left it
 * unloaded, and is accepted. The code of every module takes one page (2 MiB); an array takes its
 * texels' bytes rounded up to pages (a mipmapped array the bytes of all its levels). Modules and
 * arrays stay charged until unloaded or destroyed (not dropped with their context: a simplification
 * no caller here depends on). */
#include "sim_driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODULE_MAGIC 0x6d6f6475u
#define FUNC_MAGIC   0x66756e63u
#define ARRAY_MAGIC  0x61727261u
#define MIPMAP_MAGIC 0x6d69706du

struct CUfunc_st {
    uint32_t magic;
    struct CUmod_st *mod;
    struct CUfunc_st *next;
};

struct CUmod_st {
    uint32_t magic;
    struct sim_device *dev;
    bool loaded; /* its code holds a page; protected by dev->lock */
    pthread_mutex_t funcs_lock;
    struct CUfunc_st *funcs; /* handed out, freed at unload; protected by funcs_lock */
};

/* A library is a module whose kernels are its functions (a CUkernel may be launched as a
 * CUfunction, cuda.h). */
struct CUlib_st {
    struct CUmod_st mod;
};

struct CUkern_st {
    struct CUfunc_st func;
};

struct CUarray_st {
    uint32_t magic;
    struct sim_device *dev;
    size_t pages;
    bool level; /* a mipmapped array's level: its pages are the mipmapped array's */
};

/* A mipmapped array takes the bytes of all its levels at once; each level is a CUarray of its
 * own (cuMipmappedArrayGetLevel) that goes with it. */
struct CUmipmappedArray_st {
    uint32_t magic;
    struct sim_device *dev;
    size_t pages;
    unsigned levels;
    struct CUarray_st level[];
};

/* Takes `pages` of the device's memory; false when they do not fit. */
static bool
charge_locked(struct sim_device *dev, size_t pages)
{
    size_t cap = dev->capacity / SIM_PAGE;
    if (dev->used_pages > cap || pages > cap - dev->used_pages)
        return false;
    dev->used_pages += pages;
    return true;
}

static bool
lazy_loading(void)
{
    const char *mode = getenv("CUDA_MODULE_LOADING");
    return mode == NULL || strcmp(mode, "EAGER") != 0;
}

/* Loads the module's code into device memory unless it is there. */
static CUresult
module_load_code(struct CUmod_st *mod)
{
    pthread_mutex_lock(&mod->dev->lock);
    bool ok = mod->loaded || charge_locked(mod->dev, 1);
    if (ok)
        mod->loaded = true;
    pthread_mutex_unlock(&mod->dev->lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* A module for the current context's device; its code loaded now unless loading is lazy. */
static CUresult
module_new(struct CUmod_st *mod, const void *image)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (image == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *mod = (struct CUmod_st){.magic = MODULE_MAGIC, .dev = ctx->dev};
    pthread_mutex_init(&mod->funcs_lock, NULL);
    return lazy_loading() ? CUDA_SUCCESS : module_load_code(mod);
}

static void
module_drop(struct CUmod_st *mod)
{
    pthread_mutex_lock(&mod->dev->lock);
    if (mod->loaded)
        mod->dev->used_pages--;
    mod->loaded = false;
    pthread_mutex_unlock(&mod->dev->lock);
    pthread_mutex_lock(&mod->funcs_lock);
    struct CUfunc_st *f = mod->funcs;
    mod->funcs = NULL;
    pthread_mutex_unlock(&mod->funcs_lock);
    while (f != NULL) {
        struct CUfunc_st *next = f->next;
        f->magic = 0;
        free(f);
        f = next;
    }
    mod->magic = 0;
    pthread_mutex_destroy(&mod->funcs_lock);
}

/* A new function of `mod` (any name: the image is not parsed). */
static CUresult
module_function(struct CUmod_st *mod, const char *name, struct CUfunc_st **out)
{
    if (mod == NULL || mod->magic != MODULE_MAGIC || name == NULL || out == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    /* A CUkernel is a CUfunction with nothing more (cuda.h lets one stand for the other). */
    struct CUfunc_st *f = calloc(1, sizeof(struct CUkern_st));
    if (f == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    f->magic = FUNC_MAGIC;
    f->mod = mod;
    pthread_mutex_lock(&mod->funcs_lock);
    f->next = mod->funcs;
    mod->funcs = f;
    pthread_mutex_unlock(&mod->funcs_lock);
    *out = f;
    return CUDA_SUCCESS;
}

/* A module (or, `bytes` larger, the library holding one as its first member) for `image`. */
static CUresult
module_create(size_t bytes, const void *image, struct CUmod_st **out)
{
    if (out == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUmod_st *mod = malloc(bytes);
    if (mod == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = module_new(mod, image);
    if (r != CUDA_SUCCESS) {
        free(mod);
        return r;
    }
    *out = mod;
    return CUDA_SUCCESS;
}

/* A file the driver would read code from: it must exist (its bytes are not parsed). */
static CUresult
file_readable(const char *name)
{
    if (name == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    FILE *f = fopen(name, "rb");
    if (f == NULL)
        return CUDA_ERROR_FILE_NOT_FOUND;
    fclose(f);
    return CUDA_SUCCESS;
}

CUresult
cuModuleLoadData(CUmodule *module, const void *image)
{
    return module_create(sizeof(struct CUmod_st), image, module);
}

CUresult
cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                   CUjit_option *options, void **optionValues)
{
    (void)numOptions, (void)options, (void)optionValues;
    return cuModuleLoadData(module, image);
}

CUresult
cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    return cuModuleLoadData(module, fatCubin);
}

CUresult
cuModuleLoad(CUmodule *module, const char *fname)
{
    CUresult r = file_readable(fname);
    return r == CUDA_SUCCESS ? cuModuleLoadData(module, fname) : r;
}

CUresult
cuModuleUnload(CUmodule hmod)
{
    if (hmod == NULL || hmod->magic != MODULE_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    module_drop(hmod);
    free(hmod);
    return CUDA_SUCCESS;
}

/* Lazy loading loads a module's code when a function of it is first asked for. */
CUresult
cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    if (hfunc == NULL || hmod == NULL || hmod->magic != MODULE_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult r = module_load_code(hmod);
    return r == CUDA_SUCCESS ? module_function(hmod, name, hfunc) : r;
}

static CUresult
library_load(CUlibrary *library, const void *code)
{
    struct CUmod_st *mod = NULL;
    CUresult r = module_create(sizeof(struct CUlib_st), code, library != NULL ? &mod : NULL);
    if (r == CUDA_SUCCESS)
        *library = (struct CUlib_st *)(void *)mod;
    return r;
}

CUresult
cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                  void **jitOptionsValues, unsigned int numJitOptions,
                  CUlibraryOption *libraryOptions, void **libraryOptionValues,
                  unsigned int numLibraryOptions)
{
    (void)jitOptions, (void)jitOptionsValues, (void)numJitOptions;
    (void)libraryOptions, (void)libraryOptionValues, (void)numLibraryOptions;
    return library_load(library, code);
}

CUresult
cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
                      void **jitOptionsValues, unsigned int numJitOptions,
                      CUlibraryOption *libraryOptions, void **libraryOptionValues,
                      unsigned int numLibraryOptions)
{
    (void)jitOptions, (void)jitOptionsValues, (void)numJitOptions;
    (void)libraryOptions, (void)libraryOptionValues, (void)numLibraryOptions;
    CUresult r = file_readable(fileName);
    return r == CUDA_SUCCESS ? library_load(library, fileName) : r;
}

CUresult
cuLibraryUnload(CUlibrary library)
{
    if (library == NULL || library->mod.magic != MODULE_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    module_drop(&library->mod);
    free(library);
    return CUDA_SUCCESS;
}

/* A library's kernel: context-independent, nothing loaded yet. */
CUresult
cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    if (pKernel == NULL || library == NULL)
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUfunc_st *f = NULL;
    CUresult r = module_function(&library->mod, name, &f);
    if (r == CUDA_SUCCESS)
        *pKernel = (CUkernel)(void *)f;
    return r;
}

CUresult
cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
    if (pMod == NULL || library == NULL || library->mod.magic != MODULE_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult r = module_load_code(&library->mod);
    if (r == CUDA_SUCCESS)
        *pMod = &library->mod;
    return r;
}

/* The kernel in the current context: its code loaded there. */
CUresult
cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    struct CUfunc_st *f = (struct CUfunc_st *)(void *)kernel;
    if (pFunc == NULL || f == NULL || f->magic != FUNC_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult r = module_load_code(f->mod);
    if (r == CUDA_SUCCESS)
        *pFunc = f;
    return r;
}

/* A launch of `f` on `stream`: the function must be one of ours and the stream live; the code is
 * loaded first if lazy loading left it unloaded. No code runs. */
static CUresult
launch(CUfunction f, CUstream stream, bool per_thread)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (f == NULL || f->magic != FUNC_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    CUstreamCaptureStatus status;
    r = per_thread ? cuStreamIsCapturing_ptsz(stream, &status)
                   : cuStreamIsCapturing(stream, &status);
    if (r != CUDA_SUCCESS)
        return r;
    return module_load_code(f->mod);
}

CUresult
cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
               unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
               unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
    (void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY;
    (void)blockDimZ, (void)sharedMemBytes, (void)kernelParams, (void)extra;
    return launch(f, hStream, false);
}

CUresult
cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                    unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                    unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                    void **kernelParams, void **extra)
{
    (void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY;
    (void)blockDimZ, (void)sharedMemBytes, (void)kernelParams, (void)extra;
    return launch(f, hStream, true);
}

CUresult
cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    (void)kernelParams, (void)extra;
    if (config == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return launch(f, config->hStream, false);
}

CUresult
cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    (void)kernelParams, (void)extra;
    if (config == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return launch(f, config->hStream, true);
}

CUresult
cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                          unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                          unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                          void **kernelParams)
{
    (void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY;
    (void)blockDimZ, (void)sharedMemBytes, (void)kernelParams;
    return launch(f, hStream, false);
}

CUresult
cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                               unsigned int gridDimZ, unsigned int blockDimX,
                               unsigned int blockDimY, unsigned int blockDimZ,
                               unsigned int sharedMemBytes, CUstream hStream, void **kernelParams)
{
    (void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY;
    (void)blockDimZ, (void)sharedMemBytes, (void)kernelParams;
    return launch(f, hStream, true);
}

/* ---- arrays ---- */

static size_t
format_bytes(CUarray_format format)
{
    switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4;
    default:
        return 0;
    }
}

/* The bytes of one array of these extents (0 height or depth: 1), or SIZE_MAX past size_t. */
static size_t
array_bytes(size_t width, size_t height, size_t depth, size_t texel)
{
    height = height ? height : 1;
    depth = depth ? depth : 1;
    if (width > SIZE_MAX / height / depth / texel)
        return SIZE_MAX;
    return width * height * depth * texel;
}

static size_t
pages_of(size_t bytes)
{
    return bytes / SIM_PAGE + (bytes % SIM_PAGE != 0);
}

/* The texel size of a valid descriptor, else 0 (CUDA_ERROR_INVALID_VALUE). */
static size_t
texel_bytes(size_t width, CUarray_format format, unsigned channels)
{
    if (width == 0 || (channels != 1 && channels != 2 && channels != 4))
        return 0;
    return format_bytes(format) * channels;
}

/* Takes `pages` of `dev`'s memory: CUDA_ERROR_OUT_OF_MEMORY when they do not fit. */
static CUresult
charge(struct sim_device *dev, size_t pages)
{
    pthread_mutex_lock(&dev->lock);
    bool ok = charge_locked(dev, pages);
    pthread_mutex_unlock(&dev->lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static void
uncharge(struct sim_device *dev, size_t pages)
{
    pthread_mutex_lock(&dev->lock);
    dev->used_pages -= pages;
    pthread_mutex_unlock(&dev->lock);
}

static CUresult
array_create(CUarray *handle, size_t width, size_t height, size_t depth, CUarray_format format,
             unsigned channels)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    size_t texel = texel_bytes(width, format, channels);
    if (handle == NULL || texel == 0)
        return CUDA_ERROR_INVALID_VALUE;
    size_t bytes = array_bytes(width, height, depth, texel);
    if (bytes == SIZE_MAX)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct CUarray_st *a = malloc(sizeof(*a));
    if (a == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *a = (struct CUarray_st){.magic = ARRAY_MAGIC, .dev = ctx->dev, .pages = pages_of(bytes)};
    r = charge(a->dev, a->pages);
    if (r != CUDA_SUCCESS) {
        free(a);
        return r;
    }
    *handle = a;
    return CUDA_SUCCESS;
}

CUresult
cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
    if (pAllocateArray == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return array_create(pHandle, pAllocateArray->Width, pAllocateArray->Height, 1,
                        pAllocateArray->Format, pAllocateArray->NumChannels);
}

CUresult
cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
    if (pAllocateArray == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return array_create(pHandle, pAllocateArray->Width, pAllocateArray->Height,
                        pAllocateArray->Depth, pAllocateArray->Format, pAllocateArray->NumChannels);
}

/* A level goes with its mipmapped array (cuda.h says nothing of destroying one alone: refused). */
CUresult
cuArrayDestroy(CUarray hArray)
{
    if (hArray == NULL || hArray->magic != ARRAY_MAGIC || hArray->level)
        return CUDA_ERROR_INVALID_HANDLE;
    uncharge(hArray->dev, hArray->pages);
    hArray->magic = 0;
    free(hArray);
    return CUDA_SUCCESS;
}

/* ---- mipmapped arrays ---- */

/* Level i halves each extent i times (never below 1); the layers of a layered array or a cubemap
 * (its depth) stay. Up to 1 + log2 of the largest extent halved. */
static unsigned
max_levels(size_t width, size_t height, size_t depth)
{
    size_t largest = width > height ? width : height;
    largest = largest > depth ? largest : depth;
    unsigned levels = 1;
    while (largest >>= 1)
        levels++;
    return levels;
}

static size_t
halved(size_t extent, unsigned times)
{
    if (extent == 0)
        return 0;
    extent >>= times;
    return extent ? extent : 1;
}

CUresult
cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                       const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                       unsigned int numMipmapLevels)
{
    const CUDA_ARRAY3D_DESCRIPTOR *d = pMipmappedArrayDesc;
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (pHandle == NULL || d == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    size_t texel = texel_bytes(d->Width, d->Format, d->NumChannels);
    bool layers = (d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
    size_t depth_halved = layers ? 0 : d->Depth;
    if (texel == 0 || numMipmapLevels == 0 ||
        numMipmapLevels > max_levels(d->Width, d->Height, depth_halved))
        return CUDA_ERROR_INVALID_VALUE;
    size_t bytes = 0;
    for (unsigned i = 0; i < numMipmapLevels; i++) {
        size_t level = array_bytes(halved(d->Width, i), halved(d->Height, i),
                                   layers ? d->Depth : halved(d->Depth, i), texel);
        if (level == SIZE_MAX || bytes > SIZE_MAX - level)
            return CUDA_ERROR_OUT_OF_MEMORY;
        bytes += level;
    }
    struct CUmipmappedArray_st *m =
        malloc(sizeof(*m) + numMipmapLevels * sizeof(struct CUarray_st));
    if (m == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *m = (struct CUmipmappedArray_st){.magic = MIPMAP_MAGIC,
                                      .dev = ctx->dev,
                                      .pages = pages_of(bytes),
                                      .levels = numMipmapLevels};
    r = charge(m->dev, m->pages);
    if (r != CUDA_SUCCESS) {
        free(m);
        return r;
    }
    for (unsigned i = 0; i < numMipmapLevels; i++)
        m->level[i] = (struct CUarray_st){.magic = ARRAY_MAGIC, .dev = m->dev, .level = true};
    *pHandle = m;
    return CUDA_SUCCESS;
}

CUresult
cuMipmappedArrayGetLevel(CUarray *pLevelArray, CUmipmappedArray hMipmappedArray, unsigned int level)
{
    if (hMipmappedArray == NULL || hMipmappedArray->magic != MIPMAP_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    if (pLevelArray == NULL || level >= hMipmappedArray->levels)
        return CUDA_ERROR_INVALID_VALUE;
    *pLevelArray = &hMipmappedArray->level[level];
    return CUDA_SUCCESS;
}

CUresult
cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    if (hMipmappedArray == NULL || hMipmappedArray->magic != MIPMAP_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    uncharge(hMipmappedArray->dev, hMipmappedArray->pages);
    hMipmappedArray->magic = 0;
    free(hMipmappedArray);
    return CUDA_SUCCESS;
}

/* ---- the thread stack (cuCtxSetLimit) ---- */

size_t
sim_module_stack_pages(size_t stack_bytes)
{
    /* Every thread the device can hold at once gets the stack: 132 SMs x 2048 threads. */
    const size_t threads = (size_t)132 * 2048, base = 1024;
    if (stack_bytes <= base)
        return 0;
    size_t extra = stack_bytes - base;
    if (extra > SIZE_MAX / threads)
        return SIZE_MAX;
    size_t bytes = extra * threads;
    return bytes / SIM_PAGE + (bytes % SIM_PAGE != 0);
}

bool
sim_module_charge_locked(struct sim_device *dev, size_t pages)
{
    return charge_locked(dev, pages);
}
