#!/usr/bin/env python3
"""Trimming the default memory pool (pool_trim_app.c): a program that frees its stream-ordered
memory and trims the device's default pool gives that memory back to the driver. In cache mode
cuprof's cache serves the default pool's requests, so the trim must empty it as empty_cache()
does: the history shows the segment_free where the program trimmed, never for a pool of the
program's own, nor while the cache reserves no more than the program asks the pool to keep, nor
for a segment holding a live block; the last trim (through the driver's own cuMemPoolTrimTo)
also hands back the segment a cudaMalloc left cached. With expandable segments the same trims
unmap the same pages. The program's output is its own in every mode; no segment is left at exit.

Usage: test_pool_trim.py --lib LIB --ld-path PATH APP
"""
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/)

CALLS = ["stream_create", "malloc_async", "free_async", "synchronize", "pool_create", "trim_own",
         "default_pool", "trim_default_keep_1g", "trim_default", "malloc_async_kept",
         "trim_default_live", "free_async_kept", "synchronize", "malloc", "free"]
WANT = "".join(f"{c}=cudaSuccess\n" for c in CALLS) + \
    "driver_trim_default=0\npool_destroy=cudaSuccess\nstream_destroy=cudaSuccess\n"
MIB = 1 << 20
# Cache mode: each 8 MiB request gets a 20 MiB segment (the stream's own), the cudaMalloc one of
# its own on the legacy stream; a trim gives back exactly the segments holding no block.
CACHE_HISTORY = [
    ("segment_alloc", 20 * MIB), ("alloc", 8 * MIB), ("free_requested", 8 * MIB),
    ("free_completed", 8 * MIB),
    ("segment_free", 20 * MIB),  # trim_default (trim_own and keep_1g gave nothing back)
    ("segment_alloc", 20 * MIB), ("alloc", 8 * MIB),  # trim_default_live: nothing
    ("free_requested", 8 * MIB), ("free_completed", 8 * MIB),
    ("segment_alloc", 20 * MIB), ("alloc", 4 * MIB), ("free_requested", 4 * MIB),
    ("free_completed", 4 * MIB),
    ("segment_free", 20 * MIB), ("segment_free", 20 * MIB),  # the driver's cuMemPoolTrimTo
]
# With expandable segments the same segments are mapped and unmapped pages.
RENAMED = {"cache": {},
           "expandable": {"segment_alloc": "segment_map", "segment_free": "segment_unmap"}}


def main():
    a = shimrun.app_arguments()
    check = shimrun.Checks()
    alone = shimrun.run_shim([a.app], a.ld_path)
    check(alone.returncode == 0 and alone.stdout == WANT, f"alone: {alone}")
    modes = (("cache", {}), ("expandable", {"CUPROF_ALLOC_CONF": "expandable_segments:True"}),
             ("trace", {"CUPROF_MODE": "trace"}), ("off", {"CUPROF_MODE": "off"}))
    for what, extra in modes:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "s.pickle")
            r = shimrun.run_shim([a.app], a.ld_path, preload=a.lib,
                                 extra_env=dict(extra, CUPROF_SNAPSHOT=path))
            check(r.returncode == 0 and r.stdout == WANT,
                  f"{what}: exit {r.returncode}: {r.stdout!r}; stderr {r.stderr[-800:]!r}")
            if what == "off":
                check(not os.path.exists(path), f"off: a snapshot was written")
                continue
            snap = shimrun.load_checker().load(path)
            check(snap["segments"] == [], f"{what}: segments left at exit: {snap['segments']}")
            history = [(e["action"], e["size"]) for e in snap["device_traces"][0]
                       if e["action"] != "snapshot"]
            if what in ("cache", "expandable"):
                check(history == [(RENAMED[what].get(action, action), size)
                                  for action, size in CACHE_HISTORY], f"{what}: history {history}")
    check.finish()


if __name__ == "__main__":
    main()
