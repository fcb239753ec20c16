#!/usr/bin/env python3
"""Programs built by nvcc -cudart shared (tests/apps/nvcc_*.cu) on the simulated runtime.

  sim     without cuprof: exit 0 and exactly the output this script derives itself (a *_ptsz
          build, nvcc --default-stream per-thread, must import the _ptsz entry points);
  modes   under LD_PRELOAD=libcuprof.so in cache, trace and off modes: the same stdout and exit
          status as without it; in cache and trace modes the exit snapshot (read back with
          pickle, checked by tests/golden/check_snapshot.py) has exactly the allocations the
          program reports ("alloc NAME SIZE" lines, in order), each with a stack reaching the
          .cu file at the line of its "// alloc:NAME" comment, found in the source text;
  run     the same through `cuprof run --sim` (no LD_LIBRARY_PATH or LD_PRELOAD of our own).

Exit 77 (skipped) when PROGRAM is empty: the build found no nvcc.
Usage: test_nvcc_apps.py --lib LIB --ld-path PATH --checker CHECK_SNAPSHOT_PY --source SRC
                         [--cuprof CUPROF] sim|modes|run PROGRAM
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/)


def expected_kernels():
    return ("alloc dev 16384\n"
            "symbol=7 size=4\n"
            "managed_var=42\n"
            "launch=cudaSuccess\n"
            "sync=cudaSuccess\n"
            # NVIDIA's runtime 13.0 with driver 580 (H200) printed these, not the documented
            # cudaErrorInvalidConfiguration and cudaErrorInvalidDeviceFunction
            "empty_grid=cudaErrorInvalidValue\n"
            "big_block=cudaErrorInvalidValue\n"
            "not_a_kernel=cudaErrorInvalidResourceHandle last=cudaErrorInvalidResourceHandle\n"
            "launch_api=cudaSuccess\n"
            "max_threads=1024\n"
            "alloc managed 4000\n"
            f"managed_sum={sum(0.5 * i for i in range(1000)):.1f}\n"
            "copy_back=1\n"
            "alloc kept 3000\n"
            "nvcc_kernels: allocs=3 frees=2 live_bytes=3000\n")


def expected_streams():
    out = []
    for rnd in range(3):
        total = 0
        for s in range(2):
            size = (256 << 10) * (rnd + 1) + 4096 * s
            out.append(f"alloc async {size}")
            total += size * (16 * rnd + s + 1)  # cudaMemsetAsync's byte, copied back
        out.append(f"round={rnd} sum={total}")
    out.append("nvcc_streams: allocs=6 frees=6 live_bytes=0")
    return "\n".join(out) + "\n"


def expected_thrust():
    head = sum(3 * i + 1 for i in range(1000))  # only bytes that went through copies
    return ("alloc ctor 4000\n"
            "alloc resize 20000\n"
            f"size=5000 head_sum={head}\n"
            "fill=cudaSuccess\n"
            "nvcc_thrust: allocs=2 frees=2 live_bytes=0\n")


EXPECTED = {"nvcc_kernels": expected_kernels, "nvcc_streams": expected_streams,
            "nvcc_streams_ptsz": expected_streams, "nvcc_thrust": expected_thrust}


def marker_lines(source):
    """NAME -> line number of the '// alloc:NAME' comment in the .cu source."""
    lines = {}
    with open(source, encoding="utf-8") as f:
        for no, text in enumerate(f, 1):
            m = re.search(r"//\s*alloc:(\w+)", text)
            if m:
                lines[m.group(1)] = no
    return lines


def reported(out):
    """The program's own account: [(name, size)] in order, frees, live bytes."""
    allocs = [(m.group(1), int(m.group(2)))
              for m in re.finditer(r"^alloc (\w+) (\d+)$", out, re.M)]
    tail = dict(re.findall(r"(\w+)=(\d+)", out.strip().splitlines()[-1]))
    return allocs, int(tail["frees"]), int(tail["live_bytes"])


def check_snapshot(check, checker, name, label, path, source, out):
    snap = checker.load(path)
    problems = checker.check(snap, complete_history=True)
    check(not problems, f"{name}/{label}: check_snapshot: {problems[:5]}")
    allocs, frees, live = reported(out)
    lines = marker_lines(source)
    check(set(n for n, _ in allocs) <= set(lines),
          f"{name}: no '// alloc:NAME' comment for {sorted(set(n for n, _ in allocs) - set(lines))}")
    trace = snap["device_traces"][0]
    events = [e for e in trace if e["action"] == "alloc"]
    check([e["size"] for e in events] == [s for _, s in allocs],
          f"{name}/{label}: alloc sizes {[e['size'] for e in events]}, program made "
          f"{[s for _, s in allocs]}")
    cu = os.path.basename(source)
    for (what, size), e in zip(allocs, events):
        where = [(f["filename"], f["line"]) for f in e["frames"]]
        hit = any(os.path.basename(fn) == cu and ln == lines.get(what) for fn, ln in where)
        check(hit, f"{name}/{label}: alloc {what} ({size} B): no frame at {cu}:{lines.get(what)}"
                   f" in {where}")
    c = collections.Counter(e["action"] for e in trace)
    check(c["free_requested"] == frees,
          f"{name}/{label}: {c['free_requested']} free_requested, program made {frees}")
    blocks = [b for s in snap["segments"] for b in s["blocks"]]
    got = sum(b["requested_size"] for b in blocks if b["state"] == "active_allocated")
    check(got == live, f"{name}/{label}: live bytes {got}, program says {live}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--checker", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--cuprof")
    ap.add_argument("what", choices=["sim", "modes", "run"])
    ap.add_argument("program")
    a = ap.parse_args()
    if not a.program:
        print("nvcc not found at configure time: skipped")
        sys.exit(77)
    checker = shimrun.load_checker(a.checker)
    name = os.path.basename(a.program)
    want = EXPECTED[name]()
    check = shimrun.Checks()

    if name.endswith("_ptsz"):  # the per-thread default stream build really uses those exports
        undef = subprocess.run(["nm", "-D", "--undefined-only", a.program], capture_output=True,
                               text=True, check=True).stdout
        for sym in ("__cudaLaunchKernel_ptsz", "cudaMallocAsync_ptsz", "cudaFreeAsync_ptsz"):
            check(f"{sym}@libcudart.so.13" in undef, f"{name}: does not import {sym}")
    base = shimrun.run_shim([a.program], a.ld_path, timeout=300)
    check(base.returncode == 0 and base.stdout == want,
          f"{name}: without cuprof: exit {base.returncode}\n  got:  {base.stdout!r}\n"
          f"  want: {want!r}\n  stderr: {base.stderr!r}")
    if a.what == "modes":
        for mode in ("cache", "trace", "off"):
            with tempfile.TemporaryDirectory() as tmp:
                env = {"CUPROF_MODE": mode, "CUPROF_SNAPSHOT": os.path.join(tmp, "s-%n.pickle")}
                shim = shimrun.run_shim([a.program], a.ld_path, preload=a.lib, extra_env=env,
                                        timeout=300)
                check(shim.returncode == base.returncode,
                      f"{name}/{mode}: exit {shim.returncode}, without cuprof {base.returncode};"
                      f" stderr {shim.stderr!r}")
                check(shim.stdout == base.stdout,
                      f"{name}/{mode}: output differs:\n  without: {base.stdout!r}\n"
                      f"  with: {shim.stdout!r}")
                files = shimrun.dumps(tmp)
                if mode == "off":
                    check(not files, f"{name}/off: off mode wrote {files}")
                    continue
                if check(files, f"{name}/{mode}: no snapshot; stderr {shim.stderr!r}"):
                    check_snapshot(check, checker, name, mode, files[-1], a.source, base.stdout)
    elif a.what == "run":
        with tempfile.TemporaryDirectory() as tmp:
            env = shimrun.env()
            env.pop("LD_LIBRARY_PATH", None)  # cuprof run --sim puts the simulated device there
            snap = os.path.join(tmp, "run.pickle")
            r = shimrun.run([a.cuprof, "run", "--sim", "-q", "-o", snap, "--", a.program], env,
                            timeout=300)
            check(r.returncode == 0 and r.stdout == want,
                  f"{name}/cuprof run: exit {r.returncode}, stdout {r.stdout!r}, "
                  f"stderr {r.stderr!r}")
            if check(os.path.exists(snap), f"{name}/cuprof run: no {snap}; stderr {r.stderr!r}"):
                check_snapshot(check, checker, name, "cuprof run", snap, a.source, base.stdout)
    check.finish()


if __name__ == "__main__":
    main()
