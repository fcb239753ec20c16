"""What every guest case uses: guest_app run under the shim until it is ready, the `cuprof`
command, files awaited, snapshots loaded and checked, planted victims. (test_guest.py runs the
cases.)"""
import ctypes
import os
import stat
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/)


VICTIM = b"someone else's file\n"


def read_until_ready(proc):
    """The program's lines up to its "ready PID" line (all of them if it never comes)."""
    lines = []
    while True:
        line = proc.stdout.readline()
        if not line:
            return lines
        lines.append(line.strip())
        if line.startswith("ready"):
            return lines


class Program:
    """guest_app under the shim, read until its "ready PID" line."""

    def __init__(self, a, args, tmp, **variables):
        v = {"CUPROF_SNAPSHOT": os.path.join(tmp, "snap-%n.pickle")}
        v.update(variables)
        self.env = shimrun.env(a.ld_path, a.lib, **v)
        self.proc = subprocess.Popen([a.app] + list(args), env=self.env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = read_until_ready(self.proc)
        self.pid = self.proc.pid

    def finish(self, send="go\n", timeout=30):
        """Sends a line, waits for the exit; (returncode or None on a hang, stdout lines, stderr)."""
        try:
            out, err = self.proc.communicate(send, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            return None, self.lines + out.splitlines(), err
        return self.proc.returncode, self.lines + out.splitlines(), err


def tgkill(pid, sig):
    """To the main thread itself: cuprof's threads block every signal, others may not."""
    libc = ctypes.CDLL(None, use_errno=True)
    nr = 234 if os.uname().machine == "x86_64" else 131
    libc.syscall(nr, pid, pid, sig)


def cuprof(a, *args, timeout=30):
    try:
        p = subprocess.run([a.cuprof] + list(args), capture_output=True, text=True,
                           timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return None, "", "timed out"


def wait_file(path, timeout=15):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    return os.path.exists(path)


def wait_listed(a, pid, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rc, out, _ = cuprof(a, "ps")
        if rc == 0 and any(line.split()[:1] == [str(pid)] for line in out.splitlines()):
            return True
        time.sleep(0.1)
    return False


def loads_ok(f, path, label):
    try:
        snap = shimrun.load_checker().load(path)
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        f.check(False, f"{label}: {path} does not load: {e}")
        return None
    problems = shimrun.load_checker().check(snap)
    f.check(not problems, f"{label}: {problems[:3]}")
    return snap


def regular_0600(f, path, label):
    st = os.lstat(path)
    f.check(stat.S_ISREG(st.st_mode), f"{label}: {path} is not a regular file")
    f.check(stat.S_IMODE(st.st_mode) == 0o600,
            f"{label}: {path} has mode {oct(stat.S_IMODE(st.st_mode))}, want 0o600")


def make_victims(tmp, n):
    paths = []
    for i in range(n):
        p = os.path.join(tmp, f"victim-{i}")
        with open(p, "wb") as fh:
            fh.write(VICTIM)
        paths.append(p)
    return paths


def victims_intact(f, victims, label):
    for v in victims:
        with open(v, "rb") as fh:
            f.check(fh.read() == VICTIM, f"{label}: {v} was written through a planted link")


def old_temp_names(directory, pid, final_base, ext):
    """The names cuprof's dumps used to write to, predictable from the pid: the exit dump's
    hidden name and the writer's own `.tmp.PID` beside it, and `FILE.tmp.PID` of an exact path."""
    hidden = os.path.join(directory, f".cuprof-tmp-{pid}-0{ext}")
    return [hidden, f"{hidden}.tmp.{pid}", os.path.join(directory, f"{final_base}.tmp.{pid}")]


def live_sizes(f, path, label):
    """The sizes of the snapshot's live blocks, sorted ([] when it does not load)."""
    snap = loads_ok(f, path, label) or {}
    return sorted(b["size"] for seg in snap.get("segments", []) for b in seg["blocks"]
                  if b["state"] == "active_allocated")


def end_without_input(prog):
    """Waits for the program's end with its stdin still open (at end of input it would exit by
    itself, racing the signal's snapshot); then as Program.finish."""
    try:
        prog.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    return prog.finish(send=None, timeout=5)
