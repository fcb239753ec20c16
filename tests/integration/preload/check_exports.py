#!/usr/bin/env python3
"""libcuprof.so exports exactly the intended list, unversioned, and needs glibc only.

A preloaded library's NEEDED entry that a machine lacks kills every process it is preloaded into
(exit 127), and a dependency's exports enter the program's global scope: libdw and libunwind are
dlopen'ed RTLD_LOCAL at run time instead, never linked.

Usage: check_exports.py LIBCUPROF NM READELF
The expected list is written here independently of preload/entry_points.def (which generates libcuprof.map and the stubs).
"""
import re
import subprocess
import sys

CUDA_EXPORTS = {
    "dlsym", "dlclose",
    # the exit snapshot of a program ended by _exit (Python's os._exit, multiprocessing's children)
    "_exit", "_Exit",
    # the snapshot of a program ended by abort (std::terminate, os.abort)
    "abort",
    # the snapshot of an image an exec replaces
    "execve", "execv", "execvp", "execvpe", "execl", "execle", "execlp", "fexecve", "execveat",
    # signal dispositions as the program asks for them (cuprof's SIGTERM handler reads as default)
    "sigaction", "signal", "bsd_signal", "sysv_signal",
    # driver API
    "cuGetProcAddress", "cuGetProcAddress_v2",
    "cuMemAlloc_v2", "cuMemFree_v2", "cuMemAllocPitch_v2", "cuMemAllocManaged", "cuMemGetInfo_v2",
    "cuMemAllocAsync", "cuMemAllocAsync_ptsz", "cuMemFreeAsync", "cuMemFreeAsync_ptsz",
    "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz", "cuMemPoolTrimTo",
    "cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemAddressReserve",
    "cuMemAddressFree", "cuMemGetAddressRange_v2", "cuPointerGetAttribute",
    "cuPointerGetAttributes", "cuIpcGetMemHandle", "cuDevicePrimaryCtxReset",
    "cuDevicePrimaryCtxReset_v2",
    "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", "cuCtxDestroy_v2",
    "cuStreamDestroy_v2", "cuCtxEnablePeerAccess",
    "cuStreamBeginCapture", "cuStreamBeginCapture_ptsz", "cuStreamBeginCapture_v2",
    "cuStreamBeginCapture_v2_ptsz", "cuStreamBeginCaptureToGraph",
    "cuStreamBeginCaptureToGraph_ptsz", "cuStreamEndCapture", "cuStreamEndCapture_ptsz",
    "cuThreadExchangeStreamCaptureMode",
    # calls that take device memory for the driver itself
    "cuCtxSetLimit", "cuModuleLoad", "cuModuleLoadData", "cuModuleLoadDataEx",
    "cuModuleLoadFatBinary", "cuModuleGetFunction", "cuLibraryLoadData", "cuLibraryLoadFromFile",
    "cuLibraryGetKernel", "cuLibraryGetModule", "cuKernelGetFunction", "cuLaunchKernel",
    "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
    "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz", "cuArrayCreate_v2",
    "cuArray3DCreate_v2", "cuMipmappedArrayCreate", "cuGraphLaunch", "cuGraphLaunch_ptsz",
    "cuGraphUpload", "cuGraphUpload_ptsz", "cuCtxCreate_v2", "cuCtxCreate_v3", "cuCtxCreate_v4",
    # runtime API
    "cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaMallocAsync_ptsz", "cudaFreeAsync",
    "cudaFreeAsync_ptsz", "cudaMallocFromPoolAsync", "cudaMallocFromPoolAsync_ptsz",
    "cudaMallocPitch", "cudaMalloc3D", "cudaMallocManaged", "cudaMemGetInfo", "cudaDeviceReset",
    "cudaDeviceEnablePeerAccess",
    # NVTX's tool entry points (NVTX_INJECTION64_PATH=libcuprof.so): core API, extensions
    "InitializeInjectionNvtx2", "InitializeInjectionNvtxExtension",
}

# The only libraries libcuprof.so may need: glibc itself and its parts, plus the sanitizer
# runtimes an ASan/UBSan build links in (such a build is never preloaded on its own).
GLIBC_PARTS = re.compile(r"^(libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|"
                         r"ld-linux[-\w.]*\.so\.\d+)$")
SANITIZER_RUNTIMES = re.compile(r"^lib(asan|ubsan|tsan|lsan|hwasan)\.so\.\d+$")


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def main():
    lib, nm, readelf = sys.argv[1:4]
    failures = []

    defined = {}
    for line in run(nm, "-D", "--defined-only", lib).splitlines():
        parts = line.split()
        if len(parts) == 3:
            defined[parts[2]] = parts[1]
    names = {n.split("@")[0] for n in defined}
    versioned = sorted(n for n in defined if "@" in n)
    if versioned:
        failures.append(f"exports carry a symbol version (breaks interposition): {versioned}")
    # The public cuprof_* API belongs to shim-control; everything else must be on our list.
    cuprof_api = {n for n in names if n.startswith("cuprof_")}
    if "cuprof_version" not in cuprof_api:
        failures.append("cuprof_version is not exported")
    extra = sorted(names - CUDA_EXPORTS - cuprof_api)
    missing = sorted(CUDA_EXPORTS - names)
    if extra:
        failures.append(f"unexpected exports: {extra}")
    if missing:
        failures.append(f"missing exports: {missing}")
    not_code = sorted(n for n in CUDA_EXPORTS & names if defined.get(n) != "T")
    if not_code:
        failures.append(f"exports that are not functions: {not_code}")

    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run(readelf, "-d", lib))
    cuda_needed = [n for n in needed if re.match(r"lib(cuda|cudart|nv|cupti)", n)]
    if cuda_needed:
        failures.append(f"NEEDED on CUDA libraries: {cuda_needed}")
    if not needed:
        failures.append("readelf -d shows no NEEDED at all (wrong file?)")
    if "libc.so.6" not in needed:
        failures.append(f"libc.so.6 is not NEEDED (wrong file?): {needed}")
    not_glibc = [n for n in needed if not GLIBC_PARTS.match(n) and not SANITIZER_RUNTIMES.match(n)]
    if not_glibc:
        failures.append(f"NEEDED on libraries other than glibc: {not_glibc}")

    undefined = run(nm, "-D", "--undefined-only", lib).split()
    cu_undefined = sorted(s for s in undefined if re.match(r"cu[A-Z]|cuda[A-Z]", s))
    if cu_undefined:
        failures.append(f"undefined CUDA symbols: {cu_undefined}")

    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print(f"ok: {len(CUDA_EXPORTS)} CUDA exports + {len(cuprof_api)} cuprof_* exports, "
          f"NEEDED={needed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
