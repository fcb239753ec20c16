#!/usr/bin/env python3
"""A program's output on the simulated device, alone and under libcuprof.so in cache, trace and
off modes, must be byte for byte what it printed on a real GPU with NVIDIA's runtime and driver
(tests/integration/nvcc/real/NAME.out; see the README there).

Exit 77 (skipped) when PROGRAM is empty: the build found no nvcc.
Usage: test_real_answers.py --lib LIB --ld-path PATH --expected FILE PROGRAM
"""
import argparse
import difflib
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--expected", required=True)
    ap.add_argument("program", nargs="?", default="")
    a = ap.parse_args()
    if not a.program:
        print("skipped: no nvcc")
        sys.exit(77)
    with open(a.expected, encoding="utf-8") as f:
        want = f.read()
    check = shimrun.Checks()
    with tempfile.TemporaryDirectory() as tmp:
        runs = [("alone", None, {})]
        runs += [(mode, a.lib, {"CUPROF_MODE": mode,
                                "CUPROF_SNAPSHOT": os.path.join(tmp, mode + "-%n.pickle")})
                 for mode in ("cache", "trace", "off")]
        for name, lib, extra in runs:
            got = shimrun.run_shim([a.program], a.ld_path, preload=lib, extra_env=extra)
            check(got.returncode == 0, f"{name}: exit status {got.returncode}: {got.stderr[-800:]}")
            if not check(got.stdout == want, f"{name}: output differs from the real GPU's"):
                sys.stdout.writelines(difflib.unified_diff(
                    want.splitlines(True), got.stdout.splitlines(True), "real GPU", name, n=0))
    check.finish()


if __name__ == "__main__":
    main()
