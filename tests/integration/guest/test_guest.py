#!/usr/bin/env python3
"""cuprof as a guest (issue 26): it never harms a file it did not create, never lets another user's
planted file in, never changes the program's signal semantics and never touches a descriptor the
program took back. Each case runs tests/integration/guest/guest_app.c on the simulated device.

usage: test_guest.py CASE APP LIBCUPROF LD_LIBRARY_PATH CUPROF
  traps     planted symlinks and FIFOs at the temporary names cuprof used to predict: exit and
            `cuprof dump` go on, nothing outside is written, the snapshot is a new regular file
  dump-o    `cuprof dump PID -o X` where X is a snapshot, a text file, a device node, a FIFO or a
            symlink: X is kept as it was, the snapshot gets X's next free name; bad extensions
  api       cuprof_dump_snapshot(PATH): replaces a regular file or a link's entry (PyTorch's
            semantics), never a FIFO, never what a link points at
  modes     every snapshot (exit, signal, API, `cuprof dump`) is mode 0600 whatever the umask
  signals   a handler without SA_RESTART still sees EINTR; with it the read goes on; with none
            the program is not disturbed; CUPROF_SIGNAL refuses signals people rely on
  closefds  a program that closes every descriptor and reuses the numbers: no byte of cuprof's
            lands in its file, and the signal still dumps
  stderr    a program that closes descriptor 2 and gets it back for a file of its own: cuprof's
            lines (CUPROF_LOG=debug, signal dumps, the exit dump) never land in that file
  term      SIGTERM, SIGINT and SIGHUP at their default: the snapshot is written ("ended by"),
            then the signal ends the program; a second copy of the request is the same request,
            a second signal after a second ends the program at once (no file, no temporary);
            a program's own handler, one installed after cuprof's (sigaction and signal(3) say
            the default), a disposition put back, an ignored SIGHUP, an idle forked child and
            CUPROF_DUMP_ON without `term` are left as they are; Python keeps KeyboardInterrupt;
            `cuprof run` under ^C reports the snapshot
  fallback  a template whose folder is missing or is a file: one line at start, each snapshot
            (signal, exit, under CUPROF_LOG=quiet too) in $TMPDIR with a line saying so, and in
            the folder again once it exists; `cuprof run` finds and summarizes the moved file
  quick     _exit and _Exit (Python's os._exit, which ends multiprocessing's fork and forkserver
            children) write the exit snapshot first, keeping the status; a vfork child and a
            forked child without a CUDA call write none, a forked child that used CUDA its own;
            _exit in a signal handler writes none and says so in one line; without `exit` in
            CUPROF_DUMP_ON nothing is written
  primary   (APP is primary_app) a library's retain and release of the primary context leaves
            cuprof's cache alone; the release that destroys the context takes the cache with it
  lean      (LD_LIBRARY_PATH: lean/'s driver first; then ENTRY_POINTS_DEF SIM_LD_LIBRARY_PATH)
            a driver that lacks each entry point cuprof looks up, in turn: every mode answers as
            the program does without cuprof, and expandable_segments:True on a driver or device
            without virtual memory management gets ordinary segments and one line
"""
import concurrent.futures
import ctypes
import os
import pickle
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402

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


def case_traps(f, a):
    for kind in ("symlink", "fifo"):
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o1777)  # a shared snapshot directory
            prog = Program(a, ["wait"], tmp)
            victims = make_victims(tmp, 3)
            planted = old_temp_names(tmp, prog.pid, "now.pickle", ".pickle")
            for name, victim in zip(planted, victims):
                if kind == "symlink":
                    os.symlink(victim, name)
                else:
                    os.mkfifo(name)
            # `cuprof dump PID -o` into the trap, then the exit dump.
            rc, out, err = cuprof(a, "dump", str(prog.pid), "-o", os.path.join(tmp, "now.pickle"))
            f.check(rc == 0, f"{kind}: dump -o: {rc} {out!r} {err!r}")
            code, lines, stderr = prog.finish()
            f.check(code == 0, f"{kind}: the program did not exit cleanly: {code} {stderr!r}")
            f.check(lines[:1] and lines[0].startswith("ready"), f"{kind}: stdout lost: {lines}")
            victims_intact(f, victims, kind)
            for name in planted:
                st = os.lstat(name)
                want = stat.S_ISLNK if kind == "symlink" else stat.S_ISFIFO
                f.check(want(st.st_mode), f"{kind}: the planted {name} was replaced")
            for base in ("now.pickle", "snap-0.pickle"):
                path = os.path.join(tmp, base)
                if f.check(os.path.exists(path), f"{kind}: no {base}: {sorted(os.listdir(tmp))}"):
                    regular_0600(f, path, kind)
                    loads_ok(f, path, f"{kind} {base}")
            left = [n for n in os.listdir(tmp) if n.endswith(".tmp") or ".tmp." in n]
            f.check(sorted(left) == sorted(os.path.basename(p) for p in planted
                                           if p.endswith(".tmp") or ".tmp." in p),
                    f"{kind}: temporary files left: {left}")


def case_dump_o(f, a):
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, ["wait"], tmp)
        f.check(wait_listed(a, prog.pid), "dump-o: the program never listed")
        victim = make_victims(tmp, 1)[0]
        targets = {}
        targets["snapshot"] = os.path.join(tmp, "old.pickle")
        with open(targets["snapshot"], "wb") as fh:
            pickle.dump({"segments": [], "device_traces": []}, fh)
        targets["text"] = os.path.join(tmp, "notes.json")
        with open(targets["text"], "w") as fh:
            fh.write("my notes\n")
        targets["device"] = os.path.join(tmp, "null.pickle")
        os.mknod(targets["device"], 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        targets["fifo"] = os.path.join(tmp, "pipe.pickle")
        os.mkfifo(targets["fifo"])
        targets["symlink"] = os.path.join(tmp, "link.pickle")
        os.symlink(victim, targets["symlink"])
        before = {k: os.lstat(p) for k, p in targets.items()}
        contents = {k: open(p, "rb").read() for k, p in targets.items()
                    if k in ("snapshot", "text")}
        for kind, path in targets.items():
            rc, out, err = cuprof(a, "dump", str(prog.pid), "-o", path)
            root, ext = os.path.splitext(path)
            variant = f"{root}.1{ext}"
            f.check(rc == 0 and out.strip().endswith(f"written to {variant}"),
                    f"dump-o {kind}: {rc} {out!r} {err!r}")
            st = os.lstat(path)
            f.check(stat.S_IFMT(st.st_mode) == stat.S_IFMT(before[kind].st_mode) and
                    st.st_ino == before[kind].st_ino and
                    (not stat.S_ISCHR(st.st_mode) or st.st_rdev == before[kind].st_rdev),
                    f"dump-o {kind}: {path} was replaced")
            if kind in contents:
                f.check(open(path, "rb").read() == contents[kind], f"dump-o {kind}: changed")
            if f.check(os.path.exists(variant), f"dump-o {kind}: no {variant}"):
                regular_0600(f, variant, f"dump-o {kind}")
                loads_ok(f, variant, f"dump-o {kind}")
        victims_intact(f, [victim], "dump-o symlink")
        # A second dump to the same name takes the next one.
        rc, out, _ = cuprof(a, "dump", str(prog.pid), "-o", targets["snapshot"])
        f.check(rc == 0 and out.strip().endswith(f"written to {tmp}/old.2.pickle"),
                f"dump-o twice: {out!r}")
        for bad in ("out.txt", "x.pickle.bak", "noext"):
            rc, out, err = cuprof(a, "dump", str(prog.pid), "-o", os.path.join(tmp, bad))
            lines = err.strip().splitlines()
            f.check(rc == 2 and len(lines) == 1 and "-o" in lines[0] and
                    ".pickle, .pkl or .json" in lines[0] and bad in lines[0],
                    f"dump-o {bad}: {rc} {err!r}")
            f.check(not any(n.startswith(bad) for n in os.listdir(tmp)), f"dump-o {bad}: written")
        code, _, stderr = prog.finish()
        f.check(code == 0, f"dump-o: exit {code} {stderr!r}")


def case_api(f, a):
    with tempfile.TemporaryDirectory() as tmp:
        victim = make_victims(tmp, 1)[0]
        fifo = os.path.join(tmp, "fifo.pickle")
        os.mkfifo(fifo)
        link = os.path.join(tmp, "link.pickle")
        os.symlink(victim, link)
        regular = os.path.join(tmp, "old.pickle")
        with open(regular, "w") as fh:
            fh.write("an older snapshot\n")
        env = shimrun.env(a.ld_path, a.lib, CUPROF_SNAPSHOT=os.path.join(tmp, "e-%n.pickle"))
        for kind, path in (("fifo", fifo), ("symlink", link), ("regular", regular)):
            try:
                r = shimrun.run([a.app, "api", path], env, timeout=30)
            except subprocess.TimeoutExpired:
                f.check(False, f"api {kind}: the program hung in cuprof_dump_snapshot")
                continue
            want = "dump: 0" if kind != "fifo" else "dump: "
            f.check(r.returncode == 0 and want in r.stdout, f"api {kind}: {r}")
            if kind == "fifo":
                f.check("dump: 0" not in r.stdout and stat.S_ISFIFO(os.lstat(fifo).st_mode),
                        f"api fifo: {r.stdout!r}")
                f.check(f"cuprof: snapshot to {fifo} failed: " in r.stderr, f"api fifo: {r.stderr!r}")
            else:
                regular_0600(f, path, f"api {kind}")
                loads_ok(f, path, f"api {kind}")
        victims_intact(f, [victim], "api symlink")
        # A path with a newline and an escape sequence: the log stays one line, shown escaped.
        odd = os.path.join(tmp, "a\nb\x1b[2J.pickle")
        r = shimrun.run([a.app, "api", odd], env, timeout=30)
        shown = os.path.join(tmp, "a\\x0ab\\x1b[2J.pickle")
        lines = [l for l in r.stderr.splitlines() if "snapshot written to" in l]
        f.check(r.returncode == 0 and os.path.exists(odd) and
                f"cuprof: snapshot written to {shown}" in lines and "\x1b" not in r.stderr,
                f"api odd path: {r}")


def case_modes(f, a):
    with tempfile.TemporaryDirectory() as tmp:
        old = os.umask(0o022)
        try:
            prog = Program(a, ["wait"], tmp)
            f.check(wait_listed(a, prog.pid), "modes: the program never listed")
            tgkill(prog.pid, signal.SIGUSR1)
            f.check(wait_file(os.path.join(tmp, "snap-0.pickle")), "modes: no signal dump")
            rc, out, err = cuprof(a, "dump", str(prog.pid), "-o", os.path.join(tmp, "d.json"))
            f.check(rc == 0, f"modes: dump {rc} {err!r}")
            code, _, stderr = prog.finish()
            f.check(code == 0, f"modes: exit {code} {stderr!r}")
            r = shimrun.run([a.app, "api", os.path.join(tmp, "api.json")],
                            shimrun.env(a.ld_path, a.lib,
                                        CUPROF_SNAPSHOT=os.path.join(tmp, "x-%n.pickle")))
            f.check(r.returncode == 0 and "dump: 0" in r.stdout, f"modes: api {r}")
        finally:
            os.umask(old)
        names = sorted(os.listdir(tmp))
        f.check(names == ["api.json", "d.json", "snap-0.pickle", "snap-1.pickle", "x-0.pickle"],
                f"modes: files {names}")
        for n in names:
            regular_0600(f, os.path.join(tmp, n), f"modes {n}")


def case_signals(f, a):
    with tempfile.TemporaryDirectory() as tmp:
        # Without SA_RESTART the program's read returns EINTR, as it does without cuprof.
        prog = Program(a, ["eintr"], tmp)
        time.sleep(0.3)
        tgkill(prog.pid, signal.SIGUSR1)
        # The read ends by itself (EINTR); closing stdin first would race the signal.
        try:
            prog.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
        code, lines, stderr = prog.finish(send=None, timeout=5)
        f.check(code == 0 and "read: EINTR handled=1" in lines,
                f"signals eintr: {code} {lines} {stderr!r}")
        f.check(os.path.exists(os.path.join(tmp, "snap-0.pickle")), "signals eintr: no dump")
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, ["restart"], tmp)
        time.sleep(0.3)
        tgkill(prog.pid, signal.SIGUSR1)
        f.check(wait_file(os.path.join(tmp, "snap-0.pickle")), "signals restart: no dump")
        code, lines, stderr = prog.finish(send="four\n", timeout=15)
        f.check(code == 0 and "read: 5 handled=1" in lines,
                f"signals restart: {code} {lines} {stderr!r}")
    with tempfile.TemporaryDirectory() as tmp:
        # No handler of the program's: nothing it does is interrupted.
        prog = Program(a, ["wait"], tmp)
        time.sleep(0.3)
        tgkill(prog.pid, signal.SIGUSR1)
        f.check(wait_file(os.path.join(tmp, "snap-0.pickle")), "signals default: no dump")
        code, lines, stderr = prog.finish()
        f.check(code == 0, f"signals default: {code} {stderr!r}")
    accepted = "expected SIGUSR1, SIGUSR2 or a real-time signal"
    for value in ("SIGTERM", "TERM", "15", "SIGINT", "2", "SIGHUP", "SIGPIPE", "SIGALRM",
                  "SIGQUIT", "SIGCHLD", "SIGWINCH", "SIGCONT", "SIGPROF", "SIGTSTP"):
        r = shimrun.run([a.app, "api", "/nonexistent/x.pickle"],
                        shimrun.env(a.ld_path, a.lib, CUPROF_SIGNAL=value))
        lines = r.stderr.strip().splitlines()
        f.check(r.returncode == 2 and len(lines) == 1 and
                lines[0].startswith(f'cuprof: CUPROF_SIGNAL: bad value "{value}": {accepted}'),
                f"CUPROF_SIGNAL={value}: {r.returncode} {r.stderr!r}")
    for value in ("SIGUSR1", "USR2", "10", "12", "34", "SIGRTMIN", "SIGRTMIN+3", "RTMAX-1",
                  "SIGRTMAX"):
        with tempfile.TemporaryDirectory() as tmp:
            r = shimrun.run([a.app, "api", os.path.join(tmp, "a.pickle")],
                            shimrun.env(a.ld_path, a.lib, CUPROF_SIGNAL=value,
                                        CUPROF_SNAPSHOT=os.path.join(tmp, "e-%n.pickle")))
            f.check(r.returncode == 0 and "dump: 0" in r.stdout,
                    f"CUPROF_SIGNAL={value}: {r.returncode} {r.stderr!r}")
    late_signals(f, a)


FAULTHANDLER_JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "faulthandler_job.py")


def late_signals(f, a):
    """A program that takes CUPROF_SIGNAL after cuprof started keeps the dumps: cuprof's handler
    stays, runs the program's own, and the program reads its own disposition back."""
    me = os.getpid()
    for how, after, handled, now in (("sigaction", "own", 1, "own"),
                                     ("resethand", "own", 1, "default"),
                                     ("ignore", "ignored", 0, "ignored")):
        with tempfile.TemporaryDirectory() as tmp:
            prog = Program(a, ["late", how], tmp)
            tgkill(prog.pid, signal.SIGUSR1)
            f.check(wait_file(os.path.join(tmp, "snap-0.pickle")),
                    f"late {how}: the signal wrote no snapshot")
            code, lines, stderr = prog.finish()
            want = ["before: default", f"after: {after}",
                    f"handled {handled} from {me if handled else 0}", f"now: {now}"]
            if how == "ignore":
                want.insert(1, "previous: default")
            f.check(code == 0 and [line for line in lines if not line.startswith("ready ")] == want,
                    f"late {how}: {code} {lines}, want {want} {stderr!r}")
    with tempfile.TemporaryDirectory() as tmp:
        env = shimrun.env(a.ld_path, a.lib, CUPROF_SNAPSHOT=os.path.join(tmp, "snap-%n.pickle"))
        proc = subprocess.Popen([sys.executable, FAULTHANDLER_JOB], env=env, cwd=tmp,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        lines = read_until_ready(proc)
        tgkill(proc.pid, signal.SIGUSR1)
        f.check(wait_file(os.path.join(tmp, "snap-0.pickle")),
                "late faulthandler: the signal wrote no snapshot")
        time.sleep(0.2)  # the traceback is written by the handler, in the program's thread
        out, err = proc.communicate("go\n", timeout=30)
        lines += out.splitlines()
        f.check(proc.returncode == 0 and "getsignal before default" in lines and
                "getsignal after default" in lines and
                "Stack (most recent call first):" in lines,
                f"late faulthandler: {proc.returncode} {lines} {err!r}")


def case_handler_exit(f, a):
    """exit() in a SIGINT handler: the handler may have interrupted cuprof holding its lock, and a
    dump there would wait for itself forever. Idle: the dumper thread writes the exit snapshot.
    Inside cuprof's lock (a device allocation slowed to 0.2 s): no snapshot, one line, no hang."""
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, ["exit-in-handler", "idle"], tmp,
                       CUPROF_SNAPSHOT=os.path.join(tmp, "exit.pickle"))
        tgkill(prog.pid, signal.SIGINT)
        code, lines, stderr = end_without_input(prog)
        f.check(code == 3 and os.listdir(tmp) == ["exit.pickle"] and "no exit snapshot" not in stderr,
                f"handler exit idle: {code} {os.listdir(tmp)} {stderr!r}")
        if os.listdir(tmp) == ["exit.pickle"]:
            f.check(live_sizes(f, os.path.join(tmp, "exit.pickle"), "handler exit idle") == [1 << 20],
                    "handler exit idle: the 1 MiB block is not live")
    for attempt in range(2):
        with tempfile.TemporaryDirectory() as tmp:
            prog = Program(a, ["exit-in-handler", "alloc"], tmp, SIMCUDA_MALLOC_US=200000,
                           CUPROF_SNAPSHOT=os.path.join(tmp, "exit.pickle"))
            time.sleep(0.3)  # inside the next segment's allocation
            tgkill(prog.pid, signal.SIGINT)
            code, lines, stderr = end_without_input(prog)
            f.check(code == 3 and os.listdir(tmp) == [] and
                    "cuprof: exit in a signal handler that interrupted cuprof: no exit snapshot"
                    in stderr, f"handler exit alloc {attempt}: {code} {os.listdir(tmp)} {stderr!r}")


def case_fdleak(f, a):
    """A program out of descriptors (soft RLIMIT_NOFILE 64, hard above it) still gets its snapshots,
    the one it asks for and the exit's; its own limit is as it was after each."""
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard <= 64:
        print(f"fdleak: the hard limit is {hard}: skipped")
        return
    with tempfile.TemporaryDirectory() as tmp:
        asked = os.path.join(tmp, "asked.pickle")
        r = subprocess.run([a.app, "fdleak", asked], capture_output=True, text=True, timeout=60,
                           env=shimrun.env(a.ld_path, a.lib,
                                           CUPROF_SNAPSHOT=os.path.join(tmp, "exit.pickle")),
                           preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard)))
        lines = r.stdout.splitlines()
        f.check(r.returncode == 0 and lines == ["leaked until EMFILE", "dump: 0", "after: EMFILE"],
                f"fdleak: {r.returncode} {lines} {r.stderr!r}")
        for name in ("asked.pickle", "exit.pickle"):
            path = os.path.join(tmp, name)
            f.check(os.path.exists(path) and live_sizes(f, path, f"fdleak {name}") == [1 << 20],
                    f"fdleak: {name} missing or without the 1 MiB block: {os.listdir(tmp)}")


ABORT_JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "abort_job.py")


def case_abort(f, a):
    """abort (a failed check, std::terminate of an uncaught exception, os.abort) skips exit's
    handlers: the dumper thread writes the exit snapshot, then the program dies by SIGABRT as it
    would have. extra[0], when given: a C++ program that throws out of main after a 1 MiB cudaMalloc."""
    def check_one(label, code, tmp, stderr, sizes):
        files = sorted(os.listdir(tmp))
        f.check(code == -signal.SIGABRT and files == ["exit.pickle"] and
                f"snapshot written to {os.path.join(tmp, 'exit.pickle')} (ended by abort)" in stderr,
                f"abort {label}: {code} {files} {stderr[-400:]!r}")
        if files == ["exit.pickle"]:
            f.check(live_sizes(f, os.path.join(tmp, "exit.pickle"), f"abort {label}") == sizes,
                    f"abort {label}: the live blocks are not {sizes}")
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, ["abort"], tmp, CUPROF_SNAPSHOT=os.path.join(tmp, "exit.pickle"))
        code, lines, stderr = prog.finish()
        check_one("plain", code, tmp, stderr, [1 << 20])
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, ["exit-in-handler", "abort-idle"], tmp,
                       CUPROF_SNAPSHOT=os.path.join(tmp, "exit.pickle"))
        tgkill(prog.pid, signal.SIGINT)
        code, lines, stderr = end_without_input(prog)
        check_one("in a handler", code, tmp, stderr, [1 << 20])
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, ["exit-in-handler", "abort-alloc"], tmp, SIMCUDA_MALLOC_US=200000,
                       CUPROF_SNAPSHOT=os.path.join(tmp, "exit.pickle"))
        time.sleep(0.3)  # inside the next segment's allocation, the device lock held
        tgkill(prog.pid, signal.SIGINT)
        code, lines, stderr = end_without_input(prog)
        f.check(code == -signal.SIGABRT and os.listdir(tmp) == [] and
                "cuprof: abort in a signal handler that interrupted cuprof: no snapshot" in stderr,
                f"abort interrupted: {code} {os.listdir(tmp)} {stderr!r}")
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, ["abort"], tmp, CUPROF_SNAPSHOT=os.path.join(tmp, "exit.pickle"),
                       CUPROF_DUMP_ON="signal,oom")
        code, lines, stderr = prog.finish()
        f.check(code == -signal.SIGABRT and os.listdir(tmp) == [] and "snapshot" not in stderr,
                f"abort without exit in CUPROF_DUMP_ON: {code} {os.listdir(tmp)} {stderr!r}")
    with tempfile.TemporaryDirectory() as tmp:
        env = shimrun.env(a.ld_path, a.lib, CUPROF_SNAPSHOT=os.path.join(tmp, "exit.pickle"))
        p = subprocess.run([sys.executable, ABORT_JOB], env=env, cwd=tmp, capture_output=True,
                           text=True, timeout=60)
        check_one("python", p.returncode, tmp, p.stderr, [3 << 20])
    if a.extra:
        with tempfile.TemporaryDirectory() as tmp:
            env = shimrun.env(a.ld_path, a.lib, CUPROF_SNAPSHOT=os.path.join(tmp, "exit.pickle"))
            p = subprocess.run([a.extra[0]], env=env, cwd=tmp, capture_output=True, text=True,
                               timeout=60)
            f.check("terminate called after throwing" in p.stderr,
                    f"abort c++: std::terminate did not run: {p.stderr!r}")
            check_one("c++ uncaught exception", p.returncode, tmp, p.stderr, [1 << 20])


def case_cancel(f, a):
    """A thread cancelled while it writes a snapshot: the dump ends first, so no later dump (the
    exit's) waits forever for its lock and no temporary file is left."""
    if shimrun.sanitized():
        # The forced unwinding of a cancelled thread skips ASan's unpoisoning of the frames it
        # leaves: the thread's own exit then reads as a stack-buffer-overflow in ASan's
        # sigaltstack call, whoever's frames they were.
        print("cancel: skipped under ASan (pthread_cancel's unwinding leaves its frames poisoned)")
        return
    for attempt in range(3):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out")
            os.mkdir(out)
            try:
                r = shimrun.run([a.app, "cancel", out],
                                shimrun.env(a.ld_path, a.lib,
                                            CUPROF_SNAPSHOT=os.path.join(tmp, "exit.pickle")),
                                timeout=30)
                code, stdout, stderr = r.returncode, r.stdout, r.stderr
            except subprocess.TimeoutExpired:
                code, stdout, stderr = None, "", "timed out (a dump waits for the lock forever)"
            names = sorted(os.listdir(out))
            f.check(code == 0 and "joined cancelled" in stdout and "final dump 0" in stdout and
                    os.path.exists(os.path.join(tmp, "exit.pickle")),
                    f"cancel {attempt}: {code} {stdout!r} {stderr[-300:]!r}")
            f.check("final.pickle" in names and
                    all(re.fullmatch(r"(t-[0-3]|final)\.pickle", n) for n in names),
                    f"cancel {attempt}: files {names}: a dump was cut off")


def signals_then_exit(f, prog, tmp, signals, label):
    """SIGUSR1 `signals` times, each waited for as its snapshot, then the exit: (its stderr, the
    bytes of the program's file tmp/program.out)."""
    for i in range(signals):
        tgkill(prog.pid, signal.SIGUSR1)
        f.check(wait_file(os.path.join(tmp, f"snap-{i}.pickle")),
                f"{label}: signal {i} wrote no snapshot")
    code, lines, stderr = prog.finish()
    f.check(code == 0, f"{label}: exit {code} {lines} {stderr!r}")
    with open(os.path.join(tmp, "program.out"), "rb") as fh:
        return stderr, fh.read()


def case_closefds(f, a):
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, ["closefds", os.path.join(tmp, "program.out")], tmp)
        _, data = signals_then_exit(f, prog, tmp, 3, "closefds")
        f.check(data == b"program line\n", f"closefds: the program's file holds {data!r}")
        for n in sorted(os.listdir(tmp)):
            if n.startswith("snap-"):
                loads_ok(f, os.path.join(tmp, n), f"closefds {n}")


def case_stderr(f, a):
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, ["stderr", os.path.join(tmp, "program.out")], tmp, CUPROF_LOG="debug")
        stderr, data = signals_then_exit(f, prog, tmp, 2, "stderr")
        f.check(data == b"program line\n", f"stderr: the program's file at fd 2 holds {data!r}")
        # While descriptor 2 was still the one the program started with, cuprof spoke there.
        f.check("cuprof: stacks by " in stderr,
                f"stderr: no start-up line before the swap: {stderr!r}")
        snaps = sorted(n for n in os.listdir(tmp) if n.startswith("snap-"))
        f.check(len(snaps) == 3, f"stderr: snapshots {snaps} (two signals and the exit)")
        for n in snaps:
            loads_ok(f, os.path.join(tmp, n), f"stderr {n}")


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


def ended_by(f, prog, sig, tmp, label, twice=False):
    """Sends sig (twice: a second copy at once) and checks the program ended by it after writing
    exactly one snapshot, which loads and holds its 1 MiB block."""
    tgkill(prog.pid, sig)
    if twice:
        tgkill(prog.pid, sig)
    code, lines, stderr = end_without_input(prog)
    name = signal.Signals(sig).name
    f.check(code == -sig, f"{label}: ended with {code}, want {-sig}: {lines} {stderr!r}")
    snaps = sorted(os.listdir(tmp))
    f.check(snaps == ["snap-0.pickle"], f"{label}: files {snaps}")
    f.check(f"snapshot written to {os.path.join(tmp, 'snap-0.pickle')} (ended by {name})"
            in stderr, f"{label}: no line for the snapshot: {stderr!r}")
    if snaps == ["snap-0.pickle"]:
        live = live_sizes(f, os.path.join(tmp, snaps[0]), label)
        f.check(live == [1 << 20], f"{label}: live blocks {live}")


def case_term(f, a):
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        with tempfile.TemporaryDirectory() as tmp:
            prog = Program(a, ["wait"], tmp)
            sock = os.path.join(os.environ.get("CUPROF_SOCKET_DIR", ""), f"{prog.pid}.sock")
            listed = sig == signal.SIGTERM and "CUPROF_SOCKET_DIR" in os.environ and \
                wait_file(sock)
            ended_by(f, prog, sig, tmp, f"term {sig.name}")
            if listed:  # as at exit, `cuprof ps` lists no process that is gone
                f.check(not os.path.exists(sock), f"term {sig.name}: {sock} left behind")
    with tempfile.TemporaryDirectory() as tmp:
        ended_by(f, Program(a, ["wait"], tmp), signal.SIGTERM, tmp, "term twice", twice=True)
    with tempfile.TemporaryDirectory() as tmp:
        # A user who will not wait: a second SIGTERM more than a second after the first ends the
        # program at once, in the middle of the dump (held there by a 2.5 s cuMemGetInfo).
        prog = Program(a, ["wait"], tmp, SIMCUDA_MEMINFO_US=2500000)
        tgkill(prog.pid, signal.SIGTERM)
        time.sleep(1.3)
        tgkill(prog.pid, signal.SIGTERM)
        code, lines, stderr = end_without_input(prog)
        f.check(code == -signal.SIGTERM and os.listdir(tmp) == [] and
                "snapshot written" not in stderr,
                f"term insist: {code} {os.listdir(tmp)} {stderr!r}")
    # The program's own handler is never replaced; the ones it asks about read as the default.
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, ["handlers"], tmp)
        f.check(prog.lines[:2] == ["SIGINT: default", "SIGHUP: default"],
                f"term handlers: told {prog.lines}")
        tgkill(prog.pid, signal.SIGTERM)
        code, lines, stderr = end_without_input(prog)
        f.check(code == 0 and "handled SIGTERM" in lines, f"term handlers: {code} {lines}")
        f.check(sorted(os.listdir(tmp)) == ["snap-0.pickle"] and "ended by" not in stderr,
                f"term handlers: {os.listdir(tmp)} {stderr!r}")
    with tempfile.TemporaryDirectory() as tmp:
        # SIGHUP put back as signal(3) returned it: the real default, no snapshot.
        prog = Program(a, ["handlers"], tmp)
        tgkill(prog.pid, signal.SIGHUP)
        code, lines, stderr = end_without_input(prog)
        f.check(code == -signal.SIGHUP and os.listdir(tmp) == [],
                f"term handlers SIGHUP: {code} {os.listdir(tmp)} {stderr!r}")
    with tempfile.TemporaryDirectory() as tmp:
        # cuprof's SIGINT handler stands in for the default the program was told of.
        ended_by(f, Program(a, ["handlers"], tmp), signal.SIGINT, tmp, "term handlers SIGINT")
    with tempfile.TemporaryDirectory() as tmp:
        # Ignored (nohup): still ignored; the program goes on to its exit dump.
        old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
        try:
            prog = Program(a, ["wait"], tmp)
        finally:
            signal.signal(signal.SIGHUP, old)
        tgkill(prog.pid, signal.SIGHUP)
        time.sleep(0.3)
        code, lines, stderr = prog.finish()
        f.check(code == 0 and sorted(os.listdir(tmp)) == ["snap-0.pickle"],
                f"term ignored: {code} {os.listdir(tmp)} {stderr!r}")
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, ["wait"], tmp, CUPROF_DUMP_ON="exit,signal,oom")
        tgkill(prog.pid, signal.SIGTERM)
        code, lines, stderr = end_without_input(prog)
        f.check(code == -signal.SIGTERM and os.listdir(tmp) == [],
                f"term off: {code} {os.listdir(tmp)} {stderr!r}")
    with tempfile.TemporaryDirectory() as tmp:
        # A child that made no CUDA call writes nothing and ends at once, as it would have.
        prog = Program(a, ["forkidle"], tmp)
        child = int(prog.lines[0].split()[1])
        # At once: the signal may reach the child before its fork handlers have run.
        tgkill(child, signal.SIGTERM)
        try:
            prog.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(child, signal.SIGKILL)  # it holds the output pipe: finish() would wait
        code, lines, stderr = end_without_input(prog)
        f.check(code == 0 and "child: signal 15" in lines, f"term forkidle: {code} {lines}")
        f.check(sorted(os.listdir(tmp)) == ["snap-0.pickle"],
                f"term forkidle: files {os.listdir(tmp)} {stderr!r}")
    term_python(f, a)
    term_run(f, a)


def term_run(f, a):
    """`cuprof run` under a terminal's ^C (SIGINT to its whole process group): PROG writes its
    snapshot and ends by the signal, and `cuprof run` reports it with the shell's status."""
    with tempfile.TemporaryDirectory() as tmp:
        snap = os.path.join(tmp, "run.pickle")
        proc = subprocess.Popen([a.cuprof, "run", "-o", snap, "--", a.app, "wait"],
                                env=shimrun.env(a.ld_path), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        line = proc.stdout.readline()
        f.check(line.startswith("ready "), f"term run: {line!r}")
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        f.check(proc.returncode == 130, f"term run: status {proc.returncode} {err!r}")
        f.check(f"snapshot written to {snap} (ended by SIGINT)" in err and
                "was killed by signal 2" in err and "peak reserved:" in err,
                f"term run: {err!r}")
        f.check(os.listdir(tmp) == ["run.pickle"], f"term run: files {os.listdir(tmp)}")


PYTHON_TERM = """
import ctypes, sys, time
cudart = ctypes.CDLL("libcudart.so.13")
p = ctypes.c_void_p()
assert cudart.cudaMalloc(ctypes.byref(p), 1 << 20) == 0
try:
    print("ready", flush=True)
    time.sleep(60)
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
    if sys.argv[1] == "again":
        print("ready", flush=True)
        time.sleep(60)
"""


def term_python(f, a):
    """Python's own SIGINT handler came first: ^C is still a KeyboardInterrupt; SIGTERM, left at
    its default by Python, writes the snapshot and ends it."""
    for step in ("int", "again"):
        with tempfile.TemporaryDirectory() as tmp:
            env = shimrun.env(a.ld_path, a.lib, CUPROF_SNAPSHOT=os.path.join(tmp, "snap-%n.pickle"))
            proc = subprocess.Popen([sys.executable, "-c", PYTHON_TERM, step], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            f.check(proc.stdout.readline().strip() == "ready", f"term python {step}: not ready")
            proc.send_signal(signal.SIGINT)
            if step == "again":
                f.check(proc.stdout.readline().strip() == "KeyboardInterrupt",
                        f"term python {step}: no KeyboardInterrupt")
                f.check(proc.stdout.readline().strip() == "ready", f"term python {step}: lost")
                proc.send_signal(signal.SIGTERM)
            try:
                out, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            want = 0 if step == "int" else -signal.SIGTERM
            f.check(proc.returncode == want, f"term python {step}: {proc.returncode} {err!r}")
            if step == "int":
                f.check("KeyboardInterrupt" in out, f"term python int: {out!r}")
            snaps = sorted(os.listdir(tmp))
            f.check(snaps == ["snap-0.pickle"], f"term python {step}: files {snaps} {err!r}")
            f.check(("(ended by SIGTERM)" in err) == (step == "again"),
                    f"term python {step}: {err!r}")


class Run:
    """guest_app (or any PROG) under `cuprof run` in a session of its own, read until "ready"."""

    def __init__(self, a, prog, tmp, cmd_before=(), **variables):
        self.snap = os.path.join(tmp, "run-%n.pickle")
        self.proc = subprocess.Popen(list(cmd_before) + [a.cuprof, "run", "-o", self.snap, "--"] +
                                     list(prog), env=shimrun.env(a.ld_path, **variables),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines = read_until_ready(self.proc)
        last = self.lines[-1].split() if self.lines else []
        self.prog = int(last[1]) if len(last) == 2 and last[0] == "ready" else None

    def finish(self, send="go\n", timeout=30):
        try:
            out, err = self.proc.communicate(send, timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            out, err = self.proc.communicate()
            return None, self.lines + out.splitlines(), err
        return self.proc.returncode, self.lines + out.splitlines(), err

    def ended(self):
        """finish() once the job has ended by itself, its stdin still open (at end of input PROG
        would exit by itself, racing the signal's snapshot)."""
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        return self.finish(send=None, timeout=5)


def counted(lines):
    """{"SIGTERM": (deliveries, last sender, last si_code), ...} from guest_app counts."""
    got = {}
    for line in lines:
        w = line.split()
        if len(w) == 6 and w[0] in ("SIGTERM", "SIGINT", "SIGHUP") and w[2] == "from":
            got[w[0]] = (int(w[1]), int(w[3]), int(w[5]))
    return got


# How a signal reaches a job under `cuprof run`: to cuprof alone (kill PID, docker stop, a
# launcher's terminate()), to the whole job (a terminal, timeout, kill -- -PGID), to each process
# one by one (Slurm, systemd).
RUN_SENDS = {
    "cuprof alone": lambda run, sig: os.kill(run.proc.pid, sig),
    "whole job": lambda run, sig: os.killpg(run.proc.pid, sig),
    "each process": lambda run, sig: (os.kill(run.proc.pid, sig), os.kill(run.prog, sig)),
}
TWIN_WAIT = 1.2  # `cuprof run`'s copy comes within milliseconds; a twin would have come by now


def taken_once(f, run, sig, label):
    """After a twin's wait, PROG's handler ran once for sig, from this process (SI_USER), and never
    for the other two."""
    time.sleep(TWIN_WAIT)
    code, lines, err = run.finish()
    want = {n: (0, 0, 0) for n in ("SIGTERM", "SIGINT", "SIGHUP")}
    want[sig.name] = (1, os.getpid(), 0)
    f.check(code == 0 and counted(lines) == want,
            f"{label}: status {code}, counted {counted(lines)}, want {want} {err!r}")


def side_by_side(cases, one):
    """one(*case) for every case at once, each in a thread of its own: the cases are independent
    jobs that mostly wait (a twin's wait), which one after another took most of the test's time.
    A case's exception is the test's."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(cases)) as pool:
        for future in [pool.submit(one, *case) for case in cases]:
            future.result()


def case_run_signals(f, a):
    """A signal sent to `cuprof run`, to its job or to each process reaches PROG's own handler
    exactly once, showing the sender's pid, under two `cuprof run` too; a program at the default
    ends with its snapshot."""
    def one(how, sig):
        label = f"run {how} {sig.name}"
        with tempfile.TemporaryDirectory() as tmp:
            run = Run(a, [a.app, "counts"], tmp)
            f.check("told: own" in run.lines and run.prog, f"{label}: {run.lines}")
            RUN_SENDS[how](run, sig)
            taken_once(f, run, sig, label)
    side_by_side([(how, sig) for how in RUN_SENDS
                  for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
                  if how != "each process" or sig == signal.SIGTERM], one)
    with tempfile.TemporaryDirectory() as tmp:
        # Two requests a little over a second apart are two requests.
        run = Run(a, [a.app, "counts"], tmp)
        os.killpg(run.proc.pid, signal.SIGTERM)
        time.sleep(1.3)
        os.killpg(run.proc.pid, signal.SIGTERM)
        time.sleep(TWIN_WAIT)
        code, lines, err = run.finish()
        f.check(code == 0 and counted(lines).get("SIGTERM", (0,))[0] == 2,
                f"run twice: status {code}, counted {counted(lines)} {err!r}")
    with tempfile.TemporaryDirectory() as tmp:
        # SA_RESETHAND: the twin must not find the default and end the program; the next
        # request does, with the snapshot of `term`.
        run = Run(a, [a.app, "counts", "oneshot"], tmp)
        f.check("told: own" in run.lines, f"run oneshot: {run.lines}")
        os.killpg(run.proc.pid, signal.SIGTERM)
        time.sleep(TWIN_WAIT)
        f.check(run.proc.poll() is None, f"run oneshot: ended by the twin ({run.proc.poll()})")
        os.kill(run.proc.pid, signal.SIGTERM)
        code, lines, err = run.ended()
        snap = os.path.join(tmp, "run-0.pickle")
        f.check(code == 128 + signal.SIGTERM and f"{snap} (ended by SIGTERM)" in err and
                os.listdir(tmp) == ["run-0.pickle"],
                f"run oneshot: status {code} {os.listdir(tmp)} {err!r}")
    with tempfile.TemporaryDirectory() as tmp:
        # At the default: `kill` of cuprof's pid writes the snapshot and ends PROG by SIGTERM.
        run = Run(a, [a.app, "wait"], tmp)
        os.kill(run.proc.pid, signal.SIGTERM)
        code, lines, err = run.ended()
        snap = os.path.join(tmp, "run-0.pickle")
        f.check(code == 128 + signal.SIGTERM and f"{snap} (ended by SIGTERM)" in err and
                "was killed by signal 15" in err and "peak reserved:" in err and
                os.listdir(tmp) == ["run-0.pickle"],
                f"run default: status {code} {os.listdir(tmp)} {err!r}")
        if os.listdir(tmp) == ["run-0.pickle"]:
            loads_ok(f, snap, "run default")
    run_nested(f, a)
    run_python(f, a)
    run_first_process(f, a)
    run_static(f, a)


def run_nested(f, a):
    """`cuprof run` under `cuprof run`: the inner one passes a request on once, whether it came
    from the outer one, directly, or both."""
    def one(how, sig):
        label = f"run nested, {how}, {sig.name}"
        with tempfile.TemporaryDirectory() as tmp:
            inner = [a.cuprof, "run", "-o", os.path.join(tmp, "inner-%n.pickle"), "--"]
            run = Run(a, inner + [a.app, "counts"], tmp)
            f.check("told: own" in run.lines and run.prog, f"{label}: {run.lines}")
            RUN_SENDS[how](run, sig)
            taken_once(f, run, sig, label)
    side_by_side([(how, sig) for how in ("cuprof alone", "whole job")
                  for sig in (signal.SIGTERM, signal.SIGINT)], one)


def run_static(f, a):
    """A program without cuprof in it (static): SIGTERM to cuprof alone is passed on plainly,
    SIGINT to cuprof alone is left to the terminal, as shells and uv do."""
    if not a.extra:
        print("run static: no static program built (sanitizer build): skipped")
        return
    def one(sig, want):
        with tempfile.TemporaryDirectory() as tmp:
            run = Run(a, [a.extra[0]], tmp)
            f.check(run.prog is not None, f"run static {sig.name}: {run.lines}")
            os.kill(run.proc.pid, sig)
            time.sleep(TWIN_WAIT)
            code, lines, err = run.finish()
            got = tuple(int(l.split()[1]) for l in lines if l.split()[:1] in (["SIGTERM"], ["SIGINT"]))
            f.check(code == 0 and got == want, f"run static {sig.name}: {code} {got} {err!r}")
    side_by_side([(signal.SIGTERM, (1, 0)), (signal.SIGINT, (0, 0))], one)


def run_python(f, a):
    """Python's KeyboardInterrupt once, whether ^C reaches the job or `kill -INT` cuprof alone."""
    def one(how):
        with tempfile.TemporaryDirectory() as tmp:
            run = Run(a, [sys.executable, "-c", PYTHON_TERM, "again"], tmp)
            RUN_SENDS[how](run, signal.SIGINT)
            got = run.proc.stdout.readline().strip(), run.proc.stdout.readline().strip()
            f.check(got == ("KeyboardInterrupt", "ready"), f"run python {how}: {got}")
            time.sleep(TWIN_WAIT)  # a second KeyboardInterrupt would end it with a traceback
            f.check(run.proc.poll() is None, f"run python {how}: ended ({run.proc.poll()})")
            os.kill(run.proc.pid, signal.SIGTERM)
            code, lines, err = run.ended()
            f.check(code == 128 + signal.SIGTERM and "(ended by SIGTERM)" in err and
                    "Traceback" not in err and os.listdir(tmp) == ["run-0.pickle"],
                    f"run python {how}: status {code} {os.listdir(tmp)} {err!r}")
    side_by_side([("whole job",), ("cuprof alone",)], one)


def run_first_process(f, a):
    """`cuprof run` as a container's first process (pid 1 of a pid namespace), stopped as
    `docker stop` stops it: SIGTERM from outside to it alone. Needs a pid namespace (skipped, with
    a note, where none can be made)."""
    cmd = ["unshare", "--pid", "--fork", "--mount-proc"]
    if os.geteuid() != 0:
        cmd[1:1] = ["--user", "--map-root-user"]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            run = Run(a, [a.app, "wait"], tmp, cmd_before=cmd)
        except FileNotFoundError:
            print("run first process: no unshare here: skipped")
            return
        if run.prog is None:
            code, lines, err = run.finish(send=None)
            print(f"run first process: no pid namespace here ({err.strip()}): skipped")
            return
        f.check(run.prog == 2, f"run first process: PROG is pid {run.prog} in its namespace")
        try:
            with open(f"/proc/{run.proc.pid}/task/{run.proc.pid}/children") as c:
                first = int(c.read().split()[0])  # unshare's child: `cuprof run`, pid 1 inside
        except (OSError, IndexError, ValueError) as e:
            f.check(False, f"run first process: cannot find cuprof run: {e}")
            run.finish()
            return
        os.kill(first, signal.SIGTERM)
        code, lines, err = run.ended()
        f.check(code == 128 + signal.SIGTERM and "(ended by SIGTERM)" in err and
                os.listdir(tmp) == ["run-0.pickle"],
                f"run first process: status {code} {os.listdir(tmp)} {err!r}")


# Under ASan a forked child that allocates can wait forever on ASan's allocator lock, held at the
# fork by another thread (GCC 12's libasan takes no lock around fork; glibc's malloc does): the
# parent's control thread, which samples every second, is the one thread that may be in malloc
# then. Its socket is not what these cases test.
FORK_QUIET = {"CUPROF_CONTROL": "off"} if shimrun.sanitized() else {}


def quick_files(tmp):
    return sorted(os.listdir(tmp))


def case_quick(f, a):
    mib = 1 << 20
    template = "snap-%p.pickle"
    for how, status in (("_exit", 7), ("_Exit", 8), ("quick_exit", 3)):
        with tempfile.TemporaryDirectory() as tmp:
            prog = Program(a, ["quick", how], tmp, CUPROF_SNAPSHOT=os.path.join(tmp, template))
            code, lines, stderr = prog.finish()
            want = f"snap-{prog.pid}.pickle"
            f.check(code == status and quick_files(tmp) == [want],
                    f"quick {how}: {code} {quick_files(tmp)} {stderr!r}")
            f.check(f"snapshot written to {os.path.join(tmp, want)}" in stderr,
                    f"quick {how}: no line for the snapshot: {stderr!r}")
            if quick_files(tmp) == [want]:
                f.check(live_sizes(f, os.path.join(tmp, want), f"quick {how}") == [mib],
                        f"quick {how}: the 1 MiB block is not live")
    for how in ("vfork", "fork-idle"):
        # A vfork child shares the parent's memory, cuprof's included; a forked child that made no
        # CUDA call (a subprocess whose exec failed) has nothing of its own: neither writes.
        with tempfile.TemporaryDirectory() as tmp:
            prog = Program(a, ["quick", how], tmp, CUPROF_SNAPSHOT=os.path.join(tmp, template))
            code, lines, stderr = prog.finish()
            f.check(code == 0 and "child: exit 5" in lines and
                    quick_files(tmp) == [f"snap-{prog.pid}.pickle"],
                    f"quick {how}: {code} {lines} {quick_files(tmp)} {stderr!r}")
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, ["quick", "fork"], tmp, CUPROF_SNAPSHOT=os.path.join(tmp, template),
                       **FORK_QUIET)
        code, lines, stderr = prog.finish()
        child = [int(line.split()[1]) for line in lines if line.startswith("child ")]
        f.check(code == 0 and "child: exit 6" in lines and len(child) == 1,
                f"quick fork: {code} {lines} {stderr!r}")
        want = sorted([f"snap-{prog.pid}.pickle"] + [f"snap-{c}.pickle" for c in child])
        f.check(quick_files(tmp) == want, f"quick fork: files {quick_files(tmp)}, want {want}")
        if quick_files(tmp) == want and child:
            # The child keeps its parent's block and adds its own.
            f.check(live_sizes(f, os.path.join(tmp, f"snap-{child[0]}.pickle"), "quick fork") ==
                    [mib, mib], "quick fork: the child's snapshot lacks its own block")
            f.check(live_sizes(f, os.path.join(tmp, f"snap-{prog.pid}.pickle"), "quick fork") ==
                    [mib], "quick fork: the parent's snapshot has the child's block")
    for how, status in (("handler", 9), ("qhandler", 10)):
        with tempfile.TemporaryDirectory() as tmp:
            # In a handler that interrupted no lock of cuprof's (the program waits in pause()):
            # the dumper thread writes the snapshot (guest-handler-exit has the other case).
            prog = Program(a, ["quick", how], tmp, CUPROF_SNAPSHOT=os.path.join(tmp, template))
            tgkill(prog.pid, signal.SIGTERM)
            code, lines, stderr = end_without_input(prog)
            want = f"snap-{prog.pid}.pickle"
            f.check(code == status and quick_files(tmp) == [want] and
                    "no exit snapshot" not in stderr,
                    f"quick {how}: {code} {quick_files(tmp)} {stderr!r}")
            if quick_files(tmp) == [want]:
                f.check(live_sizes(f, os.path.join(tmp, want), f"quick {how}") == [mib],
                        f"quick {how}: the 1 MiB block is not live")
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, ["quick", "_exit"], tmp, CUPROF_DUMP_ON="signal,oom")
        code, lines, stderr = prog.finish()
        f.check(code == 7 and quick_files(tmp) == [] and "snapshot" not in stderr,
                f"quick no exit: {code} {quick_files(tmp)} {stderr!r}")
    quick_python(f, a)


MULTIPROCESSING_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                     "multiprocessing_child.py")


def quick_python(f, a):
    """multiprocessing's fork and forkserver children end with os._exit: each child that used
    CUDA writes its snapshot, and its exit code is the one it chose."""
    for method in ("fork", "forkserver"):
        with tempfile.TemporaryDirectory() as tmp:
            env = shimrun.env(a.ld_path, a.lib,
                              CUPROF_SNAPSHOT=os.path.join(tmp, "snap-%p.pickle"))
            p = subprocess.run([sys.executable, MULTIPROCESSING_CHILD, method], env=env, cwd=tmp,
                               capture_output=True, text=True, timeout=60)
            lines = p.stdout.splitlines()
            child = [line.split()[1] for line in lines if line.startswith("child ")]
            f.check(p.returncode == 0 and "exitcode 4" in lines and len(child) == 1,
                    f"quick python {method}: {p.returncode} {lines} {p.stderr!r}")
            want = [f"snap-{c}.pickle" for c in child]
            f.check(quick_files(tmp) == want,
                    f"quick python {method}: files {quick_files(tmp)}, want {want}")
            if quick_files(tmp) == want and want:
                f.check(live_sizes(f, os.path.join(tmp, want[0]), f"quick python {method}") ==
                        [3 << 20], f"quick python {method}: the child's 3 MiB block is not live")


def exec_snapshots(f, tmp, pid, label, first, after):
    """snap-PID.pickle holds the replaced image's live blocks (`first`, written before the exec),
    snap-PID.1.pickle the new image's (`after`, at its exit): sizes sorted."""
    files = [f"snap-{pid}.pickle", f"snap-{pid}.1.pickle"]
    f.check(quick_files(tmp) == sorted(files), f"{label}: files {quick_files(tmp)}, want {files}")
    if quick_files(tmp) == sorted(files):
        f.check(live_sizes(f, os.path.join(tmp, files[0]), label) == first,
                f"{label}: the replaced image's snapshot lacks its blocks")
        f.check(live_sizes(f, os.path.join(tmp, files[1]), label) == after,
                f"{label}: the new image's snapshot is not its own")


def case_exec(f, a):
    """An exec replaces the image without exit's handlers: its snapshot is written first, when the
    exec will run; the new image writes its own beside it."""
    mib = 1 << 20
    app_dir, app_name = os.path.split(a.app)
    for how in ("execv", "execve", "execl", "execle", "execvp", "execvpe", "execlp", "fexecve",
                "execveat"):
        with tempfile.TemporaryDirectory() as tmp:
            # The p forms search PATH as glibc does: past a missing folder and a file of the same
            # name that may not be executed.
            os.mkdir(os.path.join(tmp, "noexec"))
            with open(os.path.join(tmp, "noexec", app_name), "w") as decoy:
                decoy.write("not a program\n")
            search = os.pathsep.join([os.path.join(tmp, "missing"), os.path.join(tmp, "noexec"),
                                      app_dir])
            out = os.path.join(tmp, "out")
            os.mkdir(out)
            prog = Program(a, ["exec", how, app_name], tmp, PATH=search,
                           CUPROF_SNAPSHOT=os.path.join(out, "snap-%p.pickle"))
            code, lines, stderr = prog.finish()
            f.check(code == 0 and f"after {prog.pid}" in lines,
                    f"exec {how}: {code} {lines} {stderr!r}")
            f.check(f"snapshot written to {out}/snap-{prog.pid}.pickle (before exec)" in stderr,
                    f"exec {how}: no line for the snapshot before exec: {stderr!r}")
            exec_snapshots(f, out, prog.pid, f"exec {how}", [mib], [2 * mib])
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as other:
        # An exec that fails though its file may be executed: the snapshot stays, the program goes
        # on, and its exit dump (which takes the lock held across the exec) still comes.
        bad = os.path.join(other, "bad")
        with open(bad, "wb") as g:
            g.write(b"\x7fELF garbage")
        os.chmod(bad, 0o755)
        prog = Program(a, ["exec", "path", bad], tmp,
                       CUPROF_SNAPSHOT=os.path.join(tmp, "snap-%p.pickle"))
        code, lines, stderr = prog.finish()
        f.check(code == 0 and "exec failed: Exec format error" in lines,
                f"exec failed: {code} {lines} {stderr!r}")
        exec_snapshots(f, tmp, prog.pid, "exec failed", [mib], [mib])
    for target in ("/nonexistent/cuprof-exec-test", "plain"):
        # What exec would refuse (a missing file, one without the execute bit) writes nothing.
        with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as other:
            plain = os.path.join(other, "plain")
            with open(plain, "w") as g:
                g.write("x\n")
            prog = Program(a, ["exec", "path", plain if target == "plain" else target], tmp,
                           CUPROF_SNAPSHOT=os.path.join(tmp, "snap-%p.pickle"))
            code, lines, stderr = prog.finish()
            f.check(code == 0 and any(line.startswith("exec failed: ") for line in lines) and
                    "before exec" not in stderr and quick_files(tmp) == [f"snap-{prog.pid}.pickle"],
                    f"exec refused {target}: {code} {lines} {quick_files(tmp)} {stderr!r}")
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, ["exec", "handler"], tmp,
                       CUPROF_SNAPSHOT=os.path.join(tmp, "snap-%p.pickle"))
        tgkill(prog.pid, signal.SIGTERM)
        code, lines, stderr = end_without_input(prog)
        f.check(code == 0 and f"after {prog.pid}" in lines and
                "cuprof: exec in a signal handler: no exit snapshot" in stderr,
                f"exec handler: {code} {lines} {stderr!r}")
        f.check(quick_files(tmp) == [f"snap-{prog.pid}.pickle"] and
                live_sizes(f, os.path.join(tmp, f"snap-{prog.pid}.pickle"), "exec handler") ==
                [2 * mib], f"exec handler: files {quick_files(tmp)}: want the new image's alone")
    true = shutil.which("true") or "/bin/true"
    for how in ("vfork", "fork-idle"):
        # A vfork child shares cuprof's memory under another pid; a forked child that made no CUDA
        # call has nothing of its own: neither writes before its exec.
        with tempfile.TemporaryDirectory() as tmp:
            prog = Program(a, ["exec", how, true], tmp,
                           CUPROF_SNAPSHOT=os.path.join(tmp, "snap-%p.pickle"))
            code, lines, stderr = prog.finish()
            f.check(code == 0 and "child: exit 0" in lines and
                    quick_files(tmp) == [f"snap-{prog.pid}.pickle"] and "before exec" not in stderr,
                    f"exec {how}: {code} {lines} {quick_files(tmp)} {stderr!r}")
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, ["exec", "fork", true], tmp,
                       CUPROF_SNAPSHOT=os.path.join(tmp, "snap-%p.pickle"), **FORK_QUIET)
        code, lines, stderr = prog.finish()
        child = [int(line.split()[1]) for line in lines if line.startswith("child ")]
        want = sorted([f"snap-{prog.pid}.pickle"] + [f"snap-{c}.pickle" for c in child])
        f.check(code == 0 and "child: exit 0" in lines and len(child) == 1 and
                quick_files(tmp) == want, f"exec fork: {code} {lines} {quick_files(tmp)} {stderr!r}")
        if child and quick_files(tmp) == want:
            f.check(live_sizes(f, os.path.join(tmp, f"snap-{child[0]}.pickle"), "exec fork") ==
                    [mib, mib], "exec fork: the child's snapshot lacks its own block")
    exec_python(f, a)


EXEC_RESTART = os.path.join(os.path.dirname(os.path.abspath(__file__)), "exec_restart.py")


def exec_python(f, a):
    """Python's os.execv (a job that restarts itself): the replaced interpreter's snapshot."""
    with tempfile.TemporaryDirectory() as tmp:
        env = shimrun.env(a.ld_path, a.lib, CUPROF_SNAPSHOT=os.path.join(tmp, "snap-%p.pickle"))
        p = subprocess.run([sys.executable, EXEC_RESTART], env=env, cwd=tmp, capture_output=True,
                           text=True, timeout=60)
        pid = [line.split()[1] for line in p.stdout.splitlines() if line.startswith("pid ")]
        want = [f"snap-{c}.pickle" for c in pid]
        f.check(p.returncode == 0 and len(pid) == 1 and quick_files(tmp) == want,
                f"exec python: {p.returncode} {p.stdout!r} {quick_files(tmp)} {p.stderr!r}")
        if want and quick_files(tmp) == want:
            f.check(live_sizes(f, os.path.join(tmp, want[0]), "exec python") == [3 << 20],
                    "exec python: the 3 MiB block is not live")


CHDIR_JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "chdir_job.py")


def case_chdir(f, a):
    """A program that changes directory still writes where it was started (a relative template is
    anchored there at start), where `cuprof run` finds it; a '%' in that folder's name is a
    character, not an escape."""
    with tempfile.TemporaryDirectory() as tmp:
        start = os.path.join(tmp, "start%p")
        sub = os.path.join(start, "outputs")
        os.makedirs(sub)
        r = subprocess.run([a.cuprof, "run", "--", sys.executable, CHDIR_JOB, "outputs"],
                           env=shimrun.env(a.ld_path), cwd=start, capture_output=True, text=True,
                           timeout=60)
        pid = [line.split()[1] for line in r.stdout.splitlines() if line.startswith("pid ")]
        want = [f"cuprof-{c}-0.pickle" for c in pid]
        f.check(r.returncode == 0 and len(pid) == 1 and
                sorted(n for n in os.listdir(start) if n.endswith(".pickle")) == want and
                os.listdir(sub) == [], f"chdir run: {r.returncode} {r.stdout!r} "
                f"{os.listdir(start)} {os.listdir(sub)} {r.stderr!r}")
        if want:
            f.check(f"cuprof: snapshot written to {os.path.join(start, want[0])}" in r.stderr and
                    f"== {want[0]}" in r.stderr and "no snapshot was written" not in r.stderr,
                    f"chdir run: the snapshot was not found or not summarized: {r.stderr!r}")
            if os.path.exists(os.path.join(start, want[0])):
                f.check(live_sizes(f, os.path.join(start, want[0]), "chdir run") == [3 << 20],
                        "chdir run: the 3 MiB block is not live")
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "snaps"))
        os.makedirs(os.path.join(tmp, "outputs", "snaps"))
        env = shimrun.env(a.ld_path, a.lib, CUPROF_SNAPSHOT="snaps/s-%p.pickle")
        r = subprocess.run([sys.executable, CHDIR_JOB, "outputs"], env=env, cwd=tmp,
                           capture_output=True, text=True, timeout=60)
        pid = [line.split()[1] for line in r.stdout.splitlines() if line.startswith("pid ")]
        want = [f"s-{c}.pickle" for c in pid]
        f.check(r.returncode == 0 and os.listdir(os.path.join(tmp, "snaps")) == want and
                os.listdir(os.path.join(tmp, "outputs", "snaps")) == [],
                f"chdir preload: {r.returncode} {os.listdir(os.path.join(tmp, 'snaps'))} "
                f"{os.listdir(os.path.join(tmp, 'outputs', 'snaps'))} {r.stderr!r}")


def case_fallback(f, a):
    with tempfile.TemporaryDirectory() as tmp:
        missing, fb = os.path.join(tmp, "missing"), os.path.join(tmp, "fb")
        os.mkdir(fb)
        prog = Program(a, ["wait"], tmp, CUPROF_SNAPSHOT=os.path.join(missing, "snap-%n.pickle"),
                       TMPDIR=fb)
        tgkill(prog.pid, signal.SIGUSR1)
        f.check(wait_file(os.path.join(fb, "snap-0.pickle")), "fallback: no signal snapshot")
        os.mkdir(missing)  # from now on the template's folder takes them
        code, lines, stderr = prog.finish()
        f.check(code == 0, f"fallback: exit {code} {stderr!r}")
        want = [f"cuprof: CUPROF_SNAPSHOT: cannot write in {missing} (No such file or directory):"
                f" snapshots go to {fb} while it cannot",
                f"cuprof: snapshot to {os.path.join(missing, 'snap-0.pickle')} failed: No such "
                f"file or directory; written to {os.path.join(fb, 'snap-0.pickle')} instead",
                f"cuprof: snapshot written to {os.path.join(missing, 'snap-1.pickle')}"]
        for w in want:
            f.check(w in stderr.splitlines(), f"fallback: no line {w!r} in {stderr!r}")
        f.check(os.listdir(fb) == ["snap-0.pickle"] and os.listdir(missing) == ["snap-1.pickle"],
                f"fallback: {os.listdir(fb)} {os.listdir(missing)}")
        for p in (os.path.join(fb, "snap-0.pickle"), os.path.join(missing, "snap-1.pickle")):
            loads_ok(f, p, "fallback")
            regular_0600(f, p, "fallback")
    with tempfile.TemporaryDirectory() as tmp:
        # A file where the folder should be; CUPROF_LOG=quiet still says where the file went.
        afile, fb = os.path.join(tmp, "afile"), os.path.join(tmp, "fb")
        os.mkdir(fb)
        with open(afile, "wb") as fh:
            fh.write(VICTIM)
        r = shimrun.run([a.app, "api", os.path.join(tmp, "api.pickle")],
                        shimrun.env(a.ld_path, a.lib, TMPDIR=fb, CUPROF_LOG="quiet",
                                    CUPROF_SNAPSHOT=os.path.join(afile, "s.pickle")))
        f.check(r.returncode == 0 and r.stderr.splitlines() ==
                [f"cuprof: CUPROF_SNAPSHOT: cannot write in {afile} (Not a directory): snapshots"
                 f" go to {fb} while it cannot",
                 f"cuprof: snapshot to {os.path.join(afile, 's.pickle')} failed: Not a directory;"
                 f" written to {os.path.join(fb, 's.pickle')} instead"],
                f"fallback file: {r.returncode} {r.stderr!r}")
        f.check(os.listdir(fb) == ["s.pickle"], f"fallback file: {os.listdir(fb)}")
        victims_intact(f, [afile], "fallback file")
    fallback_read_only(f, a)
    with tempfile.TemporaryDirectory() as tmp:
        fb = os.path.join(tmp, "fb")
        os.mkdir(fb)
        out = os.path.join(tmp, "missing", "run.pickle")
        r = shimrun.run([a.cuprof, "run", "-o", out, "--", a.app, "api",
                         os.path.join(fb, "api.pickle")], shimrun.env(a.ld_path, TMPDIR=fb))
        moved = os.path.join(fb, "run.pickle")
        f.check(r.returncode == 0 and f"written to {moved} instead" in r.stderr and
                f"== {moved}" in r.stderr and "no snapshot was written" not in r.stderr,
                f"fallback run: {r.returncode} {r.stderr!r}")


def fallback_read_only(f, a):
    """A container's read-only working directory and the default template: the snapshot goes to
    $TMPDIR. Needs a mount namespace (skipped, with a note, where none can be made)."""
    with tempfile.TemporaryDirectory() as tmp:
        ro, fb = os.path.join(tmp, "ro"), os.path.join(tmp, "fb")
        os.mkdir(ro)
        os.mkdir(fb)
        env = shimrun.env(a.ld_path, a.lib, TMPDIR=fb)
        env["GUEST_PRELOAD"] = env.pop("LD_PRELOAD")  # for the program, not unshare and mount
        script = ('mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && cd "$1" && '
                  'LD_PRELOAD="$GUEST_PRELOAD" exec "$2" api "$3"')
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", ro,
               a.app, os.path.join(fb, "api.pickle")]
        if os.geteuid() != 0:
            cmd[1:1] = ["--user", "--map-root-user"]
        try:
            r = shimrun.run(cmd, env)
        except FileNotFoundError:
            print("fallback read-only: no unshare here: skipped")
            return
        if r.returncode != 0 and "dump:" not in r.stdout and "cuprof:" not in r.stderr:
            print(f"fallback read-only: no read-only mount here ({r.stderr.strip()}): skipped")
            return
        moved = sorted(n for n in os.listdir(fb) if n.startswith("cuprof-"))
        f.check(r.returncode == 0 and len(moved) == 1 and
                f"cuprof: CUPROF_SNAPSHOT: cannot write in {ro} (Read-only file system): "
                f"snapshots go to {fb} while it cannot" in r.stderr and
                f"failed: Read-only file system; written to {os.path.join(fb, moved[0])} instead"
                in r.stderr, f"fallback read-only: {r.returncode} {moved} {r.stderr!r}")
        f.check(os.listdir(ro) == [], f"fallback read-only: {os.listdir(ro)}")


def case_primary(f, a):
    base = shimrun.run([a.app], shimrun.env(a.ld_path, SIMCUDA_DEVICES=2))
    f.check(base.returncode == 0, f"primary: fails without cuprof: {base}")
    with tempfile.TemporaryDirectory() as tmp:
        r = shimrun.run([a.app], shimrun.env(a.ld_path, a.lib, SIMCUDA_DEVICES=2,
                                             CUPROF_SNAPSHOT=os.path.join(tmp, "p-%n.json")))
        f.check(r.returncode == 0 and r.stdout == base.stdout, f"primary: {r} vs {base.stdout!r}")
        snap = loads_ok(f, os.path.join(tmp, "p-0.json"), "primary")
    if snap is None:
        return
    traces = snap["device_traces"]
    acts0 = [e["action"] for e in traces[0]]
    f.check(acts0.count("segment_alloc") == 1 and "segment_free" not in acts0,
            f"primary: device 0 after a library's release: {acts0}")
    allocs0 = [e["addr"] for e in traces[0] if e["action"] == "alloc"]
    f.check(len(allocs0) == 2 and allocs0[0] == allocs0[1],
            f"primary: device 0's second block should come from the cache: {allocs0}")
    acts1 = [e["action"] for e in traces[1]]
    want1 = (["segment_alloc"] + ["alloc", "free_requested", "free_completed"] * 2 +
             ["segment_free", "segment_alloc", "alloc", "free_requested", "free_completed",
              "segment_free"])  # the program's own last release destroys the new context
    f.check(acts1 == want1, f"primary: device 1: {acts1}, want {want1}")
    segs = [(s["device"], s["total_size"]) for s in snap["segments"]]
    f.check(segs == [(0, 2 << 20)], f"primary: cached segments {segs}")  # 1 MiB: the small pool


def lookup_names(entry_points_def):
    """Every driver lookup name preload/entry_points.def lists (what cuprof resolves)."""
    text = re.sub(r"/\*.*?\*/", "", open(entry_points_def).read(), flags=re.S)
    names = []
    for m in re.finditer(r'DRIVER_(?:WRAPPER|RETRY|CALLED|LOOKUP)\([^"]*?"(cu\w+)"', text):
        if m.group(1) not in names:
            names.append(m.group(1))
    return names


def others(stderr):
    """cuprof's lines but "snapshot written" and the one naming the unwinder (issue 30)."""
    return [l for l in stderr.splitlines()
            if l.startswith("cuprof: ") and "snapshot written to" not in l
            and not l.startswith("cuprof: stacks by ")]


def case_lean(f, a):
    names = lookup_names(a.extra[0])
    f.check(len(names) >= 40 and "cuMemCreate" in names and "cuDeviceGetAttribute" in names,
            f"lean: lookup names {names}")
    vmm = {"cuMemCreate", "cuMemMap", "cuMemUnmap", "cuMemRelease", "cuMemAddressReserve",
           "cuMemAddressFree", "cuMemSetAccess", "cuMemGetAllocationGranularity",
           "cuDeviceGetAttribute"}
    if shimrun.sanitized():  # slow runs: the VMM calls and every third name
        names = [n for i, n in enumerate(names) if n in vmm or i % 3 == 0]
    # One shard of the names (`K/N` after the paths: meson runs the shards side by side, each
    # well inside its timeout on a loaded 2-core machine); the no-VMM device goes with shard 0.
    shard, shards = (int(x) for x in (a.extra[2] if len(a.extra) > 2 else "0/1").split("/"))
    names = names[shard::shards]
    configs = [("cache", ""), ("trace", ""), ("off", ""), ("cache", "expandable_segments:True")]
    # threads with 2 threads of 30 steps: streams, both allocation calls, cross-iteration frees,
    # at a quarter of its default work (255 runs of it).
    app = [a.app, "2", "30"]
    for name in names:
        base = shimrun.run(app, shimrun.env(a.ld_path, LEAN_DRIVER_HIDE=name))
        f.check(base.returncode >= 0, f"lean {name}: the program alone died: {base}")
        for mode, conf in configs:
            label = f"lean {name} {mode} {conf}".strip()
            with tempfile.TemporaryDirectory() as tmp:
                env = shimrun.env(a.ld_path, a.lib, LEAN_DRIVER_HIDE=name, CUPROF_MODE=mode,
                                  CUPROF_ALLOC_CONF=conf,
                                  CUPROF_SNAPSHOT=os.path.join(tmp, "l-%n.pickle"))
                r = shimrun.run(app, env)
                # A failing multi-threaded program prints its failure from each thread that
                # meets it before exit() (even half a line): its first line is the answer.
                same = r.stdout == base.stdout or (
                    base.returncode != 0 and
                    r.stdout.splitlines()[:1] == base.stdout.splitlines()[:1])
                f.check(r.returncode == base.returncode and same,
                        f"{label}: {r.returncode} {r.stdout[-200:]!r} {r.stderr[-300:]!r}, "
                        f"without cuprof {base.returncode} {base.stdout[-200:]!r}")
                lines = others(r.stderr)
                f.check(len(lines) <= 2, f"{label}: {lines}")
                if conf and name in vmm:
                    f.check(any("expandable_segments:True" in l and "ordinary segments" in l
                                for l in lines), f"{label}: no line about VMM: {lines}")
                for path in shimrun.dumps(tmp, "l-*"):
                    snap = loads_ok(f, path, label)
                    if snap and conf and name in vmm:
                        f.check(not any(s.get("is_expandable") for s in snap["segments"]),
                                f"{label}: expandable segments on a driver without VMM")
    if shard != 0:
        return
    # A device that says it has no virtual memory management (the attribute is 0).
    sim = a.extra[1]
    base = shimrun.run([a.app], shimrun.env(sim, SIMCUDA_NO_VMM=1))
    with tempfile.TemporaryDirectory() as tmp:
        r = shimrun.run([a.app], shimrun.env(sim, a.lib, SIMCUDA_NO_VMM=1,
                                             CUPROF_ALLOC_CONF="expandable_segments:True",
                                             CUPROF_SNAPSHOT=os.path.join(tmp, "v-%n.pickle")))
        f.check(r.returncode == base.returncode == 0 and r.stdout == base.stdout,
                f"lean no-vmm device: {r} vs {base}")
        f.check(others(r.stderr) == ["cuprof: expandable_segments:True: device 0 has no virtual "
                                     "memory management: its segments are ordinary ones"],
                f"lean no-vmm device: {r.stderr!r}")
        snap = loads_ok(f, os.path.join(tmp, "v-0.pickle"), "lean no-vmm device")
        if snap:
            f.check(snap["segments"] and
                    not any(s.get("is_expandable") for s in snap["segments"]),
                    "lean no-vmm device: expandable segments")


CASES = {"traps": case_traps, "dump-o": case_dump_o, "api": case_api, "modes": case_modes,
         "signals": case_signals, "closefds": case_closefds, "stderr": case_stderr, "term": case_term,
         "quick": case_quick, "exec": case_exec, "chdir": case_chdir, "cancel": case_cancel, "fdleak": case_fdleak, "abort": case_abort, "handler-exit": case_handler_exit,
         "fallback": case_fallback, "run-signals": case_run_signals,
         "primary": case_primary,
         "lean": case_lean}


class Args:
    def __init__(self, argv):
        self.case, self.app, self.lib, self.ld_path, self.cuprof = argv[:5]
        self.extra = argv[5:]


def main():
    a = Args(sys.argv[1:])
    os.environ.pop("CUPROF_SNAPSHOT", None)
    f = shimrun.Checks()
    with shimrun.private_sockets("cuprof-guest-"):  # `cuprof ps` sees its programs alone
        CASES[a.case](f, a)
    f.finish()


if __name__ == "__main__":
    main()
