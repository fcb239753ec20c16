#!/usr/bin/env python3
"""CU_POINTER_ATTRIBUTE_BUFFER_ID under cuprof (buffer_id_app.c): cuda.h guarantees an ID unique
within the process. In cache mode the driver's ID of a block would be its segment's, shared by
every block cut from it and kept across a cached reuse; each block the cache hands out answers an
ID of its own instead, new for every allocation, from 2^63 up (below lies every ID a driver
hands out). Alone, in trace and in off mode the driver answers.

Usage: test_buffer_ids.py --lib LIB --ld-path PATH APP
"""
import argparse
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/)

ALONE = ("live distinct=1 inside_same=1 plural_same=1\n"
         "reuse same_address=1 new_id=1 b_kept=1\n"
         "others distinct=1\n"
         "top_bit=0\n")
CACHE = ALONE.replace("top_bit=0", "top_bit=1")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("app")
    a = ap.parse_args()
    check = shimrun.Checks()
    with tempfile.TemporaryDirectory() as tmp:
        runs = [("alone", None, {}, ALONE)]
        runs += [(mode, a.lib, {"CUPROF_MODE": mode,
                                "CUPROF_SNAPSHOT": os.path.join(tmp, mode + ".pickle")},
                  CACHE if mode == "cache" else ALONE) for mode in ("cache", "trace", "off")]
        for name, lib, extra, want in runs:
            got = shimrun.run_shim([a.app], a.ld_path, preload=lib, extra_env=extra)
            check(got.returncode == 0, f"{name}: exit {got.returncode}: {got.stderr[-500:]}")
            check(got.stdout == want, f"{name}: got\n{got.stdout}want\n{want}")
    check.finish()


if __name__ == "__main__":
    main()
