#!/usr/bin/env python3
"""Runs nodriver_check with no libcuda.so.1 reachable (expects cudaErrorInsufficientDriver, 35)
and with the toolkit's stub libcuda (expects cudaErrorStubLibrary, 34, reached through the
runtime's dlsym fallback). cudaDriverGetVersion reports 0 with success in both cases.

usage: check_nodriver.py EXE RUNTIME_LIB STUB_LIBCUDA
"""
import os
import re
import subprocess
import sys
import tempfile

exe, runtime_lib, stub = sys.argv[1:4]
rtdir = os.path.dirname(os.path.realpath(runtime_lib))


def run(ld_path):
    env = dict(os.environ, LD_LIBRARY_PATH=ld_path)
    p = subprocess.run([exe], capture_output=True, text=True, env=env, timeout=60)
    if p.returncode != 0:
        sys.exit(f"exit {p.returncode}: {p.stdout} {p.stderr}")
    print(p.stdout.strip())
    return {k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)", p.stdout)}


def expect(got, want):
    if {k: got.get(k) for k in want} != want:
        sys.exit(f"got {got}, want {want}")


have_system_driver = "libcuda.so.1" in subprocess.run(
    ["/sbin/ldconfig", "-p"], capture_output=True, text=True).stdout
with tempfile.TemporaryDirectory() as empty:
    if not have_system_driver:
        expect(run(rtdir + ":" + empty),
               {"malloc": 35, "last": 35, "cleared": 0, "count": 35, "n": 0, "driver": 0,
                "version": 0})
if os.path.exists(stub):
    with tempfile.TemporaryDirectory() as d:
        os.symlink(stub, os.path.join(d, "libcuda.so.1"))
        expect(run(rtdir + ":" + d),
               {"malloc": 34, "last": 34, "cleared": 0, "count": 34, "n": 0, "driver": 0,
                "version": 0})
elif have_system_driver:
    sys.exit(77)  # nothing to check here: skip
