#!/usr/bin/env python3
"""Fault injection in the simulated device (SIMCUDA_FAIL, tests/sim/driver/sim_config.c): the
faults app runs without the shim (the baseline: what the device itself answers) and under
libcuprof.so in each mode. cuprof must hand the device's error to the program unchanged (off and
trace modes: every return code equals the baseline; cache mode: the rules whose outcome does not
depend on caching), record it (an `oom` entry for a refused allocation in cache mode), keep its
state consistent (every dump passes check_snapshot.py) and serve the next call. A driver function
hidden from cuGetProcAddress (proc:NAME) costs at most one log line and never a crash.

usage: test_faults.py FAULTS_EXE LIBCUPROF
"""
import os
import re
import sys
import tempfile

import relutil

# rule -> modes whose return codes must equal the baseline's
RULES = {
    "alloc:above=1G": ["off", "trace", "cache"],
    "alloc:nth=2": ["off", "trace"],
    "alloc:every=3": ["off", "trace"],
    "free:nth=1:err=1": ["off", "trace"],
    "free:every=2:err=1": ["off", "trace"],
    "event_query:every=1": ["off", "trace", "cache"],
    "proc:cuMemAllocAsync": ["off", "trace", "cache"],
    "proc:cuMemFreeAsync": ["off", "trace", "cache"],
    "proc:cuEventQuery": ["off", "trace", "cache"],
    "proc:cuMemGetInfo": ["off", "trace", "cache"],
    "proc:cuStreamSynchronize": ["off", "trace", "cache"],
}


def run(exe, lib, rule, mode, d):
    extra = {"SIMCUDA_FAIL": rule}
    if lib:
        extra.update(CUPROF_MODE=mode, CUPROF_SNAPSHOT=os.path.join(d, "f-%p-%n.pickle"))
    env = relutil.sim_env(preload=lib, **extra)
    rc, out, err = relutil.run_watched([exe], env, 60)
    if rc != 0:
        relutil.fail(f"{rule} {mode if lib else 'baseline'}: exit {rc}\n{out}\n{err[-3000:]}")
    line = [l for l in out.splitlines() if l.startswith("faults:")]
    if len(line) != 1:
        relutil.fail(f"{rule}: no result line: {out!r}")
    return dict(re.findall(r"(\w+)=(-?\d+)", line[0])), err


def main():
    exe, lib = sys.argv[1], sys.argv[2]
    injected = 0
    for rule, exact in RULES.items():
        base, _ = run(exe, None, rule, None, None)
        for mode in ("off", "trace", "cache"):
            with tempfile.TemporaryDirectory(prefix="cuprof-faults-") as d:
                got, err = run(exe, lib, rule, mode, d)
                where = f"{rule} mode={mode}"
                if mode in exact and got != base:
                    relutil.fail(f"{where}: return codes {got}, device alone {base}")
                # Whatever caching changes, the program only ever sees success or the device's
                # own errors, and the next call works.
                allowed = {"0", "-1", "2"} | {v for k, v in base.items() if k != "loop_fail"}
                if any(v not in allowed for k, v in got.items() if k != "loop_fail"):
                    relutil.fail(f"{where}: unexpected error code in {got}")
                if rule.startswith("alloc:above") and (got["big"] != "2" or got["c"] != "0"):
                    relutil.fail(f"{where}: big={got['big']} (want 2) c={got['c']} (want 0)")
                lines = [l for l in err.splitlines() if l.startswith("cuprof:")]
                if rule.startswith("proc:"):
                    name = rule[5:]
                    if sum(name in l for l in lines) > 1:
                        relutil.fail(f"{where}: {name} logged more than once: {lines}")
                # What cuprof says of the faults: neither the line naming its unwinder nor one
                # line per OOM (its message, rate-limited) or per snapshot written.
                said = [l for l in lines if not l.startswith((
                    "cuprof: stacks by ", "cuprof: CUDA out of memory.", "cuprof: snapshot written",
                    "cuprof: out of memory on device"))]
                if len(said) > 5:
                    relutil.fail(f"{where}: {len(said)} log lines (want a few): {said[:8]}")
                snaps = relutil.verify_dumps(d)
                if mode != "off" and not snaps:
                    relutil.fail(f"{where}: no snapshot at exit")
                if mode == "cache" and rule.startswith("alloc:above"):
                    ooms = [e for _, s in snaps for t in s["device_traces"] for e in t
                            if e["action"] == "oom"]
                    if not ooms:
                        relutil.fail(f"{where}: the refused allocation left no oom entry")
                injected += 1
        print(f"{rule}: baseline {base}")
    print(f"faults: {injected} runs under injected faults, every dump consistent")


if __name__ == "__main__":
    main()
