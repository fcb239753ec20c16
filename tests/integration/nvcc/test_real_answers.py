#!/usr/bin/env python3
"""A program's output on the simulated device, alone and under libcuprof.so in cache, trace and
off modes, must be byte for byte what it printed on a real GPU with NVIDIA's runtime and driver
(tests/integration/nvcc/real/NAME.out; see the README there), but for the answers cache mode
changes on purpose (CACHE_CHANGES).

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

# What cache mode answers on purpose where the real GPU's answer differs, by expected file: (the
# start of the line, its text on the GPU, its text in cache mode). Each must match exactly once.
# nvcc_attrs' live block is cut from the middle of a cuprof segment, whose legacy IPC handle cuprof
# refuses (docs/compatibility.md, CUDA IPC): its IS_LEGACY_CUDA_IPC_CAPABLE says so.
CACHE_CHANGES = {
    "nvcc_attrs.out": [
        ("live+100 singular:", " ipc=5a5a5a5a00000001 ", " ipc=5a5a5a5a00000000 "),
        ("live+100 plural=", " ipc=1 ", " ipc=0 "),
    ],
}


def cache_answers(expected_path, want):
    """The expected output with CACHE_CHANGES applied; fails loudly when one no longer applies."""
    lines = want.splitlines(True)
    for start, real, cache in CACHE_CHANGES.get(os.path.basename(expected_path), []):
        hits = [i for i, line in enumerate(lines) if line.startswith(start) and real in line]
        if len(hits) != 1 or lines[hits[0]].count(real) != 1:
            sys.exit(f"CACHE_CHANGES: {start!r} {real!r} matches {len(hits)} lines of "
                     f"{expected_path}, not one")
        lines[hits[0]] = lines[hits[0]].replace(real, cache)
    return "".join(lines)


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
            expect = cache_answers(a.expected, want) if name == "cache" else want
            got = shimrun.run_shim([a.program], a.ld_path, preload=lib, extra_env=extra)
            check(got.returncode == 0, f"{name}: exit status {got.returncode}: {got.stderr[-800:]}")
            if not check(got.stdout == expect, f"{name}: output differs from the real GPU's"):
                sys.stdout.writelines(difflib.unified_diff(
                    expect.splitlines(True), got.stdout.splitlines(True), "real GPU", name, n=0))
    check.finish()


if __name__ == "__main__":
    main()
