"""A multiprocessing child that allocates 3 MiB on the device and exits with 4: fork and
forkserver children end with os._exit, so its snapshot is written by cuprof's _exit.
Usage: multiprocessing_child.py START_METHOD   (prints "child PID", then "exitcode N")
Run by tests/integration/guest/test_guest.py (quick) and scripts/gpu-check."""
import ctypes
import multiprocessing
import os
import sys


def work():
    cudart = ctypes.CDLL("libcudart.so.13")
    p = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(p), 3 << 20) == 0
    print("child", os.getpid(), flush=True)
    sys.exit(4)


if __name__ == "__main__":
    multiprocessing.set_start_method(sys.argv[1])
    child = multiprocessing.Process(target=work)
    child.start()
    child.join()
    print("exitcode", child.exitcode, flush=True)
