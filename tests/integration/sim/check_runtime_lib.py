#!/usr/bin/env python3
"""Checks the simulated libcudart.so.13 links like the real one: SONAME libcudart.so.13, no NEEDED
libcuda, no undefined cu* symbol (the driver is reached only through dlopen + cuGetProcAddress),
every cuda* and __cuda* (nvcc's generated host code) export versioned @@libcudart.so.13; the apps reference those versioned names and
static_style needs neither library. With REAL_LIBCUDART (the toolkit's), every export must be
one the real library exports under the same version.

usage: check_runtime_lib.py LIBCUDART TRAIN_LOOP STATIC_STYLE [REAL_LIBCUDART]
"""
import re
import subprocess
import sys


def out(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out("readelf", "-d", path))


lib, train_loop, static_style = sys.argv[1:4]
errors = []
dyn = out("readelf", "-d", lib)
if "Library soname: [libcudart.so.13]" not in dyn:
    errors.append("SONAME is not libcudart.so.13")
if any(n.startswith("libcuda.") for n in needed(lib)):
    errors.append(f"NEEDED libcuda: {needed(lib)}")
undef = [l.split()[-1] for l in out("nm", "-D", "--undefined-only", lib).splitlines() if l.strip()]
cu = [u for u in undef if u.startswith("cu")]
if cu:
    errors.append(f"undefined cu* symbols: {cu}")
base = {u.split("@")[0] for u in undef}  # sanitizer builds import dlopen unversioned
if "dlopen" not in base or "dlsym" not in base:
    errors.append("does not import dlopen/dlsym")
defined = [l.split()[-1] for l in out("nm", "-D", "--defined-only", lib).splitlines() if l.strip()]
exports = [d for d in defined if not d.startswith("libcudart.so.13")]
unversioned = [d for d in exports if not d.endswith("@@libcudart.so.13")]
if unversioned:
    errors.append(f"exports without the libcudart.so.13 version: {unversioned}")
non_cuda = [d for d in exports if not d.startswith(("cuda", "__cuda"))]
if non_cuda:
    errors.append(f"exports other than cuda* and __cuda*: {non_cuda}")
for name in ["cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaMallocAsync_ptsz", "cudaFreeAsync",
             "cudaFreeAsync_ptsz", "cudaMallocFromPoolAsync", "cudaMallocFromPoolAsync_ptsz",
             "cudaMallocPitch", "cudaMalloc3D", "cudaMallocManaged", "cudaMallocHost",
             "cudaFreeHost", "cudaMemGetInfo", "cudaMemcpy", "cudaMemcpy_ptds", "cudaMemcpyAsync",
             "cudaMemcpyAsync_ptsz", "cudaMemset", "cudaMemsetAsync", "cudaMemsetAsync_ptsz",
             "cudaGetDevice", "cudaSetDevice", "cudaGetDeviceCount", "cudaGetDeviceProperties",
             "cudaDeviceSynchronize", "cudaDeviceReset", "cudaStreamCreate",
             "cudaStreamCreateWithFlags", "cudaStreamDestroy", "cudaStreamSynchronize",
             "cudaStreamSynchronize_ptsz", "cudaStreamQuery", "cudaStreamWaitEvent",
             "cudaEventCreate", "cudaEventCreateWithFlags", "cudaEventRecord",
             "cudaEventRecord_ptsz", "cudaEventQuery", "cudaEventSynchronize", "cudaEventDestroy",
             "cudaGetLastError", "cudaPeekAtLastError", "cudaGetErrorName", "cudaGetErrorString",
             "cudaGetDriverEntryPoint", "cudaGetDriverEntryPointByVersion",
             "cudaDeviceGetDefaultMemPool", "cudaDriverGetVersion", "cudaRuntimeGetVersion",
             "__cudaRegisterFatBinary", "__cudaRegisterFatBinaryEnd", "__cudaRegisterFunction",
             "__cudaRegisterVar", "__cudaRegisterManagedVar", "__cudaUnregisterFatBinary",
             "__cudaInitModule", "__cudaPushCallConfiguration", "__cudaPopCallConfiguration",
             "__cudaGetKernel", "__cudaLaunchKernel", "__cudaLaunchKernel_ptsz",
             "cudaLaunchKernel", "cudaLaunchKernel_ptsz", "cudaFuncGetAttributes",
             "cudaFuncSetAttribute", "cudaDeviceGetAttribute", "cudaMemcpyToSymbol",
             "cudaMemcpyFromSymbol", "cudaGetSymbolAddress",
             "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags"]:
    if name + "@@libcudart.so.13" not in exports:
        errors.append(f"missing export {name}@@libcudart.so.13")
if "libcudart.so.13" not in needed(train_loop):
    errors.append(f"train_loop does not need libcudart.so.13: {needed(train_loop)}")
tl_undef = out("nm", "-D", "--undefined-only", train_loop)
if "cudaMalloc@libcudart.so.13" not in tl_undef:
    errors.append("train_loop does not reference cudaMalloc@libcudart.so.13")
bad = [n for n in needed(static_style) if n.startswith(("libcuda.", "libcudart."))]
if bad:
    errors.append(f"static_style links to {bad}")
if len(sys.argv) > 4:
    real = {l.split()[-1] for l in out("nm", "-D", "--with-symbol-versions", "--defined-only",
                                       sys.argv[4]).splitlines() if l.strip()}
    ours = {l.split()[-1] for l in out("nm", "-D", "--with-symbol-versions", "--defined-only",
                                       lib).splitlines() if l.strip()}
    extra = sorted(n for n in ours - real if not n.startswith("libcudart.so.13"))
    if extra:
        errors.append(f"exports the toolkit's libcudart.so.13 does not have: {extra}")
if errors:
    sys.exit("\n".join(errors))
print(f"ok: {len(exports)} versioned exports, {len(undef)} imports, none cu*")
