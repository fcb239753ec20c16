#!/usr/bin/env python3
"""Memory the driver gives while cuprof believes a capture forbids the cache (capture_overflow_app:
65 global captures, one more than cuprof follows, and a thread-local-mode thread's cudaMalloc and
cudaMallocPitch, which the driver allows): the program's answers equal a run without cuprof, and
in cache mode the exit snapshot records both allocations as the driver's (cuprof_pool "trace"),
with their frees; the 4 KiB one is not the cache's freed block.

Usage: test_capture_overflow.py --lib LIB --ld-path PATH APP
"""
import argparse
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/)

WANT = ("warm=cudaSuccess\n"
        "warm_free=cudaSuccess\n"
        "captures=65\n"
        "other_malloc=cudaSuccess\n"
        "other_pitch=cudaSuccess pitch={pitch}\n"
        "ended=65\n"
        "free=cudaSuccess\n"
        "free_pitch=cudaSuccess\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("app")
    a = ap.parse_args()
    check = shimrun.Checks()
    alone = shimrun.run_shim([a.app], a.ld_path)
    check(alone.returncode == 0, f"alone: exit {alone.returncode}: {alone.stderr[-500:]}")
    pitch = next((l.rsplit(" pitch=", 1)[1] for l in alone.stdout.splitlines()
                  if l.startswith("other_pitch=")), "?")
    want = WANT.format(pitch=pitch)
    check(alone.stdout == want, f"alone: got\n{alone.stdout}want\n{want}")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "s.pickle")
        got = shimrun.run_shim([a.app], a.ld_path, preload=a.lib, extra_env={
            "CUPROF_MODE": "cache", "CUPROF_SNAPSHOT": path})
        check(got.returncode == 0, f"cache: exit {got.returncode}: {got.stderr[-500:]}")
        check(got.stdout == want, f"cache: got\n{got.stdout}want\n{want}")
        snap = shimrun.load_checker().load(path)
        trace = snap["device_traces"][0]
        warm = [e["addr"] for e in trace if e["action"] == "alloc" and e["size"] == 4096]
        driver = [e for e in trace if e["action"] == "alloc" and e.get("cuprof_pool") == "trace"]
        sizes = sorted(e["size"] for e in driver)
        check(sizes == sorted([4096, 3 * int(pitch)]),
              f"the driver's two allocations recorded: {driver}")
        check(len(warm) == 2 and warm[0] != warm[1],
              f"the 4 KiB one is the driver's, not the cache's freed block: {warm}")
        for e in driver:
            freed = [f for f in trace if f["action"] == "free_completed" and
                     f["addr"] == e["addr"]]
            check(len(freed) == 1, f"the free of {e} recorded once: {freed}")
    check.finish()


if __name__ == "__main__":
    main()
