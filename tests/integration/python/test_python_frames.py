"""Python frames in cuprof's stacks, read back from the snapshot with Python's pickle and json.

Cases (argv[1]):
  interpreters  frames_program.py under every CPython found on this machine (3.9 to 3.13 covered,
                older ones must say why they get native frames only): exact Python frames
                (function, file, line) of each allocation, innermost first, in the right place
                among the native frames; GIL held and released counts; what MemoryViz shows.
  off           CUPROF_PYTHON_FRAMES=off: native frames only, and the snapshot says so.
  embed         a C program embedding the interpreter (argv: the program).
  no_python     a C program: no "python" section, no frame changed (argv: the program).
  python_only   cuprof_record_memory_history(stacks="python"): Python frames only.
  reports       `cuprof leaks` on a Python program's snapshot names sites by Python frames.
  binding       binding_program.py: calls through a package in site-packages (fakebinding, frames
                of its own over ctypes) are named by the program's line with the package's entry
                point beside it, and counted for the package in "device memory by library".
"""
import argparse
import glob
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "frames_program.py")
KiB = 1024

# Each allocation size of frames_program.py: its Python frames (qualified name, line marker),
# innermost first, as far as they lie in frames_program.py itself.
EXPECTED = {
    1 * KiB: [("alloc", "alloc"), ("held", "held"), ("<module>", "main_held")],
    2 * KiB: [("alloc", "alloc"), ("released", "released"), ("<module>", "main_released")],
    4 * KiB: [("alloc", "alloc"), ("worker", "worker")],
    5 * KiB: [("alloc", "alloc"), ("worker", "worker")],
    6 * KiB: [("alloc", "alloc"), ("worker", "worker")],
    8 * KiB: [("alloc", "alloc"), ("gen", "gen"), ("use_gen", "use_gen"), ("<module>", "main_gen")],
    9 * KiB: [("alloc", "alloc"), ("coro", "coro"), ("outer", "outer"), ("use_coro", "use_coro"),
              ("<module>", "main_coro")],
    10 * KiB: [("alloc", "alloc"), ("Keyer.key", "key"), ("call_sorted", "call_sorted"),
               ("<module>", "main_sorted")],
    11 * KiB: [("alloc", "alloc"), ("compare", "compare"), ("call_qsort", "call_qsort"),
               ("<module>", "main_qsort")],
    12 * KiB: [("alloc", "alloc"), ("raiser", "raiser"), ("catcher", "catcher_try"),
               ("<module>", "main_catcher")],
    13 * KiB: [("alloc", "alloc"), ("catcher", "catcher_except"), ("<module>", "main_catcher")],
    14 * KiB: [("alloc", "alloc"), ("deep", "deep_leaf")] + [("deep", "deep")] * 40
               + [("<module>", "main_deep")],
}
GIL_HELD = 6      # 1, 8, 10, 12, 13 and 14 KiB go through ctypes.PyDLL
GIL_RELEASED = 6  # 2, 4, 5, 6, 9 and 11 KiB through ctypes.CDLL
# Between these Python frames the interpreter was entered again from C: a native frame must lie
# between them (sorted() is C code; qsort is libc calling a ctypes callback).
C_BETWEEN = {10 * KiB: ("Keyer.key", "call_sorted"), 11 * KiB: ("compare", "call_qsort")}

# MemoryViz's frameFilter (reference/pytorch-allocator.md §7): frames it hides.
VIZ_HIDDEN_NAMES = ("unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
                    "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_")
VIZ_HIDDEN_FILES = ("core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c",
                    "Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c",
                    "cpython/abstract.h")


def markers(path):
    lines = {}
    for number, text in enumerate(open(path), 1):
        m = re.search(r"# @(\w+)$", text.rstrip())
        if m:
            lines[m.group(1)] = number
    return lines


def interpreters():
    """Every CPython 3 on this machine: the system's and pyenv's, one per version."""
    found = {}
    candidates = ["/usr/bin/python3", sys.executable]
    candidates += sorted(glob.glob("/usr/bin/python3.[0-9]*"))
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3.[0-9]*")))
    candidates += sorted(glob.glob("/root/.pyenv/versions/3.*/bin/python3.[0-9]*"))
    for c in candidates:
        if not re.search(r"python3(\.\d+)?$", c) or not os.access(c, os.X_OK):
            continue
        try:
            out = subprocess.run([c, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                                 capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        # One interpreter per exact version and build (Debian's 3.11.2 and pyenv's 3.11.7 differ).
        if out and out not in found:
            found[out] = c
    return sorted(found.items(), key=lambda kv: tuple(map(int, kv[0].split("."))))


def run_program(f, a, cmd, extra=None, what=""):
    """Runs cmd under the shim with a pickle snapshot; returns (snapshot, result)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {"CUPROF_SNAPSHOT": os.path.join(tmp, "s-%n.pickle")}
        env.update(extra or {})
        res = shimrun.run_shim(cmd, a.ld_path, preload=a.lib, extra_env=env, timeout=180)
        f.check(res.returncode == 0, f"{what}: exit {res.returncode}; stderr {res.stderr[-2000:]!r}")
        files = shimrun.dumps(tmp, "s-*")
        f.check(len(files) == 1, f"{what}: snapshots {files}; stderr {res.stderr[-2000:]!r}")
        if len(files) != 1:
            return None, res
        with open(files[0], "rb") as fh:
            snap = pickle.load(fh)
        problems = shimrun.load_checker().check(snap)
        f.check(not problems, f"{what}: snapshot problems {problems[:5]}")
        return snap, res


def allocs(snap):
    """{size: frames} of the alloc entries."""
    return {e["size"]: e["frames"] for t in snap["device_traces"] for e in t
            if e["action"] == "alloc"}


def short(frames):
    return " <- ".join(f"{fr['name']}@{os.path.basename(fr['filename'])}:{fr['line']}"
                       for fr in frames)


def plain_name(name, minor):
    """3.9 and 3.10 have no co_qualname: a method is named by its bare name there."""
    return name.rsplit(".", 1)[-1] if minor < 11 else name


def check_program_frames(f, snap, version, minor):
    lines = markers(PROGRAM)
    got = allocs(snap)
    for size, expected in EXPECTED.items():
        frames = got.get(size)
        what = f"{version}: {size // KiB} KiB"
        f.check(frames is not None, f"{what}: no alloc entry")
        if frames is None:
            continue
        mine = [(fr["name"], fr["line"]) for fr in frames if fr["filename"] == PROGRAM]
        want = [(plain_name(n, minor), lines[m]) for n, m in expected]
        f.check(mine == want, f"{what}: Python frames {mine}, expected {want}\n  {short(frames)}")
        # Innermost first: native frames of the runtime call (ctypes, libffi) before the first
        # Python frame, and no eval-loop frame left in place of a Python one.
        first_py = next((i for i, fr in enumerate(frames) if fr["filename"].endswith(".py")), None)
        f.check(first_py is not None and first_py > 0,
                f"{what}: Python frames should follow the call's native frames: {short(frames)}")
        f.check(not any(fr["name"] == "_PyEval_EvalFrameDefault" for fr in frames),
                f"{what}: an eval-loop frame was left in the stack: {short(frames)}")
        if size in (4 * KiB, 5 * KiB, 6 * KiB):
            # A thread's own frames: its bootstrap in threading.py is its outermost Python frame.
            py = [fr for fr in frames if fr["filename"].endswith(".py")]
            f.check(py and py[-1]["filename"].endswith("threading.py") and
                    py[-1]["name"].endswith("_bootstrap"),
                    f"{what}: a worker thread's stack should end in threading's bootstrap: "
                    f"{short(frames)}")
        if size in C_BETWEEN:
            inner, outer_name = (plain_name(n, minor) for n in C_BETWEEN[size])
            names = [fr["name"] if fr["filename"] == PROGRAM else None for fr in frames]
            i, j = names.index(inner), names.index(outer_name)
            f.check(j > i + 1 and all(not frames[k]["filename"].endswith(".py")
                                      for k in range(i + 1, j)),
                    f"{what}: native frames must lie between {inner} and {outer_name}: "
                    f"{short(frames)}")
        # What pytorch.org/memory_viz shows: every frame its frameFilter keeps, as
        # "filename:line:name". The user's file and line are there, innermost first.
        shown = [f"{fr['filename']}:{fr['line']}:{fr['name']}" for fr in frames
                 if not any(s in fr["name"] for s in VIZ_HIDDEN_NAMES)
                 and not any(s in fr["filename"] for s in VIZ_HIDDEN_FILES)]
        viz = [s for s in shown if s.startswith(PROGRAM + ":")]
        f.check(viz == [f"{PROGRAM}:{line}:{name}" for name, line in want],
                f"{what}: MemoryViz would show {viz}")


def case_interpreters(f, a):
    found = interpreters()
    covered = []
    for version, exe in found:
        minor = int(version.split(".")[1])
        snap, res = run_program(f, a, [exe, PROGRAM], what=f"python {version} ({exe})")
        if snap is None:
            continue
        f.check("py: allocations made 12" in res.stdout, f"{version}: output {res.stdout!r}")
        py = snap.get("cuprof", {}).get("python")
        f.check(py is not None and py["interpreter"] == f"CPython {version}",
                f"{version}: cuprof.python {py}")
        if py is None:
            continue
        if 9 <= minor <= 13:
            covered.append(version)
            f.check(py["frames"] == "captured", f"{version}: cuprof.python.frames {py['frames']!r}")
            f.check(py["captures_gil_held"] == GIL_HELD and
                    py["captures_gil_released"] == GIL_RELEASED,
                    f"{version}: GIL held/released captures {py}")
            check_program_frames(f, snap, version, minor)
        else:
            # Not covered: native frames only, never a crash, and the snapshot says why.
            f.check(py["frames"].startswith("native frames only: this CPython version is not "
                                            "covered"), f"{version}: {py['frames']!r}")
            f.check(not any(fr["filename"].endswith(".py") for frames in allocs(snap).values()
                            for fr in frames), f"{version}: Python frames where none are read")
    print("covered CPython versions:", ", ".join(covered) or "none")
    print("found:", ", ".join(v for v, _ in found))
    minors = {int(v.split(".")[1]) for v in covered}
    f.check(sys.version_info[1] in minors or not (9 <= sys.version_info[1] <= 13),
            f"the test's own interpreter {sys.version.split()[0]} was not covered")


def case_off(f, a):
    snap, _ = run_program(f, a, [sys.executable, PROGRAM], {"CUPROF_PYTHON_FRAMES": "off"},
                          what="CUPROF_PYTHON_FRAMES=off")
    if snap is None:
        return
    py = snap["cuprof"].get("python", {})
    f.check(py.get("frames") == "native frames only: CUPROF_PYTHON_FRAMES=off",
            f"off: cuprof.python {py}")
    frames = allocs(snap).get(1 * KiB, [])
    f.check(frames and not any(fr["filename"].endswith(".py") for fr in frames),
            f"off: Python frames in {short(frames)}")
    f.check(snap["cuprof"]["config"].get("CUPROF_PYTHON_FRAMES") == "off",
            f"off: config {snap['cuprof']['config'].get('CUPROF_PYTHON_FRAMES')!r}")


PYTHON_ONLY = """
import ctypes
me = ctypes.CDLL(None)
rt = ctypes.PyDLL("libcudart.so.13")
def grab(size):
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size)) == 0
    return p
a = grab(1024)
assert me.cuprof_record_memory_history(b"all", b"alloc", b"python", 0) == 0
b = grab(2048)
assert me.cuprof_record_memory_history(b"all", b"alloc", b"all", 0) == 0
c = grab(3072)
"""


def case_python_only(f, a):
    """cuprof_record_memory_history(stacks="python"), PyTorch's option: Python frames only while
    it is on; "all" brings the native frames back."""
    snap, _ = run_program(f, a, [sys.executable, "-c", PYTHON_ONLY], what="stacks=python")
    if snap is None:
        return
    got = allocs(snap)
    only = got.get(2048, [])
    f.check([(fr["name"], fr["filename"], fr["line"]) for fr in only] ==
            [("grab", "<string>", 7), ("<module>", "<string>", 11)],
            f"stacks=python: {short(only)}")
    for size in (1024, 3072):
        frames = got.get(size, [])
        f.check(len(frames) > 2 and frames[0]["filename"] != "<string>" and
                [fr["name"] for fr in frames if fr["filename"] == "<string>"] == ["grab", "<module>"],
                f"stacks=all ({size} B): {short(frames)}")


def case_reports(f, a):
    """cuprof's reports on a real Python program's snapshot: call sites named by the user's
    first Python frame, the interpreter's and ctypes' C frames hidden, the three worker threads'
    allocations one site; --all-frames shows everything."""
    lines = markers(PROGRAM)
    with tempfile.TemporaryDirectory() as tmp:
        snap_path = os.path.join(tmp, "py.pickle")
        res = shimrun.run_shim([sys.executable, PROGRAM], a.ld_path, preload=a.lib,
                               extra_env={"CUPROF_SNAPSHOT": snap_path}, timeout=180)
        f.check(res.returncode == 0 and os.path.exists(snap_path), f"reports: run {res}")
        if not os.path.exists(snap_path):
            return
        leaks = subprocess.run([a.cuprof, "leaks", snap_path], capture_output=True, text=True)
        out = leaks.stdout.splitlines()
        f.check(leaks.returncode == 1 and "12 blocks still allocated" in out[0],
                f"reports: leaks said {leaks.stdout[:300]!r} {leaks.stderr!r}")
        site = f"alloc ({PROGRAM}:{lines['alloc']})"
        worker = f"worker ({PROGRAM}:{lines['worker']})"
        at = next((i for i, l in enumerate(out) if "in 3 blocks" in l), None)
        f.check(at is not None and out[at].strip().startswith("15.00 KiB in 3 blocks") and
                out[at + 1].strip() == site and out[at + 2].strip() == worker,
                f"reports: the worker threads' site: {out[at:at + 3] if at is not None else out}")
        sites = [l for l in out if l.startswith("  ") and not l.startswith("    ")]
        f.check(len(sites) == 10, f"reports: {len(sites)} call sites, expected 10: {sites}")
        frames = [l.strip() for l in out if l.startswith("    ")]
        machinery = re.compile(r"_PyEval|_PyObject|PyObject_|ffi_call|_ctypes|cudaMalloc|"
                               r"cuMemAlloc|libffi|libpython|/python3[.0-9]*[ :)]|tests/sim/")
        hidden = [l for l in frames if not re.search(r"\.py:\d+\)$", l) and machinery.search(l)]
        f.check(not hidden, f"reports: machinery frames shown: {hidden[:5]}")
        every = subprocess.run([a.cuprof, "leaks", "--all-frames", snap_path],
                               capture_output=True, text=True).stdout
        f.check("ffi_call" in every and "cudaMalloc" in every,
                "reports: --all-frames should show the ctypes and runtime frames")


BINDING = os.path.join(HERE, "binding_program.py")
PACKAGE = os.path.join(HERE, "site-packages", "fakebinding")


def case_binding(f, a):
    """A program reaching CUDA through a binding in site-packages and through plain ctypes."""
    lines = markers(BINDING)
    with tempfile.TemporaryDirectory() as tmp:
        snap_path = os.path.join(tmp, "binding.pickle")
        res = shimrun.run_shim([sys.executable, BINDING], a.ld_path, preload=a.lib,
                               extra_env={"CUPROF_SNAPSHOT": snap_path,
                                          "PYTHONDONTWRITEBYTECODE": "1"}, timeout=180)
        f.check(res.returncode == 0 and "binding: 4 allocations" in res.stdout,
                f"binding: run {res}")
        if not os.path.exists(snap_path):
            return
        with open(snap_path, "rb") as fh:
            snap = pickle.load(fh)
        # The recorded stacks hold every frame: the package's four, then the program's.
        by_size = allocs(snap)
        names = [fr["name"] for fr in by_size.get(64 * KiB, []) if fr["filename"].endswith(".py")]
        f.check(names == ["_call", "safe_call", "Context._attempt", "Context.memalloc",
                          "to_device", "load_weights", "<module>"],
                f"binding: recorded Python frames {names}")
        # Device memory by library: the package and the program's own file, never libffi.
        rows = {r["library"] if "library" in r else os.path.basename(r["path"]): r
                for r in snap["cuprof"]["libraries"]}
        paths = {r["path"]: r["cache_requested_bytes"] for r in snap["cuprof"]["libraries"]}
        f.check(paths == {PACKAGE: 3 * 64 * KiB, BINDING: 48 * KiB},
                f"binding: libraries {paths} ({sorted(rows)})")
        leaks = subprocess.run([a.cuprof, "leaks", "--json", snap_path], capture_output=True,
                               text=True)
        got = json.loads(leaks.stdout) if leaks.returncode == 1 else {"sites": []}
        sites = [[(fr["name"], fr["filename"], fr["line"]) for fr in s["frames"]]
                 for s in got["sites"]]
        want = [[("via fakebinding.api.to_device", "", 0),
                 ("load_weights", BINDING, lines["load_weights"]),
                 ("<module>", BINDING, lines["main_load"])],
                [("scratch", BINDING, lines["scratch"]),
                 ("<module>", BINDING, lines["main_scratch"])]]
        f.check(sites == want, f"binding: leaks sites {sites}")
        # summary: the site named by the program's line, the entry point beside it; the
        # library table names the package.
        out = subprocess.run([a.cuprof, "summary", snap_path], capture_output=True,
                             text=True).stdout
        first = "       load_weights (%s:%d) via fakebinding.api.to_device\n" \
                "       <module> (%s:%d)\n" % (BINDING, lines["load_weights"], BINDING,
                                               lines["main_load"])
        f.check("   1. 192.00 KiB in 3 allocations\n" + first in out,
                f"binding: summary's top call site {out[out.find('top call sites'):][:600]!r}")
        table = out[out.find("device memory by library"):out.find("device footprint")]
        f.check(re.search(r"^  fakebinding +192\.00 KiB / 192\.00 KiB", table, re.M) and
                re.search(r"^  binding_program\.py +48\.00 KiB / 48\.00 KiB", table, re.M) and
                "libffi" not in table, f"binding: library table {table!r}")
        every = subprocess.run([a.cuprof, "leaks", "--all-frames", snap_path],
                               capture_output=True, text=True).stdout
        f.check("_call (%s" % os.path.join(PACKAGE, "driver.py") in every and
                "ffi_call" in every and "via " not in every,
                "binding: --all-frames shows the package's own frames and nothing made up")
        # `cuprof top` of the running program names the site the same way.
        env = shimrun.env(a.ld_path, preload=a.lib, CUPROF_SNAPSHOT=os.path.join(tmp, "t.pickle"),
                          PYTHONDONTWRITEBYTECODE="1")
        prog = subprocess.Popen([sys.executable, BINDING, "wait"], env=env, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            f.check(prog.stdout.readline().startswith("binding: 4 allocations"), "binding: wait")
            top = subprocess.run([a.cuprof, "top", "--once", str(prog.pid)],
                                 capture_output=True, text=True, timeout=60).stdout
        finally:
            prog.stdin.close()
            prog.wait(timeout=60)
        row = "load_weights (binding_program.py:%d) via fakebinding.api.to_device" \
            % lines["load_weights"]
        f.check(any(l.split()[:3] == ["192.00", "KiB", "3"] and l.endswith(row)
                    for l in top.splitlines()),
                f"binding: top's site rows {top!r}")


def case_embed(f, a):
    snap, res = run_program(f, a, [a.program], what="embedded interpreter")
    if snap is None:
        return
    f.check("embed: 3 allocations" in res.stdout, f"embed: output {res.stdout!r}")
    got = allocs(snap)
    for size in (15 * KiB, 17 * KiB):
        frames = got.get(size, [])
        f.check(any(fr["name"] == "main" for fr in frames) and
                not any(fr["filename"] == "<string>" for fr in frames),
                f"embed: {size // KiB} KiB (no interpreter running) {short(frames)}")
    frames = got.get(16 * KiB, [])
    py = [(fr["name"], fr["filename"], fr["line"]) for fr in frames if fr["filename"] == "<string>"]
    f.check(py == [("embedded_alloc", "<string>", 5), ("<module>", "<string>", 7)],
            f"embed: 16 KiB Python frames {py}: {short(frames)}")
    names = [fr["name"] for fr in frames]
    f.check("main" in names and "embedded_alloc" in names and
            names.index("main") > names.index("embedded_alloc"),
            f"embed: main() should lie below the Python frames: {short(frames)}")
    f.check(snap["cuprof"].get("python", {}).get("frames") == "captured",
            f"embed: cuprof.python {snap['cuprof'].get('python')}")


def case_no_python(f, a):
    snap, _ = run_program(f, a, [a.program], what="a C program")
    if snap is None:
        return
    f.check("python" not in snap["cuprof"], f"no python: cuprof.python {snap['cuprof'].get('python')}")
    stacks = [frames for frames in allocs(snap).values()]
    f.check(stacks and all(frames for frames in stacks), "no python: an allocation without a stack")
    f.check(not any(fr["filename"].endswith(".py") or fr["name"] == "<unknown Python frame>"
                    for frames in stacks for fr in frames), "no python: a Python frame appeared")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["interpreters", "off", "embed", "no_python", "python_only",
                                     "reports", "binding"])
    ap.add_argument("--cuprof")
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--program")
    a = ap.parse_args()
    f = shimrun.Checks()
    {"interpreters": case_interpreters, "off": case_off, "embed": case_embed,
     "no_python": case_no_python, "python_only": case_python_only,
     "reports": case_reports, "binding": case_binding}[a.case](f, a)
    f.finish()


if __name__ == "__main__":
    main()
