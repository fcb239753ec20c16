"""A program that reaches CUDA through a binding (site-packages/fakebinding, several frames of the
package's own code over ctypes) and directly through ctypes; test_python_frames.py's `binding`
case reads back how cuprof names its call sites and libraries. Lines ending in `# @name` are
where frames must point. With the argument `wait` it stays alive until its standard input
closes, for `cuprof top`."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))
from fakebinding import api  # noqa: E402

KiB = 1024
kept = []


def load_weights():
    for _ in range(3):
        kept.append(api.to_device(64 * KiB))  # @load_weights


def scratch():
    rt = ctypes.CDLL("libcudart.so.13")
    p = ctypes.c_void_p()
    if rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(48 * KiB)) != 0:  # @scratch
        sys.exit("cudaMalloc failed")
    kept.append(p)


load_weights()  # @main_load
scratch()  # @main_scratch
print("binding: 4 allocations", flush=True)
if sys.argv[1:] == ["wait"]:  # for `cuprof top`: live until standard input closes
    sys.stdin.read()
