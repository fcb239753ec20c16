#!/usr/bin/env python3
"""tests/integration/sim/runtime_check.c under libcuprof.so: compiled at test time the way a user
would (`gcc app.c -I$CUDA/include -L<dir> -lcudart`, -DCUDA_API_PER_THREAD_DEFAULT_STREAM for the
ptsz build), run on the simulated device without and with the shim. Under the shim every check
still passes with the same output (cudaMalloc3D, cudaMallocPitch, managed memory,
cudaMallocAsync(_ptsz)/cudaFreeAsync(_ptsz), a pool allocation, an OOM and cudaDeviceReset), and
the exit snapshot replays from an empty device (check_snapshot.py --complete-history) with every
allocation freed and a trace per simulated device.

Usage: test_runtime_check.py --lib LIB --ld-path PATH --checker CHECK_SNAPSHOT_PY --gcc GCC
       --cuda-include DIR --runtime-lib LIBCUDART SOURCE legacy|ptsz MODE
"""
import argparse
import collections
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from shimrun import Checks, dumps, load_checker, run_shim  # noqa: E402 (tests/integration/)


def build(a, exe):
    libdir = os.path.dirname(os.path.realpath(a.runtime_lib))
    cmd = [a.gcc, a.source, "-I" + a.cuda_include, "-L" + libdir, "-lcudart", "-o", exe]
    if a.build == "ptsz":
        cmd.insert(2, "-DCUDA_API_PER_THREAD_DEFAULT_STREAM")
    dyn = subprocess.run(["readelf", "-d", a.runtime_lib], capture_output=True, text=True).stdout
    if "libasan" in dyn:  # a sanitizer build: the program must load the ASan runtime first
        cmd.insert(2, "-fsanitize=address,undefined")
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"compile failed: {' '.join(cmd)}\n{p.stderr}")


def main():
    ap = argparse.ArgumentParser()
    for opt in ("--lib", "--ld-path", "--checker", "--gcc", "--cuda-include", "--runtime-lib"):
        ap.add_argument(opt, required=True)
    ap.add_argument("source")
    ap.add_argument("build", choices=("legacy", "ptsz"))
    ap.add_argument("mode", choices=("cache", "trace"))
    a = ap.parse_args()
    checker = load_checker(a.checker)
    check = Checks()
    what = f"{a.build}/{a.mode}"
    devices = 2 if a.build == "ptsz" else 1  # the per-thread build also runs cudaSetDevice(1)
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "runtime_check")
        build(a, exe)
        sim = {"SIMCUDA_DEVICES": devices}
        base = run_shim([exe], a.ld_path, extra_env=sim)
        check(base.returncode == 0 and base.stdout.startswith("runtime_check: ok "),
              f"{what}: fails without cuprof: {base}")
        env = dict(sim, CUPROF_MODE=a.mode, CUPROF_SNAPSHOT=os.path.join(tmp, "s-%n.pickle"))
        shim = run_shim([exe], a.ld_path, preload=a.lib, extra_env=env)
        check(shim.returncode == 0, f"{what}: exit {shim.returncode} under cuprof: {shim}")
        check(shim.stdout == base.stdout,
              f"{what}: output differs:\n  without: {base.stdout!r}\n  with: {shim.stdout!r}")
        files = dumps(tmp, "s-*")
        check(files, f"{what}: no snapshot written; stderr {shim.stderr!r}")
        if not files:
            check.finish()
        snap = checker.load(files[-1])  # the exit dump is the last one (an OOM dump comes first)
    problems = checker.check(snap, complete_history=True)
    check(not problems, f"{what}: check_snapshot --complete-history: {problems[:5]}")
    traces = snap["device_traces"]
    check(len(traces) == devices, f"{what}: {len(traces)} device traces, want {devices}")
    for dev, trace in enumerate(traces):
        c = collections.Counter(e["action"] for e in trace)
        check(c["alloc"] > 0, f"{what}: device {dev}: no alloc recorded")
        check(c["free_requested"] == c["alloc"] and c["free_completed"] == c["alloc"],
              f"{what}: device {dev}: {c['alloc']} allocs, {c['free_requested']} free_requested, "
              f"{c['free_completed']} free_completed (the program frees everything)")
        if a.mode == "trace":
            check(c["segment_alloc"] == c["alloc"] and c["segment_free"] == c["alloc"],
                  f"{what}: device {dev}: segments {c['segment_alloc']}/{c['segment_free']} "
                  f"for {c['alloc']} allocs")
    live = [b for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
    check(not live, f"{what}: live blocks at exit: {[(b['address'], b['size']) for b in live]}")
    # Recorded on device 0 with their exact sizes (the simulated device pitches rows to 512
    # bytes): cudaMalloc3D's 300x4x5 extent, cudaMallocPitch's 1000x7 and the 64 KiB pool block.
    sizes = collections.Counter(e["size"] for e in traces[0] if e["action"] == "alloc")
    for size, call in ((512 * 4 * 5, "cudaMalloc3D"), (1024 * 7, "cudaMallocPitch"),
                       (65536, "cudaMallocFromPoolAsync")):
        check(sizes[size] == 1, f"{what}: {sizes[size]} allocs of {size} bytes ({call}), want 1")
    check.finish()


if __name__ == "__main__":
    main()
