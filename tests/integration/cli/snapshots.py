"""Hand-built snapshots in PyTorch 2.x's `_snapshot()` layout, and an independent Python model
of what `cuprof` must compute from them (MemoryViz's replay rules, written from the spec).

Nothing here imports cuprof code: the expected numbers come from this file only.
"""

MiB = 1 << 20
BASE = 0x7F0000000000


def frame(name, filename, line):
    return {"name": name, "filename": filename, "line": line}


F_PARAMS = [frame("alloc_params", "model.c", 10), frame("main", "main.c", 5)]
F_ACT = [frame("forward", "model.c", 42), frame("train_step", "train.c", 7),
         frame("main", "main.c", 9)]
F_SMALL = [frame("bias_add", "ops.c", 3), frame("forward", "model.c", 44),
           frame("main", "main.c", 9)]
F_TMP = [frame("workspace", "ops.c", 77), frame("main", "main.c", 11)]
F_OOM = [frame("huge", "ops.c", 90), frame("main", "main.c", 12)]

S1 = BASE                # 20 MiB large segment
S2 = BASE + 0x2000000    # 2 MiB small segment


def entry(action, addr, size, frames=None, stream=0, t=0, device_free=None):
    e = {"action": action, "size": size, "stream": stream, "time_us": 1_700_000_000_000_000 + t,
         "frames": frames if frames is not None else []}
    if action == "oom":
        e["device_free"] = device_free
    else:
        e["addr"] = addr
    return e


def full_trace():
    """A complete history (from an empty device) whose end state is `segments()`."""
    return [
        entry("segment_alloc", S1, 20 * MiB, F_ACT, t=0),
        entry("alloc", S1, 12 * MiB, F_TMP, t=10),                        # 0..12 MiB
        entry("alloc", S1 + 12 * MiB, 8 * MiB - 100, F_ACT, t=20),        # live peak here
        entry("free_requested", S1, 12 * MiB, F_TMP, t=30),
        entry("free_completed", S1, 12 * MiB, F_TMP, t=31),
        entry("segment_alloc", S2, 2 * MiB, F_SMALL, t=40),               # reserved peak
        entry("alloc", S2, 300, F_SMALL, t=50),
        entry("alloc", S2 + 512, 1000, F_SMALL, t=60),
        entry("alloc", S2 + 1536, 2000, F_TMP, t=70),
        entry("free_requested", S2 + 1536, 2000, F_TMP, t=80),
        entry("free_completed", S2 + 1536, 2000, F_TMP, t=81),
        entry("oom", 0, 40 * MiB, F_OOM, t=90, device_free=10 * MiB),
    ]


def block(addr, size, requested, state, frames):
    return {"address": addr, "size": size, "requested_size": requested, "state": state,
            "frames": frames if state != "inactive" else []}


def segments():
    s1_blocks = [block(S1, 12 * MiB, 12 * MiB, "inactive", []),
                 block(S1 + 12 * MiB, 8 * MiB, 8 * MiB - 100, "active_allocated", F_ACT)]
    s2_blocks = [block(S2, 512, 300, "active_allocated", F_SMALL),
                 block(S2 + 512, 1024, 1000, "active_allocated", F_SMALL),
                 block(S2 + 1536, 2 * MiB - 1536, 2000, "inactive", [])]

    def seg(addr, total, kind, blocks, frames):
        alloc = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
        active = sum(b["size"] for b in blocks if b["state"] != "inactive")
        req = sum(b["requested_size"] for b in blocks if b["state"] != "inactive")
        return {"device": 0, "address": addr, "total_size": total, "allocated_size": alloc,
                "active_size": active, "requested_size": req, "stream": 0, "segment_type": kind,
                "segment_pool_id": (0, 0), "is_expandable": False, "frames": frames,
                "blocks": blocks}
    return [seg(S1, 20 * MiB, "large", s1_blocks, F_ACT),
            seg(S2, 2 * MiB, "small", s2_blocks, F_SMALL)]


def allocator_settings(conf=""):
    return {"PYTORCH_CUDA_ALLOC_CONF": conf, "max_split_size": -1,
            "garbage_collection_threshold": 0.0, "expandable_segments": False,
            "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False,
            "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)}}


def pytorch_snapshot(mid_run=False):
    trace = full_trace()
    if mid_run:
        trace = trace[5:]   # the ring dropped the first five entries
    return {"segments": segments(), "device_traces": [trace],
            "allocator_settings": allocator_settings()}


# ---- The independent model (MemoryViz's rules, from the spec) ----

def live_blocks(snap, device, at):
    """addr -> (requested size, frames) live after `at` entries (None: the end)."""
    live = {}
    for seg in snap["segments"]:
        if seg["device"] != device:
            continue
        for b in seg["blocks"]:
            if b["state"] in ("active_allocated", "active_pending_free"):
                live[b["address"]] = (b["requested_size"], b["frames"])
    trace = snap["device_traces"][device]
    for e in reversed(trace):
        if e["action"] == "alloc":
            live.pop(e["addr"], None)
        elif e["action"] == "free_completed":
            live[e["addr"]] = (e["size"], e["frames"])
    if at is None:
        at = len(trace)
    for e in trace[:at]:
        if e["action"] == "alloc":
            live[e["addr"]] = (e["size"], e["frames"])
        elif e["action"] == "free_completed":
            live.pop(e["addr"], None)
    return live


def series(snap, device):
    """[(live, reserved)] after 0..n entries."""
    trace = snap["device_traces"][device]
    reserved = sum(s["total_size"] for s in snap["segments"] if s["device"] == device)
    for e in trace:
        if e["action"] in ("segment_alloc", "segment_map"):
            reserved -= e["size"]
        elif e["action"] in ("segment_free", "segment_unmap"):
            reserved += e["size"]
    live = live_blocks(snap, device, 0)
    cur = sum(v[0] for v in live.values())
    out = [(cur, reserved)]
    for e in trace:
        if e["action"] == "alloc":
            if e["addr"] in live:
                cur -= live[e["addr"]][0]
            live[e["addr"]] = (e["size"], e["frames"])
            cur += e["size"]
        elif e["action"] == "free_completed" and e["addr"] in live:
            cur -= live.pop(e["addr"])[0]
        elif e["action"] in ("segment_alloc", "segment_map"):
            reserved += e["size"]
        elif e["action"] in ("segment_free", "segment_unmap"):
            reserved -= e["size"]
        out.append((cur, reserved))
    return out


def peak(values):
    """(value, index of its first occurrence)."""
    best = 0
    for i, v in enumerate(values):
        if v > values[best]:
            best = i
    return values[best], best


def format_size(n):
    """PyTorch's format_size."""
    if n < 1024:
        return "%d bytes" % n
    if n < 1048576:
        return "%.2f KiB" % (n / 1024)
    if n < 1073741824:
        return "%.2f MiB" % (n / 1048576)
    return "%.2f GiB" % (n / 1073741824)


def frame_text(f):
    if f["filename"] in ("", "??"):
        return f["name"]
    line = f["line"]
    if not isinstance(line, int) or not 1 <= line <= 2**31 - 1:
        return "%s (%s)" % (f["name"], f["filename"])   # unknown: 0 (PyTorch), size_t -1, ...
    return "%s (%s:%d)" % (f["name"], f["filename"], line)


def leaks_by_frames(snap):
    """frames-tuple -> [bytes, requested, blocks] over active_allocated blocks."""
    out = {}
    for seg in snap["segments"]:
        for b in seg["blocks"]:
            if b["state"] != "active_allocated":
                continue
            key = (seg["device"], tuple(frame_text(f) for f in b["frames"]))
            acc = out.setdefault(key, [0, 0, 0])
            acc[0] += b["size"]
            acc[1] += b["requested_size"]
            acc[2] += 1
    return out


# ---- Call sites as reports show them: the allocation machinery's frames hidden ----

def _base(path):
    return path.rsplit("/", 1)[-1]


def _in_folder(path, folder):
    return path.startswith(folder) or ("/" + folder) in path


def is_python_frame(f):
    return f["filename"].endswith(".py")


def machinery(f):
    """Frames never the user's: cuprof, CUDA, PyTorch's allocator, libc start-up (the README's
    list)."""
    name, path = f["name"], f["filename"]
    if _base(path).startswith(("libcuprof", "libcuda")) or _in_folder(path, "tests/sim/"):
        return True
    if name.startswith(("cudart::", "__cudart")):
        return True
    for api in ("cuda", "cu"):
        if name.startswith(api) and name[len(api):len(api) + 1].isupper():
            return True
    if any(s in name for s in ("unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp",
                               "CUDACachingAllocator::", "DeviceCachingAllocator::",
                               "wrapper_CUDA_memory_format_empty", "wrapper_CUDA__empty")):
        return True
    if name.startswith(("torch::unwind::", "at::empty", "at::detail::empty_", "at::native::empty_",
                        "at::cuda::empty", "at::_ops::empty", "c10::Dispatcher::", "c10::impl::",
                        "c10::KernelFunction::", "c10::BoxedKernel::",
                        "c10::callUnboxedKernelFunction", "torch::autograd::THPVariable_")):
        return True
    if any(s in path for s in ("core/boxing", "/Register", "/Redispatch")):
        return True
    return name in ("_start", "start_thread", "clone3") or \
        name.startswith(("__libc_start_", "__clone"))


def interpreter(f):
    """The Python interpreter's C frames (hidden only where Python frames stand for them)."""
    name, path = f["name"], f["filename"]
    base = _base(path)
    if base.startswith("python") and all(c in "0123456789.dmtu" for c in base[6:]):
        return True
    if base.startswith(("libpython", "libffi", "_ctypes")):
        return True
    if any(_in_folder(path, d) for d in ("Python/", "Objects/", "Modules/", "Include/", "Parser/",
                                         "Programs/")):
        return True
    return name in ("Py_RunMain", "Py_BytesMain") or name.startswith((
        "_PyEval_", "PyEval_", "_PyObject_", "PyObject_", "_PyFunction_", "PyFunction_",
        "_PyVectorcall_", "PyVectorcall_", "_PyCFunction", "PyCFunction_", "method_vectorcall",
        "cfunction_", "slot_tp_call", "_PyRun_", "PyRun_", "run_mod", "run_eval_code_obj",
        "pymain_", "ffi_call", "_ctypes_", "PyCFuncPtr_call"))


def user_frames(frames):
    """The frames a report shows by default; all of them when every one would be hidden."""
    python = any(is_python_frame(f) for f in frames)
    kept = [f for f in frames if is_python_frame(f) or
            not (machinery(f) or (python and interpreter(f)))]
    return kept or frames
