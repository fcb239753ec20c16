#!/usr/bin/env python3
"""Bad input tables (issue 7), extending what tests/integration/control (exact messages of the
common cases) and tests/integration/cli (six bad files) already cover:

- config: EVERY CUPROF_* variable and EVERY CUPROF_ALLOC_CONF key x {empty, negative, overflowing,
  fractional, unit-suffixed, unicode, invalid UTF-8, control characters, very long}: exit status 2
  before main, exactly one line on stderr naming the variable, bounded length, printable.
- readers, through `cuprof stats FILE`: a valid pickle and JSON truncated at many lengths, seeded
  random corruptions, and hand-made hostile files (huge lengths, deep nesting, unknown opcodes,
  memo abuse, self-referencing containers, stack underflow, non-snapshot values): exit 2 with one
  line naming the file, or (a corruption that still parses) exit 0 with JSON on stdout; never a
  signal, a sanitizer report or a hang.

usage: test_badinput.py config LIBCUPROF | readers CUPROF_EXE
"""
import json
import os
import pickle
import random
import struct
import subprocess
import sys
import tempfile

import relutil

VARS = ["CUPROF_MODE", "CUPROF_ALLOC_CONF", "CUPROF_SNAPSHOT", "CUPROF_HISTORY",
        "CUPROF_MAX_ENTRIES", "CUPROF_STACKS", "CUPROF_STACK_DEPTH", "CUPROF_PYTHON_FRAMES",
        "CUPROF_CONTROL", "CUPROF_SOCKET_DIR", "CUPROF_DUMP_ON",
        "CUPROF_SIGNAL", "CUPROF_LOG"]
LONG = "9" * 100000
# One value per class; every one of them is wrong for every variable (paths: see below).
CLASSES = {
    "empty": "", "negative": "-1", "overflow": "18446744073709551617", "huge": "1" + "0" * 40,
    "fraction": "0.5", "suffix": "20MB", "suffix-k": "10k", "unicode": "\u0661\u0662",
    "emoji": "\U0001F600", "space": " 1 ", "tab-newline": "1\t\n", "long": LONG,
}
INVALID_UTF8 = b"\xff\xfe1"
ALLOC_KEYS = ["max_split_size_mb", "roundup_power2_divisions", "max_non_split_rounding_mb",
              "garbage_collection_threshold", "per_process_memory_fraction",
              "expandable_segments", "release_lock_on_cudamalloc", "release_threshold_mb",
              "free_sync", "backend"]
ALLOC_VALUES = {"empty": "", "negative": "-1", "overflow": "18446744073709551617",
                "fraction-neg": "-0.5", "suffix": "64MB", "unicode": "\u0662\u0660",
                "nan": "nan", "inf": "inf", "hex": "0x20", "long": LONG,
                "brackets": "[[[[", "colon": ":::"}
ALLOC_OK_ANYWAY = {("release_threshold_mb", "hex")}  # documented below if it ever parses


def run_true(lib, env_extra):
    env = relutil.sim_env(preload=lib)
    env = {k.encode() if isinstance(k, str) else k: v.encode() if isinstance(v, str) else v
           for k, v in env.items()}
    env.update(env_extra)
    return subprocess.run(["true"], env=env, capture_output=True, timeout=60)


def check_refused(lib, name, value, label):
    raw = value if isinstance(value, bytes) else value.encode()
    r = run_true(lib, {name.encode(): raw})
    err = r.stderr.decode("utf-8", "replace")
    where = f"{name}={label}"
    if r.returncode != 2:
        relutil.fail(f"{where}: exit {r.returncode}, want 2; stderr {err[:300]!r}")
    if err.count("\n") != 1 or not err.endswith("\n"):
        relutil.fail(f"{where}: want exactly one line on stderr, got {err[:500]!r}")
    if not err.startswith(f"cuprof: {name}: "):
        relutil.fail(f"{where}: line does not start with 'cuprof: {name}: ': {err[:200]!r}")
    if len(r.stderr) > 600:
        relutil.fail(f"{where}: {len(r.stderr)}-byte message (a long value must be cut)")
    line = r.stderr[:-1]
    if any(b < 0x20 or b == 0x7F for b in line):
        relutil.fail(f"{where}: raw control or invalid bytes copied into the message: {line!r}")


def config(lib):
    n = 0
    for name in VARS:
        for label, value in CLASSES.items():
            if name in ("CUPROF_ALLOC_CONF", "CUPROF_SOCKET_DIR") and label == "empty":
                continue  # documented: empty means PyTorch's defaults, the default folders
            if name == "CUPROF_SNAPSHOT" and label != "empty" and label != "long":
                value = value + ".txt"  # any other string is a file name: make it a bad one
            check_refused(lib, name, value, label)
            n += 1
        check_refused(lib, name, INVALID_UTF8, "invalid-utf8")
        n += 1
    for key in ALLOC_KEYS:
        for label, value in ALLOC_VALUES.items():
            if (key, label) in ALLOC_OK_ANYWAY:
                continue
            check_refused(lib, "CUPROF_ALLOC_CONF", f"{key}:{value}", f"{key}:{label}")
            n += 1
        check_refused(lib, "CUPROF_ALLOC_CONF", key.encode() + b":" + INVALID_UTF8,
                      f"{key}:invalid-utf8")
        n += 1
    # Many keys, each fine alone, in a very long list; a list of 10^4 commas.
    check_refused(lib, "CUPROF_ALLOC_CONF", ",".join(["max_split_size_mb:20"] * 5000) + ",x:1",
                  "long list")
    check_refused(lib, "CUPROF_ALLOC_CONF", "," * 10000 + "bogus", "commas")
    print(f"config: {n + 2} bad values refused with one line each")


# ---------------------------------------------------------------- readers
def sample_snapshot():
    frames = [{"filename": "a.py", "line": 1, "name": "f"}, {"filename": "b.py", "line": 2,
                                                             "name": "g"}]
    blocks = [{"address": 4096, "size": 512, "requested_size": 500, "state": "active_allocated",
               "frames": frames},
              {"address": 4608, "size": 2096640, "requested_size": 0, "state": "inactive",
               "frames": []}]
    seg = {"device": 0, "address": 4096, "total_size": 2097152, "allocated_size": 512,
           "active_size": 512, "requested_size": 500, "stream": 0, "segment_type": "small",
           "segment_pool_id": (0, 0), "is_expandable": False, "frames": frames,
           "blocks": blocks}
    trace = [{"action": "segment_alloc", "addr": 4096, "size": 2097152, "stream": 0,
              "time_us": 1, "frames": frames},
             {"action": "alloc", "addr": 4096, "size": 500, "stream": 0, "time_us": 2,
              "frames": frames}]
    return {"segments": [seg], "device_traces": [trace]}


P = b"\x80\x04"


def hostile_pickles():
    big = (1 << 32) - 1
    return {
        "binunicode-4G": P + b"X" + struct.pack("<I", big) + b"abc.",
        "binunicode8-2^63": P + b"\x8d" + struct.pack("<Q", 1 << 63) + b"abc.",
        "binbytes8-huge": P + b"\x8e" + struct.pack("<Q", (1 << 64) - 1) + b".",
        "long4-huge": P + b"\x8b" + struct.pack("<i", 0x7FFFFFFF) + b"\x01.",
        "long4-negative-len": P + b"\x8b" + struct.pack("<i", -5) + b".",
        "frame-huge": P + b"\x95" + struct.pack("<Q", (1 << 64) - 1) + b"}.",
        "short-binunicode-past-end": P + b"\x8c\xff" + b"ab",
        "deep-marks": P + b"(" * 100000 + b"l" * 100000 + b".",
        "deep-lists": P + b"(]" * 50000 + b"e" * 50000 + b".",
        "deep-dicts": P + b"}\x8c\x01k" * 50000 + b"s" * 50000 + b".",
        "global-os-system": P + b"\x8c\x02os\x8c\x06system\x93\x8c\x02hi\x85R.",
        "class-global": b"\x80\x02cos\nsystem\nq\x00.",
        "reduce-on-int": P + b"K\x01K\x02R.",
        "build": P + b"}}b.",
        "persid": P + b"P123\n.",
        "ext1": P + b"\x82\x01.",
        "opcode-ff": P + b"\xff.",
        "opcode-00": P + b"\x00.",
        "proto-99": b"\x80\x63}.",
        "binget-undefined": P + b"h\x05.",
        "long-binget-huge": P + b"j\xff\xff\xff\xff.",
        "memoize-empty-stack": P + b"\x94.",
        "binput-huge-index": P + b"}r\xff\xff\xff\x7f.",
        "self-list": P + b"]\x94h\x00a.",
        "self-dict": P + b"}\x94\x8c\x08segmentsh\x00s.",
        "self-nested": P + b"]\x94]\x94h\x00ah\x01a.",
        "setitems-no-mark": P + b"}K\x01K\x02u.",
        "setitems-odd": P + b"}(K\x01K\x02K\x03u.",
        "append-to-int": P + b"K\x01K\x02a.",
        "appends-no-list": P + b"(K\x01e.",
        "setitem-to-list": P + b"]K\x01K\x02s.",
        "tuple3-underflow": P + b"K\x01\x87.",
        "pop-empty": P + b"0.",
        "pop-mark-none": P + b"1.",
        "stop-empty-stack": P + b".",
        "no-stop": P + b"}",
        "list-key": P + b"}]K\x01s.",
        "dict-key": P + b"}}K\x01s.",
        "float-key-nan": P + b"}G\x7f\xf8\x00\x00\x00\x00\x00\x00K\x01s.",
        "top-int": P + b"K\x01.",
        "top-none": P + b"N.",
        "segments-not-list": P + b"}\x8c\x08segmentsK\x05s.",
        "segments-of-ints": P + b"}\x8c\x08segments(K\x01K\x02ls.",
        "trailing-garbage": pickle.dumps(sample_snapshot(), protocol=4) + b"garbage",
        "two-stops": pickle.dumps(sample_snapshot(), protocol=4) * 2,
        "negative-sizes": pickle.dumps(dict(sample_snapshot(), segments=[dict(
            sample_snapshot()["segments"][0], total_size=-5)]), protocol=4),
        "address-2^64": pickle.dumps(dict(sample_snapshot(), segments=[dict(
            sample_snapshot()["segments"][0], address=1 << 64)]), protocol=4),
        "device-huge": pickle.dumps(dict(sample_snapshot(), segments=[dict(
            sample_snapshot()["segments"][0], device=1 << 40)]), protocol=4),
        "device-negative": pickle.dumps(dict(sample_snapshot(), segments=[dict(
            sample_snapshot()["segments"][0], device=-1)]), protocol=4),
        "many-devices": pickle.dumps(dict(sample_snapshot(), device_traces=[[]] * 100000),
                                     protocol=4),
        "frame-line-str": pickle.dumps(dict(sample_snapshot(), device_traces=[[{
            "action": "alloc", "addr": 1, "size": 1, "stream": 0,
            "frames": [{"filename": 1, "line": "x", "name": None}]}]]), protocol=4),
        "unknown-action": pickle.dumps(dict(sample_snapshot(), device_traces=[[{
            "action": "explode", "addr": 1, "size": 1, "stream": 0, "frames": []}]]),
            protocol=4),
    }


def hostile_jsons():
    snap = json.dumps(sample_snapshot())
    return {
        "deep-arrays": b"[" * 200000 + b"]" * 200000,
        "deep-objects": b'{"a":' * 100000 + b"1" + b"}" * 100000,
        "nan": b'{"segments": [NaN]}',
        "huge-number": b'{"segments": [], "device_traces": [[{"action": "alloc", "addr": '
                       b'1e999, "size": 184467440737095516160, "stream": 0, "frames": []}]]}',
        "invalid-utf8": b'{"segments": [], "x": "\xff\xfe"}',
        "nul-escape": b'{"segments": [], "device_traces": [[{"action": "al\\u0000loc", '
                      b'"addr": 1, "size": 1, "stream": 0, "frames": []}]]}',
        "lone-surrogate": b'{"segments": [], "x": "\\ud800"}',
        "bom": b"\xef\xbb\xbf" + snap.encode(),
        "trailing": snap.encode() + b" }",
        "duplicate-keys": b'{"segments": [], "segments": 5}',
        "top-string": b'"segments"',
        "top-array-of-ints": b"[1, 2, 3]",
        "unterminated-string": b'{"segments": "abc',
        "huge-string-len": b'{"segments": [], "x": "' + b"a" * (4 << 20) + b'"}',
        "segment-missing-keys": b'{"segments": [{"device": 0}], "device_traces": []}',
        "blocks-not-list": json.dumps(dict(sample_snapshot(), segments=[dict(
            sample_snapshot()["segments"][0], segment_pool_id=[0, 0], blocks=7)])).encode(),
    }


# Inputs a tolerant reader may load (pickle.load ignores bytes after STOP; JSON readers differ on
# a BOM and duplicate keys; a newer PyTorch may add actions; values a reader may take as given):
# for these exit 0 with JSON on stdout is as good as exit 2 with one line.
MAY_LOAD = {"trailing-garbage", "two-stops", "bom", "duplicate-keys", "huge-string-len",
            "unknown-action", "many-devices", "negative-sizes", "device-negative", "device-huge",
            "address-2^64", "frame-line-str", "nul-escape", "float-key-nan", "huge-number",
            "nan",
            # a segment without an address, a segment that is not a dict or `blocks` that is not a
            # list is skipped with a one-line warning (issue 12)
            "segment-missing-keys", "blocks-not-list", "top-array-of-ints", "self-list",
            "self-nested", "segments-of-ints"}


def run_stats(exe, path):
    cmd = [exe, "stats", path]
    env = relutil.sim_env()
    rc, out, err = relutil.run_watched(cmd, env, 60)
    return rc, out, err


def check_reader(exe, path, label, may_succeed):
    rc, out, err = run_stats(exe, path)
    if os.environ.get("BADINPUT_VERBOSE"):
        print(f"{label}: exit {rc} {err.strip()[:150]}")
    name = os.path.basename(path)
    if rc == 0 and may_succeed:
        try:
            json.loads(out)
        except ValueError:
            relutil.fail(f"{label}: exit 0 but stdout is not JSON: {out[:200]!r}")
        return 0
    if rc != 2:
        relutil.fail(f"{label}: exit {rc}, want 2\nstderr: {err[-2000:]}")
    lines = err.strip().splitlines()
    if len(lines) != 1 or not lines[0].startswith("cuprof: ") or name not in lines[0]:
        relutil.fail(f"{label}: want one 'cuprof: ' line naming {name}, got {err[-1000:]!r}")
    if out:
        relutil.fail(f"{label}: refused input but wrote to stdout: {out[:200]!r}")
    return 2


def readers(exe):
    with tempfile.TemporaryDirectory(prefix="cuprof-badinput-") as d:
        def put(name, data):
            path = os.path.join(d, name)
            with open(path, "wb") as f:
                f.write(data)
            return path
        good_p = pickle.dumps(sample_snapshot(), protocol=4)
        good_j = json.dumps(sample_snapshot()).encode()
        # The originals load (the test of everything below would be empty otherwise).
        for name, data in (("good.pickle", good_p), ("good.json", good_j)):
            rc, out, err = run_stats(exe, put(name, data))
            if rc != 0:
                relutil.fail(f"{name}: a valid snapshot is refused: {err}")
        counts = {"truncated": 0, "corrupted": 0, "hostile": 0, "accepted": 0}
        step = 3 if not relutil.sanitized() else 11
        for fmt, data in (("pickle", good_p), ("json", good_j)):
            for cut in list(range(0, len(data) - 1, step)) + [len(data) - 1]:
                check_reader(exe, put(f"cut{cut}.{fmt}", data[:cut]), f"{fmt} cut at {cut}",
                             may_succeed=fmt == "json" and data[:cut].strip() != b"")
                counts["truncated"] += 1
        rng = random.Random(0xBAD)
        for i in range(60 if not relutil.sanitized() else 20):
            for fmt, data in (("pickle", good_p), ("json", good_j)):
                b = bytearray(data)
                for _ in range(rng.randrange(1, 6)):
                    pos = rng.randrange(len(b))
                    b[pos] = rng.randrange(256) if rng.random() < 0.7 else b[pos] ^ 0x80
                rc = check_reader(exe, put(f"flip{i}.{fmt}", bytes(b)), f"{fmt} flip #{i}",
                                  may_succeed=True)
                counts["corrupted"] += 1
                counts["accepted"] += rc == 0
        for fmt, table in (("pickle", hostile_pickles()), ("json", hostile_jsons())):
            for label, data in table.items():
                ok = label in MAY_LOAD
                check_reader(exe, put(f"{label}.{fmt}", data), f"{fmt} {label}", may_succeed=ok)
                counts["hostile"] += 1
        print("readers: " + ", ".join(f"{k} {v}" for k, v in counts.items()))


def main():
    what, arg = sys.argv[1], sys.argv[2]
    if what == "config":
        config(arg)
    else:
        readers(arg)


if __name__ == "__main__":
    main()
