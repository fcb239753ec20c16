#!/usr/bin/env python3
"""A runtime loaded out of RTLD_NEXT's sight, and the line about a library that caches device
memory itself (preload/library_hint.h). dlopen_alloc_app (linked to no CUDA library), and Python
itself through ctypes, load a copy of tests/apps' libruntime_user.so with dlopen's RTLD_LOCAL, as
Python loads an extension module; its cudaMalloc binds to cuprof's export (the preloaded library
leads every lookup scope), and cuprof must find the runtime that dependency loaded (before, every
call answered cudaErrorInitializationError under cuprof and succeeded without it). The program's output is the
one without cuprof in every mode, and the cache-mode snapshot counts its bytes for that library.
Named as PyTorch's libc10_cuda.so, in cache mode cuprof says once, naming the object and its
allocator, that trace mode records it as it runs without cuprof; in trace and off mode, under
CUPROF_LOG=quiet and for a library of any other name it says nothing.

Usage: test_library_hint.py --lib LIB --ld-path DIRS APP RUNTIME_USER
"""
import os
import pickle
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402

LINE = ("cuprof: libc10_cuda.so (PyTorch's caching allocator) caches device memory itself, and "
        "in cache mode cuprof's cache sits under it: two caches hold more memory than one (the "
        "job can run out sooner) and CUDA IPC of its blocks is refused; CUPROF_MODE=trace "
        "records it as it runs without cuprof")


# Python itself loading the library: ctypes.CDLL is dlopen with RTLD_LOCAL, as an extension
# module's import is.
PYTHON_LOADS = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
p = ctypes.c_void_p()
for _ in range(2):
    e = lib.runtime_user_alloc(ctypes.byref(p), ctypes.c_size_t(1 << 20))
    if e != 0 or lib.runtime_user_free(p) != 0:
        sys.exit("dlopen_alloc: error %d" % e)
print("dlopen_alloc: ok")
"""


def hints(stderr):
    return [l for l in stderr.splitlines() if "caches device memory itself" in l]


def main():
    a = shimrun.app_arguments(more=("runtime_user",))
    check = shimrun.Checks()
    with tempfile.TemporaryDirectory() as tmp:
        torch_lib = os.path.join(tmp, "torch", "lib")
        os.makedirs(torch_lib)
        c10 = os.path.join(torch_lib, "libc10_cuda.so")
        other = os.path.join(tmp, "libsolver.so")
        shutil.copy(a.runtime_user, c10)
        shutil.copy(a.runtime_user, other)
        python = [sys.executable, "-c", PYTHON_LOADS]
        for cmd in ([a.app], python):
            alone = shimrun.run_shim(cmd + [c10], a.ld_path)
            check(alone.returncode == 0 and alone.stdout == "dlopen_alloc: ok\n",
                  f"without cuprof: {alone}")
        cases = [("cache", c10, {}, [LINE]),
                 ("off", c10, {"CUPROF_MODE": "off"}, []),
                 ("cache, no stacks", c10, {"CUPROF_STACKS": "none"}, [LINE]),
                 ("trace", c10, {"CUPROF_MODE": "trace"}, []),
                 ("quiet", c10, {"CUPROF_LOG": "quiet"}, []),
                 ("another name", other, {}, [])]
        cases = [(what, [a.app], path, env, want) for what, path, env, want in cases]
        cases += [("python, cache", python, c10, {}, [LINE]),
                  ("python, trace", python, c10, {"CUPROF_MODE": "trace"}, [])]
        for what, cmd, path, env, want in cases:
            env = dict(env, CUPROF_SNAPSHOT=os.path.join(tmp, "s-%n.pickle"))
            r = shimrun.run_shim(cmd + [path], a.ld_path, preload=a.lib, extra_env=env)
            check(r.returncode == 0 and r.stdout == "dlopen_alloc: ok\n", f"{what}: {r}")
            check(hints(r.stderr) == want, f"{what}: {hints(r.stderr)}")
            if what in ("cache", "python, cache"):
                with open(os.path.join(tmp, "s-0.pickle"), "rb") as f:
                    rows = pickle.load(f)["cuprof"]["libraries"]
                check([(r["library"], r["cache_requested_bytes_peak"]) for r in rows] ==
                      [("libc10_cuda.so", 1 << 20)], f"cache: libraries {rows}")
            for f in os.listdir(tmp):
                if f.startswith("s-"):
                    os.unlink(os.path.join(tmp, f))
    check.finish()


if __name__ == "__main__":
    main()
