#!/usr/bin/env python3
"""The double-free report tells the truth (issue 12, section 4). double_free_app frees a
cudaMalloc'd pointer twice through cudaFree and a cuMemAlloc'd one twice through cuMemFree. Under
libcuprof.so (modes cache and trace, CUPROF_STACKS all, alloc and none) each second free gives one
`cuprof: double free` line whose "freed at" starts at the program's function and source line of
that second free, and whose "allocated at" starts at the allocating line (not recorded under
CUPROF_STACKS=none); "first freed at" names the first free's line only where CUPROF_STACKS=all
recorded it. No frame of libcuprof, libcudart or libcuda comes first. The program still gets the
driver's error (CUDA_ERROR_INVALID_VALUE / cudaErrorInvalidValue) and prints exactly what it
prints without cuprof.

usage: test_double_free.py APP SOURCE LIBCUPROF LD_LIBRARY_PATH
"""
import os
import re
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402

FRAME = re.compile(r"^(?P<name>\S+) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def marks(source):
    """MARK name -> line number, from the program's source."""
    found = {}
    with open(source) as f:
        for number, text in enumerate(f, 1):
            m = re.search(r"/\* MARK: (\S+) \*/", text)
            if m:
                found[m.group(1)] = number
    return found


def stacks(line):
    """The three stacks of one report line: {"freed at": [...frames...], ...}."""
    m = re.match(r"^cuprof: double free of device pointer 0x[0-9a-f]+ \(device 0\): "
                 r"freed at (?P<again>.*); allocated at (?P<alloc>.*); "
                 r"first freed at (?P<first>.*)$", line)
    if m is None:
        return None
    return {k: m.group(k).split(" < ") for k in ("again", "alloc", "first")}


def first_frame(f, label, frames, func, line, source):
    """frames[0] is func at source:line, and is not a CUDA or cuprof frame."""
    m = FRAME.match(frames[0]) if frames else None
    if not f.check(m is not None, f"{label}: no frame to read in {frames[:2]}"):
        return
    f.check(not re.search(r"libcuprof|libcuda", frames[0]),
            f"{label}: a CUDA or cuprof frame comes first: {frames[0]}")
    f.check(m.group("name") == func, f"{label}: first frame {frames[0]}, want function {func}")
    f.check(os.path.basename(m.group("file")) == os.path.basename(source)
            and m.group("line") == str(line),
            f"{label}: first frame {frames[0]}, want {os.path.basename(source)}:{line}")


def main():
    app, source, lib, ld_path = sys.argv[1:5]
    f = shimrun.Checks()
    at = marks(source)
    base = shimrun.run_shim([app], ld_path)
    f.check(base.returncode == 0, f"without cuprof: {base}")
    # The device's own answer: CUDA_ERROR_INVALID_VALUE and cudaErrorInvalidValue are both 1.
    f.check("runtime: first=0 again=1" in base.stdout and "driver: first=0 again=1" in base.stdout,
            f"the simulated device's double-free errors changed: {base.stdout!r}")
    cases = (("runtime_double_free", "rt"), ("driver_double_free", "drv"))
    for mode in ("cache", "trace"):
        for stacks_setting in ("all", "alloc", "none"):
            label = f"{mode}/{stacks_setting}"
            with tempfile.TemporaryDirectory() as tmp:
                env = {"CUPROF_MODE": mode, "CUPROF_STACKS": stacks_setting,
                       "CUPROF_SNAPSHOT": os.path.join(tmp, "s-%n.pickle")}
                shim = shimrun.run_shim([app], ld_path, preload=lib, extra_env=env)
            f.check(shim.returncode == base.returncode and shim.stdout == base.stdout,
                    f"{label}: output changed: {shim.stdout!r} vs {base.stdout!r}")
            lines = [l for l in shim.stderr.splitlines() if l.startswith("cuprof: double free")]
            unwinder = [l for l in shim.stderr.splitlines() if l.startswith("cuprof: stacks by ")]
            f.check(len(unwinder) == (stacks_setting != "none"),
                    f"{label}: the line naming the unwinder: {unwinder}")
            others = [l for l in shim.stderr.splitlines()
                      if l.startswith("cuprof:") and l not in lines and l not in unwinder
                      and not l.startswith("cuprof: snapshot written to ")]
            f.check(not others, f"{label}: other cuprof lines: {others}")
            if not f.check(len(lines) == 2, f"{label}: want 2 double-free lines, got {lines}"):
                continue
            for line, (func, tag) in zip(lines, cases):
                parsed = stacks(line)
                if not f.check(parsed is not None, f"{label}: unreadable line {line!r}"):
                    continue
                first_frame(f, f"{label} {tag} freed at", parsed["again"], func,
                            at[tag + "-free-again"], source)
                if stacks_setting == "none":
                    f.check(parsed["alloc"] == ["(stack not recorded: CUPROF_STACKS=none)"],
                            f"{label} {tag}: allocated at {parsed['alloc']}")
                else:
                    first_frame(f, f"{label} {tag} allocated at", parsed["alloc"], func,
                                at[tag + "-alloc"], source)
                if stacks_setting == "all":
                    first_frame(f, f"{label} {tag} first freed at", parsed["first"], func,
                                at[tag + "-free-first"], source)
                else:
                    f.check(parsed["first"][0].startswith("(stack not recorded"),
                            f"{label} {tag}: first freed at {parsed['first']}")
    f.finish()


if __name__ == "__main__":
    main()
