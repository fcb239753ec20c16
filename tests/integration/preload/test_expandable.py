#!/usr/bin/env python3
"""expandable_segments:True (CUPROF_ALLOC_CONF) under libcuprof.so on the simulated driver's VMM:
the program's output is the same as without the shim; the exit snapshot has only expandable
segments (one per mapped run), segment_map entries and no segment_alloc, and replays from an
empty device (check_snapshot.py --complete-history); reserved_bytes is what the pages hold.
With SIMCUDA_FAIL=create:nth=N a cuMemCreate fails in the middle of a growth: the program still
runs unchanged (PyTorch's retry after release_cached_blocks) and nothing is lost.

Usage: test_expandable.py --lib LIB --ld-path PATH --checker CHECK_SNAPSHOT_PY APP...
"""
import argparse
import collections
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from shimrun import Checks, dumps, light, load_checker, run_shim  # noqa: E402 (tests/integration/)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--checker", required=True)
    ap.add_argument("programs", nargs="+")
    a = ap.parse_intermixed_args()
    checker = load_checker(a.checker)
    check = Checks()
    for prog in a.programs:
        base = run_shim(light(prog), a.ld_path, timeout=300)
        check(base.returncode == 0, f"{prog}: fails without cuprof: {base}")
        for fail in ("", "create:nth=2", "create:every=7"):
            name = f"{os.path.basename(prog)}/{fail or 'no faults'}"
            with tempfile.TemporaryDirectory() as tmp:
                env = {"CUPROF_MODE": "cache", "CUPROF_ALLOC_CONF": "expandable_segments:True",
                       "CUPROF_SNAPSHOT": os.path.join(tmp, "s-%n.pickle")}
                if fail:
                    env["SIMCUDA_FAIL"] = fail
                shim = run_shim(light(prog), a.ld_path, preload=a.lib, extra_env=env, timeout=300)
                check(shim.returncode == 0, f"{name}: exit {shim.returncode}: {shim.stderr!r}")
                check(shim.stdout == base.stdout,
                      f"{name}: output differs:\n  without: {base.stdout!r}\n  with: "
                      f"{shim.stdout!r}")
                files = dumps(tmp)
                check(files, f"{name}: no snapshot written; stderr {shim.stderr!r}")
                if not files:
                    continue
                snap = checker.load(files[-1])
            problems = checker.check(snap, complete_history=True)
            check(not problems, f"{name}: check_snapshot --complete-history: {problems[:5]}")
            check(snap["allocator_settings"]["expandable_segments"] is True,
                  f"{name}: allocator_settings.expandable_segments is not True")
            segs = snap["segments"]
            check(segs and all(s["is_expandable"] for s in segs),
                  f"{name}: segments not all expandable: {[s['is_expandable'] for s in segs]}")
            trace = snap["device_traces"][0]
            c = collections.Counter(e["action"] for e in trace)
            check(c["segment_map"] > 0 and c["segment_alloc"] == 0,
                  f"{name}: {c['segment_map']} segment_map, {c['segment_alloc']} segment_alloc")
            for s in segs:
                page = 2 << 20 if s["segment_type"] == "small" else 20 << 20
                check(s["total_size"] % page == 0 and s["address"] % (2 << 20) == 0,
                      f"{name}: run {s['address']:#x} of {s['total_size']} is not whole pages")
            st = snap["cuprof"]["stats"][0]
            mapped = sum(s["total_size"] for s in segs)
            check(st["reserved_bytes.all.current"] == mapped,
                  f"{name}: reserved_bytes {st['reserved_bytes.all.current']}, runs hold {mapped}")
            check(st["segment.all.current"] == 0 and st["inactive_split.all.current"] == 0,
                  f"{name}: segment/inactive_split counted for expandable segments")
            check(st["num_device_alloc"] == c["segment_map"],
                  f"{name}: num_device_alloc {st['num_device_alloc']}, "
                  f"{c['segment_map']} segment_map entries")
            if fail:
                check(st["num_alloc_retries"] > 0, f"{name}: no retry after the failed create")
            print(f"{name}: {c['segment_map']} maps, {c['segment_unmap']} unmaps, "
                  f"{len(segs)} runs, {mapped} bytes mapped, "
                  f"{st['num_alloc_retries']} retries")
    check.finish()


if __name__ == "__main__":
    main()
