#!/usr/bin/env python3
"""free_sync:events and free_sync:none (CUPROF_ALLOC_CONF) under libcuprof.so in cache mode on the
simulated streams: the program's output is identical with and without the shim, the exit snapshot
replays from an empty device (check_snapshot.py --complete-history), and the free history shows
the setting at work.

events: a cudaFree'd block becomes reusable only once the events recorded on every stream the
  device used have completed, so some free_requested entries are followed by their
  free_completed only later (other entries in between); a free still waiting at exit is a block
  in state active_pending_free.
none: every free completes at once: each free_requested is immediately followed by its
  free_completed (the apps free asynchronously only on the allocation's own stream).

Usage: test_free_sync.py --lib LIB --ld-path PATH --checker CHECK_SNAPSHOT_PY events|none APP...
"""
import argparse
import collections
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shimrun import Checks, dumps, light, load_checker, run_shim  # noqa: E402 (tests/integration/)
from test_modes import expected_counts  # noqa: E402


def free_pairs(trace):
    """For each free_requested (by trace index): the index of its free_completed (the next one of
    the same address), or None; and the free_completed entries no request precedes."""
    waiting = {}
    pairs = {}
    orphans = []
    for i, e in enumerate(trace):
        if e["action"] == "free_requested":
            waiting[e["addr"]] = i
            pairs[i] = None
        elif e["action"] == "free_completed":
            j = waiting.pop(e["addr"], None)
            if j is None:
                orphans.append(i)
            else:
                pairs[j] = i
    return pairs, orphans


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--checker", required=True)
    ap.add_argument("sync", choices=("events", "none"))
    ap.add_argument("programs", nargs="+")
    a = ap.parse_intermixed_args()
    checker = load_checker(a.checker)
    check = Checks()
    for prog in a.programs:
        name = f"{os.path.basename(prog)}/free_sync:{a.sync}"
        base = run_shim(light(prog), a.ld_path, timeout=300)
        check(base.returncode == 0, f"{name}: fails without cuprof: {base}")
        with tempfile.TemporaryDirectory() as tmp:
            env = {"CUPROF_MODE": "cache", "CUPROF_ALLOC_CONF": "free_sync:" + a.sync,
                   "CUPROF_SNAPSHOT": os.path.join(tmp, "s-%n.pickle")}
            shim = run_shim(light(prog), a.ld_path, preload=a.lib, extra_env=env, timeout=300)
            check(shim.returncode == 0, f"{name}: exit {shim.returncode}: {shim.stderr!r}")
            check(shim.stdout == base.stdout,
                  f"{name}: output differs:\n  without: {base.stdout!r}\n  with: {shim.stdout!r}")
            files = dumps(tmp)
            check(files, f"{name}: no snapshot written; stderr {shim.stderr!r}")
            if not files:
                continue
            snap = checker.load(files[-1])
        problems = checker.check(snap, complete_history=True)
        check(not problems, f"{name}: check_snapshot --complete-history: {problems[:5]}")
        conf = snap["allocator_settings"].get("PYTORCH_CUDA_ALLOC_CONF")
        check(conf == "free_sync:" + a.sync, f"{name}: allocator_settings conf {conf!r}")
        allocs, frees, live, _ = expected_counts(os.path.basename(prog), base.stdout)
        trace = snap["device_traces"][0]
        c = collections.Counter(e["action"] for e in trace)
        check(c["alloc"] == allocs and c["free_requested"] == frees,
              f"{name}: {c['alloc']} allocs, {c['free_requested']} free_requested; the program "
              f"made {allocs} and {frees}")
        pairs, orphans = free_pairs(trace)
        check(not orphans, f"{name}: free_completed without a request at {orphans[:5]}")
        adjacent = sum(1 for i, j in pairs.items() if j == i + 1)
        later = sum(1 for i, j in pairs.items() if j is not None and j > i + 1)
        pending = sum(1 for j in pairs.values() if j is None)
        blocks = [b for s in snap["segments"] for b in s["blocks"]]
        states = collections.Counter(b["state"] for b in blocks)
        live_got = sum(b["requested_size"] for b in blocks if b["state"] == "active_allocated")
        check(live_got == live, f"{name}: live bytes {live_got}, program says {live}")
        check(states["active_pending_free"] == pending,
              f"{name}: {pending} frees without free_completed, "
              f"{states['active_pending_free']} blocks active_pending_free")
        if a.sync == "events":
            check(later > 0, f"{name}: no free completed later than requested "
                  f"({adjacent} at once, {pending} pending)")
            check(later + pending >= frees // 4,
                  f"{name}: only {later} frees completed later and {pending} pending of {frees}")
        else:
            check(adjacent == frees and later == 0 and pending == 0,
                  f"{name}: {adjacent} frees completed at once, {later} later, {pending} pending; "
                  f"want all {frees} at once")
        print(f"{name}: {frees} frees: {adjacent} completed at once, {later} later, "
              f"{pending} pending at exit")
    check.finish()


if __name__ == "__main__":
    main()
