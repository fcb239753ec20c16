#!/usr/bin/env python3
"""Every example in the README and docs/ is real output of the program it describes.

A ```console block is an example: lines starting with `$ ` are commands (a line ending in `\\`
goes on), the lines after each are what it printed (stdout and stderr as a terminal shows them).
The blocks of one Markdown file run in order, in one scratch folder of that file's own, where
the demo programs (tests/apps) are at hand as ./train_loop, ./oom, ... and `cuprof` is on PATH;
the simulated CUDA device stands in for a GPU (LD_LIBRARY_PATH), so `cuprof run -- ./train_loop`
runs as written. A line `...` in the expected output stands for any number of lines (a cut).
Values that change from run to run (pids, addresses, dates, the host name, the scratch folder,
durations) are masked on both sides before comparing.

usage: docs_examples.py --build BUILD [--update] [FILE.md ...]
  default: check every Markdown file that has console blocks; exit 1 on any difference, with a
           diff per block and the command that no longer runs as written
  --update: write the fresh output into the files (blocks with `...` are left alone while they
            still match; a block that no longer matches is written whole, to be cut again)
"""
import argparse
import difflib
import fnmatch
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, os.pardir))
SHOWN_DIR = "/home/you/work"  # what the scratch folder is called in the docs
APPS = ["train_loop", "threads", "oom", "lib_users", "empty_cache", "driver_api", "static_style",
        "graphs", "nvtx_ranges", "nvtx_pool"]
BLOCK = re.compile(r"^```console\n(.*?)^```\n", re.M | re.S)


def markdown_files(given):
    if given:
        return [os.path.abspath(p) for p in given]
    files = [os.path.join(ROOT, "README.md")]
    for top, _dirs, names in os.walk(os.path.join(ROOT, "docs")):
        files += [os.path.join(top, n) for n in sorted(names) if n.endswith(".md")]
    return [f for f in sorted(files) if os.path.exists(f) and "```console" in open(f).read()]


def parse_block(text):
    """[(command, [expected lines])] of one console block."""
    steps = []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            if not steps:
                raise ValueError(f"output before the first command: {line!r}")
            steps[-1][1].append(line)
            i += 1
            continue
        cmd = line[2:]
        while cmd.endswith("\\") and i + 1 < len(lines):
            i += 1
            cmd = cmd + "\n" + lines[i]
        steps.append((cmd, []))
        i += 1
    return steps


def mask(line, scratch):
    line = line.replace(scratch, SHOWN_DIR).rstrip()
    line = line.replace(socket.gethostname(), "HOST")
    line = re.sub(r"0x[0-9a-f]{6,}", "0xADDR", line)
    line = re.sub(r"\b(pid|process|PID) \d+", r"\1 N", line)
    line = re.sub(r"(cuprof-|\bs-|-)\d{3,7}(-\d+\.(pickle|json))", r"\1N\2", line)
    line = re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d)?", "DATE", line)
    line = re.sub(r"\b\d\d:\d\d:\d\d\b", "HH:MM:SS", line)
    line = re.sub(r"^\d{2,7}(?= )", "N", line)  # a pid opening a row (`cuprof ps`)
    line = re.sub(r"(HOST\s+)\d+", r"\1N", line)  # the pid after the host (cross-rank rows)
    line = re.sub(r"stream \d{6,}", "stream N", line)  # a stream's handle
    line = re.sub(r"[\u2581-\u2588]+", "SPARKLINE", line)  # `top`'s samples, one a second
    line = re.sub(r"(?<=\S) {2,}", " ", line)  # columns move with the width of a masked value
    line = re.sub(r"\b\d+(\.\d+)? ?(ms|µs|us|ns|s)\b", "T", line)
    return line


def matches(expected, actual):
    """expected may hold `...` lines, each standing for any run of lines."""
    if "..." not in expected:
        return expected == actual
    pattern = [re.escape(line) if line != "..." else None for line in expected]
    memo = {}

    def go(i, j):
        if (i, j) in memo:
            return memo[(i, j)]
        if i == len(pattern):
            r = j == len(actual)
        elif pattern[i] is None:
            r = any(go(i + 1, k) for k in range(j, len(actual) + 1))
        else:
            r = j < len(actual) and actual[j] == expected[i] and go(i + 1, j + 1)
        memo[(i, j)] = r
        return r

    return go(0, 0)


def environment(build, scratch):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUPROF_", "SIMCUDA_", "LD_", "XDG_"))}
    env["PATH"] = os.path.join(build, "cli") + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    env["LD_LIBRARY_PATH"] = (os.path.join(build, "tests", "sim", "driver") + os.pathsep +
                              os.path.join(build, "tests", "sim", "runtime"))
    env["CUPROF_SOCKET_DIR"] = os.path.join(scratch, ".sockets")
    env["HOME"] = scratch
    env["TZ"] = "UTC"
    env["LC_ALL"] = "C.UTF-8"
    env["COLUMNS"] = "100"
    env["PYTHONPATH"] = os.path.join(ROOT, "python")  # `import cuprof`, as meson install puts it
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def prepare(build, scratch):
    os.makedirs(os.path.join(scratch, ".sockets"), mode=0o700)
    for app in APPS:
        src = os.path.join(build, "tests", "apps", app)
        if os.path.exists(src):
            shutil.copy(src, os.path.join(scratch, app))
    apps = os.path.join(build, "tests", "apps")
    for name in os.listdir(apps) if os.path.isdir(apps) else []:
        if name.endswith(".so"):  # lib_users' libraries, found next to it ($ORIGIN)
            shutil.copy(os.path.join(apps, name), os.path.join(scratch, name))
    examples = os.path.join(ROOT, "docs", "examples")  # the pages' own programs (Python)
    for name in sorted(os.listdir(examples)) if os.path.isdir(examples) else []:
        shutil.copy(os.path.join(examples, name), os.path.join(scratch, name))
    sleeper = os.path.join(build, "tests", "integration", "live", "live_sleeper")
    if os.path.exists(sleeper):
        shutil.copy(sleeper, os.path.join(scratch, "live_sleeper"))


def run_step(cmd, env, scratch):
    p = subprocess.run(["bash", "-c", cmd], cwd=scratch, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, errors="replace", timeout=300)
    out = p.stdout.split("\n")
    if out and out[-1] == "":
        out.pop()
    return p.returncode, out


def wait_for_leftovers(scratch, timeout=60):
    """Waits until no process works in scratch: an example may leave a program running in the
    background (`cuprof run ... &`) that writes its exit snapshot there after the last step."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = False
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            if cwd == scratch or cwd.startswith(scratch + "/"):
                busy = True
                break
        if not busy:
            return
        time.sleep(0.1)


def check_file(path, build, update):
    text = open(path).read()
    rel = os.path.relpath(path, ROOT)
    problems = []
    pieces = []
    pos = 0
    with tempfile.TemporaryDirectory(prefix="cuprof-docs-") as scratch:
        scratch = os.path.realpath(scratch)
        prepare(build, scratch)
        env = environment(build, scratch)
        for m in BLOCK.finditer(text):
            pieces.append(text[pos:m.start(1)])
            line_no = text.count("\n", 0, m.start(1)) + 1
            steps = parse_block(m.group(1))
            new_block = []
            for cmd, expected in steps:
                rc, fresh = run_step(cmd, env, scratch)
                shown = [mask(l, scratch) for l in fresh]
                if rc not in (0, 1):
                    problems.append(f"{rel}:{line_no}: `{cmd}` exited {rc}:\n  " +
                                    "\n  ".join(fresh[-10:]))
                want = [mask(l, scratch) for l in expected]
                ok = matches(want, shown)
                if not ok and not update:
                    diff = difflib.unified_diff(want, shown, "documented", "now", lineterm="", n=1)
                    problems.append(f"{rel}:{line_no}: `{cmd}` prints something else:\n  " +
                                    "\n  ".join(list(diff)[:40]))
                keep = ok and "..." in expected
                new_block.append("$ " + cmd)
                new_block += expected if keep else [l.replace(scratch, SHOWN_DIR).rstrip()
                                                    for l in fresh]
            pieces.append("\n".join(new_block) + "\n")
            pos = m.end(1)
        wait_for_leftovers(scratch)
    pieces.append(text[pos:])
    if update:
        new_text = "".join(pieces)
        if new_text != text:
            with open(path, "w") as fh:
                fh.write(new_text)
            print(f"updated {rel}")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--update", action="store_true")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    problems = []
    files = markdown_files(a.files)
    for path in files:
        problems += check_file(path, build, a.update)
    for p in problems:
        print("FAIL:", p)
    if not problems:
        print(f"ok: {len(files)} files")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
