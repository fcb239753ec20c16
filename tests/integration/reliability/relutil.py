"""Helpers shared by the reliability tests: run a program under a watchdog that prints every
thread's stack (gdb, else /proc) before failing, find and verify snapshot dumps."""
import glob
import os
import shutil
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER_DIR = os.path.join(HERE, "..", "..", "golden")


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


def checker():
    sys.path.insert(0, CHECKER_DIR)
    import check_snapshot  # noqa: E402 (the independent checker of tests/golden)
    return check_snapshot


def verify_dumps(directory, complete_history=False, pattern="*", keep=True):
    """Loads every dump in directory with the independent checker; returns (name, snapshot)
    pairs (snapshot None unless keep: hundreds of big dumps do not fit in memory at once).
    Fails on a leftover temporary file or any problem."""
    cs = checker()
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


def sanitized():
    return os.environ.get("CUPROF_TEST_SANITIZED") == "1"


def sanitizer_preload():
    """Under the ASan test setup the sanitizer runtimes must come first in LD_PRELOAD."""
    if not sanitized():
        return []
    libs = []
    for name in ("libasan.so", "libubsan.so"):
        out = subprocess.run(["cc", "-print-file-name=" + name], capture_output=True, text=True)
        if os.path.isabs(out.stdout.strip()):
            libs.append(os.path.realpath(out.stdout.strip()))
    return libs


def sim_env(build_root, devices=1, mem=None, preload=None, **extra):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(("CUPROF_", "SIMCUDA_")) and not k.startswith("CUPROF_TEST_"):
            del env[k]
    env["SIMCUDA_DEVICES"] = str(devices)
    if mem:
        env["SIMCUDA_MEM"] = mem
    env.pop("LD_PRELOAD", None)
    libs = sanitizer_preload() + ([preload] if preload else [])
    if libs:
        env["LD_PRELOAD"] = ":".join(libs)
    env.update({k: str(v) for k, v in extra.items()})
    return env
