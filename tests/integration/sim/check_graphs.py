#!/usr/bin/env python3
"""CUDA graphs and stream capture (tests/apps/graphs.c) on the simulated device: the program's
answers alone must be graphs.expected (the behaviour cuda.h and the CUDA Programming Guide
document: graph memory nodes, the capture modes of cuThreadExchangeStreamCaptureMode, refused
calls invalidating the capture, fork and join through events), and under libcuprof.so in cache,
trace and off mode byte for byte the same: cuprof must not change what a capturing program sees.
In cache mode the snapshot shows what the cache answered: the cudaMalloc that a global capture
forbids (B) and the other thread's one (F0) reached the driver, which refused them, so they are
not there; the relaxed ones (D, E, F1) and K's after the captures are, in the freed block of
setup_warm, and so is M1's once its capture ended with a fork left unjoined (which ends the capture
for every stream: cuprof asks the driver). A cudaFreeAsync in a capture of a block of the cache
(L) is refused, the block kept.
The snapshot graph A's program writes while its graph holds its memory says so in
cuprof.device_footprint (graph_reserved_bytes_at_dump: 1 MiB), and `cuprof summary` names it;
the exit snapshot, after every graph is gone, says 0.
In trace mode the snapshot also records the captured cudaMallocAsync of graph A at its fixed
address, as an external allocation of the async pool.

With --answers-only (tests/apps/nvcc_graphs.cu) only the answers are compared; an empty
PROGRAM (the build found no nvcc) is skipped (77).
Usage: check_graphs.py --lib LIB --ld-path PATH --expected FILE [--cuprof CUPROF] [--answers-only]
                       PROGRAM
"""
import argparse
import difflib
import glob
import os
import pickle
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/)

N = 1 << 20


def check_graph_memory(check, tmp, mode, cuprof):
    """Snapshot 0 was written while graph A held its 1 MiB allocation, snapshot 1 at exit."""
    for n, want in ((0, N), (1, 0)):
        path = os.path.join(tmp, f"{mode}-{n}.pickle")
        if not check(os.path.exists(path), f"{mode}: no snapshot {n}"):
            continue
        with open(path, "rb") as f:
            fps = pickle.load(f)["cuprof"]["device_footprint"]
        got = [fp.get("graph_reserved_bytes_at_dump") for fp in fps]
        check(got == [want], f"{mode} snapshot {n}: graph memory {got}, want [{want}]")
        if cuprof is None:
            continue
        out = subprocess.run([cuprof, "summary", path], capture_output=True, text=True,
                             timeout=60)
        named = "CUDA graphs' memory nodes hold 1.00 MiB of it" in out.stdout
        check(out.returncode == 0 and named == (want > 0),
              f"{mode} snapshot {n}: summary (rc {out.returncode}) "
              f"{'does not name' if want else 'names'} graph memory:\n{out.stdout[-1500:]}")


def check_graph_allocations(check, tmp, mode, per_thread):
    """Graphs A's and J's cudaMallocAsync in their captures (on stream s, N bytes each) are in the
    exit snapshot's history in both modes, as the async pool's, with A's freed in its capture;
    in cache mode these are the only ones the driver's pool served, with, in the per-thread
    build, K's, captured on the thread's own default stream (cuprof must ask whether that stream
    captures, not the legacy one)."""
    path = os.path.join(tmp, f"{mode}-1.pickle")
    if not os.path.exists(path):
        return
    with open(path, "rb") as f:
        trace = pickle.load(f)["device_traces"][0]
    captured = [e for e in trace if e["action"] == "alloc" and e["size"] == N and e["stream"] != 0]
    check(len(captured) == 2, f"{mode}: graph allocations in the history: {captured}")
    if mode != "cache":
        return  # trace mode passes every stream-ordered allocation to the driver's pool
    graph = [e for e in trace if e["action"] == "alloc" and e.get("cuprof_pool") == "async"]
    want = 3 if per_thread else 2
    check(len(graph) == want, f"{mode}: {len(graph)} allocations passed to the driver's pool, "
                              f"want {want} (the captured ones): {graph}")
    if captured:
        freed = [e for e in trace if e["action"] == "free_completed" and
                 e["addr"] == captured[0]["addr"]]
        check(len(freed) >= 1, f"{mode}: graph A's allocation never freed: {captured[0]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--expected", required=True)
    ap.add_argument("--answers-only", action="store_true")
    ap.add_argument("--cuprof")
    ap.add_argument("program", nargs="?", default="")
    a = ap.parse_args()
    if not a.program:
        print("skipped: no nvcc")
        sys.exit(77)
    with open(a.expected, encoding="utf-8") as f:
        want = want_text = f.read()
    check = shimrun.Checks()
    with tempfile.TemporaryDirectory() as tmp:
        runs = [("alone", None, {})]
        runs += [(mode, a.lib, {"CUPROF_MODE": mode, "CUPROF_STACKS": "none",
                                "CUPROF_SNAPSHOT": os.path.join(tmp, mode + "-%n.pickle")})
                 for mode in ("cache", "trace", "off")]
        for name, lib, extra in runs:
            got = shimrun.run_shim([a.program], a.ld_path, preload=lib, extra_env=extra)
            check(got.returncode == 0, f"{name}: exit status {got.returncode}: {got.stderr[-800:]}")
            if not check(got.stdout == want, f"{name}: output differs from graphs.expected"):
                sys.stdout.writelines(difflib.unified_diff(
                    want.splitlines(True), got.stdout.splitlines(True), "expected", name, n=0))
        if a.answers_only:
            check.finish()
        for mode in ("cache", "trace"):
            check_graph_memory(check, tmp, mode, a.cuprof)
            check_graph_allocations(check, tmp, mode, "K_mallocasync_default=" in want)
        dumps = [os.path.join(tmp, "cache-1.pickle")]
        if check(os.path.exists(dumps[0]), "cache mode wrote no exit snapshot"):
            with open(dumps[0], "rb") as f:
                trace = pickle.load(f)["device_traces"][0]
            small = [e["addr"] for e in trace
                     if e["action"] == "alloc" and e["size"] == 4096 and e["stream"] == 0]
            # setup_pre, setup_warm, then F's blocks made before their captures, D, E, K's and
            # M1's (once every capture is over, cuprof knows it: M1's ended with a fork not
            # joined, which ends it for every stream, so cuprof asks the driver) and, in the
            # legacy build, I's before its capture: each in setup_warm's freed block, which every
            # one of them gave back (B's, refused, is not there: the programs' answers show that).
            want = 8 if "K_mallocasync_default=" in want_text else 9
            check(len(small) == want and all(a == small[1] for a in small[1:]),
                  f"4 KiB allocations served by the cache, want {want}: "
                  f"{[hex(a) for a in small]}")
            other = [e for e in trace if e["action"] == "alloc" and e["size"] == 3 << 20]
            check(len(other) == 1, f"the other thread's allocations: {other} (only F1's)")
            # Stream 0's small and large segment (L's block came from a segment of stream s).
            segments = [e for e in trace if e["action"] == "segment_alloc" and e["stream"] == 0]
            check(len(segments) == 2, f"segments: {segments}")
        dumps = [os.path.join(tmp, "trace-1.pickle")]
        if check(os.path.exists(dumps[0]), "trace mode wrote no exit snapshot"):
            with open(dumps[0], "rb") as f:
                snap = pickle.load(f)
            trace = snap["device_traces"][0]
            # Graph A's and graph J's allocations (N bytes each, made during capture).
            allocs = [e for e in trace if e["action"] == "alloc" and e["size"] == N]
            # setup's `out` and the two captured cudaMallocAsync calls.
            check(len(allocs) == 3, f"{len(allocs)} allocations of {N} bytes: {allocs}")
    check.finish()


if __name__ == "__main__":
    main()
