"""Watching running programs: the control socket (CUPROF_CONTROL) and `cuprof ps`, `dump`, `top`.

Cases (argv[1]):
  ps        two programs (ranks 0 and 1) listed with exact bytes, rank, mode and command
  dump      a snapshot while the program sleeps: its sleep is not cut short (a signal's is),
            the file is consistent and holds the program's blocks
  top       `top --once` and `top --json` of a sleeping program: exact bytes and call sites
  protocol  malformed, unknown and oversized requests get one ERROR line; a stalled client
            does not stall the program or the next client; CUPROF_CONTROL=off has no socket
  peer      a client running as another user (uid 65534, allowed past the directory's mode) is
            refused by the peer check
  cleanup   no socket after exit; after kill -9 the next `cuprof ps` removes it; a forked
            child that allocates gets a socket of its own, and neither is left behind
  hermetic  programs of the same user elsewhere (/tmp/cuprof-UID, another XDG_RUNTIME_DIR) are
            never seen where CUPROF_SOCKET_DIR names the test's own folder: `ps` lists the
            test's program alone and `top --once` without a PID picks it
  ranks     four ranks' files: summary's cross-rank view (rows, spread, outliers, the call
            site that differs) and timeline's per-rank tracks on one clock
"""
import argparse
import ctypes
import json
import os
import pickle
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402

MiB = 1 << 20
# live_sleeper's blocks: 1 MiB and 1000 bytes (rounded to 1024) in one 2 MiB small-pool segment,
# 3 MiB in a 20 MiB large-pool segment (PyTorch's pool and segment sizes).
ALLOCATED = MiB + 3 * MiB + 1024
RESERVED = 2 * MiB + 20 * MiB


def socket_dir(env):
    xdg = env.get("XDG_RUNTIME_DIR")
    if xdg and xdg.startswith("/"):
        return os.path.join(xdg, "cuprof")
    return f"/tmp/cuprof-{os.geteuid()}"


class Program:
    """live_sleeper under the shim, started and read until it says it is ready."""

    def __init__(self, a, seconds, tmp, extra=None, args=()):
        variables = {"CUPROF_SNAPSHOT": os.path.join(tmp, "exit-%p-%n.pickle"),
                     "XDG_RUNTIME_DIR": a.xdg}
        variables.update(extra or {})
        self.env = shimrun.env(a.ld_path, a.lib, **variables)
        self.proc = subprocess.Popen([a.sleeper, str(seconds)] + list(args), env=self.env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.pid = self.proc.pid
        self.child_pid = None
        want = 2 if "fork" in args else 1
        while sum(1 for l in self.lines if "ready" in l) < want:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line.strip())
            if line.startswith("child ready"):
                self.child_pid = int(line.split()[2])

    def finish(self, timeout=60):
        out, err = self.proc.communicate(timeout=timeout)
        self.lines += out.splitlines()
        self.stderr = err
        return self.proc.returncode


def cuprof(a, *args, env=None):
    e = dict(os.environ)
    e["XDG_RUNTIME_DIR"] = a.xdg
    e.update(env or {})
    return subprocess.run([a.cuprof] + list(args), capture_output=True, text=True, env=e,
                          timeout=60)


def wait_listed(a, pids, timeout=15):
    """`cuprof ps --json` once every pid is listed (the socket comes with the first CUDA call)."""
    deadline = time.monotonic() + timeout
    while True:
        r = cuprof(a, "ps", "--json")
        listed = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else []
        if {p["pid"] for p in listed} >= set(pids) or time.monotonic() > deadline:
            return listed, r


def ask(path, request, timeout=10):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(path)
    s.sendall(request if isinstance(request, bytes) else request.encode())
    data = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
    s.close()
    return data.decode()


def case_ps(f, a):
    with tempfile.TemporaryDirectory() as tmp:
        progs = [Program(a, 4, tmp, {"RANK": str(r)}) for r in (1, 0)]
        listed, r = wait_listed(a, [p.pid for p in progs])
        mine = sorted((p for p in listed if p["pid"] in {q.pid for q in progs}),
                      key=lambda p: p["rank"])
        f.check(len(mine) == 2, f"ps: listed {listed}; {r.stderr!r}")
        for rank, p in enumerate(mine):
            f.check(p["rank"] == rank and p["mode"] == "cache" and p["devices"] == "0" and
                    p["allocated"] == ALLOCATED and p["reserved"] == RESERVED and
                    p["peak_allocated"] == ALLOCATED and p["peak_reserved"] == RESERVED and
                    p["command"].endswith("live_sleeper 4") and p["host"] == socket.gethostname(),
                    f"ps: rank {rank}: {p}")
        # Sorted by rank then pid, in the table too.
        text = cuprof(a, "ps").stdout.splitlines()
        f.check(text and text[0].split()[:3] == ["PID", "RANK", "HOST"], f"ps: header {text[:1]}")
        rows = [l.split() for l in text[1:] if l.split()[0] in {str(p.pid) for p in progs}]
        f.check([row[1] for row in rows] == ["0", "1"] and
                all(row[5:7] == ["4.00", "MiB"] for row in rows),
                f"ps: table rows {rows}")
        for p in progs:
            f.check(p.finish() == 0, f"ps: program exit {p.lines} {p.stderr!r}")
        # A stopped program cannot answer: ps says so, and keeps its socket (it is not stale).
        prog = Program(a, 30, tmp)
        wait_listed(a, [prog.pid])
        os.kill(prog.pid, signal.SIGSTOP)
        try:
            r = cuprof(a, "ps")
            f.check(f"cuprof: ps: process {prog.pid} did not answer: " in r.stderr and
                    "no answer within 5 s" in r.stderr and
                    os.path.exists(os.path.join(socket_dir(prog.env), f"{prog.pid}.sock")),
                    f"ps: a stopped program: {r.stderr!r}")
        finally:
            os.kill(prog.pid, signal.SIGCONT)
            prog.proc.kill()
            prog.proc.wait()
        # A socket directory others may write to is refused, and ps says why instead of
        # reporting nobody.
        refused = os.path.join(tmp, "open")
        os.mkdir(refused)
        os.chmod(refused, 0o755)
        r = cuprof(a, "ps", env={"CUPROF_SOCKET_DIR": refused})
        f.check(r.returncode == 0 and r.stderr == f"cuprof: ps: not looking in {refused}: "
                f"{refused} is open to other users (mode 755; 700 expected)\n",
                f"ps: a refused directory: {r.returncode} {r.stderr!r}")


def case_dump(f, a):
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, 3, tmp)
        listed, _ = wait_listed(a, [prog.pid])
        cwd = os.path.join(tmp, "cwd")
        os.mkdir(cwd)
        r = subprocess.run([a.cuprof, "dump", str(prog.pid), "-o", "now.pickle"], cwd=cwd,
                           capture_output=True, text=True,
                           env=dict(os.environ, XDG_RUNTIME_DIR=a.xdg))
        target = os.path.join(cwd, "now.pickle")
        f.check(r.returncode == 0 and r.stdout.strip() ==
                f"cuprof: snapshot of pid {prog.pid} written to {target}",
                f"dump: {r.returncode} {r.stdout!r} {r.stderr!r}")
        r2 = cuprof(a, "dump", str(prog.pid))  # the program's own CUPROF_SNAPSHOT name
        f.check(r2.returncode == 0 and f"exit-{prog.pid}-0.pickle" in r2.stdout,
                f"dump (template): {r2.stdout!r} {r2.stderr!r}")
        f.check(prog.finish() == 0, f"dump: exit {prog.lines} {prog.stderr!r}")
        slept = [l for l in prog.lines if l.startswith("parent: slept")]
        f.check(slept and slept[0].endswith("0 steps cut short") and
                int(slept[0].split()[2]) >= 2900, f"dump: the program's sleep: {slept}")
        if os.path.exists(target):
            snap = pickle.load(open(target, "rb"))
            problems = shimrun.load_checker().check(snap)
            f.check(not problems, f"dump: snapshot problems {problems[:3]}")
            live = sorted(b["requested_size"] for s in snap["segments"] for b in s["blocks"]
                          if b["state"] == "active_allocated")
            f.check(live == [1000, MiB, 3 * MiB], f"dump: live blocks {live}")
        # The same with a signal: the handler cuts the program's current sleep step short.
        prog = Program(a, 3, tmp)
        time.sleep(0.5)
        # To the main thread itself (tgkill): a process-directed signal may go to any thread
        # that does not block it, and only the main thread sleeps.
        libc = ctypes.CDLL(None, use_errno=True)
        SYS_tgkill = 234 if os.uname().machine == "x86_64" else 131
        for _ in range(3):  # three tries: one that lands between two steps cuts nothing
            libc.syscall(SYS_tgkill, prog.pid, prog.pid, signal.SIGUSR1)
            time.sleep(0.4)
        prog.finish()
        slept = [l for l in prog.lines if l.startswith("parent: slept")]
        f.check(slept and not slept[0].endswith(" 0 steps cut short"),
                f"dump: a signal should cut a step short (the control the test relies on): {slept}")
        r = cuprof(a, "dump", "999999")
        f.check(r.returncode == 2 and "no process 999999" in r.stderr, f"dump: bad pid {r}")


def case_top(f, a):
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, 4, tmp)
        wait_listed(a, [prog.pid])
        time.sleep(1.2)  # at least two one-second samples
        r = cuprof(a, "top", str(prog.pid), "--json", "-n", "5")
        top = json.loads(r.stdout) if r.returncode == 0 else {}
        f.check(top.get("pid") == prog.pid and top.get("live_sites") == 3 and
                [s["bytes"] for s in top.get("sites", [])] == [3 * MiB, MiB, 1000],
                f"top --json: {r.stdout[:500]!r} {r.stderr!r}")
        samples = top.get("samples", [{}])[0]
        f.check(len(samples.get("allocated", [])) >= 2 and
                samples["allocated"][-1] == ALLOCATED and samples["reserved"][-1] == RESERVED,
                f"top --json: samples {samples}")
        sites = top.get("sites", [])
        f.check(sites and any(fr["name"] == "live_alloc" for fr in sites[0]["frames"]) and
                any(fr["name"] == "main" for fr in sites[0]["frames"]),
                f"top --json: frames {sites[:1]}")
        once = cuprof(a, "top", "--once", str(prog.pid)).stdout.splitlines()
        f.check(once and once[0].startswith(f"cuprof top - pid {prog.pid}, ") and
                "cache mode" in once[0] and "live_sleeper 4" in once[0], f"top --once: {once[:1]}")
        row = next((l.split() for l in once if l.startswith("0 ")), [])
        f.check(row[:9] == ["0", "4.00", "MiB", "22.00", "MiB", "4.00", "MiB", "22.00", "MiB"] and
                row[9] == "0", f"top --once: device row {row}")
        # The three blocks come from three lines of main through live_alloc: rows that would show
        # alike ("live_alloc (live_sleeper.c:N)") are one row, bytes and counts summed.
        site_rows = [l for l in once if "live_alloc (live_sleeper.c:" in l]
        f.check(len(site_rows) == 1 and site_rows[0].split()[:4] == ["4.00", "MiB", "3", "0"],
                f"top --once: site rows {site_rows} in {once}")
        only = cuprof(a, "top", "--once")  # the only process, when there is one
        first = only.stdout.splitlines()[:1]
        f.check(only.returncode == 0 and first and
                first[0].startswith(f"cuprof top - pid {prog.pid}, "),
                f"top --once without PID: {only.stdout[:200]!r} {only.stderr!r}")
        prog.finish()
        r = cuprof(a, "top", "--once")
        f.check(r.returncode == 2 and "no process" in r.stderr, f"top with none: {r}")


def case_hermetic(f, a):
    with tempfile.TemporaryDirectory() as tmp, \
            tempfile.TemporaryDirectory(prefix="cuprof-other-") as other_xdg:
        os.chmod(other_xdg, 0o700)
        # Neighbours: one with neither variable (its socket in /tmp/cuprof-UID), one with a login
        # session's XDG_RUNTIME_DIR of its own.
        neighbours = []
        for xdg in (None, other_xdg):
            env = shimrun.env(a.ld_path, a.lib, CUPROF_SNAPSHOT=os.path.join(tmp, "n-%p.pickle"))
            env.pop("CUPROF_SOCKET_DIR", None)
            env.pop("XDG_RUNTIME_DIR", None)
            if xdg:
                env["XDG_RUNTIME_DIR"] = xdg
            p = subprocess.Popen([a.sleeper, "6"], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            p.stdout.readline()  # "ready": its socket exists
            neighbours.append(p)
        prog = Program(a, 4, tmp)
        listed, r = wait_listed(a, [prog.pid])
        f.check([p["pid"] for p in listed] == [prog.pid],
                f"hermetic: ps lists {[p['pid'] for p in listed]}, want only {prog.pid}")
        only = cuprof(a, "top", "--once")
        f.check(only.returncode == 0 and only.stdout.startswith(f"cuprof top - pid {prog.pid}, "),
                f"hermetic: top --once: {only.stdout[:120]!r} {only.stderr!r}")
        prog.finish()
        for p in neighbours:
            p.kill()
            p.communicate()


def case_protocol(f, a):
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, 6, tmp)
        wait_listed(a, [prog.pid])
        path = os.path.join(socket_dir(prog.env), f"{prog.pid}.sock")
        st = os.stat(path)
        f.check((st.st_mode & 0o777) == 0o600, f"protocol: socket mode {oct(st.st_mode)}")
        f.check((os.stat(os.path.dirname(path)).st_mode & 0o777) == 0o700, "protocol: dir mode")
        cases = {
            "hello\n": "ERROR unknown protocol: requests start with CUPROF/1",
            "CUPROF/1 FLY\n": "ERROR unknown request: expected INFO, TOP [N] or DUMP [PATH]",
            "CUPROF/1 TOP x\n": "ERROR TOP takes a number of call sites from 1 to 1000",
            "CUPROF/1 DUMP relative.pickle\n":
                "ERROR DUMP takes an absolute path (or none for CUPROF_SNAPSHOT)",
            "CUPROF/1 INFO " + "x" * 5000 + "\n": "ERROR request longer than 4096 bytes",
        }
        for req, want in cases.items():
            got = ask(path, req).strip()
            f.check(got == want, f"protocol: {req[:30]!r} -> {got[:120]!r}, expected {want!r}")
        # A client that connects and says nothing: the program goes on, and the next client is
        # served once the silent one has timed out.
        silent = socket.socket(socket.AF_UNIX)
        silent.connect(path)
        t0 = time.monotonic()
        info = ask(path, "CUPROF/1 INFO\n", timeout=15)
        waited = time.monotonic() - t0
        silent.close()
        f.check(info.startswith("OK {") and waited < 10,
                f"protocol: after a silent client: {info[:60]!r} in {waited:.1f} s")
        f.check(prog.finish() == 0, f"protocol: exit {prog.lines}")
        slept = [l for l in prog.lines if l.startswith("parent: slept")]
        f.check(slept and slept[0].endswith(" 0 steps cut short"), f"protocol: sleep {slept}")
        off = Program(a, 1, tmp, {"CUPROF_CONTROL": "off"})
        time.sleep(0.3)
        f.check(not os.path.exists(os.path.join(socket_dir(off.env), f"{off.pid}.sock")),
                "protocol: CUPROF_CONTROL=off made a socket")
        off.finish()


def case_peer(f, a):
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        print("SKIP: needs root and setpriv to run a client as another user")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, 3, tmp)
        wait_listed(a, [prog.pid])
        path = os.path.join(socket_dir(prog.env), f"{prog.pid}.sock")
        # The server may answer and close before the request is sent: the reply still comes.
        client = ("import socket,sys\ns=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
                  "try: s.sendall(b'CUPROF/1 INFO\\n')\nexcept OSError: pass\n"
                  "data = b''\nwhile True:\n    d = s.recv(4096)\n    if not d: break\n"
                  "    data += d\nprint(data.decode().strip())")
        # uid 65534 keeps CAP_DAC_OVERRIDE, so the directory's mode lets it reach the socket:
        # only the peer check stands in its way.
        r = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
                            "--inh-caps=+dac_override", "--ambient-caps=+dac_override",
                            sys.executable, "-c", client, path], capture_output=True, text=True,
                           timeout=30)
        f.check(r.stdout.strip() == "ERROR permission denied: the client runs as another user",
                f"peer: another uid got {r.stdout!r} {r.stderr[-300:]!r}")
        own = ask(path, "CUPROF/1 INFO\n")
        f.check(own.startswith("OK {"), f"peer: the owner got {own[:80]!r}")
        prog.finish()


def case_cleanup(f, a):
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, 1, tmp)
        wait_listed(a, [prog.pid])
        path = os.path.join(socket_dir(prog.env), f"{prog.pid}.sock")
        f.check(os.path.exists(path), "cleanup: no socket while running")
        prog.finish()
        f.check(not os.path.exists(path), "cleanup: socket left after a normal exit")
        # kill -9: nothing runs at exit; the next `cuprof ps` recognizes the socket as stale.
        prog = Program(a, 30, tmp)
        wait_listed(a, [prog.pid])
        path = os.path.join(socket_dir(prog.env), f"{prog.pid}.sock")
        prog.proc.kill()
        prog.proc.wait()
        f.check(os.path.exists(path), "cleanup: the killed program's socket should still be there")
        r = cuprof(a, "ps")
        f.check(not os.path.exists(path) and "removed 1 socket" in r.stderr,
                f"cleanup: ps after kill -9: {r.stderr!r}")
        # fork: the child makes its own CUDA calls and gets its own socket. Both sleep long enough
        # to be listed by a `cuprof ps` that a loaded machine (ASan, 2 cores) runs slowly.
        prog = Program(a, 6, tmp, args=("fork",))
        listed, _ = wait_listed(a, [prog.pid, prog.child_pid])
        pids = {p["pid"]: p for p in listed}
        f.check(prog.child_pid in pids and prog.pid in pids, f"cleanup: fork: listed {listed}")
        if prog.child_pid in pids:
            f.check(pids[prog.child_pid]["allocated"] == ALLOCATED + 2 * MiB,
                    f"cleanup: the child's bytes {pids[prog.child_pid]}")
        paths = [os.path.join(socket_dir(prog.env), f"{p}.sock") for p in (prog.pid,
                                                                           prog.child_pid)]
        f.check(prog.finish() == 0, f"cleanup: fork exit {prog.lines} {prog.stderr!r}")
        f.check(not any(os.path.exists(p) for p in paths), "cleanup: a socket left after fork")


def case_ranks(f, a):
    """A job of four ranks (rank 2 keeps 8 MiB more): summary's cross-rank view and timeline's
    per-rank tracks on one clock."""
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for rank in range(4):
            prog = Program(a, 0, tmp, {"RANK": str(rank), "LIVE_EXTRA_MIB": "8" if rank == 2 else "0",
                                       "CUPROF_SNAPSHOT": os.path.join(tmp, "rank%r.pickle")})
            f.check(prog.finish() == 0, f"ranks: rank {rank} exit {prog.lines} {prog.stderr!r}")
            files.append((rank, prog.pid, os.path.join(tmp, f"rank{rank}.pickle")))
        paths = [p for _, _, p in files]
        r = cuprof(a, "summary", "--ranks-only", "--jobs", "2", *reversed(paths))
        out = r.stdout.splitlines()
        f.check(r.returncode == 0 and out[0] == "== cross-rank view: 4 files",
                f"ranks: {r.returncode} {r.stdout[:300]!r} {r.stderr!r}")
        rows = [l.split() for l in out[2:6]]
        host = socket.gethostname()[:16]
        for (rank, pid, path), row in zip(files, rows):
            peak = "12.00" if rank == 2 else "4.00"
            frag = "10.00" if rank == 2 else "18.00"
            f.check(row == [str(rank), host, str(pid), peak, "MiB", "22.00", "MiB", "0", frag,
                            "MiB", path], f"ranks: row {row}")
        text = "\n".join(out)
        for line in ["spread of peak allocated: max/min 3.00x (highest rank 2: 12.00 MiB, "
                     "lowest rank 0: 4.00 MiB)",
                     "outliers of peak allocated (more than 10% from the median 4.00 MiB): "
                     "rank 2 12.00 MiB (+200%)",
                     "outliers of peak reserved (more than 10% from the median 22.00 MiB): none"]:
            f.check(line in out, f"ranks: no line {line!r} in\n{text}")
        diffs = [l for l in out if l.startswith("  8.00 MiB more on rank 2 (8.00 MiB) than on rank 0")]
        f.check(len(diffs) == 1 and "live_alloc (" in diffs[0] and "< main (" in diffs[0],
                f"ranks: site differences in\n{text}")
        # Two files: the cross-rank view, then each file's own report.
        both = cuprof(a, "summary", "--brief", paths[0], paths[1]).stdout
        f.check(both.startswith("== cross-rank view: 2 files") and
                f"== {paths[0]}" in both and f"== {paths[1]}" in both,
                f"ranks: summary of two files: {both[:400]!r}")
        # plot: the same cross-rank view, as the page's data (viewer/DATA.md), and the first
        # file in full.
        html = os.path.join(tmp, "job.html")
        pr = cuprof(a, "plot", "-o", html, *paths)
        data, ranks = {}, {}
        if pr.returncode == 0:
            page = open(html, encoding="utf-8").read()
            for name, into in (("data", data), ("ranks", ranks)):
                m = re.search(r'<script id="cuprof-%s" type="application/json">(.*?)</script>'
                              % name, page, re.S)
                into.update(json.loads(m.group(1)) if m else {})
        got = [(r["rank"], r["pid"], "%.2f" % (r["peak_allocated"] / (1 << 20)),
                r["outlier_allocated"], r["file"]) for r in ranks.get("rows", [])]
        want = [(rank, pid, "12.00" if rank == 2 else "4.00", rank == 2, path)
                for rank, pid, path in files]
        f.check(got == want and data.get("mode") == "ranks" and data.get("file") == paths[0] and
                data["runs"][0]["file"] == paths[0],
                f"ranks: plot's cross-rank rows {got} (want {want}) {pr.stderr!r}")
        sites = ranks.get("sites", [])
        f.check(sites and "live_alloc (" in sites[0]["name"] and
                sites[0]["bytes"][[r[0] for r in got].index(2)] == 8 << 20,
                f"ranks: plot's site differences {sites[:2]}")
        # timeline: one process track per rank, named, sorted by rank, on one wall clock.
        tl = cuprof(a, "timeline", *paths)
        events = json.loads(tl.stdout)["traceEvents"] if tl.returncode == 0 else []
        names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
        f.check(sorted(names.values()) == sorted(f"cuprof rank {rank} ({socket.gethostname()}) "
                                                 f"pid {pid}" for rank, pid, _ in files),
                f"ranks: timeline tracks {names}")
        first = {}
        for e in events:
            if e.get("ph") == "C":
                first.setdefault(e["pid"], e["ts"])
        starts = [first.get(pid) for _, pid, _ in files]
        f.check(None not in starts and min(starts) == 0 and starts == sorted(starts) and
                starts[3] > starts[0], f"ranks: first counter times per rank {starts}")
        sort = {e["pid"]: e["args"]["sort_index"] for e in events
                if e.get("name") == "process_sort_index"}
        f.check(sort == {pid: rank for rank, pid, _ in files}, f"ranks: sort indexes {sort}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["ps", "dump", "top", "protocol", "peer", "cleanup",
                                     "ranks", "hermetic"])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--cuprof", required=True)
    ap.add_argument("--sleeper", required=True)
    a = ap.parse_args()
    f = shimrun.Checks()
    # A private runtime directory per test, so parallel tests never see each other's programs.
    with shimrun.private_sockets("cuprof-live-") as xdg:
        a.xdg = xdg
        globals()["case_" + a.case](f, a)
    f.finish()


if __name__ == "__main__":
    main()
