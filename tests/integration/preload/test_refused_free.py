#!/usr/bin/env python3
"""cudaFree in cache mode when the device refuses the synchronization cuprof makes first
(refused_free_app.c under SIMCUDA_FAIL=sync:nth=1, standing in for a CUDA graph capture that
forbids the call): the free fails with the driver's error and changes nothing, so the same
pointer frees once later and only once; the runtime holds the error as its last error
(cudaPeekAtLastError, cudaGetLastError), although cuprof's fast path met the call.

Usage: test_refused_free.py --lib LIB --ld-path PATH APP
"""
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/)

WANT = ("malloc=cudaSuccess\n"
        "free1=cudaErrorStreamCaptureUnsupported peek=cudaErrorStreamCaptureUnsupported "
        "last=cudaErrorStreamCaptureUnsupported then=cudaSuccess\n"
        "free2=cudaSuccess\n"
        "free3=cudaErrorInvalidValue\n")


def main():
    a = shimrun.app_arguments()
    check = shimrun.Checks()
    with tempfile.TemporaryDirectory() as tmp:
        got = shimrun.run_shim([a.app], a.ld_path, preload=a.lib, extra_env={
            "CUPROF_MODE": "cache", "SIMCUDA_FAIL": "sync:nth=1",
            "CUPROF_SNAPSHOT": os.path.join(tmp, "s.pickle")})
        check(got.returncode == 0, f"exit {got.returncode}: {got.stderr[-500:]}")
        check(got.stdout == WANT, f"got\n{got.stdout}want\n{WANT}")
        snap = shimrun.load_checker().load(os.path.join(tmp, "s.pickle"))
        actions = [e["action"] for e in snap["device_traces"][0]]
        check(actions.count("free_requested") == 1,
              f"one free recorded (the refused one changed nothing): {actions}")
    check.finish()


if __name__ == "__main__":
    main()
