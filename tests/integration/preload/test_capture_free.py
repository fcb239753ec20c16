#!/usr/bin/env python3
"""cudaFree and cudaMalloc in a global-mode stream capture (capture_free_app.c): the capture
forbids both, the runtime returns cudaErrorStreamCaptureUnsupported and holds it as its last error
(cudaPeekAtLastError, cudaGetLastError). In cache mode cuprof's fast path meets the cudaFree of a
cached block; the program must read the same answers and the same last errors as without cuprof,
in every mode.

Usage: test_capture_free.py --lib LIB --ld-path PATH APP
"""
import argparse
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/)

WANT = ("begin=cudaSuccess last=cudaSuccess\n"
        "free_in_capture=cudaErrorStreamCaptureUnsupported peek=cudaErrorStreamCaptureUnsupported "
        "last=cudaErrorStreamCaptureUnsupported then=cudaSuccess\n"
        "malloc_in_capture=cudaErrorStreamCaptureUnsupported "
        "last=cudaErrorStreamCaptureUnsupported\n"
        "end=cudaErrorStreamCaptureInvalidated last=cudaErrorStreamCaptureInvalidated\n"
        "free_after=cudaSuccess last=cudaSuccess\n"
        "free_again=cudaErrorInvalidValue last=cudaErrorInvalidValue\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("app")
    a = ap.parse_args()
    check = shimrun.Checks()
    with tempfile.TemporaryDirectory() as tmp:
        runs = [("alone", None, {})]
        runs += [(mode, a.lib, {"CUPROF_MODE": mode,
                                "CUPROF_SNAPSHOT": os.path.join(tmp, mode + ".pickle")})
                 for mode in ("cache", "trace", "off")]
        for name, lib, extra in runs:
            got = shimrun.run_shim([a.app], a.ld_path, preload=lib, extra_env=extra)
            check(got.returncode == 0, f"{name}: exit {got.returncode}: {got.stderr[-500:]}")
            check(got.stdout == WANT, f"{name}: got\n{got.stdout}want\n{WANT}")
    check.finish()


if __name__ == "__main__":
    main()
