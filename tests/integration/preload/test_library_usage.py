#!/usr/bin/env python3
"""Device memory by library and the device's footprint (issue 13): tests/apps/lib_users (two
shared libraries, libruntime_user.so through the runtime and libdriver_user.so through the driver
API, plus the program itself) under libcuprof.so on the simulated device, whose contexts each
hold SIMCUDA_CONTEXT_MEM. The exit snapshot, read back with Python's pickle and json, must carry
exactly the live and peak bytes lib_users.c documents per library, segments attributed to the
library whose request made them (derived again here from the trace's segment entries and their
frames), and a footprint whose used bytes exceed cuprof's segments by exactly the context's
memory. `cuprof summary` and `cuprof plot` show the same numbers.

Usage: test_library_usage.py --lib LIBCUPROF --ld-path PATH --cuprof CUPROF --checker CHECK_PY
                             MODE PROGRAM          (MODE: cache, trace, cache-nostacks,
                                                 cache-nohistory, cache-expandable)
cache-nohistory runs as issue 14 measures the shim (CUPROF_HISTORY=off, CUPROF_STACKS=none):
no event of a block reaches a sink then, and the counts must not change.
"""
import argparse
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from shimrun import Checks, load_checker, run_shim  # noqa: E402 (tests/integration/)

MiB = 1 << 20
CONTEXT = 4 * MiB  # SIMCUDA_CONTEXT_MEM below: two 2 MiB pages per live context
CAPACITY = 1 << 30
RUNTIME, DRIVER, PROGRAM = "libruntime_user.so", "libdriver_user.so", "lib_users"
# Which library each allocating function belongs to (frames of the trace, innermost first).
OWNER = {"runtime_user_alloc": RUNTIME, "driver_user_alloc": DRIVER,
         "driver_user_alloc_managed": DRIVER, "main": PROGRAM}
COUNTERS = ("cache_requested_bytes", "cache_reserved_bytes", "passthrough_bytes", "device_bytes")

# (live, peak) in MiB per counter, from the steps lib_users.c lists. In cache mode a segment
# counts for the library whose request made it: a = 12 MiB gets its own 12 MiB segment, b = 6 MiB
# a 20 MiB one (PyTorch's large buffer), which c = 14 MiB (driver_user) then fits in and e = 10
# MiB (the program) reuses once b and c are gone; d = 2 MiB makes driver_user a 20 MiB segment.
EXPECTED = {
    "cache": {
        RUNTIME: {"cache_requested_bytes": (12, 18), "cache_reserved_bytes": (32, 32),
                  "passthrough_bytes": (0, 0), "device_bytes": (32, 32)},
        DRIVER: {"cache_requested_bytes": (2, 16), "cache_reserved_bytes": (20, 20),
                 "passthrough_bytes": (4, 4), "device_bytes": (24, 24)},
        PROGRAM: {"cache_requested_bytes": (10, 10), "cache_reserved_bytes": (0, 0),
                  "passthrough_bytes": (0, 0), "device_bytes": (0, 0)},
    },
    "trace": {
        RUNTIME: {"cache_requested_bytes": (0, 0), "cache_reserved_bytes": (0, 0),
                  "passthrough_bytes": (12, 18), "device_bytes": (12, 18)},
        DRIVER: {"cache_requested_bytes": (0, 0), "cache_reserved_bytes": (0, 0),
                 "passthrough_bytes": (6, 20), "device_bytes": (6, 20)},
        PROGRAM: {"cache_requested_bytes": (0, 0), "cache_reserved_bytes": (0, 0),
                  "passthrough_bytes": (10, 10), "device_bytes": (10, 10)},
    },
}


def size_text(b):
    """cuprof's (PyTorch's format_size) text for a byte count."""
    if b < 1024:
        return "%d bytes" % b
    if b < MiB:
        return "%.2f KiB" % (b / 1024)
    if b < 1 << 30:
        return "%.2f MiB" % (b / MiB)
    return "%.2f GiB" % (b / (1 << 30))


def rows_by_library(snap, checks, where):
    rows = {}
    for r in snap["cuprof"]["libraries"]:
        checks.check(r["device"] == 0, f"{where}: a row on device {r['device']}: {r}")
        checks.check(r["library"] not in rows, f"{where}: two rows for {r['library']}")
        checks.check(r["path"].endswith("/" + r["library"]), f"{where}: path {r['path']!r}")
        checks.check(r["is_program"] == (r["library"] == PROGRAM), f"{where}: is_program {r}")
        rows[r["library"]] = r
    return rows


def check_rows(rows, expected, checks, where):
    checks.check(set(rows) == set(expected),
                 f"{where}: libraries {sorted(rows)}, expected {sorted(expected)} "
                 "(never \"(unknown)\": every call here has a library)")
    for lib, want in expected.items():
        row = rows.get(lib, {})
        for key, (live, peak) in want.items():
            got = (row.get(key), row.get(key + "_peak"))
            checks.check(got == (live * MiB, peak * MiB),
                         f"{where}: {lib} {key} live/peak {got}, expected "
                         f"{(live * MiB, peak * MiB)}")


def segments_from_trace(snap, checks):
    """Live and peak segment bytes per library, from segment_alloc/segment_free entries and the
    frames of the request that made each segment: the independent view of cache_reserved."""
    owner_of, live, peak = {}, {}, {}
    for e in snap["device_traces"][0]:
        if e["action"] not in ("segment_alloc", "segment_free") or "cuprof_pool" in e:
            continue
        if e["action"] == "segment_alloc":
            names = [f["name"] for f in e["frames"] if f["name"] in OWNER]
            checks.check(names, f"segment_alloc at {e['addr']:#x} has no known frame")
            lib = OWNER[names[0]] if names else "?"
            owner_of[e["addr"]] = lib
            live[lib] = live.get(lib, 0) + e["size"]
            peak[lib] = max(peak.get(lib, 0), live[lib])
        else:
            lib = owner_of.pop(e["addr"])
            live[lib] -= e["size"]
    return live, peak


def check_footprint(snap, checks, where):
    fps = snap["cuprof"]["device_footprint"]
    checks.check(len(fps) == 1 and fps[0]["device"] == 0, f"{where}: footprint rows {fps}")
    if not fps:
        return None
    fp = fps[0]
    segments = sum(s["total_size"] for s in snap["segments"])
    checks.check(fp["total_bytes"] == CAPACITY, f"{where}: total {fp}")
    # At the first call only the primary context exists; at exit the driver holds the context and
    # every segment cuprof holds (its cache's and the passed-through ones), all whole pages.
    checks.check(fp["used_bytes_at_start"] == CONTEXT, f"{where}: at start {fp}")
    checks.check(fp["graph_reserved_bytes_at_dump"] == 0, f"{where}: no CUDA graph ran: {fp}")
    checks.check(fp["used_bytes_at_dump"] == CONTEXT + segments,
                 f"{where}: at dump {fp}, segments {segments}: the difference must be exactly "
                 f"the context's {CONTEXT}")
    rows = snap["cuprof"]["libraries"]
    checks.check(sum(r["device_bytes"] for r in rows) == segments,
                 f"{where}: device bytes by library {[r['device_bytes'] for r in rows]} do not "
                 f"add up to the snapshot's segments {segments}")
    return fp


def check_summary(args, path, expected, fp, checks):
    out = subprocess.run([args.cuprof, "summary", "--brief", path], capture_output=True,
                         text=True, timeout=120)
    checks.check(out.returncode == 0, f"summary {path}: rc {out.returncode}: {out.stderr}")
    text = out.stdout
    checks.check("device memory by library" in text, f"summary {path}: no section:\n{text}")
    for lib, want in expected.items():
        name = lib + (" (program)" if lib == PROGRAM else "")
        cells = ["%s / %s" % (size_text(live * MiB), size_text(peak * MiB))
                 for key in COUNTERS for live, peak in [want[key]]]
        pattern = r"^\s+" + re.escape(name) + r"\s+" + r"\s+".join(map(re.escape, cells)) + "$"
        checks.check(re.search(pattern, text, re.M),
                     f"summary {path}: no row {name!r} with {cells}:\n{text}")
    line = ("device footprint (device-wide, other processes count too): at start %s, at dump %s "
            "of %s" % (size_text(fp["used_bytes_at_start"]), size_text(fp["used_bytes_at_dump"]),
                       size_text(CAPACITY)))
    checks.check(line in text, f"summary {path}: no line {line!r}:\n{text}")
    checks.check("not seen by cuprof: %s" % size_text(CONTEXT) in text,
                 f"summary {path}: the context's memory is not named as unseen:\n{text}")


def check_plot(args, path, tmp, checks):
    html = os.path.join(tmp, "report.html")
    out = subprocess.run([args.cuprof, "plot", "-o", html, path], capture_output=True, text=True,
                         timeout=120)
    checks.check(out.returncode == 0, f"plot: rc {out.returncode}: {out.stderr}")
    page = open(html, encoding="utf-8").read()
    data = json.loads(re.search(r'<script id="cuprof-data" type="application/json">(.*?)</script>',
                                page, re.S).group(1))
    dev = data["runs"][0]["devices"][0]
    names = [r["name"] for r in dev.get("libraries", [])]
    checks.check(RUNTIME in names and dev.get("footprint", {}).get("total") == CAPACITY,
                 f"plot: no library rows or footprint in the report's data: {names!r}, "
                 f"{dev.get('footprint')!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--cuprof", required=True)
    ap.add_argument("--checker", required=True)
    ap.add_argument("mode", choices=["cache", "trace", "cache-nostacks", "cache-nohistory",
                                         "cache-expandable"])
    ap.add_argument("program")
    args = ap.parse_args()
    checker = load_checker(args.checker)
    mode = args.mode.split("-")[0]
    expected = EXPECTED[mode]
    # Expandable segments map pages instead of making segments: what each library asked for is
    # the same, its reserved bytes are the pages mapped for it (checked against the total).
    expandable = args.mode.endswith("expandable")
    if expandable:
        expected = {lib: {k: v for k, v in want.items()
                          if k in ("cache_requested_bytes", "passthrough_bytes")}
                    for lib, want in expected.items()}
    checks = Checks()
    with tempfile.TemporaryDirectory(prefix="cuprof-libs-") as tmp:
        snaps = {}
        for ext in ("pickle", "json"):
            path = os.path.join(tmp, "run." + ext)
            extra = {"SIMCUDA_MEM": "1G", "SIMCUDA_CONTEXT_MEM": "3M", "CUPROF_MODE": mode,
                     "CUPROF_SNAPSHOT": path,
                     "CUPROF_STACKS": "alloc"}
            if args.mode.endswith(("nostacks", "nohistory")):
                extra["CUPROF_STACKS"] = "none"
            if args.mode.endswith("nohistory"):
                extra["CUPROF_HISTORY"] = "off"
            if expandable:
                extra["CUPROF_ALLOC_CONF"] = "expandable_segments:True"
            res = run_shim([args.program], args.ld_path, args.lib, extra)
            checks.check(res.returncode == 0 and res.stdout.strip() == "lib_users: ok",
                         f"{ext}: lib_users rc {res.returncode}: {res.stdout}{res.stderr}")
            if not os.path.exists(path):
                checks.check(False, f"{ext}: no snapshot at {path}: {res.stderr}")
                continue
            if ext == "pickle":
                with open(path, "rb") as f:
                    snap = pickle.load(f)
            else:
                with open(path, encoding="utf-8") as f:
                    snap = json.load(f)
            snaps[ext] = (path, snap)
            problems = checker.check(snap)
            checks.check(not problems, f"{ext}: check_snapshot: {problems[:5]}")
            rows = rows_by_library(snap, checks, ext)
            check_rows(rows, expected, checks, ext)
            fp = check_footprint(snap, checks, ext)
            if expandable:
                maps = [e for e in snap["device_traces"][0] if e["action"] == "segment_map"]
                checks.check(maps and all(seg["is_expandable"] for seg in snap["segments"]
                                          if "cuprof_pool" not in seg),
                             f"{ext}: expandable segments expected: {len(maps)} maps")
            if args.mode == "cache":
                live, peak = segments_from_trace(snap, checks)
                for lib in expected:
                    got = (rows.get(lib, {}).get("cache_reserved_bytes"),
                           rows.get(lib, {}).get("cache_reserved_bytes_peak"))
                    checks.check(got == (live.get(lib, 0), peak.get(lib, 0)),
                                 f"{ext}: {lib} reserved {got}, the trace says "
                                 f"{(live.get(lib, 0), peak.get(lib, 0))}")
            if fp is not None and not expandable:
                check_summary(args, path, expected, fp, checks)
        if "pickle" in snaps:
            check_plot(args, snaps["pickle"][0], tmp, checks)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
