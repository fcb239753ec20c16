#!/usr/bin/env python3
"""Interposition tests for libcuprof.so (suite 'integration').

Each case runs an unmodified program with and without LD_PRELOAD=libcuprof.so and compares what
the program printed and how it ended; driver lookups are counted by cuprof (CUPROF_LOG=debug) and
independently by a spy library preloaded instead of cuprof.

Usage: test_interpose.py CASE --lib LIBCUPROF --spy SPY --ld-path PATH [--rtld-next LIB] PROGRAM...
"""
import argparse
import collections
import os
import re
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from shimrun import Checks, dumps, light, load_checker, run_shim  # noqa: E402 (tests/integration/)

DEBUG_RE = re.compile(r"cuprof: debug: driver lookups: cuGetProcAddress=(\d+) hooked=(\d+) "
                      r"dlsym_hooked=(\d+)")


def strip_cuprof(stderr):
    """The program's own stderr: cuprof's and the sanitizers' lines removed."""
    return "\n".join(l for l in stderr.splitlines()
                     if not l.startswith(("cuprof:", "spy:", "rtld_next_lib:", "layer:")))


def same_ending(f, name, base, shim):
    f.check(base[0] == shim[0], f"{name}: exit status {shim[0]} under cuprof, {base[0]} without")
    f.check(base[1] == shim[1],
            f"{name}: stdout differs:\n  without: {base[1]!r}\n  with:    {shim[1]!r}")
    f.check(strip_cuprof(base[2]) == strip_cuprof(shim[2]),
            f"{name}: stderr differs:\n  without: {base[2]!r}\n  with:    {shim[2]!r}")


def cuprof_counts(f, name, stderr):
    m = DEBUG_RE.search(stderr)
    f.check(m is not None, f"{name}: no 'driver lookups' debug line in {stderr!r}")
    return tuple(int(x) for x in m.groups()) if m else (0, 0, 0)


def spy_count(f, name, stderr):
    m = re.search(r"spy: lookups=(\d+)", stderr)
    f.check(m is not None, f"{name}: spy printed no count in {stderr!r}")
    return int(m.group(1)) if m else -1


def case_lookups(a, f, mode_env):
    """Every driver lookup the program makes reaches cuprof's cuGetProcAddress."""
    for prog in a.programs:
        name = os.path.basename(prog)
        base = run_shim(light(prog), a.ld_path)
        spy = run_shim(light(prog), a.ld_path, preload=a.spy)
        shim = run_shim(light(prog), a.ld_path, preload=a.lib,
                        extra_env={"CUPROF_LOG": "debug", **mode_env})
        same_ending(f, name, base, shim)
        same_ending(f, name + " (spy)", base, spy)
        n_spy = spy_count(f, name, spy[2])
        lookups, hooked, dlsym_hooked = cuprof_counts(f, name, shim[2])
        f.check(n_spy > 0, f"{name}: the spy saw no lookup (program never reached the driver?)")
        f.check(lookups == n_spy, f"{name}: cuprof saw {lookups} lookups, the spy {n_spy}")
        f.check(dlsym_hooked >= 1, f"{name}: cuGetProcAddress_v2 was not handed out by dlsym")
        f.check(hooked >= 3, f"{name}: only {hooked} wrappers handed out")


def case_same(a, f, mode_env):
    """The program prints and ends exactly as without the shim."""
    for prog in a.programs:
        name = os.path.basename(prog)
        same_ending(f, name, run_shim(light(prog), a.ld_path),
                    run_shim(light(prog), a.ld_path, preload=a.lib, extra_env=mode_env))


def probe_fields(out):
    m = re.search(r"gpa_probe: (.*)", out)
    return dict(kv.split("=", 1) for kv in m.group(1).split()) if m else {}


def case_probe(a, f, mode_env):
    prog = a.programs[0]
    base = run_shim(light(prog), a.ld_path)
    shim = run_shim(light(prog), a.ld_path, preload=a.lib, extra_env=mode_env)
    f.check(base[0] == 0 and shim[0] == 0, f"gpa_probe failed: {base} / {shim}")
    b, s = probe_fields(base[1]), probe_fields(shim[1])
    f.check(b and s, f"no gpa_probe line: {base[1]!r} / {shim[1]!r}")
    if not (b and s):
        return
    expect_shim = {
        "self11": "0C", "self12": "0C", "status": "0",  # cuGetProcAddress asking for itself
        "init": "-",  # not an allocation call: the driver's own pointer
        "alloc": "C", "free_v1abi": "C",  # swapped, also through the 4-argument ABI
        "alloc2000": b["alloc2000"],  # the 32-bit ABI is never wrapped: the driver's answer
        "dev2000": "-", "dev13000": "-", "dev_same": "0",  # both cuCtxGetDevice ABIs untouched
        "async0": "C", "async2": "C", "async_same": "0",  # flags&2 gets the _ptsz wrapper
        "unknown": b["unknown"],  # not-found passes through with the driver's status
        "name_v2": "C", "name_ptsz": "C", "name_other": "-",
        "name_plain": b["name_plain"],  # unsuffixed 32-bit export: never ours ("0": not exported)
        "global": "0",  # RTLD_DEFAULT does not see a driver loaded RTLD_LOCAL, with or without us
        "alloc_rc": "0", "free_rc": "0", "free_again_rc": b["free_again_rc"],
    }
    for key, want in expect_shim.items():
        f.check(s.get(key) == want, f"gpa_probe under cuprof: {key}={s.get(key)}, want {want}")
    f.check(b["self12"] == "0-" and b["alloc"] == "-" and b["global"] == "0",
            f"gpa_probe without cuprof already sees cuprof? {b}")
    f.check(s["free_again_rc"] != "0", "a second free of the same pointer succeeded")


def case_rtld_next(a, f, mode_env):
    """A second preloaded library's dlsym(RTLD_NEXT) still finds what follows IT."""
    getpid_app, driver_app = a.programs[:2]
    for order in ("cuprof_first", "other_first"):
        libs = [a.lib, a.rtld_next] if order == "cuprof_first" else [a.rtld_next, a.lib]
        preload = ":".join(libs)
        r = run_shim([getpid_app], a.ld_path, preload=preload, extra_env=mode_env)
        f.check(r[0] == 0 and "match=1" in r[1], f"{order}: getpid_app ended {r}")
        f.check("rtld_next_lib: getpid=1 " in r[2], f"{order}: getpid wrapper count {r[2]!r}")
        base = run_shim([driver_app], a.ld_path)
        shim = run_shim([driver_app], a.ld_path, preload=preload, extra_env=mode_env)
        same_ending(f, f"driver_api ({order})", base, shim)
        allocs = re.search(r"allocs=(\d+)", base[1])
        m = re.search(r"rtld_next_lib: getpid=\d+ cuMemAlloc_v2=(\d+)", shim[2])
        f.check(allocs is not None and m is not None, f"{order}: counts missing: {shim}")
        if allocs and m:
            # Interposition order decides who sees the program's calls first; cuprof forwards
            # straight to the driver, the other library forwards to its RTLD_NEXT (cuprof).
            want = int(allocs.group(1)) if order == "other_first" else 0
            f.check(int(m.group(1)) == want,
                    f"{order}: the other library saw {m.group(1)} cuMemAlloc_v2 calls, want {want}")


def case_memprobe(a, f, mode_env):
    """Errors, ranges and pitches the program sees are the driver's; managed, pool and VMM memory
    is recorded with its pool tag; a double free is one log line with the stacks."""
    checker = load_checker(a.checker)
    prog = a.programs[0]
    base = run_shim(light(prog), a.ld_path)
    f.check(base[0] == 0 and "mem_probe: range_ok=1 attr_ok=1 attrs_ok=1" in base[1],
            f"mem_probe without cuprof: {base}")
    for mode in ("cache", "trace"):
        with tempfile.TemporaryDirectory() as tmp:
            env = {"CUPROF_MODE": mode, "CUPROF_SNAPSHOT": os.path.join(tmp, "s-%n.pickle")}
            shim = run_shim(light(prog), a.ld_path, preload=a.lib, extra_env=env)
            same_ending(f, f"mem_probe/{mode}", base, shim)
            lines = [l for l in shim[2].splitlines() if "double free" in l]
            f.check(len(lines) == 1, f"{mode}: want one double-free line, got {lines}")
            f.check(all(k in lines[0] for k in ("freed at ", "; allocated at ", "; first freed at "))
                    if lines else False, f"{mode}: double-free line lacks stacks: {lines}")
            files = dumps(tmp)
            f.check(len(files) == 1, f"{mode}: snapshots {files}")
            if not files:
                continue
            snap = checker.load(files[0])
            problems = checker.check(snap, complete_history=True)
            f.check(not problems, f"{mode}: check_snapshot: {problems[:5]}")
            seg = collections.Counter((e["action"], e.get("cuprof_pool"))
                                      for e in snap["device_traces"][0])
            for pool, n in (("managed", 1), ("vmm", 1), ("async", 2 if mode == "trace" else 1)):
                f.check(seg[("segment_alloc", pool)] == n and seg[("segment_free", pool)] == n,
                        f"{mode}: {pool} segments {seg[('segment_alloc', pool)]}/"
                        f"{seg[('segment_free', pool)]}, want {n}/{n}")
            vmm = [e for e in snap["device_traces"][0]
                   if e["action"] == "segment_alloc" and e.get("cuprof_pool") == "vmm"]
            f.check(vmm and vmm[0]["size"] >= 2 * 1024 * 1024, f"{mode}: vmm mapping size {vmm}")
            live = [b for s in snap["segments"] for b in s["blocks"]
                    if b["state"] == "active_allocated"]
            f.check([b["requested_size"] for b in live] == [12345],
                    f"{mode}: live blocks at exit {live}")


def case_selfish(a, f, mode_env):
    """A driver that hands out cuprof's own export as an entry point and has no definition of
    its own: no recursion, the program gets the answer of a driver without that entry point, and
    cuprof says so in one line."""
    for mode in ("cache", "trace", "off"):
        for prog in a.programs:
            name = f"{os.path.basename(prog)}/{mode}"
            base = run_shim(light(prog), a.ld_path)
            shim = run_shim(light(prog), a.ld_path, preload=a.lib,
                            extra_env={**mode_env, "CUPROF_MODE": mode})
            f.check("meminfo=0" not in base[1], f"{name}: the driver has cuMemGetInfo: {base}")
            same_ending(f, name, base, shim)
            lines = [l for l in shim[2].splitlines() if "hands out cuprof's own cuMemGetInfo_v2" in l]
            f.check(len(lines) == 1, f"{name}: want one line naming cuMemGetInfo_v2: {shim[2]!r}")


def case_quota(a, f, mode_env):
    """A layer that enforces a memory quota still enforces it on cuprof's device allocations, in
    either preload order: the program gets what it gets under the layer alone, and cuprof records
    the out-of-memory the layer answered."""
    quota = 1 << 30
    for prog in a.programs:
        alone = run_shim(light(prog), a.ld_path, preload=a.layer,
                         extra_env={"LAYER_QUOTA": quota})
        for order in ("before", "after"):
            name = f"{os.path.basename(prog)} (layer {order})"
            preload = f"{a.layer}:{a.lib}" if order == "before" else f"{a.lib}:{a.layer}"
            with tempfile.TemporaryDirectory() as tmp:
                shim = run_shim(light(prog), a.ld_path, preload=preload,
                                extra_env={"LAYER_QUOTA": quota,
                                           "CUPROF_SNAPSHOT": os.path.join(tmp, "s-%n.pickle")})
                same_ending(f, name, alone, shim)
                peak = re.search(r"layer: allocs=\d+ frees=\d+ peak=(\d+)", shim[2])
                f.check(peak and 0 < int(peak.group(1)) <= quota,
                        f"{name}: the layer's peak {peak and peak.group(1)} is not within its quota")
                files = dumps(tmp)
                f.check(files, f"{name}: no snapshot")
                if files:
                    snap = load_checker().load(files[0])
                    ooms = [e for t in snap["device_traces"] for e in t if e["action"] == "oom"]
                    f.check(ooms, f"{name}: the layer's out-of-memory is not in the snapshot")


def case_layer_lookups(a, f, mode_env):
    """With a layer before or after cuprof, every driver lookup the program's runtime makes still
    reaches cuprof's cuGetProcAddress, and the same entries are swapped (NVIDIA's runtime too)."""
    for prog in a.programs:
        name = os.path.basename(prog)
        env = {"CUPROF_LOG": "debug", **mode_env}
        alone = run_shim(light(prog), a.ld_path, preload=a.lib, extra_env=env)
        want = cuprof_counts(f, name, alone[2])
        f.check(want[0] > 0 and want[1] >= 3, f"{name}: cuprof alone saw {want}")
        for order in ("before", "after"):
            preload = f"{a.layer}:{a.lib}" if order == "before" else f"{a.lib}:{a.layer}"
            got = run_shim(light(prog), a.ld_path, preload=preload, extra_env=env)
            same_ending(f, f"{name} (layer {order})", alone, got)
            counts = cuprof_counts(f, name, got[2])
            f.check(counts[:2] == want[:2], f"{name} (layer {order}): cuprof saw {counts[:2]} "
                    f"lookups/swaps, {want[:2]} without the layer")


PY_PROGRAM = """
import ctypes
rt = ctypes.CDLL("libcudart.so.13")
ptrs = []
for i in range(6):
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t((i + 1) << 20)) == 0
    ptrs.append(p)
for p in ptrs[:4]:
    assert rt.cudaFree(p) == 0
print("py: allocs=6 frees=4")
"""


def case_python_layer(a, f, mode_env):
    """Python's own interpreter loading the runtime with ctypes after start-up, with the layer
    before and after cuprof: every allocation recorded once, and the layer saw exactly the
    device allocations in the snapshot."""
    cmd = [sys.executable, "-c", PY_PROGRAM]
    base = run_shim(cmd, a.ld_path)
    f.check(base[0] == 0 and "py: allocs=6" in base[1], f"python alone: {base}")
    for order in ("before", "after"):
        name = f"python (layer {order})"
        preload = f"{a.layer}:{a.lib}" if order == "before" else f"{a.lib}:{a.layer}"
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "layer.log")
            shim = run_shim(cmd, a.ld_path, preload=preload,
                            extra_env={"LAYER_LOG": log,
                                       "CUPROF_SNAPSHOT": os.path.join(tmp, "s-%n.pickle")})
            same_ending(f, name, base, shim)
            files = dumps(tmp, "s-*")
            f.check(len(files) == 1, f"{name}: snapshots {files}; stderr {shim[2]!r}")
            if not files:
                continue
            snap = load_checker().load(files[0])
            trace = [e for t in snap["device_traces"] for e in t]
            acts = collections.Counter(e["action"] for e in trace)
            f.check(acts["alloc"] == 6 and acts["free_requested"] == 4,
                    f"{name}: recorded {dict(acts)}")
            segs = sorted((e["addr"], e["size"]) for e in trace if e["action"] == "segment_alloc")
            seen = sorted((int(w[1]), int(w[2])) for w in map(str.split, open(log))
                          if w[0] == "alloc") if os.path.exists(log) else []
            f.check(segs and segs == seen, f"{name}: segments {segs}, the layer saw {seen}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--lib", required=True)
    ap.add_argument("--spy")
    ap.add_argument("--rtld-next")
    ap.add_argument("--layer")
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--mode", default="")
    ap.add_argument("--checker")
    ap.add_argument("programs", nargs="*")
    a = ap.parse_intermixed_args()
    if any(p == "" or not os.path.exists(p) for p in a.programs):
        print("skip: program not built (no nvcc?)")
        sys.exit(77)
    f = Checks()
    # The snapshots of the runs no case reads go to a folder of this test's, not the build
    # folder the test runs in.
    with tempfile.TemporaryDirectory() as tmp:
        mode_env = {"CUPROF_SNAPSHOT": os.path.join(tmp, "cuprof-%p-%n.pickle")}
        if a.mode:
            mode_env["CUPROF_MODE"] = a.mode
        {"lookups": case_lookups, "same": case_same, "probe": case_probe,
         "rtld_next": case_rtld_next, "memprobe": case_memprobe,
         "selfish": case_selfish, "quota": case_quota, "python_layer": case_python_layer,
         "layer_lookups": case_layer_lookups}[a.case](a, f, mode_env)
    f.finish()


if __name__ == "__main__":
    main()
