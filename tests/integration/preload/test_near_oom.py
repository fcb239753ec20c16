#!/usr/bin/env python3
"""cuprof's rounding is never why a program runs out of memory: near_oom_app on a 256 MiB device
with 8 MiB left after its fill asks for 3 MiB, 1.5 MiB twice, 512 B and 4 KiB, which the driver
grants, and 64 MiB, which it does not. PyTorch's rules would ask 20 MiB and 2 MiB segments (out
of memory from the first request on); the shim then asks a segment of just the request. The
program must print exactly what it prints without cuprof (each call's error and the free memory
after it) in cache mode, with expandable segments and in trace mode. The cache-mode snapshot
records the segments actually made (segment_alloc of each request's own size), one oom entry
(the 64 MiB) and passes the independent checker; it says the cache takes that step
(cuprof.fit_segment_on_oom), so `cuprof replay --check` of it reproduces every placement, while
the same history without that key (PyTorch's allocator) runs out of memory where the recording
did not.

Memory cuprof passes through to the driver is asked for while the cache holds a free segment
(passed_oom_app on 100 MiB: X = 3/5 of the free memory of managed memory, then X from a pool of
the program's own, each after X allocated with cudaMalloc and freed again): without cuprof the
driver has the room, so under cuprof the cache hands its free segment back and the call is made
again. The output is the program's own in every mode; the cache-mode history shows each release
(segment_free) right before the passed-through memory, and only twice the device from the pool,
which no one can serve, is an OOM.

Usage: test_near_oom.py --lib LIB --ld-path PATH --cuprof CUPROF --checker CHECKER APP PASSED_APP
"""
import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/)

MiB = 1 << 20
# What the simulated driver answers (tests/sim/README.md: 2 MiB pages for requests of 2 MiB or
# more, smaller ones 512-byte aligned and packed into pages already charged).
WANT = ("fill=cudaSuccess\n"
        "3MiB=cudaSuccess free_mib=4\n"
        "1.5MiB=cudaSuccess free_mib=2\n"
        "1.5MiB_again=cudaSuccess free_mib=0\n"
        "512B=cudaSuccess free_mib=0\n"
        "4KiB=cudaSuccess free_mib=0\n"
        "64MiB=cudaErrorMemoryAllocation free_mib=0\n")
SIM = {"SIMCUDA_MEM": "256M"}


def check_snapshot(check, a, path, fill):
    checker = shimrun.load_checker(a.checker)
    snap = checker.load(path)
    problems = checker.check(snap, complete_history=True)
    check(not problems, f"check_snapshot: {problems[:5]}")
    trace = snap["device_traces"][0]
    sizes = [e["size"] for e in trace if e["action"] == "segment_alloc"]
    check(sizes == [fill, 3 * MiB, 3 * MiB // 2, 3 * MiB // 2, 512, 4096],
          f"segment_alloc sizes {sizes}")
    ooms = [e for e in trace if e["action"] == "oom"]
    check(len(ooms) == 1 and ooms[0]["size"] == 64 * MiB and trace[-1]["action"] == "oom",
          f"oom entries {ooms}")
    stats = snap["cuprof"]["stats"][0]
    # Every request after the fill reached PyTorch's release-and-retry once; one real OOM.
    check(stats["num_ooms"] == 1 and stats["num_alloc_retries"] == 6
          and stats["num_device_alloc"] == 6 and stats["segment.all.current"] == 6,
          f"stats {({k: v for k, v in stats.items() if k.startswith(('num_', 'segment.'))})}")
    rows = snap["cuprof"].get("oom_messages") or []
    check(len(rows) == 1 and "Tried to allocate 64.00 MiB" in rows[0]["message"],
          f"oom messages {rows}")


def replay(check, a, path, *args):
    p = subprocess.run([a.cuprof, "replay", "--json", *args, path],
                       capture_output=True, text=True, timeout=60)
    try:
        return p.returncode, json.loads(p.stdout)
    except ValueError:
        check(False, f"replay {args}: exit {p.returncode}: {p.stdout!r} {p.stderr!r}")
        return p.returncode, None


def check_replay(check, a, path, tmp):
    """The snapshot says its allocator took the smaller segment (cuprof.fit_segment_on_oom), so a
    replay of it takes the step too and reproduces every placement and the one OOM. The same
    history without that key (PyTorch's allocator, which has no such step) runs out of memory on
    the same device at requests the recording served."""
    checker = shimrun.load_checker(a.checker)
    snap = checker.load(path)
    check(snap["cuprof"].get("fit_segment_on_oom") is True,
          f"cuprof.fit_segment_on_oom: {snap['cuprof'].get('fit_segment_on_oom')!r}")
    # The device as the recording saw it: the OOM's reserved plus free bytes (the simulated
    # driver keeps some of its 256 MiB for the context).
    rc, got = replay(check, a, path, "--check")
    if got is not None:
        row, checked = got["settings"][0], got["check"]
        check(rc == 0 and checked["reproduced"] == checked["checked"] == 6 and
              row["ooms"] == row["recorded_ooms"] == 1, f"replay --check: {rc} {got}")
    del snap["cuprof"]["fit_segment_on_oom"]
    pytorch_style = os.path.join(tmp, "without-fit.pickle")
    with open(pytorch_style, "wb") as f:
        pickle.dump(snap, f)
    rc, got = replay(check, a, pytorch_style, "--memory", "256MiB")
    if got is not None:
        row = got["settings"][0]
        check(rc == 0 and row["recorded_ooms"] == 1 and row["ooms"] > 1,
              f"replay without the key: {rc} {row}")


PASSED_WANT = ("malloc=cudaSuccess\nfree=cudaSuccess\nmanaged=cudaSuccess\n"
               "malloc=cudaSuccess\nfree=cudaSuccess\npool=cudaSuccess\nfrom_pool=cudaSuccess\n"
               "huge=cudaErrorMemoryAllocation\nsync=cudaSuccess\n")
# The cache-mode history: each cached 60 MiB segment goes back right before the driver's memory.
PASSED_HISTORY = [("segment_alloc", None), ("alloc", None), ("free_requested", None),
                  ("free_completed", None), ("segment_free", None),
                  ("segment_alloc", "managed"), ("alloc", "managed"),
                  ("free_requested", "managed"), ("free_completed", "managed"),
                  ("segment_free", "managed"),
                  ("segment_alloc", None), ("alloc", None), ("free_requested", None),
                  ("free_completed", None), ("segment_free", None),
                  ("segment_alloc", "async"), ("alloc", "async"), ("free_requested", "async"),
                  ("free_completed", "async"), ("segment_free", "async"), ("oom", "async")]


def check_passed(check, a):
    env = {"SIMCUDA_MEM": "100M"}
    plain = shimrun.run_shim([a.passed_app], a.ld_path, extra_env=env, timeout=60)
    check(plain.returncode == 0 and plain.stdout == PASSED_WANT,
          f"passed without cuprof: {plain.stdout!r} {plain.stderr!r}")
    for what, extra in (("cache", {}), ("expandable",
                                        {"CUPROF_ALLOC_CONF": "expandable_segments:True"}),
                        ("trace", {"CUPROF_MODE": "trace"})):
        with tempfile.TemporaryDirectory() as tmp:
            run_env = dict(env, CUPROF_SNAPSHOT=os.path.join(tmp, "s-%n.pickle"),
                           CUPROF_DUMP_ON="exit", CUPROF_LOG="quiet", **extra)
            r = shimrun.run_shim([a.passed_app], a.ld_path, preload=a.lib, extra_env=run_env,
                                 timeout=60)
            check(r.returncode == 0 and r.stdout == PASSED_WANT,
                  f"passed {what}: {r.stdout!r} {r.stderr!r}")
            files = shimrun.dumps(tmp, "s-*.pickle")
            if what != "cache" or len(files) != 1:
                check(len(files) == 1, f"passed {what}: snapshots {files}")
                continue
            with open(files[0], "rb") as f:
                trace = pickle.load(f)["device_traces"][0]
            got = [(e["action"], e.get("cuprof_pool")) for e in trace
                   if e["action"] != "snapshot"]
            check(got == PASSED_HISTORY, f"passed cache: history {got}")
            x = trace[0]["size"]
            check(x > 0 and x % (2 * MiB) == 0 and
                  all(e["size"] == (200 * MiB if e["action"] == "oom" else x) for e in trace
                      if e["action"] != "snapshot"), "passed cache: sizes")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--cuprof", required=True)
    ap.add_argument("--checker", required=True)
    ap.add_argument("app")
    ap.add_argument("passed_app")
    a = ap.parse_args()
    check = shimrun.Checks()
    check_passed(check, a)
    plain = shimrun.run_shim([a.app, "8"], a.ld_path, extra_env=SIM, timeout=60)
    check(plain.returncode == 0 and plain.stdout == WANT,
          f"without cuprof: exit {plain.returncode}: {plain.stdout!r} {plain.stderr!r}")
    runs = [("cache", {"CUPROF_MODE": "cache"}),
            ("expandable", {"CUPROF_MODE": "cache",
                            "CUPROF_ALLOC_CONF": "expandable_segments:True"}),
            ("trace", {"CUPROF_MODE": "trace"})]
    for what, extra in runs:
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(SIM, CUPROF_SNAPSHOT=os.path.join(tmp, "s-%n.pickle"),
                       CUPROF_DUMP_ON="exit", CUPROF_LOG="quiet", **extra)
            r = shimrun.run_shim([a.app, "8"], a.ld_path, preload=a.lib, extra_env=env,
                                 timeout=60)
            check(r.returncode == 0 and r.stdout == plain.stdout,
                  f"{what}: exit {r.returncode}: {r.stdout!r}, without cuprof {plain.stdout!r}; "
                  f"stderr {r.stderr!r}")
            files = shimrun.dumps(tmp, "s-*.pickle")
            check(len(files) == 1, f"{what}: snapshots {files}")
            if what == "cache" and len(files) == 1:
                fill = (256 - 8) * MiB
                check_snapshot(check, a, files[0], fill)
                check_replay(check, a, files[0], tmp)
    check.finish()


if __name__ == "__main__":
    main()
