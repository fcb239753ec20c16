#!/usr/bin/env python3
"""An installed cuprof carries the simulated device: `meson install --destdir` into a temporary
folder puts libcuda.so.1 and libcudart.so.13 in PREFIX/LIBDIR/cuprof/sim and nowhere on the
default library path; the installed cuprof, libcuprof.so and simulated libraries hold no build
path in their loaded data; and the installed `cuprof run --sim`, run with nothing in its
environment naming the build tree, makes a program load the installed simulated driver and
runtime and the installed libcuprof.so (read from the program's /proc/self/maps) and writes a
snapshot recording the program's 3 MiB allocation.

The staging folder is a temporary folder outside the build tree, so no path of the run names it.

Usage: test_install.py MESON BUILD_DIR SOURCE_DIR PREFIX BINDIR LIBDIR PROBE
"""
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from shimrun import Checks, dumps, sanitizer_preload  # noqa: E402 (tests/integration/)


def staged(dest, prefix, sub):
    """DESTDIR/PREFIX/SUB (SUB may be absolute, as meson allows)."""
    full = sub if os.path.isabs(sub) else os.path.join(prefix, sub)
    return os.path.join(dest, full.lstrip("/"))


def loaded_data(path, tmp):
    """The bytes of a file that are loaded at run time (strip drops the debug sections, whose
    DW_AT_comp_dir names the build folder by design)."""
    out = os.path.join(tmp, os.path.basename(path) + ".stripped")
    subprocess.run(["strip", "-o", out, path], check=True)
    with open(out, "rb") as f:
        return f.read()


def main():
    with tempfile.TemporaryDirectory(prefix="cuprof-install-") as work:
        test(*sys.argv[1:8], work)


def test(meson, build, source, prefix, bindir, libdir, probe, work):
    build, source, probe = (os.path.realpath(p) for p in (build, source, probe))
    check = Checks()
    dest = os.path.join(work, "dest")
    os.makedirs(dest)
    p = subprocess.run([meson, "install", "-C", build, "--no-rebuild", "--quiet", "--destdir",
                        dest], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, f"meson install failed: {p.stdout}{p.stderr}")
    if p.returncode != 0:
        return check.finish()
    cuprof = os.path.join(staged(dest, prefix, bindir), "cuprof")
    lib_dir = staged(dest, prefix, libdir)
    sim_dir = os.path.join(lib_dir, "cuprof", "sim")
    lib = os.path.join(lib_dir, "libcuprof.so")
    sim_libs = [os.path.join(sim_dir, n) for n in ("libcuda.so.1", "libcudart.so.13")]
    for f in [cuprof, lib] + sim_libs:
        check(os.path.isfile(f), f"not installed: {f}")
    # Never where the dynamic loader looks by default: only the private folder holds them.
    for root, _, files in os.walk(dest):
        for n in files + [d for d in os.listdir(root) if os.path.islink(os.path.join(root, d))]:
            if re.match(r"libcuda(rt)?\.so", n):
                check(os.path.realpath(root) == os.path.realpath(sim_dir),
                      f"simulated library outside {sim_dir}: {os.path.join(root, n)}")
    # No build or source path in what is loaded, nor in RPATH/RUNPATH.
    words = {build.encode(), source.encode(), os.path.abspath(sys.argv[2]).encode()}
    for f in [cuprof, lib] + sim_libs:
        if not os.path.isfile(f):
            continue
        data = loaded_data(f, work)
        for w in words:
            check(w not in data, f"{f} holds {w.decode()!r}")
        dyn = subprocess.run(["readelf", "-d", f], capture_output=True, text=True).stdout
        check("RPATH" not in dyn and "RUNPATH" not in dyn, f"{f} has a run path: {dyn}")

    # Run it from the staged prefix with nothing naming the build tree in the environment.
    run_dir = os.path.join(work, "run")
    os.makedirs(run_dir)
    app = os.path.join(run_dir, "app")
    shutil.copy(probe, app)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUPROF_", "SIMCUDA_", "MESON", "LD_"))}
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "/usr/bin:/bin").split(os.pathsep)
                                  if not any(d.startswith(w.decode()) for w in words))
    if sanitizer_preload():
        env["LD_PRELOAD"] = ":".join(sanitizer_preload())
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    # PWD, pyenv's folder and the like name the folder meson test runs in: dropped.
    env = {k: v for k, v in env.items() if not any(w.decode() in v for w in words)}
    env["PWD"] = run_dir
    # The program's control socket in a folder of this test's own, outside the build tree.
    runtime_dir = os.path.join(work, "xdg")
    os.makedirs(runtime_dir, mode=0o700)
    env["XDG_RUNTIME_DIR"] = runtime_dir
    r = subprocess.run([cuprof, "run", "--sim", "-q", "-o", os.path.join(run_dir, "s-%p.pickle"),
                        "--", "./app"], capture_output=True, text=True, env=env, cwd=run_dir,
                       timeout=120)
    check(r.returncode == 0 and "install_probe: cudaMalloc=0 cudaFree=0" in r.stdout,
          f"installed cuprof run --sim: exit {r.returncode}\n{r.stdout}{r.stderr}")
    loaded = sorted(set(re.findall(r"^install_probe: lib (.*)$", r.stdout, re.M)))
    want = sorted(os.path.realpath(f) for f in [lib] + sim_libs)
    check([os.path.realpath(f) for f in loaded] == want,
          f"libraries loaded: {loaded}, want the installed {want}")
    files = dumps(run_dir, "s-*.pickle")
    check(files, f"no snapshot written: {r.stderr}")
    if files:
        with open(files[-1], "rb") as f:
            snap = pickle.load(f)
        sizes = [e["size"] for t in snap["device_traces"] for e in t if e["action"] == "alloc"]
        check(3 << 20 in sizes, f"the 3 MiB allocation is not in the snapshot: {sizes}")
    check.finish()  # exits; the temporary folder goes with the exception SystemExit unwinds


if __name__ == "__main__":
    main()
