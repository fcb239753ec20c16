#!/usr/bin/env python3
"""Calls that take device memory for the driver itself (driver_memory_app.c on a 64 MiB simulated
device): kernel code under lazy loading (a module's function, a library's kernel, module or
function, the first launch of a kernel by every launch call, directly and through the pointers
cuGetProcAddress hands out), texture arrays (mipmapped ones too, directly, looked up and through
the runtime), a larger thread stack, graphs' memory nodes (at a graph's first launch or upload), a
context of its own (each ABI), and under eager loading every module and library load, each right
after the program allocated all the free memory and freed it again. Without cuprof every call
succeeds; under cuprof's cache the freed memory stays cached, so the cache must hand it back when
the driver refuses one of them for lack of memory, and the call is made again. The output is the
program's own in cache mode, with expandable segments, in trace and in off mode; the cache-mode
history shows one release per call that needed memory, and one line says so. A refusal that stands
(held: the program keeps the memory, then asks for a function of a module loaded before) reaches
the program unchanged in every mode; cuprof says so once and writes its first-OOM snapshot, named
after the call. scripts/gpu-check runs the same program on a real GPU, with the kernel nvcc built
beside it (driver_memory_kernel.fatbin, which the simulated driver takes as any bytes).

Usage: test_driver_memory.py --lib LIB --ld-path PATH APP
"""
import os
import pickle
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/)

SIM = {"SIMCUDA_MEM": "64M"}
# The lazy and eager calls: each context takes a 2 MiB page of its own, as a real one takes device
# memory (the primary context one too).
SIM_CONTEXTS = dict(SIM, SIMCUDA_CONTEXT_MEM="2M")
LAZY = ["module_load", "module_get_function", "kernel_get_function", "library_load",
        "library_get_module", "launch", "launch_ex", "launch_cooperative", "launch_looked_up",
        "launch_ptsz", "launch_ex_ptsz", "launch_cooperative_ptsz", "array_create",
        "array_3d_create", "mipmapped_array_create", "mipmapped_array_create_looked_up",
        "runtime_malloc_array", "runtime_malloc_mipmapped_array", "stack_limit", "graph_launch",
        "graph_upload", "graph_launch_ptsz", "graph_upload_ptsz", "ctx_create",
        "ctx_create_v2_looked_up", "ctx_create_v3_looked_up"]
EAGER = ["module_load_eager", "module_load_data_eager", "module_load_data_ex_eager",
         "module_load_fat_binary_eager", "library_load_eager", "library_load_from_file_eager"]
# The calls made right after a fill (the lazy loads take no memory: no fill before them).
NEED = {"": len(LAZY) - 2, "eager": len(EAGER)}


MODES = (("cache", {}), ("expandable", {"CUPROF_ALLOC_CONF": "expandable_segments:True"}),
         ("trace", {"CUPROF_MODE": "trace"}), ("off", {"CUPROF_MODE": "off"}))


def under_cuprof(a, argv, also=None, sim=SIM):
    """argv under cuprof in each of MODES: [(mode, result, snapshot histories oldest first)].
    also(mode, result, snapshot paths), when given, looks at the files before they go."""
    out = []
    for what, extra in MODES:
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(sim, CUPROF_SNAPSHOT=os.path.join(tmp, "s-%n.pickle"), **extra)
            r = shimrun.run_shim(argv, a.ld_path, preload=a.lib, extra_env=env, timeout=60)
            traces = []
            paths = shimrun.dumps(tmp, "s-*.pickle")
            for path in paths:
                with open(path, "rb") as f:
                    traces.append(pickle.load(f)["device_traces"][0])
            if also is not None:
                also(what, r, paths)
        out.append((what, r, traces))
    return out


def main():
    a = shimrun.app_arguments(options=("--cuprof",))
    check = shimrun.Checks()
    for arg, names in (("", LAZY), ("eager", EAGER)):
        argv = [a.app] + ([arg] if arg else [])
        want = "".join("%s=CUDA_SUCCESS\n" % n for n in names)
        alone = shimrun.run_shim(argv, a.ld_path, extra_env=SIM_CONTEXTS, timeout=60)
        check(alone.returncode == 0 and alone.stdout == want,
              f"{arg or 'lazy'} alone: {alone.returncode} {alone.stdout!r} {alone.stderr!r}")
        for what, r, traces in under_cuprof(a, argv, sim=SIM_CONTEXTS):
            label = f"{arg or 'lazy'} {what}"
            check(r.returncode == 0 and r.stdout == want,
                  f"{label}: exit {r.returncode}: {r.stdout!r}; stderr {r.stderr!r}")
            lines = [l for l in r.stderr.splitlines() if "found no device memory" in l]
            released = what in ("cache", "expandable")
            check(len(lines) == (1 if released else 0), f"{label}: release lines {lines}")
            if what != "cache":
                continue
            check(len(traces) == 1, f"{label}: {len(traces)} snapshots")
            # (The graphs' own allocations, captured, are the driver pool's: tagged, left out.)
            actions = [e["action"] for e in traces[0]
                       if e["action"] != "snapshot" and "cuprof_pool" not in e]
            # Each fill: a segment, its block allocated and freed, cached; the call then finds
            # the driver short and the cache hands the segment back.
            step = ["segment_alloc", "alloc", "free_requested", "free_completed", "segment_free"]
            check(actions == step * NEED[arg], f"{label}: history {actions}")
    check_held(check, a)
    if a.cuprof is not None:
        check_watched(check, a)
    check_split(check, a)
    check_other_device(check, a)
    check_held_graph(check, a)
    check_held_context(check, a)
    check.finish()


HELD = "module_load=CUDA_SUCCESS\n" + "held_module_get_function=CUDA_ERROR_OUT_OF_MEMORY\n" * 2


def check_held(check, a):
    alone = shimrun.run_shim([a.app, "held"], a.ld_path, extra_env=SIM, timeout=60)
    check(alone.returncode == 0 and alone.stdout == HELD, f"held alone: {alone}")
    def look(what, r, paths):
        # The first-OOM snapshot holds the refusal after the fill's 2 entries; the one at exit
        # holds it once though the program asked twice (the retry met the same state).
        for path in paths if what != "off" else ():
            driver_row(check, f"held {what} {os.path.basename(path)}", path, 2 + (path != paths[0]),
                       "cuModuleGetFunction: the driver found no device memory for itself",
                       index=2)

    for what, r, traces in under_cuprof(a, [a.app, "held"], also=look):
        label = f"held {what}"
        check(r.returncode == 0 and r.stdout == HELD, f"{label}: {r.stdout!r} {r.stderr!r}")
        lines = [l for l in r.stderr.splitlines() if "found no device memory for itself" in l]
        dumped = [l for l in r.stderr.splitlines()
                  if l.endswith("(out of memory on device 0 at cuModuleGetFunction)")]
        if what == "off":
            check(not lines and not dumped and not traces, f"{label}: {r.stderr!r}")
            continue
        cached = ", and cuprof's cache held none it could hand back" if what != "trace" else ""
        want = ("cuprof: cuModuleGetFunction: the driver found no device memory for itself (kernel "
                "code, an array, a thread stack, a context or a graph's memory, which it takes "
                "outside every allocation)%s; the program gets CUDA_ERROR_OUT_OF_MEMORY (logged "
                "once)" % cached)
        check(lines == [want], f"{label}: lines {lines}")
        # The first-OOM snapshot, then the one at exit.
        check(len(dumped) == 1 and len(traces) == 2, f"{label}: {dumped} {len(traces)}")


def check_held_graph(check, a):
    """A graph launched while the program holds the card: refused with or without cuprof; explain
    names the graph's call and what leaves a graph room."""
    check_held_call(check, a, "held_graph", "held_graph_launch", "cuGraphLaunch",
                    "the graph uploaded before the device fills", SIM)


def check_held_context(check, a):
    """The same for a context created while the program holds the card."""
    check_held_call(check, a, "held_context", "held_ctx_create", "cuCtxCreate_v4",
                    "the context created before the device fills", SIM_CONTEXTS)


def check_held_call(check, a, mode, name, call, remedy, sim):
    import subprocess
    want = f"{name}=CUDA_ERROR_OUT_OF_MEMORY\n"
    alone = shimrun.run_shim([a.app, mode], a.ld_path, extra_env=sim, timeout=60)
    check(alone.returncode == 0 and alone.stdout == want, f"{mode} alone: {alone}")

    def look(what, r, paths):
        check(r.returncode == 0 and r.stdout == want, f"{mode} {what}: {r}")
        if what != "cache" or a.cuprof is None:
            return
        text = subprocess.run([a.cuprof, "explain", paths[0]], capture_output=True, text=True,
                              timeout=60).stdout
        for line in (f"device 0: the first OOM, in {call} (the driver's own memory) after",
                     f"verdict: the driver's own memory: {call} found too little free",
                     f"what leaves it room: fewer live bytes at that call, {remedy}"):
            check(line in text, f"{mode} explain lacks {line!r}:\n{text}")

    under_cuprof(a, [a.app, mode], also=look, sim=sim)


def check_watched(check, a):
    """`cuprof top` of a program whose driver's own call was refused twice: two OOMs."""
    import json
    import subprocess
    with shimrun.private_sockets(), tempfile.TemporaryDirectory() as tmp:
        env = shimrun.env(a.ld_path, a.lib, **SIM, CUPROF_SNAPSHOT=os.path.join(tmp, "s-%n.pickle"))
        prog = subprocess.Popen([a.app, "held", "wait"], env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            lines = [prog.stdout.readline() for _ in range(4)]
            check(lines[-1] == "waiting\n", f"watched: {lines}")
            reply = subprocess.run([a.cuprof, "top", "--json", str(prog.pid)], capture_output=True,
                                   text=True, timeout=60)
            devices = json.loads(reply.stdout)["devices"] if reply.returncode == 0 else reply
            check(isinstance(devices, list) and len(devices) == 1 and
                  (devices[0]["ooms"], devices[0]["driver_ooms"]) == (0, 2),
                  f"watched: top --json devices {devices}")
            once = subprocess.run([a.cuprof, "top", "--once", str(prog.pid)],
                                  capture_output=True, text=True, timeout=60).stdout.splitlines()
            row = next((l.split() for l in once if l.startswith("0 ")), [])
            # DEVICE ALLOCATED RESERVED PEAK-ALLOC PEAK-RESV OOMS: sizes are two words each.
            check(len(row) >= 10 and row[9] == "2", f"watched: top --once {once}")
        finally:
            prog.stdin.close()
            prog.wait(timeout=60)


def driver_row(check, label, path, entries, message_start, index=None):
    """A snapshot's one cuprof.oom_messages row: the call, the entries before it (`index`, by
    default all `entries` of the trace)."""
    with open(path, "rb") as f:
        snap = pickle.load(f)
    rows = snap["cuprof"].get("oom_messages")
    trace = snap["device_traces"][0]
    index = entries if index is None else index
    check(len(trace) == entries, f"{label}: {len(trace)} entries, not {entries}")
    check(rows is not None and len(rows) == 1 and rows[0]["api"] == "cuModuleGetFunction" and
          rows[0]["device"] == 0 and rows[0]["trace_index"] == index and
          rows[0]["message"].startswith(message_start), f"{label}: rows {rows}")


SPLIT_ALONE = ("module_load=CUDA_SUCCESS\nsplit_alloc=CUDA_SUCCESS\n"
               "split_module_get_function=CUDA_SUCCESS\n")
MiB = 1 << 20


def check_other_device(check, a):
    """A context made for device 1 while device 0's is current, after the program freed device 1
    whole: the cache of device 1 (the context's), not the current one's, hands its memory back."""
    sim = dict(SIM_CONTEXTS, SIMCUDA_DEVICES="2")
    want = "other_device_ctx_create=CUDA_SUCCESS\n"
    alone = shimrun.run_shim([a.app, "other_device"], a.ld_path, extra_env=sim, timeout=60)
    check(alone.returncode == 0 and alone.stdout == want, f"other device alone: {alone}")
    for what, r, traces in under_cuprof(a, [a.app, "other_device"], sim=sim):
        check(r.returncode == 0 and r.stdout == want,
              f"other device {what}: {r.stdout!r} {r.stderr[-600:]!r}")


def check_split(check, a):
    """The program frees the card and keeps 4 MiB: alone the driver has 60 MiB for the kernel's
    code; cuProf's cache cut the 4 MiB from its one 64 MiB segment (as PyTorch's would), which
    cannot go back to the driver, so the refusal stands (with expandable segments too: 64 MiB do
    not fit in 20 MiB pages, and the segment is made whole). `cuprof explain` of the first-OOM
    snapshot says so, with what each setting's cache would have kept there."""
    alone = shimrun.run_shim([a.app, "split"], a.ld_path, extra_env=SIM, timeout=60)
    check(alone.returncode == 0 and alone.stdout == SPLIT_ALONE, f"split alone: {alone}")
    refused = SPLIT_ALONE.replace("function=CUDA_SUCCESS", "function=CUDA_ERROR_OUT_OF_MEMORY")

    def look(what, r, paths):
        label = f"split {what}"
        want = refused if what in ("cache", "expandable") else SPLIT_ALONE
        check(r.returncode == 0 and r.stdout == want, f"{label}: {r.stdout!r} {r.stderr!r}")
        if what != "cache":
            return
        check(len(paths) == 2, f"{label}: {paths}")
        # segment_alloc, alloc, free_requested, free_completed of the fill, the 4 MiB's alloc.
        driver_row(check, label, paths[0], 5, "cuModuleGetFunction: the driver found no device "
                   "memory for itself")
        if a.cuprof is not None:
            check_explain(check, a, paths[0])

    under_cuprof(a, [a.app, "split"], also=look)


def check_explain(check, a, path):
    """explain and summary of the split case's first-OOM snapshot (64 MiB card, nothing outside)."""
    import json
    import subprocess
    got = json.loads(subprocess.run([a.cuprof, "explain", "--json", path], capture_output=True,
                                    text=True, timeout=60, check=True).stdout)
    dev = got["device_bytes"]
    check(got["driver_call"] == "cuModuleGetFunction" and got["chosen"] == "oom" and
          got["at"] == 5 and not got["is_oom"] and got["ooms"] == 0 and got["driver_ooms"] == 1 and
          got["request"] is None, f"explain: instant {got}")
    check(got["driver_message"].startswith("cuModuleGetFunction: the driver found no device"),
          f"explain: message {got['driver_message']!r}")
    check((dev["capacity"], dev["live_allocated"], dev["reserved"], dev["cached_free"],
           dev["outside"], dev["free"]) == (64 * MiB, 4 * MiB, 64 * MiB, 60 * MiB, 0, 0),
          f"explain: device {dev}")
    check(got["verdict"]["kinds"] == ["driver_own"] and
          got["verdict"]["free_without_cache"] == 60 * MiB, f"explain: verdict {got['verdict']}")
    # Each setting's cache emptied at the call: the recorded one and expandable segments keep
    # the 64 MiB segment (the 4 MiB cut from it); max_split_size_mb:64 leaves the 64 MiB block
    # unsplit, so the 4 MiB takes a segment of its own (20 MiB: PyTorch's for 1-10 MiB requests)
    # once the cache released the big one for lack of room.
    kept = {w["label"]: w["kept_reserved"] for w in got["whatif"]}
    check(kept == {"recorded settings (defaults)": 64 * MiB, "expandable_segments:True": 64 * MiB,
                   "max_split_size_mb:64": 20 * MiB, "max_split_size_mb:256": 64 * MiB},
          f"explain: kept {kept}")
    text = subprocess.run([a.cuprof, "explain", path], capture_output=True, text=True, timeout=60,
                          check=True).stdout
    for want in ("device 0: the first OOM, in cuModuleGetFunction (the driver's own memory) after "
                 "5 entries",
                 "verdict: the driver's own memory: cuModuleGetFunction found too little free: 0 "
                 "bytes free of 64.00 MiB, with 4.00 MiB in live blocks, 60.00 MiB cached free",
                 "without the cache the driver would have had about 60.00 MiB free",
                 "of the settings below, max_split_size_mb:64 keeps the least there: 20.00 MiB, "
                 "44.00 MiB less than the recorded settings"):
        check(want in text, f"explain text lacks {want!r}:\n{text}")
    # A budget gate fails the run; diff counts the refusal on each side.
    gate = subprocess.run([a.cuprof, "check", "--no-oom", path], capture_output=True, text=True,
                          timeout=60)
    check(gate.returncode == 1 and gate.stdout.startswith(
        path + ": device 0: 1 OOM, --no-oom; the first: cuModuleGetFunction found no device "
        "memory for the driver itself (kernel code, an array, a thread stack, a context or a "
        "graph's memory) after 5 entries\n"),
        f"check --no-oom: {gate}")
    diff = json.loads(subprocess.run([a.cuprof, "diff", "--json", path, path], capture_output=True,
                                     text=True, timeout=60, check=True).stdout)
    sides = diff["devices"][0]
    check((sides["a"]["driver_ooms"], sides["b"]["driver_ooms"], sides["b"]["ooms"]) == (1, 1, 0),
          f"diff --json: {sides['b']}")
    # The cross-rank view counts it among the file's OOMs.
    ranks = subprocess.run([a.cuprof, "summary", "--brief", path, path], capture_output=True,
                           text=True, timeout=60, check=True).stdout.splitlines()
    rows = [l.split() for l in ranks if l.endswith(" " + path) and not l.startswith("== ")]
    check(len(rows) == 2 and all(r[7] == "1" for r in rows), f"cross-rank rows: {ranks[:4]}")
    summary = subprocess.run([a.cuprof, "summary", path], capture_output=True, text=True,
                             timeout=60, check=True).stdout
    want = ("  cuModuleGetFunction after 5 entries (t=+", "): 64.00 MiB was reserved and 60.00 MiB "
            "of it not live (cached)")
    lines = [l for l in summary.splitlines() if l.startswith(want[0])]
    check("out of memory in the driver's own calls: 1 " in summary and len(lines) == 1 and
          lines[0].endswith(want[1]), f"summary: {summary}")


if __name__ == "__main__":
    main()
