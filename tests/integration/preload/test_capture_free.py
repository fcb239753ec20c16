#!/usr/bin/env python3
"""cudaFree and cudaMalloc in a global-mode stream capture (capture_free_app.c): the capture
forbids both, the runtime returns cudaErrorStreamCaptureUnsupported and holds it as its last error
(cudaPeekAtLastError, cudaGetLastError). In cache mode cuprof's fast path meets the cudaFree of a
cached block; the program must read the same answers and the same last errors as without cuprof,
in every mode.

Usage: test_capture_free.py --lib LIB --ld-path PATH APP
"""
import os
import sys

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
    a = shimrun.app_arguments()
    check = shimrun.Checks()
    shimrun.answers_in_every_mode(check, a, WANT)
    check.finish()


if __name__ == "__main__":
    main()
