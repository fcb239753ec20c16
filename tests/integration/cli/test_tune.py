#!/usr/bin/env python3
"""`cuprof tune` (issue 27, part 3): the grid, the ranking and the lines to paste, on snapshots of
tests/apps programs run on the simulated device and on a PyTorch-layout file built by hand. The
figures of the fragment scenario are worked out here from PyTorch's rules; for the others every
row must obey what holds whatever the setting (peak allocated within block rounding of the
requests, alloc_model; no peak above --memory), the order must be the documented one, and the
result must not depend on how many threads replayed.

Usage: test_tune.py CUPROF WORKDIR APPS_DIR DUMP_TWICE SRC_ROOT
"""
import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import alloc_model as M  # noqa: E402
import test_apps as A  # noqa: E402
import test_explain as X  # noqa: E402
import test_replay_cuts as C  # noqa: E402

MiB = 1 << 20
SPLITS = (None, "32", "64", "128", "256", "512", "1024")
ROUNDINGS = (None, "2", "4", "8", "[256:1,512:2,>:8]")
GC = ("0.6", "0.7", "0.8", "0.9")


def grid_labels():
    """The candidates' labels in grid order, as tune.h describes the grid (recorded: defaults)."""
    out = []
    for s in SPLITS:
        for r in ROUNDINGS:
            parts = ([f"max_split_size_mb:{s}"] if s else []) + \
                    ([f"roundup_power2_divisions:{r}"] if r else [])
            if parts:  # (unset, unset) is the recorded settings
                out.append(",".join(parts))
    out += ["expandable_segments:True", "expandable_segments:True,roundup_power2_divisions:4",
            "expandable_segments:True,roundup_power2_divisions:8",
            "roundup_power2_divisions:[32:2,256:4,>:8]", "roundup_power2_divisions:[1:1,64:4,>:8]"]
    out += [f"garbage_collection_threshold:{g},per_process_memory_fraction:0.99" for g in GC]
    return out


def tune(path, *args, rc=0):
    p = A.cuprof("tune", "--json", *args, path, rc=rc)
    return json.loads(p.stdout) if rc == 0 else p


def figures(row):
    return (row["ooms"], row["new_ooms"], row["peak_reserved"], row["peak_allocated"],
            row["device_allocs"], row["device_frees"])


class Fragment(unittest.TestCase):
    """tests/apps/fragment on 60 MiB: 8 MiB blocks two to a 20 MiB segment, three live, a 16 MiB
    request that no 12 MiB piece holds. Under expandable segments the blocks tile two pages and
    the request maps a third (no OOM, 60 MiB). The ordinary settings change nothing here (every
    request is a power of two, none reaches 32 MiB): one OOM, 60 MiB. A GC candidate caps the
    device at 0.99 x 60 MiB: the third 20 MiB segment (60 MiB) is refused. With PyTorch's rules
    (a PyTorch snapshot) the fifth block then fails (an OOM the recording did not have), and the
    16 MiB request fits (56 MiB). cuprof's cache (its snapshot says cuprof.fit_segment_on_oom)
    gives the fifth block a segment of its own 8 MiB instead, and the 16 MiB request still fails
    under the cap: the recorded OOM, 48 MiB, ranked before the recorded settings' 60 MiB."""

    def check(self, got, recorded_label="recorded settings", fit=True):
        rows = got["settings"]
        self.assertEqual(len(rows), 44)
        labels = [r["label"] for r in rows]
        self.assertEqual(sorted(labels), sorted(grid_labels() + [recorded_label]))
        self.assertEqual([r["rank"] for r in rows], list(range(1, 45)))
        expandable = ["expandable_segments:True",
                      "expandable_segments:True,roundup_power2_divisions:4",
                      "expandable_segments:True,roundup_power2_divisions:8"]
        gc = ["garbage_collection_threshold:0.%d,per_process_memory_fraction:0.99" % t
              for t in (6, 7, 8, 9)]
        self.assertEqual(labels[:8] if fit else labels[:4],
                         expandable + (gc if fit else []) + [recorded_label])
        # Ties keep the grid's order: with PyTorch's rules the GC candidates (new OOMs) come last,
        # with cuprof's step the ordinary settings of the grid's tail (one OOM, 60 MiB).
        last = ([l for l in grid_labels() if not l.startswith(("expandable", "garbage"))][-4:]
                if fit else grid_labels()[-4:])
        self.assertEqual(labels[-4:], last)
        for r in rows:
            if r["label"].startswith("expandable"):
                want = (0, 0, 60 * MiB, 40 * MiB, 3, 0)
            elif r["label"].startswith("garbage"):
                want = (1, 0, 48 * MiB, 40 * MiB, 3, 0) if fit else (1, 1, 56 * MiB, 32 * MiB, 3, 0)
                g = r["label"].split(",")[0]
                self.assertEqual((r["cuprof_alloc_conf"], r["pytorch_cuda_alloc_conf"],
                                  r["fraction"]), (r["label"], g, 0.99))
            else:
                want = (1, 0, 60 * MiB, 40 * MiB, 3, 0)
            self.assertEqual(figures(r), want, r["label"])
            self.assertEqual((r["ok"], r["calls_ratio"], r["free_at_peak"]),
                             (True, 1.0, r["peak_reserved"] - r["peak_allocated"]), r["label"])
        self.assertEqual((got["capacity"], got["capacity_from"], got["recommended"]),
                         (60 * MiB, "oom", 1))

    def test_sim(self):
        path, snap, _ = A.record("fragment", "t-frag", SIMCUDA_MEM="60M")
        got = tune(path)
        self.check(got)
        self.assertEqual(got["exactness"], {"checked": 5, "reproduced": 5, "start_misses": 0,
                                            "mid_run": False, "dropped_entries": 0})
        out = A.cuprof("tune", path, rc=0).stdout
        self.assertIn("trust: the recorded settings' replay reproduced 5/5 placements "
                      "(100.0%)\n", out)
        self.assertTrue(out.endswith(
            "recommended: expandable_segments:True: peak reserved 60.00 MiB (recorded 60.00 MiB), "
            "0 OOMs\n  (replayed with cuprof's last step before an OOM, which PyTorch lacks: for "
            "PyTorch, tune a snapshot of PyTorch's own)\n"
            "  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
            "  CUPROF_ALLOC_CONF=expandable_segments:True\n"), out)
        self.assertEqual(tune(path, "--jobs", "1"), got)

    def test_pytorch_layout(self):
        path, _ = X.PyTorchLayout.build(self)
        got = tune(path)
        self.check(got, fit=False)
        self.assertEqual(got["exactness"]["checked"], got["exactness"]["reproduced"])


class Recorded(unittest.TestCase):
    def rows_in_envelope(self, snap, got, recorded_conf=""):
        for r in got["settings"]:
            lo, hi = C.envelope(snap, M.parse_conf(recorded_conf),
                                M.parse_conf(r["cuprof_alloc_conf"]))
            self.assertTrue(lo <= r["peak_allocated"] <= hi, (r["label"], lo, hi))
            self.assertLessEqual(r["peak_allocated"], r["peak_reserved"], r["label"])
            base = got["settings"][[x["recorded"] for x in got["settings"]].index(True)]
            calls, rec = (r["device_allocs"] + r["device_frees"],
                          base["device_allocs"] + base["device_frees"])
            self.assertEqual(r["calls_ratio"], calls / rec if rec else float(calls or 1))

    def order_key(self, objective):
        def key(r):
            calls = r["device_allocs"] + r["device_frees"]
            main = (calls, r["peak_reserved"]) if objective == "calls" else \
                (r["peak_reserved"], calls)
            return (not r["ok"], r["ooms"], r["new_ooms"]) + main
        return key

    def test_train_loop(self):
        path, snap, _ = A.record("train_loop", "t-train", "6")
        got = tune(path)
        self.assertEqual(got["capacity_from"], "footprint")
        self.assertEqual(got["capacity"], snap["cuprof"]["device_footprint"][0]["total_bytes"] -
                         snap["cuprof"]["device_footprint"][0]["used_bytes_at_start"])
        self.rows_in_envelope(snap, got)
        rows = got["settings"]
        self.assertEqual(rows, sorted(rows, key=self.order_key("reserved")))
        self.assertEqual(tune(path, "--jobs", "1"), got)
        calls = tune(path, "--objective", "calls")
        self.assertEqual(calls["objective"], "calls")
        self.assertEqual(calls["settings"], sorted(calls["settings"],
                                                   key=self.order_key("calls")))
        # The text: a row is flagged (!) exactly when it makes 2x the recorded calls or more.
        out = A.cuprof("tune", "--top", "44", path, rc=0).stdout
        table = re.findall(r"(?m)^ +(\d+) .* ([0-9.]+)x([! ])  (.+)$", out)
        self.assertEqual(len(table), 44)
        for rank, ratio, flag, label in table:
            row = rows[int(rank) - 1]
            self.assertEqual(label, row["label"])
            self.assertEqual(flag == "!", row["calls_ratio"] >= 2.0, label)
        # The recommendation says so when the best saves memory by calling the device more.
        best = rows[0]
        warned = "it saves memory by calling the device" in out
        self.assertEqual(warned, best["calls_ratio"] >= 2.0 and not best["recorded"])

    def test_memory_and_mid_run(self):
        # A 600-entry ring (mid-run) on a 300 MiB budget: the recorded peak (482 MiB in full)
        # cannot fit, so OOMs appear; no row reserves more than the budget.
        path, snap, _ = A.record("train_loop", "t-mid", CUPROF_MAX_ENTRIES="600")
        got = tune(path, "--memory", "300MiB")
        self.assertEqual((got["capacity"], got["capacity_from"]), (300 * MiB, "option"))
        x = got["exactness"]
        self.assertEqual((x["mid_run"], x["dropped_entries"]),
                         (True, snap["cuprof"]["dropped_entries"][0]))
        for r in got["settings"]:
            self.assertLessEqual(r["peak_reserved"], 300 * MiB, r["label"])
        self.assertEqual(got["settings"], sorted(got["settings"],
                                                 key=self.order_key("reserved")))
        out = A.cuprof("tune", "--memory", "300MiB", path, rc=0).stdout
        self.assertIn("; the history starts mid-run (%d entries dropped)" % x["dropped_entries"],
                      out)
        # Without a budget every row stays within block rounding of the requests.
        self.rows_in_envelope(snap, tune(path))

    def test_bad_usage(self):
        path, _, _ = A.record("train_loop", "t-err", "2")
        for args, line in ((("--objective", "speed"), '--objective: bad value "speed": expected '
                                                       'reserved or calls'),
                           (("--memory", "0"), '--memory: bad value "0": expected a size such as '
                                               '4096, 300M, 300MiB or 1.5GiB (K, M, G and KiB, MiB, '
                                               'GiB are powers of 1024; KB, MB, GB of 1000)'),
                           (("--jobs", "0"), '--jobs: bad value "0": expected 1 to 1024'),
                           (("--top", "x"), '--top: bad value "x": expected a number >= 1')):
            p = A.cuprof("tune", *args, path, rc=2)
            self.assertEqual(p.stderr, "cuprof: tune: %s (see `cuprof tune --help`)\n" % line)
            self.assertEqual(p.stdout, "")


def main():
    A.CUPROF, A.WORK, A.APPS, A.DUMP_TWICE, A.SRC = (os.path.abspath(a) for a in sys.argv[1:6])
    os.makedirs(A.WORK, exist_ok=True)
    suite = unittest.TestSuite()
    for c in (Fragment, Recorded):
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(c))
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
