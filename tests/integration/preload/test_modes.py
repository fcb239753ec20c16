#!/usr/bin/env python3
"""Every app in every mode: the program's output is identical with and without libcuprof.so, and
the snapshot written at exit (read back with pickle/json, checked by tests/golden/check_snapshot.py)
has exactly the alloc/free events, segments and live bytes the program says it made.

With --layer LIB --order before|after a second interposer (tests/integration/preload/
stack_layer.c) is preloaded before or after libcuprof.so: the program still ends the same, every
allocation is recorded exactly once, and the device allocations the layer saw (its LAYER_LOG) are
exactly the snapshot's cuMemAlloc segments (none bypass it, none are invented).

With --second-copy a copy of libcuprof.so (an installed one, say) is preloaded ahead of the
build's: the first copy profiles exactly as one copy alone, the second stays inert and says so in
one line (two copies used to call each other's dlsym until the stack overflowed, in every mode).

Usage: test_modes.py --lib LIBCUPROF --ld-path PATH --checker CHECK_SNAPSHOT_PY
                     [--layer LIB --order before|after | --second-copy] MODE PROGRAM...
"""
import argparse
import collections
import os
import re
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from shimrun import Checks, dumps, light, load_checker, run_shim, sanitized  # noqa: E402 (tests/integration/)


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


def layer_log(path):
    """The layer's device allocations and frees: (Counter of (addr, size), Counter of addr)."""
    allocs, frees = collections.Counter(), collections.Counter()
    if os.path.exists(path):
        for line in open(path):
            w = line.split()
            if w[0] == "alloc":
                allocs[(int(w[1]), int(w[2]))] += 1
            elif w[0] == "free":
                frees[int(w[1])] += 1
    return allocs, frees


def check_layer(check, name, snap, log_path):
    """The snapshot's cuMemAlloc segments (entries of the cache, untagged, or of trace mode's
    cuMemAlloc pool) are exactly the device allocations the layer passed on, and so are their
    frees."""
    allocs, frees = layer_log(log_path)
    entries = [e for t in snap["device_traces"] for e in t
               if e.get("cuprof_pool", "trace") == "trace"]
    seg = collections.Counter((e["addr"], e["size"]) for e in entries
                              if e["action"] == "segment_alloc")
    seg_free = collections.Counter(e["addr"] for e in entries if e["action"] == "segment_free")
    check(allocs, f"{name}: the layer saw no device allocation (cuprof went around it)")
    check(seg == allocs, f"{name}: segments {sum(seg.values())} vs the layer's allocations "
          f"{sum(allocs.values())}: only in the snapshot {list((seg - allocs).items())[:3]}, only "
          f"in the layer {list((allocs - seg).items())[:3]}")
    # The program's last cuDevicePrimaryCtxRelease destroys the context and the driver takes its
    # memory back without a cuMemFree: those segments are recorded as freed at the end of their
    # device's history (the context's teardown), and only there.
    teardown = collections.Counter()
    for t in snap["device_traces"]:
        i = len(t)
        while i > 0 and t[i - 1]["action"] == "segment_free":
            i -= 1
        teardown.update(e["addr"] for e in t[i:] if e.get("cuprof_pool", "trace") == "trace")
    check(frees <= seg_free and seg_free - frees <= teardown,
          f"{name}: {sum(seg_free.values())} segment frees, the layer freed "
          f"{sum(frees.values())}, {sum(teardown.values())} at the context's teardown")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--checker", required=True)
    ap.add_argument("--layer", help="a second interposer, preloaded with libcuprof")
    ap.add_argument("--order", choices=("before", "after"), default="before",
                    help="where the layer goes in LD_PRELOAD, relative to libcuprof")
    ap.add_argument("--second-copy", action="store_true",
                    help="preload a copy of --lib ahead of it")
    ap.add_argument("--sanitized-subset", type=int, default=0,
                    help="under the asan setup, run only the first N programs (slow runs)")
    ap.add_argument("mode")
    ap.add_argument("programs", nargs="+")
    a = ap.parse_intermixed_args()
    if a.sanitized_subset and sanitized():
        a.programs = a.programs[:a.sanitized_subset]
    checker = load_checker(a.checker)
    check = Checks()

    preload = a.lib
    if a.layer:
        preload = f"{a.layer}:{a.lib}" if a.order == "before" else f"{a.lib}:{a.layer}"
    copy_dir = tempfile.TemporaryDirectory()
    if a.second_copy:
        copy = os.path.join(copy_dir.name, "libcuprof.so")
        shutil.copy(a.lib, copy)
        preload = f"{copy}:{a.lib}"
    for i, prog in enumerate(a.programs):
        name = os.path.basename(prog) + (f" (layer {a.order})" if a.layer else "")
        base = run_shim(light(prog), a.ld_path, timeout=300)
        check(base[0] == 0, f"{name}: fails without cuprof: {base}")
        with tempfile.TemporaryDirectory() as tmp:
            ext = "pickle" if i % 2 == 0 else "json"  # both writers, read back independently
            env = {"CUPROF_MODE": a.mode, "CUPROF_SNAPSHOT": os.path.join(tmp, f"s-%n.{ext}")}
            log_path = os.path.join(tmp, "layer.log")
            if a.layer:
                alone = run_shim(light(prog), a.ld_path, preload=a.layer, timeout=300,
                                 extra_env={"LAYER_LOG": log_path + ".alone"})
                check(alone[:2] == base[:2], f"{name}: the layer alone changes the program")
                env["LAYER_LOG"] = log_path
            shim = run_shim(light(prog), a.ld_path, preload=preload, extra_env=env, timeout=300)
            if a.layer and a.order == "before" and a.mode != "off":
                check("reach cuprof first" in shim[2],
                      f"{name}: no word from cuprof about the layer ahead of it: {shim[2]!r}")
            if a.second_copy:
                # One copy profiles: one line names its unwinder (issue 30), when it keeps stacks.
                unwinder = [l for l in shim[2].splitlines() if l.startswith("cuprof: stacks by ")]
                check(len(unwinder) == (a.mode != "off"),
                      f"{name}/{a.mode}: lines naming the unwinder: {unwinder}")
                # The profiling copy's own lines (snapshots, each OOM's message) aside.
                inert = [l for l in shim[2].splitlines() if l.startswith("cuprof: ")
                         and "snapshot written" not in l and l not in unwinder
                         and not l.startswith("cuprof: CUDA out of memory.")]
                check(inert == [f"cuprof: {copy} is loaded ahead of {a.lib}: that copy profiles "
                                "this process, this one stays inert"],
                      f"{name}/{a.mode}: the inert copy's line: {shim[2]!r}")
            check(shim[0] == base[0], f"{name}/{a.mode}: exit {shim[0]}, without cuprof {base[0]}")
            check(shim[1] == base[1],
                  f"{name}/{a.mode}: output differs:\n  without: {base[1]!r}\n  with: {shim[1]!r}")
            files = dumps(tmp, "s-*")
            if a.mode == "off":
                check(not files, f"{name}/off: off mode wrote {files}")
                if a.layer:  # a pure pass-through: the layer sees what it sees alone
                    # Addresses move from run to run; sizes and counts do not.
                    sizes = [(collections.Counter(sz for _, sz in al), sum(fr.values()))
                             for al, fr in (layer_log(log_path), layer_log(log_path + ".alone"))]
                    check(sizes[0] == sizes[1],
                          f"{name}/off: the layer saw other allocations than without cuprof")
                continue
            check(files, f"{name}/{a.mode}: no snapshot written; stderr {shim[2]!r}")
            if not files:
                continue
            snap = checker.load(files[-1])  # the exit dump is the last one
            problems = checker.check(snap, complete_history=True)
            check(not problems, f"{name}/{a.mode}: check_snapshot: {problems[:5]}")
            if a.layer:
                check_layer(check, f"{name}/{a.mode}", snap, log_path)
            allocs, frees, live, ooms = expected_counts(os.path.basename(prog), base[1])
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
