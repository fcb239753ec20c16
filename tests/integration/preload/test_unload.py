#!/usr/bin/env python3
"""Stacks through a library loaded where an unloaded one was (preload/unload.c): unload_app
allocates through unwind_reload_a's lib_entry, closes it, and allocates through
unwind_reload_b's, which the loader puts at the same address with a frame 4 KiB larger. Run
with libunwind and with it hidden (scripts/without-libunwind), CUPROF_STACKS=alloc:
- the program's output is the same as without cuprof (dlclose's results included);
- the second allocation's frames go from the callback through lib_entry to `through`,
  `through_second` and `main`, as the first one's do through `through_first`: without the fix,
  the unloaded library's rule sent the walk to a decoy outermost frame (libunwind's per-thread
  cache, and cuprof's own rule table); lib_entry is named although both libraries were unloaded
  before the exit dump (snapshot/unloaded_modules.h);
- with libunwind, the log says once that stacks moved to cuprof's unwinder, after the first
  unload and not after the dlclose that only dropped a reference; without libunwind, never.
Exit 77 when the second library does not land where the first was.
Usage: test_unload.py --lib L --ld-path P --hide scripts/without-libunwind APP LIB_A LIB_B"""
import argparse
import os
import pickle
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from shimrun import Checks, dumps, run_shim  # noqa: E402

SWITCH = "cuprof: a shared object was unloaded: stacks by cuprof's unwinder from now on"


def allocs(path):
    with open(path, "rb") as f:
        snap = pickle.load(f)
    return [[fr["name"] for fr in e["frames"]] for e in snap["device_traces"][0]
            if e["action"] == "alloc"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--hide", required=True)
    ap.add_argument("app")
    ap.add_argument("lib_a")
    ap.add_argument("lib_b")
    a = ap.parse_args()
    cmd = [a.app, a.lib_a, a.lib_b]
    check = Checks()
    plain = run_shim(cmd, a.ld_path)
    if not check(plain.returncode == 0, f"without cuprof: exit {plain.returncode}: {plain.stderr}"):
        check.finish()
    addresses = [line for line in plain.stdout.splitlines() if line.startswith("lib_entry at")]
    if len(addresses) != 2 or addresses[0] != addresses[1]:
        print(f"SKIP: the second library was loaded elsewhere ({addresses})")
        sys.exit(77)
    for hidden in (False, True):
        name = "libunwind hidden" if hidden else "libunwind"
        with tempfile.TemporaryDirectory() as tmp:
            env = {"CUPROF_SNAPSHOT": os.path.join(tmp, "s-%n.pickle")}
            r = run_shim(([a.hide] if hidden else []) + cmd, a.ld_path, preload=a.lib,
                         extra_env=env)
            if r.returncode == 77 and hidden:
                print("SKIP: no mount namespace: libunwind cannot be hidden here")
                continue
            check(r.returncode == 0, f"{name}: exit {r.returncode}: {r.stderr}")
            check(r.stdout.splitlines()[0] == plain.stdout.splitlines()[0],
                  f"{name}: dlclose answered otherwise: {r.stdout!r} vs {plain.stdout!r}")
            switches = [line for line in r.stderr.splitlines() if line.startswith(SWITCH)]
            check(len(switches) == (0 if hidden else 1),
                  f"{name}: {len(switches)} lines saying the unwinder changed: {r.stderr}")
            files = dumps(tmp, "s-*.pickle")
            if not check(len(files) == 1, f"{name}: snapshots {files}"):
                continue
            frames = allocs(files[0])
            check(len(frames) == 2, f"{name}: {len(frames)} allocations")
            for got, caller in zip(frames, ("through_first", "through_second")):
                # lib_entry's library was unloaded before the dump: named from its file all the same
                check(got[:5] == ["allocate", "lib_entry", "through", caller, "main"],
                      f"{name}: the allocation through {caller}'s library: frames {got}")
    check.finish()


if __name__ == "__main__":
    main()
