#!/usr/bin/env python3
"""NVTX memory regions (issue 29, part 2): a program's own device pool told to tools through
nvToolsExtMem.h (tests/apps/nvtx_pool.c: one cudaMalloc as the heap, regions carved, resized,
named, unregistered, the heap reset, unregistered, freed) is seen inside: its regions are the
blocks of the program's own allocator in the trace and the block table, in cache and trace mode,
with or without history, and a region never unregistered is a leak named by its NVTX name.

Usage: test_nvtx_pool.py GROUP --lib LIBCUPROF --ld-path SIM_PATH --work DIR --app NVTX_POOL
       --cuprof CUPROF
GROUP: cache, trace, leak, free_registered, no_history
"""
import argparse
import json
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402

check = shimrun.Checks()
MIB = 1 << 20

# The pool segment at the dump in the middle of `full`: (offset MiB, size MiB, state, name).
MID_TABLE = [(0, 8, "active_allocated", "weights"), (8, 12, "active_allocated", "activations"),
             (20, 8, "inactive", None), (28, 8, "active_allocated", "grads"),
             (36, 28, "inactive", None)]
# What the pool's NVTX calls put in the trace up to that dump: (action, size MiB, name).
MID_TRACE = [("free_requested", 64, None), ("free_completed", 64, None),  # handed over
             ("alloc", 8, None), ("annotate", 8, "weights"),
             ("alloc", 16, None), ("annotate", 16, "activations"),
             ("alloc", 4, None), ("annotate", 4, "scratch"),
             ("alloc", 8, None), ("annotate", 8, "grads"),
             ("free_requested", 16, None), ("free_completed", 16, None),  # resized 16 -> 12
             ("alloc", 12, None), ("annotate", 12, "activations"),
             ("free_requested", 4, None), ("free_completed", 4, None)]  # scratch unregistered
# After the dump: the reset frees the three regions, the heap goes, the block is given back.
END_TRACE = MID_TRACE + [("free_requested", 8, None), ("free_completed", 8, None),
                         ("free_requested", 12, None), ("free_completed", 12, None),
                         ("free_requested", 8, None), ("free_completed", 8, None),
                         ("alloc", 64, None)]


def run(args, tmp, mode, extra=None, mid=True):
    tmp = tempfile.mkdtemp(dir=tmp)  # snapshots are never replaced: one folder per run
    env = {"NVTX_INJECTION64_PATH": args.lib, "CUPROF_SNAPSHOT": os.path.join(tmp, "end.pickle"),
           "CUPROF_DUMP_ON": "exit", "CUPROF_STACKS": "alloc"}
    env.update(extra or {})
    cmd = [args.app, mode] + ([os.path.join(tmp, "mid.pickle")] if mid else [])
    r = shimrun.run_shim(cmd, args.ld_path, preload=args.lib, extra_env=env)
    check(r.returncode == 0 and "nvtx_pool: ok" in r.stdout, f"{mode}: {r.returncode} {r.stderr}")
    load = shimrun.load_checker().load
    snaps = [load(os.path.join(tmp, n)) if os.path.exists(os.path.join(tmp, n)) else None
             for n in ("mid.pickle", "end.pickle")]
    for name, s in zip(("mid", "end"), snaps):
        if s is not None:
            problems = shimrun.load_checker().check(s, complete_history="CUPROF_HISTORY" not in env)
            check(not problems, f"{mode} {name}: checker: {problems}")
    return r, snaps, tmp


def pool_segment(snap, size=64 * MIB):
    segs = [s for s in snap["segments"] if s["total_size"] == size]
    return segs[0] if len(segs) == 1 else None


def table(seg):
    base = seg["address"]
    return [((b["address"] - base) // MIB, b["size"] // MIB, b["state"], b.get("user_metadata"))
            for b in seg["blocks"]]


def nvtx_trace(snap):
    return [(e["action"], e["size"] // MIB, e.get("user_metadata"))
            for e in snap["device_traces"][0] if e.get("cuprof_pool") == "nvtx"]


def frames(block):
    return [f["name"] for f in block["frames"]]


def check_mid(mid, what):
    seg = pool_segment(mid) if mid else None
    if not check(seg is not None, f"{what}: the pool's 64 MiB segment"):
        return
    check(table(seg) == MID_TABLE, f"{what}: the pool's blocks {table(seg)}")
    check(all(b.get("cuprof_pool") == "nvtx" for b in seg["blocks"]),
          f"{what}: every block of the pool tagged cuprof_pool nvtx")
    check(seg["allocated_size"] == 28 * MIB and seg["requested_size"] == 28 * MIB,
          f"{what}: the segment's allocated {seg['allocated_size']}, requested "
          f"{seg['requested_size']}")
    regions = [b for b in seg["blocks"] if b["state"] == "active_allocated"]
    for b in regions:
        f = frames(b)
        check("pool_alloc" in f and "main" in f, f"{what}: a region's stack {f}")
    check(nvtx_trace(mid) == MID_TRACE, f"{what}: the pool's trace {nvtx_trace(mid)}")
    # The program's own cudaMalloc of the pool is its first alloc, the hand-over frees it.
    first = [e for e in mid["device_traces"][0] if e["action"] == "alloc"][0]
    check(first["size"] == 64 * MIB and first.get("cuprof_pool") != "nvtx",
          "the pool's own allocation")


def group_mode(args, tmp, mode):
    r, (mid, end), tmp = run(args, tmp, "full", {"CUPROF_MODE": mode})
    check_mid(mid, mode)
    if not check(end is not None, f"{mode}: no exit snapshot"):
        return
    check(nvtx_trace(end) == END_TRACE, f"{mode}: the pool's whole trace {nvtx_trace(end)}")
    seg = pool_segment(end)
    if mode == "cache":  # freed into cuprof's cache: one free block, no pool left
        check(seg is not None and table(seg) == [(0, 64, "inactive", None)],
              f"cache: the pool's segment at the end {seg and table(seg)}")
    else:  # trace mode: every device allocation goes back to the driver
        check(seg is None, "trace: no segment left")
    # live bytes (summary) count the regions, not the pool twice: 64 MiB at most
    s = shimrun.run([args.cuprof, "summary", os.path.join(tmp, "mid.pickle")],
                    shimrun.env(args.ld_path)).stdout
    check("at the end: 64.00 MiB reserved in 1 segments, 28.00 MiB allocated, 28.00 MiB live"
          in s, f"{mode}: summary sees inside the pool:\n{s}")
    check("peak live:     64.00 MiB" in s, f"{mode}: the live peak is the pool, once")


def group_leak(args, tmp):
    r, (mid, end), tmp = run(args, tmp, "leak", mid=False)
    seg = pool_segment(end) if end else None
    if not check(seg is not None, "leak: the pool's segment"):
        return
    check(table(seg) == [(0, 2, "active_allocated", "kv cache"), (2, 62, "inactive", None)],
          f"leak: the pool at exit {table(seg)}")
    path = os.path.join(tmp, "end.pickle")
    env = shimrun.env(args.ld_path)
    out = shimrun.run([args.cuprof, "leaks", path], env)
    lines = out.stdout.splitlines()
    check(out.returncode == 1, f"leaks exits 1 when something leaked: {out.returncode}")
    check(lines[:3] == [f"{path}: 1 block still allocated, 2.00 MiB (2.00 MiB requested), from 1 "
                        "call site",
                        "  2.00 MiB in 1 block on device 0 (2097152 bytes, 2097152 requested)",
                        '    NVTX region "kv cache" of the program\'s own pool'],
          f"leaks' text:\n{out.stdout}")
    check(len(lines) > 4 and lines[3].strip().startswith("pool_alloc (") and
          lines[4].strip().startswith("main ("), f"leaks names the region's stack:\n{out.stdout}")
    js = json.loads(shimrun.run([args.cuprof, "leaks", "--json", path], env).stdout)
    site = js["sites"][0] if js.get("sites") else {}
    check(site.get("name") == "kv cache" and site.get("bytes") == 2 * MIB and
          [f["name"] for f in site.get("frames", [])][:2] == ["pool_alloc", "main"],
          f"leaks --json: {site}")


def group_free_registered(args, tmp):
    for mode in ("cache", "trace"):
        r, (_, end), _ = run(args, tmp, "free_registered", {"CUPROF_MODE": mode}, mid=False)
        if not check(end is not None, f"free_registered {mode}: no snapshot"):
            continue
        want = [("free_requested", 64, None), ("free_completed", 64, None), ("alloc", 8, None),
                ("annotate", 8, "weights"), ("free_requested", 8, None),
                ("free_completed", 8, None), ("alloc", 64, None)]
        check(nvtx_trace(end) == want, f"free_registered {mode}: {nvtx_trace(end)}")
        seg = pool_segment(end)
        check(seg is not None and [b["state"] for b in seg["blocks"]] == ["active_allocated"] and
              "cuprof_pool" not in seg["blocks"][0],
              f"free_registered {mode}: the new allocation is a plain block "
              f"{seg and table(seg)}")
        if mode == "cache":
            check("same_address=1" in r.stdout, "the cache gave the same address again")


def group_no_history(args, tmp):
    """Without history the tables still see inside the pool, and learn when it is freed."""
    r, (mid, _), _ = run(args, tmp, "full", {"CUPROF_HISTORY": "off"})
    seg = pool_segment(mid) if mid else None
    check(seg is not None and table(seg) == MID_TABLE, f"no history: the pool {seg and table(seg)}")
    check(mid is not None and not mid["device_traces"][0], "no history: no trace")
    r, (_, end), _ = run(args, tmp, "free_registered", {"CUPROF_HISTORY": "off"}, mid=False)
    seg = pool_segment(end) if end else None
    check(seg is not None and [b["state"] for b in seg["blocks"]] == ["active_allocated"] and
          "cuprof_pool" not in seg["blocks"][0],
          f"no history: a block at a freed heap's address is a plain block {seg and table(seg)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("group")
    for opt in ("--lib", "--ld-path", "--work", "--app", "--cuprof"):
        ap.add_argument(opt)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        if args.group in ("cache", "trace"):
            group_mode(args, tmp, args.group)
        else:
            {"leak": group_leak, "free_registered": group_free_registered,
             "no_history": group_no_history}[args.group](args, tmp)
    check.finish()


if __name__ == "__main__":
    main()
