#!/usr/bin/env python3
"""Snapshots laid out as PyTorch writes them (built here with Python's pickle, protocols 2, 4 and
5, frames shared so pickle memoizes them; plus the 2.0 and 1.13 layouts) must load into cuprof's
model and come out with the same content; write -> read -> write must give identical bytes.
Usage: test_pytorch_layouts.py SNAPSHOT_CONVERT CHECK_SNAPSHOT_DIR WORKDIR"""
import copy
import json
import os
import pickle
import subprocess
import sys

conv, checker_dir, work = sys.argv[1:4]
sys.path.insert(0, checker_dir)
import check_snapshot  # noqa: E402

os.makedirs(work, exist_ok=True)
problems = []
B = 0x7F3A00000000
MIB = 1 << 20


def frames(*names):
    return [{"filename": "/src/train.py", "line": 10 + i, "name": n} for i, n in enumerate(names)]


def modern():
    """PyTorch 2.x `_snapshot()`: shared frame lists, like its symbolizer produces."""
    fa = frames("forward", "main")
    fb = frames("backward", "main")
    fb[1] = fa[1]  # a shared frame dict inside two different lists
    segs = [{
        "device": 0, "address": B, "total_size": 2 * MIB, "allocated_size": 1024,
        "active_size": 1024, "requested_size": 1000, "stream": 0, "segment_type": "small",
        "segment_pool_id": (0, 0), "is_expandable": False, "frames": fa,
        "blocks": [
            {"address": B, "size": 1024, "requested_size": 1000, "state": "active_allocated",
             "frames": fa},
            {"address": B + 1024, "size": 2 * MIB - 1024, "requested_size": 0,
             "state": "inactive", "frames": []},
        ]}, {
        "device": 1, "address": B + 1024 * MIB, "total_size": 20 * MIB,
        "allocated_size": 0, "active_size": 4 * MIB, "requested_size": 3 * MIB,
        "stream": 94250000000000, "segment_type": "large", "segment_pool_id": (0, 0),
        "is_expandable": False, "frames": fb,
        "blocks": [
            {"address": B + 1024 * MIB, "size": 4 * MIB, "requested_size": 3 * MIB,
             "state": "active_pending_free", "frames": fb},
            {"address": B + 1028 * MIB, "size": 16 * MIB, "requested_size": 5 * MIB,
             "state": "inactive", "frames": []},
        ]}]
    traces = [[
        {"action": "segment_alloc", "addr": B, "size": 2 * MIB, "stream": 0,
         "time_us": 1700000000000001, "frames": fa},
        {"action": "alloc", "addr": B, "size": 1000, "stream": 0,
         "time_us": 1700000000000002, "frames": fa},
        {"action": "oom", "device_free": 1 << 33, "size": 80 * MIB, "stream": 0,
         "time_us": 1700000000000003, "frames": fb},
        {"action": "snapshot", "addr": 0, "size": 1024, "stream": 0, "time_us": 1700000000000004,
         "frames": []},
    ], [
        {"action": "segment_alloc", "addr": B + 1024 * MIB, "size": 20 * MIB,
         "stream": 94250000000000, "time_us": 1700000000000005, "frames": fb},
        {"action": "alloc", "addr": B + 1024 * MIB, "size": 3 * MIB, "stream": 94250000000000,
         "time_us": 1700000000000006, "frames": fb},
        {"action": "free_requested", "addr": B + 1024 * MIB, "size": 3 * MIB,
         "stream": 94250000000000, "time_us": 1700000000000007, "frames": fb},
    ]]
    settings = {
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False", "max_split_size": -1,
        "garbage_collection_threshold": 0.0, "expandable_segments": False,
        "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
        "pinned_use_cuda_host_register": False,
        "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)},
    }
    return {"segments": segs, "device_traces": traces, "allocator_settings": settings}


def untuple(v):
    if isinstance(v, (list, tuple)):
        return [untuple(x) for x in v]
    if isinstance(v, dict):
        return {k: untuple(x) for k, x in v.items()}
    return v


def run_conv(src, dst):
    r = subprocess.run([conv, src, dst], capture_output=True, text=True)
    if r.returncode != 0:
        problems.append(f"convert {os.path.basename(src)} -> {os.path.basename(dst)} failed: "
                        f"{r.stderr.strip()}")
        return False
    return True


def same_bytes(a, b):
    with open(a, "rb") as f, open(b, "rb") as g:
        return f.read() == g.read()


def case(name, obj, protocol, expected):
    src = os.path.join(work, f"{name}.pickle")
    with open(src, "wb") as f:
        pickle.dump(obj, f, protocol=protocol)
    out_json = os.path.join(work, f"{name}.out.json")
    a = os.path.join(work, f"{name}.a.pickle")
    b = os.path.join(work, f"{name}.b.pickle")
    c = os.path.join(work, f"{name}.c.json")
    if not (run_conv(src, out_json) and run_conv(src, a) and run_conv(a, b)
            and run_conv(out_json, c)):
        return
    with open(out_json, encoding="utf-8") as f:
        got = json.load(f)
    if got != untuple(expected):
        problems.append(f"{name}: content differs from the PyTorch-made input:\n"
                        f"  got      {json.dumps(got)[:600]}\n"
                        f"  expected {json.dumps(untuple(expected))[:600]}")
    if not same_bytes(a, b):
        problems.append(f"{name}: pickle write -> read -> write changed the bytes")
    if not same_bytes(out_json, c):
        problems.append(f"{name}: JSON write -> read -> write changed the bytes")
    with open(a, "rb") as f:
        if untuple(pickle.load(f)) != got:
            problems.append(f"{name}: cuprof's pickle and JSON differ")
    for p in check_snapshot.check(got):
        problems.append(f"{name}: check_snapshot: {p}")


# PyTorch 2.x with extra keys cuprof does not keep (they must be ignored, not fail).
m = modern()
for proto in (2, 4, 5):
    case(f"torch2x_p{proto}", m, proto, m)
extra = copy.deepcopy(m)
extra["external_annotations"] = [{"device": 0, "time_us": 5, "stage": "fwd"}]
extra["device_traces"][0][1]["compile_context"] = "N/A"
extra["segments"][0]["blocks"][0]["frames"][0]["fx_node_op"] = "call_function"
extra["device_traces"][0].append({"action": "some_future_action", "addr": 0, "size": 0,
                                  "stream": 0})
case("torch2x_extra_keys", extra, 4, m)

# PyTorch's size_t -1 for an unknown line (and a 20-byte int under a key cuprof does not use): read
# as unknown and written back as PyTorch's other unknown, 0, never as a huge number.
odd = copy.deepcopy(m)
odd["segments"][0]["blocks"][0]["frames"][0]["line"] = (1 << 64) - 1
odd["segments"][0]["mystery"] = (1 << 158) + 1
odd["device_traces"][0][1]["compile_context"] = -(1 << 158)
odd_want = copy.deepcopy(m)
odd_want["segments"][0]["blocks"][0]["frames"][0]["line"] = 0
for proto in (2, pickle.DEFAULT_PROTOCOL):
    case(f"torch2x_unknown_line_p{proto}", odd, proto, odd_want)

# PyTorch 2.1: no time_us, no allocator_settings.
m21 = modern()
del m21["allocator_settings"]
for t in m21["device_traces"]:
    for e in t:
        del e["time_us"]
case("torch21", m21, 4, m21)

# PyTorch 2.0: blocks have no address and no frames (a `history` list instead); segments have
# no is_expandable and no frames; no time_us.
fa = frames("forward", "main")
seg20 = {"device": 0, "address": B, "total_size": 2 * MIB, "allocated_size": 1024,
         "active_size": 1024, "requested_size": 1000, "stream": 0, "segment_type": "small",
         "blocks": [
             {"size": 1024, "requested_size": 1000, "state": "active_allocated",
              "history": [{"addr": B, "real_size": 1000, "frames": fa}]},
             {"size": 2 * MIB - 1024, "requested_size": 0, "state": "inactive"}]}
t20 = [[{"action": "alloc", "addr": B, "size": 1000, "stream": 0, "frames": fa}]]
exp20 = {"segments": [{
    "device": 0, "address": B, "total_size": 2 * MIB, "allocated_size": 1024, "active_size": 1024,
    "requested_size": 1000, "stream": 0, "segment_type": "small", "segment_pool_id": [0, 0],
    "is_expandable": False, "frames": [],
    "blocks": [{"address": B, "size": 1024, "requested_size": 1000, "state": "active_allocated",
                "frames": fa},
               {"address": B + 1024, "size": 2 * MIB - 1024, "requested_size": 0,
                "state": "inactive", "frames": []}]}],
    "device_traces": [[{"action": "alloc", "addr": B, "size": 1000, "stream": 0,
                        "frames": fa}]]}
case("torch20", {"segments": [seg20], "device_traces": t20}, 4, exp20)

# PyTorch 1.13: a bare list of segments; blocks with history[0].real_size (no requested_size).
seg113 = {"device": 0, "address": B, "total_size": 2 * MIB, "allocated_size": 1024,
          "active_size": 1024, "stream": 0, "segment_type": "small",
          "blocks": [
              {"size": 1024, "state": "active_allocated",
               "history": [{"addr": B, "real_size": 1000, "frames": fa}]},
              {"size": 2 * MIB - 1024, "state": "inactive", "history": []}]}
exp113 = copy.deepcopy(exp20)
exp113["device_traces"] = [[]]
# MemoryViz's rule for legacy blocks: requested_size is history[0].real_size, else the size.
exp113["segments"][0]["blocks"][1]["requested_size"] = 2 * MIB - 1024
case("torch113", [seg113], 2, exp113)

for p in problems:
    print(p)
sys.exit(1 if problems else 0)
