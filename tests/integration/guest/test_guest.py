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
import os
import pickle
import re
import signal
import stat
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/)
from guest_common import (  # noqa: E402
    Program, VICTIM, cuprof, live_sizes, loads_ok, make_victims, old_temp_names, regular_0600,
    tgkill, victims_intact, wait_file, wait_listed)
from guest_signals import (  # noqa: E402
    case_abort, case_cancel, case_closefds, case_fdleak, case_handler_exit, case_run_signals,
    case_signals, case_stderr, case_term)
from guest_exit import case_exec, case_quick  # noqa: E402


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
