#!/usr/bin/env python3
"""Writes the hand-made part of the seed corpora (tests/fuzz/corpus/): PyTorch-layout snapshots
as CPython's pickle writes them (protocols 2 and 4, shared frame lists), PyTorch 1.13's bare
list, JSON twins, configuration texts and allocator operation strings. The cuprof-*.pickle/json
seeds are copies of tests/golden outputs. Run once; the files are checked in."""
import json
import os
import pickle
import random

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(os.path.join(HERE, target, name), mode) as f:
        f.write(data)


frames = [{"filename": "train.py", "line": 10, "name": "forward"},
          {"filename": "model.py", "line": 3, "name": "linear"}]
blocks = [{"address": 0x7f0000000000, "size": 1024, "requested_size": 1000,
           "state": "active_allocated", "frames": frames},
          {"address": 0x7f0000000400, "size": 2096128, "requested_size": 0, "state": "inactive",
           "frames": []}]
seg = {"device": 0, "address": 0x7f0000000000, "total_size": 2097152, "allocated_size": 1024,
       "active_size": 1024, "requested_size": 1000, "stream": 0, "segment_type": "small",
       "segment_pool_id": (0, 0), "is_expandable": False, "frames": frames, "blocks": blocks}
trace = [{"action": "segment_alloc", "addr": 0x7f0000000000, "size": 2097152, "stream": 0,
          "time_us": 1, "frames": frames},
         {"action": "alloc", "addr": 0x7f0000000000, "size": 1024, "stream": 0, "time_us": 2,
          "frames": frames},
         {"action": "oom", "device_free": 12345, "size": 1 << 40, "stream": 0, "time_us": 3,
          "frames": frames}]
snap = {"segments": [seg], "device_traces": [trace],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                               "garbage_collection_threshold": 0.0,
                               "expandable_segments": False,
                               "release_lock_on_cudamalloc": False,
                               "pinned_num_register_threads": 1,
                               "pinned_use_cuda_host_register": False,
                               "roundup_power2_divisions": {"1": 0}}}
put("pickle", "torch-p4.pickle", pickle.dumps(snap, protocol=4))
put("pickle", "torch-p2.pickle", pickle.dumps(snap, protocol=2))
put("pickle", "torch-p5.pickle", pickle.dumps(snap, protocol=5))
put("pickle", "torch113-list.pickle", pickle.dumps([seg], protocol=2))
put("pickle", "nested.pickle", pickle.dumps([[[[[[1, 2.5, None, True, "x" * 300]]]]]], protocol=4))
put("pickle", "bigint.pickle", pickle.dumps({"segments": [], "n": 1 << 70, "m": -5}, protocol=3))
# Odd values (issue 12): PyTorch's size_t -1 line, a size past int64, a 20-byte int under a key
# cuprof does not use, negative counters; Python writes the big ones as LONG1.
odd = json.loads(json.dumps(dict(snap, segments=[dict(seg, segment_pool_id=[0, 0])])))
odd["segments"][0]["frames"] = [dict(frames[0], line=(1 << 64) - 1), frames[1]]
odd["segments"][0]["blocks"][1]["size"] = (1 << 63) + 5
odd["segments"][0]["mystery"] = (1 << 158) + 12345
odd["device_traces"][0][1]["compile_context"] = -(1 << 158)
odd["device_traces"][0][2]["size"] = -5
odd["cuprof"] = {"stats": [{"num_ooms": -1, "max_split_size": (1 << 64) - 1}],
                 "dropped_entries": [-3]}
put("pickle", "odd-values-p2.pickle", pickle.dumps(odd, protocol=2))
put("pickle", "odd-values-p4.pickle", pickle.dumps(odd, protocol=4))
put("json", "odd-values.json", json.dumps(odd))
put("json", "numbers.json", "[18446744073709551615, 18446744073709551616, -9223372036854775809,"
    " 1e3, 2.097152e7, -0.0, NaN, Infinity, -Infinity, %d]" % (10 ** 60))
put("json", "torch.json", json.dumps(dict(snap, segments=[dict(seg, segment_pool_id=[0, 0])])))
put("json", "torch113-list.json", json.dumps([dict(seg, segment_pool_id=[0, 0])]))
put("json", "nested.json", "[[[[[[1, 2.5e300, null, true, \"\\u00e9\\ud83d\\ude00\"]]]]]]")

configs = {
    "alloc-conf": "max_split_size_mb:128,roundup_power2_divisions:[256:1,512:2,>:8],"
                  "garbage_collection_threshold:0.6",
    "alloc-conf-2": "expandable_segments:True,per_process_memory_fraction:0.5,"
                    "release_threshold_mb:64,free_sync:events,roundup_power2_divisions:4",
    "env": "CUPROF_MODE=trace\nCUPROF_MAX_ENTRIES=100000\nCUPROF_STACKS=all\n"
           "CUPROF_ALLOC_CONF=max_split_size_mb:20\nCUPROF_SNAPSHOT=/tmp/x-%p-%r-%n.json\n"
           "CUPROF_DUMP_ON=exit,oom\nCUPROF_SIGNAL=SIGUSR2\nCUPROF_LOG=debug",
    "env-bad": "CUPROF_STACK_DEPTH=-1\nCUPROF_HISTORY=state\nCUPROF_FOO=1",
}
for name, text in configs.items():
    put("config", name, text)

rng = random.Random(7)
for i in range(8):
    put("allocator", f"ops-{i}", bytes(rng.randrange(256) for _ in range(64 + 96 * i)))
