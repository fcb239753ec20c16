#!/usr/bin/env python3
"""`cuprof run`: the environment PROG gets (LD_PRELOAD by absolute path keeping the user's, the
simulated device first on LD_LIBRARY_PATH, options mapped to CUPROF_*), PROG's exit status passed
through (128+N for a signal), and where the snapshot went with a summary when PROG writes one.
With `nodriver`: without --sim, when no libcuda.so.1 can be loaded, `cuprof run` picks the
simulated device by itself and says so (exit 77, skipped, where a real driver is loadable).

Usage: test_run.py CUPROF LIBCUPROF SIM_DRIVER_DIR SIM_RUNTIME_DIR WORKDIR [nodriver]
"""
import os
import subprocess
import sys


def sanitizer_preload():
    """Under the ASan setup the sanitizer runtime must come first in LD_PRELOAD."""
    if not os.environ.get("SANITIZER_BUILD"):
        return []
    libs = []
    for name in ("libasan.so", "libubsan.so"):
        out = subprocess.run(["cc", "-print-file-name=" + name], capture_output=True, text=True)
        if os.path.isabs(out.stdout.strip()):
            libs.append(os.path.realpath(out.stdout.strip()))
    return libs


def driver_loadable(env):
    """True when libcuda.so.1 loads in a process with this environment."""
    probe = "import ctypes; ctypes.CDLL('libcuda.so.1')"
    return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True).returncode == 0


def test_nodriver(cuprof, lib, drv, rt, work):
    """No --sim and no loadable driver: the simulated device, with a note on stderr."""
    san = sanitizer_preload()
    env = dict(os.environ, LD_PRELOAD=":".join(san), LD_LIBRARY_PATH="/opt/user/lib",
               ASAN_OPTIONS="detect_leaks=0")
    env.pop("CUPROF_SNAPSHOT", None)
    if driver_loadable(dict(env, LD_PRELOAD="")):
        print("a real libcuda.so.1 is loadable here: skipped")
        sys.exit(77)
    p = subprocess.run([cuprof, "run", "-q", "--", "/usr/bin/env"], capture_output=True,
                       text=True, env=env, cwd=work, timeout=60)
    assert p.returncode == 0, p.stderr
    note = ("cuprof: no CUDA driver (libcuda.so.1) could be loaded: running on the simulated "
            "device")
    assert p.stderr.splitlines().count(note) == 1, p.stderr
    got = dict(l.split("=", 1) for l in p.stdout.splitlines() if "=" in l)
    assert got["LD_LIBRARY_PATH"] == drv + ":" + rt + ":/opt/user/lib", got["LD_LIBRARY_PATH"]
    assert got["LD_PRELOAD"] == ":".join(san + [os.path.realpath(lib)]), got["LD_PRELOAD"]
    # PROG really finds the simulated driver there, and with --sim there is no note.
    # (A sanitized simulated driver needs the sanitizer runtimes preloaded, as PROG gets them.)
    assert driver_loadable(dict(env, LD_LIBRARY_PATH=got["LD_LIBRARY_PATH"]))
    p = subprocess.run([cuprof, "run", "--sim", "-q", "--", "/bin/true"], capture_output=True,
                       text=True, env=env, cwd=work, timeout=60)
    assert p.returncode == 0 and note not in p.stderr, p.stderr
    print("ok")


def main():
    cuprof, lib, drv, rt, work = (os.path.abspath(a) for a in sys.argv[1:6])
    os.makedirs(work, exist_ok=True)
    if sys.argv[6:] == ["nodriver"]:
        test_nodriver(cuprof, lib, drv, rt, work)
        return
    os.makedirs(work, exist_ok=True)
    san = sanitizer_preload()
    env = dict(os.environ, LD_PRELOAD=":".join(san), LD_LIBRARY_PATH="/opt/user/lib",
               ASAN_OPTIONS="detect_leaks=0")
    env.pop("CUPROF_SNAPSHOT", None)
    # Options become CUPROF_* for PROG; /usr/bin/env shows what PROG received.
    p = subprocess.run([cuprof, "run", "--sim", "-q", "-o", os.path.join(work, "x-%p.json"),
                        "--mode", "trace", "--alloc-conf", "max_split_size_mb:64",
                        "--history", "state", "--stacks", "all", "--depth", "7", "--",
                        "/usr/bin/env"], capture_output=True, text=True, env=env, cwd=work,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    got = dict(l.split("=", 1) for l in p.stdout.splitlines() if "=" in l)
    assert got["LD_PRELOAD"] == ":".join(san + [os.path.realpath(lib)]), got["LD_PRELOAD"]
    assert got["LD_LIBRARY_PATH"] == drv + ":" + rt + ":/opt/user/lib", got["LD_LIBRARY_PATH"]
    want = {"CUPROF_MODE": "trace", "CUPROF_ALLOC_CONF": "max_split_size_mb:64",
            "CUPROF_HISTORY": "state", "CUPROF_STACKS": "all", "CUPROF_STACK_DEPTH": "7",
            "CUPROF_SNAPSHOT": os.path.join(work, "x-%p.json")}
    for k, v in want.items():
        assert got.get(k) == v, (k, got.get(k))
    # An LD_PRELOAD the user had stays, after ours.
    # Sanitizer runtimes the user preloaded stay first (they refuse to start otherwise). A
    # sanitized cuprof needs its own runtime first too, so only the plain build can put one later.
    user = ["/usr/lib/x86_64-linux-gnu/libm.so.6"]
    first = san or ["/nonexistent/libasan.so.8"]
    order = san + user if san else user + first
    env2 = dict(env, LD_PRELOAD=" ".join(order))
    p = subprocess.run([cuprof, "run", "--sim", "-q", "--", "/usr/bin/env"], capture_output=True,
                       text=True, env=env2, cwd=work, timeout=60)
    got = dict(l.split("=", 1) for l in p.stdout.splitlines() if "=" in l)
    assert got["LD_PRELOAD"] == ":".join(first + [os.path.realpath(lib)] + user), got
    # PROG's status is cuprof's.
    for script, code in (("exit 7", 7), ("exit 0", 0), ("kill -9 $$", 128 + 9)):
        p = subprocess.run([cuprof, "run", "--sim", "-q", "--", "/bin/sh", "-c", script],
                           capture_output=True, text=True, env=env, cwd=work, timeout=60)
        assert p.returncode == code, (script, p.returncode, p.stderr)
        assert "no snapshot was written" in p.stderr, p.stderr
    # A PROG that cannot start: one line naming it, what is wrong and what to do, before the
    # device note; a shell's status.
    here = os.path.join(work, "here_prog")
    with open(here, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(here, 0o755)
    plain = os.path.join(work, "plain.txt")
    open(plain, "w").close()
    for prog, code, line in (
            ("/nonexistent/prog", 127, "/nonexistent/prog: no such file (check the path)"),
            (work, 126, "%s: is a directory (give the program inside it)" % work),
            ("here_prog", 127,
             "here_prog: not found in PATH (for the file in this folder, write ./here_prog)"),
            ("no_such_prog_xyz", 127,
             "no_such_prog_xyz: not found in PATH (check the name, or give the program's path)"),
            (plain, 126, "%s: is not executable (chmod +x it, or run it with its interpreter, "
             "e.g. cuprof run -- python3 script.py)" % plain)):
        for sim in (["--sim"], []):
            p = subprocess.run([cuprof, "run", *sim, "-q", "--", prog], capture_output=True,
                               text=True, env=env, cwd=work, timeout=60)
            assert (p.returncode, p.stderr) == (code, "cuprof: run: %s\n" % line), \
                (prog, p.returncode, p.stderr)
    # A snapshot file written by PROG is found through the template and summarized.
    snap = os.path.join(work, "made-by-prog.json")
    if os.path.exists(snap):
        os.unlink(snap)
    maker = ("import json,os,sys; json.dump({'segments': [], 'device_traces': [[]]}, "
             "open(os.environ['CUPROF_SNAPSHOT'].replace('%p', str(os.getpid())), 'w'))")
    p = subprocess.run([cuprof, "run", "--sim", "-o", os.path.join(work, "made-by-%p.json"),
                        "--", sys.executable, "-c", maker],
                       capture_output=True, text=True, env=env, cwd=work,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert "cuprof: snapshot written to " + os.path.join(work, "made-by-") in p.stderr, p.stderr
    assert "== " + os.path.join(work, "made-by-") in p.stderr, p.stderr
    print("ok")


if __name__ == "__main__":
    main()
