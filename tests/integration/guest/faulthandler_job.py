"""A job that registers Python's faulthandler on SIGUSR1 after its first CUDA call (a common way
to ask a hung job for its tracebacks), then waits for a line: `kill -USR1` must print its
traceback and write cuprof's snapshot both.
Usage: faulthandler_job.py   (prints "ready PID", then "getsignal before/after" lines)
Run by tests/integration/guest/test_guest.py (signals)."""
import ctypes
import faulthandler
import os
import signal
import sys

cudart = ctypes.CDLL("libcudart.so.13")
p = ctypes.c_void_p()
assert cudart.cudaMalloc(ctypes.byref(p), 3 << 20) == 0
def told():
    return "default" if signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL else "other"


print("getsignal before", told(), flush=True)
faulthandler.register(signal.SIGUSR1, file=sys.stdout, all_threads=False)
print("ready", os.getpid(), flush=True)
sys.stdin.readline()
faulthandler.unregister(signal.SIGUSR1)
print("getsignal after", told(), flush=True)
