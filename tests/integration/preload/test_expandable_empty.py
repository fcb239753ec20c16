#!/usr/bin/env python3
"""The cache emptied under expandable_segments:True, through libcuprof.so on the simulated device
with its VMM call log (SIMCUDA_VMM_LOG): tests/apps/empty_cache (`dump`) frees blocks and calls
cuprof_empty_cache (PyTorch's torch.cuda.empty_cache) three times, and dumps a snapshot after the
first. Checked:
- the program's output equals a run without cuprof;
- the exit snapshot's segment_unmap entries, exactly: the large reservation's first 20 MiB page
  (under the freed A; the 512 KiB after it and B stay), the small reservation's first 2 MiB page,
  then everything: the large run of 40 MiB and the small pages left (8 MiB); reserved_bytes
  after each unmap (maps minus unmaps) and num_device_alloc / num_device_free;
- the dump after the first empty: 20 MiB reserved, one mapped run of one page whose blocks are the
  free 512 KiB piece, B and the free rest;
- the simulator saw one cuMemUnmap per unmapped page, each page's memory going back at once
  (cuprof releases a handle as soon as it is mapped: one cuMemRelease per cuMemCreate, and the
  last unmap frees the memory), and cuMemAddressFree for both reservations once nothing was
  mapped in them; both snapshots pass check_snapshot.py.

Usage: test_expandable_empty.py --lib LIB --ld-path PATH --checker CHECK_SNAPSHOT_PY APP
"""
import argparse
import collections
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from shimrun import Checks, load_checker, run_expandable, run_shim  # noqa: E402 (tests/integration/)

MIB = 1 << 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--checker", required=True)
    ap.add_argument("app")
    a = ap.parse_args()
    checker = load_checker(a.checker)
    check = Checks()
    base = run_shim([a.app, "dump"], a.ld_path)
    check(base.returncode == 0, f"fails without cuprof: {base}")
    with tempfile.TemporaryDirectory() as tmp:
        shim, files, log_lines = run_expandable([a.app, "dump"], a.ld_path, a.lib, tmp)
        check(shim.returncode == 0, f"exit {shim.returncode}: {shim.stderr!r}")
        check(shim.stdout == base.stdout, f"output differs: {base.stdout!r} / {shim.stdout!r}")
        check(len(files) == 2, f"snapshots: {files}")
        if len(files) != 2:
            check.finish()
        mid, end = (checker.load(f) for f in files)
        lines = [line.split() for line in log_lines]

    for name, snap in (("after the first empty", mid), ("at exit", end)):
        problems = checker.check(snap, complete_history=True)
        check(not problems, f"{name}: check_snapshot --complete-history: {problems[:5]}")

    trace = end["device_traces"][0]
    maps = [e for e in trace if e["action"] == "segment_map"]
    large, small = maps[0]["addr"], next(e["addr"] for e in maps if e["size"] == 2 * MIB)
    unmaps = [(e["addr"], e["size"]) for e in trace if e["action"] == "segment_unmap"]
    want = [(large, 20 * MIB), (small, 2 * MIB), (large, 40 * MIB), (small + 2 * MIB, 8 * MIB)]
    check(unmaps == want, f"segment_unmap entries {[(hex(x), s) for x, s in unmaps]}, expected "
          f"{[(hex(x), s) for x, s in want]}")
    reserved, after_unmap = 0, []
    for e in trace:
        if e["action"] == "segment_map":
            reserved += e["size"]
        elif e["action"] == "segment_unmap":
            reserved -= e["size"]
            after_unmap.append(reserved // MIB)
    check(after_unmap == [20, 48, 8, 0], f"reserved MiB after each unmap: {after_unmap}")
    st = end["cuprof"]["stats"][0]
    check(st["reserved_bytes.all.current"] == reserved == 20 * MIB,
          f"reserved at exit {st['reserved_bytes.all.current']}, trace says {reserved}")
    check(st["num_device_free"] == 4 and st["num_device_alloc"] == len(maps) == 8,
          f"num_device_alloc {st['num_device_alloc']} ({len(maps)} maps), "
          f"num_device_free {st['num_device_free']}")

    ms = mid["cuprof"]["stats"][0]
    check(ms["reserved_bytes.all.current"] == ms["reserved_bytes.large_pool.current"] == 20 * MIB
          and ms["num_device_free"] == 1, f"after the first empty: {ms['num_device_free']} "
          f"unmaps, {ms['reserved_bytes.all.current']} reserved")
    segs = mid["segments"]
    check(len(segs) == 1 and segs[0]["address"] == large + 20 * MIB
          and segs[0]["total_size"] == 20 * MIB and segs[0]["is_expandable"],
          f"after the first empty: runs {[(hex(s['address']), s['total_size']) for s in segs]}")
    if len(segs) == 1:
        got = [(b["size"], b["state"]) for b in segs[0]["blocks"]]
        check(got == [(512 << 10, "inactive"), (2 * MIB, "active_allocated"),
                      (17 * MIB + (512 << 10), "inactive")], f"after the first empty: {got}")

    count = collections.Counter(f[0] for f in lines)
    pages = sum(s // (20 * MIB if x == large else 2 * MIB) for x, s in want)
    check(count["unmap"] == pages == 8, f"{count['unmap']} cuMemUnmap, {pages} pages unmapped")
    check(count["create"] == count["release"] == 9, f"{count['create']} cuMemCreate, "
          f"{count['release']} cuMemRelease")
    check(count["physfree"] == count["unmap"], f"{count['physfree']} pages freed, "
          f"{count['unmap']} unmapped")
    for i, f in enumerate(lines):
        if f[0] == "unmap":
            check(i + 1 < len(lines) and lines[i + 1][0] == "physfree",
                  f"log line {i + 1}: the unmapped page's memory did not go back at once")
    check(count["reserve"] == 3 and count["addressfree"] == 2,
          f"{count['reserve']} reservations, {count['addressfree']} given back")
    freed = [int(f[1], 16) for f in lines if f[0] == "addressfree"]
    check(sorted(freed) == sorted([large, small]), f"ranges given back {[hex(x) for x in freed]}")
    print(f"{len(maps)} maps, unmaps {[(hex(x - large), s // MIB) for x, s in unmaps]}, "
          f"reserved after each {after_unmap} MiB; simulator: {dict(count)}")
    check.finish()


if __name__ == "__main__":
    main()
