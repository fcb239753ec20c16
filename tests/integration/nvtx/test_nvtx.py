#!/usr/bin/env python3
"""NVTX ranges as the timeline's phases (issue 29, part 1): programs built with the toolkit's
nvtx3 headers (tests/apps/nvtx_ranges.c, nvtx_ranges_cpp.cpp) run alone and under cuprof, and the
snapshot holds exactly the annotations their NVTX calls make, in PyTorch's external_annotations
layout too; the cuprof command shows them as phases (summary, plot's data, timeline).

Usage: test_nvtx.py GROUP --lib LIBCUPROF --ld-path SIM_PATH --work DIR [--app P] [--cpp P]
       [--plain P] [--cuprof P]
GROUP: ranges, devices, cpp, alone, cli
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "cli"))
import report_data  # noqa: E402

check = shimrun.Checks()
MIB = 1 << 20

# What nvtx_ranges.c marks, in order: (text, stage); None is a mark. The four "parallel"
# threads run at once: their part is checked as a multiset between the two marks around it.
EXPECTED_C = ([("train", "START"), ("loaded", None), ("forward", "START"), ("forward", "END"),
               ("backward \u2202", "START"), ("backward \u2202", "END"),
               ("mylib:kernel", "START"), ("mylib:launched", None), ("mylib:kernel", "END"),
               ("io", "START"), ("io", "END")]
              + [x for k in range(3) for x in [(f"worker {k}", "START"), ("step", "START"),
                                               ("step", "END"), (f"worker {k}", "END")]]
              + [("parallel begins", None)] + [("parallel", "START"), ("parallel", "END")] * 4
              + [("parallel ends", None), ("train", "END"), ("teardown", "START")])
LEVELS_C = {"push_train": 0, "push_forward": 1, "pop_forward": 1, "domain_push": 0,
            "domain_pop": 0, "domain_pop_empty": -1, "pop_train": 0, "pop_empty": -1}
EXPECTED_CPP = [("epoch", "START"), ("forward", "START"), ("forward", "END"),
                ("cxxlib:op", "START"), ("cxxlib:op", "END"), ("checkpoint", None),
                ("epoch", "END"), ("loader", "START"), ("loader", "END"), ("io", "START"),
                ("io", "END"), ("teardown", "START")]


def under(args, tmp, app_args=(), extra=None):
    """The program under libcuprof.so as NVTX's tool; returns (result, snapshot dict)."""
    snap = os.path.join(tmp, "s.pickle")
    env = {"NVTX_INJECTION64_PATH": args.lib, "CUPROF_SNAPSHOT": snap, "CUPROF_DUMP_ON": "exit"}
    env.update(extra or {})
    r = shimrun.run_shim([args.app] + list(app_args), args.ld_path, preload=args.lib,
                         extra_env=env)
    check(r.returncode == 0, f"exit status {r.returncode}: {r.stdout} {r.stderr}")
    return r, (shimrun.load_checker().load(snap) if os.path.exists(snap) else None)


def annotations(trace):
    return [(e.get("user_metadata"), e.get("stage")) for e in trace if e["action"] == "annotate"]


def levels(stdout):
    return {k: int(v) for k, v in re.findall(r"^(\w+)=(-?\d+)$", stdout, re.M)}


def check_sequence(got, expected, what):
    """Exact, but the section between "parallel begins" and "parallel ends" as a multiset that
    never ends more ranges than it started."""
    def split(seq):
        try:
            a, b = seq.index(("parallel begins", None)), seq.index(("parallel ends", None))
        except ValueError:
            return seq, []
        return seq[:a + 1] + seq[b:], seq[a + 1:b]
    g_outer, g_mid = split(got)
    e_outer, e_mid = split(expected)
    check(g_outer == e_outer, f"{what}: annotations\n  got      {g_outer}\n  expected {e_outer}")
    check(sorted(g_mid, key=str) == sorted(e_mid, key=str), f"{what}: parallel part {g_mid}")
    depth = 0
    for _, stage in g_mid:
        depth += 1 if stage == "START" else -1
        check(depth >= 0, f"{what}: a parallel range ended before it started")


def check_external(snap, what):
    """external_annotations: every START/END of every device, in PyTorch's layout."""
    want = [{"name": e["user_metadata"], "stage": e["stage"], "device": d, "time_us": e["time_us"]}
            for d, trace in enumerate(snap["device_traces"])
            for e in trace if e["action"] == "annotate" and "stage" in e]
    got = snap.get("external_annotations")
    check(got == want, f"{what}: external_annotations {got} != {want}")
    check(all(list(a) == ["name", "stage", "device", "time_us"] for a in got or []),
          f"{what}: external_annotations keys in PyTorch's order")


def inside(trace, name, size):
    """Whether an alloc of `size` lies between a START and the END of `name` (same nesting)."""
    open_at = 0
    for e in trace:
        if e["action"] == "annotate" and e.get("user_metadata") == name and "stage" in e:
            open_at += 1 if e["stage"] == "START" else -1
        elif e["action"] == "alloc" and e["size"] == size and open_at > 0:
            return True
    return False


def group_ranges(args, tmp):
    r, snap = under(args, tmp)
    check(levels(r.stdout) == LEVELS_C, f"NVTX return values under cuprof: {levels(r.stdout)}")
    if not check(snap is not None, "no snapshot"):
        return
    trace = snap["device_traces"][0]
    check_sequence(annotations(trace), EXPECTED_C, "C program")
    check_external(snap, "C program")
    check(inside(trace, "forward", 8 * MIB), "the 8 MiB activations are inside 'forward'")
    check(not inside(trace, "forward", 4 * MIB), "the weights are outside 'forward'")
    for k in range(3):
        check(inside(trace, f"worker {k}", (k + 1) * MIB), f"worker {k}'s block inside its range")
    check(trace[0]["action"] == "annotate" and trace[0]["user_metadata"] == "train",
          "the range opened before the first CUDA call is the history's first entry")
    times = [e["time_us"] for e in trace]
    check(times == sorted(times), "entries in time order")
    problems = shimrun.load_checker().check(snap)
    check(not problems, f"checker: {problems}")


def group_devices(args, tmp):
    """Every device's trace gets every annotation, at the same time."""
    r, snap = under(args, tmp, extra={"SIMCUDA_DEVICES": "2"})
    if not check(snap is not None and len(snap["device_traces"]) == 2, "two device traces"):
        return
    d0 = [e for e in snap["device_traces"][0] if e["action"] == "annotate"]
    d1 = [e for e in snap["device_traces"][1] if e["action"] == "annotate"]
    check([(e["user_metadata"], e.get("stage"), e["time_us"]) for e in d0] ==
          [(e["user_metadata"], e.get("stage"), e["time_us"]) for e in d1],
          "device 1's annotations are device 0's")
    check_external(snap, "two devices")


def group_cpp(args, tmp):
    args.app = args.cpp
    r, snap = under(args, tmp)
    check("nvtx_ranges_cpp: ok" in r.stdout, f"C++ program output: {r.stdout}")
    if check(snap is not None, "no snapshot"):
        check_sequence(annotations(snap["device_traces"][0]), EXPECTED_CPP, "C++ program")
        check_external(snap, "C++ program")
        check(inside(snap["device_traces"][0], "forward", 3 * MIB), "C++: block inside 'forward'")


def group_alone(args, tmp):
    # No tool: NVTX's own no-ops (a push returns NVTX_NO_PUSH_POP_TRACKING, -2).
    r = shimrun.run_shim([args.app], args.ld_path)
    check(r.returncode == 0 and set(levels(r.stdout).values()) == {-2},
          f"alone: {r.returncode} {r.stdout}")
    # NVTX_INJECTION64_PATH alone: NVTX dlopens libcuprof.so, which stays out of the way.
    r = shimrun.run_shim([args.app], args.ld_path, extra_env={"NVTX_INJECTION64_PATH": args.lib})
    check(r.returncode == 0 and set(levels(r.stdout).values()) == {-2},
          f"not preloaded: {r.returncode} {r.stdout}")
    lines = [l for l in r.stderr.splitlines() if l.startswith("cuprof:")]
    check(lines == ["cuprof: NVTX_INJECTION64_PATH names libcuprof.so, which is not preloaded "
                    "(LD_PRELOAD, or `cuprof run`): NVTX ranges are not recorded"],
          f"not preloaded: one line: {lines}")
    # Off mode: NVTX's no-ops, nothing said.
    snap = os.path.join(tmp, "off.pickle")
    r = shimrun.run_shim([args.app], args.ld_path, preload=args.lib,
                         extra_env={"NVTX_INJECTION64_PATH": args.lib, "CUPROF_MODE": "off",
                                    "CUPROF_SNAPSHOT": snap})
    check(r.returncode == 0 and set(levels(r.stdout).values()) == {-2}, f"off: {r.stdout}")
    check("NVTX" not in r.stderr and not os.path.exists(snap), f"off: {r.stderr}")
    # A program without NVTX: the snapshot is what it always was.
    args.app = args.plain
    r, s = under(args, tmp)
    if check(s is not None, "plain program: no snapshot"):
        check("external_annotations" not in s, "plain program: no external_annotations")
        check(not annotations(s["device_traces"][0]), "plain program: no annotation")


def group_cli(args, tmp):
    """`cuprof run` sets NVTX_INJECTION64_PATH; summary, plot's data and timeline show phases."""
    env = shimrun.env(args.ld_path, SIMCUDA_MEM="1G")
    env.pop("NVTX_INJECTION64_PATH", None)
    r = shimrun.run([args.cuprof, "run", "-q", "--sim", "-o", os.path.join(tmp, "run-%n.pickle"),
                     "--", args.app, "oom"], env)
    check(r.returncode == 0 and "oom=2" in r.stdout, f"cuprof run: {r.returncode} {r.stderr}")
    files = shimrun.dumps(tmp, "run-*.pickle")  # the OOM's, then the exit's
    if not check(len(files) == 2, f"two snapshots (OOM, exit): {files}"):
        return
    snap = files[-1]
    summary = shimrun.run([args.cuprof, "summary", snap], env).stdout
    section = summary[summary.find("phases (NVTX ranges)"):summary.find("top call sites")]
    check(section.startswith("phases (NVTX ranges): 16 ranges of 11 names, 4 marks;"),
          f"summary's phases heading:\n{section}")
    rows = {m[0].strip(): m[1:] for m in re.findall(
        r"^  (.{30}) +(\d+)  (\S+ \S+) +(\S+ \S+) +(\S+ \S+)", section, re.M)}
    check(rows.get("forward") == ("1", "12.00 MiB", "8.00 MiB", "+8.00 MiB"),
          f"forward's row: {rows.get('forward')}\n{section}")
    check(rows.get("train") == ("1", "12.00 MiB", "12.00 MiB", "+4.00 MiB"),
          f"train's row: {rows.get('train')}")
    check(rows.get("step") == ("3", "7.00 MiB", "3.00 MiB", "+6.00 MiB"),
          f"step's row: {rows.get('step')}")
    check("  open at the end: teardown\n" in section, f"open at the end:\n{section}")
    check(re.search(r"^  OOM at entry \d+: inside train > forward$", section, re.M),
          f"the ranges open at the OOM:\n{section}")
    html = os.path.join(tmp, "run.html")
    r = shimrun.run([args.cuprof, "plot", snap, "-o", html], env)
    data = report_data.read(html).data if r.returncode == 0 else {}
    dev = (data.get("runs") or [{}])[0].get("devices", [{}])[0]
    names = {n["name"]: n for n in dev.get("ranges", {}).get("names", [])}
    check(names.get("forward", {}).get("peak") == 12 * MIB and
          names["forward"]["rise"] == 8 * MIB and names["forward"]["growth"] == 8 * MIB,
          f"plot's data for forward: {names.get('forward')}")
    check(len(dev.get("ranges", {}).get("ranges", [])) == 16, "plot's data: 16 ranges")
    every = shimrun.run([args.cuprof, "summary", "--top", "100", snap], env).stdout
    every = every[every.find("phases (NVTX ranges)"):every.find("top call sites")]
    check(dev.get("ranges_text", "").rstrip("\n") == every.rstrip("\n"),
          "plot's ranges text is summary's section (every name)")
    r = shimrun.run([args.cuprof, "timeline", snap], env)
    events = json.loads(r.stdout)["traceEvents"] if r.returncode == 0 else []
    ranges = [e for e in events if e.get("cat") == "nvtx"]
    check(sum(e["ph"] == "b" for e in ranges) == 16 and sum(e["ph"] == "e" for e in ranges) == 15,
          "timeline: 16 range starts, 15 ends")
    fwd = [e for e in ranges if e["name"] == "forward"]
    check(len(fwd) == 2 and fwd[0]["id"] == fwd[1]["id"] and fwd[0]["ph"] == "b",
          f"timeline: forward's slice {fwd}")
    drawn = sum(1 for r in dev.get("ranges", {}).get("ranges", []) if r[6] <= 2)
    render(html, every, drawn)


def render(html, section, drawn):
    """The page itself (when a chromium is installed): the ranges in the timeline's lane, and the
    phases tab showing summary's section."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("no chromium: the page is not rendered")
        return
    with tempfile.TemporaryDirectory() as prof:
        r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                            "--user-data-dir=" + prof, "--virtual-time-budget=5000",
                            "--dump-dom", "file://" + html],
                           capture_output=True, text=True, timeout=180)
    dom = r.stdout
    bands = len(re.findall(r'<rect class="range depth\d', dom))
    check(drawn > 0 and bands == drawn, f"{drawn} range bands (depth 0 to 2) drawn, not {bands}")
    check('id="tab-phases"' in dom, "the page has a phases tab")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("group")
    for opt in ("--lib", "--ld-path", "--work", "--app", "--cpp", "--plain", "--cuprof"):
        ap.add_argument(opt)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        {"ranges": group_ranges, "devices": group_devices, "cpp": group_cpp,
         "alone": group_alone, "cli": group_cli}[args.group](args, tmp)
    check.finish()


if __name__ == "__main__":
    main()
