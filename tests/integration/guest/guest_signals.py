"""The guest cases of signals and endings (test_guest.py runs them): EINTR and SA_RESTART,
handlers installed late, handlers that exit, descriptors, abort, cancellation, closed
descriptors and stderr, SIGTERM/SIGINT/SIGHUP at their default and `cuprof run` passing them on."""
import concurrent.futures
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/)
from guest_common import (  # noqa: E402
    Program, end_without_input, live_sizes, loads_ok, read_until_ready, tgkill, wait_file)


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
