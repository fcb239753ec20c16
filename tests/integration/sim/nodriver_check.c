/* nodriver_check: what the runtime answers when libcuda.so.1 is missing or is the toolkit's stub.
 * Prints one line: "nodriver_check: malloc=E last=E cleared=E count=E n=N driver=E version=V". */
#include <cuda_runtime_api.h>
#include <stdio.h>

int
main(void)
{
    void *p = (void *)0x1;
    int n = -1, version = -1;
    cudaError_t malloc_e = cudaMalloc(&p, 4096);
    cudaError_t last = cudaGetLastError();
    cudaError_t cleared = cudaGetLastError();
    cudaError_t count = cudaGetDeviceCount(&n);
    cudaError_t driver = cudaDriverGetVersion(&version);
    printf("nodriver_check: malloc=%d last=%d cleared=%d count=%d n=%d driver=%d version=%d\n",
           (int)malloc_e, (int)last, (int)cleared, (int)count, n, (int)driver, version);
    return 0;
}
