#!/usr/bin/env python3
"""`cuprof run --sim` of a program that carries NVIDIA's CUDA runtime (nvcc's default static
cudart, tests/integration/preload/static_cudart.cu): one line, before the program's own output,
says that it needs a real driver and how to rebuild it; the simulated driver (still refusing the
private tables) says the same once, prefixed `cuprof: sim:`, when the program runs without
cuprof; and `cuprof run` saying it first keeps the driver quiet, so the line appears exactly
once. The same program stripped and found through PATH is recognised too. A `nvcc -cudart shared`
build, a gcc-built program and scripts (even one holding the runtime's marker strings) get no
such line. Skipped (77) only when nvcc is absent.

Usage: test_static_runtime.py CUPROF SIM_LD_PATH STATIC_PROG NVCC GCC_APP SOURCE_CU WORKDIR
       (STATIC_PROG and NVCC empty when the toolkit has no nvcc)
"""
import os
import re
import shutil
import stat
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from shimrun import Checks, dumps, env  # noqa: E402 (tests/integration/)

# The text after "PROG " (cli/static_cudart.h; tests/sim/driver/sim_procaddr.c).
BODY = ("carries NVIDIA's CUDA runtime (linked statically, nvcc's default), which needs a real "
        "CUDA driver: on the simulated device every CUDA call fails (\"operation not "
        "supported\"); rebuild it with `nvcc -cudart shared ...` to run it on the simulated "
        "runtime")
ANY_NOTE = re.compile(r"NVIDIA's CUDA runtime")


def merged(cmd, environment, cwd):
    """Runs cmd with stdout and stderr in one pipe, in the order they were written."""
    p = subprocess.run(cmd, env=environment, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    return p.returncode, p.stdout.splitlines()


def executable(path, data):
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def main():
    cuprof, ld_path, static_prog, nvcc, gcc_app, source, work = sys.argv[1:8]
    if not static_prog or not nvcc:
        print("no nvcc in the CUDA toolkit: skipped")
        sys.exit(77)
    cuprof, static_prog, gcc_app = (os.path.abspath(a) for a in (cuprof, static_prog, gcc_app))
    check = Checks()
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    snap = os.path.join(work, "snap-%p.pickle")
    run_env = env(ld_path)  # sanitizer runtimes first in LD_PRELOAD under the asan setup

    # 1. cuprof run --sim: the command's line, once, before the program prints; the driver quiet.
    rc, lines = merged([cuprof, "run", "--sim", "-q", "-o", snap, "--", static_prog],
                       run_env, work)
    notes = [l for l in lines if ANY_NOTE.search(l)]
    check(notes == [f"cuprof: {static_prog} {BODY}"], f"static: note lines {notes}, all: {lines}")
    out = [i for i, l in enumerate(lines) if l.startswith("static_cudart: ")]
    check(out == [i for i, l in enumerate(lines) if "cudaErrorNotSupported" in l] and len(out) == 1,
          f"static: the program's line is missing or not 'not supported': {lines}")
    if notes and out:
        check(lines.index(notes[0]) < out[0], f"static: the note comes after the output: {lines}")
    check(rc == 3, f"static: exit status {rc}, want the program's 3")

    # 2. Without cuprof the simulated driver says it once when asked for a private table.
    rc, lines = merged([static_prog], run_env, work)
    notes = [l for l in lines if ANY_NOTE.search(l)]
    check(notes == [f"cuprof: sim: {static_prog} {BODY}"],
          f"static without cuprof: note lines {notes}, all: {lines}")
    check(rc == 3 and any("cudaErrorNotSupported" in l for l in lines),
          f"static without cuprof: the driver no longer refuses? rc {rc} {lines}")

    # 3. Stripped, and named through PATH as exec finds it.
    bindir = os.path.join(work, "bin")
    os.makedirs(bindir)
    stripped = os.path.join(bindir, "stripped_app")
    subprocess.run(["strip", "-o", stripped, static_prog], check=True)
    syms = subprocess.run(["nm", stripped], capture_output=True, text=True)
    check("no symbols" in syms.stderr, f"strip left symbols: {syms.stderr!r}")
    path_env = dict(run_env, PATH=bindir + os.pathsep + run_env.get("PATH", "/usr/bin:/bin"))
    rc, lines = merged([cuprof, "run", "--sim", "-q", "-o", snap, "--", "stripped_app"],
                       path_env, work)
    notes = [l for l in lines if ANY_NOTE.search(l)]
    check(notes == [f"cuprof: stripped_app {BODY}"], f"stripped: note lines {notes}: {lines}")

    # 4. Not flagged: nvcc -cudart shared (the simulated runtime serves it), a gcc-built program.
    shared = os.path.join(work, "shared_app")
    p = subprocess.run([nvcc, "-cudart", "shared", "-o", shared, source], capture_output=True,
                       text=True, timeout=300)
    check(p.returncode == 0, f"nvcc -cudart shared failed: {p.stderr}")
    if p.returncode == 0:
        _, lines = merged([cuprof, "run", "--sim", "-q", "-o", snap, "--", shared], run_env, work)
        check(not any(ANY_NOTE.search(l) for l in lines), f"shared build flagged: {lines}")
    before = set(dumps(work, "snap-*"))
    rc, lines = merged([cuprof, "run", "--sim", "-q", "-o", snap, "--", gcc_app], run_env, work)
    check(rc == 0, f"gcc app: exit {rc}: {lines}")
    check(not any(ANY_NOTE.search(l) for l in lines), f"gcc app flagged: {lines}")
    check(set(dumps(work, "snap-*")) - before, f"gcc app: no snapshot written: {lines}")

    # 5. Scripts are not flagged, even one that holds the runtime's strings after its end.
    script = os.path.join(bindir, "script_app")
    executable(script, b"#!/bin/sh\necho script ran\nexit 0\n"
               b"\0libcuda.so.1\0cuGetExportTable\0cuGetProcAddress_v2\0")
    rc, lines = merged([cuprof, "run", "--sim", "-q", "-o", snap, "--", script], run_env, work)
    check(rc == 0 and "script ran" in lines, f"script: exit {rc}: {lines}")
    check(not any(ANY_NOTE.search(l) for l in lines), f"script flagged: {lines}")
    check.finish()


if __name__ == "__main__":
    main()
