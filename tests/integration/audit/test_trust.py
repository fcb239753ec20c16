#!/usr/bin/env python3
"""What cuprof trusts (issue 12, section 5): bad values from the driver, the environment and the
file system, each made by the simulated device's fault injection (SIMCUDA_FAIL) or a small
preloaded fake. In every case the program keeps the driver's answer and its own output, cuprof
says at most one `cuprof:` line about it, and every snapshot it writes is consistent
(tests/golden/check_snapshot.py).

usage: test_trust.py CASE [ARGS...]
  event-query APP LIBCUPROF LD_LIBRARY_PATH
  same APP LIBCUPROF LD_LIBRARY_PATH   (output and exit status as without cuprof, every mode)
  outside APP LIBCUPROF LD_LIBRARY_PATH   (argv, RANK and the host name in the snapshot)
  bad-alloc APP LIBCUPROF LD_LIBRARY_PATH SIM_LIBCUDA   (LD_LIBRARY_PATH: the lying fake first)
  mem-info APP LIBCUPROF LD_LIBRARY_PATH SIM_LIBCUDA    (the same)
"""
import collections
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402


def cuprof_lines(stderr):
    """cuprof's lines but "snapshot written" and the one naming the unwinder (issue 30)."""
    return [l for l in stderr.splitlines()
            if l.startswith("cuprof:") and not l.startswith("cuprof: snapshot written to ")
            and not l.startswith("cuprof: stacks by ")]


def load_dumps(f, label, tmp):
    checker = shimrun.load_checker()
    snaps = []
    for path in shimrun.dumps(tmp):
        snap = checker.load(path)
        problems = checker.check(snap, complete_history=True)
        f.check(not problems, f"{label}: {os.path.basename(path)}: {problems[:5]}")
        snaps.append(snap)
    return snaps


def case_event_query(f, app, lib, ld_path):
    """cuEventQuery failing with CUDA_ERROR_INVALID_VALUE (1, once read as "pending") or
    CUDA_ERROR_INVALID_HANDLE (400): blocks freed on another stream still complete (cuprof
    waits for the stream instead), one log line, the program's own query gets the error."""
    for err in (1, 400):
        fail = {"SIMCUDA_FAIL": f"event_query:every=1:err={err}"}
        base = shimrun.run_shim([app], ld_path, extra_env=fail)
        f.check(base.returncode == 0 and f"own query={err}\n" in base.stdout,
                f"err={err} without cuprof: {base}")
        for mode in ("cache", "trace"):
            label = f"event_query err={err} {mode}"
            with tempfile.TemporaryDirectory() as tmp:
                env = dict(fail, CUPROF_MODE=mode,
                           CUPROF_SNAPSHOT=os.path.join(tmp, "s-%n.pickle"))
                shim = shimrun.run_shim([app], ld_path, preload=lib, extra_env=env)
                snaps = load_dumps(f, label, tmp)
            f.check(shim.returncode == base.returncode and shim.stdout == base.stdout,
                    f"{label}: output changed: {shim.stdout!r} vs {base.stdout!r}")
            lines = cuprof_lines(shim.stderr)
            want = 1 if mode == "cache" else 0  # trace mode records no events
            f.check(len(lines) == want and all(f"cuEventQuery failed with CUresult {err};" in l
                                               for l in lines),
                    f"{label}: want {want} cuEventQuery line(s), got {lines}")
            if not f.check(len(snaps) == 1, f"{label}: {len(snaps)} snapshots"):
                continue
            states = collections.Counter(b["state"] for s in snaps[0]["segments"]
                                         for b in s["blocks"])
            f.check(states.get("active_pending_free", 0) == 0,
                    f"{label}: blocks left pending on a failed event: {dict(states)}")
            acts = collections.Counter(e["action"] for e in snaps[0]["device_traces"][0])
            f.check(acts["free_completed"] == acts["alloc"] == 6,
                    f"{label}: allocs and completed frees: {dict(acts)}")


def case_bad_alloc(f, app, lib, ld_path, sim_libcuda):
    """cuMemAlloc_v2 says CUDA_SUCCESS with a NULL, misaligned or duplicate pointer (the fake
    driver in fakecuda/). cuprof never takes such memory into its cache: it logs one line and
    passes the request to the driver, so the program gets the same answers as without cuprof;
    its snapshot stays consistent. A duplicate pointer makes the program free one block twice,
    which cuprof reports as a double free, as the driver refuses it."""
    for lie in ("zero", "unaligned", "dup"):
        fake = {"FAKECUDA_REAL": sim_libcuda, "FAKECUDA_LIE": lie, "FAKECUDA_FROM": 2}
        base = shimrun.run_shim([app], ld_path, extra_env=fake)
        f.check(base.returncode == 0 and "b: rc=0" in base.stdout, f"{lie} without cuprof: {base}")
        for mode in ("cache", "trace"):
            label = f"bad alloc {lie} {mode}"
            with tempfile.TemporaryDirectory() as tmp:
                env = dict(fake, CUPROF_MODE=mode,
                           CUPROF_SNAPSHOT=os.path.join(tmp, "s-%n.pickle"))
                shim = shimrun.run_shim([app], ld_path, preload=lib, extra_env=env)
                snaps = load_dumps(f, label, tmp)
            f.check(shim.returncode == base.returncode and shim.stdout == base.stdout,
                    f"{label}: output changed: {shim.stdout!r} vs {base.stdout!r}")
            lines = cuprof_lines(shim.stderr)
            told = [l for l in lines if "cuMemAlloc_v2 returned CUDA_SUCCESS with a NULL, "
                    "misaligned or overlapping address" in l]
            rest = [l for l in lines if l not in told
                    and not (lie == "dup" and l.startswith("cuprof: double free"))]
            f.check(len(told) == 1 and not rest, f"{label}: cuprof lines {lines}")
            f.check(len(snaps) == 1, f"{label}: {len(snaps)} snapshots")
            for s in snaps:
                addrs = [seg["address"] for seg in s["segments"]]
                f.check(0 not in addrs and all(a % 256 == 0 for a in addrs),
                        f"{label}: a lie entered the snapshot: {[hex(a) for a in addrs]}")


def case_same(f, app, lib, ld_path):
    """The program's output and exit status are those of a run without cuprof, in every mode,
    with no cuprof line but the snapshot's, and the snapshot is consistent."""
    base = shimrun.run_shim([app], ld_path)
    f.check(base.returncode == 0, f"without cuprof: {base}")
    for mode in ("cache", "trace", "off"):
        label = f"{os.path.basename(app)} {mode}"
        with tempfile.TemporaryDirectory() as tmp:
            env = {"CUPROF_MODE": mode, "CUPROF_SNAPSHOT": os.path.join(tmp, "s-%n.pickle")}
            shim = shimrun.run_shim([app], ld_path, preload=lib, extra_env=env)
            load_dumps(f, label, tmp)
        f.check(shim.returncode == base.returncode and shim.stdout == base.stdout,
                f"{label}: {shim} vs {base}")
        f.check(not cuprof_lines(shim.stderr), f"{label}: {cuprof_lines(shim.stderr)}")


def case_mem_info(f, app, lib, ld_path, sim_libcuda):
    """cuMemGetInfo_v2 answers total 0, free > total or total SIZE_MAX, with
    per_process_memory_fraction set: no limit comes from such an answer (a limit of 0 refused
    every request the device served; SIZE_MAX * fraction overflowed a size_t), so the program's
    allocations succeed as without cuprof."""
    for lie in ("zero", "swapped", "max"):
        fake = {"FAKECUDA_REAL": sim_libcuda, "FAKECUDA_MEMINFO": lie}
        base = shimrun.run_shim([app], ld_path, extra_env=fake)
        f.check(base.returncode == 0 and "b: rc=0" in base.stdout, f"{lie} without cuprof: {base}")
        for mode in ("cache", "trace"):
            label = f"mem info {lie} {mode}"
            with tempfile.TemporaryDirectory() as tmp:
                env = dict(fake, CUPROF_MODE=mode,
                           CUPROF_ALLOC_CONF="per_process_memory_fraction:0.5",
                           CUPROF_SNAPSHOT=os.path.join(tmp, "s-%n.pickle"))
                shim = shimrun.run_shim([app], ld_path, preload=lib, extra_env=env)
                snaps = load_dumps(f, label, tmp)
            f.check(shim.returncode == base.returncode and shim.stdout == base.stdout,
                    f"{label}: output changed: {shim.stdout!r} vs {base.stdout!r}")
            lines = cuprof_lines(shim.stderr)
            want = 0 if lie == "max" else 1  # SIZE_MAX total is only clamped
            f.check(len(lines) == want and all("per_process_memory_fraction is not applied" in l
                                               for l in lines),
                    f"{label}: cuprof lines {lines}")
            f.check(len(snaps) == 1, f"{label}: {len(snaps)} snapshots")


def case_outside(f, app, lib, ld_path):
    """Text cuprof copies into its snapshot from outside: the command line (any bytes, from
    /proc/self/cmdline), the rank variable and the host name in CUPROF_SNAPSHOT's %r and %h. The
    snapshot still loads (bytes that are not UTF-8 written as \\xHH, control characters kept as
    text) and a rank of "../x" never names another directory."""
    hostile = b"\xff\xfe bad \x01 \xc3"
    with tempfile.TemporaryDirectory() as tmp:
        inner = os.path.join(tmp, "inner")
        os.mkdir(inner)
        for fmt in ("pickle", "json"):
            env = {"CUPROF_SNAPSHOT": os.path.join(inner, f"s-%r-%h-%n.{fmt}"),
                   "RANK": "../../x/y"}
            shim = shimrun.run([os.fsencode(app), hostile],
                               shimrun.env(ld_path, lib, **env))
            f.check(shim.returncode == 0, f"argv {fmt}: {shim}")
        f.check(os.listdir(tmp) == ["inner"], f"a file outside the folder: {os.listdir(tmp)}")
        names = sorted(os.listdir(inner))
        f.check(len(names) == 2 and all(n.startswith("s-.._.._x_y-") for n in names),
                f"snapshot names {names}")
        for snap in load_dumps(f, "argv", inner):
            argv = snap["cuprof"]["argv"]
            # text_escape's rule: each byte that is not UTF-8 as \xHH, control characters kept.
            f.check(len(argv) == 2 and argv[1] == "\\xff\\xfe bad \x01 \\xc3",
                    f"argv in the snapshot: {argv!r}")


def main():
    f = shimrun.Checks()
    case = sys.argv[1]
    if case == "event-query":
        case_event_query(f, *sys.argv[2:5])
    elif case == "same":
        case_same(f, *sys.argv[2:5])
    elif case == "mem-info":
        case_mem_info(f, *sys.argv[2:6])
    elif case == "outside":
        case_outside(f, *sys.argv[2:5])
    elif case == "bad-alloc":
        case_bad_alloc(f, *sys.argv[2:6])
    else:
        f.check(False, f"unknown case {case}")
    f.finish()


if __name__ == "__main__":
    main()
