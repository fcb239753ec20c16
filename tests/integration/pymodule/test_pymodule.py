#!/usr/bin/env python3
"""The `cuprof` Python module (issue 29, part 3) and NVTX from Python: with every CPython on the
machine (as scripts/setup installs them), under cuprof on the simulated device:
  api        api_app.py, under `cuprof run`, asks each of PyTorch's memory calls and checks it
             against the snapshot and stats it should match (a ctypes-driven program);
  not_loaded importing it without cuprof raises NotLoadedError, an ImportError; in off mode a
             call raises CuprofError;
  nvtx       `cuprof run -- python3 nvtx_app.py` (NVTX ranges through ctypes): the ranges are
             summary's phases and plot's data; with CUPROF_STACKS=none and deep Python stacks too;
  installed  `meson install` puts the module in the interpreter's site-packages, whence it imports.

Usage: test_pymodule.py GROUP --lib LIBCUPROF --ld-path SIM_PATH --work DIR --module-dir DIR
       [--cuprof CUPROF] [--nvtx LIBNVTX] [--meson MESON --build DIR --site SITE]
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir))
import shimrun  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "cli"))
import report_data  # noqa: E402

check = shimrun.Checks()


def interpreters():
    """Every CPython 3 on this machine, one per version (as tests/integration/python does)."""
    found = {}
    candidates = ["/usr/bin/python3", sys.executable]
    for pattern in ("/usr/bin/python3.[0-9]*", os.path.expanduser("~/.pyenv/versions/3.*/bin/"
                                                                   "python3.[0-9]*")):
        candidates += sorted(glob.glob(pattern))
    for c in candidates:
        if not re.search(r"python3(\.\d+)?$", c) or not os.access(c, os.X_OK):
            continue
        out = subprocess.run([c, "-c", "import sys; print(sys.version.split()[0])"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        if out and out not in found:
            found[out] = c
    return sorted(found.items())


def module_env(args, **extra):
    return shimrun.env(args.ld_path, PYTHONPATH=args.module_dir, CUPROF_DUMP_ON="none",
                       CUPROF_LOG="quiet", **extra)


def group_api(args, tmp):
    """api_app.py under `cuprof run` on the simulated device, with every interpreter."""
    for version, py in interpreters():
        env = module_env(args)
        r = shimrun.run([args.cuprof, "run", "--sim", "-q", "-o", os.path.join(tmp, "api-%n.pickle"),
                         "--", py, os.path.join(HERE, "api_app.py"), tmp], env, timeout=300)
        check(r.returncode == 0 and r.stdout.strip().endswith("api_app: ok"),
              f"python {version}: {r.returncode}\n{r.stdout}{r.stderr[-3000:]}")


def group_not_loaded(args, tmp):
    code = ("import sys\ntry:\n    import cuprof\nexcept ImportError as e:\n"
            "    print(type(e).__name__, isinstance(e, ImportError), e)\n    sys.exit(3)\n")
    for version, py in interpreters():
        r = shimrun.run([py, "-c", code], module_env(args))
        check(r.returncode == 3 and r.stdout.startswith("NotLoadedError True cuprof: libcuprof.so "
                                                        "is not loaded in this process"),
              f"python {version} without cuprof: {r.returncode} {r.stdout} {r.stderr}")
    py = interpreters()[-1][1]
    env = module_env(args, CUPROF_MODE="off")
    env["LD_PRELOAD"] = ":".join(list(shimrun.sanitizer_preload()) + [args.lib])
    r = shimrun.run([py, "-c", "import cuprof\ntry:\n    cuprof.memory_allocated()\nexcept "
                     "cuprof.CuprofError as e:\n    print(e)\n"], env)
    check(r.returncode == 0 and "records nothing in this process (CUPROF_MODE=off" in r.stdout,
          f"off mode: {r.returncode} {r.stdout} {r.stderr}")


PHASES = {  # summary's rows: calls, peak, rise, growth
    "backward": ("3", "26.00 MiB", "2.00 MiB", "-18.00 MiB"),
    "train": ("1", "26.00 MiB", "26.00 MiB", "+16.00 MiB"),
    "forward": ("3", "24.00 MiB", "8.00 MiB", "+24.00 MiB"),
    "optimizer.step": ("3", "18.00 MiB", "0 bytes", "-6.00 MiB"),
}


def group_nvtx(args, tmp):
    py = interpreters()[-1][1]
    for extra in ({}, {"CUPROF_STACKS": "none", "deep": True}):
        run_dir = tempfile.mkdtemp(dir=tmp)
        env = shimrun.env(args.ld_path, **{k: v for k, v in extra.items() if k != "deep"})
        cmd = [args.cuprof, "run", "--sim", "-q", "-o", os.path.join(run_dir, "s-%n.pickle"),
               "--", py, os.path.join(HERE, "nvtx_app.py"), args.nvtx]
        r = shimrun.run(cmd + (["deep"] if extra.get("deep") else []), env, timeout=300)
        check(r.returncode == 0 and "nvtx_app: ok" in r.stdout, f"cuprof run {extra}: "
              f"{r.returncode} {r.stdout} {r.stderr[-2000:]}")
        snaps = shimrun.dumps(run_dir, "s-*.pickle")
        if not check(len(snaps) == 1, f"one snapshot: {snaps}"):
            continue
        summary = shimrun.run([args.cuprof, "summary", snaps[0]], env).stdout
        section = summary[summary.find("phases (NVTX ranges)"):summary.find("top call sites")]
        check(section.startswith("phases (NVTX ranges): 10 ranges of 4 names, 0 marks;"),
              f"summary's phases:\n{summary}")
        rows = {m[0].strip(): m[1:] for m in re.findall(
            r"^  (.{30}) +(\d+)  (\d\S* \S+) +(\d\S* \S+) +(\S+ \S+)", section, re.M)}
        check(rows == PHASES, f"summary's rows {rows}\n{section}")
        html = os.path.join(run_dir, "report.html")
        r = shimrun.run([args.cuprof, "plot", snaps[0], "-o", html], env)
        dev = report_data.read(html).data["runs"][0]["devices"][0] if r.returncode == 0 else {}
        names = {n["name"]: (n["calls"], n["peak"] >> 20)
                 for n in dev.get("ranges", {}).get("names", [])}
        check(names == {"backward": (3, 26), "train": (1, 26), "forward": (3, 24),
                        "optimizer.step": (3, 18)}, f"plot's data: {names}")


def group_installed(args, tmp):
    dest = os.path.join(tmp, "dest")
    r = subprocess.run([args.meson, "install", "-C", args.build, "--no-rebuild", "--quiet",
                        "--destdir", dest], capture_output=True, text=True, timeout=300)
    if not check(r.returncode == 0, f"meson install: {r.stdout}{r.stderr}"):
        return
    site = os.path.join(dest, args.site.lstrip("/"))
    check(os.path.isfile(os.path.join(site, "cuprof", "__init__.py")),
          f"cuprof/__init__.py installed in {site}")
    env = shimrun.env(args.ld_path, PYTHONPATH=site, CUPROF_LOG="quiet", CUPROF_DUMP_ON="none")
    env["LD_PRELOAD"] = ":".join(list(shimrun.sanitizer_preload()) + [args.lib])
    code = ("import cuprof, ctypes\nprint(cuprof.__file__)\nwith cuprof.annotate('x'):\n"
            "    pass\nprint(cuprof.memory_allocated())\n")
    r = shimrun.run([sys.executable, "-c", code], env)
    check(r.returncode == 0 and r.stdout.splitlines()[:1] == [os.path.join(site, "cuprof",
                                                                           "__init__.py")],
          f"the installed module imports: {r.stdout} {r.stderr}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("group")
    for opt in ("--lib", "--ld-path", "--work", "--module-dir", "--cuprof", "--nvtx", "--meson",
                "--build", "--site"):
        ap.add_argument(opt)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        {"api": group_api, "not_loaded": group_not_loaded, "nvtx": group_nvtx,
         "installed": group_installed}[args.group](args, tmp)
    check.finish()


if __name__ == "__main__":
    main()
