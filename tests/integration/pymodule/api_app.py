"""A Python program that makes its device allocations through ctypes on libcudart (no framework)
and asks cuprof PyTorch's memory questions through `import cuprof`: each answer is checked against
the snapshot and the stats it should match (read from _snapshot()'s dict, independently of the
call). Prints one `FAIL: ...` line per mismatch, then `api_app: ok` or exits 1.

Usage (under cuprof, PYTHONPATH holding the cuprof module): api_app.py WORK_DIR
"""
import collections
import ctypes
import os
import pickle
import sys

import cuprof


def cuprof_version_expected():
    """The version meson.build gives the project (what cuprof_version() says)."""
    import re
    top = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, os.pardir)
    with open(os.path.join(top, "meson.build")) as f:
        return re.search(r"version : '([^']+)'", f.read()).group(1)

MIB = 1 << 20
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def raises(exc, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc as e:
        return str(e)
    return None


rt = ctypes.CDLL("libcudart.so.13")
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
rt.cudaFree.argtypes = [ctypes.c_void_p]


def malloc(size):
    p = ctypes.c_void_p()
    rc = rt.cudaMalloc(ctypes.byref(p), size)
    return p.value if rc == 0 else -rc


def table(snap, device=0):
    """Totals of the block table: (allocated bytes, reserved bytes)."""
    segs = [s for s in snap["segments"] if s["device"] == device]
    allocated = sum(b["size"] for s in segs for b in s["blocks"]
                    if b["state"] == "active_allocated")
    return allocated, sum(s["total_size"] for s in segs)


def stats_of(snap, device=0):
    return snap["cuprof"]["stats"][device]


class Device:  # what torch.device looks like to the module
    def __init__(self, type_, index):
        self.type, self.index = type_, index


def before_cuda():
    """No CUDA call yet: cuprof answers without starting CUDA."""
    check(cuprof.memory_allocated() == 0 and cuprof.max_memory_reserved() == 0,
          "before CUDA: zero counters")
    stats = cuprof.memory_stats()
    check(isinstance(stats, collections.OrderedDict) and list(stats) == sorted(stats) and
          len(stats) > 50 and not any(stats.values()),
          f"before CUDA: memory_stats is every key, sorted, all 0: {len(stats)} keys")
    check("allocated_bytes.all.current" in stats and "num_alloc_retries" in stats,
          "memory_stats has PyTorch's keys")
    check(cuprof.memory_summary().startswith("|====="), "before CUDA: memory_summary's table")
    why = raises(cuprof.CuprofError, cuprof.device_count)
    check(why is not None and "no CUDA call yet" in why, f"before CUDA: device_count: {why}")
    cuprof.reset_peak_memory_stats()
    cuprof.empty_cache()
    cuprof._record_memory_history("all", context="all", stacks="python", max_entries=100000)
    with cuprof.annotate("warmup"):
        pass


@cuprof.annotate("step")
def step():
    b = malloc(1 * MIB)
    c = malloc(3 * MIB)
    rt.cudaFree(c)
    return b


def counters():
    with cuprof.annotate("forward"):
        a = malloc(8 * MIB)
    b = step()
    cuprof.mark("after step")
    check(cuprof.device_count() == 1, "device_count")
    snap = cuprof._snapshot()
    stats = stats_of(snap)
    allocated, reserved = table(snap)
    check(cuprof.memory_allocated() == stats["allocated_bytes.all.current"] == allocated ==
          9 * MIB, f"memory_allocated {cuprof.memory_allocated()}: table {allocated}")
    check(cuprof.memory_reserved() == stats["reserved_bytes.all.current"] == reserved,
          f"memory_reserved {cuprof.memory_reserved()}: table {reserved}")
    check(cuprof.max_memory_allocated() == stats["allocated_bytes.all.peak"] == 12 * MIB,
          f"max_memory_allocated {cuprof.max_memory_allocated()}")
    check(cuprof.max_memory_reserved() == stats["reserved_bytes.all.peak"],
          "max_memory_reserved")
    live = cuprof.memory_stats()
    check(all(live[k] == v for k, v in stats.items() if not k.startswith("num_sync")),
          "memory_stats equals the snapshot's stats")
    names = [(a["name"], a["stage"]) for a in snap.get("external_annotations", [])]
    check(names == [("warmup", "START"), ("warmup", "END"), ("forward", "START"),
                    ("forward", "END"), ("step", "START"), ("step", "END")],
          f"annotations (context manager, decorator, before CUDA): {names}")
    trace = snap["device_traces"][0]
    first = [e for e in trace if e["action"] == "alloc"][0]
    python = snap["cuprof"].get("python", {})
    check(first["size"] == 8 * MIB and
          (python.get("frames") != "captured" or
           any(f["filename"].endswith("api_app.py") for f in first["frames"])),
          f"stacks='python': the alloc's frames name the script ({python})")
    check(any(e["action"] == "annotate" and e.get("user_metadata") == "after step" and
              "stage" not in e for e in trace), "mark")
    for dev in ("cuda:0", "cuda", 0, None, Device("cuda", 0), Device("cuda", None)):
        check(cuprof.memory_allocated(dev) == 9 * MIB, f"device {dev!r}")
    check(raises(cuprof.CuprofError, cuprof.memory_allocated, 5) is not None, "no device 5")
    check(raises(ValueError, cuprof.memory_allocated, "cpu") is not None, "device 'cpu'")
    check(raises(ValueError, cuprof.memory_allocated, Device("cpu", 0)) is not None,
          "a cpu device")
    return a, b


def resets_and_cache(a, b):
    cuprof.reset_peak_memory_stats(0)
    check(cuprof.max_memory_allocated() == cuprof.memory_allocated() == 9 * MIB,
          "reset_peak_memory_stats: peak = current")
    cuprof.reset_accumulated_memory_stats("cuda:0")
    st = cuprof.memory_stats()
    check(st["allocation.all.allocated"] == 0 and st["allocation.all.freed"] == 0 and
          st["allocation.all.current"] == 2, "reset_accumulated_memory_stats")
    rt.cudaFree(a)
    check(cuprof.memory_allocated() == MIB, "memory_allocated after a free")
    before = cuprof.memory_reserved()
    cuprof.empty_cache()
    after = cuprof.memory_reserved()
    check(after < before and after == table(cuprof._snapshot())[1],
          f"empty_cache: reserved {before} -> {after}")
    rt.cudaFree(b)
    summary = cuprof.memory_summary(0)
    short = cuprof.memory_summary(device="cuda:0", abbreviated=True)
    check("PyTorch CUDA memory summary, device ID 0" in summary and len(short) < len(summary),
          "memory_summary, abbreviated")


def fraction():
    check(raises(TypeError, cuprof.set_per_process_memory_fraction, 1) is not None,
          "fraction must be a float")
    check(raises(ValueError, cuprof.set_per_process_memory_fraction, 1.5) is not None,
          "fraction above 1")
    cuprof.set_per_process_memory_fraction(0.001)  # 80 GiB * 0.001: about 80 MiB
    check(malloc(200 * MIB) == -2, "past the fraction: cudaErrorMemoryAllocation")
    cuprof.set_per_process_memory_fraction(1.0)
    p = malloc(200 * MIB)
    check(p > 0, "the whole device again")
    rt.cudaFree(p)


def history(work):
    cuprof._record_memory_history(enabled=None)
    check(cuprof._snapshot()["device_traces"][0] == [], "enabled=None stops and clears")
    p = malloc(MIB)
    check(cuprof._snapshot()["device_traces"][0] == [], "nothing recorded while stopped")
    rt.cudaFree(p)
    cuprof._record_memory_history(True, trace_alloc_max_entries=1000,
                                  trace_alloc_record_context=True)  # PyTorch's older form
    p = malloc(2 * MIB)
    trace = cuprof._snapshot()["device_traces"][0]
    check([e["size"] for e in trace if e["action"] == "alloc"] == [2 * MIB],
          "the legacy form records again")
    rt.cudaFree(p)
    cuprof._record_memory_history("all", clear_history=True)
    check([e["action"] for e in cuprof._snapshot()["device_traces"][0]] == [],
          "clear_history=True empties the history")
    path = os.path.join(work, "dump.pickle")
    cuprof._dump_snapshot(path)
    with open(path, "rb") as f:
        dumped = pickle.load(f)
    check(dumped["segments"] == cuprof._snapshot()["segments"], "_dump_snapshot writes it")
    check(raises(ValueError, cuprof._record_memory_history, "sometimes") is not None,
          "enabled must be all, state or None")


def main():
    check(cuprof.__version__ == cuprof_version_expected(), f"__version__ {cuprof.__version__}")
    before_cuda()
    a, b = counters()
    resets_and_cache(a, b)
    fraction()
    history(sys.argv[1])
    if failures:
        sys.exit(1)
    print("api_app: ok")


if __name__ == "__main__":
    main()
