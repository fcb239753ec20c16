/* rt_array: texture arrays of the runtime API (cudaMallocArray, cudaMalloc3DArray,
 * cudaMallocMipmappedArray and their frees), handed to the driver's cuArray3DCreate and
 * cuMipmappedArrayCreate: a channel descriptor becomes the driver's format and channel count,
 * the extent its width, height and depth, the flags its CUDA_ARRAY3D_* flags (the same bits). A
 * runtime array is the driver's CUarray, a mipmapped one its CUmipmappedArray. Errors are the ones
 * cuda_runtime_api.h lists: a descriptor the driver has no format for is cudaErrorInvalidValue.
 * Lock: none of its own. Hot path: no. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>

#include "rt_api.h"
#include "rt_driver.h"
#include "rt_state.h"

RT_EXPORT struct cudaChannelFormatDesc CUDARTAPI
cudaCreateChannelDesc(int x, int y, int z, int w, enum cudaChannelFormatKind f)
{
    return (struct cudaChannelFormatDesc){.x = x, .y = y, .z = z, .w = w, .f = f};
}

/* The driver's format for `bits`-wide channels of kind `f`; false where it has none. */
static bool
driver_format(enum cudaChannelFormatKind f, int bits, CUarray_format *format)
{
    static const CUarray_format signed_formats[] = {
        CU_AD_FORMAT_SIGNED_INT8, CU_AD_FORMAT_SIGNED_INT16, CU_AD_FORMAT_SIGNED_INT32};
    static const CUarray_format unsigned_formats[] = {
        CU_AD_FORMAT_UNSIGNED_INT8, CU_AD_FORMAT_UNSIGNED_INT16, CU_AD_FORMAT_UNSIGNED_INT32};
    int index = bits == 8 ? 0 : bits == 16 ? 1 : bits == 32 ? 2 : -1;
    if (index < 0)
        return false;
    switch (f) {
    case cudaChannelFormatKindSigned:
        *format = signed_formats[index];
        return true;
    case cudaChannelFormatKindUnsigned:
        *format = unsigned_formats[index];
        return true;
    case cudaChannelFormatKindFloat:
        *format = bits == 16 ? CU_AD_FORMAT_HALF : CU_AD_FORMAT_FLOAT;
        return bits != 8;
    default:
        return false;
    }
}

/* The driver's descriptor for `desc` and the extent: channels x, x+y or all four, of one width. */
static bool
driver_descriptor(const struct cudaChannelFormatDesc *desc, struct cudaExtent extent,
                  unsigned int flags, CUDA_ARRAY3D_DESCRIPTOR *out)
{
    if (desc == NULL || extent.width == 0)
        return false;
    const int bits[4] = {desc->x, desc->y, desc->z, desc->w};
    unsigned channels = 0;
    while (channels < 4 && bits[channels] > 0)
        channels++;
    for (unsigned i = channels; i < 4; i++)
        if (bits[i] != 0)
            return false;
    for (unsigned i = 1; i < channels; i++)
        if (bits[i] != bits[0])
            return false;
    CUarray_format format;
    if ((channels != 1 && channels != 2 && channels != 4) ||
        !driver_format(desc->f, bits[0], &format))
        return false;
    *out = (CUDA_ARRAY3D_DESCRIPTOR){.Width = extent.width,
                                     .Height = extent.height,
                                     .Depth = extent.depth,
                                     .Format = format,
                                     .NumChannels = channels,
                                     .Flags = flags};
    return true;
}

/* The driver's descriptor of an allocation whose result goes to a non-NULL place, in a context:
 * cudaSuccess, else the error to return. */
static cudaError_t
allocation_ready(bool out_given, const struct cudaChannelFormatDesc *desc, struct cudaExtent extent,
                 unsigned int flags, CUDA_ARRAY3D_DESCRIPTOR *d)
{
    if (!out_given || !driver_descriptor(desc, extent, flags, d))
        return rt_state_ret(cudaErrorInvalidValue);
    return rt_state_ctx();
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMalloc3DArray(cudaArray_t *array, const struct cudaChannelFormatDesc *desc,
                  struct cudaExtent extent, unsigned int flags)
{
    CUDA_ARRAY3D_DESCRIPTOR d;
    cudaError_t e = allocation_ready(array != NULL, desc, extent, flags, &d);
    if (e != cudaSuccess)
        return e;
    CUarray a = NULL;
    CUresult r = RT_CALL(cuArray3DCreate, &a, &d);
    if (r == CUDA_SUCCESS)
        *array = (cudaArray_t)a;
    return rt_state_cu(r);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMallocArray(cudaArray_t *array, const struct cudaChannelFormatDesc *desc, size_t width,
                size_t height, unsigned int flags)
{
    return cudaMalloc3DArray(array, desc, (struct cudaExtent){width, height, 0}, flags);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMallocMipmappedArray(cudaMipmappedArray_t *mipmappedArray,
                         const struct cudaChannelFormatDesc *desc, struct cudaExtent extent,
                         unsigned int numLevels, unsigned int flags)
{
    CUDA_ARRAY3D_DESCRIPTOR d;
    cudaError_t e = allocation_ready(mipmappedArray != NULL, desc, extent, flags, &d);
    if (e != cudaSuccess)
        return e;
    CUmipmappedArray m = NULL;
    CUresult r = RT_CALL(cuMipmappedArrayCreate, &m, &d, numLevels);
    if (r == CUDA_SUCCESS)
        *mipmappedArray = (cudaMipmappedArray_t)m;
    return rt_state_cu(r);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaGetMipmappedArrayLevel(cudaArray_t *levelArray, cudaMipmappedArray_const_t mipmappedArray,
                           unsigned int level)
{
    if (levelArray == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    CUarray a = NULL;
    CUresult r =
        RT_CALL(cuMipmappedArrayGetLevel, &a, (CUmipmappedArray)(uintptr_t)mipmappedArray, level);
    if (r != CUDA_SUCCESS)
        return rt_state_cu(r);
    *levelArray = (cudaArray_t)a;
    return cudaSuccess;
}

/* Freeing NULL does nothing, as cudaFree(NULL) (after initialisation). */
RT_EXPORT cudaError_t CUDARTAPI
cudaFreeArray(cudaArray_t array)
{
    RT_CTX_OR_RETURN();
    return array == NULL ? cudaSuccess : rt_state_cu(RT_CALL(cuArrayDestroy, (CUarray)array));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaFreeMipmappedArray(cudaMipmappedArray_t mipmappedArray)
{
    RT_CTX_OR_RETURN();
    return mipmappedArray == NULL
               ? cudaSuccess
               : rt_state_cu(RT_CALL(cuMipmappedArrayDestroy, (CUmipmappedArray)mipmappedArray));
}
