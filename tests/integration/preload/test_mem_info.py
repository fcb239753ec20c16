#!/usr/bin/env python3
"""Programs size their work by the free memory cudaMemGetInfo reports (mem_info_app.c on a 1 GiB
simulated device: half the device allocated and freed with a small block, the same through the
default pool, then all the free memory but 64 MiB in one request). Without cuprof freed memory
is the driver's again; under cuprof's cache it stays in cuprof's segments, so cuMemGetInfo adds
what the cache would hand back when the driver runs short, and the program must print exactly
what it prints alone, in cache mode, with expandable segments, in trace and in off mode. The
cache-mode history shows how the last request was served: the cache handed its free segments
back (segment_free) and the driver made the segment.

Usage: test_mem_info.py --lib LIB --ld-path PATH APP
"""
import os
import pickle
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/)

MiB = 1 << 20
SIM = {"SIMCUDA_MEM": "1G"}
WANT = ("malloc=cudaSuccess\nmalloc_small=cudaSuccess\nfree=cudaSuccess\nfree_small=cudaSuccess\n"
        "after_free: free_delta_mib=0\n"
        "malloc_async=cudaSuccess\nfree_async=cudaSuccess\nsync=cudaSuccess\n"
        "after_async: free_delta_mib=0\n"
        "malloc_most=cudaSuccess\nfree_most=cudaSuccess\n"
        "after_most: free_delta_mib=0\n")


def check_cache_history(check, path):
    """Half the device (a 512 MiB segment) and the small segment; the default pool's half served
    from the cached 512 MiB; the last request (960 MiB: the simulated 1 GiB less 64 MiB) finds no
    cached block big enough and the driver refuses it while cuprof holds both segments, so both
    go back and the driver makes the new one."""
    with open(path, "rb") as f:
        trace = pickle.load(f)["device_traces"][0]
    segments = [(e["action"], e["size"]) for e in trace
                if e["action"] in ("segment_alloc", "segment_free")]
    check(segments == [("segment_alloc", 512 * MiB), ("segment_alloc", 2 * MiB),
                       ("segment_free", 512 * MiB), ("segment_free", 2 * MiB),
                       ("segment_alloc", 960 * MiB)], f"cache: segments {segments}")
    served = [(e["action"], e["size"]) for e in trace if e["action"] == "alloc"]
    check(served == [("alloc", 512 * MiB), ("alloc", 1000), ("alloc", 512 * MiB),
                     ("alloc", 960 * MiB)], f"cache: allocations {served}")


def main():
    a = shimrun.app_arguments()
    check = shimrun.Checks()
    plain = shimrun.run_shim([a.app], a.ld_path, extra_env=SIM, timeout=60)
    check(plain.returncode == 0 and plain.stdout == WANT,
          f"without cuprof: exit {plain.returncode}: {plain.stdout!r} {plain.stderr!r}")
    runs = [("cache", {"CUPROF_MODE": "cache"}),
            ("expandable", {"CUPROF_MODE": "cache",
                            "CUPROF_ALLOC_CONF": "expandable_segments:True"}),
            ("trace", {"CUPROF_MODE": "trace"}), ("off", {"CUPROF_MODE": "off"})]
    for what, extra in runs:
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(SIM, CUPROF_SNAPSHOT=os.path.join(tmp, "s-%n.pickle"),
                       CUPROF_DUMP_ON="exit", CUPROF_LOG="quiet", **extra)
            r = shimrun.run_shim([a.app], a.ld_path, preload=a.lib, extra_env=env, timeout=60)
            check(r.returncode == 0 and r.stdout == WANT,
                  f"{what}: exit {r.returncode}: {r.stdout!r}; stderr {r.stderr!r}")
            files = shimrun.dumps(tmp, "s-*.pickle")
            if what == "cache":
                check(len(files) == 1, f"cache: snapshots {files}")
                if len(files) == 1:
                    check_cache_history(check, files[0])
    check.finish()


if __name__ == "__main__":
    main()
