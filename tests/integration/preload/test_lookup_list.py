#!/usr/bin/env python3
"""The driver lookups against NVIDIA's own: cudart-13.0-lookups.txt lists the 440
(name, cudaVersion, flags) triples NVIDIA's runtime 13.0 asks cuGetProcAddress_v2 for
(shared/reference/cuda-interposition.md §10b).

runtime: programs on the simulated runtime, with the recording spy (spy_gpa.c, SPY_GPA_LOG)
  preloaded: every lookup the simulated runtime makes is one of the 440, at the same version and
  flags, through cuGetProcAddress_v2, none twice, and the bootstrap (probe "", cuInit, cuGetProcAddress at
  11030 then 12000) comes first in NVIDIA's order.
swaps: gpa_table_probe asks the driver's own cuGetProcAddress_v2 and the one dlsym hands out for
  each of the 440; with libcuprof.so preloaded the triples whose pointer differs must be exactly
  those preload/entry_points.def's wrapped driver rows claim (read from the source; hooks.c's
  hook_rows are made of them), every claimed one must exist in
  the simulated driver, and they must be the allocation/free/query/context triples of
  cuda-interposition.md §10 B that the list holds, except the differences named in KNOWN below.
  Without cuprof nothing differs.

Usage: test_lookup_list.py runtime --spy SPY --ld-path PATH --list LIST PROGRAM...
       test_lookup_list.py swaps --lib LIBCUPROF --ld-path PATH --list LIST --hooks ENTRY_POINTS_DEF PROBE
"""
import argparse
import os
import re
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from shimrun import Checks, run_shim  # noqa: E402 (tests/integration/)

INT_MAX = 2**31 - 1
PTSZ = 2  # CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM

# cuda-interposition.md §10 B: (base name, first version, version it ends at, flags or None=any).
SECTION_10B = [
    ("cuGetProcAddress", 11030, INT_MAX, None),
    ("cuMemAlloc", 3020, INT_MAX, None), ("cuMemFree", 3020, INT_MAX, None),
    ("cuMemAllocPitch", 3020, INT_MAX, None), ("cuMemGetInfo", 3020, INT_MAX, None),
    ("cuMemGetAddressRange", 3020, INT_MAX, None), ("cuMemAllocManaged", 6000, INT_MAX, None),
    ("cuMemAllocAsync", 11020, INT_MAX, None), ("cuMemFreeAsync", 11020, INT_MAX, None),
    ("cuMemAllocFromPoolAsync", 11020, INT_MAX, None),
    ("cuMemCreate", 10020, INT_MAX, None), ("cuMemRelease", 10020, INT_MAX, None),
    ("cuMemMap", 10020, INT_MAX, None), ("cuMemUnmap", 10020, INT_MAX, None),
    ("cuMemAddressReserve", 10020, INT_MAX, None), ("cuMemAddressFree", 10020, INT_MAX, None),
    ("cuPointerGetAttribute", 4000, INT_MAX, None), ("cuPointerGetAttributes", 7000, INT_MAX, None),
    ("cuIpcGetMemHandle", 4010, INT_MAX, None),
    ("cuDevicePrimaryCtxReset", 7000, INT_MAX, None),
    ("cuDevicePrimaryCtxRelease", 7000, INT_MAX, None),
    ("cuCtxDestroy", 4000, INT_MAX, None),
]

# Where cuprof knowingly differs from §10 B, with why. Tolerated, not required: the test still
# passes once preload/hooks.c follows §10 B here.
KNOWN = {
    ("cuStreamDestroy", 4000, 0):
        "extra: cuprof wraps stream destruction so that free_sync:events forgets the stream "
        "before the driver frees it (preload/shim_ctx.c shim_stream_destroy)",
    ("cuCtxEnablePeerAccess", 4000, 0):
        "extra: cuprof wraps peer enabling so that a device's expandable segments give the "
        "new peer access to their pages, as PyTorch's enablePeerAccess does "
        "(preload/shim_peer.c shim_peer_ctx_enable)",
    ("cuStreamBeginCapture", 10000, 0):
        "extra: cuprof follows CUDA graph captures and each thread's capture mode so that "
        "the cache does not answer a cudaMalloc the driver would refuse during a capture "
        "(preload/shim_capture.c)",
    ("cuStreamBeginCapture", 10000, 2):
        "extra: cuprof follows CUDA graph captures and each thread's capture mode so that "
        "the cache does not answer a cudaMalloc the driver would refuse during a capture "
        "(preload/shim_capture.c)",
    ("cuStreamBeginCapture", 10010, 0):
        "extra: cuprof follows CUDA graph captures and each thread's capture mode so that "
        "the cache does not answer a cudaMalloc the driver would refuse during a capture "
        "(preload/shim_capture.c)",
    ("cuStreamBeginCapture", 10010, 2):
        "extra: cuprof follows CUDA graph captures and each thread's capture mode so that "
        "the cache does not answer a cudaMalloc the driver would refuse during a capture "
        "(preload/shim_capture.c)",
    ("cuStreamBeginCaptureToGraph", 12030, 0):
        "extra: cuprof follows CUDA graph captures and each thread's capture mode so that "
        "the cache does not answer a cudaMalloc the driver would refuse during a capture "
        "(preload/shim_capture.c)",
    ("cuStreamBeginCaptureToGraph", 12030, 2):
        "extra: cuprof follows CUDA graph captures and each thread's capture mode so that "
        "the cache does not answer a cudaMalloc the driver would refuse during a capture "
        "(preload/shim_capture.c)",
    ("cuStreamEndCapture", 10000, 0):
        "extra: cuprof follows CUDA graph captures and each thread's capture mode so that "
        "the cache does not answer a cudaMalloc the driver would refuse during a capture "
        "(preload/shim_capture.c)",
    ("cuStreamEndCapture", 10000, 2):
        "extra: cuprof follows CUDA graph captures and each thread's capture mode so that "
        "the cache does not answer a cudaMalloc the driver would refuse during a capture "
        "(preload/shim_capture.c)",
    ("cuThreadExchangeStreamCaptureMode", 10010, 0):
        "extra: cuprof follows CUDA graph captures and each thread's capture mode so that "
        "the cache does not answer a cudaMalloc the driver would refuse during a capture "
        "(preload/shim_capture.c)",
    ("cuCtxCreate", 3020, 0):
        "extra: a context of the program's own takes device memory; when the driver has none, "
        "cuprof's cache of that device hands back what the program freed and the call is made "
        "again (preload/shim_driver_memory.c shim_driver_memory_ctx_create_v2)",
    ("cuMemPoolTrimTo", 11020, 0):
        "extra: a program that trims the device's default pool gives back what the cache, "
        "standing in for that pool, holds for no block (preload/shim_mem.c "
        "shim_mem_pool_trim_to)",
}
# Calls that take device memory for the driver itself (kernel code, launches, arrays, a larger
# stack, a graph's memory at its first upload or launch): the entry_points.def rows of kind
# DRIVER_RETRY, read from there (hook_rows), known extras all. After the driver refuses one for
# lack of memory, cuprof's cache hands back what the program freed and the call is made again.
RETRY_WHY = ("extra: the driver takes device memory for itself here; when it has none, cuprof's "
             "cache hands back what the program freed and the call is made again "
             "(preload/shim_driver_memory.c)")


def read_list(path):
    """The triples of a lookup list, in order."""
    triples = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            if line.startswith("(empty name) "):
                name, rest = "", line[len("(empty name) "):].split()
            else:
                name, *rest = line.split()
            triples.append((name, int(rest[0]), int(rest[1])))
    return triples


def matches(rows, name, version, flags):
    for rname, lo, hi, rflags in rows:
        if rname == name and lo <= version < hi and (rflags is None or rflags == flags & PTSZ):
            return True
    return False


def hook_rows(path, kinds="LOOKUP|WRAPPER|RETRY"):
    """The lookups preload/entry_points.def says cuprof wraps (its DRIVER_LOOKUP, DRIVER_WRAPPER
    and DRIVER_RETRY rows, which preload/hooks.c's hook_rows are made of; `kinds` picks some), as
    (name, min, max, flags or None)."""
    src = re.sub(r"/\*.*?\*/", "", open(path).read(), flags=re.S)
    rows = []
    for m in re.finditer(r'^DRIVER_(?:%s)\(\s*\w+,\s*\w+,\s*"(\w+)",\s*(\d+),\s*' % kinds +
                         r'(INT_MAX|\d+),\s*ENTRY_(PTSZ_ANY|PTSZ_NO|PTSZ_YES),', src, re.M):
        hi = INT_MAX if m.group(3) == "INT_MAX" else int(m.group(3))
        flags = {"PTSZ_ANY": None, "PTSZ_NO": 0, "PTSZ_YES": PTSZ}[m.group(4)]
        rows.append((m.group(1), int(m.group(2)), hi, flags))
    return rows


def show(triples):
    return sorted(f"{n or '(empty name)'}@{v}/{f}" for n, v, f in triples)


def case_runtime(a, check):
    ref = read_list(a.list)
    allowed = set(ref)
    for prog in a.programs:
        name = os.path.basename(prog)
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "lookups.txt")
            r = run_shim([prog], a.ld_path, preload=a.spy, extra_env={"SPY_GPA_LOG": log})
            check(r.returncode == 0, f"{name}: exit {r.returncode} under the spy: {r.stderr}")
            lines = open(log).read().splitlines() if os.path.exists(log) else []
        seen = []
        for line in lines:
            m = re.fullmatch(r"(.+) (-?\d+) (\d+) ([12])", line)
            check(m is not None, f"{name}: bad spy line {line!r}")
            if not m:
                continue
            n = "" if m.group(1) == "(empty name)" else m.group(1)
            t = (n, int(m.group(2)), int(m.group(3)))
            check(m.group(4) == "2", f"{name}: {show([t])} asked through the 4-argument "
                                     "cuGetProcAddress; NVIDIA's runtime uses only _v2")
            seen.append(t)
        check(len(seen) > 50, f"{name}: only {len(seen)} lookups recorded")
        check(seen[:4] == ref[:4], f"{name}: bootstrap {show(seen[:4])}, NVIDIA's {show(ref[:4])}")
        twice = sorted({t for t in seen if seen.count(t) > 1})
        check(not twice, f"{name}: asked more than once (NVIDIA's runtime asks each triple once): "
                         f"{show(twice)}")
        wrong = [t for t in seen if t not in allowed]
        for n, v, f in wrong:
            theirs = [(rv, rf) for rn, rv, rf in ref if rn == n]
            check(False, f"{name}: {n or '(empty name)'} at version {v} flags {f}: NVIDIA's "
                         f"runtime asks {theirs or 'never'}")
        print(f"{name}: {len(seen)} lookups, {len(set(seen))} distinct, all among NVIDIA's "
              f"{len(ref)}" if not wrong else f"{name}: {len(wrong)} lookups not NVIDIA's")


def run_probe(a, preload):
    r = run_shim([a.programs[0], a.list], a.ld_path, preload=preload)
    rows = {}
    for line in r.stdout.splitlines():
        parts = line.rsplit(" ", 5)
        n = "" if parts[0] == "(empty name)" else parts[0]
        rows[(n, int(parts[1]), int(parts[2]))] = tuple(int(x) for x in parts[3:])
    return r, rows


def case_swaps(a, check):
    ref = read_list(a.list)
    base, plain = run_probe(a, None)
    check(base.returncode == 0 and len(plain) == len(ref), f"probe without cuprof: {base}")
    check(not [t for t, v in plain.items() if v[2]],
          f"without cuprof some pointers differ: {show(t for t, v in plain.items() if v[2])}")
    r, shim = run_probe(a, a.lib)
    check(r.returncode == 0 and len(shim) == len(ref), f"probe under cuprof: {r}")
    for t in ref:
        if t in plain and t in shim:
            check(plain[t][0] == shim[t][1],
                  f"{show([t])}: the driver answers {plain[t][0]}, cuprof {shim[t][1]}")
    swapped = {t for t, v in shim.items() if v[2]}
    claims = hook_rows(a.hooks)
    check(len(claims) >= 20, f"read only {len(claims)} rows of hook_rows from {a.hooks}")
    claimed = {t for t in ref if matches(claims, *t)}
    absent = {t for t in claimed if plain.get(t, (1,))[0] != 0}
    check(not absent, f"claimed by hook_rows but not in the simulated driver: {show(absent)}")
    check(swapped == claimed, f"swapped but not claimed by hook_rows: {show(swapped - claimed)}; "
                              f"claimed but not swapped: {show(claimed - swapped)}")
    doc = {t for t in ref if matches(SECTION_10B, *t)}
    retry = hook_rows(a.hooks, "RETRY")
    check(len(retry) >= 20, f"read only {len(retry)} DRIVER_RETRY rows from {a.hooks}")
    known = {**KNOWN, **{t: RETRY_WHY for t in ref if matches(retry, *t)}}
    for t in sorted((swapped ^ doc) & set(known)):
        print(f"known difference from §10 B: {show([t])[0]}: {known[t]}")
    extra, missing = swapped - doc - set(known), doc - swapped - set(known)
    check(not extra and not missing, f"not in §10 B but swapped: {show(extra)}; in §10 B but not "
                                     f"swapped: {show(missing)}")
    print(f"{len(swapped)} of {len(ref)} lookups swapped: {' '.join(show(swapped))}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=("runtime", "swaps"))
    for opt in ("--spy", "--lib", "--hooks"):
        ap.add_argument(opt)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--list", required=True)
    ap.add_argument("programs", nargs="+")
    a = ap.parse_args()
    a.programs = [os.path.abspath(p) for p in a.programs]
    check = Checks()
    (case_runtime if a.case == "runtime" else case_swaps)(a, check)
    check.finish()


if __name__ == "__main__":
    main()
