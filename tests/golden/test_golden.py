#!/usr/bin/env python3
"""Golden structure test: runs a scenario program that writes NAME.pickle and NAME.json, then
checks with Python's stdlib that (1) the pickle uses only the opcodes MemoryViz.js and pickle both
accept (protocol 4, MEMOIZE/BINGET only, batches <= 1000, shared frame objects), (2) both files
hold the same content, (3) check_snapshot.py finds no problem, and (4) the normalised content
(addresses relative to the first segment, times, pid, host and version dropped, frame
file names reduced to their base name) equals
expected/NAME.json. GOLDEN_UPDATE=1 rewrites the expectation instead (review the diff!).

Usage: test_golden.py PROGRAM NAME EXPECTED_DIR OUTDIR [PROGRAM ARGS...]"""
import json
import os
import pickle
import pickletools
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_snapshot  # noqa: E402

ALLOWED = {"PROTO", "STOP", "EMPTY_DICT", "EMPTY_LIST", "EMPTY_TUPLE", "MARK", "APPENDS",
           "SETITEMS", "SHORT_BINUNICODE", "BINUNICODE", "BININT1", "BININT2", "BININT", "LONG1",
           "BINFLOAT", "NONE", "NEWTRUE", "NEWFALSE", "TUPLE1", "TUPLE2", "TUPLE3", "MEMOIZE",
           "BINGET", "LONG_BINGET"}
PUSH = {"EMPTY_DICT", "EMPTY_LIST", "EMPTY_TUPLE", "SHORT_BINUNICODE", "BINUNICODE", "BININT1",
        "BININT2", "BININT", "LONG1", "BINFLOAT", "NONE", "NEWTRUE", "NEWFALSE", "BINGET",
        "LONG_BINGET"}


def check_opcodes(data):
    problems = []
    height, marks = 0, []
    for i, (op, arg, pos) in enumerate(pickletools.genops(data)):
        name = op.name
        if name not in ALLOWED:
            problems.append(f"opcode {name} at {pos} is outside MemoryViz's subset")
        if i == 0 and (name != "PROTO" or arg != 4):
            problems.append("does not start with PROTO 4")
        if name == "LONG1" and not -(1 << 63) <= arg < (1 << 63):
            problems.append(f"LONG1 {arg} does not fit in 64 bits")
        if name in PUSH:
            height += 1
        elif name == "MARK":
            marks.append(height)
        elif name in ("APPENDS", "SETITEMS"):
            n = height - marks.pop()
            items = n if name == "APPENDS" else n // 2
            if items > 1000:
                problems.append(f"{name} batch of {items} items at {pos} (> 1000)")
            height -= n
        elif name == "TUPLE2":
            height -= 1
        elif name == "TUPLE3":
            height -= 2
    return problems


def untuple(v):
    if isinstance(v, (list, tuple)):
        return [untuple(x) for x in v]
    if isinstance(v, dict):
        return {k: untuple(x) for k, x in v.items()}
    return v


def normalise(snap):
    base = snap["segments"][0]["address"] if snap["segments"] else 0

    def walk(v):
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                if k == "time_us":
                    continue
                if k in ("address", "addr") and isinstance(x, int) and x >= base:
                    x = f"base+{x - base:#x}"
                if k == "filename" and isinstance(x, str):
                    x = os.path.basename(x)  # DWARF paths depend on the build directory
                out[k] = walk(x)
            return out
        return v

    out = walk(untuple(snap))
    for k in ("pid", "host", "version"):
        out.get("cuprof", {}).pop(k, None)
    return out


def main(argv):
    prog, name, expected_dir, outdir = argv[1:5]
    os.makedirs(outdir, exist_ok=True)
    subprocess.run([prog] + argv[5:] + [outdir], check=True)
    problems = []
    with open(os.path.join(outdir, name + ".pickle"), "rb") as f:
        raw = f.read()
    problems += check_opcodes(raw)
    pk = pickle.loads(raw)
    with open(os.path.join(outdir, name + ".json"), encoding="utf-8") as f:
        js = json.load(f)
    if untuple(pk) != js:
        problems.append("pickle and JSON files differ")
    # Frames are memoized: equal frame lists (and equal frame dicts) are the same object.
    seen = {}
    for seg in pk["segments"]:
        for obj in [seg] + seg["blocks"]:
            fr = obj["frames"]
            if fr:
                key = json.dumps(fr)
                if key in seen and seen[key] is not fr:
                    problems.append("an identical frame list was written twice, not memoized")
                seen.setdefault(key, fr)
    for trace in pk["device_traces"]:
        for ev in trace:
            if ev["frames"]:
                key = json.dumps(ev["frames"])
                if key in seen and seen[key] is not ev["frames"]:
                    problems.append("an identical trace frame list is not shared")
                seen.setdefault(key, ev["frames"])
    problems += check_snapshot.check(pk, complete_history=True)
    got = normalise(pk)
    exp_path = os.path.join(expected_dir, name + ".json")
    if os.environ.get("GOLDEN_UPDATE") == "1":
        with open(exp_path, "w", encoding="utf-8") as f:
            json.dump(got, f, indent=1, ensure_ascii=False)
            f.write("\n")
    else:
        with open(exp_path, encoding="utf-8") as f:
            want = json.load(f)
        if got != want:
            problems.append(f"normalised content differs from {exp_path}:")
            g = json.dumps(got, indent=1, ensure_ascii=False).splitlines()
            w = json.dumps(want, indent=1, ensure_ascii=False).splitlines()
            import difflib
            problems += list(difflib.unified_diff(w, g, "expected", "got", lineterm="", n=2))[:80]
    for p in problems:
        print(f"{name}: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
