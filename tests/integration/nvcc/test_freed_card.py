#!/usr/bin/env python3
"""nvcc_freed_card (built by nvcc): the program allocates all the free memory, frees it, then
launches its kernel for the first time. Through the runtime that launch is the driver's
cuLaunchKernel, which under lazy loading loads the kernel's code into device memory first.
Alone, and under cuprof in cache, trace and off mode, every step succeeds; in cache mode the
freed memory sits in cuprof's cache, so the cache must hand it back when the driver finds none
for the code, and one line says so.

Usage: test_freed_card.py --lib LIB --ld-path PATH APP
"""
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/)

WANT = ("mem_info=cudaSuccess\nfilled=yes\nfree=cudaSuccess\nlaunch=cudaSuccess\n"
        "synchronize=cudaSuccess\n")


def main():
    a = shimrun.app_arguments()
    check = shimrun.Checks()

    def also(name, got):
        released = [l for l in got.stderr.splitlines()
                    if l.startswith("cuprof: cuLaunchKernel found no device memory for the driver "
                                    "while cuprof's cache held ")]
        check(len(released) == (1 if name == "cache" else 0),
              f"{name}: the cache's release lines {released}: {got.stderr[-600:]!r}")

    shimrun.answers_in_every_mode(check, a, WANT, also=also)
    check.finish()


if __name__ == "__main__":
    main()
