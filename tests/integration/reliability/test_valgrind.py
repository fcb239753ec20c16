#!/usr/bin/env python3
"""Valgrind memcheck of the cuprof command on a real snapshot: train_loop runs under the shim
(stacks on), then `cuprof summary`, `cuprof leaks` and `cuprof stats` run under memcheck with
--error-exitcode and full leak checking; any error or definite/indirect leak fails. Skipped
(exit 77) when valgrind is missing.

usage: test_valgrind.py CUPROF_EXE TRAIN_LOOP LIBCUPROF
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import relutil


def main():
    cuprof, app, lib = sys.argv[1:4]
    vg = shutil.which("valgrind")
    if not vg:
        print("valgrind not installed: skipped")
        sys.exit(77)
    with tempfile.TemporaryDirectory(prefix="cuprof-vg-") as d:
        env = relutil.sim_env(preload=lib, CUPROF_SNAPSHOT=os.path.join(d, "t.pickle"),
                              CUPROF_STACKS="all", CUPROF_LOG="quiet")
        rc, out, err = relutil.run_watched([app, "5"], env, 120)
        snap = glob.glob(os.path.join(d, "t*.pickle"))
        if rc != 0 or len(snap) != 1:
            relutil.fail(f"train_loop under the shim: exit {rc}, dumps {snap}\n{err[-2000:]}")
        relutil.verify_dumps(d)
        env = relutil.sim_env()
        env.pop("LD_PRELOAD", None)
        for cmd in (["summary"], ["leaks"], ["stats"]):
            args = [vg, "--tool=memcheck", "--error-exitcode=99", "--leak-check=full",
                    "--errors-for-leak-kinds=definite,indirect", "--quiet", cuprof] + cmd + snap
            p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
            if p.returncode not in (0, 1) or "ERROR SUMMARY" in p.stderr and \
                    "ERROR SUMMARY: 0 errors" not in p.stderr:
                relutil.fail(f"valgrind cuprof {cmd[0]}: exit {p.returncode}\n{p.stderr[-4000:]}")
            print(f"valgrind: cuprof {cmd[0]} clean (exit {p.returncode})")


if __name__ == "__main__":
    main()
