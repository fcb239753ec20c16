#!/usr/bin/env python3
"""Legacy CUDA IPC handles under cuprof (ipc_app.c). A handle names a whole driver allocation:
in cache mode a block cut from the middle of a cuprof segment would open at the segment's start
in the other process (PyTorch's shared CUDA tensors read other tensors' bytes on an H200), so
cuprof refuses it with CUDA_ERROR_NOT_SUPPORTED and one log line; a block at its segment's start
keeps the driver's handle. Stream-ordered memory (cudaMallocAsync) is never legacy-IPC capable:
the driver refuses its handle with CUDA_ERROR_INVALID_VALUE, and so does cuprof for a block its
cache served to such a request, even one that starts its segment. In every case
CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, alone and among others, says what the handle's
answer says. Without cuprof, in trace and in off mode every live cudaMalloc block gets its handle.

Usage: test_ipc.py --lib LIB --ld-path PATH APP
"""
import argparse
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/)

ALONE = ("first=cudaSuccess names_start=1 last=cudaSuccess capable=1 plural=0/1\n"
         "second=cudaSuccess names_start=1 last=cudaSuccess capable=1 plural=0/1\n"
         "second_again=cudaSuccess names_start=1 last=cudaSuccess capable=1 plural=0/1\n"
         "inside_first=cudaSuccess names_start=0 last=cudaSuccess capable=1 plural=0/1\n"
         "freed=cudaErrorInvalidValue names_start=0 last=cudaErrorInvalidValue capable=error1 "
         "plural=0/0\n"
         "async_own_stream=cudaErrorInvalidValue names_start=0 last=cudaErrorInvalidValue "
         "capable=0 plural=0/0\n"
         "async_legacy_stream=cudaErrorInvalidValue names_start=0 last=cudaErrorInvalidValue "
         "capable=0 plural=0/0\n")
CACHE = ALONE.replace("second=cudaSuccess names_start=1 last=cudaSuccess capable=1 plural=0/1",
                      "second=cudaErrorNotSupported names_start=0 last=cudaErrorNotSupported "
                      "capable=0 plural=0/0")
CACHE = CACHE.replace("second_again=cudaSuccess names_start=1 last=cudaSuccess capable=1 "
                      "plural=0/1",
                      "second_again=cudaErrorNotSupported names_start=0 "
                      "last=cudaErrorNotSupported capable=0 plural=0/0")
REFUSAL = "cache mode cut this block from a larger allocation"


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
            refusals = [l for l in got.stderr.splitlines() if REFUSAL in l]
            check(len(refusals) == (1 if name == "cache" else 0),
                  f"{name}: {len(refusals)} refusal lines: {got.stderr[-800:]}")
            if name == "cache" and refusals:
                line = refusals[0]
                check(line.startswith("cuprof: cuIpcGetMemHandle(0x") and
                      "CUDA_ERROR_NOT_SUPPORTED" in line and "CUPROF_MODE=trace" in line,
                      f"refusal line: {line}")
    check.finish()


if __name__ == "__main__":
    main()
