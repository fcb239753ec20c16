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
import os
import sys

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
    a = shimrun.app_arguments()
    check = shimrun.Checks()

    def refusals(name, got):
        lines = [l for l in got.stderr.splitlines() if REFUSAL in l]
        check(len(lines) == (1 if name == "cache" else 0),
              f"{name}: {len(lines)} refusal lines: {got.stderr[-800:]}")
        if name == "cache" and lines:
            check(lines[0].startswith("cuprof: cuIpcGetMemHandle(0x") and
                  "CUDA_ERROR_NOT_SUPPORTED" in lines[0] and "CUPROF_MODE=trace" in lines[0],
                  f"refusal line: {lines[0]}")

    shimrun.answers_in_every_mode(check, a, ALONE, CACHE, also=refusals)
    check.finish()


if __name__ == "__main__":
    main()
