#!/usr/bin/env python3
"""The pickle reader streams a snapshot's segments and history into the model as it reads them,
from a file a window at a time. Files written by Python's pickle (protocols 2 to 5, with and
without the memo, frames shared or repeated, one-item lists that pickle writes with APPEND) and
by cuprof must give what a plain value tree gives (pickle_modes checks the three ways agree) and
what Python put in; hand-made shapes the streaming cannot follow (a history list referred to
twice, the segments list reused, a repeated key) must be read again without it, not misread.
The histories here are made up (not a consistent replay): only what is read is compared.
Usage: test_pickle_streaming.py PICKLE_MODES SNAPSHOT_CONVERT WORKDIR"""
import copy
import io
import json
import os
import pickle
import struct
import subprocess
import sys

modes, conv, work = sys.argv[1:4]

os.makedirs(work, exist_ok=True)
problems = []
B = 0x7F3A00000000
MIB = 1 << 20


def frames(tag, depth=4):
    return [{"filename": f"/src/{tag}.py", "line": 10 + i, "name": f"{tag}_fn{i}"}
            for i in range(depth)]


def history(n, stacks, base=B, stream=0):
    """n alloc/free entries on `stacks` (shared frame lists: pickle memoizes them)."""
    out = []
    for i in range(n):
        out.append({"action": "alloc" if i % 2 == 0 else "free_completed",
                    "addr": base + 512 * (i // 2 % 64), "size": 512 + i % 7,
                    "stream": stream, "time_us": 1700000000000000 + i,
                    "frames": stacks[i // 2 % len(stacks)]})
    return out


def snapshot(entries=(2500, 1, 0), segments=2):
    stacks = [frames(f"s{k}") for k in range(3)]
    segs = []
    for s in range(segments):
        segs.append({
            "device": 0, "address": B + s * 64 * MIB, "total_size": 2 * MIB,
            "allocated_size": 1024, "active_size": 1024, "requested_size": 1000, "stream": 0,
            "segment_type": "small", "segment_pool_id": (0, 0), "is_expandable": False,
            "frames": stacks[0],
            "blocks": [
                {"address": B + s * 64 * MIB, "size": 1024, "requested_size": 1000,
                 "state": "active_allocated", "frames": stacks[1]},
                {"address": B + s * 64 * MIB + 1024, "size": 2 * MIB - 1024,
                 "requested_size": 0, "state": "inactive", "frames": []}]})
    traces = [history(n, stacks, B + d * 1024 * MIB) for d, n in enumerate(entries)]
    return {"segments": segs, "device_traces": traces}


def untuple(v):
    if isinstance(v, (list, tuple)):
        return [untuple(x) for x in v]
    if isinstance(v, dict):
        return {k: untuple(x) for k, x in v.items()}
    return v


def run_modes(name, path):
    """(taken, one_by_one, again) from pickle_modes, or None after recording a problem."""
    r = subprocess.run([modes, path], capture_output=True, text=True)
    if r.returncode != 0:
        problems.append(f"{name}: the three ways of reading disagree:\n{r.stderr.strip()}")
        return None
    fields = dict(kv.split("=") for kv in r.stdout.split())
    return int(fields["taken"]), int(fields["one_by_one"]), int(fields["again"])


def content(name, path):
    out = os.path.join(work, f"{name}.json")
    r = subprocess.run([conv, path, out], capture_output=True, text=True)
    if r.returncode != 0:
        problems.append(f"{name}: convert failed: {r.stderr.strip()}")
        return None
    with open(out, encoding="utf-8") as f:
        return json.load(f)


def case(name, data, expected=None, again=0, min_taken=0, min_one_by_one=0):
    path = os.path.join(work, f"{name}.pickle")
    with open(path, "wb") as f:
        f.write(data)
    got = run_modes(name, path)
    if got is None:
        return
    taken, one_by_one, was_again = got
    if was_again != again:
        problems.append(f"{name}: streaming {'was' if was_again else 'was not'} redone "
                        f"(expected {'a second pass' if again else 'one pass'})")
    if not again and taken < min_taken:
        problems.append(f"{name}: only {taken} records streamed, expected {min_taken} or more")
    if not again and one_by_one < min_one_by_one:
        problems.append(f"{name}: only {one_by_one} records taken as soon as read, expected "
                        f"{min_one_by_one} or more")
    if expected is None:
        return
    got_json = content(name, path)
    if got_json is None:
        return
    if got_json != untuple(expected):
        problems.append(f"{name}: content differs from the input:\n"
                        f"  got      {json.dumps(got_json)[:400]}\n"
                        f"  expected {json.dumps(untuple(expected))[:400]}")


def dumps(obj, protocol, fast=False):
    f = io.BytesIO()
    p = pickle.Pickler(f, protocol=protocol)
    p.fast = fast  # no memo: every frame list and dict written out in full each time
    p.dump(obj)
    return f.getvalue()


# Python's own pickles: batches of 1000 (APPENDS), a one-entry history (APPEND), an empty one.
m = snapshot()
n_records = 2 + 2500 + 1
for proto in (2, 3, 4, 5):
    case(f"python_p{proto}", dumps(m, proto), m, min_taken=n_records)
case("python_p4_no_memo", dumps(m, 4, fast=True), m, min_taken=n_records)
case("python_p2_no_memo", dumps(m, 2, fast=True), m, min_taken=n_records)
one = snapshot(entries=(1,), segments=1)  # every list of one item: APPEND, not APPENDS
case("python_single_items_p4", dumps(one, 4), one, min_taken=2)
case("python_bare_segment_list_p2", dumps(one["segments"], 2), None, min_taken=1)

# Big enough (3 MB) for records to straddle the reader's 1 MiB window, frames not shared.
big = snapshot(entries=(20000,), segments=1)
for e in big["device_traces"][0]:
    e["frames"] = copy.deepcopy(e["frames"])
case("python_p4_3mb_unshared_frames", dumps(big, 4), big, min_taken=20001)

# A string longer than the window.
long_name = copy.deepcopy(one)
long_name["device_traces"][0][0]["frames"] = [{"filename": "x.py", "line": 1,
                                               "name": "n" * (3 * MIB)}]
case("python_p4_3mb_string", dumps(long_name, 4), long_name, min_taken=2)

# cuprof's own pickle of the same snapshot: its entries are handed over one by one as read, but
# for the three that bring a frame list not seen before.
src = os.path.join(work, "cuprof_own_src.pickle")
own = os.path.join(work, "cuprof_own.pickle")
with open(src, "wb") as f:
    f.write(dumps(m, 4))
if subprocess.run([conv, src, own], capture_output=True).returncode == 0:
    with open(own, "rb") as f:
        case("cuprof_own", f.read(), m, min_taken=n_records, min_one_by_one=2500 + 1 - 3)
else:
    problems.append("cuprof_own: convert failed")

# The same history list twice: the file refers to it again through the memo.
shared = snapshot(entries=(3,), segments=1)
shared["device_traces"] = [shared["device_traces"][0], shared["device_traces"][0]]
case("shared_history_list", dumps(shared, 4), shared, again=1)

# An entry whose frames are device_traces itself (recursive: that list was still being read).
loop = snapshot(entries=(3,), segments=1)
loop["device_traces"][0][0]["frames"] = loop["device_traces"]
case("entry_refers_to_device_traces", dumps(loop, 4), None, again=1)

# The segments list reused as a history (its records read as entries: skipped, warned).
reused = snapshot(entries=(), segments=2)
reused["device_traces"] = [reused["segments"]]
case("segments_list_as_history", dumps(reused, 4), None, again=1)


# Hand-made: "device_traces" twice in the root dict; Python keeps the last one.
def s(text):
    b = text.encode()
    return b"\x8c" + bytes([len(b)]) + b


def i(v):
    return b"J" + struct.pack("<i", v)


def entry(addr):
    return (b"}(" + s("action") + s("alloc") + s("addr") + i(addr) + s("size") + i(512)
            + s("stream") + i(0) + s("frames") + b"]u")


first = b"](" + entry(4096) + entry(8192) + b"e"
second = b"](" + entry(12288) + b"e"
dup = (b"\x80\x04}(" + s("segments") + b"]" + s("device_traces") + b"](" + first + b"e"
       + s("device_traces") + b"](" + second + b"eu.")
dup_want = {"segments": [], "device_traces": [[
    {"action": "alloc", "addr": 12288, "size": 512, "stream": 0, "frames": []}]]}
case("repeated_root_key", dup, dup_want, again=1)
# ... the last one empty; or holding a list built elsewhere (under "x", fetched from the memo).
dup_empty = (b"\x80\x04}(" + s("segments") + b"]" + s("device_traces") + b"](" + first + b"e"
             + s("device_traces") + b"]u.")
case("repeated_root_key_empty", dup_empty, {"segments": [], "device_traces": []}, again=1)
dup_other = (b"\x80\x04}(" + s("segments") + b"]" + s("x") + second + b"q\x00"
             + s("device_traces") + b"](" + first + b"e" + s("device_traces") + b"]h\x00au.")
case("repeated_root_key_other_list", dup_other, dup_want, again=1)
seg = (b"}(" + s("device") + i(0) + s("address") + i(4096) + s("total_size") + i(4096)
       + s("blocks") + b"]u")
dup_segs = b"\x80\x04}(" + s("segments") + b"](" + seg + b"e" + s("segments") + b"]u."
case("repeated_segments_key", dup_segs, {"segments": [], "device_traces": []}, again=1)

# A frame list filled through the memo after an entry that holds it was read: Python's value
# has the frame in both entries, so a streamed read that took the first entry early is redone.
def entry_head(addr):
    return b"}(" + s("action") + s("alloc") + s("addr") + i(addr) + s("size") + i(512)


frame = b"}(" + s("name") + s("f") + s("filename") + s("f.py") + s("line") + i(3) + b"u"
late = (b"\x80\x04}(" + s("segments") + b"]" + s("device_traces") + b"](]"
        + entry_head(4096) + s("frames") + b"]\x94ua"
        + entry_head(8192) + s("frames") + b"h\x00(" + frame + b"eua" + b"eu.")
late_frames = [{"name": "f", "filename": "f.py", "line": 3}]
late_want = {"segments": [], "device_traces": [[
    {"action": "alloc", "addr": 4096, "size": 512, "stream": 0, "frames": late_frames},
    {"action": "alloc", "addr": 8192, "size": 512, "stream": 0, "frames": late_frames}]]}
case("frames_filled_through_memo", late, late_want, again=1)

# Plain entries (as cuprof writes them: every value an int or a memo fetch) are handed over as
# soon as read. Whatever then does what the stack without them would not show is read again:
# their batch closed by LIST instead of APPENDS, an APPEND reaching below their MARK, the pickle
# stopping inside it; an entry memoized after it is read is not handed over at all. The first
# batch's entry stores the keys in the memo (a string is no plain value: it goes the long way).
def plain(addr):
    return b"}(h\x00h\x01h\x02" + i(addr) + b"h\x03" + i(512) + b"h\x04K\x00u"


def plain_want(*addrs):
    return [{"action": "alloc", "addr": a, "size": 512, "stream": 0, "frames": []}
            for a in addrs]


memo_keys = (b"(}(" + s("action") + b"q\x00" + s("alloc") + b"q\x01" + s("addr") + b"q\x02"
             + i(1024) + s("size") + b"q\x03" + i(512) + s("stream") + b"q\x04" + b"K\x00ue")


def history_of(batch, end=b"eu."):
    return (b"\x80\x04}(" + s("segments") + b"]" + s("device_traces") + b"](]" + memo_keys
            + batch + end)


def traces(*entries):
    return {"segments": [], "device_traces": [plain_want(1024) + list(entries)]}


case("plain_entries", history_of(b"(" + plain(4096) + plain(8192) + b"e"),
     traces(*plain_want(4096, 8192)), min_taken=3, min_one_by_one=2)
# A record that is not plain between plain ones: the list keeps its order.
case("plain_around_other", history_of(b"(" + plain(4096) + entry(8192) + plain(12288) + b"e"),
     traces(*plain_want(4096, 8192, 12288)), min_taken=4, min_one_by_one=2)
case("plain_memoized_after", history_of(b"(" + plain(4096) + b"q\x05" + plain(8192) + b"e"),
     traces(*plain_want(4096, 8192)), min_taken=3, min_one_by_one=1)
# (A list in a history is no entry: skipped, warned; Python's value cannot be compared.)
case("plain_batch_closed_by_list", history_of(b"(" + plain(4096) + plain(8192) + b"la"), None,
     again=1)
case("plain_then_append_below_mark", history_of(b"(" + plain(4096) + entry(8192) + b"ae"), None,
     again=1)
case("plain_then_stop", history_of(b"(" + plain(4096) + entry(8192), end=b"."), None, again=1)

# MEMOIZE stores at len(memo), which counts BINPUT's slots too (Python's pickle never mixes them,
# a hand-made file may): the second entry's action is the first's, memoized at 1.
mixed = (b"\x80\x04}(" + s("segments") + b"]" + s("device_traces") + b"](](}(" + s("action")
         + b"q\x03" + s("alloc") + b"\x94" + s("addr") + i(4096) + s("size") + i(512) + b"u}("
         + b"h\x03h\x01" + s("addr") + i(8192) + s("size") + i(512) + b"ueeu.")
case("memo_binput_then_memoize", mixed, {"segments": [], "device_traces": [[
    {"action": "alloc", "addr": a, "size": 512, "stream": 0, "frames": []} for a in (4096, 8192)]]})

# Truncated in the middle of the history: the same error all three ways.
data = dumps(big, 4)
case("truncated", data[:len(data) // 2])

for p in problems:
    print(p)
sys.exit(1 if problems else 0)
