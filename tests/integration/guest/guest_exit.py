"""The guest cases of quick exits and exec (test_guest.py runs them): _exit and _Exit,
vfork and fork children, Python's os._exit and multiprocessing, a program replaced by exec."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/)
from guest_common import Program, end_without_input, live_sizes, tgkill  # noqa: E402


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
