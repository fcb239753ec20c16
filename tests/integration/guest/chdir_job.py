"""A job that changes directory after it started, as Hydra (outputs/DATE/TIME) and many scripts do:
allocates 3 MiB on the device, then changes into FOLDER and exits there.
Usage: chdir_job.py FOLDER   (prints "pid PID")
Run by tests/integration/guest/test_guest.py (chdir)."""
import ctypes
import os
import sys

cudart = ctypes.CDLL("libcudart.so.13")
p = ctypes.c_void_p()
assert cudart.cudaMalloc(ctypes.byref(p), 3 << 20) == 0
os.chdir(sys.argv[1])
print("pid", os.getpid(), flush=True)
