"""The control thread as a guest: clients that misbehave, text from outside, and what `top`
shows (live_sleeper.c and live_guest.c are the programs watched).

Cases (argv[1]):
  slow    a client trickling one byte every 1.5 s, one that connects and never sends and one
          that never reads a large TOP reply: `cuprof ps`, `top --once` and `dump` are still
          answered promptly, again and again, and the trickling client is cut off at its
          request's deadline (2 s)
  text    argv holding bytes that are not UTF-8 (\\xff\\xfe, Latin-1 r\\xe9sum\\xe9) and terminal
          escapes (ESC]0;...BEL, ESC[2J): `ps` (and --json) lists the program, `top --once` and
          `top --json` work, `dump -o r\\xe9sum\\xe9.pickle` (and .json) succeeds; the replies
          and the snapshots show those bytes as \\xHH; no ESC or BEL byte reaches the terminal
  peaks   `top`'s samples: a 256 MiB allocation freed at once between two samples shows in the
          next sample (each sample is its second's peak)
  merge   two callers of one helper are one row of `top`, their bytes and counts summed
  exit    live `top` of a program that exits ends with "process PID exited" and status 0
"""
import argparse
import json
import os
import pickle
import pty
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402

MiB = 1 << 20
PROMPT_S = 4.0  # an answer from an idle control thread takes milliseconds; ASan, a loaded box


def socket_path(a, pid):
    return os.path.join(a.xdg, "cuprof", f"{pid}.sock")


class Program:
    """A program under the shim, read until it prints its "ready" line."""

    def __init__(self, a, argv, tmp, extra=None):
        variables = {"CUPROF_SNAPSHOT": os.path.join(tmp, "exit-%p.pickle"),
                     "XDG_RUNTIME_DIR": a.xdg}
        variables.update(extra or {})
        self.proc = subprocess.Popen(argv, env=shimrun.env(a.ld_path, a.lib, **variables),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.pid = self.proc.pid
        self.lines = []
        while not any(l.startswith(b"ready") for l in self.lines):
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line.strip())

    def readline(self):
        line = self.proc.stdout.readline().strip()
        self.lines.append(line)
        return line

    def finish(self, timeout=60):
        out, err = self.proc.communicate(timeout=timeout)
        self.lines += out.splitlines()
        self.stderr = err
        return self.proc.returncode


def cuprof(a, *args, text=True, timeout=60):
    return subprocess.run([a.cuprof] + list(args), capture_output=True, text=text,
                          env=dict(os.environ, XDG_RUNTIME_DIR=a.xdg), timeout=timeout)


def wait_listed(a, pid, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = cuprof(a, "ps", "--json")
        if r.returncode == 0 and any(p["pid"] == pid for p in json.loads(r.stdout or "[]")):
            return True
        time.sleep(0.1)
    return False


def trickle(path, result):
    """Sends "CUPROF/1 INFO\\n" one byte every 1.5 s; result["closed_after"]: seconds from
    connect to the server's end of the connection, result["got"]: what it sent."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    t0 = time.monotonic()
    got = b""
    for byte in b"CUPROF/1 INFO\n":
        try:
            s.send(bytes([byte]))
        except OSError:
            break
        r, _, _ = select.select([s], [], [], 1.5)
        if r:
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            got += data
            if not data or got.endswith(b"\n"):
                break
    result["closed_after"] = time.monotonic() - t0
    result["got"] = got
    s.close()


def case_slow(f, a):
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, [a.guest, "16", "sites", "240"], tmp, {"CUPROF_STACK_DEPTH": "256"})
        f.check(wait_listed(a, prog.pid), f"slow: not listed: {prog.lines}")
        path = socket_path(a, prog.pid)
        big = cuprof(a, "top", "--json", "-n", "1000", str(prog.pid))
        with open("/proc/sys/net/core/wmem_default") as fh:
            buffered = int(fh.read())  # what a socket holds before a writer has to wait
        f.check(big.returncode == 0 and len(big.stdout) > 1.5 * buffered,
                f"slow: the TOP reply should be large: {len(big.stdout)} bytes {big.stderr!r}")
        result = {}
        trickler = threading.Thread(target=trickle, args=(path, result))
        trickler.start()
        silent = socket.socket(socket.AF_UNIX)
        silent.connect(path)
        deaf = socket.socket(socket.AF_UNIX)  # asks for a large reply and never reads it
        deaf.connect(path)
        deaf.sendall(b"CUPROF/1 TOP 1000\n")
        slowest = 0.0
        for round_ in range(4):
            for args in (("ps", "--json"), ("top", "--once", str(prog.pid)),
                         ("dump", str(prog.pid), "-o", os.path.join(tmp, f"d{round_}.pickle"))):
                t0 = time.monotonic()
                r = cuprof(a, *args)
                took = time.monotonic() - t0
                slowest = max(slowest, took)
                ok = r.returncode == 0 and (args[0] != "ps" or
                                            any(p["pid"] == prog.pid
                                                for p in json.loads(r.stdout or "[]")))
                f.check(ok and took < PROMPT_S,
                        f"slow: round {round_}: {' '.join(args[:2])}: status {r.returncode} "
                        f"in {took:.1f} s: {r.stdout[:200]!r} {r.stderr[:300]!r}")
            time.sleep(0.5)
        trickler.join(timeout=30)
        closed = result.get("closed_after", 99)
        f.check(closed < 2.0 + 1.5 + 1.0,
                f"slow: the trickling client was served for {closed:.1f} s "
                f"(got {result.get('got')!r}); its deadline is 2 s")
        f.check(result.get("got", b"").startswith(b"ERROR "),
                f"slow: the trickling client should be told why: {result.get('got')!r}")
        silent.close()
        deaf.close()
        print(f"slowest answer {slowest:.2f} s; trickler cut off after {closed:.1f} s")
        f.check(prog.finish() == 0, f"slow: exit {prog.lines} {prog.stderr[-500:]!r}")


HOSTILE = [b"\xff\xfe", b"r\xe9sum\xe9", b"\x1b]0;owned\x07", b"\x1b[2J"]
# On a terminal every control character is escaped too; in JSON and pickle strings only the
# bytes that are not UTF-8 (control characters are valid text there, JSON escapes them).
SHOWN = ["\\xff\\xfe", "r\\xe9sum\\xe9", "\\x1b]0;owned\\x07", "\\x1b[2J"]
IN_JSON = ["\\xff\\xfe", "r\\xe9sum\\xe9", "\x1b]0;owned\x07", "\x1b[2J"]


def no_terminal_controls(f, what, out):
    f.check(b"\x1b" not in out and b"\x07" not in out,
            f"text: {what} sends control bytes to the terminal: {out[:400]!r}")


def case_text(f, a):
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, [os.fsencode(a.sleeper), b"8"] + HOSTILE, tmp)
        f.check(wait_listed(a, prog.pid), f"text: ps --json does not list {prog.pid}")
        r = cuprof(a, "ps", "--json")
        mine = [p for p in json.loads(r.stdout or "[]") if p["pid"] == prog.pid]
        f.check(mine and all(s in mine[0]["command"] for s in IN_JSON),
                f"text: ps --json: {mine}")
        r = cuprof(a, "ps", text=False)
        rows = [l for l in r.stdout.splitlines() if l.startswith(str(prog.pid).encode())]
        no_terminal_controls(f, "ps", r.stdout)
        f.check(r.returncode == 0 and len(rows) == 1 and
                all(s.encode() in rows[0] for s in SHOWN), f"text: ps: {r.stdout!r}")
        r = cuprof(a, "top", "--once", str(prog.pid), text=False)
        no_terminal_controls(f, "top --once", r.stdout)
        f.check(r.returncode == 0 and all(s.encode() in r.stdout for s in SHOWN[:3]),
                f"text: top --once: {r.returncode} {r.stdout[:300]!r} {r.stderr!r}")
        r = cuprof(a, "top", "--json", str(prog.pid), text=False)
        try:
            top = json.loads(r.stdout.decode("utf-8"))
        except ValueError as e:
            top = {"error": str(e)}
        f.check(r.returncode == 0 and top.get("argv", [])[2:] == IN_JSON,
                f"text: top --json argv {top.get('argv', top)}")
        for ext in ("pickle", "json"):
            target = os.path.join(os.fsencode(tmp), b"r\xe9sum\xe9." + ext.encode())
            r = cuprof(a, "dump", str(prog.pid), "-o", target, text=False)
            f.check(r.returncode == 0 and b"written to" in r.stdout and os.path.exists(target),
                    f"text: dump -o r\\xe9sum\\xe9.{ext}: {r.returncode} {r.stdout!r} "
                    f"{r.stderr!r}")
            no_terminal_controls(f, "dump", r.stdout + r.stderr)
            if os.path.exists(target):
                with open(target, "rb") as fh:
                    snap = pickle.load(fh) if ext == "pickle" else json.load(fh)
                f.check(snap["cuprof"]["argv"][2:] == IN_JSON,
                        f"text: argv in the {ext} snapshot: {snap['cuprof']['argv']!r}")
        f.check(prog.finish() == 0, f"text: exit {prog.lines} {prog.stderr[-500:]!r}")


def case_peaks(f, a):
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, [a.guest, "6", "spike"], tmp)
        f.check(wait_listed(a, prog.pid), f"peaks: not listed: {prog.lines}")
        f.check(prog.readline() == b"spiked", f"peaks: {prog.lines}")
        time.sleep(1.5)  # a sample after the spike
        r = cuprof(a, "top", "--json", str(prog.pid))
        top = json.loads(r.stdout) if r.returncode == 0 else {}
        samples = top.get("samples", [{}])[0]
        allocated = samples.get("allocated", [])
        f.check(allocated and max(allocated) >= 256 * MiB + 3 * MiB,
                f"peaks: the spike is missing from the samples: {samples} {r.stderr!r}")
        f.check(allocated and allocated[-1] <= 3 * MiB + 2 * MiB and
                top["devices"][0]["allocated"] == 3 * MiB,
                f"peaks: after the spike: {allocated} {top.get('devices')}")
        f.check(prog.finish() == 0, f"peaks: exit {prog.lines} {prog.stderr[-500:]!r}")


def case_merge(f, a):
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, [a.guest, "4"], tmp)
        f.check(wait_listed(a, prog.pid), f"merge: not listed: {prog.lines}")
        r = cuprof(a, "top", "--json", str(prog.pid))
        top = json.loads(r.stdout) if r.returncode == 0 else {}
        f.check(top.get("live_sites") == 2, f"merge: two stacks expected: {r.stdout[:300]!r}")
        r = cuprof(a, "top", "--once", str(prog.pid))
        rows = [l.split() for l in r.stdout.splitlines() if "guest_alloc (live_guest.c:" in l]
        f.check(r.returncode == 0 and len(rows) == 1 and rows[0][:4] == ["3.00", "MiB", "2", "0"],
                f"merge: rows {rows} in {r.stdout!r}")
        f.check(prog.finish() == 0, f"merge: exit {prog.lines} {prog.stderr[-500:]!r}")


def case_exit(f, a):
    with tempfile.TemporaryDirectory() as tmp:
        prog = Program(a, [a.guest, "3"], tmp)
        f.check(wait_listed(a, prog.pid), f"exit: not listed: {prog.lines}")
        master, slave = pty.openpty()
        top = subprocess.Popen([a.cuprof, "top", str(prog.pid)], stdin=slave, stdout=slave,
                               stderr=subprocess.PIPE, env=dict(os.environ, XDG_RUNTIME_DIR=a.xdg))
        os.close(slave)
        screen = bytearray()

        def drain():
            while True:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    return
                if not data:
                    return
                screen.extend(data)

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        f.check(prog.finish() == 0, f"exit: program {prog.lines} {prog.stderr[-500:]!r}")
        try:
            err = top.communicate(timeout=15)[1].decode(errors="replace")
        except subprocess.TimeoutExpired:
            top.kill()
            err = top.communicate()[1].decode(errors="replace") + " (still running after 15 s)"
        os.close(master)
        f.check(top.returncode == 0 and f"process {prog.pid} exited" in err,
                f"exit: top ended with {top.returncode}: {err!r}")
        f.check(b"cuprof top - pid" in screen, f"exit: top showed {bytes(screen[:200])!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["slow", "text", "peaks", "merge", "exit"])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--cuprof", required=True)
    ap.add_argument("--sleeper", required=True)
    ap.add_argument("--guest", required=True)
    a = ap.parse_args()
    f = shimrun.Checks()
    with shimrun.private_sockets("cuprof-guest-") as xdg:
        a.xdg = xdg
        globals()["case_" + a.case](f, a)
    f.finish()


if __name__ == "__main__":
    main()
