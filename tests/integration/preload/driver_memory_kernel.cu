// driver_memory_kernel.cu: the code driver_memory_app loads on a real GPU (built as a fat binary
// next to it when nvcc is there): one kernel without parameters.
extern "C" __global__ void kernel(void) {}
