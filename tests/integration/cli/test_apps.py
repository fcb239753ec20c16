#!/usr/bin/env python3
"""Every `cuprof` subcommand on snapshots the shim wrote while the integration apps ran on the
simulated device (`cuprof run --sim`). Numbers are checked against the program's own output line
and against values computed here from the snapshot (pickle.load), never against cuprof itself.

Usage: test_apps.py CUPROF WORKDIR APPS_DIR DUMP_TWICE SRC_ROOT GROUP
GROUP: run, leaks, summary, stats, timeline, flamegraph, replay, midrun, midrunexpandable, diff,
       oom, plot
"""
import json
import os
import pickle
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import shimrun  # noqa: E402 (tests/integration/)
import snapshots as S  # noqa: E402

CUPROF = WORK = APPS = DUMP_TWICE = SRC = None
APP_NAMES = ("train_loop", "threads", "oom", "driver_api", "static_style")


def sanitizer_preload():
    """Under the ASan setup the sanitized apps need the sanitizer runtimes first in LD_PRELOAD
    (`cuprof run` keeps them there, before libcuprof.so)."""
    if not os.environ.get("SANITIZER_BUILD"):
        return {}
    libs = []
    for name in ("libasan.so", "libubsan.so"):
        out = subprocess.run(["cc", "-print-file-name=" + name], capture_output=True, text=True)
        if os.path.isabs(out.stdout.strip()):
            libs.append(os.path.realpath(out.stdout.strip()))
    # The apps end with device memory and threads of the simulated device still around.
    return {"LD_PRELOAD": ":".join(libs),
            "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"}


def cut_step(plain, sanitized):
    """How far apart the cuts of a history replayed from many starting points lie: every
    `plain`-th cut, every `sanitized`-th under ASan (slow, and checking memory rather than
    decisions), every cut with EVERY_CUT=1 (scripts/stress). Each cut is one `cuprof replay`, so
    every cut of every history made these the slowest tests of scripts/test."""
    if os.environ.get("EVERY_CUT") == "1":
        return 1
    return sanitized if os.environ.get("SANITIZER_BUILD") else plain


def leak_check(nth):
    """Extra environment for the `nth` command of a long series under ASan: every command is
    checked for memory errors, every fourth for leaks too (LeakSanitizer's scan at exit is half
    of a sanitized command's time, and the series run the same code hundreds of times); every one
    with EVERY_CUT=1 (scripts/stress)."""
    if (not os.environ.get("SANITIZER_BUILD") or os.environ.get("EVERY_CUT") == "1"
            or nth % 4 == 0):
        return {}
    return {"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"}


def env(run=False, **extra):
    e = dict(os.environ, **(sanitizer_preload() if run else {}))
    e.update(extra)
    for k in ("CUPROF_SNAPSHOT", "CUPROF_LOG", "CUPROF_MAX_ENTRIES", "CUPROF_ALLOC_CONF"):
        if k not in extra:
            e.pop(k, None)
    return e


def cuprof(*args, rc=None, **extra):
    p = subprocess.run([CUPROF, *args], capture_output=True, text=True, timeout=300,
                       env=env(args[0] == "run", **extra))
    if "Sanitizer" in p.stderr or "runtime error" in p.stderr:
        raise AssertionError("sanitizer report:\n" + p.stderr)
    if rc is not None and p.returncode != rc:
        raise AssertionError("cuprof %s: exit %d, expected %d\nstdout:\n%s\nstderr:\n%s"
                             % (" ".join(args), p.returncode, rc, p.stdout, p.stderr))
    return p


def record(app, name, *args, options=(), **extra):
    """Runs APP under `cuprof run --sim -q`; returns (snapshot path, snapshot, app's result)."""
    path = os.path.join(WORK, name + ".pickle")
    for f in os.listdir(WORK):
        if f.startswith(name + "."):
            os.unlink(os.path.join(WORK, f))
    p = cuprof("run", "--sim", "-q", "-o", path, *options, "--", os.path.join(APPS, app),
               *args, rc=0, **extra)
    line = [l for l in p.stdout.splitlines() if l.startswith(app + ": ")]
    assert len(line) == 1, p.stdout
    result = dict(kv.split("=", 1) for kv in line[0].split()[1:])
    with open(path, "rb") as f:
        snap = pickle.load(f)
    return path, snap, result


def light(app):
    """APP's arguments for a light workload (shimrun.light), where the number of steps does not
    matter: each history still holds more entries than a ring of 300."""
    return shimrun.light(app)[1:]


def source_line(name, text):
    """The line number of `text` in tests/apps/NAME (unique)."""
    with open(os.path.join(SRC, "tests", "apps", name)) as f:
        hits = [i + 1 for i, l in enumerate(f) if text in l]
    assert len(hits) == 1, (name, text, hits)
    return hits[0]


def blocks(snap, state="active_allocated"):
    return [(s, b) for s in snap["segments"] for b in s["blocks"] if b["state"] == state]


def cache_allocs(snap):
    return sum(1 for e in snap["device_traces"][0] if e["action"] == "alloc")


class Run(unittest.TestCase):
    def test_one_line_per_snapshot_and_exit_status(self):
        path = os.path.join(WORK, "run.pickle")
        for f in os.listdir(WORK):
            if f.startswith("run."):
                os.unlink(os.path.join(WORK, f))
        app = os.path.join(APPS, "train_loop")
        p = cuprof("run", "--sim", "-o", path, "--", app, "3", rc=0)
        self.assertIn("train_loop: steps=3 ", p.stdout)
        self.assertEqual(p.stderr.count("snapshot written to"), 1, p.stderr)
        self.assertIn("cuprof: snapshot written to %s\n" % path, p.stderr)
        self.assertIn("== %s\n" % path, p.stderr)
        # The path exists now: the shim writes run.1.pickle, and cuprof finds and names that.
        p = cuprof("run", "--sim", "-o", path, "--", app, "2", rc=0)
        again = os.path.join(WORK, "run.1.pickle")
        self.assertEqual(p.stderr.count("snapshot written to"), 1, p.stderr)
        self.assertIn("cuprof: snapshot written to %s\n" % again, p.stderr)
        self.assertIn("== %s\n" % again, p.stderr)
        # CUPROF_LOG=quiet silences the shim: cuprof names the new file itself, once.
        p = cuprof("run", "--sim", "-q", "-o", path, "--", app, "1", rc=0, CUPROF_LOG="quiet")
        self.assertEqual(p.stderr, "cuprof: snapshot written to %s\n"
                         % os.path.join(WORK, "run.2.pickle"))
        with open(os.path.join(WORK, "run.2.pickle"), "rb") as f:
            self.assertEqual(pickle.load(f)["cuprof"]["argv"], [app, "1"])
        # The program's exit status is cuprof's (train_loop -1 fails its own argument check).
        p = cuprof("run", "--sim", "-q", "-o", path, "--", app, "-1", rc=1)
        self.assertIn("train_loop: FAIL steps >= 0", p.stdout)


class Leaks(unittest.TestCase):
    def test_exactly_the_deliberate_leak(self):
        path, snap, res = record("train_loop", "leaks")
        leaked = int(res["leaked_bytes"])
        self.assertEqual(leaked, 3 * (1 << 20) + 12345)
        line = source_line("train_loop.c", "cudaMalloc(&p, leak_n[i])")
        got = json.loads(cuprof("leaks", "--json", path, rc=1).stdout)
        self.assertEqual(got["leaked_requested_bytes"], leaked)
        self.assertEqual(got["leaked_blocks"], 4)
        live = blocks(snap)
        self.assertEqual(sorted(b["size"] for _, b in live), [12800] + [1 << 20] * 3)
        self.assertEqual(got["leaked_bytes"], sum(b["size"] for _, b in live))
        self.assertEqual(len(got["sites"]), 1)
        site = got["sites"][0]
        self.assertEqual((site["blocks"], site["requested_bytes"]), (4, leaked))
        top = site["frames"][0]
        self.assertEqual(top["name"], "main")
        self.assertTrue(top["filename"].endswith("tests/apps/train_loop.c"), top)
        self.assertEqual(top["line"], line)
        text = cuprof("leaks", path, rc=1).stdout
        self.assertIn("4 blocks still allocated", text)
        self.assertIn("(%d bytes, %d requested)" % (got["leaked_bytes"], leaked), text)
        self.assertIn("main (%s:%d)" % (top["filename"], line), text)


class Summary(unittest.TestCase):
    def test_peaks_are_the_snapshot_counters(self):
        path, snap, res = record("train_loop", "summary")
        st = snap["cuprof"]["stats"][0]
        out = cuprof("summary", path, rc=0).stdout
        self.assertIn("peak counters: allocated_bytes.all.peak %s, reserved_bytes.all.peak %s"
                      % (S.format_size(st["allocated_bytes.all.peak"]),
                         S.format_size(st["reserved_bytes.all.peak"])), out)
        ser = S.series(snap, 0)
        plive, plive_at = S.peak([v[0] for v in ser])
        pres, pres_at = S.peak([v[1] for v in ser])
        # Live bytes are requested bytes: the program's own peak.
        self.assertEqual(plive, int(res["peak_bytes"]))
        self.assertEqual(pres, st["reserved_bytes.all.peak"])
        self.assertRegex(out, r"(?m)^peak reserved: %s at entry %d "
                         % (re.escape(S.format_size(pres)), pres_at - 1))
        self.assertRegex(out, r"(?m)^peak live: +%s at entry %d "
                         % (re.escape(S.format_size(plive)), plive_at - 1))
        reserved = sum(s["total_size"] for s in snap["segments"])
        allocated = sum(b["size"] for _, b in blocks(snap))
        self.assertIn("at the end: %s reserved in %d segments, %s allocated, %s live"
                      % (S.format_size(reserved), len(snap["segments"]),
                         S.format_size(allocated), S.format_size(int(res["live_bytes"]))), out)
        self.assertIn("history: %d trace entries" % len(snap["device_traces"][0]), out)
        line = source_line("train_loop.c", "cudaMalloc(&p, leak_n[i])")
        end = out.split("top call sites by live bytes at the end:")[1].splitlines()
        self.assertEqual(end[1].strip(), "1. %s in 4 allocations"
                         % S.format_size(int(res["leaked_bytes"])))
        self.assertRegex(end[2].strip(), r"^main \(.*tests/apps/train_loop\.c:%d\)$" % line)

    def test_state_history_is_not_called_the_run(self):
        # CUPROF_HISTORY=state keeps one entry (PyTorch's "state"): its "peak" is the end of the
        # run, so summary names only the counters' peaks and explain says what it shows.
        path, snap, res = record("train_loop", "summary-state", CUPROF_HISTORY="state")
        self.assertEqual(len(snap["device_traces"][0]), 1)
        dropped = snap["cuprof"]["dropped_entries"][0]
        st = snap["cuprof"]["stats"][0]
        out = cuprof("summary", path, rc=0).stdout
        self.assertIn("history: not kept (CUPROF_HISTORY=state: the blocks live at the dump and "
                      "their stacks; 1 entry, %d dropped); the run's peaks are the counters below"
                      % dropped, out)
        self.assertIn("peak counters: allocated_bytes.all.peak %s, reserved_bytes.all.peak %s"
                      % (S.format_size(st["allocated_bytes.all.peak"]),
                         S.format_size(st["reserved_bytes.all.peak"])), out)
        for line in ("peak reserved:", "peak live:", "at the live peak"):
            self.assertNotIn(line, out)
        out = cuprof("explain", path, rc=0).stdout
        self.assertEqual(out.splitlines()[1],
                         "note: recorded with CUPROF_HISTORY=state, which keeps at most the last "
                         "entry: this is the state around it, not the run's peak; record with "
                         "CUPROF_HISTORY=all to explain that")
        # The default history names the peaks and needs no note.
        path, _, _ = record("train_loop", "summary-all")
        self.assertNotIn("note: recorded with", cuprof("explain", path, rc=0).stdout)


class Stats(unittest.TestCase):
    def test_counters_of_each_app(self):
        for app in APP_NAMES:
            path, snap, _ = record(app, "stats-" + app, SIMCUDA_MEM="1100M")
            got = json.loads(cuprof("stats", path, rc=0).stdout)
            want = snap["cuprof"]["stats"][0]
            self.assertEqual({k: got[k] for k in want}, want, app)
            self.assertEqual(got["allocated_bytes.all.current"],
                             sum(b["size"] for _, b in blocks(snap)), app)
            self.assertEqual(got["reserved_bytes.all.current"],
                             sum(s["total_size"] for s in snap["segments"]), app)
            trace = snap["device_traces"][0]
            self.assertEqual(got["num_device_alloc"],
                             sum(1 for e in trace if e["action"] == "segment_alloc"), app)
            self.assertEqual(got["allocation.all.allocated"],
                             sum(1 for e in trace if e["action"] == "alloc"), app)
            self.assertEqual(got["num_ooms"], sum(1 for e in trace if e["action"] == "oom"), app)


class Timeline(unittest.TestCase):
    def test_counters_match_the_snapshot(self):
        path, snap, res = record("threads", "timeline")
        ser = S.series(snap, 0)
        out = os.path.join(WORK, "timeline.json")
        cuprof("timeline", path, "-o", out, rc=0)
        with open(out) as f:
            ev = json.load(f)["traceEvents"]
        alloc = [e["args"]["bytes"] for e in ev
                 if e["ph"] == "C" and e["name"] == "allocated (device 0)"]
        res_ = [e["args"]["bytes"] for e in ev
                if e["ph"] == "C" and e["name"] == "reserved (device 0)"]
        self.assertEqual(max(alloc), max(v[0] for v in ser))
        self.assertEqual(alloc[-1], ser[-1][0])
        self.assertEqual(max(res_), max(v[1] for v in ser))
        self.assertEqual(res_[-1], sum(s["total_size"] for s in snap["segments"]))
        trace = snap["device_traces"][0]
        segs = [e for e in ev if e["ph"] == "i" and e["name"] == "segment_alloc"]
        self.assertEqual(sorted(int(e["args"]["addr"], 16) for e in segs),
                         sorted(e["addr"] for e in trace if e["action"] == "segment_alloc"))


class Flamegraph(unittest.TestCase):
    def test_folded_stacks_at_peak_and_end(self):
        path, snap, res = record("train_loop", "flame")
        ser = S.series(snap, 0)
        _, plive_at = S.peak([v[0] for v in ser])
        for at, index in (("peak", plive_at), ("end", None)):
            want = {}
            whole = {}
            for size, frames in S.live_blocks(snap, 0, index).values():
                key = ";".join(S.frame_text(f) for f in reversed(S.user_frames(frames)))
                want[key] = want.get(key, 0) + size
                key = ";".join(S.frame_text(f) for f in reversed(frames))
                whole[key] = whole.get(key, 0) + size
            for options, expected in (((), want), (("--all-frames",), whole)):
                got = {}
                for line in cuprof("flamegraph", "--at", at, *options, path,
                                   rc=0).stdout.splitlines():
                    stack, n = line.rsplit(" ", 1)
                    got[stack] = int(n)
                self.assertEqual(got, expected, (at, options))
            # libc's start-up frames are hidden: every folded stack starts at main.
            self.assertTrue(all(k.startswith("main (") for k in want), want)
        self.assertEqual(sum(got.values()), int(res["leaked_bytes"]))
        self.assertEqual(sum(want.values()), int(res["leaked_bytes"]))


def replay_check(test, path, snap, what, **extra):
    m = cache_allocs(snap)
    p = cuprof("replay", "--check", path, **extra)
    test.assertIn("reproduced %d/%d allocations\n" % (m, m), p.stdout, what)
    test.assertEqual(p.returncode, 0, what)
    return p


class Replay(unittest.TestCase):
    CONFS = ("", "max_split_size_mb:64", "roundup_power2_divisions:4",
             "garbage_collection_threshold:0.5,max_split_size_mb:32")

    def test_every_app_every_setting(self):
        for app in APP_NAMES:
            for conf in self.CONFS:
                name = "replay-%s-%d" % (app, self.CONFS.index(conf))
                path, snap, _ = record(app, name, *light(app),
                                       options=("--alloc-conf", conf), SIMCUDA_MEM="1100M")
                p = replay_check(self, path, snap, (app, conf))
                row = re.search(r"(?m)^setting +(.+)$", p.stdout).group(1).strip()
                self.assertEqual(row, conf or "(defaults)")  # never cut to the column's width
                stats = snap["cuprof"]["stats"][0]
                for row_name, key in (("peak reserved", "reserved_bytes.all.peak"),
                                      ("peak allocated", "allocated_bytes.all.peak")):
                    row = re.search(r"(?m)^%s +(.+)$" % row_name, p.stdout).group(1).split()
                    self.assertEqual(" ".join(row[:2]), S.format_size(stats[key]),
                                     (app, conf, row_name))

    def test_empty_cache_cuts(self):
        # Segments released by the program's empty_cache right before a request that makes a
        # segment (not an OOM retry: the cache could have served it), replayed whole and from
        # every cut.
        path, snap, res = record("empty_cache", "cut-empty_cache")
        self.assertEqual(res["allocs"], "53")
        replay_check(self, path, snap, ("empty_cache",))
        MidRun.check_cuts(self, snap, 1, ("empty_cache",))


class MidRun(unittest.TestCase):
    def test_ring_dropped_entries(self):
        # A small ring: the snapshot's segments hold more than its trace explains.
        for app in ("train_loop", "driver_api", "threads"):
            confs = ("", "max_split_size_mb:64", "roundup_power2_divisions:4")
            for n in (150, 300):
                for conf in confs:
                    path, snap, _ = record(app, "mid-%s-%d" % (app, n), *light(app),
                                           options=("--alloc-conf", conf),
                                           CUPROF_MAX_ENTRIES=str(n))
                    self.assertEqual(len(snap["device_traces"][0]), n)
                    self.assertGreater(snap["cuprof"]["dropped_entries"][0], 0)
                    replay_check(self, path, snap, (app, n, conf))

    def check_cuts(self, snap, step, what):
        trace = snap["device_traces"][0]
        for nth, cut in enumerate(range(1, len(trace), step)):
            mid = dict(snap, device_traces=[trace[cut:]])
            path = os.path.join(WORK, "cut.pickle")
            with open(path, "wb") as f:
                pickle.dump(mid, f, protocol=4)
            replay_check(self, path, mid, what + (cut,), **leak_check(nth))

    def test_every_cut(self):
        # The history cut at every third entry: each start state is rebuilt from the segments.
        # With rounding divisions the rebuilt blocks keep their recorded (rounded) sizes
        # (train_loop: one thread, the same history every run).
        for conf in ("", "max_split_size_mb:64", "roundup_power2_divisions:4"):
            _, snap, _ = record("train_loop", "cut-train_loop", "6",
                                options=("--alloc-conf", conf))
            self.check_cuts(snap, cut_step(3, 23), ("train_loop", conf))

    def test_threads_cuts(self):
        # threads: five threads on their own streams plus stream 0, blocks freed across
        # iterations; the interleaving, so the history, differs from run to run. Its cuts often
        # leave a live large block holding an unsplit remainder (up to 1 MiB) that no entry shows,
        # in front of a free block larger than 1 MiB: the replay learns the smallest remainder
        # the recorded decisions prove (the hand-built case is in test_replay.py). Three recorded
        # runs, one per setting, each cut at every fourth entry (every cut in scripts/stress),
        # all M/M.
        for conf in ("", "max_split_size_mb:64", "roundup_power2_divisions:4"):
            _, snap, res = record("threads", "cut-threads", "5", "120",
                                  options=("--alloc-conf", conf))
            self.assertEqual(res["allocs"], "600")
            self.check_cuts(snap, cut_step(4, 59), ("threads", conf))

class MidRunExpandable(unittest.TestCase):
    # Histories recorded with expandable_segments:True, cut at many points and through small
    # rings: the starting state's runs are rebuilt as mapped runs of their reservations, and
    # every decision (address, pages mapped) is reproduced.
    CONF = ("--alloc-conf", "expandable_segments:True")

    # train_loop: every other cut. threads: six streams (five threads and stream 0), twelve
    # reservations, an interleaving that differs from run to run; a cut often leaves two live
    # blocks of one stream back to back, each holding a free piece of 1 MiB or less behind it
    # until the starting state stands (they once gave them back in the wrong order): every
    # seventh cut of two recorded runs, each checked exactly. empty_cache: every cut, among them
    # those that start with a free 512 KiB piece at the start of a large-pool run right after
    # an unmapped page (rebuilt by mapping that page too and unmapping it again), and those
    # where the program empties the cache right before a request that maps. Under ASan fewer;
    # every cut of each in scripts/stress.
    def test_every_cut(self):
        for app, args, step, runs in (("train_loop", ("6",), cut_step(2, 27), 1),
                                      ("threads", ("5", "120"), cut_step(7, 83), 2),
                                      ("empty_cache", (), cut_step(1, 11), 1)):
            for run in range(runs):
                _, snap, _ = record(app, "cutx-" + app, *args, options=self.CONF)
                self.assertTrue(all(s["is_expandable"] for s in snap["segments"]))
                MidRun.check_cuts(self, snap, step, (app, run))

    def test_free_piece_after_unmapped_page(self):
        # empty_cache's first empty unmaps the 20 MiB page under A and leaves a free 512 KiB
        # piece at the start of the mapped run, in front of B: PyTorch's rules reach it (what
        # unmap_block leaves of a free block after its last whole page), and a history that
        # starts there replays from it (it once counted as a block that could not be placed).
        _, snap, _ = record("empty_cache", "piece", options=self.CONF)
        trace = snap["device_traces"][0]
        u = next(i for i, e in enumerate(trace) if e["action"] == "segment_unmap")
        self.assertEqual((trace[u]["size"], trace[u + 2]["size"]), (20 << 20, 20 << 20))
        base = trace[u]["addr"]
        self.assertEqual(trace[u + 1]["addr"], base + (20 << 20) + (2 << 20) + (512 << 10))
        self.assertEqual((trace[u + 2]["action"], trace[u + 3]["addr"]), ("segment_map", base))
        mid = dict(snap, device_traces=[trace[u + 1:]])
        path = os.path.join(WORK, "piece-cut.pickle")
        with open(path, "wb") as f:
            pickle.dump(mid, f, protocol=4)
        p = replay_check(self, path, mid, ("piece",))
        self.assertNotIn("could not be placed", p.stdout)

    def test_ring_dropped_entries(self):
        for app in ("train_loop", "threads"):
            for n in (150, 300):
                path, snap, _ = record(app, "midx-%s-%d" % (app, n), *light(app),
                                       options=self.CONF,
                                       CUPROF_MAX_ENTRIES=str(n))
                self.assertGreater(snap["cuprof"]["dropped_entries"][0], 0)
                p = replay_check(self, path, snap, (app, n))
                self.assertIn("expandable reservation", p.stderr)


class Diff(unittest.TestCase):
    def test_growth_between_two_dumps(self):
        a = os.path.join(WORK, "diff-a.pickle")
        b = os.path.join(WORK, "diff-b.pickle")
        for f in (a, b):
            if os.path.exists(f):
                os.unlink(f)
        p = cuprof("run", "--sim", "-q", "-o", b, "--", DUMP_TWICE, a, b, rc=0,
                   CUPROF_DUMP_ON="signal")
        res = dict(kv.split("=", 1) for kv in p.stdout.split(":", 1)[1].split())
        sa, sb = (pickle.load(open(f, "rb")) for f in (a, b))

        def by_site(snap):
            out = {}
            for _, blk in blocks(snap):
                key = tuple(S.frame_text(f) for f in S.user_frames(blk["frames"]))
                out[key] = out.get(key, 0) + blk["requested_size"]
            return out
        wa, wb = by_site(sa), by_site(sb)
        self.assertEqual(sum(wa.values()), int(res["param_bytes"]))
        self.assertEqual(sum(wb.values()) - sum(wa.values()),
                         int(res["grown"]) - int(res["freed_bytes"]))
        got = json.loads(cuprof("diff", "--json", a, b, rc=0).stdout)
        self.assertEqual(got["growth_bytes"], int(res["grown"]) - int(res["freed_bytes"]))
        sites = {tuple(S.frame_text(f) for f in s["frames"]): s for s in got["sites"]}
        for key in set(wa) | set(wb):
            if wa.get(key, 0) == wb.get(key, 0):
                continue
            s = sites[key]
            self.assertEqual((s["a_bytes"], s["b_bytes"], s["growth"]),
                             (wa.get(key, 0), wb.get(key, 0), wb.get(key, 0) - wa.get(key, 0)))
        grew = [s for s in got["sites"] if s["growth"] > 0]
        self.assertEqual(len(grew), 1)
        self.assertEqual(grew[0]["growth"], int(res["grown"]))
        self.assertEqual(grew[0]["frames"][0]["name"], "activations")
        new = {s["address"]: s["total_size"] for s in sb["segments"]}
        for s in sa["segments"]:
            new.pop(s["address"], None)
        dev = got["devices"][0]
        self.assertEqual((dev["new_segments"], dev["new_bytes"]), (len(new), sum(new.values())))
        self.assertEqual(dev["reserved_b"] - dev["reserved_a"],
                         sum(s["total_size"] for s in sb["segments"])
                         - sum(s["total_size"] for s in sa["segments"]))
        text = cuprof("diff", a, b, rc=0).stdout
        self.assertIn("live bytes at the end: +%s from %s to %s\n"
                      % (S.format_size(got["growth_bytes"]), a, b), text)
        self.assertIn("  +%s on device 0 (0 bytes -> %s)\n      activations ("
                      % ((S.format_size(int(res["grown"])),) * 2), text)


class Oom(unittest.TestCase):
    def test_oom_shown_with_what_was_free(self):
        path, snap, res = record("oom", "oom", SIMCUDA_MEM="1100M")
        trace = snap["device_traces"][0]
        ooms = [e for e in trace if e["action"] == "oom"]
        self.assertEqual(len(ooms), 1)  # the dump on the first OOM
        self.assertEqual(ooms[0]["device_free"], int(res["free_full"]))
        out = cuprof("summary", path, rc=0).stdout
        self.assertIn("OOM events: 1", out)
        self.assertIn("entry %d " % trace.index(ooms[0]), out)
        self.assertIn("256.00 MiB requested on stream 0; the device had %s free"
                      % S.format_size(int(res["free_full"])), out)
        reserved = int(res["blocks"]) * (256 << 20)
        self.assertIn("%s was reserved" % S.format_size(reserved), out)
        # The exit dump holds both fills' OOMs.
        with open(os.path.join(WORK, "oom.1.pickle"), "rb") as f:
            last = pickle.load(f)
        self.assertEqual(sum(1 for e in last["device_traces"][0] if e["action"] == "oom"), 2)
        self.assertIn("OOM events: 2", cuprof("summary", os.path.join(WORK, "oom.1.pickle"),
                                              rc=0).stdout)


class Plot(unittest.TestCase):
    def test_demo_snapshot_in_chromium(self):
        sys.path.insert(0, os.path.join(SRC, "viewer", "tests"))
        import test_viewer
        if test_viewer.usable():
            self.skipTest(test_viewer.usable())
        path, _, _ = record("train_loop", "plot-demo")
        test_viewer.check_page(CUPROF, WORK, "demo", path)


def main():
    global CUPROF, WORK, APPS, DUMP_TWICE, SRC
    CUPROF, WORK, APPS, DUMP_TWICE, SRC = (os.path.abspath(a) for a in sys.argv[1:6])
    group = sys.argv[6]
    os.makedirs(WORK, exist_ok=True)
    classes = {c.__name__.lower(): c for c in (Run, Leaks, Summary, Stats, Timeline, Flamegraph,
                                               Replay, MidRun, MidRunExpandable, Diff, Oom,
                                               Plot)}
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(classes[group])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if result.skipped and not result.failures and not result.errors and \
            len(result.skipped) == result.testsRun:
        sys.exit(77)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
