#!/usr/bin/env python3
"""Two runs compared and gated (issue 27, items 4 and 5), on snapshots of real runs on the
simulated device (`cuprof run --sim`): diff_app without and with a 100 MiB workspace (v2's peak
100 MiB higher, the same bytes at the end), train_loop twice. Every figure is computed here from
the snapshots read back with pickle (snapshots.py's model), never taken from cuprof.

Usage: test_runs.py CUPROF WORKDIR DIFF_APP APPS_DIR SRC_DIR GROUP
GROUP: diff (cuprof diff), check (cuprof check), ranks (summary --ranks-only of runs without a
       rank), annotations (summary's phases)
"""
import collections
import json
import os
import pickle
import re
import subprocess
import sys
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_data  # noqa: E402
import snapshots as S  # noqa: E402
from test_apps import sanitizer_preload  # noqa: E402

CUPROF = WORK = DIFF_APP = APPS = SRC = None
MiB = S.MiB


def cuprof(*args, rc=None, **extra):
    env = dict(os.environ, **(sanitizer_preload() if args[0] == "run" else {}))
    for k in list(env):
        if k.startswith(("CUPROF_", "SIMCUDA_")) and k != "CUPROF_SOCKET_DIR":
            del env[k]
    env.update(extra)
    p = subprocess.run([CUPROF, *args], capture_output=True, text=True, timeout=300, env=env)
    if "Sanitizer" in p.stderr or "runtime error" in p.stderr:
        raise AssertionError("sanitizer report:\n" + p.stderr)
    if rc is not None and p.returncode != rc:
        raise AssertionError("cuprof %s: exit %d, expected %d\nstdout:\n%s\nstderr:\n%s"
                             % (" ".join(args), p.returncode, rc, p.stdout, p.stderr))
    return p


_recorded = {}


def record(program, name, *args, **extra):
    """Runs PROGRAM under `cuprof run --sim -q` once per name; (path, snapshot, its output)."""
    if name in _recorded:
        return _recorded[name]
    path = os.path.join(WORK, name + ".pickle")
    for f in os.listdir(WORK):
        if f.startswith(name + "."):
            os.unlink(os.path.join(WORK, f))
    p = cuprof("run", "--sim", "-q", "-o", path, "--", program, *args, rc=0, **extra)
    base = os.path.basename(program)
    line = [l for l in p.stdout.splitlines() if l.startswith(base + ": ")]
    assert len(line) == 1, p.stdout
    result = dict(kv.split("=", 1) for kv in line[0].split()[1:])
    with open(path, "rb") as f:
        snap = pickle.load(f)
    _recorded[name] = (path, snap, result)
    return _recorded[name]


def app_line(marker):
    """The line of diff_app.c marked `@marker`."""
    with open(os.path.join(SRC, "diff_app.c")) as f:
        hits = [i + 1 for i, l in enumerate(f) if l.rstrip().endswith("@%s */" % marker)]
    assert len(hits) == 1, (marker, hits)
    return hits[0]


# ---- The model: figures of one run, from the pickle ----

def user(frames):
    return tuple(S.frame_text(f) for f in S.user_frames(frames))


def peaks(snap, device=0):
    """((live peak, index), (reserved peak, index)): index = entries applied (0 = start)."""
    ser = S.series(snap, device)
    return S.peak([l for l, _ in ser]), S.peak([r for _, r in ser])


def sites_at(snap, at, device=0):
    out = collections.Counter()
    for size, frames in S.live_blocks(snap, device, at).values():
        out[user(frames)] += size
    return out


def site_changes(a, at_a, b, at_b):
    """{frames: (a_bytes, b_bytes, growth)} of the sites that changed."""
    sa, sb = sites_at(a, at_a), sites_at(b, at_b)
    return {k: (sa[k], sb[k], sb[k] - sa[k]) for k in set(sa) | set(sb) if sa[k] != sb[k]}


def segment_kinds(snap, device=0):
    return collections.Counter(
        (s["total_size"], s["segment_type"], s["is_expandable"], tuple(s["segment_pool_id"]),
         user(s["frames"])) for s in snap["segments"] if s["device"] == device)


def count(snap, action, device=0):
    return sum(1 for e in snap["device_traces"][device] if e["action"] == action)


def stat(snap, key, device=0):
    return snap["cuprof"]["stats"][device][key]


def where_text(snap, at, device=0):
    """analysis_where's words, from the model: the entry, its action and time since the first."""
    trace = snap["device_traces"][device]
    if at == 0:
        return "at the start of the history"
    e = trace[at - 1]
    return "at entry %d (%s), t=+%.6f s" % (at - 1, e["action"],
                                            (e["time_us"] - trace[0]["time_us"]) / 1e6)


def site_name(frames, n=3):
    return " < ".join(S.frame_text(f) for f in S.user_frames(frames)[:n])


def change(a, b):
    g = b - a
    text = ("+" if g >= 0 else "-") + S.format_size(abs(g))
    if a > 0 and g != 0:
        text += " (%+.1f%%)" % (100.0 * g / a)
    return text


class Diff(unittest.TestCase):
    def test_v2_peak_side_by_side(self):
        """v2's peak is 100 MiB higher, its end the same: the peaks open the report, with where
        each happened and the call site that made it; the workspace is the site that grew at
        the peak; its segment is the one new segment."""
        pa, a, ra = record(DIFF_APP, "v1", "0")
        pb, b, rb = record(DIFF_APP, "v2", "100")
        (la, ia), (ra_, ja) = peaks(a)
        (lb, ib), (rb_, jb) = peaks(b)
        self.assertEqual((la, lb), (int(ra["peak"]), int(rb["peak"])))
        self.assertEqual(lb - la, 100 * MiB)
        got = json.loads(cuprof("diff", "--json", pa, pb, rc=0).stdout)
        self.assertEqual((got["a"], got["b"]), (pa, pb))
        self.assertEqual(got["growth_bytes"], 0)
        self.assertEqual(got["sites"], [])
        dev = got["devices"][0]
        for side, snap, live, i, res, j in (("a", a, la, ia, ra_, ja), ("b", b, lb, ib, rb_, jb)):
            s = dev[side]
            trace = snap["device_traces"][0]
            self.assertEqual((s["peak_allocated"]["bytes"], s["peak_allocated"]["entry"]),
                             (live, i - 1))
            self.assertEqual((s["peak_reserved"]["bytes"], s["peak_reserved"]["entry"]),
                             (res, j - 1))
            self.assertEqual(s["peak_allocated"]["time_us"], trace[i - 1]["time_us"])
            self.assertEqual(user(s["peak_allocated"]["frames"]), user(trace[i - 1]["frames"]))
            self.assertEqual(user(s["peak_reserved"]["frames"]), user(trace[j - 1]["frames"]))
            self.assertEqual(s["end_allocated"], sum(sites_at(snap, None).values()))
            self.assertEqual(s["end_reserved"], sum(x["total_size"] for x in snap["segments"]))
            self.assertEqual(s["segments"], len(snap["segments"]))
            self.assertEqual((s["segment_allocs"], s["segment_frees"]),
                             (count(snap, "segment_alloc"), count(snap, "segment_free")))
            self.assertEqual((s["counted_allocs"], s["counted_frees"]),
                             (stat(snap, "num_device_alloc"), stat(snap, "num_device_free")))
            self.assertEqual((s["leaked_bytes"], s["leaked_blocks"], s["ooms"]), (MiB, 1, 0))
        self.assertEqual(dev["peak_allocated_growth"], 100 * MiB)
        self.assertEqual(dev["peak_reserved_growth"], rb_ - ra_)
        # B's peak was made by the workspace.
        frames = dev["b"]["peak_allocated"]["frames"]
        self.assertEqual((frames[1]["name"], frames[1]["line"]), ("workspace", app_line("extra")))
        # Call sites at each run's peak: only the workspace changed.
        want = site_changes(a, ia, b, ib)
        self.assertEqual(len(want), 1)
        self.assertEqual({user(s["frames"]): (s["a_bytes"], s["b_bytes"], s["growth"])
                          for s in dev["sites_at_peak"]}, want)
        self.assertEqual(list(want.values()), [(0, 100 * MiB, 100 * MiB)])
        self.assertEqual(dev["sites_at_end"], [])
        # Segments by kind: the model's counts; one new 100 MiB segment.
        ka, kb = segment_kinds(a), segment_kinds(b)
        self.assertEqual({(k["size"], k["pool"], k["expandable"], tuple(k["pool_id"]),
                           user(k["frames"])): (k["a_count"], k["b_count"])
                          for k in dev["segment_kinds"]},
                         {k: (ka[k], kb[k]) for k in set(ka) | set(kb)})
        self.assertEqual((dev["new_segments"], dev["new_bytes"], dev["released_segments"]),
                         (1, 100 * MiB, 0))
        # The text: the peaks side by side, where they happened, the site that grew.
        text = cuprof("diff", pa, pb, rc=0).stdout
        self.assertTrue(text.startswith("A: %s\nB: %s\n== device 0\n" % (pa, pb)), text[:200])
        row = "  %-34s %14s %14s  %s\n"
        self.assertIn(row % ("peak allocated", S.format_size(la), S.format_size(lb),
                             change(la, lb)), text)
        self.assertIn(row % ("peak reserved", S.format_size(ra_), S.format_size(rb_),
                             change(ra_, rb_)), text)
        self.assertIn("  %-34s %14d %14d  %+d\n" % ("device allocations (segment_alloc)",
                                                   count(a, "segment_alloc"),
                                                   count(b, "segment_alloc"),
                                                   count(b, "segment_alloc")
                                                   - count(a, "segment_alloc")), text)
        trace = b["device_traces"][0]
        self.assertIn("                  B: %s: %s\n"
                      % (where_text(b, ib), site_name(trace[ib - 1]["frames"])), text)
        self.assertIn("  peak allocated  A: %s: %s\n"
                      % (where_text(a, ia), site_name(a["device_traces"][0][ia - 1]["frames"])),
                      text)
        self.assertIn("call sites at each run's peak of allocated bytes (largest growth first):\n"
                      "  +100.00 MiB on device 0 (0 bytes -> 100.00 MiB)\n", text)
        self.assertIn("live bytes at the end: +0 bytes from %s to %s\n" % (pa, pb), text)
        self.assertIn("    1 new segment (100.00 MiB), 0 released (0 bytes)\n"
                      "      + 1 x 100.00 MiB (large pool): 0 in A, 1 in B\n", text)

    def test_same_program_twice(self):
        """Two runs of train_loop: nothing changed, and no segment is new or released (their
        addresses differ from run to run; they are matched by size, pool and call site)."""
        train = os.path.join(APPS, "train_loop")
        pa, a, _ = record(train, "train1")
        pb, b, _ = record(train, "train2")
        self.assertNotEqual({s["address"] for s in a["segments"]},
                            {s["address"] for s in b["segments"]})
        got = json.loads(cuprof("diff", "--json", pa, pb, rc=0).stdout)
        dev = got["devices"][0]
        ka, kb = segment_kinds(a), segment_kinds(b)
        self.assertEqual(ka, kb)
        self.assertEqual((dev["new_segments"], dev["released_segments"]), (0, 0))
        self.assertEqual(dev["segments_a"], len(a["segments"]))
        (la, ia), (ra, ja) = peaks(a)
        (lb, ib), _ = peaks(b)
        self.assertEqual((dev["a"]["peak_allocated"]["bytes"], dev["b"]["peak_allocated"]["bytes"]),
                         (la, lb))
        self.assertEqual({user(s["frames"]): s["growth"] for s in dev["sites_at_peak"]},
                         {k: v[2] for k, v in site_changes(a, ia, b, ib).items()})
        text = cuprof("diff", pa, pb, rc=0).stdout
        self.assertIn("    0 new segments (0 bytes), 0 released (0 bytes)\n", text)
        self.assertNotRegex(text, r"\n      [+-] \d+ x ")


class Ranks(unittest.TestCase):
    def test_runs_without_a_rank_are_named_by_their_path(self):
        """summary of runs that set no rank variable: each named by its file, never "rank -"."""
        p1, a, _ = record(DIFF_APP, "v1", "0")
        p2, b, _ = record(DIFF_APP, "v2", "100")
        p3, c, _ = record(DIFF_APP, "noleak", "0", "3", "0")
        self.assertEqual([s["cuprof"]["rank"] for s in (a, b, c)], [-1, -1, -1])
        out = cuprof("summary", "--ranks-only", p1, p2, p3, rc=0).stdout
        self.assertNotIn("rank -", out)
        live = {p: peaks(s)[0][0] for p, s in ((p1, a), (p2, b), (p3, c))}
        res = {p: peaks(s)[1][0] for p, s in ((p1, a), (p2, b), (p3, c))}
        order = sorted([p1, p2, p3])  # rows without a rank are ordered by path; ties: the first
        hi = max(live, key=lambda p: (live[p], -order.index(p)))
        lo = min(live, key=lambda p: (live[p], order.index(p)))
        self.assertIn("spread of peak allocated: max/min %.2fx (highest %s: %s, lowest %s: %s)\n"
                      % (live[hi] / live[lo], hi, S.format_size(live[hi]), lo,
                         S.format_size(live[lo])), out)
        median = sorted(res.values())[1]
        self.assertIn("outliers of peak reserved (more than 10%% from the median %s): %s %s "
                      "(%+.0f%%)\n" % (S.format_size(median), p2, S.format_size(res[p2]),
                                       100.0 * (res[p2] - median) / median), out)
        leak = [k for k in sites_at(a, None) if k not in sites_at(c, None)]
        self.assertEqual(len(leak), 1)
        self.assertIn("  1.00 MiB more on %s (1.00 MiB) than on %s (0 bytes): %s\n"
                      % (p1, p3, " < ".join(leak[0][:3])), out)


def largest_site(snap, at):
    """(frames, bytes) of the call site holding the most at `at` (ties: any)."""
    sites = sites_at(snap, at)
    top = max(sites.items(), key=lambda kv: kv[1])
    return top


def leak_site(snap):
    by = collections.Counter()
    for seg in snap["segments"]:
        for blk in seg["blocks"]:
            if blk["state"] == "active_allocated":
                by[user(blk["frames"])] += blk["requested_size"]
    return max(by.items(), key=lambda kv: kv[1])


class Check(unittest.TestCase):
    def test_budgets_without_a_baseline(self):
        pb, b, _ = record(DIFF_APP, "v2", "100")
        (live, i), (res, _) = peaks(b)
        limit = res - 68 * MiB  # crossed by 68 MiB
        p = cuprof("check", "--max-peak-reserved", "%dMiB" % (limit // MiB),
                   "--max-peak-allocated", str(live), "--no-leaks", "--no-oom", pb, rc=1)
        frames, top = largest_site(b, i)
        lframes, lbytes = leak_site(b)
        self.assertEqual(p.stdout.splitlines(), [
            "%s: device 0: peak reserved %s over --max-peak-reserved %s (by 68.00 MiB); the "
            "largest call site at the peak: %s, %s" % (pb, S.format_size(res),
                                                      S.format_size(limit), S.format_size(top),
                                                      " < ".join(frames[:3])),
            "%s: device 0: 1 block (1.00 MiB) still allocated at the end, --no-leaks; the "
            "largest call site: %s, %s" % (pb, S.format_size(lbytes), " < ".join(lframes[:3])),
            "cuprof check: 2 budgets crossed in 1 of 1 file (--max-peak-reserved %s, "
            "--max-peak-allocated %s, --no-leaks, --no-oom)" % (S.format_size(limit),
                                                                S.format_size(live))])
        self.assertTrue(lframes[1].startswith("main (") and
                        lframes[1].endswith("/diff_app.c:%d)" % app_line("leak")), lframes)
        self.assertEqual(top, 100 * MiB)
        # Within every budget: exit 0, one line.
        p = cuprof("check", "--max-peak-reserved", "1.5GiB", "--max-peak-allocated", "80GB",
                   "--no-oom", pb, rc=0)
        self.assertEqual(p.stdout, "cuprof check: 1 file within every budget "
                                   "(--max-peak-reserved 1.50 GiB, --max-peak-allocated "
                                   "74.51 GiB, --no-oom)\n")

    def test_growth_against_a_baseline(self):
        pa, a, _ = record(DIFF_APP, "v1", "0")
        pb, b, _ = record(DIFF_APP, "v2", "100")
        (la, ia), (ra, _) = peaks(a)
        (lb, ib), (rb, _) = peaks(b)
        grew = site_changes(a, ia, b, ib)
        (frames, (_, _, g)), = grew.items()
        name = " < ".join(frames[:3])
        p = cuprof("check", "--baseline", pa, "--max-growth", "5%", pb, pa, rc=1)
        most = "; the call site that grew most at the peak: +%s, %s" % (S.format_size(g), name)
        self.assertEqual(p.stdout.splitlines(), [
            "%s: device 0: peak allocated grew +%s (%+.1f%%) from %s (%s -> %s), over "
            "--max-growth 5%%%s" % (pb, S.format_size(lb - la), 100.0 * (lb - la) / la, pa,
                                    S.format_size(la), S.format_size(lb), most),
            "%s: device 0: peak reserved grew +%s (%+.1f%%) from %s (%s -> %s), over "
            "--max-growth 5%%%s" % (pb, S.format_size(rb - ra), 100.0 * (rb - ra) / ra, pa,
                                    S.format_size(ra), S.format_size(rb), most),
            "%s: device 0: a call site grew +%s at the peak (%+.1f%% of %s's peak allocated), "
            "over --max-growth 5%%: %s" % (pb, S.format_size(g), 100.0 * g / la, pa, name),
            "cuprof check: 3 budgets crossed in 1 of 2 files (--max-growth 5%)"])
        self.assertEqual(frames[1].split(" (")[0], "workspace")
        # A growth in bytes: 100 MiB is within 100MiB, over 99MiB.
        cuprof("check", "--baseline", pa, "--max-growth", "100MiB", pb, rc=0)
        p = cuprof("check", "--baseline", pa, "--max-growth", "99MiB", pb, rc=1)
        self.assertEqual(len(p.stdout.splitlines()), 4)
        # The same run against itself: nothing grew.
        p = cuprof("check", "--baseline", pa, "--max-growth", "0%", pa, rc=0)
        self.assertEqual(p.stdout, "cuprof check: 1 file within every budget "
                                   "(--max-growth 0%)\n")

    def test_json_and_junit(self):
        pa, a, _ = record(DIFF_APP, "v1", "0")
        pb, b, _ = record(DIFF_APP, "v2", "100")
        (la, _), (ra, _) = peaks(a)
        (lb, _), (rb, _) = peaks(b)
        text = cuprof("check", "--baseline", pa, "--max-growth", "5%", "--no-leaks",
                      "--max-peak-allocated", "100MiB", pb, pa, rc=1).stdout.splitlines()
        got = json.loads(cuprof("check", "--json", "--baseline", pa, "--max-growth", "5%",
                                "--no-leaks", "--max-peak-allocated", "100MiB", pb, pa,
                                rc=1).stdout)
        self.assertEqual((got["baseline"], got["files"], got["crossed"], got["unreadable"]),
                         (pa, [pb, pa], 6, []))
        rows = {(r["file"], r["check"]): r for r in got["results"]}
        self.assertEqual(len(rows), 10)
        r = rows[(pb, "growth_allocated")]
        self.assertEqual((r["crossed"], r["value"], r["base"], r["growth"], r["limit"]),
                         (True, lb, la, lb - la, la * 5 // 100))
        r = rows[(pb, "growth_reserved")]
        self.assertEqual((r["crossed"], r["value"], r["base"]), (True, rb, ra))
        r = rows[(pa, "peak_allocated")]
        self.assertEqual((r["crossed"], r["value"], r["limit"]), (False, la, 100 * MiB))
        crossed = [r for r in got["results"] if r["crossed"]]
        self.assertEqual([(r["file"], r["check"]) for r in crossed],
                         [(pb, "peak_allocated"), (pb, "growth_allocated"),
                          (pb, "growth_reserved"), (pb, "growth_site"), (pb, "leaks"),
                          (pa, "leaks")])
        self.assertEqual(["%s: device 0: %s" % (r["file"], r["message"]) for r in crossed],
                         text[:-1])
        # JUnit: replaces what was there, read back with ElementTree.
        junit = os.path.join(WORK, "junit.xml")
        with open(junit, "w") as f:
            f.write("old")
        cuprof("check", "--junit", junit, "--baseline", pa, "--max-growth", "5%", "--no-leaks",
               "--max-peak-allocated", "100MiB", pb, pa, rc=1)
        root = ET.parse(junit).getroot()
        suite = root.find("testsuite")
        self.assertEqual((root.tag, root.get("tests"), root.get("failures"), root.get("errors")),
                         ("testsuites", "10", str(len(crossed)), "0"))
        cases = suite.findall("testcase")
        self.assertEqual(len(cases), 10)
        failures = [(c.get("classname"), c.get("name"), c.find("failure").get("message"))
                    for c in cases if c.find("failure") is not None]
        self.assertEqual([f[2] for f in failures], text[:-1])
        self.assertEqual([f[1] for f in failures][:2],
                         ["device 0: --max-peak-allocated 100.00 MiB",
                          "device 0: --max-growth 5% (peak allocated)"])
        self.assertTrue(all(f[0] in (pa, pb) for f in failures))
        passed = [c for c in cases if c.find("failure") is None]
        self.assertTrue(all(c.find("system-out") is not None for c in passed))
        self.assertEqual(os.stat(junit).st_mode & 0o777, 0o666 & ~current_umask())
        # A file that cannot be read: exit 2, an error case in the XML, the others checked.
        missing = os.path.join(WORK, "missing.pickle")
        p = cuprof("check", "--junit", junit, "--no-leaks", pa, missing, rc=2)
        self.assertEqual(len(p.stderr.splitlines()), 1)
        self.assertIn(missing, p.stderr)
        root = ET.parse(junit).getroot()
        errors = [c for c in root.iter("testcase") if c.find("error") is not None]
        self.assertEqual([(c.get("classname"), c.get("name")) for c in errors], [(missing, "read")])
        self.assertEqual(root.get("errors"), "1")
        # A destination that cannot be written: one line, exit 2, nothing else touched.
        p = cuprof("check", "--junit", WORK, "--no-leaks", pa, rc=2)
        self.assertEqual(len(p.stderr.splitlines()), 1)

    def test_oom(self):
        path, snap, res = record(os.path.join(APPS, "oom"), "oom", SIMCUDA_MEM="1100M")
        trace = snap["device_traces"][0]
        first = next(i for i, e in enumerate(trace) if e["action"] == "oom")
        p = cuprof("check", "--no-oom", path, rc=1)
        self.assertEqual(p.stdout.splitlines()[0],
                         "%s: device 0: 1 OOM, --no-oom; the first: %s requested at entry %d: %s"
                         % (path, S.format_size(trace[first]["size"]), first,
                            site_name(trace[first]["frames"])))

    def test_bad_usage(self):
        pa, _, _ = record(DIFF_APP, "v1", "0")
        for args, words in (
                (["--max-peak-reserved", "10XB"],
                 ['--max-peak-reserved: bad value "10XB": expected a size such as 4096, 300M, '
                  '300MiB or 1.5GiB (K, M, G and KiB, MiB, GiB are powers of 1024; KB, MB, GB '
                  'of 1000)']),
                (["--max-peak-allocated", "-1"], ['--max-peak-allocated: bad value "-1"']),
                (["--baseline", pa, "--max-growth", "5x%"],
                 ['--max-growth: bad value "5x%": expected a percentage such as 5% or a size']),
                (["--max-growth", "5%"], ["--max-growth needs --baseline"]),
                ([], ["no budget given"]),
                (["--baseline", os.path.join(WORK, "none.pickle"), "--no-leaks"],
                 ["none.pickle"])):
            p = cuprof("check", *args, pa, rc=2)
            self.assertEqual(p.stdout, "")
            self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
            self.assertTrue(p.stderr.startswith("cuprof: "), p.stderr)
            for w in words:
                self.assertIn(w, p.stderr)


def model_marks(snap, device=0):
    """[(entry, label, live, reserved, peak_live, peak_live_state, peak_reserved, growth)]: each
    annotate entry, and each change of PyTorch's user_metadata (None: cleared), up to the next."""
    trace = snap["device_traces"][device]
    ser = S.series(snap, device)
    starts, meta = [], None
    for i, e in enumerate(trace):
        if e["action"] == "annotate":
            starts.append((i, e.get("user_metadata", "")))
            continue
        label = e.get("user_metadata") or None
        if label != meta:
            starts.append((i, label))
        meta = label
    out = []
    for k, (i, label) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(trace)
        # Peaks after each of the phase's own entries (end > i: a mark is an entry).
        lives = [ser[j][0] for j in range(i + 1, end + 1)]
        peak, at = S.peak(lives)
        out.append((i, label, ser[i][0], ser[i][1], peak, i + 1 + at,
                    max(ser[j][1] for j in range(i + 1, end + 1)), ser[end][0] - ser[i][0]))
    return out


def model_labels(marks):
    by = {}
    for m in marks:
        l = by.setdefault(m[1], {"count": 0, "peak": -1, "at": 0, "res": 0, "growth": 0,
                                 "first": m[0]})
        l["count"] += 1
        if m[4] > l["peak"]:
            l["peak"], l["at"] = m[4], m[5]
        l["res"] = max(l["res"], m[6])
        l["growth"] += m[7]
    return sorted(by.items(), key=lambda kv: kv[1]["first"])


def label_lines(marks):
    labels = model_labels(marks)
    lines = ["annotations: %d (%d label%s); per label, over its phases (each annotation up to "
             "the next):" % (len(marks), len(labels), "" if len(labels) == 1 else "s")]
    for label, l in labels:
        g = l["growth"]
        lines.append("  %s x%d: peak live %s (%s), peak reserved %s; live %s%s in all"
                     % ('"%s"' % label if label is not None else "(metadata cleared)", l["count"],
                        S.format_size(l["peak"]),
                        "entry %d" % (l["at"] - 1) if l["at"] else "at the start of the history",
                        S.format_size(l["res"]), "+" if g >= 0 else "-", S.format_size(abs(g))))
    return lines


def plot_annotations(html_path):
    """Each annotation's phase figures in the report page's data (viewer/DATA.md)."""
    return report_data.read(html_path).data["runs"][0]["devices"][0]["phases"]


class Annotations(unittest.TestCase):
    def check(self, path, snap, name):
        marks = model_marks(snap)
        out = cuprof("summary", path, rc=0).stdout
        lines = label_lines(marks)
        at = out.index(lines[0])
        self.assertEqual(out[at:].splitlines()[:len(lines)], lines)
        # --brief (run's one screen) keeps them.
        self.assertIn("\n".join(lines), cuprof("summary", "--brief", path, rc=0).stdout)
        html = os.path.join(WORK, name + ".html")
        cuprof("plot", "-o", html, path, rc=0)
        got = plot_annotations(html)
        trace = snap["device_traces"][0]
        self.assertEqual([(a["entry"], a["label"], a["live"], a["reserved"], a["peak_live"],
                           a["peak_live_at"], a["peak_reserved"], a["growth"]) for a in got],
                         marks)
        self.assertEqual([a["time_us"] for a in got], [trace[m[0]]["time_us"] for m in marks])
        return marks

    def test_cuprof_annotate(self):
        path, snap, _ = record(DIFF_APP, "v2", "100")
        marks = self.check(path, snap, "annotated")
        self.assertEqual([m[1] for m in marks], ["forward", "backward"] * 3)
        # The forward phase of step 1 holds the peak: the workspace's 100 MiB on top.
        self.assertEqual(marks[2][4], peaks(snap)[0][0])

    def test_pytorch_user_metadata(self):
        """PyTorch's user_metadata (set on every entry after _set_memory_metadata): a phase
        wherever it changes, "(metadata cleared)" where it went."""
        snap = S.pytorch_snapshot()
        trace = snap["device_traces"][0]
        for i, e in enumerate(trace):
            if i < 3:
                e["user_metadata"] = "load"
            elif i < 8:
                e["user_metadata"] = "train"
            elif i < 10:
                e["user_metadata"] = ""
            else:
                e["user_metadata"] = "train"
        path = os.path.join(WORK, "metadata.pickle")
        with open(path, "wb") as f:
            pickle.dump(snap, f, protocol=4)
        marks = self.check(path, snap, "metadata")
        self.assertEqual([(m[0], m[1]) for m in marks],
                         [(0, "load"), (3, "train"), (8, None), (10, "train")])


def current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def main():
    global CUPROF, WORK, DIFF_APP, APPS, SRC
    CUPROF, WORK, DIFF_APP, APPS, SRC = (os.path.abspath(a) for a in sys.argv[1:6])
    group = sys.argv[6]
    os.makedirs(WORK, exist_ok=True)
    classes = {c.__name__.lower(): c for c in (Diff, Ranks, Check, Annotations)}
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(classes[group])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
