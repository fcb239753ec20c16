#!/usr/bin/env python3
"""Compiles runtime_check.c at test time the way a user would (`gcc app.c -I$CUDA/include
-L<dir> -lcudart`), runs it on the simulated device and checks its result line. With `ptsz` it
builds with -DCUDA_API_PER_THREAD_DEFAULT_STREAM and checks the binary calls the _ptsz/_ptds
exports.

usage: check_gcc_app.py GCC CUDA_INCLUDE RUNTIME_LIB SOURCE legacy|ptsz
"""
import os
import subprocess
import sys
import tempfile

gcc, cuda_inc, runtime_lib, source, mode = sys.argv[1:6]
libdir = os.path.dirname(os.path.realpath(runtime_lib))
with tempfile.TemporaryDirectory() as tmp:
    exe = os.path.join(tmp, "app")
    cmd = [gcc, source, "-I" + cuda_inc, "-L" + libdir, "-lcudart", "-o", exe]
    if mode == "ptsz":
        cmd.insert(2, "-DCUDA_API_PER_THREAD_DEFAULT_STREAM")
    dyn = subprocess.run(["readelf", "-d", runtime_lib], capture_output=True, text=True).stdout
    if "libasan" in dyn:  # a sanitizer build: the program must load the ASan runtime first
        cmd.insert(2, "-fsanitize=address,undefined")
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"compile failed: {' '.join(cmd)}\n{p.stderr}")
    undef = subprocess.run(["nm", "-D", "--undefined-only", exe], capture_output=True,
                           text=True, check=True).stdout
    names = {l.split()[-1] for l in undef.splitlines() if l.strip()}
    want = {"cudaMemcpy_ptds@libcudart.so.13", "cudaMemsetAsync_ptsz@libcudart.so.13",
            "cudaMallocAsync_ptsz@libcudart.so.13", "cudaStreamSynchronize_ptsz@libcudart.so.13",
            "cudaGetDriverEntryPointByVersion_ptsz@libcudart.so.13",
            "cudaMemcpy2D_ptds@libcudart.so.13", "cudaMemset2DAsync_ptsz@libcudart.so.13",
            "cudaStreamAddCallback_ptsz@libcudart.so.13",
            "cudaEventRecordWithFlags_ptsz@libcudart.so.13",
            "cudaMemPrefetchAsync_ptsz@libcudart.so.13"}
    if mode == "ptsz" and not want <= names:
        sys.exit(f"per-thread build does not reference {sorted(want - names)}")
    if mode == "legacy" and "cudaMalloc@libcudart.so.13" not in names:
        sys.exit(f"legacy build does not reference cudaMalloc@libcudart.so.13: {sorted(names)}")
    r = subprocess.run([exe], capture_output=True, text=True, timeout=120)
    print(r.stdout, r.stderr)
    if r.returncode != 0 or not r.stdout.startswith("runtime_check: ok "):
        sys.exit(f"runtime_check failed (exit {r.returncode})")
    n = int(r.stdout.split()[-1])
    least = 380 if os.environ.get("SIMCUDA_DEVICES") == "2" else 365  # 2 devices: +15 checks
    if n < least:
        sys.exit(f"runtime_check ran only {n} checks")
