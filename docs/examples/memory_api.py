# PyTorch's memory API, answered by cuprof, for a program with no PyTorch: ctypes on the runtime.
import ctypes

import cuprof

cudart = ctypes.CDLL("libcudart.so.13")
weights, activations = ctypes.c_void_p(), ctypes.c_void_p()

with cuprof.annotate("load"):
    cudart.cudaMalloc(ctypes.byref(weights), 300 << 20)
with cuprof.annotate("forward"):
    cudart.cudaMalloc(ctypes.byref(activations), 120 << 20)
    print("allocated", cuprof.memory_allocated(), "reserved", cuprof.memory_reserved())
    cudart.cudaFree(activations)
print("peak", cuprof.max_memory_allocated(0))
print("segments", cuprof.memory_stats()["segment.all.current"])
print(cuprof.memory_summary(abbreviated=True).splitlines()[0])
cuprof._dump_snapshot("api.pickle")
