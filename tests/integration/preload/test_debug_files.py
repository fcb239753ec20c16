"""Separate debug files, found where GDB finds them and nowhere else, and a dump that leaves
nothing behind in the program (libdw's lookups in snapshot/symbolize.c).

debug_files_app.c is built with -g, its debug information moved to a separate file with
objcopy --only-keep-debug and named by a .gnu_debuglink; under `cuprof run` it allocates from
make_buffer, dumps on SIGUSR1 and reports the descriptors that dump left open without FD_CLOEXEC
and whether libdebuginfod or libcurl got loaded (libdw's debuginfod lookup would load both and
could download debug files mid-dump). Cases:
  beside   the debug file beside the program: make_buffer's frame has the file and line;
  subdir   the same in .debug/ beside it;
  foreign  a debug file of another build (another build ID) beside it: not used (line 0);
and in every case no descriptor is inherited and neither library is mapped.

Usage: test_debug_files.py --cuprof CUPROF --ld-path SIM_PATH --cc CC --objcopy OBJCOPY
"""
import argparse
import os
import pickle
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "debug_files_app.c")


def call_line():
    with open(SOURCE) as f:
        for number, text in enumerate(f, 1):
            if "the call site the test looks for" in text:
                return number
    raise SystemExit("debug_files_app.c: no call site marker")


def build(a, out, runtime_dir, extra=()):
    subprocess.run([a.cc, "-g", "-O1", "-fno-omit-frame-pointer", *extra, SOURCE, "-o", out,
                    "-L" + runtime_dir, "-l:libcudart.so.13"], check=True)


def split(a, program, debug_path):
    """The debug information to debug_path, a debuglink to its name, the program stripped of it."""
    subprocess.run([a.objcopy, "--only-keep-debug", program, debug_path], check=True)
    subprocess.run([a.objcopy, "--strip-debug", program], check=True)
    subprocess.run([a.objcopy, "--add-gnu-debuglink=" + debug_path, program], check=True,
                   cwd=os.path.dirname(debug_path))


def make_buffer_frames(snapshot):
    with open(snapshot, "rb") as f:
        snap = pickle.load(f)
    return [(fr["filename"], fr["line"]) for trace in snap["device_traces"] for entry in trace
            for fr in entry.get("frames", []) if fr["name"] == "make_buffer"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuprof", required=True)
    ap.add_argument("--ld-path", required=True)
    ap.add_argument("--cc", required=True)
    ap.add_argument("--objcopy", required=True)
    a = ap.parse_args()
    check = shimrun.Checks()
    runtime_dir = [d for d in a.ld_path.split(":") if os.path.exists(
        os.path.join(d, "libcudart.so.13"))][0]
    line = call_line()
    for case in ("beside", "subdir", "foreign"):
        with tempfile.TemporaryDirectory(prefix="cuprof-debug-files-") as tmp:
            program = os.path.join(tmp, "debug_files_app")
            build(a, program, runtime_dir)
            debug_dir = os.path.join(tmp, ".debug") if case == "subdir" else tmp
            os.makedirs(debug_dir, exist_ok=True)
            debug_file = os.path.join(debug_dir, "debug_files_app.debug")
            if case == "foreign":
                # Another build's debug information under the name the debuglink gives.
                other = os.path.join(tmp, "other")
                build(a, other, runtime_dir, ["-DOTHER_BUILD=1"])
                split(a, program, debug_file)
                subprocess.run([a.objcopy, "--only-keep-debug", other, debug_file], check=True)
            else:
                split(a, program, debug_file)
            snapshot = os.path.join(tmp, "mid.pickle")
            env = shimrun.env(a.ld_path, CUPROF_LOG="quiet", CUPROF_DUMP_ON="signal")
            r = shimrun.run([a.cuprof, "run", "-q", "-o", snapshot, "--", program, snapshot], env,
                            timeout=120, cwd=tmp)
            check.check(r.returncode == 0 and "inherited=0" in r.stdout,
                        f"{case}: a descriptor the dump left to children, or the run failed: "
                        f"{r.returncode} {r.stdout} {r.stderr[-1500:]}")
            check.check("mapped" not in r.stdout,
                        f"{case}: the dump loaded libdebuginfod or libcurl:\n{r.stdout}")
            if not os.path.exists(snapshot):
                check.check(False, f"{case}: no snapshot")
                continue
            frames = make_buffer_frames(snapshot)
            want = ("debug_files_app.c", line) if case != "foreign" else None
            got = [(os.path.basename(f), n) for f, n in frames]
            if want is not None:
                check.check(got and all(g == want for g in got),
                            f"{case}: make_buffer's frames {got}, want {want}")
            else:
                check.check(got and all(n == 0 for _, n in got),
                            f"{case}: a foreign build's debug file was used: {got}")
    check.finish()


if __name__ == "__main__":
    main()
