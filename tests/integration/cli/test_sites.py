#!/usr/bin/env python3
"""Call sites named by the user's first frame: `summary`, `leaks`, `diff`, `flamegraph` and `plot`
hide the allocation machinery's frames (cuprof, CUDA, PyTorch's allocator and unwinder, the
interpreter's C frames where Python frames stand, libc start-up), merge stacks that differ only in
those frames, and show everything with --all-frames. Expected output is built here from the
snapshots (pickle.load) and the rules modelled in snapshots.py, never from cuprof.

Usage: test_sites.py CUPROF WORKDIR built
       test_sites.py CUPROF WORKDIR recorded SITES_APP SRC_ROOT
`built`: hand-built PyTorch-layout snapshots; `recorded`: snapshots cuprof wrote while
tests/integration/cli/sites_app ran on the simulated device.
"""
import json
import os
import pickle
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_data  # noqa: E402
import snapshots as S  # noqa: E402
from test_apps import sanitizer_preload  # noqa: E402

CUPROF = WORK = SITES_APP = SRC = None
F = S.frame


def cuprof(*args, rc=None, **extra):
    env = dict(os.environ, **extra)
    for k in ("CUPROF_SNAPSHOT", "CUPROF_LOG", "CUPROF_MAX_ENTRIES", "CUPROF_ALLOC_CONF"):
        if k not in extra:
            env.pop(k, None)
    if args[0] == "run":
        env.update(sanitizer_preload())
    p = subprocess.run([CUPROF, *args], capture_output=True, text=True, timeout=300, env=env)
    if "Sanitizer" in p.stderr or "runtime error" in p.stderr:
        raise AssertionError("sanitizer report:\n" + p.stderr)
    if rc is not None and p.returncode != rc:
        raise AssertionError("cuprof %s: exit %d, expected %d\nstdout:\n%s\nstderr:\n%s"
                             % (" ".join(args), p.returncode, rc, p.stdout, p.stderr))
    return p


# ---- What each command must print, from the snapshot and the rules ----

def shown(frames, whole):
    return frames if whole else S.user_frames(frames)


def texts(frames):
    return tuple(S.frame_text(f) for f in frames)


def stack_lines(frames, indent, max_frames):
    if not frames:
        return "%s[no stack recorded]\n" % (" " * indent)
    out = ""
    for i, t in enumerate(texts(frames)):
        if i == max_frames:
            return out + "%s... %d more\n" % (" " * indent, len(frames) - i)
        out += "%s%s\n" % (" " * indent, t)
    return out


def leak_sites(snap, whole):
    """(device, frame texts) -> [bytes, requested, blocks, frames], largest first."""
    sites = {}
    for seg in snap["segments"]:
        for b in seg["blocks"]:
            if b["state"] != "active_allocated":
                continue
            frames = shown(b["frames"], whole)
            acc = sites.setdefault((seg["device"], texts(frames)), [0, 0, 0, frames])
            acc[0] += b["size"]
            acc[1] += b["requested_size"]
            acc[2] += 1
    return sorted(sites.items(), key=lambda kv: -kv[1][0])


def leaks_text(path, snap, whole):
    sites = leak_sites(snap, whole)
    nb = sum(v[2] for _, v in sites)
    out = "%s: %d block%s still allocated, %s (%s requested), from %d call site%s\n" % (
        path, nb, "" if nb == 1 else "s", S.format_size(sum(v[0] for _, v in sites)),
        S.format_size(sum(v[1] for _, v in sites)), len(sites), "" if len(sites) == 1 else "s")
    for (device, _), (size, req, blocks, frames) in sites:
        out += "  %s in %d block%s on device %d (%d bytes, %d requested)\n" % (
            S.format_size(size), blocks, "" if blocks == 1 else "s", device, size, req)
        out += stack_lines(frames, 6, 16)
    return out


def live_sites(snap, whole, at=None):
    """frame texts -> [requested bytes, count, frames] live after `at` entries (None: the end)."""
    sites = {}
    for size, frames in S.live_blocks(snap, 0, at).values():
        frames = shown(frames, whole)
        acc = sites.setdefault(texts(frames), [0, 0, frames])
        acc[0] += size
        acc[1] += 1
    return sites


def summary_section(snap, whole):
    """`summary`'s "top call sites by live bytes at the end" list (every site live at the end)."""
    out = ""
    ranked = sorted(live_sites(snap, whole).values(), key=lambda v: -v[0])
    for i, (size, count, frames) in enumerate(ranked[:10]):
        out += "  %2d. %s in %d allocation%s\n" % (i + 1, S.format_size(size), count,
                                                  "" if count == 1 else "s")
        out += stack_lines(frames, 7, 12)
    return out


def folded(snap, whole):
    return {";".join(reversed(key)): v[0] for key, v in live_sites(snap, whole).items()}


def diff_sites(a, b, whole):
    sa, sb = live_sites(a, whole), live_sites(b, whole)
    out = {}
    for key in set(sa) | set(sb):
        x, y = sa.get(key, [0])[0], sb.get(key, [0])[0]
        if x != y:
            out[key] = (x, y, y - x)
    return out


def plot_sites(html_path):
    """The page's call sites of device 0 holding bytes at the end: frames -> bytes."""
    page = report_data.read(html_path)
    run = page.data["runs"][0]
    return {tuple(s["frames"]): s["end_bytes"]
            for s in report_data.sites(page, run, run["devices"][0]) if s["end_bytes"] > 0}


class Checks:
    """The five commands on snapshot B (and A for diff), default and --all-frames."""

    def check_all(self, a_path, b_path, a, b):
        for whole in (False, True):
            opt = ("--all-frames",) if whole else ()
            what = "whole" if whole else "filtered"
            # leaks: the complete text, and the JSON's sites.
            out = cuprof("leaks", *opt, b_path, rc=1).stdout
            self.assertEqual(out, leaks_text(b_path, b, whole), what)
            got = json.loads(cuprof("leaks", "--json", *opt, b_path, rc=1).stdout)
            self.assertEqual([(s["device"], texts(s["frames"]), s["bytes"], s["requested_bytes"],
                               s["blocks"]) for s in got["sites"]],
                             [(d, k, v[0], v[1], v[2]) for (d, k), v in leak_sites(b, whole)],
                             what)
            # summary: the top call sites at the end, stacks included.
            out = cuprof("summary", *opt, b_path, rc=0).stdout
            section = out.split("top call sites by live bytes at the end:\n")[1]
            section = section.split("OOM events:")[0]
            self.assertEqual(section, summary_section(b, whole), what)
            # flamegraph: one folded line per site.
            got = {}
            for line in cuprof("flamegraph", "--at", "end", *opt, b_path, rc=0).stdout.splitlines():
                stack, n = line.rsplit(" ", 1)
                got[stack] = int(n)
            self.assertEqual(got, folded(b, whole), what)
            # diff: growth per site between A and B.
            got = json.loads(cuprof("diff", "--json", *opt, a_path, b_path, rc=0).stdout)
            self.assertEqual({texts(s["frames"]): (s["a_bytes"], s["b_bytes"], s["growth"])
                              for s in got["sites"]}, diff_sites(a, b, whole), what)
            # plot: the sites table embedded in the page.
            html = os.path.join(WORK, "sites-%s.html" % what)
            cuprof("plot", *opt, "-o", html, b_path, rc=0)
            self.assertEqual(plot_sites(html),
                             {k: v[0] for k, v in live_sites(b, whole).items()}, what)


# ---- Hand-built PyTorch snapshots ----

TORCH = "/opt/pytorch/"
LIBPY = "/usr/lib/x86_64-linux-gnu/libpython3.12.so.1.0"
CTYPES = "/usr/lib/python3.12/lib-dynload/_ctypes.cpython-312-x86_64-linux-gnu.so"
LIBFFI = "/usr/lib/x86_64-linux-gnu/libffi.so.8"
LIBC_START = [F("__libc_start_call_main", "../sysdeps/nptl/libc_start_call_main.h", 58),
              F("__libc_start_main_impl", "../csu/libc-start.c", 360),
              F("_start", "/usr/bin/python3.12", 0)]
UNWIND = [F("torch::unwind::unwind()", TORCH + "torch/csrc/profiler/unwind/unwind.cpp", 0),
          F("torch::CapturedTraceback::gather(bool, bool, bool)",
            TORCH + "torch/csrc/profiler/combined_traceback.cpp", 0),
          F("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, "
            "unsigned long, CUstream_st*)", TORCH + "c10/cuda/CUDACachingAllocator.cpp", 0),
          F("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, "
            "signed char, unsigned long, CUstream_st*)", TORCH + "c10/cuda/CUDACachingAllocator.cpp",
            0)]
EMPTY = [F("at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*)",
           TORCH + "aten/src/ATen/EmptyTensor.cpp", 0),
         F("at::detail::empty_cuda(c10::ArrayRef<long>, c10::ScalarType)",
           TORCH + "aten/src/ATen/cuda/EmptyTensor.cpp", 0),
         F("at::native::empty_cuda(c10::ArrayRef<long>)",
           TORCH + "aten/src/ATen/native/cuda/TensorFactories.cu", 0),
         F("at::(anonymous namespace)::(anonymous namespace)::wrapper_CUDA_memory_format_empty()",
           TORCH + "build/aten/src/ATen/RegisterCUDA.cpp", 0),
         F("c10::impl::wrap_kernel_functor_unboxed_<at::Tensor ()>::call()",
           TORCH + "aten/src/ATen/core/boxing/impl/WrapFunctionIntoFunctor.h", 0),
         F("at::_ops::empty_memory_format::redispatch(c10::DispatchKeySet)",
           TORCH + "build/aten/src/ATen/Operators_2.cpp", 0),
         F("at::_ops::empty_memory_format::call()", TORCH + "build/aten/src/ATen/Operators_2.cpp",
           0),
         F("at::empty(c10::ArrayRef<long>)", TORCH + "build/aten/src/ATen/ops/empty.h", 0),
         F("torch::autograd::THPVariable_empty(_object*, _object*, _object*)",
           TORCH + "torch/csrc/autograd/generated/python_torch_functions_0.cpp", 0)]
EMPTY_STRIDED = [F("gather_with_cpp", TORCH + "torch/csrc/profiler/combined_traceback.cpp", 0),
                 F("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate("
                   "unsigned long)", TORCH + "c10/cuda/CUDACachingAllocator.cpp", 0),
                 F("at::detail::empty_strided_cuda(c10::ArrayRef<long>)",
                   TORCH + "aten/src/ATen/cuda/EmptyTensor.cpp", 0),
                 F("at::native::empty_strided_cuda(c10::ArrayRef<long>)",
                   TORCH + "aten/src/ATen/native/cuda/TensorFactories.cu", 0),
                 F("c10::Dispatcher::call<at::Tensor>()", TORCH + "aten/src/ATen/core/dispatch/"
                   "Dispatcher.h", 0),
                 F("at::_ops::empty_strided::call()", TORCH + "build/aten/src/ATen/Operators_1.cpp",
                   0),
                 F("at::empty_strided(c10::ArrayRef<long>)",
                   TORCH + "build/aten/src/ATen/ops/empty_strided.h", 0),
                 F("torch::autograd::THPVariable_empty_strided(_object*, _object*, _object*)",
                   TORCH + "torch/csrc/autograd/generated/python_torch_functions_1.cpp", 0)]
PY_MAIN = [F("main_loop", "/home/u/train.py", 60), F("<module>", "/home/u/train.py", 70),
           F("PyEval_EvalCode", LIBPY, 0), F("run_eval_code_obj", "Python/pythonrun.c", 1722),
           F("run_mod", "Python/pythonrun.c", 1743), F("Py_RunMain", "Modules/main.c", 714),
           F("Py_BytesMain", "Modules/main.c", 768), F("main", "/usr/bin/python3.12", 0)] \
    + LIBC_START
TRAIN = F("train_step", "/home/u/train.py", 42)
# One Python line, two routes through the machinery (torch.empty and torch.empty_strided).
STEP_A = UNWIND + EMPTY + [F("cfunction_call", "Objects/methodobject.c", 537),
                           F("_PyObject_MakeTpCall", "Objects/call.c", 240), TRAIN] + PY_MAIN
STEP_B = EMPTY_STRIDED + [F("method_vectorcall_VARARGS_KEYWORDS", "Objects/descrobject.c", 365),
                          F("PyObject_Vectorcall", LIBPY, 0), TRAIN] + PY_MAIN
# The user's C++ extension called through ctypes: named by its own frame.
EXT = UNWIND + EMPTY[:-1] + [F("my_ext::make_buffer(long)", "/home/u/csrc/ext.cpp", 17),
                             F("ffi_call_unix64", LIBFFI, 0), F("ffi_call", LIBFFI, 0),
                             F("_ctypes_callproc", CTYPES, 0), F("PyCFuncPtr_call", CTYPES, 0),
                             F("_PyObject_MakeTpCall", LIBPY, 0),
                             F("load", "/home/u/data.py", 12)] + PY_MAIN
# A C++ program (no Python): libtorch under the user's forward, by two routes.
CXX_MAIN = [F("Model::forward()", "/home/u/model.cpp", 30), F("main", "/home/u/main.cpp", 8),
            F("__libc_start_call_main", "../sysdeps/nptl/libc_start_call_main.h", 58),
            F("__libc_start_main_impl", "../csu/libc-start.c", 360), F("_start", "/home/u/app", 0)]
CXX_A = UNWIND + EMPTY[:-1] + CXX_MAIN
CXX_B = EMPTY_STRIDED[1:-1] + CXX_MAIN
# The interpreter's C frames without a Python frame: nothing stands for them, they stay.
NO_PY = [F("c10::cuda::CUDACachingAllocator::raw_alloc(unsigned long)",
           TORCH + "c10/cuda/CUDACachingAllocator.cpp", 0),
         F("cfunction_call", "Objects/methodobject.c", 537),
         F("_PyObject_MakeTpCall", "Objects/call.c", 240), F("PyEval_EvalCode", LIBPY, 0),
         F("main", "/usr/bin/python3.12", 0)] + LIBC_START
# Nothing but machinery: kept as it is.
ALL_HIDDEN = [F("c10::cuda::CUDACachingAllocator::raw_alloc(unsigned long)",
                TORCH + "c10/cuda/CUDACachingAllocator.cpp", 0)] + LIBC_START

ALLOCS = [(STEP_A, 2 * S.MiB), (CXX_A, 700 * 1024), (EXT, 300 * 1024), (STEP_B, 3 * S.MiB + 512),
          (NO_PY, 100 * 1024), (CXX_B, 900 * 1024), (ALL_HIDDEN, 5000), (STEP_A, 1 * S.MiB)]


def built_snapshot(n):
    """The first n allocations of ALLOCS in one 20 MiB segment, each live at the end."""
    seg, trace, blocks, addr = S.BASE, [S.entry("segment_alloc", S.BASE, 20 * S.MiB, [], t=0)], \
        [], S.BASE
    for i, (frames, size) in enumerate(ALLOCS[:n]):
        rounded = (size + 511) // 512 * 512
        trace.append(S.entry("alloc", addr, size, frames, t=10 * (i + 1)))
        blocks.append(S.block(addr, rounded, size, "active_allocated", frames))
        addr += rounded
    blocks.append(S.block(addr, seg + 20 * S.MiB - addr, 0, "inactive", []))
    used = sum(b["size"] for b in blocks if b["state"] != "inactive")
    segment = {"device": 0, "address": seg, "total_size": 20 * S.MiB, "allocated_size": used,
               "active_size": used, "requested_size": sum(s for _, s in ALLOCS[:n]), "stream": 0,
               "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
               "frames": [], "blocks": blocks}
    return {"segments": [segment], "device_traces": [trace],
            "allocator_settings": S.allocator_settings()}


def write(name, snap):
    path = os.path.join(WORK, name)
    with open(path, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    return path


class Built(unittest.TestCase, Checks):
    def setUp(self):
        self.a, self.b = built_snapshot(3), built_snapshot(len(ALLOCS))
        self.a_path, self.b_path = write("built-a.pickle", self.a), write("built-b.pickle", self.b)

    def test_every_command_default_and_all_frames(self):
        self.check_all(self.a_path, self.b_path, self.a, self.b)

    def test_help_names_the_option(self):
        for cmd in ("summary", "leaks", "diff", "flamegraph", "plot"):
            out = cuprof(cmd, "--help", rc=0).stdout
            self.assertIn("[--all-frames]", out.splitlines()[0], cmd)
            self.assertIn("\n  --all-frames  ", out, cmd)
            self.assertIn("frames of the allocation machinery", out.replace("\n    ", " ")
                          .replace("\n", " "), cmd)

    def test_sites_named_by_the_users_first_frame(self):
        sites = {k[0]: v for (_, k), v in leak_sites(self.b, False)}
        # Three stacks through two routes from train.py:42 are one site with their bytes.
        step = [size for frames, size in ALLOCS if frames in (STEP_A, STEP_B)]
        self.assertEqual(sites["train_step (/home/u/train.py:42)"][1], sum(step))
        self.assertEqual(sites["train_step (/home/u/train.py:42)"][2], 3)
        self.assertEqual(texts(sites["train_step (/home/u/train.py:42)"][3]),
                         ("train_step (/home/u/train.py:42)", "main_loop (/home/u/train.py:60)",
                          "<module> (/home/u/train.py:70)"))
        self.assertEqual(texts(sites["my_ext::make_buffer(long) (/home/u/csrc/ext.cpp:17)"][3]),
                         ("my_ext::make_buffer(long) (/home/u/csrc/ext.cpp:17)",
                          "load (/home/u/data.py:12)", "main_loop (/home/u/train.py:60)",
                          "<module> (/home/u/train.py:70)"))
        self.assertEqual(sites["Model::forward() (/home/u/model.cpp:30)"][1:3],
                         [700 * 1024 + 900 * 1024, 2])
        self.assertEqual(texts(sites["cfunction_call (Objects/methodobject.c:537)"][3]),
                         texts(NO_PY[1:5]))
        self.assertIn(S.frame_text(ALL_HIDDEN[0]), sites)
        self.assertEqual(len(sites), 5)
        out = cuprof("leaks", self.b_path, rc=1).stdout
        self.assertIn("from 5 call sites\n", out)
        self.assertIn("  %s in 3 blocks on device 0 (%d bytes, %d requested)\n"
                      "      train_step (/home/u/train.py:42)\n"
                      "      main_loop (/home/u/train.py:60)\n"
                      "      <module> (/home/u/train.py:70)\n"
                      % (S.format_size(sum(step)), sum(step), sum(step)), out)
        self.assertNotIn("CUDACachingAllocator::Native", out)
        # libc's start-up shows only in the stack that is nothing but machinery (kept whole).
        self.assertEqual(out.count("__libc_start_call_main"), 1)
        self.assertIn("  5.00 KiB in 1 block on device 0 (5120 bytes, 5000 requested)\n"
                      "      c10::cuda::CUDACachingAllocator::raw_alloc(unsigned long) (%s)\n"
                      "      __libc_start_call_main (" % ALL_HIDDEN[0]["filename"], out)
        # --all-frames: the old grouping, one site per distinct stack.
        out = cuprof("leaks", "--all-frames", self.b_path, rc=1).stdout
        self.assertIn("from 7 call sites\n", out)
        self.assertIn("      torch::unwind::unwind() (%s)\n" % UNWIND[0]["filename"], out)
        flame = cuprof("flamegraph", "--at", "end", self.b_path, rc=0).stdout
        self.assertIn("<module> (/home/u/train.py:70);main_loop (/home/u/train.py:60);"
                      "train_step (/home/u/train.py:42) %d\n" % sum(step), flame)


# ---- Snapshots cuprof wrote while sites_app ran ----

def source_line(name, text):
    with open(os.path.join(SRC, "tests", "integration", "cli", name)) as f:
        hits = [i + 1 for i, line in enumerate(f) if text in line]
    assert len(hits) == 1, (name, text, hits)
    return hits[0]


class Recorded(unittest.TestCase, Checks):
    def setUp(self):
        self.a_path = os.path.join(WORK, "app-a.pickle")
        self.b_path = os.path.join(WORK, "app-b.pickle")
        for f in os.listdir(WORK):
            if f.startswith("app-"):
                os.unlink(os.path.join(WORK, f))
        p = cuprof("run", "--sim", "-q", "-o", self.b_path, "--", SITES_APP, self.a_path, rc=0)
        line = [l for l in p.stdout.splitlines() if l.startswith("sites_app: ")]
        self.assertEqual(len(line), 1, p.stdout)
        self.res = {k: int(v) for k, v in (kv.split("=") for kv in line[0].split()[1:])}
        with open(self.a_path, "rb") as f:
            self.a = pickle.load(f)
        with open(self.b_path, "rb") as f:
            self.b = pickle.load(f)

    def test_every_command_default_and_all_frames(self):
        self.check_all(self.a_path, self.b_path, self.a, self.b)

    def test_sites_named_by_the_users_first_frame(self):
        got = json.loads(cuprof("leaks", "--json", self.b_path, rc=1).stdout)
        sites = {(s["frames"][0]["name"], os.path.basename(s["frames"][0]["filename"]),
                  s["frames"][0]["line"]): s for s in got["sites"]}
        weights = ("load_weights", "sites_app.c", source_line("sites_app.c", "the weights' line"))
        step = ("train_step", "train.py", source_line("sites_train.c", "the step's line"))
        call = ("cfunction_call", "sites_app.c",
                source_line("sites_app.c", "void *p = at_empty(size, 0)"))
        self.assertEqual(set(sites), {weights, step, call})
        # Two routes each (through at::detail::empty_cuda or not): one site, summed.
        self.assertEqual((sites[weights]["requested_bytes"], sites[weights]["blocks"]),
                         (self.res["weight_bytes"], self.res["weights"]))
        self.assertEqual((sites[step]["requested_bytes"], sites[step]["blocks"]),
                         (self.res["step_bytes"], 4))
        self.assertEqual(sites[call]["requested_bytes"], self.res["call_bytes"])
        # Below each first frame: only main (libc's start-up and the interpreter are hidden).
        main_of = {weights: "load_weights from main", step: "the interpreter from main",
                   call: "a C call, no Python"}
        for key, s in sites.items():
            self.assertEqual([(f["name"], f["line"]) for f in s["frames"][1:]],
                             [("main", source_line("sites_app.c", main_of[key]))], key)
        # The interpreter-named frames are hidden only in the stack with a Python frame.
        self.assertTrue(sites[step]["frames"][0]["filename"].endswith("/train.py"))
        self.assertNotIn("_PyObject_MakeTpCall", json.dumps(got))
        # --all-frames: the routes are separate sites again.
        whole = json.loads(cuprof("leaks", "--json", "--all-frames", self.b_path, rc=1).stdout)
        self.assertEqual(len(whole["sites"]), 5)
        self.assertTrue(all(s["frames"][0]["name"].startswith(
            "c10::cuda::CUDACachingAllocator::raw_alloc") for s in whole["sites"]))
        # diff: the step's site grew by the step's bytes, by both routes.
        got = json.loads(cuprof("diff", "--json", self.a_path, self.b_path, rc=0).stdout)
        grew = {s["frames"][0]["name"]: s["growth"] for s in got["sites"]}
        self.assertEqual(grew, {"train_step": self.res["step_bytes"],
                                "cfunction_call": self.res["call_bytes"]})


def main():
    global CUPROF, WORK, SITES_APP, SRC
    CUPROF, WORK = (os.path.abspath(a) for a in sys.argv[1:3])
    group = sys.argv[3]
    if group == "recorded":
        SITES_APP, SRC = (os.path.abspath(a) for a in sys.argv[4:6])
    os.makedirs(WORK, exist_ok=True)
    case = {"built": Built, "recorded": Recorded}[group]
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(case)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
