#!/usr/bin/env python3
"""Independent consistency checker for memory snapshots (PyTorch's `_snapshot()` layout plus
cuprof's `cuprof` section), written from the format description, not from the C code.

CLI:    check_snapshot.py FILE [--complete-history]   (exit 0 = consistent, 1 = problems, 2 = usage)
        prints one line per problem: "FILE: problem".
Import: load(path) -> dict;  check(snapshot, complete_history=False) -> list of problem strings.

Checks: every key PyTorch writes, with its type; frames well-formed; per segment the block sizes
tile total_size from the segment address and the allocated/active/requested sums agree; every
active block lies inside a segment of its device; device_traces replayed backwards from the
segments exactly as MemoryViz's "Allocator State History" does (no event refers to an unknown
block or segment; with --complete-history the state before the first event is empty); the
cuprof memory_stats agree with the block table (a run of blocks tagged cuprof_pool "nvtx", a
program's own pool seen inside, counting as the one block cuprof handed out).
"""
import json
import pickle
import sys

SEGMENT_KEYS = {
    "device": int, "address": int, "total_size": int, "allocated_size": int,
    "active_size": int, "requested_size": int, "stream": int, "segment_type": str,
    "segment_pool_id": (tuple, list), "is_expandable": bool, "frames": list, "blocks": list,
}
BLOCK_KEYS = {"address": int, "size": int, "requested_size": int, "state": str, "frames": list}
ENTRY_KEYS = {"action": str, "size": int, "stream": int, "frames": list}
ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom", "snapshot", "annotate"}
STATES = {"inactive", "active_allocated", "active_pending_free"}
SETTINGS_KEYS = {
    "PYTORCH_CUDA_ALLOC_CONF": str, "max_split_size": int, "garbage_collection_threshold": float,
    "expandable_segments": bool, "release_lock_on_cudamalloc": bool,
    "pinned_num_register_threads": int, "pinned_use_cuda_host_register": bool,
    "roundup_power2_divisions": dict,
}
CUPROF_KEYS = {"version": str, "mode": str, "config": dict, "pid": int, "rank": int, "host": str,
               "argv": list, "stats": list, "dropped_entries": list,
               "trace_alloc_overflowed": bool}


def load(path):
    """Loads a pickle or JSON snapshot (pickle files start with the PROTO byte 0x80)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:1] == b"\x80":
        return pickle.loads(data)
    return json.loads(data.decode("utf-8"))


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _check_keys(obj, spec, where, problems, exact=False):
    if not isinstance(obj, dict):
        problems.append(f"{where}: expected a dict, got {type(obj).__name__}")
        return False
    for key, typ in spec.items():
        if key not in obj:
            problems.append(f"{where}: missing key {key!r}")
            continue
        v = obj[key]
        ok = _is_int(v) if typ is int else isinstance(v, typ)
        if not ok:
            problems.append(f"{where}: {key!r} is {type(v).__name__}, expected "
                            f"{getattr(typ, '__name__', typ)}")
    if exact:
        for key in obj:
            if key not in spec:
                problems.append(f"{where}: unexpected key {key!r}")
    return True


def _check_frames(frames, where, problems):
    if not isinstance(frames, list):
        problems.append(f"{where}: frames is not a list")
        return
    for i, fr in enumerate(frames):
        if (not isinstance(fr, dict) or not isinstance(fr.get("name"), str)
                or not isinstance(fr.get("filename"), str) or not _is_int(fr.get("line"))):
            problems.append(f"{where}: frame {i} is not {{name: str, filename: str, line: int}}")


def _check_segments(snap, problems):
    segs = snap.get("segments")
    if not isinstance(segs, list):
        problems.append("segments: missing or not a list")
        return []
    prev = None
    for si, seg in enumerate(segs):
        w = f"segments[{si}]"
        if not _check_keys(seg, SEGMENT_KEYS, w, problems):
            continue
        if seg.get("segment_type") not in ("small", "large"):
            problems.append(f"{w}: segment_type {seg.get('segment_type')!r}")
        pid = seg.get("segment_pool_id")
        if not (isinstance(pid, (tuple, list)) and len(pid) == 2 and all(map(_is_int, pid))):
            problems.append(f"{w}: segment_pool_id is not a pair of ints")
        _check_frames(seg.get("frames", []), w, problems)
        key = (seg.get("device"), seg.get("address"))
        if prev is not None and prev[0] == key[0] and prev[1] > key[1]:
            problems.append(f"{w}: segments of device {key[0]} not sorted by address")
        if prev is not None and prev[0] == key[0] and prev[2] > key[1]:
            problems.append(f"{w}: overlaps the previous segment")
        if _is_int(seg.get("address")) and _is_int(seg.get("total_size")):
            prev = (key[0], key[1], key[1] + seg["total_size"])
        addr = seg.get("address")
        total = alloc = active = requested = 0
        for bi, blk in enumerate(seg.get("blocks", [])):
            bw = f"{w}.blocks[{bi}]"
            if not _check_keys(blk, BLOCK_KEYS, bw, problems):
                continue
            if blk.get("state") not in STATES:
                problems.append(f"{bw}: state {blk.get('state')!r}")
            _check_frames(blk.get("frames", []), bw, problems)
            if _is_int(addr) and blk.get("address") != addr + total:
                problems.append(f"{bw}: address {blk.get('address'):#x} is not segment address "
                                f"+ earlier block sizes ({addr + total:#x})")
            size = blk.get("size", 0)
            if not _is_int(size) or size <= 0:
                problems.append(f"{bw}: size {size!r} is not positive")
                continue
            total += size
            if blk.get("state") == "active_allocated":
                alloc += size
            if blk.get("state") in ("active_allocated", "active_pending_free"):
                active += size
                requested += blk.get("requested_size", 0)
                if blk.get("requested_size", 0) > size:
                    problems.append(f"{bw}: requested_size exceeds size")
        for name, val in (("total_size", total), ("allocated_size", alloc),
                          ("active_size", active), ("requested_size", requested)):
            if seg.get(name) != val:
                problems.append(f"{w}: {name} {seg.get(name)} but its blocks sum to {val}")
    return segs


def _replay(snap, segs, device, trace, complete, dropped, problems):
    """MemoryViz's segment view: start from the snapshot and undo the events, newest first."""
    w = f"device_traces[{device}]"
    segments = {}  # address -> size
    blocks = {}  # address -> [size, pending_free]
    for seg in segs:
        if seg.get("device") != device:
            continue
        segments[seg["address"]] = seg["total_size"]
        for blk in seg.get("blocks", []):
            if blk.get("state") in ("active_allocated", "active_pending_free"):
                blocks[blk["address"]] = [blk["size"],
                                          blk["state"] == "active_pending_free"]

    def inside(addr):
        return any(a <= addr < a + s for a, s in segments.items())

    for i in range(len(trace) - 1, -1, -1):
        ev = trace[i]
        act, addr = ev.get("action"), ev.get("addr")
        ew = f"{w}[{i}] {act} {addr:#x}" if _is_int(addr) else f"{w}[{i}] {act}"
        if act == "alloc":
            if addr not in blocks:
                problems.append(f"{ew}: alloc of a block that is not live after it")
            else:
                del blocks[addr]
        elif act == "free_requested":
            if addr not in blocks:
                problems.append(f"{ew}: free_requested of an unknown block")
            else:
                blocks[addr][1] = False
        elif act == "free_completed":
            if addr in blocks:
                problems.append(f"{ew}: free_completed of a block that is still live")
            elif not inside(addr):
                problems.append(f"{ew}: free_completed outside every segment")
            blocks[addr] = [ev.get("size", 0), True]
        elif act == "segment_alloc":
            if addr not in segments:
                problems.append(f"{ew}: segment_alloc of a segment that is not there after it")
                continue
            end = addr + segments.pop(addr)
            live = [b for b in blocks if addr <= b < end]
            if live:
                problems.append(f"{ew}: segment allocated while blocks {live[0]:#x}.. were live")
        elif act == "segment_free":
            if addr in segments:
                problems.append(f"{ew}: segment_free of a segment that still exists")
            segments[addr] = ev.get("size", 0)
        elif act == "segment_map":
            # Undone as MemoryViz does: the mapped pages leave the run that holds them.
            size = ev.get("size", 0)
            hold = [a for a, n in segments.items() if a <= addr and addr + size <= a + n]
            if not hold:
                problems.append(f"{ew}: segment_map of pages not mapped after it")
                continue
            a = hold[0]
            n = segments.pop(a)
            if addr > a:
                segments[a] = addr - a
            if addr + size < a + n:
                segments[addr + size] = a + n - addr - size
            live = [b for b in blocks if addr <= b < addr + size]
            if live:
                problems.append(f"{ew}: pages mapped while blocks {live[0]:#x}.. were live")
        elif act == "segment_unmap":
            # Undone: the pages were mapped, joining the runs on either side.
            size = ev.get("size", 0)
            if any(a < addr + size and addr < a + n for a, n in segments.items()):
                problems.append(f"{ew}: segment_unmap of pages still mapped after it")
                continue
            start, end = addr, addr + size
            for a, n in list(segments.items()):
                if a + n == start:
                    start = a
                    del segments[a]
                elif a == end:
                    end = a + n
                    del segments[a]
            segments[start] = end - start
        elif act in ("oom", "snapshot", "annotate"):
            pass
        else:
            problems.append(f"{ew}: unknown action")
        if act in ("alloc", "free_requested", "free_completed") and not inside(addr):
            problems.append(f"{ew}: block outside every segment of device {device}")
    if complete and not dropped:
        if blocks:
            problems.append(f"{w}: history is complete but blocks {sorted(blocks)[0]:#x}.. "
                            "were live before the first event")
        if segments:
            problems.append(f"{w}: history is complete but segment {sorted(segments)[0]:#x} "
                            "existed before the first event")


def _check_trace_entries(trace, device, problems):
    pending = set()
    for i, ev in enumerate(trace):
        w = f"device_traces[{device}][{i}]"
        if not _check_keys(ev, ENTRY_KEYS, w, problems):
            continue
        act = ev.get("action")
        if act not in ACTIONS:
            problems.append(f"{w}: unknown action {act!r}")
        if act == "oom":
            if not _is_int(ev.get("device_free")):
                problems.append(f"{w}: oom without an int device_free")
        elif not _is_int(ev.get("addr")):
            problems.append(f"{w}: missing int addr")
        if "time_us" in ev and not _is_int(ev["time_us"]):
            problems.append(f"{w}: time_us is not an int")
        if act == "annotate" and not isinstance(ev.get("user_metadata"), str):
            problems.append(f"{w}: annotate without a user_metadata string")
        _check_frames(ev.get("frames", []), w, problems)
        if act == "free_requested":
            pending.add(ev.get("addr"))
        elif act == "free_completed":
            pending.discard(ev.get("addr"))


STAT_FIELDS = ("allocation", "allocated_bytes", "active", "active_bytes", "requested_bytes",
               "segment", "reserved_bytes", "inactive_split", "inactive_split_bytes")


# PyTorch's unsplit large-pool remainder (at most 1 MiB) plus its 512-byte rounding: how much
# larger than its request a block cuprof handed out can be.
BLOCK_SLACK = (1 << 20) + 511


def _blocks_as_allocated(blocks):
    """The blocks as cuprof's allocator holds them: a run of consecutive blocks tagged
    cuprof_pool "nvtx" is the program's own pool (NVTX regions and the gaps between them) inside
    ONE block cuprof handed out; it stands for that block, allocated, with the run's total size.
    Yields (state, size, requested_size, is_pool_run)."""
    run = 0
    for blk in blocks:
        if blk.get("cuprof_pool") == "nvtx":
            run += blk.get("size", 0)
            continue
        if run:
            yield "active_allocated", run, run, True
            run = 0
        yield blk.get("state"), blk.get("size", 0), blk.get("requested_size", 0), False
    if run:
        yield "active_allocated", run, run, True


def _table_stats(segs, device):
    """The counters the block table implies, and per key how much lower the true value may be
    (a program pool's block was requested with up to BLOCK_SLACK bytes less than its size)."""
    out = {f"{k}.{p}.current": 0 for k in STAT_FIELDS for p in ("all", "small_pool", "large_pool")}
    slack = {k: 0 for k in out}

    def add(key, pool, n, under=0):
        for k in (f"{key}.all.current", f"{key}.{pool}.current"):
            out[k] += n
            slack[k] += under

    for seg in segs:
        if seg.get("device") != device:
            continue
        pool = "small_pool" if seg.get("segment_type") == "small" else "large_pool"
        if not seg.get("is_expandable"):
            add("segment", pool, 1)
        add("reserved_bytes", pool, seg.get("total_size", 0))
        blocks = list(_blocks_as_allocated(seg.get("blocks", [])))
        for st, size, requested, pool_run in blocks:
            if st == "active_allocated":
                add("allocation", pool, 1)
                add("allocated_bytes", pool, size)
            if st in ("active_allocated", "active_pending_free"):
                add("active", pool, 1)
                add("active_bytes", pool, size)
                add("requested_bytes", pool, requested, BLOCK_SLACK if pool_run else 0)
            elif len(blocks) > 1 and not seg.get("is_expandable"):
                add("inactive_split", pool, 1)
                add("inactive_split_bytes", pool, size)
    return out, slack


def _check_cuprof(snap, segs, ndev, problems):
    c = snap["cuprof"]
    if not _check_keys(c, CUPROF_KEYS, "cuprof", problems):
        return
    if not all(isinstance(a, str) for a in c.get("argv", [])):
        problems.append("cuprof.argv: not a list of strings")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in c.get("config", {}).items()):
        problems.append("cuprof.config: not a dict of strings")
    drops = c.get("dropped_entries", [])
    if len(drops) != ndev or not all(map(_is_int, drops)):
        problems.append(f"cuprof.dropped_entries: expected {ndev} ints")
    elif c.get("trace_alloc_overflowed") != any(d > 0 for d in drops):
        problems.append("cuprof.trace_alloc_overflowed disagrees with dropped_entries")
    # Since 2026-12: whether the allocator took a smaller segment before an OOM (absent before).
    if "fit_segment_on_oom" in c and not isinstance(c["fit_segment_on_oom"], bool):
        problems.append("cuprof.fit_segment_on_oom: not a bool")
    stats = c.get("stats", [])
    if len(stats) != ndev:
        problems.append(f"cuprof.stats: {len(stats)} dicts for {ndev} devices")
    for d, st in enumerate(stats):
        if not isinstance(st, dict) or not st:
            continue
        if list(st) != sorted(st):
            problems.append(f"cuprof.stats[{d}]: keys not sorted as torch.cuda.memory_stats()")
        want, slack = _table_stats(segs, d)
        for key, value in want.items():
            if key in st and not value - slack[key] <= st[key] <= value:
                says = value if not slack[key] else f"{value - slack[key]}..{value}"
                problems.append(f"cuprof.stats[{d}]: {key} is {st[key]} but the block table "
                                f"says {says}")


def check(snap, complete_history=False):
    """Returns a list of problems (empty when the snapshot is consistent)."""
    problems = []
    if isinstance(snap, list):  # PyTorch 1.13: a bare list of segments
        snap = {"segments": snap}
    if not isinstance(snap, dict):
        return ["top level is neither a dict nor a list"]
    segs = _check_segments(snap, problems)
    traces = snap.get("device_traces", [])
    if not isinstance(traces, list) or not all(isinstance(t, list) for t in traces):
        problems.append("device_traces: not a list of lists")
        traces = []
    ndev = max([len(traces)] + [s.get("device", 0) + 1 for s in segs if isinstance(s, dict)])
    drops = [0] * ndev
    if isinstance(snap.get("cuprof"), dict):
        d = snap["cuprof"].get("dropped_entries", [])
        if isinstance(d, list) and len(d) == ndev:
            drops = d
    for d, trace in enumerate(traces):
        before = len(problems)
        _check_trace_entries(trace, d, problems)
        if len(problems) == before:
            _replay(snap, segs, d, trace, complete_history, drops[d], problems)
    if "allocator_settings" in snap:
        a = snap["allocator_settings"]
        if _check_keys(a, SETTINGS_KEYS, "allocator_settings", problems):
            keys = [str(1 << i) for i in range(16)]
            r = a["roundup_power2_divisions"]
            if list(r) != keys or not all(map(_is_int, r.values())):
                problems.append("allocator_settings.roundup_power2_divisions: keys are not "
                                "\"1\"..\"32768\" with int values")
    if "cuprof" in snap:
        _check_cuprof(snap, segs, ndev, problems)
    return problems


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    flags = [a for a in argv[1:] if a.startswith("--")]
    if len(args) != 1 or any(f != "--complete-history" for f in flags):
        print("usage: check_snapshot.py FILE [--complete-history]", file=sys.stderr)
        return 2
    try:
        snap = load(args[0])
    except Exception as exc:  # noqa: BLE001 - any load failure is one reported problem
        print(f"{args[0]}: cannot load: {exc}")
        return 1
    problems = check(snap, "--complete-history" in flags)
    for p in problems:
        print(f"{args[0]}: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
