#!/usr/bin/env python3
"""The same frames with libunwind and without it (issue 30): every program given runs under
libcuprof.so twice, with libunwind installed and with it hidden as on a machine without it
(scripts/without-libunwind: a mount namespace in which libunwind.so.8 reads as an empty file),
stacks on every alloc and free; both snapshots must hold the same entries with the same symbolized
frames (function, file, line; addresses move with each run's layout), in any order; for a program
whose threads race for segments (--racy NAME), the segment events are left out (which thread's
request made a segment changes from run to run). Each run names its unwinder in one line at
start-up: libunwind, then cuprof's own.
Usage: test_unwinders.py --lib L --ld-path P --hide scripts/without-libunwind [--racy NAME]...
         PROG[:ARG...]...
Exit 77 when no mount namespace can be made here (the second configuration cannot run)."""
import argparse
import collections
import os
import pickle
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from shimrun import Checks, dumps, light, run_shim  # noqa: E402

LINES = {"libunwind": "cuprof: stacks by libunwind (libunwind.so.8)",
         "hidden": "cuprof: stacks by cuprof's unwinder (libunwind.so.8 is not installed)"}


def entries(path, racy):
    """Every history entry as (device, action, size, frames), frames as (name, file, line);
    without segment events when `racy`."""
    with open(path, "rb") as f:
        snap = pickle.load(f)
    out = []
    for dev, trace in enumerate(snap["device_traces"]):
        for e in trace:
            if racy and e["action"].startswith("segment"):
                continue
            frames = tuple((f["name"], f["filename"], f["line"]) for f in e.get("frames", []))
            out.append((dev, e["action"], e["size"], frames))
    return out


def run(cmd, a, tmp, hidden):
    env = {"CUPROF_STACKS": "all", "CUPROF_SNAPSHOT": os.path.join(tmp, "s-%n.pickle")}
    if hidden:
        cmd = [a.hide] + cmd
    r = run_shim(cmd, a.ld_path, preload=a.lib, extra_env=env, timeout=300)
    return r, dumps(tmp, "s-*.pickle")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--hide", required=True, help="scripts/without-libunwind")
    ap.add_argument("--racy", action="append", default=[],
                    help="a program whose threads race for segments")
    ap.add_argument("programs", nargs="+", help="PROG, or PROG:ARG:ARG...")
    a = ap.parse_intermixed_args()
    check = Checks()
    for spec in a.programs:
        cmd = spec.split(":")
        if len(cmd) == 1:  # the apps' light workloads: the same calls and frames, fewer times
            cmd = light(cmd[0])
        name = os.path.basename(cmd[-1] if cmd[0].startswith("python") else cmd[0])
        got = {}
        for how in ("libunwind", "hidden"):
            with tempfile.TemporaryDirectory() as tmp:
                r, files = run(cmd, a, tmp, how == "hidden")
                if how == "hidden" and r.returncode == 77 and "no mount namespace" in r.stderr:
                    print(r.stderr.strip())
                    sys.exit(77)
                check(r.returncode in (0, 1) and files, f"{name} ({how}): {r}")
                mine = [l for l in r.stderr.splitlines() if l.startswith("cuprof: stacks by")]
                check(len(mine) == 1 and mine[0].startswith(LINES[how]),
                      f"{name} ({how}): the unwinder's line: {mine}")
                got[how] = (r.returncode, r.stdout,
                            collections.Counter(e for p in files for e in entries(p, name in a.racy)))
        same = got["libunwind"] == got["hidden"]
        if not same:
            only_a = got["libunwind"][2] - got["hidden"][2]
            only_b = got["hidden"][2] - got["libunwind"][2]
            for e in list(only_a)[:3]:
                print("  only with libunwind:", e)
            for e in list(only_b)[:3]:
                print("  only without:", e)
        stacks = sum(1 for e in got["libunwind"][2].elements() if e[3])
        check(same and stacks > 0, f"{name}: {stacks} stacks, the same without libunwind: {same}")
        print(f"{name}: {stacks} entries with stacks, frame for frame the same")
    check.finish()


if __name__ == "__main__":
    main()
