#!/usr/bin/env python3
"""Concurrency stress: runs the stress app (threads x streams x 2 simulated devices, cross-thread
and async frees, a device reset, SIGUSR1 every few ms, a fork) under a deadlock watchdog, with or
without libcuprof.so, then checks the app's own counts and, under the shim, every dump with the
independent checker (tests/golden/check_snapshot.py).

usage: test_stress.py STRESS_EXE THREADS OPS SEED [--preload LIB] [--mode M] [--timeout S]
       [--mem SIZE] [--budget MIB] [--history all|state]
"""
import argparse
import os
import re
import sys
import tempfile

import relutil


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("exe")
    ap.add_argument("threads", type=int)
    ap.add_argument("ops", type=int)
    ap.add_argument("seed")
    ap.add_argument("--preload")
    ap.add_argument("--mode", default="cache")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--mem", default="4G")
    ap.add_argument("--budget", default="512")
    ap.add_argument("--no-reset", action="store_true")
    a = ap.parse_args()
    ops = a.ops // 4 if relutil.sanitized() else a.ops

    with tempfile.TemporaryDirectory(prefix="cuprof-stress-") as d:
        extra = {}
        if a.preload:
            extra = {"CUPROF_MODE": a.mode, "CUPROF_SNAPSHOT": os.path.join(d, "s-%p-%n.pickle"),
                     "CUPROF_LOG": "quiet"}
        env = relutil.sim_env(devices=2, mem=a.mem, preload=a.preload, **extra)
        rc, out, err = relutil.run_watched([a.exe, str(a.threads), str(ops), a.seed, a.budget]
                                           + (["noreset"] if a.no_reset else []),
                                           env, a.timeout)
        print(out.strip())
        if rc != 0:
            relutil.fail(f"stress exited {rc}\nstdout: {out[-3000:]}\nstderr: {err[-3000:]}")
        m = dict(re.findall(r"(\w+)=(\S+)", out.strip().splitlines()[-1]))
        n = {k: int(v) for k, v in m.items()}
        # The app's own bookkeeping: every block allocated was verified and then freed (or
        # dropped by the device reset), nothing is left, the child exited 0.
        if n["allocs"] != n["frees"] + n["reset_dropped"]:
            relutil.fail(f"allocs {n['allocs']} != frees {n['frees']} + dropped "
                         f"{n['reset_dropped']}")
        if n["verified"] != n["allocs"]:
            relutil.fail(f"verified {n['verified']} != allocs {n['allocs']}")
        if n["resets"] != (0 if a.no_reset else 1) or (a.no_reset and n["reset_dropped"]):
            relutil.fail(f"resets: {n}")
        if n["live"] != 0 or n["child_status"] != 0 or n["forks"] != 1 or n["devices"] != 2:
            relutil.fail(f"live/child_status/forks/devices: {n}")
        if n["cross_frees"] == 0 or n["async_frees"] == 0:
            relutil.fail("no cross-thread or no async frees: the run tested too little")
        if not a.preload:
            return
        if a.mode != "off" and n["signals"] == 0:
            relutil.fail("the shim installed no SIGUSR1 handler: no signal was sent")
        snaps = relutil.verify_dumps(d, keep=False)
        if a.mode != "off" and not snaps:
            relutil.fail("no snapshot was written")
        pids = {re.search(r"s-(\d+)-", os.path.basename(s[0])).group(1) for s in snaps}
        print(f"stress: {len(snaps)} dumps from {len(pids)} processes verified, "
              f"{n['signals']} signals sent")
        if err.strip():
            print("stderr:", err.strip()[-2000:])


if __name__ == "__main__":
    sys.exit(main())
