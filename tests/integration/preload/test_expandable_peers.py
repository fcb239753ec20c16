#!/usr/bin/env python3
"""Peer devices under expandable_segments:True (issue 16), through libcuprof.so on two simulated
devices (SIMCUDA_DEVICES=2), with the simulator's VMM call log (SIMCUDA_VMM_LOG).

peer_app (tests/integration/preload/peer_app.c) lets device 1 read device 0's memory, enabled
with cudaDeviceEnablePeerAccess before any allocation (`early`) or after device 0 mapped pages
(`late`), grows device 0's segment afterwards, and lets device 0 read device 1's memory through
cuCtxEnablePeerAccess. Checked, as PyTorch's enablePeerAccess / ExpandableSegment::addPeer /
mapAndSetAccess do it:
- the program: a copy run by device 1 before the enabling faults (no access to the pages), after
  it every 2 MiB of device 0's blocks is read-write for device 1 and the copies read the bytes
  written; enabling again answers "already enabled", a device and itself "invalid device";
- the simulator's log: right after a device enables access to another, one cuMemSetAccess for it
  over each run of pages the other holds mapped (segments in the order made, runs lowest first),
  and nothing else; each later mapping is followed by the owner's cuMemSetAccess and then one for
  each peer, in the order they were added, over the same range; after every call, every mapped
  page of a device is read-write for each device that enabled access to it;
- without cuprof (ordinary cuMemAlloc memory) the copies work either way: the same program runs.
The exit snapshot passes check_snapshot.py.

Usage: test_expandable_peers.py --lib LIB --ld-path PATH --checker CHECK_SNAPSHOT_PY PEER_APP
"""
import argparse
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from shimrun import Checks, load_checker, run_expandable, run_shim  # noqa: E402 (tests/integration/)

RW = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
GRAN = 2 << 20


def result(stdout):
    line = [l for l in stdout.splitlines() if l.startswith("peer_app: ")]
    return dict(kv.split("=", 1) for kv in line[0].split()[1:]) if len(line) == 1 else {}


def check_log(check, name, lines):
    """Replays the simulator's VMM log; returns how many peer enablings and mappings it saw."""
    handle_dev = {}  # handle -> device of its memory
    pages = {}  # mapped page address -> [owner device, set of devices with read-write access]
    peers = {0: [], 1: []}  # owner -> devices that enabled access to it, in order
    expect = []  # setaccess lines that must come next, in order
    pending_check = None
    enablings = mappings = 0
    for n, line in enumerate(lines, 1):
        f = line.split()
        if pending_check is not None and not (f[0] == "setaccess" and expect):
            owner, peer = pending_check
            bad = [hex(a) for a, (o, acc) in pages.items() if o == owner and peer not in acc]
            check(not bad, f"{name}: line {n}: pages of device {owner} device {peer} cannot reach "
                  f"after it enabled access: {bad[:4]}")
            pending_check = None
        if expect:
            check(f[0] == "setaccess" and f[1:] == expect[0],
                  f"{name}: line {n}: {line!r}, expected setaccess {' '.join(expect[0])}")
            expect.pop(0)
        if f[0] == "create":
            handle_dev[f[1]] = int(f[2])
        elif f[0] == "map":
            addr, size = int(f[1], 16), int(f[2])
            for a in range(addr, addr + size, GRAN):
                pages[a] = [handle_dev[f[3]], set()]
        elif f[0] == "unmap":
            addr, size = int(f[1], 16), int(f[2])
            for a in range(addr, addr + size, GRAN):
                pages.pop(a, None)
        elif f[0] == "setaccess":
            addr, size = int(f[1], 16), int(f[2])
            devs = [tuple(int(x) for x in d.split(":")) for d in f[3:]]
            check(len(devs) == 1 and devs[0][1] == RW, f"{name}: line {n}: {line!r}")
            owners = {pages[a][0] for a in range(addr, addr + size, GRAN) if a in pages}
            check(len(owners) == 1, f"{name}: line {n}: not one device's mapped pages: {line!r}")
            for a in range(addr, addr + size, GRAN):
                if a in pages:
                    pages[a][1].add(devs[0][0])
            owner = owners.pop() if len(owners) == 1 else None
            if devs[0][0] == owner and not expect:
                # A mapping: the owner's access, then each peer's over the same range.
                mappings += 1
                expect = [[f[1], f[2], f"{p}:{RW}"] for p in peers[owner]]
        elif f[0] == "peer":
            accessor, owner = int(f[1]), int(f[2])
            enablings += 1
            check(accessor not in peers[owner], f"{name}: line {n}: enabled twice: {line!r}")
            peers[owner].append(accessor)
            # Each run of mapped pages of the owner (their order is checked by the unit tests).
            mapped = sorted(a for a, (o, _) in pages.items() if o == owner)
            runs = []
            for a in mapped:
                if runs and runs[-1][0] + runs[-1][1] == a:
                    runs[-1][1] += GRAN
                else:
                    runs.append([a, GRAN])
            got = []
            for k in range(len(runs)):
                if n + k < len(lines) and lines[n + k].startswith("setaccess"):
                    g = lines[n + k].split()
                    got.append((int(g[1], 16), int(g[2]), g[3]))
            check(sorted(got) == sorted((a, s, f"{accessor}:{RW}") for a, s in runs),
                  f"{name}: line {n}: after {line!r}: {got}, expected runs {runs}")
            expect = [[g[1], g[2], g[3]] for g in (lines[n + k].split() for k in range(len(got)))]
            pending_check = (owner, accessor)
    check(not expect, f"{name}: log ends before {expect}")
    for owner, accessors in peers.items():
        for a, (o, acc) in pages.items():
            if o == owner:
                check(set(accessors) <= acc, f"{name}: page {a:#x} of device {o}: {acc}")
    return enablings, mappings


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--checker", required=True)
    ap.add_argument("app")
    a = ap.parse_args()
    checker = load_checker(a.checker)
    check = Checks()
    for when in ("early", "late"):
        base = run_shim([a.app, when], a.ld_path, extra_env={"SIMCUDA_DEVICES": "2"})
        res = result(base.stdout)
        check(base.returncode == 0 and res.get("copies") == "OK",
              f"{when}: fails without cuprof: {base}")
        check(res.get("copy_before") == ("-1" if when == "early" else "0"),
              f"{when}: without cuprof ordinary memory is copied between devices: {res}")
        with tempfile.TemporaryDirectory() as tmp:
            shim, files, lines = run_expandable([a.app, when], a.ld_path, a.lib, tmp,
                                                {"SIMCUDA_DEVICES": "2"})
            res = result(shim.stdout)
            name = f"peer_app {when}"
            check(shim.returncode == 0, f"{name}: exit {shim.returncode}: {shim.stdout!r} "
                  f"{shim.stderr!r}")
            want = {"copy_before": "-1" if when == "early" else "700", "enable": "0",
                    "again": "704", "self": "101", "copies": "OK"}
            for k, v in want.items():
                check(res.get(k) == v, f"{name}: {k}={res.get(k)}, expected {v}: {shim.stdout!r}")
            for k in ("access_a", "access_b", "access_c"):
                got, total = (res.get(k) or "0/-1").split("/")
                check(got == total and int(total) > 0, f"{name}: {k}={res.get(k)}")
            enablings, mappings = check_log(check, name, lines)
            check(enablings == 2, f"{name}: {enablings} peer enablings in the log, expected 2")
            check(files, f"{name}: no snapshot")
            if files:
                problems = checker.check(checker.load(files[-1]), complete_history=True)
                check(not problems, f"{name}: check_snapshot: {problems[:5]}")
            print(f"{name}: {res} ; {len(lines)} log lines, {mappings} mappings, "
                  f"{enablings} enablings")
    check.finish()


if __name__ == "__main__":
    main()
