"""Helpers shared by the reliability tests: run a program under a watchdog that prints every
thread's stack (gdb, else /proc) before failing, find and verify snapshot dumps."""
import glob
import os
import shutil
import signal
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/shimrun.py)

sanitized = shimrun.sanitized


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def _descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for kids in glob.glob(f"/proc/{p}/task/*/children"):
            try:
                todo += [int(k) for k in open(kids).read().split()]
            except OSError:
                pass
    return out


def dump_stacks(pid):
    """Prints all thread stacks of pid and its descendants (gdb -batch, else kernel stacks)."""
    gdb = shutil.which("gdb")
    for p in _descendants(pid):
        print(f"---- stacks of pid {p} ----", flush=True)
        if gdb:
            r = subprocess.run([gdb, "-batch", "-nx", "-p", str(p), "-ex", "thread apply all bt 30"],
                               capture_output=True, text=True, timeout=120)
            print("\n".join(l for l in r.stdout.splitlines() if l.startswith(("#", "Thread"))))
        else:
            for t in sorted(glob.glob(f"/proc/{p}/task/*")):
                try:
                    print(t, open(t + "/wchan").read(), open(t + "/stack").read())
                except OSError as e:
                    print(t, e)


def run_watched(cmd, env, timeout, stdin=None):
    """Runs cmd; on timeout prints all stacks and fails (deadlock watchdog)."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         stdin=stdin, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"watchdog: {cmd[0]} still running after {timeout} s: deadlock? stacks follow",
              flush=True)
        dump_stacks(p.pid)
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        print("stdout:", out[-4000:], "\nstderr:", err[-4000:])
        fail("watchdog fired")
    return p.returncode, out, err


def verify_dumps(directory, complete_history=False, pattern="*", keep=True):
    """Loads every dump in directory with the independent checker; returns (name, snapshot)
    pairs (snapshot None unless keep: hundreds of big dumps do not fit in memory at once).
    Fails on a leftover temporary file or any problem."""
    cs = shimrun.load_checker()
    names = sorted(glob.glob(os.path.join(directory, pattern)))
    tmp = [n for n in names if ".tmp" in os.path.basename(n)]
    if tmp:
        fail(f"temporary files left behind: {tmp}")
    snaps = []
    for n in names:
        try:
            snap = cs.load(n)
        except Exception as e:  # a dump that does not load is exactly what we look for
            fail(f"{n}: does not load: {e!r}")
        problems = cs.check(snap, complete_history=complete_history)
        if problems:
            fail(f"{n}: " + "; ".join(problems[:10]))
        snaps.append((n, snap if keep else None))
        del snap
    return snaps


def sim_env(devices=1, mem=None, preload=None, **extra):
    """The environment of a run on the simulated device (LD_LIBRARY_PATH from meson), sanitizer
    leak checks left as the test setup has them."""
    if mem:
        extra["SIMCUDA_MEM"] = mem
    return shimrun.env(None, preload, leaks=True, SIMCUDA_DEVICES=devices, **extra)
