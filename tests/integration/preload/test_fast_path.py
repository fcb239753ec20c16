#!/usr/bin/env python3
"""cudaMalloc and cudaFree answered at the runtime's export (preload/shim_rt.c), on the
simulated runtime's call log (SIMCUDA_RT_LOG: one line per cudaMalloc/cudaFree it ran itself).
fast_path_app makes a 4 KiB request twice, a 3 MiB one, a 0-byte one, frees NULL, a stale pointer
and managed memory. Checked:
- the program's output (results, last errors, NULL for size 0) equals a run without cuprof, in
  cache and trace mode; in cache mode the second 4 KiB request reuses the first's block;
- without cuprof and in trace mode the runtime ran every call (10 lines); in cache mode exactly
  the calls the cache cannot answer: the first 4 KiB request (cuprof not yet initialised), the
  3 MiB one (a new segment), size 0, cudaFree(NULL), the stale pointer (the driver wrapper
  reports it) and the managed pointer (not the cache's);
- under a runtime that says it is 11.8 (SIMCUDA_RUNTIME_VERSION, whose cudaSetDevice switched
  contexts lazily) every call reaches the runtime;
- after a sticky error (SIMCUDA_FAIL makes an event query fail with an illegal address), a
  cudaMalloc a cached block could serve and a cudaFree of a live block reach the runtime and
  return the error, as without cuprof;
- the exit snapshot (CUPROF_STACKS=all) records both 4 KiB requests alike: same address, same
  frames, naming fast_path_alloc and main and no runtime frame, whichever path served them; the
  frees name fast_path_free; the allocated counters are exact; the program owns the cache's bytes.

Usage: test_fast_path.py --lib LIB --ld-path PATH --checker CHECK_SNAPSHOT_PY APP
"""
import argparse
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from shimrun import Checks, dumps, load_checker, run_shim  # noqa: E402 (tests/integration/)

MIB = 1 << 20
REUSE = "second reuses the first"


def run(a, tmp, mode, runtime_version=None, sticky=False):
    """(result, runtime call log lines, snapshot or None) of one run; mode None: no cuprof."""
    log = os.path.join(tmp, f"rt-{mode}-{runtime_version}-{sticky}.log")
    env = {"SIMCUDA_RT_LOG": log}
    if sticky:
        env["SIMCUDA_FAIL"] = "event_query:nth=1"
    if runtime_version is not None:
        env["SIMCUDA_RUNTIME_VERSION"] = runtime_version
    if mode is not None:
        env.update({"CUPROF_MODE": mode, "CUPROF_STACKS": "all",
                    "CUPROF_SNAPSHOT": os.path.join(tmp, f"{mode}-%n.pickle")})
    cmd = [a.app, "sticky"] if sticky else [a.app]
    result = run_shim(cmd, a.ld_path, preload=a.lib if mode else None, extra_env=env)
    with open(log) as f:
        calls = [line.split() for line in f if line.strip()]
    files = dumps(tmp, f"{mode}-*.pickle") if mode else []
    for f in files:
        os.rename(f, f + ".read")
    snap = load_checker(a.checker).load(files[-1] + ".read") if files else None
    return result, calls, snap


def without_reuse(text):
    return [line for line in text.splitlines() if not line.startswith(REUSE)]


def check_snapshot(check, checker, snap):
    check(not checker.check(snap, complete_history=True), "snapshot fails check_snapshot.py")
    entries = [e for e in snap["device_traces"][0] if e["size"] in (4096, 3 * MIB)]
    allocs = [e for e in entries if e["action"] == "alloc"]
    frees = [e for e in entries if e["action"] == "free_requested"]
    check([e["size"] for e in allocs] == [4096, 4096, 3 * MIB], f"allocs: {allocs}")
    check(len(frees) == 3, f"free_requested: {frees}")
    if len(allocs) != 3 or len(frees) != 3:
        return
    check(allocs[0]["addr"] == allocs[1]["addr"], "the second 4 KiB block is not the first's")
    names = [[f["name"] for f in e["frames"]] for e in allocs]
    check(names[0] == names[1], f"slow and fast path frames differ: {names[0]} / {names[1]}")
    for n in names:
        check("fast_path_alloc" in n and "main" in n, f"alloc frames: {n}")
        check(not any(x.startswith("cuda") for x in n), f"runtime frames in {n}")
    for e in frees:
        n = [f["name"] for f in e["frames"]]
        check("fast_path_free" in n and "main" in n, f"free frames: {n}")
    stats = snap["cuprof"]["stats"][0]
    # Managed memory is the driver's: recorded as a segment and block of its own (8 KiB).
    want = {"allocation.all.allocated": 4, "allocation.small_pool.allocated": 3,
            "allocated_bytes.all.allocated": 2 * 4096 + 3 * MIB + 8192,
            "allocated_bytes.all.current": 0, "segment.all.allocated": 3, "num_device_alloc": 2, "num_alloc_retries": 0,
            "reserved_bytes.all.current": 2 * MIB + 20 * MIB}
    got = {k: stats.get(k) for k in want}
    check(got == want, f"stats: {got}, expected {want}")
    rows = [(r["library"], r["cache_requested_bytes_peak"], r["passthrough_bytes_peak"])
            for r in snap["cuprof"]["libraries"]]
    check(rows == [("preload_fast_path_app", 3 * MIB, 8192)], f"libraries: {rows}")

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--checker", required=True)
    ap.add_argument("app")
    a = ap.parse_args()
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        base, base_calls, _ = run(a, tmp, None)
        cache, cache_calls, snap = run(a, tmp, "cache")
        trace, trace_calls, _ = run(a, tmp, "trace")
        old, old_calls, _ = run(a, tmp, "cache", runtime_version="11080")
        sticky_base, sticky_base_calls, _ = run(a, tmp, None, sticky=True)
        sticky, sticky_calls, _ = run(a, tmp, "cache", sticky=True)
    check(base.returncode == 0, f"fails without cuprof: {base}")
    for name, r in (("cache", cache), ("trace", trace), ("cache under runtime 11.8", old)):
        check(r.returncode == 0, f"{name}: exit {r.returncode}: {r.stdout!r} {r.stderr!r}")
        check(without_reuse(r.stdout) == without_reuse(base.stdout),
              f"{name}: output differs: {base.stdout!r} / {r.stdout!r}")
    check(f"{REUSE}: 1" in cache.stdout, f"cache: {cache.stdout!r}")
    names = [c[0] for c in base_calls]
    check(names == ["cudaMalloc", "cudaFree"] * 3 + ["cudaMalloc", "cudaFree", "cudaFree", "cudaFree"],
          f"without cuprof: {base_calls}")
    check([c[0] for c in trace_calls] == names, f"trace mode: {trace_calls}")
    want = [["cudaMalloc", "4096"], ["cudaMalloc", str(3 * MIB)], ["cudaMalloc", "0"],
            ["cudaFree", "0"]]
    check(cache_calls[:4] == want, f"cache mode, the runtime ran: {cache_calls}")
    check(len(cache_calls) == 6 and all(c[0] == "cudaFree" and c[1] != "0" for c in cache_calls[4:]),
          f"cache mode, stale and managed frees: {cache_calls}")
    # A runtime older than 12 switched contexts lazily at cudaSetDevice: every call reaches it.
    check([c[0] for c in old_calls] == names,
          f"cache mode under runtime 11.8, the runtime ran: {old_calls}")
    # After a sticky error every runtime call returns it: the cache must not answer for it.
    check(sticky_base.returncode == 0 and "event query: 700" in sticky_base.stdout,
          f"sticky error without cuprof: {sticky_base}")
    check(sticky.returncode == 0 and without_reuse(sticky.stdout) == without_reuse(sticky_base.stdout),
          f"sticky error, cache mode: {sticky.stdout!r} / {sticky_base.stdout!r} {sticky.stderr!r}")
    check([c[0] for c in sticky_calls[-2:]] == ["cudaMalloc", "cudaFree"],
          f"sticky error, cache mode: the runtime did not get the last two calls: {sticky_calls}")
    if snap is None:
        check(False, "no snapshot")
    else:
        check_snapshot(check, load_checker(a.checker), snap)
    check.finish()


if __name__ == "__main__":
    main()
