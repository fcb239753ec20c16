#!/usr/bin/env python3
"""`cuprof explain` (issue 27, part 2): one snapshot per verdict, each made by running a program
of tests/apps on the simulated device with a small SIMCUDA_MEM (SIMCUDA_CONTEXT_MEM for memory
outside the allocator, a fraction for the cap, SIMCUDA_FAIL for a driver that refuses), and
PyTorch-layout files built here by hand. Every figure is worked out here from the programs'
arithmetic and PyTorch's rules (alloc_model.py, snapshots read back with pickle), never from
cuprof: the instant, the request, the device's bytes adding up to its capacity, the free space by
pool and segment, the verdict, and the replays under other settings.

Usage: test_explain.py CUPROF WORKDIR APPS_DIR DUMP_TWICE SRC_ROOT
"""
import json
import os
import pickle
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import snapshots as S  # noqa: E402
import test_apps as A  # noqa: E402

MiB = 1 << 20


def explain(path, *args, rc=0):
    p = A.cuprof("explain", "--json", *args, path, rc=rc)
    return json.loads(p.stdout) if rc == 0 else p


def text(path, *args):
    return A.cuprof("explain", *args, path, rc=0).stdout


def first_oom(snap):
    return next(i for i, e in enumerate(snap["device_traces"][0]) if e["action"] == "oom")


def whatifs(got):
    return {w["label"]: w for w in got["whatif"]}


class Verdicts(unittest.TestCase):
    def check_common(self, got, snap, capacity, free):
        """What every OOM report must say of the snapshot's first OOM."""
        at = first_oom(snap)
        e = snap["device_traces"][0][at]
        self.assertEqual((got["at"], got["chosen"], got["is_oom"]), (at, "oom", True))
        # An allocation's OOM: no driver's own call refused.
        self.assertEqual((got["driver_call"], got["driver_ooms"], got["driver_message"]),
                         (None, 0, None))
        self.assertTrue(all(w["kept_reserved"] is None for w in got["whatif"]))
        r = got["request"]
        self.assertEqual((r["size"], r["stream"], r["device_free"]),
                         (e["size"], e["stream"], e["device_free"]))
        self.assertEqual(r["message"], snap["cuprof"]["oom_messages"][0]["message"])
        self.assertEqual([f["name"] for f in r["frames"]],
                         [f["name"] for f in S.user_frames(e["frames"])][:len(r["frames"])])
        d = got["device_bytes"]
        self.assertEqual((d["capacity"], d["capacity_from"], d["free"]),
                         (capacity, "footprint", free))
        parts = (d["live_allocated"] + d["pending_free"] + d["cached_free"] + d["passthrough"] +
                 d["outside"] + d["free"])
        self.assertEqual(parts, capacity)
        live = sum(v[0] for v in S.live_blocks(snap, 0, at).values())
        self.assertEqual(d["live_requested"], live)
        self.assertEqual(d["reserved"], S.series(snap, 0)[at][1])
        if got["exactness"]["oom_reproduced"]:
            self.assertEqual(d["replay_reserved"], d["reserved"])
        x = got["exactness"]
        allocs = sum(1 for ev in snap["device_traces"][0] if ev["action"] == "alloc")
        self.assertEqual((x["checked"], x["reproduced"], x["state_from_replay"]),
                         (allocs, allocs, True))
        return d

    def test_live_exceeds(self):
        # oom: 256 MiB blocks on a 300 MiB device: one fits, the second cannot.
        path, snap, res = A.record("oom", "x-live", SIMCUDA_MEM="300M")
        got = explain(path)
        free = int(res["free_full"])
        d = self.check_common(got, snap, 300 * MiB, free)
        self.assertEqual((d["live_allocated"], d["cached_free"], d["outside"]),
                         (256 * MiB, 0, 0))
        self.assertEqual(got["request"]["segment_size"], 256 * MiB)
        self.assertEqual(got["verdict"], {"kinds": ["live_exceeds"], "missing": 212 * MiB,
                                          "cache_caused": False,
                                          "free_without_cache": 0})
        self.assertTrue(got["exactness"]["oom_reproduced"])
        self.assertEqual([s["bytes"] for s in got["sites"]], [256 * MiB])
        self.assertEqual(got["sites"][0]["frames"][0]["name"], "fill")
        for w in got["whatif"]:
            self.assertEqual((w["ok"], w["avoided"], w["ooms"]), (True, False, 1), w)
        self.assertIn("verdict: live memory alone exceeds the device: 256.00 MiB live + 256.00 "
                      "MiB requested = 512.00 MiB > 300.00 MiB (212.00 MiB short); no allocator "
                      "setting avoids it\n", text(path))

    def fragment_expect(self, got, snap):
        """tests/apps/fragment 8 5 16: three 20 MiB segments, each [8 MiB live][12 MiB free]."""
        d = got["device_bytes"]
        self.assertEqual((d["live_allocated"], d["reserved"], d["cached_free"]),
                         (24 * MiB, 60 * MiB, 36 * MiB))
        self.assertEqual(got["pools"]["large"], {"free_bytes": 36 * MiB, "largest_free": 12 * MiB,
                                                 "free_blocks": 3, "segments_with_free": 3})
        self.assertEqual(got["pools"]["small"], {"free_bytes": 0, "largest_free": 0,
                                                 "free_blocks": 0, "segments_with_free": 0})
        self.assertEqual(got["largest_fit"], 12 * MiB)
        segs = {s["address"]: s["total_size"] for s in snap["segments"]}
        self.assertEqual(sorted(s["address"] for s in got["segments"]), sorted(segs))
        for s in got["segments"]:
            self.assertEqual((s["size"], s["free_bytes"], s["largest_free"], s["pool"]),
                             (20 * MiB, 12 * MiB, 12 * MiB, "large"))
        self.assertEqual(got["request"]["segment_size"], 16 * MiB)
        w = whatifs(got)
        rec = w["recorded settings (defaults)"]
        # 5 blocks of 8 MiB in 20 MiB segments: 40 MiB allocated at most, three cudaMallocs.
        self.assertEqual((rec["avoided"], rec["ooms"], rec["peak_reserved"], rec["peak_allocated"],
                          rec["device_allocs"]), (False, 1, 60 * MiB, 40 * MiB, 3))
        # Expandable segments: the blocks tile [0, 40 MiB) of one reservation (two 20 MiB pages),
        # the 16 MiB request maps a third page behind the last block.
        exp = w["expandable_segments:True"]
        self.assertEqual((exp["avoided"], exp["ooms"], exp["peak_reserved"],
                          exp["peak_allocated"], exp["device_allocs"]),
                         (True, 0, 60 * MiB, 40 * MiB, 3))
        for label in ("max_split_size_mb:64", "empty_cache() right before the request"):
            self.assertEqual((w[label]["avoided"], w[label]["ooms"]), (False, 1), label)
        self.assertNotIn("max_split_size_mb:256", w)  # far above every request: not tried

    def test_fragmentation(self):
        path, snap, _ = A.record("fragment", "x-frag", SIMCUDA_MEM="60M")
        got = explain(path)
        self.check_common(got, snap, 60 * MiB, 0)
        # Without cuprof's cache the 24 MiB live and the 16 MiB request fit the 60 MiB device.
        self.assertEqual(got["verdict"], {"kinds": ["fragmentation"], "missing": 0,
                                          "cache_caused": True,
                                          "free_without_cache": 0})
        self.fragment_expect(got, snap)
        out = text(path)
        self.assertIn("verdict: fragmentation: 36.00 MiB cached free + 0 bytes free on the device "
                      ">= 16.00 MiB requested, but no free block of its stream and pool was large "
                      "enough (largest 12.00 MiB) and the driver had less than a new segment of "
                      "16.00 MiB\nwithout cuprof's cache this request could have fit: 24.00 MiB "
                      "live + 16.00 MiB requested = 40.00 MiB of the 60.00 MiB that cuprof's "
                      "segments and the driver's free memory held; CUPROF_MODE=trace records the "
                      "program without a cache\nwhat would have avoided it", out)
        self.assertIn("  expandable_segments:True                   avoided          0      60.00 "
                      "MiB      40.00 MiB          3\n", out)

    def test_outside(self):
        # A context holding 100 MiB of a 300 MiB device: 200 MiB free, a 256 MiB request.
        path, snap, res = A.record("oom", "x-out", SIMCUDA_MEM="300M",
                                   SIMCUDA_CONTEXT_MEM="100M")
        self.assertEqual(res["blocks"], "0")
        got = explain(path)
        d = self.check_common(got, snap, 300 * MiB, 200 * MiB)
        self.assertEqual((d["outside"], d["outside_at_start"], d["live_allocated"]),
                         (100 * MiB, 100 * MiB, 0))
        self.assertEqual(got["verdict"], {"kinds": ["outside"], "missing": 56 * MiB,
                                          "cache_caused": False,
                                          "free_without_cache": 0})
        self.assertIn("verdict: memory outside the allocator: 100.00 MiB outside and 0 bytes passed "
                      "through; 0 bytes live + 256.00 MiB requested = 256.00 MiB, the allocator "
                      "could reach 200.00 MiB (56.00 MiB short)\n", text(path))

    def test_combination(self):
        # fragment on 80 MiB with a 20 MiB context: the same pieces, and a new 16 MiB segment
        # would have fit in what the context holds.
        path, snap, _ = A.record("fragment", "x-comb", SIMCUDA_MEM="80M",
                                 SIMCUDA_CONTEXT_MEM="20M")
        got = explain(path)
        d = self.check_common(got, snap, 80 * MiB, 0)
        self.assertEqual((d["outside"], d["outside_at_start"]), (20 * MiB, 20 * MiB))
        # 80 MiB less the context's 20 MiB: the 24 MiB live and the request fit without the cache.
        self.assertEqual(got["verdict"], {"kinds": ["outside", "fragmentation"], "missing": 0,
                                          "cache_caused": True,
                                          "free_without_cache": 0})
        self.fragment_expect(got, snap)
        self.assertIn("verdict: a combination:\n  - memory outside the allocator: 20.00 MiB outside "
                      "and 0 bytes passed through; without them the new segment of 16.00 MiB "
                      "would have fit\n  - fragmentation: ", text(path))

    def test_cap(self):
        # per_process_memory_fraction 0.5 of 300 MiB allows 150 MiB: three 40 MiB blocks (own
        # segments), one freed; the 72 MiB request's retry releases that free segment (80 MiB
        # left reserved) and 80 + 72 > 150.
        path, snap, _ = A.record("fragment", "x-cap", "40", "3", "72", SIMCUDA_MEM="300M",
                 options=("--alloc-conf", "per_process_memory_fraction:0.5"))
        got = explain(path)
        d = self.check_common(got, snap, 300 * MiB, 220 * MiB)
        self.assertEqual((d["live_allocated"], d["reserved"], d["cached_free"]),
                         (80 * MiB, 80 * MiB, 0))
        self.assertEqual(got["settings"], {"recorded": "per_process_memory_fraction:0.5",
                                           "fraction": 0.5, "allowed": 150 * MiB})
        # The cap the user set holds without the cache too: 80 + 72 MiB > 150 MiB.
        self.assertEqual(got["verdict"], {"kinds": ["cap"], "missing": 0,
                                          "cache_caused": False,
                                          "free_without_cache": 0})
        w = whatifs(got)
        for label in ("garbage_collection_threshold:0.6", "garbage_collection_threshold:0.8"):
            self.assertEqual(w[label]["setting"],
                             "per_process_memory_fraction:0.5," + label)
            self.assertEqual((w[label]["avoided"], w[label]["peak_reserved"]),
                             (False, 120 * MiB))
        self.assertIn("verdict: a cap: per_process_memory_fraction 0.5 allows 150.00 MiB; 80.00 "
                      "MiB reserved + a new segment of 72.00 MiB > 150.00 MiB (the driver had "
                      "220.00 MiB free)\n", text(path))

    def test_driver_refused(self):
        # The simulated driver refuses every allocation above 50 MiB on a 1 GiB device.
        path, snap, _ = A.record("fragment", "x-drv", "8", "5", "64", SIMCUDA_MEM="1G",
                 SIMCUDA_FAIL="alloc:above=50M")
        got = explain(path)
        self.check_common(got, snap, 1 << 30, (1 << 30) - 60 * MiB)
        # The driver refused memory it had: no cache would have changed that.
        self.assertEqual(got["verdict"], {"kinds": ["driver"], "missing": 0,
                                          "cache_caused": False,
                                          "free_without_cache": 0})
        # The replay's device does not refuse: it cannot reproduce this OOM, and says so.
        self.assertFalse(got["exactness"]["oom_reproduced"])
        self.assertTrue(whatifs(got)["recorded settings (defaults)"]["avoided"])
        self.assertIn("but not this OOM (rows less certain)", text(path))

    def test_passed_through(self):
        # train_loop in trace mode on 270 MiB: its cudaMalloc blocks are trace mode's segments,
        # its cudaMallocAsync ones go to the driver's pool, which refuses one at line 130. That
        # request was never the allocator's: no setting of it applies, and the pass-through
        # memory counts once (before, the live blocks and the pass-through line both held it,
        # and the outside bytes were short by as much).
        path = os.path.join(A.WORK, "x-passed.pickle")
        for f in os.listdir(A.WORK):
            if f.startswith("x-passed."):
                os.unlink(os.path.join(A.WORK, f))
        p = A.cuprof("run", "--sim", "-q", "--mode", "trace", "-o", path, "--",
                     os.path.join(A.APPS, "train_loop"), SIMCUDA_MEM="270M")
        self.assertIn("FAIL cudaMallocAsync", p.stdout)
        with open(path, "rb") as f:
            snap = pickle.load(f)
        trace = snap["device_traces"][0]
        at = first_oom(snap)
        self.assertEqual((at, trace[at].get("cuprof_pool")), (len(trace) - 1, "async"))
        live = {}
        for e in trace[:at]:
            if e["action"] == "alloc":
                live[e["addr"]] = (e["size"], e.get("cuprof_pool"))
            elif e["action"] == "free_completed":
                live.pop(e["addr"], None)
        passed = sum(n for n, pool in live.values() if pool == "async")
        own = sum(n for n, pool in live.values() if pool != "async")
        self.assertGreater(passed, 0)
        got = explain(path)
        d = got["device_bytes"]
        free = trace[at]["device_free"]
        self.assertEqual((d["passthrough"], d["live_allocated"], d["live_requested"],
                          d["reserved"], d["cached_free"], d["free"]),
                         (passed, own, own, own, 0, free))
        self.assertEqual(d["outside"], 270 * MiB - own - passed - free)
        self.assertTrue(got["request"]["passed_through"])
        self.assertEqual(got["request"]["segment_size"], trace[at]["size"])
        self.assertEqual(got["verdict"]["cache_caused"], False)
        self.assertNotIn("fragmentation", got["verdict"]["kinds"])
        self.assertTrue(all(w["avoided"] is None for w in got["whatif"]), got["whatif"])
        out = text(path)
        self.assertIn("stream-ordered memory of the driver's pool, passed through to the driver, "
                      "which refused it", out)
        self.assertIn("no setting of cuprof's cache applies to this request: the driver refused "
                      "it itself\nthe peak under other settings", out)
        self.assertNotIn("this OOM", out)
        # summary's OOM list says the same, not that no cached block fit.
        self.assertIn("    why: the driver refused it itself (memory cuprof passes through: "
                      "managed, VMM or a driver pool)\n", A.cuprof("summary", path, rc=0).stdout)

    def test_mid_run(self):
        # A ring of 8 entries: the history starts mid-run; the same state and verdict.
        path, snap, _ = A.record("fragment", "x-mid", SIMCUDA_MEM="60M", CUPROF_MAX_ENTRIES="8")
        self.assertGreater(snap["cuprof"]["dropped_entries"][0], 0)
        got = explain(path)
        self.assertEqual(got["verdict"], {"kinds": ["fragmentation"], "missing": 0,
                                          "cache_caused": True,
                                          "free_without_cache": 0})
        x = got["exactness"]
        self.assertEqual((x["mid_run"], x["dropped_entries"], x["start_misses"]),
                         (True, snap["cuprof"]["dropped_entries"][0], 0))
        self.assertEqual(got["device_bytes"]["cached_free"], 36 * MiB)
        self.assertTrue(whatifs(got)["expandable_segments:True"]["ok"])
        self.assertIn("the history starts mid-run (%d entries dropped)"
                      % x["dropped_entries"], text(path))

    def test_peak_and_entry(self):
        path, snap, _ = A.record("train_loop", "x-peak", "6")
        got = explain(path)
        trace = snap["device_traces"][0]
        series = S.series(snap, 0)
        peak, at = S.peak([r for _, r in series])
        # The peak is met by the request that made its segment: shown once it is served.
        while trace[at]["action"] == "segment_alloc":
            at += 1
        self.assertEqual(trace[at]["action"], "alloc")
        self.assertEqual((got["chosen"], got["is_oom"], got["at"], got["request"]),
                         ("peak", False, at + 1, None))
        d = got["device_bytes"]
        self.assertEqual((d["reserved"], d["live_requested"]), (peak, series[at + 1][0]))
        self.assertEqual(got["verdict"], {"kinds": [], "missing": 0, "cache_caused": False,
                                          "free_without_cache": 0})
        self.assertTrue(all(w["avoided"] is None for w in got["whatif"]))
        # --at ENTRY: right after that entry; an oom entry is that OOM.
        self.assertEqual(explain(path, "--at", str(at))["at"], at + 1)
        self.assertEqual(explain(path, "--at", "peak")["at"], at + 1)
        path, snap, _ = A.record("oom", "x-entry", SIMCUDA_MEM="300M")
        i = first_oom(snap)
        by_entry, by_oom = explain(path, "--at", str(i)), explain(path, "--at", "oom")
        self.assertEqual((by_entry.pop("chosen"), by_oom.pop("chosen")), ("entry", "oom"))
        self.assertEqual(by_entry, by_oom)


class PyTorchLayout(unittest.TestCase):
    """The fragment scenario as PyTorch would have recorded it: no cuprof section, so no device
    footprint; the capacity is the OOM's free bytes plus what the allocator holds, or --memory."""

    def build(self):
        base, seg, blk = S.BASE, 20 * MiB, 8 * MiB
        trace, t = [], 0
        addrs = []
        for k in range(5):
            if k % 2 == 0:
                trace.append(S.entry("segment_alloc", base + (k // 2) * seg, seg, S.F_ACT, t=t))
            addrs.append(base + (k // 2) * seg + (k % 2) * blk)
            trace.append(S.entry("alloc", addrs[-1], blk, S.F_ACT, t=t + 1))
            t += 10
        for k in (1, 3):
            trace.append(S.entry("free_requested", addrs[k], blk, S.F_ACT, t=t))
            trace.append(S.entry("free_completed", addrs[k], blk, S.F_ACT, t=t + 1))
            t += 10
        trace.append(S.entry("oom", 0, 16 * MiB, S.F_OOM, t=t, device_free=0))
        segments = []
        for s in range(3):
            a = base + s * seg
            blocks = [S.block(a, blk, blk, "active_allocated", S.F_ACT),
                      S.block(a + blk, seg - blk, blk, "inactive", [])]
            segments.append({"device": 0, "address": a, "total_size": seg, "allocated_size": blk,
                             "active_size": blk, "requested_size": blk, "stream": 0,
                             "segment_type": "large", "segment_pool_id": (0, 0),
                             "is_expandable": False, "frames": S.F_ACT, "blocks": blocks})
        snap = {"segments": segments, "device_traces": [trace],
                "allocator_settings": S.allocator_settings()}
        path = os.path.join(A.WORK, "pt-frag.pickle")
        with open(path, "wb") as f:
            pickle.dump(snap, f, protocol=4)
        return path, snap

    def test_assumed_capacity(self):
        path, snap = self.build()
        got = explain(path)
        d = got["device_bytes"]
        self.assertEqual((d["capacity"], d["capacity_from"], d["outside"], d["free"]),
                         (60 * MiB, "assumed", 0, 0))
        self.assertEqual((d["live_allocated"], d["cached_free"], d["live_requested"]),
                         (24 * MiB, 36 * MiB, 24 * MiB))
        self.assertEqual(got["request"]["message"], None)
        self.assertEqual(got["request"]["frames"][0]["name"], "huge")
        # PyTorch's cache is the program's own: never cuprof's to blame.
        self.assertEqual(got["verdict"], {"kinds": ["fragmentation"], "missing": 0,
                                          "cache_caused": False,
                                          "free_without_cache": 0})
        self.assertNotIn("without cuprof's cache", text(path))
        self.assertEqual(got["exactness"]["checked"], got["exactness"]["reproduced"])
        self.assertTrue(whatifs(got)["expandable_segments:True"]["avoided"])
        self.assertIn("device 0: 60.00 MiB (not recorded: reserved + pass-through + free, "
                      "nothing taken as outside)\n", text(path))

    def test_memory_option(self):
        path, snap = self.build()
        got = explain(path, "--memory", "80MiB")
        d = got["device_bytes"]
        self.assertEqual((d["capacity"], d["capacity_from"], d["outside"], d["free"]),
                         (80 * MiB, "option", 20 * MiB, 0))
        self.assertEqual(got["verdict"], {"kinds": ["outside", "fragmentation"], "missing": 0,
                                          "cache_caused": False,
                                          "free_without_cache": 0})


class Errors(unittest.TestCase):
    def test_bad_usage(self):
        path, snap, _ = A.record("train_loop", "x-err", "2")
        for args, line in (
                (("--at", "soon"), 'cuprof: explain: --at: bad value "soon": expected oom, peak '
                                   'or an entry number'),
                (("--memory", "lots"), 'cuprof: explain: --memory: bad value "lots": expected a '
                                       'size such as 4096, 300M, 300MiB or 1.5GiB (K, M, G and '
                                       'KiB, MiB, GiB are powers of 1024; KB, MB, GB of 1000)'),
                (("--top", "0"), 'cuprof: explain: --top: bad value "0": expected 1 to 1000'),
                (("--device", "x"), 'cuprof: explain: --device: bad value "x": expected a '
                                    'number')):
            p = A.cuprof("explain", *args, path, rc=2)
            self.assertEqual(p.stderr, line + " (see `cuprof explain --help`)\n", args)
            self.assertEqual(p.stdout, "")
        n = len(snap["device_traces"][0])
        for args, line in ((("--at", "oom"), "%s: no OOM in device 0's history (--at peak or an "
                                              "entry)" % path),
                           (("--at", str(n)), "%s: --at %d: device 0's history has %d entries "
                                              "(0 to %d)" % (path, n, n, n - 1)),
                           (("--device", "3"), "%s: no device 3 (the snapshot has device 0)"
                                               % path)):
            p = A.cuprof("explain", *args, path, rc=2)
            self.assertEqual(p.stderr, "cuprof: " + line + "\n", args)


def main():
    A.CUPROF, A.WORK, A.APPS, A.DUMP_TWICE, A.SRC = (os.path.abspath(a) for a in sys.argv[1:6])
    os.makedirs(A.WORK, exist_ok=True)
    suite = unittest.TestSuite()
    for c in (Verdicts, PyTorchLayout, Errors):
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(c))
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
