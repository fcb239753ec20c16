#!/usr/bin/env python3
"""Several contexts on one device (contexts_app) under libcuprof.so in cache and trace mode: the
program's output is the same as without cuprof line for line (every step's result, the bytes read
back, the context each pointer belongs to), it exits 0, and the exit snapshot passes
check_snapshot.py --complete-history with nothing left live. Before cuprof told contexts apart,
its cache was one per device: a block of context B was cut from a segment of context A (B's
pointers reported context A), and destroying a library's short-lived context dropped the runtime
context's cache, so its live blocks failed and one free released the whole segment under another;
and the cache served cudaMallocAsync after the program made a pool of its own the device's current.

Usage: test_contexts.py --lib LIB --ld-path PATH --checker CHECK_SNAPSHOT_PY APP
"""
import argparse
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from shimrun import Checks, dumps, load_checker, run_shim  # noqa: E402 (tests/integration/)


def source_line(text):
    """The line of contexts_app.c that holds `text` (once)."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "contexts_app.c")) as f:
        hits = [i + 1 for i, line in enumerate(f) if text in line]
    assert len(hits) == 1, (text, hits)
    return hits[0]


def freed_at(trace, size):
    """The line of contexts_app.c in the stack of the last free_requested of `size` bytes."""
    frees = [e for e in trace if e["action"] == "free_requested" and e["size"] == size]
    frames = frees[-1].get("frames", []) if frees else []
    return next((fr["line"] for fr in frames if fr["filename"].endswith("contexts_app.c")), None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--checker", required=True)
    ap.add_argument("program")
    a = ap.parse_args()
    checker = load_checker(a.checker)
    check = Checks()
    base = run_shim([a.program], a.ld_path)
    check(base.returncode == 0 and "b1_context=B" in base.stdout and "y[0]=3" in base.stdout
          and "q_pool_is_own=1" in base.stdout,
          f"the simulated device itself does not keep contexts apart: {base}")
    for mode in ("cache", "trace"):
        with tempfile.TemporaryDirectory() as tmp:
            env = {"CUPROF_MODE": mode, "CUPROF_SNAPSHOT": os.path.join(tmp, "s-%n.pickle"),
                   "CUPROF_STACKS": "all"}
            shim = run_shim([a.program], a.ld_path, preload=a.lib, extra_env=env)
            check(shim.returncode == 0, f"{mode}: exit {shim.returncode}: {shim.stderr!r}")
            differ = [f"  without: {b!r}\n  with:    {s!r}"
                      for b, s in zip(base.stdout.splitlines(), shim.stdout.splitlines()) if b != s]
            check(shim.stdout == base.stdout,
                  f"{mode}: output differs from the run without cuprof:\n" + "\n".join(differ))
            files = dumps(tmp)
            check(files, f"{mode}: no snapshot written; stderr {shim.stderr!r}")
            if not files:
                continue
            snap = checker.load(files[-1])
            problems = checker.check(snap, complete_history=True)
            check(not problems, f"{mode}: check_snapshot --complete-history: {problems[:5]}")
            live = [(s["address"], b["size"]) for s in snap["segments"] for b in s["blocks"]
                    if b["state"] == "active_allocated"]
            check(not live, f"{mode}: blocks live at exit, every one was freed or went with its "
                            f"context: {live}")
            # Step 5: C's stream-ordered and VMM memory outlived C and were freed where the
            # program freed them, not at cuCtxDestroy (cuda.h).
            trace = snap["device_traces"][0]
            got = (freed_at(trace, 4096), freed_at(trace, 2 << 20))
            want = (source_line("cuMemFreeAsync(c_async"), source_line("cuMemUnmap(c_va"))
            check(got == want, f"{mode}: C's async and VMM memory freed at lines {got}, not {want}")
            print(f"contexts_app/{mode}: same output, snapshot consistent")
    check.finish()


if __name__ == "__main__":
    main()
