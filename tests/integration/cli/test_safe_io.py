#!/usr/bin/env python3
"""Issue 26, the command's part: cuprof is never the reason a file is lost or a program
misbehaves. One group per item:

  outfile   every file a command writes is a temporary file renamed over it when whole: a device
            node given as -o survives as a device node, a report survives byte-identical when an
            input is unreadable or the disk fills, nothing is truncated; each failure is one line
            `cuprof: FILE: REASON`, output lost on standard output included
  readers   the first bytes are looked at before more is read: /dev/zero, a FIFO fed zeros, a
            20 GiB sparse file and zeros on standard input are refused at once with one line and
            a small peak RSS; `-` reads a snapshot from standard input
  json      every --json and JSON file the commands write is valid UTF-8, also for a file name
            that is not (its undecodable bytes as \\xHH)
  terminal  no control character from a snapshot (ESC]0;..BEL retitles a terminal, ESC[2J clears
            it) reaches any command's text output; the escaped text is shown
  runopts   `cuprof run` checks its options (and the CUPROF_* variables set) before PROG runs,
            naming the option
  devices   replay --check prints no empty heading; summary and diff print only the devices a
            file holds; flamegraph's --device and --at, and stats' and replay's --device, name
            what the file holds
  preload   `cuprof run` with another libcuprof.so in LD_PRELOAD drops it (one line): PROG gets
            exactly one copy and runs

Usage: test_safe_io.py CUPROF LIBCUPROF TRAIN_LOOP WORKDIR GROUP
"""
import json
import os
import pickle
import resource
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_data  # noqa: E402
import snapshots as S  # noqa: E402

CUPROF = LIB = TRAIN = WORK = None
SANITIZED = bool(os.environ.get("SANITIZER_BUILD"))
RSS_BOUND_KB = (512 if SANITIZED else 64) << 10
ESC_TITLE = "\x1b]0;owned\x07"
ESC_CLEAR = "\x1b[2J"


def fail(msg):
    raise AssertionError(msg)


def check(cond, msg):
    if not cond:
        fail(msg)


def run(*args, stdin=None, stdout=subprocess.PIPE, env=None, preexec=None, timeout=120):
    p = subprocess.run([CUPROF, *args], stdin=stdin, stdout=stdout, stderr=subprocess.PIPE,
                       env=env, preexec_fn=preexec, timeout=timeout, cwd=WORK)
    err = p.stderr.decode("utf-8", "replace")
    if "Sanitizer" in err or "runtime error" in err:
        fail("sanitizer report:\n" + err)
    return p.returncode, p.stdout if stdout == subprocess.PIPE else b"", err


def one_line(err, *words):
    """stderr is exactly one `cuprof: ` line holding every word."""
    lines = err.splitlines()
    check(len(lines) == 1 and lines[0].startswith("cuprof: "), "want one line, got %r" % err)
    for w in words:
        check(w in lines[0], "%r not in %r" % (w, lines[0]))
    return lines[0]


def write_snapshot(name, snap, proto=4):
    path = os.path.join(WORK, name)
    with open(path, "wb") as f:
        pickle.dump(snap, f, protocol=proto)
    return path


def good():
    return write_snapshot("good.pickle", S.pytorch_snapshot())


# ---------------------------------------------------------------- outfile (item 4)
def full_device():
    """A /dev/full of our own (char 1,7) as root; the real one otherwise (a user cannot unlink
    it, so no test can harm it)."""
    if os.geteuid() != 0:
        return "/dev/full"
    path = os.path.join(WORK, "full")
    if os.path.lexists(path):
        os.unlink(path)
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    return path


def is_full_device(path):
    st = os.lstat(path)
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 7)


def no_temporaries(folder):
    left = [n for n in os.listdir(folder) if n.startswith(".")]
    check(not left, "temporary files left in %s: %s" % (folder, left))


def fsize_limit(n):
    """preexec: writes past n bytes fail with EFBIG (SIGXFSZ ignored)."""
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
    return apply


def outfile():
    snap = good()
    full = full_device()
    # -o a device: written in place, never unlinked; its failure is one line with the reason.
    for args in (["plot", "-o", full, snap], ["timeline", "-o", full, snap]):
        rc, _, err = run(*args)
        check(rc == 2, "%s: exit %d" % (args, rc))
        one_line(err, full, "write failed", os.strerror(28))
        check(is_full_device(full), "%s: the device node is gone" % args)
    # Standard output on the device: the lost output is said, exit 2.
    for args in (["flamegraph", snap], ["summary", snap], ["leaks", "--json", snap],
                 ["timeline", "-o", "-", snap], ["stats", snap]):
        with open(full, "wb") as dev:
            rc, _, err = run(*args, stdout=dev)
        check(rc == 2, "%s > full: exit %d" % (args, rc))
        one_line(err, "standard output", "write failed", os.strerror(28))
    folder = os.path.join(WORK, "reports")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    report = os.path.join(folder, "report.html")
    before = b"an existing report\n" * 100
    with open(report, "wb") as f:
        f.write(before)
    os.chmod(report, 0o640)
    missing = os.path.join(WORK, "no-such.pickle")
    garbage = os.path.join(WORK, "garbage.pickle")
    with open(garbage, "wb") as f:
        f.write(b"\x80\x04garbage")
    # A later input that cannot be read: the existing file is left as it was.
    for args, bad in ((["plot", "-o", report, snap, missing], missing),
                      (["plot", "-o", report, snap, garbage], garbage),
                      (["timeline", "-o", report, garbage], garbage),
                      (["timeline", "-o", report, snap, missing], missing)):
        rc, _, err = run(*args)
        check(rc == 2, "%s: exit %d" % (args, rc))
        one_line(err, bad)
        with open(report, "rb") as f:
            check(f.read() == before, "%s: the existing file changed" % args)
    # The disk fills (RLIMIT_FSIZE) while writing: the existing file is untouched.
    for cmd in ("plot", "timeline"):
        rc, _, err = run(cmd, "-o", report, snap, preexec=fsize_limit(1024))
        check(rc == 2, "%s past the size limit: exit %d" % (cmd, rc))
        one_line(err, report, "write failed", os.strerror(27))
        with open(report, "rb") as f:
            check(f.read() == before, "%s: a failed write changed the file" % cmd)
        no_temporaries(folder)
    # /dev/stdout is the descriptor: a `>> log` is appended to, never truncated or replaced.
    log = os.path.join(folder, "run.log")
    with open(log, "wb") as f:
        f.write(b"earlier lines\n")
    with open(log, "ab") as f:
        rc, _, err = run("timeline", "-o", "/dev/stdout", snap, stdout=f)
    check(rc == 0, err)
    with open(log, "rb") as f:
        data = f.read()
    check(data.startswith(b"earlier lines\n"), "-o /dev/stdout >> log: %r" % data[:40])
    check("traceEvents" in json.loads(data[len(b"earlier lines\n"):]), "the trace was appended")
    # A directory is refused.
    rc, _, err = run("timeline", "-o", folder, snap)
    check(rc == 2, "-o a directory: exit %d" % rc)
    one_line(err, folder, "is a directory")
    # Success replaces the file, keeping its mode; through a link, the target is replaced.
    rc, _, err = run("plot", "-o", report, snap)
    check(rc == 0, err)
    with open(report, "rb") as f:
        check(f.read().startswith(b"<!DOCTYPE html>"), "the report was not replaced")
    check(stat.S_IMODE(os.stat(report).st_mode) == 0o640, "the mode was not kept")
    link = os.path.join(folder, "link.json")
    os.symlink("report.html", link)
    rc, _, err = run("timeline", "-o", link, snap)
    check(rc == 0, err)
    check(os.path.islink(link), "the link was replaced")
    with open(report) as f:
        check("traceEvents" in json.load(f), "the link's target was not written")
    fresh = os.path.join(folder, "new.json")
    old_mask = os.umask(0o027)
    try:
        rc, _, err = run("timeline", "-o", fresh, snap)
    finally:
        os.umask(old_mask)
    check(rc == 0 and stat.S_IMODE(os.stat(fresh).st_mode) == 0o640, "new file mode")
    # A name near NAME_MAX still gets its temporary beside it.
    long_name = os.path.join(folder, "r" * 250 + ".html")
    rc, _, err = run("plot", "-o", long_name, snap)
    check(rc == 0 and os.path.getsize(long_name) > 0, "a 255-byte name: %s" % err)
    no_temporaries(folder)


# ---------------------------------------------------------------- readers (item 11)
def watched(args, stdin=None, feeder=None):
    """Runs cuprof ARGS; returns (rc, stderr, seconds, peak RSS in KiB) of that child alone.
    Without sanitizers its address space is capped at 1 GiB, so a reader that slurps fails
    fast instead of taking the machine's memory."""
    err_path = os.path.join(WORK, "watched.err")
    cap = None if SANITIZED else 1 << 30

    def limit():
        if cap:
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    with open(err_path, "wb") as err_f:
        start = time.monotonic()
        p = subprocess.Popen([CUPROF, *args], stdin=stdin, stdout=subprocess.DEVNULL,
                             stderr=err_f, preexec_fn=limit, cwd=WORK)
        killer = threading.Timer(60, p.kill)
        killer.start()
        _, status, usage = os.wait4(p.pid, 0)
        killer.cancel()
        seconds = time.monotonic() - start
    p.returncode = os.waitstatus_to_exitcode(status)
    if feeder is not None:
        feeder.kill()
        feeder.wait()
    with open(err_path, "rb") as f:
        err = f.read().decode("utf-8", "replace")
    return p.returncode, err, seconds, usage.ru_maxrss


def refused_at_once(label, args, name, stdin=None, feeder=None):
    rc, err, seconds, rss = watched(args, stdin, feeder)
    check(rc == 2, "%s: exit %d, %s" % (label, rc, err[-300:]))
    one_line(err, name)
    check(rss < RSS_BOUND_KB, "%s: peak RSS %d KiB" % (label, rss))
    check(seconds < 30, "%s: took %.1f s" % (label, seconds))
    print("%s: refused in %.2f s, peak RSS %d KiB: %s" % (label, seconds, rss, err.strip()))


def zeros_into(fifo):
    return subprocess.Popen(["sh", "-c", 'exec cat /dev/zero > "$1"', "sh", fifo],
                            stderr=subprocess.DEVNULL)


def readers():
    refused_at_once("/dev/zero", ["summary", "/dev/zero"], "/dev/zero")
    fifo = os.path.join(WORK, "zeros.fifo")
    if os.path.lexists(fifo):
        os.unlink(fifo)
    os.mkfifo(fifo)
    refused_at_once("a FIFO fed zeros", ["summary", fifo], fifo, feeder=zeros_into(fifo))
    sparse = os.path.join(WORK, "sparse.pickle")
    with open(sparse, "wb") as f:
        f.truncate(20 << 30)
    try:
        refused_at_once("a 20 GiB sparse file", ["summary", sparse], sparse)
    finally:
        os.unlink(sparse)
    # Standard input: a stream is looked at as it comes.
    for label, head in (("zeros", b""), ("a pickle header then zeros", b"\x80\x04"),
                        ("a JSON brace then zeros", b"{")):
        feeder = subprocess.Popen(["sh", "-c", "printf \"$1\"; exec cat /dev/zero", "sh",
                                   "".join("\\%03o" % c for c in head)], stdout=subprocess.PIPE)
        refused_at_once("standard input: " + label, ["summary", "-"], "standard input",
                        stdin=feeder.stdout, feeder=feeder)
        feeder.stdout.close()
    # `-` reads a snapshot from a pipe or a file, pickle or JSON, as the file itself reads.
    path = good()
    rc, want, err = run("stats", path)
    check(rc == 0, err)
    jpath = os.path.join(WORK, "good.json")
    with open(jpath, "w") as f:
        json.dump(S.pytorch_snapshot(), f)
    for src in (path, jpath):
        with open(src, "rb") as f:
            data = f.read()
        p = subprocess.run([CUPROF, "stats", "-"], input=data, capture_output=True, timeout=60)
        check(p.returncode == 0 and p.stdout == want, "stats - < pipe of %s: %r" % (src, p.stderr))
        with open(src, "rb") as f:
            rc, out, err = run("stats", "-", stdin=f)
        check(rc == 0 and out == want, "stats - < %s: %s" % (src, err))


# ---------------------------------------------------------------- json (item 12)
def odd_snapshot(name, host, label):
    snap = S.pytorch_snapshot()
    odd = S.frame(name, name + ".py", 7)
    for seg in snap["segments"]:
        for b in seg["blocks"]:
            if b["frames"]:
                b["frames"] = [odd] + b["frames"]
    trace = snap["device_traces"][0]
    for e in trace:
        if e["frames"]:
            e["frames"] = [odd] + e["frames"]
    trace.append({"action": "annotate", "addr": 0, "size": 0, "stream": 0,
                  "time_us": trace[-1]["time_us"] + 1, "frames": [], "user_metadata": label})
    snap["cuprof"] = {"version": "0.1.0", "mode": "cache", "host": host, "pid": 42, "rank": 3,
                      "argv": ["./train", host, label]}
    snap["allocator_settings"]["PYTORCH_CUDA_ALLOC_CONF"] = label
    return snap


def strict_utf8(what, data):
    try:
        return data.decode("utf-8")     # strict: an undecodable byte raises
    except UnicodeDecodeError as e:
        fail("%s: not UTF-8: %s" % (what, e))


def json_outputs():
    """The snapshot's own strings reach the commands as valid UTF-8 (the readers' interning
    writes an undecodable byte as \\xHH, text_escape's rule), so what can still bring other
    bytes is the command line: a file name that is not UTF-8. Both are written as valid UTF-8,
    the same way."""
    snap = odd_snapshot("forward\udcff", "host\udcfe", "label\udcfd")  # surrogatepass bytes
    name = b"notutf8-\xff\xfe.pickle"
    path = os.path.join(os.fsencode(WORK), name)
    with open(path, "wb") as f:
        pickle.dump(dict(snap, cuprof=dict(snap["cuprof"], rank=-1)), f, protocol=4)
    shown = "notutf8-\\xff\\xfe.pickle"
    other = good()
    outs = {}
    for args in (["leaks", "--json", path], ["diff", "--json", other, path],
                 ["timeline", path], ["summary", path]):
        rc, out, err = run(*args)
        check(rc in (0, 1), "%s: exit %d %s" % (args[0], rc, err))
        outs[args[0]] = strict_utf8(args[0], out)
    html = os.path.join(WORK, "notutf8.html")
    rc, _, err = run("plot", "-o", html, path)
    check(rc == 0, err)
    with open(html, "rb") as f:
        outs["plot"] = strict_utf8("plot", f.read())
    leaks = json.loads(outs["leaks"])
    check(leaks["file"].endswith(shown), "leaks --json file: %r" % leaks["file"])
    names = [f["name"] for s in leaks["sites"] for f in s["frames"]]
    check(any(n.startswith("forward\\xed\\xb3\\xbf") for n in names),
          "leaks --json names: %s" % names[:4])
    events = json.loads(outs["timeline"])["traceEvents"]
    check(any(e.get("args", {}).get("name", "").endswith(shown) for e in events),
          "timeline's process name")
    check(any(e["name"].startswith("label\\xed\\xb3\\xbd") for e in events),
          "timeline's annotation")
    data = report_data.read(html).data
    check(data["file"].endswith(shown), "plot's file: %r" % data["file"])
    check(data["runs"][0]["file"].endswith(shown), "plot's run: %r" % data["runs"][0]["file"])
    check(shown in outs["summary"], "summary's file name")


# ---------------------------------------------------------------- terminal (item 14)
def terminal():
    name = "step" + ESC_TITLE + "x" + ESC_CLEAR
    snap = odd_snapshot(name, "node" + ESC_TITLE, "lbl" + ESC_CLEAR)
    path = write_snapshot("esc" + ESC_CLEAR + ".pickle", snap)
    other = write_snapshot("esc-b.pickle", snap)
    commands = [["summary", path], ["summary", path, other], ["leaks", path], ["diff", other, path],
                ["flamegraph", path], ["flamegraph", "--all-frames", path],
                ["replay", "--check", path], ["stats", path], ["summary", "--top", ESC_TITLE],
                ["flamegraph", "--device", "7", path]]
    shown = ""
    for args in commands:
        rc, out, err = run(*args)
        text = out.decode("utf-8", "replace") + err
        bad = sorted({c for c in text if (ord(c) < 0x20 and c not in "\n\t") or
                      0x7f <= ord(c) < 0xa0})
        check(not bad, "%s: control characters %r in %r" % (args[0], bad, text[:400]))
        shown += text
    for want in ("\\x1b]0;owned\\x07", "\\x1b[2J", "node\\x1b]0;owned\\x07",
                 "lbl\\x1b[2J", "step\\x1b]0;owned\\x07x\\x1b[2J (step"):
        check(want in shown, "%r is not shown escaped" % want)


# ---------------------------------------------------------------- runopts, devices (item 15)
def run_options():
    marker = os.path.join(WORK, "ran.marker")
    env = dict(os.environ)
    for k in [k for k in env if k.startswith("CUPROF_")]:
        del env[k]
    cases = [(["-o", "out.txt"], {}, ["run: -o: ", '"out.txt"', ".pickle, .pkl or .json"]),
             (["-o", "x%.pickle"], {}, ["run: -o: ", '"x%.pickle"']),
             (["--mode", "fast"], {}, ["run: --mode: ", '"fast"', "cache, trace, off"]),
             (["--depth", "0"], {}, ["run: --depth: ", '"0"']),
             (["--history", "most"], {}, ["run: --history: "]),
             (["--stacks", "some"], {}, ["run: --stacks: "]),
             (["--alloc-conf", "max_split_size_mb:x"], {}, ["run: --alloc-conf: "]),
             ([], {"CUPROF_MODE": "fast"}, ["CUPROF_MODE", '"fast"']),
             ([], {"CUPROF_SNAPSHOT": "out.txt"}, ["CUPROF_SNAPSHOT"])]
    for opts, extra, words in cases:
        if os.path.exists(marker):
            os.unlink(marker)
        rc, _, err = run("run", "--sim", *opts, "--", "touch", marker,
                         env=dict(env, **extra))
        check(rc == 2, "run %s %s: exit %d" % (opts, extra, rc))
        one_line(err, *words)
        check(not os.path.exists(marker), "run %s %s: the program ran" % (opts, extra))


def devices():
    # replay --check: no heading without a difference under it (here the replay fails).
    broken = write_snapshot("replay-fails.pickle", {"segments": [], "device_traces": [[
        {"action": "segment_alloc", "addr": (1 << 64) - 1, "size": 2 << 20, "stream": 0,
         "frames": []},
        {"action": "alloc", "addr": 2 << 20, "size": 1, "stream": 1, "frames": []}]]})
    rc, out, err = run("replay", "--check", broken)
    check(rc == 2 and b"differences" not in out, "replay --check: %r %r" % (out, err))
    one_line(err)
    # One segment on device 4095: one device section, not 4096.
    snap = S.pytorch_snapshot()
    seg = dict(snap["segments"][0], device=4095)
    far = write_snapshot("device4095.pickle", {"segments": [seg], "device_traces": [],
                                               "allocator_settings": S.allocator_settings()})
    rc, out, err = run("summary", far)
    check(rc == 0, err)
    check(out.count(b"-- device ") == 1 and b"-- device 4095" in out and len(out) < 64 << 10,
          "summary of device 4095: %d bytes, %d sections" % (len(out), out.count(b"-- device ")))
    rc, out, err = run("diff", far, far)
    check(rc == 0 and len(out) < 16 << 10, "diff of device 4095: %d bytes" % len(out))
    one = good()
    for args, words in ((["flamegraph", "--device", "4096", far], ["no device 4096", "4095"]),
                        (["flamegraph", "--device", "5", one], ["no device 5", "device 0"]),
                        (["flamegraph", "--at", str((1 << 64) - 1), one],
                         ["--at 18446744073709551615", "entries 0 to 11"]),
                        (["flamegraph", "--at", "12", one], ["entries 0 to 11"]),
                        (["stats", "--device", "3", far], ["no device 3", "4095"]),
                        (["replay", "--device", "2", one], ["no trace for device 2"])):
        rc, out, err = run(*args)
        check(rc == 2 and out == b"", "%s: exit %d, %r" % (args, rc, out[:100]))
        one_line(err, *words)
    rc, out, err = run("flamegraph", "--at", "11", one)
    check(rc == 0 and out, "the last entry is in range: %s" % err)


# ---------------------------------------------------------------- preload (item 5)
def sanitizer_preload():
    """Under the ASan setup the sanitizer runtimes come first in LD_PRELOAD (as test_run.py)."""
    if not SANITIZED:
        return []
    libs = []
    for name in ("libasan.so", "libubsan.so"):
        out = subprocess.run(["cc", "-print-file-name=" + name], capture_output=True, text=True)
        if os.path.isabs(out.stdout.strip()):
            libs.append(os.path.realpath(out.stdout.strip()))
    return libs


def preload():
    copy_dir = os.path.join(WORK, "installed")
    os.makedirs(copy_dir, exist_ok=True)
    copy = os.path.join(copy_dir, "libcuprof.so")
    shutil.copyfile(LIB, copy)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUPROF_")}
    env["LD_PRELOAD"] = ":".join(sanitizer_preload() + [copy])
    env["ASAN_OPTIONS"] = "detect_leaks=0"
    rc, out, err = run("run", "--sim", "-q", "--", "/usr/bin/env", env=env)
    check(rc == 0, err)
    got = dict(line.split("=", 1) for line in out.decode().splitlines() if "=" in line)
    libs = [p for p in got["LD_PRELOAD"].split(":") if os.path.basename(p) == "libcuprof.so"]
    check(libs == [os.path.realpath(LIB)], "PROG's LD_PRELOAD: %s" % got["LD_PRELOAD"])
    one_line("\n".join(line for line in err.splitlines() if "LD_PRELOAD" in line), copy,
             "dropped")
    # A CUDA program runs (two copies crash it) and writes its snapshot.
    snap = os.path.join(WORK, "twice-%p.pickle")
    rc, out, err = run("run", "--sim", "-q", "-o", snap, "--", TRAIN, env=env)
    check(rc == 0, "train_loop under two copies: exit %d %s" % (rc, err[-500:]))
    check(b"train_loop: steps=" in out, out)
    check("snapshot written to " + os.path.join(WORK, "twice-") in err, err)


GROUPS = {"outfile": outfile, "readers": readers, "json": json_outputs, "terminal": terminal,
          "runopts": run_options, "devices": devices, "preload": preload}


def main():
    global CUPROF, LIB, TRAIN, WORK
    CUPROF, LIB, TRAIN, WORK = (os.path.abspath(a) for a in sys.argv[1:5])
    os.makedirs(WORK, exist_ok=True)
    GROUPS[sys.argv[5]]()
    print("ok")


if __name__ == "__main__":
    main()
