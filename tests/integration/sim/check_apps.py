#!/usr/bin/env python3
"""Runs one example app on the simulated device and checks its result line against numbers this
script derives on its own from the same splitmix64 seed (sizes, counts, peak, checksum).

usage: check_apps.py APP EXE [ARGS...]   (environment, incl. LD_LIBRARY_PATH, comes from meson)
"""
import re
import struct
import subprocess
import sys

M64 = (1 << 64) - 1
FNV_OFFSET = 0xCBF29CE484222325


class Rng:
    """splitmix64, as app_rand() in tests/apps/app_common.h."""

    def __init__(self, seed):
        self.s = seed

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)


def fnv(h, data):
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & M64
    return h


def run(exe, args):
    p = subprocess.run([exe] + args, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        sys.exit(f"{exe} exited {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}")
    lines = [l for l in p.stdout.splitlines() if l.strip()]
    if len(lines) != 1:
        sys.exit(f"expected exactly one result line, got {lines!r}")
    m = dict(re.findall(r"(\w+)=(\S+)", lines[0]))
    print(lines[0])
    return m


def expect(got, want):
    bad = {k: (got.get(k), str(v)) for k, v in want.items() if got.get(k) != str(v)}
    if bad:
        sys.exit("mismatch (got, want): " + repr(bad))


def train_loop(exe, args):
    steps = int(args[0]) if args else 20
    rng = Rng(0x5EED)
    allocs = frees = async_allocs = live = peak = 0
    cs = FNV_OFFSET

    def alloc(n, a=0):
        nonlocal allocs, async_allocs, live, peak
        allocs += 1
        async_allocs += a
        live += n
        peak = max(peak, live)

    params = []
    for i in range(12):
        r = rng.next()
        base = 262144 << (r % 6)
        params.append(base + (r >> 16) % (base // 4))
        alloc(params[-1])
    leak = [1 << 20, 1 << 20, 1 << 20, 12345]
    for n in leak:
        alloc(n)
    for step in range(steps):
        acts = []
        for i in range(10):
            r = rng.next()
            base = 4096 << (r % 14)
            n = base + (r >> 20) % (base // 2)
            acts.append(n)
            alloc(n, 1 if i % 4 == 3 else 0)
            cs = fnv(cs, bytes([r >> 56]) * 128)
        for i, n in enumerate(params):
            alloc(n, 1)
            cs = fnv(cs, bytes([(step * 12 + i) & 0xFF]) * 128)
        pattern = b"".join(struct.pack("<Q", rng.next()) for _ in range(4096 // 8))
        cs = fnv(cs, pattern)
        for n in params + acts:
            frees += 1
            live -= n
    for i, n in enumerate(params):
        cs = fnv(cs, bytes([0x11 + i]) * 128)
        frees += 1
        live -= n
    expect(run(exe, args), {
        "steps": steps, "allocs": allocs, "frees": frees, "async_allocs": async_allocs,
        "leaked_bytes": sum(leak), "live_bytes": live, "peak_bytes": peak,
        "checksum": f"{cs:016x}"})
    if live != sum(leak):
        sys.exit("script error: live bytes at exit must equal the leak")


def threads(exe, args):
    nthreads = int(args[0]) if args else 4
    iters = int(args[1]) if len(args) > 1 else 100
    allocs = frees = async_allocs = 0
    cs = FNV_OFFSET
    for t in range(nthreads):
        rng = Rng(0x7EAD + t)
        slots = [False] * 8
        wcs = FNV_OFFSET
        for _ in range(iters):
            r = rng.next()
            k = r % 8
            if slots[k]:
                frees += 1
            slots[k] = True
            allocs += 1
            async_allocs += (r >> 40) & 1
            wcs = fnv(wcs, bytes([r >> 56]) * 32)
        frees += sum(slots)
        cs = fnv(cs, struct.pack("<Q", wcs))
    expect(run(exe, args), {
        "threads": nthreads, "iters": iters, "allocs": allocs, "frees": frees,
        "async_allocs": async_allocs, "checksum": f"{cs:016x}"})


def driver_like(exe, args, seed, default_rounds, per_round, shift0, mods, sample, memset_tail):
    rounds = int(args[0]) if args else default_rounds
    rng = Rng(seed)
    allocs = frees = total = 0
    cs = FNV_OFFSET
    for _ in range(rounds):
        sizes, fills = [], []
        for _ in range(per_round):
            r = rng.next()
            base = shift0 << (r % mods)
            n = base + (r >> 16) % (base // 2)
            sizes.append(n)
            fills.append(r >> 56)
            allocs += 1
            total += n
            if not memset_tail:  # static_style: a random sample per buffer
                data = b"".join(struct.pack("<Q", rng.next()) for _ in range(sample // 8))
                cs = fnv(cs, data)
        if memset_tail:  # driver_api: one round trip, then the memset tail of buffer 1
            data = b"".join(struct.pack("<Q", rng.next()) for _ in range(sample // 8))
            cs = fnv(cs, data)
            cs = fnv(cs, bytes([fills[1]]) * sample)
        frees += per_round
    expect(run(exe, args), {"rounds": rounds, "allocs": allocs, "frees": frees, "bytes": total,
                            "checksum": f"{cs:016x}"})


def driver_api(exe, args):
    driver_like(exe, args, 0xD41A, 20, 6, 1024, 13, 256, True)


def static_style(exe, args):
    driver_like(exe, args, 0x57A7, 10, 4, 2048, 12, 128, False)


def oom(exe, args):
    import os
    mem = os.environ.get("SIMCUDA_MEM", "")
    m = re.fullmatch(r"(\d+)G", mem)
    if not m:
        sys.exit("the oom check needs SIMCUDA_MEM=<n>G")
    blocks = (int(m.group(1)) << 30) // (256 << 20)
    got = run(exe, args)
    expect(got, {"blocks": blocks, "error": "cudaErrorMemoryAllocation", "peek": 2, "last": 2,
                 "cleared": 0, "realloc": blocks, "free_before": int(m.group(1)) << 30,
                 "free_full": 0})


if __name__ == "__main__":
    globals()[sys.argv[1]](sys.argv[2], sys.argv[3:])
