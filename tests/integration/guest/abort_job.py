"""A job that dies by os.abort after a 3 MiB device allocation: abort skips atexit, so its
snapshot is written by cuprof's abort (the dumper thread) before SIGABRT ends it.
Usage: abort_job.py
Run by tests/integration/guest/test_guest.py (abort) and scripts/gpu-check."""
import ctypes
import os

cudart = ctypes.CDLL("libcudart.so.13")
p = ctypes.c_void_p()
assert cudart.cudaMalloc(ctypes.byref(p), 3 << 20) == 0
os.abort()
