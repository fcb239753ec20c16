#!/usr/bin/env python3
"""`cuprof` subcommands on hand-built PyTorch-layout snapshots (pickle protocols 4 and 2, JSON),
checked against numbers computed independently in snapshots.py.

Usage: test_cli.py CUPROF WORKDIR GROUP   (GROUP: read, leaks, summary, stats, flamegraph,
timeline, diff, plot, badinput, help)
"""
import json
import os
import pickle
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import snapshots as S  # noqa: E402

CUPROF = None
WORK = None


def run(*args, check_rc=None):
    p = subprocess.run([CUPROF, *args], capture_output=True, text=True, timeout=120)
    if "Sanitizer" in p.stderr or "runtime error" in p.stderr:
        raise AssertionError("sanitizer report:\n" + p.stderr)
    if check_rc is not None and p.returncode != check_rc:
        raise AssertionError("cuprof %s: exit %d, expected %d\nstdout:\n%s\nstderr:\n%s"
                             % (" ".join(args), p.returncode, check_rc, p.stdout, p.stderr))
    return p


def write(name, obj, fmt="pickle4"):
    path = os.path.join(WORK, name)
    if fmt == "json":
        with open(path, "w") as f:
            json.dump(obj, f)
    else:
        with open(path, "wb") as f:
            pickle.dump(obj, f, protocol=4 if fmt == "pickle4" else 2)
    return path


class Base(unittest.TestCase):
    def files(self, snap, stem):
        return [write(stem + ".pickle", snap, "pickle4"), write(stem + "-p2.pickle", snap, "pickle2"),
                write(stem + ".json", snap, "json")]


class Leaks(Base):
    def test_leaks_grouped_by_stack(self):
        snap = S.pytorch_snapshot()
        want = S.leaks_by_frames(snap)
        for path in self.files(snap, "leaks"):
            p = run("leaks", "--json", path, check_rc=1)
            got = json.loads(p.stdout)
            self.assertEqual(got["leaked_bytes"], sum(v[0] for v in want.values()))
            self.assertEqual(got["leaked_requested_bytes"], sum(v[1] for v in want.values()))
            self.assertEqual(got["leaked_blocks"], sum(v[2] for v in want.values()))
            sites = {(s["device"], tuple(S.frame_text(f) for f in s["frames"])):
                     [s["bytes"], s["requested_bytes"], s["blocks"]] for s in got["sites"]}
            self.assertEqual(sites, want)
            sizes = [s["bytes"] for s in got["sites"]]
            self.assertEqual(sizes, sorted(sizes, reverse=True))
            text = run("leaks", path, check_rc=1).stdout
            self.assertIn("3 blocks still allocated", text)
            self.assertIn("forward (model.c:42)", text)

    def test_no_leaks_exit_0(self):
        snap = S.pytorch_snapshot()
        for seg in snap["segments"]:
            for b in seg["blocks"]:
                b["state"] = "inactive"
                b["frames"] = []
        path = write("noleaks.pickle", snap)
        p = run("leaks", path, check_rc=0)
        self.assertIn("no leaks", p.stdout)


class Summary(Base):
    def check(self, snap, path):
        ser = S.series(snap, 0)
        plive, plive_at = S.peak([v[0] for v in ser])
        pres, pres_at = S.peak([v[1] for v in ser])
        out = run("summary", path, check_rc=0).stdout
        trace = snap["device_traces"][0]
        m = re.search(r"^peak reserved: (.+?) (at entry (\d+)|at the start)", out, re.M)
        self.assertIsNotNone(m, out)
        self.assertEqual(m.group(1), S.format_size(pres))
        if pres_at:
            self.assertEqual(int(m.group(3)), pres_at - 1)
        m = re.search(r"^peak live: +(.+?) (at entry (\d+)|at the start)", out, re.M)
        self.assertEqual(m.group(1), S.format_size(plive))
        if plive_at:
            self.assertEqual(int(m.group(3)), plive_at - 1)
            t = (trace[plive_at - 1]["time_us"] - trace[0]["time_us"]) / 1e6
            self.assertIn("t=+%.6f s" % t, out)
        self.assertIn("PyTorch CUDA memory summary, device ID 0", out)
        # The table rebuilt from the block table: allocated = active_allocated block sizes.
        alloc = sum(b["size"] for s in snap["segments"] for b in s["blocks"]
                    if b["state"] == "active_allocated")
        row = [l for l in out.splitlines() if l.startswith("| Allocated memory")][0]
        self.assertIn("%d KiB" % (alloc // 1024), row.replace("  ", " ").replace("  ", " "))
        # Top call sites at the end: the largest is the 8 MiB activation.
        live = S.live_blocks(snap, 0, None)
        by = {}
        for size, frames in live.values():
            key = tuple(S.frame_text(f) for f in frames)
            by[key] = by.get(key, 0) + size
        top = max(by.items(), key=lambda kv: kv[1])
        sec = out.split("top call sites by live bytes at the end:")[1]
        first = sec.strip().splitlines()
        self.assertTrue(first[0].strip().startswith("1. " + S.format_size(top[1])), first[0])
        self.assertEqual(first[1].strip(), top[0][0])
        # OOM: the request and what the device had free.
        self.assertIn("OOM events: 1", out)
        self.assertIn("40.00 MiB requested on stream 0; the device had 10.00 MiB free", out)
        return out

    def test_complete_history(self):
        snap = S.pytorch_snapshot()
        for path in self.files(snap, "summary"):
            out = self.check(snap, path)
            self.assertNotIn("starts mid-run", out)

    def test_mid_run_history(self):
        snap = S.pytorch_snapshot(mid_run=True)
        for path in self.files(snap, "midrun"):
            out = self.check(snap, path)
            start = S.series(snap, 0)[0]
            self.assertIn("starts mid-run with %s live and %s reserved"
                          % (S.format_size(start[0]), S.format_size(start[1])), out)

    def test_several_files(self):
        a = write("rank0.pickle", S.pytorch_snapshot())
        b = write("rank1.pickle", S.pytorch_snapshot(mid_run=True))
        out = run("summary", "--brief", a, b, check_rc=0).stdout
        # The cross-rank view first (PyTorch's files have no rank: "-"), then each file's report.
        self.assertEqual(out.count("== "), 3)
        self.assertTrue(out.startswith("== cross-rank view: 2 files\n"), out[:200])
        self.assertIn("== " + a, out)
        self.assertIn("== " + b, out)
        rows = [l.split() for l in out.splitlines()[2:4]]
        self.assertEqual([r[0] for r in rows], ["-", "-"])
        self.assertEqual(sorted(r[-1] for r in rows), sorted([a, b]))
        only = run("summary", "--ranks-only", a, b, check_rc=0).stdout
        self.assertNotIn("== " + a, only)


class Stats(Base):
    def test_rebuilt_from_block_table(self):
        snap = S.pytorch_snapshot()
        blocks = [(s, b) for s in snap["segments"] for b in s["blocks"]]
        for path in self.files(snap, "stats"):
            st = json.loads(run("stats", path, check_rc=0).stdout)
            self.assertEqual(list(st), sorted(st))
            self.assertEqual(st["allocated_bytes.all.current"],
                             sum(b["size"] for _, b in blocks if b["state"] == "active_allocated"))
            self.assertEqual(st["allocated_bytes.small_pool.current"],
                             sum(b["size"] for s, b in blocks if b["state"] == "active_allocated"
                                 and s["segment_type"] == "small"))
            self.assertEqual(st["reserved_bytes.all.current"],
                             sum(s["total_size"] for s in snap["segments"]))
            self.assertEqual(st["segment.all.current"], 2)
            self.assertEqual(st["segment.small_pool.current"], 1)
            self.assertEqual(st["active.all.current"], 3)
            self.assertEqual(st["requested_bytes.all.current"],
                             sum(b["requested_size"] for _, b in blocks
                                 if b["state"] == "active_allocated"))
            self.assertEqual(st["inactive_split_bytes.all.current"],
                             sum(b["size"] for _, b in blocks if b["state"] == "inactive"))
            self.assertEqual(st["reserved_bytes.all.peak"],
                             S.peak([v[1] for v in S.series(snap, 0)])[0])
            self.assertEqual(st["num_ooms"], 1)
            self.assertEqual(st["max_split_size"], -1)

    def test_recorded_counters(self):
        snap = S.pytorch_snapshot()
        stats = {"allocated_bytes.all.current": 12345, "allocated_bytes.all.peak": 99999,
                 "num_alloc_retries": 3, "reserved_bytes.large_pool.peak": 7 * S.MiB,
                 "max_split_size": -1}
        snap["cuprof"] = {"version": "0.1.0", "mode": "cache", "config": {}, "pid": 42,
                          "rank": 1, "host": "h", "argv": ["prog"], "stats": [stats],
                          "dropped_entries": [0]}
        for path in self.files(snap, "stats-rec"):
            st = json.loads(run("stats", path, check_rc=0).stdout)
            for k, v in stats.items():
                self.assertEqual(st[k], v, k)
            self.assertEqual(st["segment.all.current"], 0)   # not recorded: zero, not rebuilt
            self.assertEqual(len(st), 122)
            lst = json.loads(run("stats", "--all-devices", path, check_rc=0).stdout)
            self.assertEqual(lst, [st])
        run("stats", "--device", "3", path, check_rc=2)


class Flamegraph(Base):
    def test_folded_at_peak_and_end(self):
        snap = S.pytorch_snapshot()
        ser = S.series(snap, 0)
        _, plive_at = S.peak([v[0] for v in ser])
        for path in self.files(snap, "flame"):
            for at, index in (("peak", plive_at), ("end", None), ("6", 7)):
                want = {}
                for size, frames in S.live_blocks(snap, 0, index).values():
                    key = ";".join(S.frame_text(f) for f in reversed(frames)) or "[no stack]"
                    want[key] = want.get(key, 0) + size
                out = run("flamegraph", "--at", at, path, check_rc=0).stdout
                got = {}
                for line in out.splitlines():
                    stack, n = line.rsplit(" ", 1)
                    got[stack] = int(n)
                self.assertEqual(got, want, at)


class Timeline(Base):
    def test_counters_and_instants(self):
        snap = S.pytorch_snapshot()
        ser = S.series(snap, 0)
        for path in self.files(snap, "timeline"):
            out = os.path.join(WORK, "trace.json")
            run("timeline", path, "-o", out, check_rc=0)
            tr = json.load(open(out))
            ev = tr["traceEvents"]
            alloc = [e for e in ev if e["ph"] == "C" and e["name"] == "allocated (device 0)"]
            res = [e for e in ev if e["ph"] == "C" and e["name"] == "reserved (device 0)"]
            self.assertEqual(max(e["args"]["bytes"] for e in alloc), max(v[0] for v in ser))
            self.assertEqual(max(e["args"]["bytes"] for e in res), max(v[1] for v in ser))
            self.assertEqual(alloc[-1]["args"]["bytes"], ser[-1][0])
            ts = [e["ts"] for e in ev if "ts" in e]
            self.assertEqual(ts, sorted(ts))
            trace = snap["device_traces"][0]
            ooms = [e for e in ev if e["ph"] == "i" and e["name"] == "oom"]
            self.assertEqual(len(ooms), 1)
            self.assertEqual(ooms[0]["args"]["device_free"], 10 * S.MiB)
            self.assertEqual(ooms[0]["ts"], trace[-1]["time_us"] - trace[0]["time_us"])
            segs = [e for e in ev if e["ph"] == "i" and e["name"] == "segment_alloc"]
            self.assertEqual(sorted(int(e["args"]["addr"], 16) for e in segs), [S.S1, S.S2])


class Diff(Base):
    def test_growth_by_site_and_segment(self):
        a = S.pytorch_snapshot()
        b = S.pytorch_snapshot()
        # B: one more 4 MiB activation in a new 20 MiB segment.
        s3 = S.BASE + 0x4000000
        blk = S.block(s3, 4 * S.MiB, 4 * S.MiB, "active_allocated", S.F_ACT)
        rest = S.block(s3 + 4 * S.MiB, 16 * S.MiB, 0, "inactive", [])
        seg = dict(b["segments"][0], address=s3, blocks=[blk, rest], allocated_size=4 * S.MiB,
                   active_size=4 * S.MiB, requested_size=4 * S.MiB)
        b["segments"].append(seg)
        b["device_traces"][0] += [S.entry("segment_alloc", s3, 20 * S.MiB, S.F_ACT, t=100),
                                  S.entry("alloc", s3, 4 * S.MiB, S.F_ACT, t=101)]
        pa, pb = write("diff-a.pickle", a), write("diff-b.json", b, "json")
        got = json.loads(run("diff", "--json", pa, pb, check_rc=0).stdout)
        self.assertEqual(got["growth_bytes"], 4 * S.MiB)
        self.assertEqual(len(got["sites"]), 1)
        site = got["sites"][0]
        self.assertEqual([S.frame_text(f) for f in site["frames"]],
                         [S.frame_text(f) for f in S.F_ACT])
        self.assertEqual((site["a_bytes"], site["b_bytes"], site["growth"]),
                         (8 * S.MiB - 100, 12 * S.MiB - 100, 4 * S.MiB))
        dev = got["devices"][0]
        self.assertEqual((dev["new_segments"], dev["new_bytes"], dev["released_segments"]),
                         (1, 20 * S.MiB, 0))
        self.assertEqual(dev["reserved_b"] - dev["reserved_a"], 20 * S.MiB)
        text = run("diff", pa, pb, check_rc=0).stdout
        self.assertIn("+4.00 MiB on device 0", text)
        # Issue 27: segments are matched by size, pool and call site, never by address: B's
        # new segment is one more 20 MiB large-pool segment made at F_ACT (A has one).
        self.assertIn("      + 1 x 20.00 MiB (large pool): 1 in A, 2 in B\n          forward (", text)
        # The peaks, from the model: PyTorch's layout has no counters (null), only the history.
        for side, snap in (("a", a), ("b", b)):
            ser = S.series(snap, 0)
            (live, i), (res, j) = S.peak([x for x, _ in ser]), S.peak([r for _, r in ser])
            got_side = got["devices"][0][side]
            self.assertEqual((got_side["peak_allocated"]["bytes"], got_side["peak_allocated"]["entry"],
                              got_side["peak_reserved"]["bytes"], got_side["peak_reserved"]["entry"]),
                             (live, i - 1, res, j - 1))
            trace = snap["device_traces"][0]
            self.assertEqual(got_side["peak_allocated"]["frames"], trace[i - 1]["frames"])
            self.assertEqual(got_side["peak_reserved"]["seconds"],
                             (trace[j - 1]["time_us"] - trace[0]["time_us"]) / 1e6)
            self.assertEqual((got_side["counted_allocs"], got_side["segment_allocs"]),
                             (None, sum(1 for e in trace if e["action"] == "segment_alloc")))
            self.assertEqual(got_side["ooms"], 1)

    def test_a_device_only_in_b(self):
        """Devices are compared by number; one that only B has is all growth, said so."""
        a = S.pytorch_snapshot()
        b = S.pytorch_snapshot()
        base = S.BASE + 0x40000000
        blk = S.block(base, 2 * S.MiB, 2 * S.MiB, "active_allocated", S.F_TMP)
        seg = dict(b["segments"][0], device=1, address=base, total_size=2 * S.MiB,
                   blocks=[blk], allocated_size=2 * S.MiB, active_size=2 * S.MiB,
                   requested_size=2 * S.MiB, frames=S.F_TMP)
        b["segments"].append(seg)
        b["device_traces"].append([S.entry("segment_alloc", base, 2 * S.MiB, S.F_TMP, t=5),
                                   S.entry("alloc", base, 2 * S.MiB, S.F_TMP, t=6)])
        pa, pb = write("dev1-a.pickle", a), write("dev1-b.pickle", b)
        got = json.loads(run("diff", "--json", pa, pb, check_rc=0).stdout)
        self.assertEqual([d["device"] for d in got["devices"]], [0, 1])
        d0, d1 = got["devices"]
        self.assertEqual((d0["peak_allocated_growth"], d0["new_segments"], d0["sites_at_end"]),
                         (0, 0, []))
        self.assertEqual((d1["a"]["present"], d1["b"]["present"]), (False, True))
        self.assertEqual((d1["b"]["peak_allocated"]["bytes"], d1["b"]["peak_allocated"]["entry"],
                          d1["peak_allocated_growth"], d1["new_segments"], d1["new_bytes"]),
                         (2 * S.MiB, 1, 2 * S.MiB, 1, 2 * S.MiB))
        self.assertEqual([(s["device"], s["growth"]) for s in got["sites"]], [(1, 2 * S.MiB)])
        text = run("diff", pa, pb, check_rc=0).stdout
        self.assertIn("\n== device 1 (not in A)\n", text)
        self.assertIn("  peak allocated  A: (no such device)\n", text)
        self.assertIn("  +2.00 MiB on device 1 (0 bytes -> 2.00 MiB)\n      workspace (ops.c:77)\n",
                      text)

    def test_sites_matched_by_frames_when_lines_moved(self):
        """B is A after an edit moved `forward` three lines down and added a site: forward's
        site is one site (its functions and files are the same, and only one site is so), the
        new one is new."""
        a = S.pytorch_snapshot()
        b = S.pytorch_snapshot()
        moved = [S.frame("forward", "model.c", 45)] + S.F_ACT[1:]
        extra = [S.frame("extra", "model.c", 60), S.frame("main", "main.c", 10)]
        for seg in b["segments"]:
            for blk in seg["blocks"]:
                if blk["frames"] == S.F_ACT:
                    blk["frames"] = moved
        s3 = S.BASE + 0x4000000
        blk = S.block(s3, 4 * S.MiB, 4 * S.MiB, "active_allocated", extra)
        rest = S.block(s3 + 4 * S.MiB, 16 * S.MiB, 0, "inactive", [])
        b["segments"].append(dict(b["segments"][0], address=s3, blocks=[blk, rest], frames=extra,
                                  allocated_size=4 * S.MiB, active_size=4 * S.MiB,
                                  requested_size=4 * S.MiB))
        b["device_traces"][0] += [S.entry("segment_alloc", s3, 20 * S.MiB, extra, t=100),
                                  S.entry("alloc", s3, 4 * S.MiB, extra, t=101)]
        pa, pb = write("moved-a.pickle", a), write("moved-b.pickle", b)
        got = json.loads(run("diff", "--json", pa, pb, check_rc=0).stdout)
        self.assertEqual([(S.frame_text(s["frames"][0]), s["a_bytes"], s["b_bytes"])
                          for s in got["sites"]], [("extra (model.c:60)", 0, 4 * S.MiB)])
        self.assertEqual(got["growth_bytes"], 4 * S.MiB)


class Check(Base):
    def test_pytorch_layout(self):
        """`cuprof check` on PyTorch's own layout (no cuprof section): OOMs and leaks from the
        history and the block table, peaks from the model, every budget named."""
        snap = S.pytorch_snapshot()
        path = write("check.pickle", snap)
        ser = S.series(snap, 0)
        (live, i), (res, _) = S.peak([x for x, _ in ser]), S.peak([r for _, r in ser])
        p = run("check", "--no-oom", "--no-leaks", "--max-peak-allocated", "%dKiB" % (live // 1024),
                "--max-peak-reserved", str(res), path, check_rc=1)
        leaks = S.leaks_by_frames(snap)
        blocks = sum(v[2] for v in leaks.values())
        requested = sum(v[1] for v in leaks.values())
        top = max(v[1] for v in leaks.values())
        oom = [k for k, e in enumerate(snap["device_traces"][0]) if e["action"] == "oom"][0]
        by_site = {}
        for size, frames in S.live_blocks(snap, 0, i).values():
            key = tuple(S.frame_text(f) for f in frames)
            by_site[key] = by_site.get(key, 0) + size
        largest = max(by_site.items(), key=lambda kv: kv[1])
        def name(frames):
            return " < ".join(S.frame_text(f) for f in frames[:3])
        self.assertEqual(p.stdout.splitlines(), [
            "%s: device 0: peak allocated %s over --max-peak-allocated %s (by %s); the largest "
            "call site at the peak: %s, %s" % (path, S.format_size(live),
                                              S.format_size(live // 1024 * 1024),
                                              S.format_size(live - live // 1024 * 1024),
                                              S.format_size(largest[1]), " < ".join(largest[0][:3])),
            "%s: device 0: %d blocks (%s) still allocated at the end, --no-leaks; the largest "
            "call site: %s, %s" % (path, blocks, S.format_size(requested),
                                   S.format_size(top), name(S.F_ACT)),
            "%s: device 0: 1 OOM, --no-oom; the first: 40.00 MiB requested at entry %d: %s"
            % (path, oom, name(S.F_OOM)),
            "cuprof check: 3 budgets crossed in 1 of 1 file (--max-peak-reserved %s, "
            "--max-peak-allocated %s, --no-leaks, --no-oom)"
            % (S.format_size(res), S.format_size(live // 1024 * 1024))])


class BadInput(Base):
    def test_bad_files(self):
        good = write("good.pickle", S.pytorch_snapshot())
        data = open(good, "rb").read()
        cases = {
            "missing.pickle": None,
            "truncated.pickle": data[: len(data) // 2],
            "notsnapshot.json": b'{"hello": [1, 2, 3]}',
            "unknown-opcode.pickle": b"\x80\x04cos\nsystem\n(S'echo hi'\ntR.",
            "empty.pickle": b"",
            "garbage.bin": bytes(range(256)) * 4,
        }
        cmds = [["summary"], ["leaks"], ["stats"], ["flamegraph"], ["replay"],
                ["replay", "--check"],
                ["timeline", "-o", os.path.join(WORK, "bad-trace.json")],
                ["plot", "-o", os.path.join(WORK, "bad.html")]]
        for name, content in cases.items():
            path = os.path.join(WORK, name)
            if content is not None:
                with open(path, "wb") as f:
                    f.write(content)
            elif os.path.exists(path):
                os.unlink(path)
            for cmd in cmds:
                p = run(*cmd, path)
                self.assertEqual(p.returncode, 2, (name, cmd, p.stderr))
                lines = p.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, (name, cmd, p.stderr))
                self.assertTrue(lines[0].startswith("cuprof: "), lines[0])
                self.assertIn(name, lines[0])
                self.assertEqual(p.stdout, "", (name, cmd))
            p = run("diff", good, path)
            self.assertEqual(p.returncode, 2)
            self.assertIn(name, p.stderr)
        self.assertFalse(os.path.exists(os.path.join(WORK, "bad.html")))

    def test_messages_whole(self):
        """A message comes out whole however long it is (the list of keys was cut at 256 bytes)."""
        good = write("whole.pickle", S.pytorch_snapshot())
        keys = ("max_split_size_mb, roundup_power2_divisions, max_non_split_rounding_mb, "
                "garbage_collection_threshold, per_process_memory_fraction, expandable_segments, "
                "release_lock_on_cudamalloc, release_threshold_mb, free_sync, backend")
        for key in ("bogus", "k" * 3000):
            p = run("replay", good, "--alloc-conf", key + ":1", check_rc=2)
            self.assertEqual(p.stderr, 'cuprof: replay: --alloc-conf: unknown key "%s": expected '
                             'one of %s (see `cuprof replay --help`)\n' % (key, keys))
        value = "[%s]x" % ",".join(["1:2"] * 100)
        p = run("replay", good, "--alloc-conf", "roundup_power2_divisions:" + value, check_rc=2)
        self.assertEqual(p.stderr, 'cuprof: replay: --alloc-conf: expected "," after '
                         '"roundup_power2_divisions:%s" (see `cuprof replay --help`)\n' % value[:-1])

    def test_bad_usage(self):
        for args in (["summary"], ["leaks", "a", "b"], ["stats", "--device", "x", "f"],
                     ["flamegraph", "--at", "middle", "f"], ["nosuch"], ["diff", "a"],
                     ["run"], ["summary", "--bogus", "f"], []):
            p = run(*args)
            self.assertEqual(p.returncode, 2, args)
            self.assertTrue(p.stderr.startswith("cuprof"), (args, p.stderr))


class Help(Base):
    def test_help_everywhere(self):
        out = run("--help", check_rc=0).stdout
        cmds = re.findall(r"^  (\w+) ", out, re.M)
        self.assertGreaterEqual(len(cmds), 8)
        for c in cmds:
            p = run(c, "--help", check_rc=0)
            self.assertTrue(p.stdout.startswith("usage: cuprof " + c), c)
            self.assertGreater(len(p.stdout.splitlines()), 4, c)
            self.assertIn("\n  -h, --help  ", p.stdout, c)
            self.assertLessEqual(max(len(line) for line in p.stdout.splitlines()), 100, c)

    def test_help_subcommand(self):
        """`cuprof help CMD` is `cuprof CMD --help`; `cuprof help` is `cuprof --help`."""
        out = run("--help", check_rc=0).stdout
        self.assertEqual(run("help", check_rc=0).stdout, out)
        for c in re.findall(r"^  (\w+) ", out, re.M):
            self.assertEqual(run("help", c, check_rc=0).stdout, run(c, "--help").stdout, c)

    def test_unknown_subcommand(self):
        """One line: the closest subcommand when a typo explains the name, and where the list is."""
        hint = "(`cuprof --help` lists them all)"
        for args, line in (
                (["sumary"], '"sumary": did you mean `summary`? ' + hint),
                (["flamegrpah", "f"], '"flamegrpah": did you mean `flamegraph`? ' + hint),
                (["help", "lekas"], '"lekas": did you mean `leaks`? ' + hint),
                (["xyz"], '"xyz" ' + hint),
                (["summary-all"], '"summary-all" ' + hint)):
            p = run(*args, check_rc=2)
            self.assertEqual((p.stdout, p.stderr),
                             ("", "cuprof: unknown subcommand %s\n" % line), args)

    def test_unknown_option_everywhere(self):
        out = run("--help", check_rc=0).stdout
        for c in re.findall(r"^  (\w+) ", out, re.M):
            p = run(c, "--no-such-option", "x", check_rc=2)
            lines = p.stderr.splitlines()
            self.assertEqual(len(lines), 1, (c, p.stderr))
            self.assertTrue(lines[0].startswith("cuprof: %s: " % c), lines[0])
            self.assertIn('"--no-such-option"', lines[0])
            self.assertEqual(p.stdout, "", c)


class Read(Base):
    def test_formats_agree(self):
        snap = S.pytorch_snapshot()
        outs = [run("summary", p, check_rc=0).stdout.split("\n", 1)[1]
                for p in self.files(snap, "fmt")]
        self.assertEqual(outs[0], outs[1])
        self.assertEqual(outs[0], outs[2])


GROUPS = {"leaks": Leaks, "summary": Summary, "stats": Stats, "flamegraph": Flamegraph,
          "timeline": Timeline, "diff": Diff, "badinput": BadInput, "help": Help, "read": Read,
          "check": Check}


def main():
    global CUPROF, WORK
    CUPROF, WORK, group = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(WORK, exist_ok=True)
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(GROUPS[group])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
