"""Allocations from Python on the simulated runtime, one distinct size per scenario, made through
ctypes: PyDLL keeps the GIL during the call, CDLL releases it. test_python_frames.py reads the
stacks back from the snapshot; a line ending in `# @name` is where a frame must point. Runs on
every CPython from 3.6 on (no syntax newer than that)."""
import asyncio
import ctypes
import sys
import threading

held_rt = ctypes.PyDLL("libcudart.so.13")
free_rt = ctypes.CDLL("libcudart.so.13")
KiB = 1024
kept = []


def alloc(rt, size):
    p = ctypes.c_void_p()
    rc = rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size))  # @alloc
    if rc != 0:
        sys.exit("cudaMalloc(%d) = %d" % (size, rc))
    return p


def held():
    return alloc(held_rt, 1 * KiB)  # @held


def released():
    return alloc(free_rt, 2 * KiB)  # @released


def worker(size, out):
    out.append(alloc(free_rt, size))  # @worker


def threads():
    out = []
    workers = [threading.Thread(target=worker, args=((4 + i) * KiB, out)) for i in range(3)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return out


def gen():
    yield alloc(held_rt, 8 * KiB)  # @gen


def use_gen():
    return next(gen())  # @use_gen


async def coro():
    return alloc(free_rt, 9 * KiB)  # @coro


async def outer():
    return await coro()  # @outer


def use_coro():
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(outer())  # @use_coro
    finally:
        loop.close()


class Keyer:
    def key(self, x):
        if x == 2:
            self.kept = alloc(held_rt, 10 * KiB)  # @key
        return x


def call_sorted():
    k = Keyer()
    sorted([3, 1, 2], key=k.key)  # @call_sorted
    return k.kept


CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
compared = []


def compare(a, b):
    if not compared:
        compared.append(alloc(free_rt, 11 * KiB))  # @compare
    return a[0] - b[0]


def call_qsort():
    libc = ctypes.CDLL(None)
    numbers = (ctypes.c_int * 3)(3, 1, 2)
    libc.qsort(numbers, 3, ctypes.sizeof(ctypes.c_int), CMP(compare))  # @call_qsort
    return list(numbers)


def raiser():
    kept.append(alloc(held_rt, 12 * KiB))  # @raiser
    raise ValueError("through the frames")


def catcher():
    try:
        raiser()  # @catcher_try
    except ValueError:
        return alloc(held_rt, 13 * KiB)  # @catcher_except


def deep(n):
    if n == 0:
        return alloc(held_rt, 14 * KiB)  # @deep_leaf
    return deep(n - 1)  # @deep


kept.append(held())  # @main_held
kept.append(released())  # @main_released
kept.extend(threads())  # @main_threads
kept.append(use_gen())  # @main_gen
kept.append(use_coro())  # @main_coro
kept.append(call_sorted())  # @main_sorted
assert call_qsort() == [1, 2, 3]  # @main_qsort
kept.append(catcher())  # @main_catcher
kept.append(deep(40))  # @main_deep
print("py: allocations made", len(kept) + len(compared), flush=True)
