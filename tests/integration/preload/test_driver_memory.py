#!/usr/bin/env python3
"""Calls that take device memory for the driver itself (driver_memory_app.c on a 64 MiB simulated
device): kernel code under lazy loading (a module's function, a library's kernel, module or
function, the first launch of a kernel by every launch call, directly and through the pointers
cuGetProcAddress hands out), texture arrays, a larger thread stack, and under eager loading every
module and library load, each right after the program allocated all the free memory and freed it
again. Without cuprof every call succeeds; under cuprof's cache the freed memory stays cached, so
the cache must hand it back when the driver refuses one of them for lack of memory, and the call
is made again. The output is the program's own in cache mode, with expandable segments, in trace
and in off mode; the cache-mode history shows one release per call that needed memory, and one
line says so. A refusal that stands (held: the program keeps the memory, then asks for a function
of a module loaded before) reaches the program unchanged in every mode; cuprof says so once and
writes its first-OOM snapshot, named after the call. scripts/gpu-check runs the same program on a real GPU, with the kernel nvcc built
beside it (driver_memory_kernel.fatbin, which the simulated driver takes as any bytes).

Usage: test_driver_memory.py --lib LIB --ld-path PATH APP
"""
import os
import pickle
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/)

SIM = {"SIMCUDA_MEM": "64M"}
LAZY = ["module_load", "module_get_function", "kernel_get_function", "library_load",
        "library_get_module", "launch", "launch_ex", "launch_cooperative", "launch_looked_up",
        "launch_ptsz", "launch_ex_ptsz", "launch_cooperative_ptsz", "array_create",
        "array_3d_create", "stack_limit"]
EAGER = ["module_load_eager", "module_load_data_eager", "module_load_data_ex_eager",
         "module_load_fat_binary_eager", "library_load_eager", "library_load_from_file_eager"]
# The calls made right after a fill (the lazy loads take no memory: no fill before them).
NEED = {"": len(LAZY) - 2, "eager": len(EAGER)}


MODES = (("cache", {}), ("expandable", {"CUPROF_ALLOC_CONF": "expandable_segments:True"}),
         ("trace", {"CUPROF_MODE": "trace"}), ("off", {"CUPROF_MODE": "off"}))


def under_cuprof(a, argv):
    """argv under cuprof in each of MODES: [(mode, result, snapshot histories oldest first)]."""
    out = []
    for what, extra in MODES:
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(SIM, CUPROF_SNAPSHOT=os.path.join(tmp, "s-%n.pickle"), **extra)
            r = shimrun.run_shim(argv, a.ld_path, preload=a.lib, extra_env=env, timeout=60)
            traces = []
            for path in shimrun.dumps(tmp, "s-*.pickle"):
                with open(path, "rb") as f:
                    traces.append(pickle.load(f)["device_traces"][0])
        out.append((what, r, traces))
    return out


def main():
    a = shimrun.app_arguments()
    check = shimrun.Checks()
    for arg, names in (("", LAZY), ("eager", EAGER)):
        argv = [a.app] + ([arg] if arg else [])
        want = "".join("%s=CUDA_SUCCESS\n" % n for n in names)
        alone = shimrun.run_shim(argv, a.ld_path, extra_env=SIM, timeout=60)
        check(alone.returncode == 0 and alone.stdout == want,
              f"{arg or 'lazy'} alone: {alone.returncode} {alone.stdout!r} {alone.stderr!r}")
        for what, r, traces in under_cuprof(a, argv):
            label = f"{arg or 'lazy'} {what}"
            check(r.returncode == 0 and r.stdout == want,
                  f"{label}: exit {r.returncode}: {r.stdout!r}; stderr {r.stderr!r}")
            lines = [l for l in r.stderr.splitlines() if "found no device memory" in l]
            released = what in ("cache", "expandable")
            check(len(lines) == (1 if released else 0), f"{label}: release lines {lines}")
            if what != "cache":
                continue
            check(len(traces) == 1, f"{label}: {len(traces)} snapshots")
            actions = [e["action"] for e in traces[0] if e["action"] != "snapshot"]
            # Each fill: a segment, its block allocated and freed, cached; the call then finds
            # the driver short and the cache hands the segment back.
            step = ["segment_alloc", "alloc", "free_requested", "free_completed", "segment_free"]
            check(actions == step * NEED[arg], f"{label}: history {actions}")
    check_held(check, a)
    check.finish()


HELD = "module_load=CUDA_SUCCESS\nheld_module_get_function=CUDA_ERROR_OUT_OF_MEMORY\n"


def check_held(check, a):
    alone = shimrun.run_shim([a.app, "held"], a.ld_path, extra_env=SIM, timeout=60)
    check(alone.returncode == 0 and alone.stdout == HELD, f"held alone: {alone}")
    for what, r, traces in under_cuprof(a, [a.app, "held"]):
        label = f"held {what}"
        check(r.returncode == 0 and r.stdout == HELD, f"{label}: {r.stdout!r} {r.stderr!r}")
        lines = [l for l in r.stderr.splitlines() if "found no device memory for itself" in l]
        dumped = [l for l in r.stderr.splitlines()
                  if l.endswith("(out of memory on device 0 at cuModuleGetFunction)")]
        if what == "off":
            check(not lines and not dumped and not traces, f"{label}: {r.stderr!r}")
            continue
        cached = ", and cuprof's cache held none it could hand back" if what != "trace" else ""
        want = ("cuprof: cuModuleGetFunction: the driver found no device memory for itself (kernel "
                "code, an array or a thread stack, which it takes outside every allocation)%s; "
                "the program gets CUDA_ERROR_OUT_OF_MEMORY (logged once)" % cached)
        check(lines == [want], f"{label}: lines {lines}")
        # The first-OOM snapshot, then the one at exit.
        check(len(dumped) == 1 and len(traces) == 2, f"{label}: {dumped} {len(traces)}")


if __name__ == "__main__":
    main()
