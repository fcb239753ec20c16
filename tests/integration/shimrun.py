"""Shared helpers of the integration tests: run a program on the simulated device with or without
libcuprof.so in LD_PRELOAD (under the asan test setup the sanitizer runtimes go first), collect
soft checks, find the snapshots a run wrote and load the independent snapshot checker
(tests/golden/check_snapshot.py).

A test in a subfolder imports it with:
    sys.dont_write_bytecode = True
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
    import shimrun
"""
import argparse
import collections
import contextlib
import functools
import glob
import importlib.util
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, os.pardir, "golden", "check_snapshot.py")
RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
# A program's own leaks are not what the shim tests look at; a sanitizer error still aborts.
QUIET_LEAKS = "detect_leaks=0:abort_on_error=1"

# What a run ended with; indexable as (rc, stdout, stderr) too.
Result = collections.namedtuple("Result", "returncode stdout stderr")


def sanitized():
    """True under the asan test setup (meson test --setup=asan)."""
    return os.environ.get("SANITIZER_BUILD") == "1"


@functools.lru_cache(maxsize=None)
def sanitizer_preload():
    """The ASan and UBSan runtimes (real paths), which must come first in LD_PRELOAD under the
    asan setup; empty otherwise."""
    if not sanitized():
        return ()
    libs = []
    for name in ("libasan.so", "libubsan.so"):
        out = subprocess.run(["cc", "-print-file-name=" + name], capture_output=True, text=True)
        path = out.stdout.strip()
        if os.path.isabs(path):
            libs.append(os.path.realpath(path))
    return tuple(libs)


def env(ld_path=None, preload=None, leaks=False, **variables):
    """The environment of one run: this one without any CUPROF_* setting but
    CUPROF_SOCKET_DIR (the test setup's own folder of control sockets),
    SIMCUDA_*, rank variable or LD_PRELOAD; LD_LIBRARY_PATH=ld_path (None: the test's own);
    LD_PRELOAD = the sanitizer runtimes, then preload (a path or a ':' list) if given. leaks=False
    turns LeakSanitizer off (sanitized runs). variables are set last (values made strings)."""
    e = {k: v for k, v in os.environ.items()
         if (not k.startswith(("CUPROF_", "SIMCUDA_")) or k == "CUPROF_SOCKET_DIR")
         and k not in RANK_VARS and k != "LD_PRELOAD"}
    if ld_path is not None:
        e["LD_LIBRARY_PATH"] = ld_path
    if sanitized() and not leaks:
        e["ASAN_OPTIONS"] = QUIET_LEAKS
    libs = list(sanitizer_preload()) + ([preload] if preload else [])
    if libs:
        e["LD_PRELOAD"] = ":".join(libs)
    e.update({k: str(v) for k, v in variables.items()})
    return e


@contextlib.contextmanager
def private_sockets(prefix="cuprof-test-"):
    """A runtime folder of the test's own (mode 0700, inside the test setup's), named by
    XDG_RUNTIME_DIR and CUPROF_SOCKET_DIR for this process and every program it starts: both
    ends of the control socket look there alone, so `cuprof ps` and `top` without a PID see this
    test's programs only. Yields the folder."""
    base = os.environ.get("XDG_RUNTIME_DIR") or None
    saved = {k: os.environ.get(k) for k in ("XDG_RUNTIME_DIR", "CUPROF_SOCKET_DIR")}
    with tempfile.TemporaryDirectory(prefix=prefix, dir=base) as xdg:
        os.chmod(xdg, 0o700)
        os.environ["XDG_RUNTIME_DIR"] = xdg
        os.environ["CUPROF_SOCKET_DIR"] = os.path.join(xdg, "cuprof")
        try:
            yield xdg
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


# The tests/apps programs at a lighter workload than their defaults, for the tests about which
# calls a program makes and how cuprof answers them rather than how many: the same calls, paths
# and kind of output line. The simulated device fills host memory, so train_loop's default 20
# steps take seconds, and these tests run each program many times.
LIGHT_ARGS = {"train_loop": ["6"], "threads": ["4", "30"]}


def light(prog):
    """The command line of prog at its light workload (prog alone when it has none)."""
    return [prog] + LIGHT_ARGS.get(os.path.basename(prog), [])


def run(cmd, environment, timeout=120, cwd=None, stdin=None):
    """Runs cmd to its end; returns a Result with its text output."""
    p = subprocess.run(cmd, env=environment, cwd=cwd, stdin=stdin, capture_output=True, text=True,
                       timeout=timeout)
    return Result(p.returncode, p.stdout, p.stderr)


def run_shim(cmd, ld_path, preload=None, extra_env=None, timeout=120):
    """run() in env(ld_path, preload, **extra_env)."""
    return run(cmd, env(ld_path, preload, **(extra_env or {})), timeout=timeout)


def app_arguments(description=None, more=(), options=()):
    """The command line of a test that runs one program under the shim: --lib LIB --ld-path
    PATH APP, then the positional arguments named in `more`; `options` names optional ones
    ("--cuprof": None when not given)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    for name in options:
        ap.add_argument(name)
    ap.add_argument("app")
    for name in more:
        ap.add_argument(name)
    return ap.parse_args()


def answers_in_every_mode(check, a, want, cache_want=None, also=None):
    """a.app alone, then under a.lib in cache, trace and off mode: exit 0 and stdout `want` each
    time (`cache_want` in cache mode, when cache mode answers something else on purpose).
    also(name, result), when given, checks more of each run. Returns the results by run name."""
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        runs = [("alone", None, {})]
        runs += [(mode, a.lib, {"CUPROF_MODE": mode,
                                "CUPROF_SNAPSHOT": os.path.join(tmp, mode + ".pickle")})
                 for mode in ("cache", "trace", "off")]
        for name, lib, extra in runs:
            expected = cache_want if name == "cache" and cache_want is not None else want
            got = run_shim([a.app], a.ld_path, preload=lib, extra_env=extra)
            check(got.returncode == 0, f"{name}: exit {got.returncode}: {got.stderr[-500:]}")
            check(got.stdout == expected, f"{name}: got\n{got.stdout}want\n{expected}")
            if also is not None:
                also(name, got)
            results[name] = got
    return results


def dumps(directory, pattern="*"):
    """The files a run wrote in directory, oldest first (name order within one mtime)."""
    return sorted(glob.glob(os.path.join(directory, pattern)),
                  key=lambda p: (os.path.getmtime(p), p))


def run_expandable(cmd, ld_path, lib, tmp, extra_env=None):
    """cmd under lib in cache mode with expandable_segments:True, snapshots written to
    tmp/s-%n.pickle and the simulator's VMM call log (SIMCUDA_VMM_LOG) to tmp/vmm.log: returns
    (Result, the snapshot files oldest first, the log's non-empty lines)."""
    log = os.path.join(tmp, "vmm.log")
    env = {"CUPROF_MODE": "cache", "CUPROF_ALLOC_CONF": "expandable_segments:True",
           "CUPROF_SNAPSHOT": os.path.join(tmp, "s-%n.pickle"), "SIMCUDA_VMM_LOG": log}
    env.update(extra_env or {})
    result = run_shim(cmd, ld_path, preload=lib, extra_env=env)
    lines = []
    if os.path.exists(log):
        with open(log) as f:
            lines = [line.rstrip("\n") for line in f if line.strip()]
    return result, dumps(tmp, "s-*.pickle"), lines


@functools.lru_cache(maxsize=None)
def load_checker(path=CHECKER):
    """The independent snapshot checker as a module (load(path), check(snap, ...))."""
    spec = importlib.util.spec_from_file_location("check_snapshot", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Checks:
    """Soft checks: check(cond, msg) prints "FAIL: msg" and counts it; finish() exits 1 after any
    failure, else prints "ok" and exits 0. The object itself is callable as check."""

    def __init__(self):
        self.failures = []

    def check(self, cond, msg):
        if not cond:
            self.failures.append(msg)
            print("FAIL:", msg, flush=True)
        return bool(cond)

    __call__ = check

    def finish(self):
        if self.failures:
            sys.exit(1)
        print("ok")
        sys.exit(0)
