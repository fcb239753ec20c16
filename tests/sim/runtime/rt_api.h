/* rt_api: prototypes of the per-thread-default-stream (_ptsz/_ptds) exports, which the toolkit
 * header declares only for programs built with CUDA_API_PER_THREAD_DEFAULT_STREAM.
 * Lock: none. Hot path: n/a (declarations only). */
#ifndef CUPROF_SIM_RT_API_H
#define CUPROF_SIM_RT_API_H

#include <cuda_runtime_api.h>

#define RT_EXPORT __attribute__((visibility("default")))

cudaError_t CUDARTAPI cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream);
cudaError_t CUDARTAPI cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream);
cudaError_t CUDARTAPI cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
                                                   cudaStream_t stream);
cudaError_t CUDARTAPI cudaMemcpy_ptds(void *dst, const void *src, size_t count,
                                      enum cudaMemcpyKind kind);
cudaError_t CUDARTAPI cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
                                           enum cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t CUDARTAPI cudaMemset_ptds(void *devPtr, int value, size_t count);
cudaError_t CUDARTAPI cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count,
                                           cudaStream_t stream);
cudaError_t CUDARTAPI cudaStreamSynchronize_ptsz(cudaStream_t stream);
cudaError_t CUDARTAPI cudaStreamQuery_ptsz(cudaStream_t stream);
cudaError_t CUDARTAPI cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event,
                                               unsigned int flags);
cudaError_t CUDARTAPI cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream);
cudaError_t CUDARTAPI cudaStreamBeginCapture_ptsz(cudaStream_t stream,
                                                  enum cudaStreamCaptureMode mode);
cudaError_t CUDARTAPI cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph);
cudaError_t CUDARTAPI cudaStreamIsCapturing_ptsz(cudaStream_t stream,
                                                 enum cudaStreamCaptureStatus *pCaptureStatus);
cudaError_t CUDARTAPI cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *userData);
cudaError_t CUDARTAPI cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream,
                                                    unsigned int flags);
cudaError_t CUDARTAPI cudaStreamGetPriority_ptsz(cudaStream_t hStream, int *priority);
cudaError_t CUDARTAPI cudaStreamGetFlags_ptsz(cudaStream_t hStream, unsigned int *flags);
cudaError_t CUDARTAPI cudaStreamAddCallback_ptsz(cudaStream_t stream, cudaStreamCallback_t callback,
                                                 void *userData, unsigned int flags);
cudaError_t CUDARTAPI cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
                                        size_t width, size_t height, enum cudaMemcpyKind kind);
cudaError_t CUDARTAPI cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src,
                                             size_t spitch, size_t width, size_t height,
                                             enum cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t CUDARTAPI cudaMemset2D_ptds(void *devPtr, size_t pitch, int value, size_t width,
                                        size_t height);
cudaError_t CUDARTAPI cudaMemset2DAsync_ptsz(void *devPtr, size_t pitch, int value, size_t width,
                                             size_t height, cudaStream_t stream);
cudaError_t CUDARTAPI cudaMemPrefetchAsync_ptsz(const void *devPtr, size_t count,
                                                struct cudaMemLocation location, unsigned int flags,
                                                cudaStream_t stream);
cudaError_t CUDARTAPI cudaStreamGetCaptureInfo_ptsz(
    cudaStream_t stream, enum cudaStreamCaptureStatus *captureStatus_out,
    unsigned long long *id_out, cudaGraph_t *graph_out, const cudaGraphNode_t **dependencies_out,
    const cudaGraphEdgeData **edgeData_out, size_t *numDependencies_out);
cudaError_t CUDARTAPI cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream);
cudaError_t CUDARTAPI
cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags,
                             enum cudaDriverEntryPointQueryResult *driverStatus);
cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion_ptsz(
    const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *driverStatus);

/* What nvcc's generated host code calls (crt/host_runtime.h and crt/device_functions.h declare
 * them for C++ only): registration before main, <<<>>> configuration and kernel launch. */
void **CUDARTAPI __cudaRegisterFatBinary(void *fatCubin);
void CUDARTAPI __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void CUDARTAPI __cudaUnregisterFatBinary(void **fatCubinHandle);
void CUDARTAPI __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                                      const char *deviceName, int thread_limit, uint3 *tid,
                                      uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
void CUDARTAPI __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                                 const char *deviceName, int ext, size_t size, int constant,
                                 int global);
void CUDARTAPI __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress,
                                        char *deviceAddress, const char *deviceName, int ext,
                                        size_t size, int constant, int global);
char CUDARTAPI __cudaInitModule(void **fatCubinHandle);
unsigned CUDARTAPI __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                               struct CUstream_st *stream);
cudaError_t CUDARTAPI __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
                                                 void *stream);
cudaError_t CUDARTAPI __cudaGetKernel(cudaKernel_t *kernel, const void *func);
cudaError_t CUDARTAPI __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                         void **args, size_t sharedMem, cudaStream_t stream);
cudaError_t CUDARTAPI __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                              void **args, size_t sharedMem, cudaStream_t stream);
cudaError_t CUDARTAPI cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim,
                                            void **args, size_t sharedMem, cudaStream_t stream);
cudaError_t CUDARTAPI cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 gridDim,
                                                       dim3 blockDim, void **args, size_t sharedMem,
                                                       cudaStream_t stream);
cudaError_t CUDARTAPI cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t count,
                                              size_t offset, enum cudaMemcpyKind kind);
cudaError_t CUDARTAPI cudaMemcpyFromSymbol_ptds(void *dst, const void *symbol, size_t count,
                                                size_t offset, enum cudaMemcpyKind kind);
cudaError_t CUDARTAPI cudaMemcpyToSymbolAsync_ptsz(const void *symbol, const void *src,
                                                   size_t count, size_t offset,
                                                   enum cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t CUDARTAPI cudaMemcpyFromSymbolAsync_ptsz(void *dst, const void *symbol, size_t count,
                                                     size_t offset, enum cudaMemcpyKind kind,
                                                     cudaStream_t stream);

#endif
