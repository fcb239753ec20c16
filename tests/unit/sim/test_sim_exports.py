#!/usr/bin/env python3
"""Checks the simulated libcuda.so.1's ELF face: SONAME, dependencies, and that it exports only
cu* entry points under their real names (each one present in the toolkit's stub libcuda.so)."""
import os
import subprocess
import sys
import unittest

LIB = sys.argv.pop(1)
STUB = sys.argv.pop(1)

REQUIRED = """cuInit cuDriverGetVersion cuDeviceGet cuDeviceGetCount cuDeviceGetName cuDeviceTotalMem_v2
cuDeviceGetAttribute cuDevicePrimaryCtxRetain cuDevicePrimaryCtxRelease cuDevicePrimaryCtxRelease_v2
cuDevicePrimaryCtxReset cuDevicePrimaryCtxReset_v2 cuDevicePrimaryCtxGetState cuCtxGetCurrent
cuCtxSetCurrent cuCtxGetDevice cuCtxGetDevice_v2 cuCtxSynchronize cuCtxSynchronize_v2
cuCtxPushCurrent_v2 cuCtxPopCurrent_v2 cuCtxDestroy_v2 cuCtxCreate_v4 cuMemAlloc_v2 cuMemFree_v2
cuMemAllocPitch_v2 cuMemAllocManaged cuMemGetInfo_v2 cuMemGetAddressRange_v2 cuPointerGetAttribute
cuPointerGetAttributes cuMemAllocAsync cuMemAllocAsync_ptsz cuMemFreeAsync cuMemFreeAsync_ptsz
cuMemAllocFromPoolAsync cuMemAllocFromPoolAsync_ptsz cuDeviceGetDefaultMemPool cuMemPoolCreate
cuMemPoolDestroy cuMemPoolGetAttribute cuMemPoolSetAttribute cuMemPoolTrimTo cuMemCreate cuMemRelease
cuMemMap cuMemUnmap cuMemAddressReserve cuMemAddressFree cuMemSetAccess cuMemGetAllocationGranularity
cuMemHostAlloc cuMemAllocHost_v2 cuMemFreeHost cuMemcpy cuMemcpy_ptds cuMemcpyHtoD_v2
cuMemcpyHtoD_v2_ptds cuMemcpyDtoH_v2 cuMemcpyDtoH_v2_ptds cuMemcpyDtoD_v2 cuMemcpyDtoD_v2_ptds
cuMemcpyAsync cuMemcpyAsync_ptsz cuMemcpyHtoDAsync_v2 cuMemcpyHtoDAsync_v2_ptsz cuMemcpyDtoHAsync_v2
cuMemcpyDtoHAsync_v2_ptsz cuMemsetD8_v2 cuMemsetD8_v2_ptds cuMemsetD8Async cuMemsetD8Async_ptsz
cuStreamCreate cuStreamCreateWithPriority cuStreamDestroy_v2 cuStreamSynchronize
cuStreamSynchronize_ptsz cuStreamQuery cuStreamQuery_ptsz cuStreamWaitEvent cuStreamWaitEvent_ptsz
cuStreamGetCtx cuStreamIsCapturing cuStreamIsCapturing_ptsz cuLaunchHostFunc cuLaunchHostFunc_ptsz
cuEventCreate cuEventRecord cuEventRecord_ptsz cuEventQuery cuEventSynchronize cuEventDestroy_v2
cuEventElapsedTime cuGetErrorName cuGetErrorString cuGetExportTable cuGetProcAddress
cuGetProcAddress_v2""".split()


def dynamic_symbols(path):
    out = subprocess.run(["nm", "-D", "--defined-only", path], check=True,
                         capture_output=True, text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


class Exports(unittest.TestCase):
    def test_soname_and_needed(self):
        out = subprocess.run(["readelf", "-d", LIB], check=True, capture_output=True,
                             text=True).stdout
        self.assertIn("Library soname: [libcuda.so.1]", out)
        needed = {l.split("[")[1].rstrip("]") for l in out.splitlines() if "(NEEDED)" in l}
        # Sanitizer builds add their runtimes.
        needed = {n for n in needed if not n.startswith(("libasan.so", "libubsan.so"))}
        allowed = {"libc.so.6", "ld-linux-x86-64.so.2", "libpthread.so.0", "libdl.so.2",
                   "librt.so.1"}
        self.assertTrue(needed <= allowed, needed - allowed)

    def test_only_cu_names(self):
        syms = dynamic_symbols(LIB)
        self.assertEqual(sorted(s for s in syms if not s.startswith("cu")), [])
        self.assertEqual(sorted(set(REQUIRED) - syms), [])

    @unittest.skipUnless(os.path.exists(STUB), "toolkit stub libcuda.so not installed")
    def test_names_match_real_driver(self):
        self.assertEqual(sorted(dynamic_symbols(LIB) - dynamic_symbols(STUB)), [])


if __name__ == "__main__":
    unittest.main()
