#!/usr/bin/env python3
"""Long history: N allocation/free pairs with CUPROF_MAX_ENTRIES=100000 (cache mode, no stacks):
peak RSS of the process stays bounded (a run with N and one with N/10 differ by < 48 MiB, while
keeping every entry would cost hundreds of bytes each), the exit dump says how many entries were
dropped (kept + dropped = 3 N + 1: one segment_alloc, then alloc, free_requested, free_completed
per pair), and the kept entries are the newest (their sizes are those of the last iterations).
The long run's exit dump is JSON (about 11 MB: written by cuprof's writing thread, from the third
1 MiB buffer on) and is read back by Python's json.

usage: test_history.py HISTORY_APP LIBCUPROF N
"""
import glob
import os
import threading
import subprocess
import sys
import tempfile

import relutil

MAX_ENTRIES = 100000


def size_of(i):
    return 1 + (i * 7919) % 65536


def run(exe, lib, n, d, ext):
    env = relutil.sim_env(preload=lib, CUPROF_MAX_ENTRIES=MAX_ENTRIES, CUPROF_STACKS="none",
                          CUPROF_SNAPSHOT=os.path.join(d, f"h{n}-%n.{ext}"), CUPROF_LOG="quiet")
    # os.wait4 gives this child's own peak RSS; a timer is the deadlock watchdog.
    with open(os.path.join(d, "out"), "w+") as out:
        p = subprocess.Popen([exe, str(n)], env=env, stdout=out, stderr=subprocess.STDOUT)
        timer = threading.Timer(1200, lambda: (relutil.dump_stacks(p.pid), p.kill()))
        timer.start()
        _, status, usage = os.wait4(p.pid, 0)
        timer.cancel()
        p.returncode = 0
        out.seek(0)
        err = out.read()
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        relutil.fail(f"history_app {n}: wait status {status}\n{err[-2000:]}")
    maxrss_kib = usage.ru_maxrss
    files = glob.glob(os.path.join(d, f"h{n}-*.{ext}"))
    if len(files) != 1:
        relutil.fail(f"want one exit dump, got {files}")
    return maxrss_kib, files[0]


def main():
    exe, lib, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if relutil.sanitized():
        n = min(n, 200000)
    with tempfile.TemporaryDirectory(prefix="cuprof-history-") as d:
        small_rss, _ = run(exe, lib, n // 10, d, "pickle")
        big_rss, path = run(exe, lib, n, d, "json")
        growth_mib = (big_rss - small_rss) / 1024
        print(f"history: peak RSS {small_rss // 1024} MiB for {n // 10} pairs, "
              f"{big_rss // 1024} MiB for {n} pairs")
        if growth_mib > 48:
            relutil.fail(f"peak RSS grew by {growth_mib:.0f} MiB from {n // 10} to {n} pairs")
        if os.path.getsize(path) <= 3 << 20:
            relutil.fail(f"{path}: {os.path.getsize(path)} bytes, too small to need the writer")
        snap = relutil.verify_dumps(d, pattern=os.path.basename(path))[0][1]
        trace = snap["device_traces"][0]
        dropped = snap["cuprof"]["dropped_entries"][0]
        kept = len(trace)
        print(f"history: kept {kept}, dropped {dropped}")
        if kept > MAX_ENTRIES or kept < MAX_ENTRIES - 3:
            relutil.fail(f"kept {kept} entries, ring holds {MAX_ENTRIES}")
        if kept + dropped != 3 * n + 1:
            relutil.fail(f"kept {kept} + dropped {dropped} != {3 * n + 1} entries recorded")
        allocs = [e["size"] for e in trace if e["action"] == "alloc"]
        want = [size_of(i) for i in range(n - len(allocs), n)]
        if allocs != want:
            first = next(i for i, (a, b) in enumerate(zip(allocs, want)) if a != b)
            relutil.fail(f"kept alloc #{first} has size {allocs[first]}, the newest iterations "
                         f"would give {want[first]}")


if __name__ == "__main__":
    main()
