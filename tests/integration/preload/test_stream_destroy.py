#!/usr/bin/env python3
"""Streams destroyed while the program goes on (stream_destroy_app) under libcuprof.so in cache
mode with free_sync:events: the program's output is the same as without cuprof, it exits 0, and
the exit snapshot passes check_snapshot.py --complete-history, and the simulated driver (with
SIMCUDA_STRICT_HANDLES=1) never sees a destroyed stream's handle. Before cuprof forgot destroyed
streams, every cudaFree recorded an event on each dead one; with threads, that raced the destroy
into a use after free inside the driver.

Usage: test_stream_destroy.py --lib LIB --ld-path PATH --checker CHECK_SNAPSHOT_PY APP
"""
import argparse
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from shimrun import Checks, dumps, load_checker, run_shim  # noqa: E402 (tests/integration/)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--checker", required=True)
    ap.add_argument("program")
    a = ap.parse_args()
    checker = load_checker(a.checker)
    check = Checks()
    base = run_shim([a.program], a.ld_path, timeout=120)
    check(base.returncode == 0 and "sum=" in base.stdout, f"fails without cuprof: {base}")
    with tempfile.TemporaryDirectory() as tmp:
        env = {"CUPROF_MODE": "cache", "CUPROF_ALLOC_CONF": "free_sync:events",
               "CUPROF_SNAPSHOT": os.path.join(tmp, "s-%n.pickle"), "SIMCUDA_STRICT_HANDLES": "1"}
        shim = run_shim([a.program], a.ld_path, preload=a.lib, extra_env=env, timeout=120)
        check(shim.returncode == 0, f"exit {shim.returncode}: {shim.stderr!r}")
        check("not a live stream" not in shim.stderr,
              f"cuprof passed the driver a destroyed stream: {shim.stderr!r}")
        check(shim.stdout == base.stdout,
              f"output differs:\n  without: {base.stdout!r}\n  with: {shim.stdout!r}")
        files = dumps(tmp)
        check(files, f"no snapshot written; stderr {shim.stderr!r}")
        if files:
            problems = checker.check(checker.load(files[-1]), complete_history=True)
            check(not problems, f"check_snapshot --complete-history: {problems[:5]}")
    print(f"stream_destroy_app/free_sync:events: {base.stdout.strip()}")
    check.finish()


if __name__ == "__main__":
    main()
