#!/usr/bin/env python3
"""Integration tests of libcuprof's control side: configuration errors, path templates, exit /
signal / OOM dumps, fork, and the cuprof.h API with and without the shim. Programs run under
LD_PRELOAD on the simulated device; snapshots are read back with pickle/json and checked with
tests/golden/check_snapshot.py.

Usage: test_control.py --lib LIBCUPROF --ld-path SIM_LD_PATH --bin-dir DIR --checker CHECK_PY
                       [unittest args, e.g. ConfigTests]
"""
import argparse
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/shimrun.py)
from shimrun import run  # noqa: E402

ARGS = None
CHECKER = None

ALL_VARS = ("CUPROF_MODE, CUPROF_ALLOC_CONF, CUPROF_SNAPSHOT, CUPROF_HISTORY, "
            "CUPROF_MAX_ENTRIES, CUPROF_STACKS, CUPROF_STACK_DEPTH, CUPROF_PYTHON_FRAMES, "
            "CUPROF_CONTROL, CUPROF_SOCKET_DIR, CUPROF_DUMP_ON, "
            "CUPROF_SIGNAL, CUPROF_LOG")
UINT_MSG = {"CUPROF_MAX_ENTRIES": "an integer from 1 to 100000000",
            "CUPROF_STACK_DEPTH": "an integer from 1 to 256"}
ENUM_MSG = {"CUPROF_MODE": "one of cache, trace, off",
            "CUPROF_HISTORY": "one of all, state, off",
            "CUPROF_STACKS": "one of all, alloc, none",
            "CUPROF_PYTHON_FRAMES": "one of on, off",
            "CUPROF_CONTROL": "one of on, off",
            "CUPROF_LOG": "one of quiet, info, debug"}
DUMP_ON_MSG = "a comma list of exit, signal, oom, term, or none"
# The version meson.build gives the project: what cuprof_version() must say.
PROJECT_VERSION = re.search(r"version : '([^']+)'", open(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, os.pardir,
    "meson.build")).read()).group(1)
SIGNAL_MSG = ("SIGUSR1, SIGUSR2 or a real-time signal (SIGRTMIN+N, SIGRTMAX-N or 34 to 64), by "
              "name (SIGUSR2, USR2) or number")
PATH_MSG = "a path ending in .pickle, .pkl or .json; escapes %p %r %h %n %t %%"
LONG = "a" * 5000
LONG_Q = "a" * 64 + "..."


def env_for(preload=True, **variables):
    return shimrun.env(ARGS.ld_path, ARGS.lib if preload else None, **variables)


def prog(name):
    return os.path.join(ARGS.bin_dir, name)


def written_paths(stderr):
    return re.findall(r"^cuprof: snapshot written to (.*)$", stderr, re.M)


def check_file(test, path, complete=True):
    snap = CHECKER.load(path)
    problems = CHECKER.check(snap, complete_history=complete)
    test.assertEqual(problems, [], path)
    return snap


def live_bytes(snap):
    return sum(b["requested_size"] for s in snap["segments"] for b in s["blocks"]
               if b["state"] == "active_allocated")


class ConfigTests(unittest.TestCase):
    """Every variable x bad values: exit status 2 and exactly one line on stderr."""

    CASES = [
        # (variable, value, expected-part after "bad value ...: expected ")
        ("CUPROF_MODE", "", ENUM_MSG["CUPROF_MODE"]),
        ("CUPROF_MODE", "Cache", ENUM_MSG["CUPROF_MODE"]),
        ("CUPROF_MODE", "cache,trace", ENUM_MSG["CUPROF_MODE"]),
        ("CUPROF_MODE", "caché", ENUM_MSG["CUPROF_MODE"]),
        ("CUPROF_MODE", LONG, ENUM_MSG["CUPROF_MODE"]),
        ("CUPROF_HISTORY", "-1", ENUM_MSG["CUPROF_HISTORY"]),
        ("CUPROF_STACKS", "yes", ENUM_MSG["CUPROF_STACKS"]),
        ("CUPROF_LOG", "verbose", ENUM_MSG["CUPROF_LOG"]),
        ("CUPROF_LOG", "info\n", ENUM_MSG["CUPROF_LOG"]),
        ("CUPROF_PYTHON_FRAMES", "yes", ENUM_MSG["CUPROF_PYTHON_FRAMES"]),
        ("CUPROF_PYTHON_FRAMES", "ON", ENUM_MSG["CUPROF_PYTHON_FRAMES"]),
        ("CUPROF_CONTROL", "1", ENUM_MSG["CUPROF_CONTROL"]),
        ("CUPROF_MAX_ENTRIES", "", UINT_MSG["CUPROF_MAX_ENTRIES"]),
        ("CUPROF_MAX_ENTRIES", "-5", UINT_MSG["CUPROF_MAX_ENTRIES"]),
        ("CUPROF_MAX_ENTRIES", "0", UINT_MSG["CUPROF_MAX_ENTRIES"]),
        ("CUPROF_MAX_ENTRIES", "100000001", UINT_MSG["CUPROF_MAX_ENTRIES"]),
        ("CUPROF_MAX_ENTRIES", "18446744073709551616", UINT_MSG["CUPROF_MAX_ENTRIES"]),
        ("CUPROF_MAX_ENTRIES", "1.5", UINT_MSG["CUPROF_MAX_ENTRIES"]),
        ("CUPROF_MAX_ENTRIES", "10k", UINT_MSG["CUPROF_MAX_ENTRIES"]),
        ("CUPROF_MAX_ENTRIES", " 10", UINT_MSG["CUPROF_MAX_ENTRIES"]),
        ("CUPROF_MAX_ENTRIES", "+10", UINT_MSG["CUPROF_MAX_ENTRIES"]),
        ("CUPROF_MAX_ENTRIES", "１０", UINT_MSG["CUPROF_MAX_ENTRIES"]),
        ("CUPROF_MAX_ENTRIES", LONG, UINT_MSG["CUPROF_MAX_ENTRIES"]),
        ("CUPROF_STACK_DEPTH", "-1", UINT_MSG["CUPROF_STACK_DEPTH"]),
        ("CUPROF_STACK_DEPTH", "257", UINT_MSG["CUPROF_STACK_DEPTH"]),
        ("CUPROF_STACK_DEPTH", "0x20", UINT_MSG["CUPROF_STACK_DEPTH"]),
        ("CUPROF_STACK_DEPTH", "", UINT_MSG["CUPROF_STACK_DEPTH"]),
        ("CUPROF_DUMP_ON", "", DUMP_ON_MSG),
        ("CUPROF_DUMP_ON", "exit,", DUMP_ON_MSG),
        ("CUPROF_DUMP_ON", "exit,crash", DUMP_ON_MSG),
        ("CUPROF_DUMP_ON", "EXIT", DUMP_ON_MSG),
        ("CUPROF_DUMP_ON", "1", DUMP_ON_MSG),
        ("CUPROF_SIGNAL", "", SIGNAL_MSG),
        ("CUPROF_SIGNAL", "SIGKILL", SIGNAL_MSG),
        ("CUPROF_SIGNAL", "9", SIGNAL_MSG),
        ("CUPROF_SIGNAL", "SIGSEGV", SIGNAL_MSG),
        ("CUPROF_SIGNAL", "-10", SIGNAL_MSG),
        ("CUPROF_SIGNAL", "0", SIGNAL_MSG),
        ("CUPROF_SIGNAL", "999", SIGNAL_MSG),
        ("CUPROF_SIGNAL", "1.5", SIGNAL_MSG),
        ("CUPROF_SIGNAL", "SIGUSR3", SIGNAL_MSG),
        ("CUPROF_SNAPSHOT", "", PATH_MSG),
        ("CUPROF_SNAPSHOT", "out.txt", PATH_MSG),
        ("CUPROF_SNAPSHOT", "out-%x.pickle", PATH_MSG),
        ("CUPROF_SNAPSHOT", "out.pickle%", PATH_MSG),
        ("CUPROF_SNAPSHOT", LONG + ".json", "at most 1023 bytes"),
    ]

    def expect_error(self, name, value, expected_line):
        r = run(["true"], env_for(**{name: value}))
        self.assertEqual(r.returncode, 2, (name, value, r.stderr))
        self.assertEqual(r.stderr, expected_line + "\n", (name, value))

    @staticmethod
    def quoted(value):
        out = value if len(value.encode()) <= 64 else LONG_Q
        out = out.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\x0a")
        return '"' + out + '"'

    def test_bad_values(self):
        for name, value, expected in self.CASES:
            with self.subTest(name=name, value=value):
                self.expect_error(name, value, "cuprof: %s: bad value %s: expected %s"
                                  % (name, self.quoted(value), expected))

    def test_alloc_conf(self):
        self.expect_error("CUPROF_ALLOC_CONF", "max_split_size_mb:abc",
                          'cuprof: CUPROF_ALLOC_CONF: bad value "max_split_size_mb:abc": '
                          "expected an integer number of MiB >= 20")
        for value in ("max_split_size_mb:-1", "max_split_size_mb:1.5", "nonsense:1",
                      "garbage_collection_threshold:2", LONG):
            with self.subTest(value=value):
                r = run(["true"], env_for(CUPROF_ALLOC_CONF=value))
                self.assertEqual(r.returncode, 2, value)
                self.assertTrue(r.stderr.startswith("cuprof: CUPROF_ALLOC_CONF: "), r.stderr)
                self.assertEqual(r.stderr.count("\n"), 1, r.stderr)

    def test_unknown_names(self):
        for name in ("CUPROF_FOO", "CUPROF_MODES", "CUPROF_", "CUPROF_mode", "CUPROF_TEST_X"):
            with self.subTest(name=name):
                self.expect_error(name, "1", "cuprof: %s: unknown variable: expected one of %s"
                                  % (name, ALL_VARS))

    def test_unknown_name_reported_before_bad_value(self):
        r = run(["true"], env_for(CUPROF_MODE="bad", CUPROF_NOPE="x"))
        self.assertEqual(r.returncode, 2)
        self.assertTrue(r.stderr.startswith("cuprof: CUPROF_NOPE: unknown variable"), r.stderr)

    def test_good_values_run(self):
        good = {"CUPROF_MODE": ["cache", "trace", "off"], "CUPROF_HISTORY": ["all", "state", "off"],
                "CUPROF_MAX_ENTRIES": ["1", "100000000", "0010"],
                "CUPROF_STACKS": ["all", "alloc", "none"], "CUPROF_STACK_DEPTH": ["1", "256"],
                "CUPROF_PYTHON_FRAMES": ["on", "off"], "CUPROF_CONTROL": ["on", "off"],
                "CUPROF_DUMP_ON": ["none", "exit", "oom,signal,exit,oom"],
                "CUPROF_SIGNAL": ["SIGUSR2", "USR1", "12", "35"],
                "CUPROF_SNAPSHOT": ["x.pkl", "d/%p-%r-%h-%n-%t-%%.json"],
                "CUPROF_ALLOC_CONF": ["", "max_split_size_mb:20"],
                "CUPROF_LOG": ["quiet", "info", "debug"]}
        for name, values in good.items():
            for value in values:
                with self.subTest(name=name, value=value):
                    r = run(["true"], env_for(**{name: value}))
                    noise = [l for l in r.stderr.splitlines() if not l.startswith("cuprof: debug")]
                    self.assertEqual((r.returncode, noise), (0, []))


class DumpTests(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cuprof-control-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def test_exit_dump_on_return_and_exit(self):
        for how in ("return", "exit"):
            with self.subTest(how=how):
                tmpl = os.path.join(self.dir, how + "-%p.pickle")
                r = run([prog("control_exit"), how], env_for(CUPROF_SNAPSHOT=tmpl))
                self.assertEqual(r.returncode, 0, r.stderr)
                paths = written_paths(r.stderr)
                self.assertEqual(len(paths), 1, r.stderr)
                snap = check_file(self, paths[0])
                live = int(re.search(r"live=(\d+)", r.stdout).group(1))
                self.assertEqual(live_bytes(snap), live)
                self.assertEqual(os.path.basename(paths[0]), "%s-%d.pickle"
                                 % (how, snap["cuprof"]["pid"]))

    def test_no_exit_dump_without_exit_in_dump_on(self):
        tmpl = os.path.join(self.dir, "x-%p.pickle")
        r = run([prog("control_exit"), "return"],
                env_for(CUPROF_SNAPSHOT=tmpl, CUPROF_DUMP_ON="signal,oom"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.listdir(self.dir), [])

    def test_path_template_expansion(self):
        tmpl = os.path.join(self.dir, "r%r-h%h-p%p-n%n-t%t-%%.json")
        before = int(time.time())
        r = run([prog("control_exit"), "return"],
                env_for(CUPROF_SNAPSHOT=tmpl, RANK="7", CUPROF_LOG="quiet"))
        after = int(time.time())
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        names = os.listdir(self.dir)
        self.assertEqual(len(names), 1, names)
        host = re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname())
        m = re.fullmatch(r"r7-h(.*)-p(\d+)-n0-t(\d+)-%\.json", names[0])
        self.assertIsNotNone(m, names[0])
        self.assertEqual(m.group(1), host)
        self.assertTrue(before <= int(m.group(3)) <= after)
        with open(os.path.join(self.dir, names[0])) as f:
            snap = json.load(f)
        self.assertEqual(snap["cuprof"]["pid"], int(m.group(2)))

    def test_rank_sources_and_default(self):
        for var, value, want in (("OMPI_COMM_WORLD_RANK", "3", "3"), ("PMI_RANK", "4", "4"),
                                 ("SLURM_PROCID", "5", "5"), (None, None, "0")):
            with self.subTest(var=var):
                tmpl = os.path.join(self.dir, "rank%r-" + str(var) + ".pickle")
                extra = {var: value} if var else {}
                r = run([prog("control_exit"), "return"], env_for(CUPROF_SNAPSHOT=tmpl, **extra))
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual([os.path.basename(p) for p in written_paths(r.stderr)],
                                 ["rank%s-%s.pickle" % (want, var)])

    def test_never_overwrites(self):
        fixed = os.path.join(self.dir, "fixed.pickle")
        first = run([prog("control_exit"), "return"], env_for(CUPROF_SNAPSHOT=fixed))
        with open(fixed, "rb") as f:
            content = f.read()
        second = run([prog("control_exit"), "return"], env_for(CUPROF_SNAPSHOT=fixed))
        self.assertEqual(written_paths(first.stderr), [fixed])
        self.assertEqual(written_paths(second.stderr), [os.path.join(self.dir, "fixed.1.pickle")])
        with open(fixed, "rb") as f:
            self.assertEqual(f.read(), content)
        self.assertEqual(sorted(os.listdir(self.dir)), ["fixed.1.pickle", "fixed.pickle"])
        check_file(self, os.path.join(self.dir, "fixed.1.pickle"))

    def test_failed_write_logs_one_line(self):
        folder = os.path.join(self.dir, "missing-dir")
        tmpl, fallback = os.path.join(folder, "x.pickle"), os.path.join(self.dir, "fb")
        os.mkdir(fallback)
        r = run([prog("control_exit"), "return"], env_for(CUPROF_SNAPSHOT=tmpl, TMPDIR=fallback))
        self.assertEqual(r.returncode, 0)
        # Besides the line naming the unwinder (issue 30), once: the folder at start, the exit
        # dump's failure and where it went instead, once each.
        unwinder = [l for l in r.stderr.splitlines() if l.startswith("cuprof: stacks by ")]
        self.assertEqual(len(unwinder), 1, r.stderr)
        lines = [l for l in r.stderr.splitlines() if l.startswith("cuprof:") and l not in unwinder]
        moved = os.path.join(fallback, "x.pickle")
        self.assertEqual(lines, [
            "cuprof: CUPROF_SNAPSHOT: cannot write in %s (No such file or directory): snapshots "
            "go to %s while it cannot" % (folder, fallback),
            "cuprof: snapshot to %s failed: No such file or directory; written to %s instead"
            % (tmpl, moved)], r.stderr)
        check_file(self, moved)

    def test_oom_dump_before_error_returns(self):
        tmpl = os.path.join(self.dir, "oom-%n.pickle")
        r = run([prog("control_oom"), self.dir], env_for(CUPROF_SNAPSHOT=tmpl,
                                                         CUPROF_DUMP_ON="oom"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        m = re.search(r"error=(\d+) snapshots_at_error=(\d+)", r.stdout)
        self.assertEqual(int(m.group(1)), 2)  # CUDA_ERROR_OUT_OF_MEMORY, unchanged
        self.assertEqual(int(m.group(2)), 1, r.stderr)
        snap = check_file(self, os.path.join(self.dir, "oom-0.pickle"), complete=True)
        actions = [e["action"] for e in snap["device_traces"][0]]
        self.assertIn("oom", actions)


class SignalTests(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cuprof-control-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def drive(self, mode, count):
        tmpl = os.path.join(self.dir, "sig-%n.pickle")
        # A small ring keeps each dump quick while the threads fill it at full speed.
        env = env_for(CUPROF_SNAPSHOT=tmpl, CUPROF_MAX_ENTRIES="20000")
        p = subprocess.Popen([prog("control_stress"), mode], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in p.stderr], daemon=True).start()
        try:
            self.assertEqual(p.stdout.readline(), "ready\n")
            for i in range(count):
                p.send_signal(signal.SIGUSR1)
                while True:  # a hang here (no line in 60 s) is the deadlock the test looks for
                    line = lines.get(timeout=60)
                    if line.startswith("cuprof: snapshot"):
                        break
                self.assertEqual(line, "cuprof: snapshot written to %s\n"
                                 % os.path.join(self.dir, "sig-%d.pickle" % i))
            p.stdin.close()
            out = p.stdout.read()
            self.assertEqual(p.wait(timeout=60), 0)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        for i in range(count + 1):  # + the exit dump
            snap = check_file(self, os.path.join(self.dir, "sig-%d.pickle" % i),
                              complete=False)
            self.assertEqual(len(snap["device_traces"]), len(snap["cuprof"]["stats"]))
        return out

    def test_signal_while_two_threads_allocate(self):
        out = self.drive("plain", 6)
        self.assertIn("own_calls=0", out)

    def test_stats_match_blocks_while_threads_allocate(self):
        self.drive("plain", 3)

    def test_chains_to_program_handler(self):
        out = self.drive("own-handler", 3)
        self.assertIn("own_calls=3", out)


class ForkTests(unittest.TestCase):
    def test_child_allocates_and_exits(self):
        if shimrun.sanitized():
            # Under ASan the child of this multithreaded program can hang after fork(): gdb on a
            # hung child shows it (and its dumper thread) waiting in ASan's own allocator mutex
            # (SizeClassAllocator64::GetFromAllocator), inherited locked from a parent thread
            # that was inside malloc at fork time; this libasan does not lock its allocator
            # around fork. The plain build runs this test every time.
            self.skipTest("ASan's allocator is not fork-safe in a threaded program")
        d = tempfile.mkdtemp(prefix="cuprof-control-")
        self.addCleanup(shutil.rmtree, d, True)
        # Default settings: the churning thread's frees synchronize the device, so the fork often
        # lands while it is inside the simulated driver. The simulator's fork handlers keep the
        # child from inheriting a held driver lock (a real driver is unusable in a forked child
        # anyway); this test is about cuprof's own state there.
        r = run([prog("control_fork")], env_for(CUPROF_SNAPSHOT=os.path.join(d, "f-%p-%n.pickle")))
        self.assertEqual(r.returncode, 0, r.stderr)
        info = dict(re.findall(r"^(\w+)=(-?\d+)$", r.stdout, re.M))
        self.assertEqual((info["child_exited"], info["child_status"]), ("1", "0"))
        child = os.path.join(d, "f-%s-0.pickle" % info["child_pid"])
        self.assertIn(child, written_paths(r.stderr))
        snap = check_file(self, child, complete=False)
        self.assertEqual(snap["cuprof"]["pid"], int(info["child_pid"]))
        # The child inherited the parent's live 1 MiB block and added its own 3 MiB one.
        sizes = sorted(b["requested_size"] for s in snap["segments"] for b in s["blocks"]
                       if b["state"] == "active_allocated")
        self.assertIn(1 << 20, sizes)
        self.assertIn(3 << 20, sizes)
        self.assertEqual(len(written_paths(r.stderr)), 2, r.stderr)


    def stalled_fork(self, mode):
        d = tempfile.mkdtemp(prefix="cuprof-control-")
        self.addCleanup(shutil.rmtree, d, True)
        r = run([prog("control_fork_stall"), mode],
                env_for(CUPROF_SNAPSHOT=os.path.join(d, "s-%p.pickle")))
        self.assertEqual(r.returncode, 0, r.stderr)
        info = dict(re.findall(r"^(\w+)=(-?\d+)$", r.stdout, re.M))
        if info.get("libunwind") == "0":
            self.skipTest("libunwind.so.8 is not installed: cuprof walks stacks without it")
        self.assertEqual(info["stalled"], "1", r.stdout)
        self.assertEqual((info["hung"], info["child_exited"], info["child_status"]), ("0", "1", "0"),
                         r.stdout)
        child = os.path.join(d, "s-%s.pickle" % info["child_pid"])
        self.assertIn(child, written_paths(r.stderr))
        snap = check_file(self, child, complete=False)
        allocs = [e for t in snap["device_traces"] for e in t
                  if e["action"] == "alloc" and e["size"] == 8192]
        self.assertEqual(len(allocs), 1, allocs)
        # The child's stack is whole: the program's main, in its own source file.
        self.assertIn(("main", "control_fork_stall.c"),
                      [(f["name"], os.path.basename(f["filename"])) for f in allocs[0]["frames"]])

    def test_child_walks_stacks_while_a_parent_thread_holds_libunwind(self):
        # A thread inside libunwind at the fork leaves the child one of its mutexes locked; the
        # program holds one there on purpose (control_fork_stall.c). The child's stacks must not
        # wait for it: the child walks with cuprof's unwinder.
        self.stalled_fork("mutex")

    def test_fork_waits_for_a_loader_walk_under_way(self):
        # A thread inside dl_iterate_phdr at the fork (libunwind's, for an address it has not
        # seen) leaves glibc 2.36's child the loader's lock held: the child's exit snapshot (and
        # its dlopen, its exceptions) would wait forever. The fork waits for the walk instead.
        self.stalled_fork("loader")


class ApiTests(unittest.TestCase):
    def values(self, out):
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def test_api_without_shim(self):
        d = tempfile.mkdtemp(prefix="cuprof-control-")
        self.addCleanup(shutil.rmtree, d, True)
        r = run([prog("control_api"), os.path.join(d, "api.pickle")], env_for(preload=False))
        self.assertEqual(r.returncode, 0, r.stderr)
        v = self.values(r.stdout)
        self.assertEqual(v["version"], "none")
        for key in ("allocated", "reserved", "max_allocated", "reserved_after_empty"):
            self.assertEqual(v[key], "0")
        for key in ("history", "annotate", "reset_peak", "fraction", "dump", "empty_cache"):
            self.assertEqual(v[key], "-1")
        self.assertEqual(v["json"], "none")
        self.assertEqual(os.listdir(d), [])

    def test_api_with_shim(self):
        d = tempfile.mkdtemp(prefix="cuprof-control-")
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "api.pickle")
        r = run([prog("control_api"), path], env_for(CUPROF_DUMP_ON="none"))
        self.assertEqual(r.returncode, 0, r.stderr)
        v = self.values(r.stdout)
        self.assertEqual(v["version"], PROJECT_VERSION)
        self.assertEqual((v["history"], v["history_bad"], v["annotate"]), ("0", "-3", "0"))
        # cuprof rounds like PyTorch: 3 MiB stays 3 MiB, 1000 bytes becomes 1024.
        self.assertEqual(int(v["allocated"]), (3 << 20) + 1024)
        self.assertEqual(v["allocated_current"], v["allocated"])
        self.assertGreaterEqual(int(v["reserved"]), int(v["allocated"]))
        self.assertEqual(int(v["allocated_after_free"]), 1024)
        self.assertEqual(int(v["max_allocated"]), (3 << 20) + 1024)
        self.assertEqual(v["reset_peak"], "0")
        self.assertEqual(int(v["max_allocated_after_reset"]), 1024)
        self.assertEqual((v["reset_accumulated"], v["bad_device"]), ("0", "-3"))
        self.assertEqual((v["fraction"], v["fraction_bad"]), ("0", "-3"))
        stats = json.loads(v["json"])
        self.assertEqual(stats["allocated_bytes.all.current"], 1024)
        self.assertEqual(stats["allocation.all.allocated"], 0)  # reset_accumulated
        self.assertEqual(v["summary_lines"], "1")
        self.assertEqual(v["dump"], "0")
        self.assertEqual(v["empty_cache"], "0")
        self.assertLess(int(v["reserved_after_empty"]), int(v["reserved"]))
        self.assertEqual(v["history_off"], "0")
        snap = check_file(self, path)
        self.assertEqual(live_bytes(snap), 1000)  # requested size of the live block
        trace = snap["device_traces"][0]
        self.assertEqual(trace[0]["action"], "annotate")
        self.assertEqual([e["size"] for e in trace if e["action"] == "alloc"], [3 << 20, 1000])
        self.assertEqual(snap["cuprof"]["config"]["CUPROF_DUMP_ON"], "none")
        self.assertIn("Allocated memory", r.stderr)

    def test_api_history_switched_on(self):
        """Started with CUPROF_HISTORY=off (no block event reaches a sink), then
        cuprof_record_memory_history("all"): the history has every event from then on."""
        d = tempfile.mkdtemp(prefix="cuprof-control-")
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "api.pickle")
        r = run([prog("control_api"), path], env_for(CUPROF_DUMP_ON="none", CUPROF_HISTORY="off"))
        self.assertEqual(r.returncode, 0, r.stderr)
        v = self.values(r.stdout)
        self.assertEqual((v["history"], v["dump"]), ("0", "0"))
        snap = check_file(self, path)
        trace = snap["device_traces"][0]
        self.assertEqual(trace[0]["action"], "annotate")
        self.assertEqual([e["size"] for e in trace if e["action"] == "alloc"], [3 << 20, 1000])
        self.assertEqual([e["size"] for e in trace if e["action"] == "free_requested"], [3 << 20])
        self.assertEqual(snap["cuprof"]["config"]["CUPROF_HISTORY"], "off")


def main():
    global ARGS, CHECKER
    parser = argparse.ArgumentParser()
    for opt in ("--lib", "--ld-path", "--bin-dir", "--checker"):
        parser.add_argument(opt, required=True)
    ARGS, rest = parser.parse_known_args()
    CHECKER = shimrun.load_checker(ARGS.checker)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
