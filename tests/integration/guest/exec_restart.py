"""A job that replaces itself with os.execv after a 3 MiB device allocation: exec skips atexit, so
its snapshot is written by cuprof's execv before the new image (an interpreter that makes no CUDA
call) starts.
Usage: exec_restart.py   (prints "pid PID" before the exec)
Run by tests/integration/guest/test_guest.py (exec) and scripts/gpu-check."""
import ctypes
import os
import sys

cudart = ctypes.CDLL("libcudart.so.13")
p = ctypes.c_void_p()
assert cudart.cudaMalloc(ctypes.byref(p), 3 << 20) == 0
print("pid", os.getpid(), flush=True)
os.execv(sys.executable, [sys.executable, "-c", "pass"])
