"""A training loop's shape in plain Python: NVTX ranges through ctypes on a library exporting NVTX's
API (NVTX_EXPORT_API; NVIDIA's libnvtx3interop.so is such a library) and device memory through
ctypes on libcudart. Under `cuprof run` the ranges are the phases of `cuprof summary`.

Live bytes, per step: train opens on nothing, weights 16 MiB; forward +2 x 4 MiB; backward
+2 MiB then -8 MiB; optimizer.step -2 MiB; three steps; train closes on the weights.
Usage: nvtx_app.py LIBNVTX [deep]   (deep: the allocations come from 40 frames of recursion)
"""
import ctypes
import sys

MIB = 1 << 20
nvtx = ctypes.CDLL(sys.argv[1])
nvtx.nvtxRangePushA.argtypes = [ctypes.c_char_p]
rt = ctypes.CDLL("libcudart.so.13")
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
rt.cudaFree.argtypes = [ctypes.c_void_p]


def malloc(size, depth=0):
    if depth > 0:
        return malloc(size, depth - 1)
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), size) == 0
    return p.value


def main():
    depth = 40 if sys.argv[2:] == ["deep"] else 0
    nvtx.nvtxRangePushA(b"train")  # before the first CUDA call
    weights = malloc(16 * MIB, depth)
    for _ in range(3):
        nvtx.nvtxRangePushA(b"forward")
        acts = [malloc(4 * MIB, depth) for _ in range(2)]
        nvtx.nvtxRangePop()
        nvtx.nvtxRangePushA(b"backward")
        grads = malloc(2 * MIB, depth)
        for a in acts:
            rt.cudaFree(a)
        nvtx.nvtxRangePop()
        nvtx.nvtxRangePushA(b"optimizer.step")
        rt.cudaFree(grads)
        nvtx.nvtxRangePop()
    nvtx.nvtxRangePop()
    rt.cudaFree(weights)
    print("nvtx_app: ok")


if __name__ == "__main__":
    main()
