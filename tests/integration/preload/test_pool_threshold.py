#!/usr/bin/env python3
"""release_threshold_mb (CUPROF_ALLOC_CONF): at start-up cuprof sets the release threshold of
every device's default stream-ordered memory pool, read back by pool_threshold (two simulated
devices) with cuMemPoolGetAttribute. Without the key, without the shim or in off mode the pools
keep the driver's default (0). In trace mode the program's cuMemAllocAsync passes through to the
driver's pool (its high-water mark counts the 4 KiB block).

Usage: test_pool_threshold.py --lib LIB --ld-path PATH APP
"""
import argparse
import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from shimrun import Checks, run_shim  # noqa: E402 (tests/integration/)

MIB = 1 << 20
DEVICES = 2


def pools(out):
    """{device: (release_threshold, used_high)} from pool_threshold's lines."""
    return {int(d): (int(t), int(h)) for d, t, h in
            re.findall(r"^device=(\d+) release_threshold=(\d+) used_high=(\d+)$", out, re.M)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("app")
    a = ap.parse_args()
    check = Checks()
    sim = {"SIMCUDA_DEVICES": DEVICES}
    # (what, preload, environment, threshold each pool must report, pass-through to the pool)
    cases = [
        ("without cuprof", None, {}, 0, True),
        ("cache, no key", a.lib, {"CUPROF_MODE": "cache"}, 0, False),
        ("cache, 64 MiB", a.lib,
         {"CUPROF_MODE": "cache", "CUPROF_ALLOC_CONF": "release_threshold_mb:64"}, 64 * MIB, False),
        ("trace, 1 GiB", a.lib,
         {"CUPROF_MODE": "trace", "CUPROF_ALLOC_CONF": "max_split_size_mb:20,release_threshold_mb:"
          "1024"}, 1024 * MIB, True),
        ("off, 64 MiB", a.lib,
         {"CUPROF_MODE": "off", "CUPROF_ALLOC_CONF": "release_threshold_mb:64"}, 0, True),
    ]
    for what, lib, extra, want, passthrough in cases:
        env = dict(sim, CUPROF_DUMP_ON="none", **extra)
        r = run_shim([a.app], a.ld_path, preload=lib, extra_env=env, timeout=60)
        check(r.returncode == 0, f"{what}: exit {r.returncode}: {r.stdout!r} {r.stderr!r}")
        got = pools(r.stdout)
        check(sorted(got) == list(range(DEVICES)), f"{what}: pools {got}: {r.stdout!r}")
        for dev, (threshold, high) in sorted(got.items()):
            check(threshold == want, f"{what}: device {dev}: release threshold {threshold}, "
                  f"want {want}")
            if passthrough:
                check(high >= 4096, f"{what}: device {dev}: pool high-water mark {high}: the "
                      "allocation did not reach the driver's pool")
        check("release_threshold_mb" not in r.stderr, f"{what}: stderr {r.stderr!r}")
    check.finish()


if __name__ == "__main__":
    main()
