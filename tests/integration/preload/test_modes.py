#!/usr/bin/env python3
"""Every app in every mode: the program's output is identical with and without libcuprof.so, and
the snapshot written at exit (read back with pickle/json, checked by tests/golden/check_snapshot.py)
has exactly the alloc/free events, segments and live bytes the program says it made.

Usage: test_modes.py --lib LIBCUPROF --ld-path PATH --checker CHECK_SNAPSHOT_PY MODE PROGRAM...
"""
import argparse
import collections
import os
import re
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from shimrun import Checks, dumps, load_checker, run_shim  # noqa: E402 (tests/integration/)


def fields(line):
    return {k: v for k, v in re.findall(r"(\w+)=(\S+)", line)}


def expected_counts(name, out):
    """(allocs, frees, live_bytes, ooms) the program reports it made."""
    f = fields(out)
    if name == "oom":
        n = int(f["blocks"]) + int(f["realloc"])
        return n, n, 0, 2
    live = int(f.get("live_bytes", 0))
    return int(f["allocs"]), int(f["frees"]), live, 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--checker", required=True)
    ap.add_argument("mode")
    ap.add_argument("programs", nargs="+")
    a = ap.parse_intermixed_args()
    checker = load_checker(a.checker)
    check = Checks()

    for i, prog in enumerate(a.programs):
        name = os.path.basename(prog)
        base = run_shim([prog], a.ld_path, timeout=300)
        check(base[0] == 0, f"{name}: fails without cuprof: {base}")
        with tempfile.TemporaryDirectory() as tmp:
            ext = "pickle" if i % 2 == 0 else "json"  # both writers, read back independently
            env = {"CUPROF_MODE": a.mode, "CUPROF_SNAPSHOT": os.path.join(tmp, f"s-%n.{ext}")}
            shim = run_shim([prog], a.ld_path, preload=a.lib, extra_env=env, timeout=300)
            check(shim[0] == base[0], f"{name}/{a.mode}: exit {shim[0]}, without cuprof {base[0]}")
            check(shim[1] == base[1],
                  f"{name}/{a.mode}: output differs:\n  without: {base[1]!r}\n  with: {shim[1]!r}")
            files = dumps(tmp)
            if a.mode == "off":
                check(not files, f"{name}/off: off mode wrote {files}")
                continue
            check(files, f"{name}/{a.mode}: no snapshot written; stderr {shim[2]!r}")
            if not files:
                continue
            snap = checker.load(files[-1])  # the exit dump is the last one
            problems = checker.check(snap, complete_history=True)
            check(not problems, f"{name}/{a.mode}: check_snapshot: {problems[:5]}")
            allocs, frees, live, ooms = expected_counts(name, base[1])
            trace = snap["device_traces"][0]
            c = collections.Counter(e["action"] for e in trace)
            check(c["alloc"] == allocs, f"{name}/{a.mode}: {c['alloc']} alloc events, {allocs} made")
            check(c["free_requested"] == frees,
                  f"{name}/{a.mode}: {c['free_requested']} free_requested, {frees} frees made")
            check(c["free_completed"] == frees,
                  f"{name}/{a.mode}: {c['free_completed']} free_completed, {frees} frees made")
            check(c["oom"] == ooms, f"{name}/{a.mode}: {c['oom']} oom events, want {ooms}")
            blocks = [b for s in snap["segments"] for b in s["blocks"]]
            live_got = sum(b["requested_size"] for b in blocks if b["state"] == "active_allocated")
            check(live_got == live, f"{name}/{a.mode}: live bytes {live_got}, program says {live}")
            if a.mode == "trace":
                # One device allocation per request: a segment per alloc, freed with it.
                check(c["segment_alloc"] == allocs and c["segment_free"] == frees,
                      f"{name}/trace: segments {c['segment_alloc']}/{c['segment_free']}, "
                      f"want {allocs}/{frees}")
                check(all(len(s["blocks"]) == 1 for s in snap["segments"]),
                      f"{name}/trace: a segment with several blocks")
                check(len(snap["segments"]) == allocs - frees,
                      f"{name}/trace: {len(snap['segments'])} live segments, "
                      f"want {allocs - frees}")
            else:
                # The cache serves most requests from few device allocations.
                check(0 < c["segment_alloc"] < allocs,
                      f"{name}/cache: {c['segment_alloc']} segment_alloc for {allocs} allocs")
            check(snap["cuprof"]["mode"] == a.mode, f"{name}: snapshot mode {snap['cuprof']['mode']}")
            # Stacks start at the program: no frame of cuprof's shim (nor of the runtime call it
            # wrapped) is left in any recorded stack, the first call's included.
            own = [f["name"] for e in trace for f in e.get("frames", [])
                   if f["name"].startswith(("shim_", "stacks_", "cuprof_", "exports_"))
                   or "libcuprof" in f["filename"] or "/preload/" in f["filename"]]
            check(not own, f"{name}/{a.mode}: cuprof's own frames in stacks: {sorted(set(own))[:5]}")
            alloc_frames = [e["frames"] for e in trace if e["action"] == "alloc"]
            check(alloc_frames and all(fr for fr in alloc_frames),
                  f"{name}/{a.mode}: an alloc entry without a stack")
    check.finish()


if __name__ == "__main__":
    main()
