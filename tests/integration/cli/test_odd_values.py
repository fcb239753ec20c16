#!/usr/bin/env python3
"""Every `cuprof` subcommand on PyTorch-layout snapshots with odd values (issue 12): a frame line
of 2^64-1 (PyTorch's size_t -1 for an unknown line), a block size of 2^63+5, a 20-byte int under
keys cuprof does not use, negative sizes and counters, JSON integers past 64 bits and with an
exponent. The files come from Python's own pickle (protocol 2 and the default, which write big
ints as LONG1) and json modules.

Each subcommand must succeed (exit 0, or 1 where 1 means "found something": leaks, replay
differences) or refuse with one line naming the file, the field and its value; a field it cannot
use is named once on stderr (`cuprof: FILE: WHERE: field "KEY" is VALUE: WHY; WHAT WAS DONE`),
and no output ever shows 2^64-1 as a line number.

Usage: test_odd_values.py CUPROF WORKDIR
"""
import copy
import json
import os
import pickle
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_data  # noqa: E402
import snapshots as S  # noqa: E402

CUPROF = None
WORK = None
U64_MAX = (1 << 64) - 1
BIG20 = (1 << 158) + 12345          # a 20-byte int (LONG1 of 20 bytes)


def run(*args):
    p = subprocess.run([CUPROF, *args], capture_output=True, text=True, timeout=120)
    if "Sanitizer" in p.stderr or "runtime error" in p.stderr:
        raise AssertionError("sanitizer report:\n" + p.stderr)
    return p


def pytorch_2x(line_unknown=True):
    """S.pytorch_snapshot() with the keys PyTorch 2.1-2.5 add that cuprof does not use, and
    PyTorch's unknown line (size_t -1) on a C++ frame shared by several stacks."""
    snap = copy.deepcopy(S.pytorch_snapshot())
    cxx = {"name": "c10::cuda::CUDACachingAllocator::malloc", "filename": "CUDACachingAllocator.cpp",
           "line": U64_MAX if line_unknown else 0}
    for seg in snap["segments"]:
        seg["user_metadata"] = ""
        for b in seg["blocks"]:
            if b["frames"]:
                b["frames"] = [cxx] + b["frames"]
    for e in snap["device_traces"][0]:
        e["compile_context"] = "N/A"
        e["user_metadata"] = ""
        if e["frames"]:
            e["frames"] = [cxx] + e["frames"]
            e["forward_frames"] = [dict(e["frames"][-1], fx_node_op="call_function")]
    snap["external_annotations"] = [{"device": 0, "time_us": 1_700_000_000_000_005,
                                     "stage": "forward"}]
    snap["allocator_settings"]["graph_capture_record_stream_reuse"] = False
    return snap


def commands(path, other):
    out = os.path.join(WORK, os.path.basename(path))
    return [("summary", [path]), ("leaks", [path]), ("leaks", ["--json", path]),
            ("leaks", ["--all-frames", path]),
            ("diff", [other, path]), ("replay", ["--check", path]), ("flamegraph", [path]),
            ("timeline", [path, "-o", out + ".trace.json"]),
            ("plot", ["-o", out + ".html", path]), ("stats", [path])]


class Base(unittest.TestCase):
    def files(self, snap, stem):
        paths = []
        for fmt in ("p2", "pdefault", "json"):
            path = os.path.join(WORK, "%s-%s.%s" % (stem, fmt, "json" if fmt == "json" else
                                                   "pickle"))
            if fmt == "json":
                with open(path, "w") as f:
                    json.dump(snap, f)
            else:
                with open(path, "wb") as f:
                    pickle.dump(snap, f, protocol=2 if fmt == "p2" else pickle.DEFAULT_PROTOCOL)
            paths.append(path)
        return paths

    def every_command(self, snap, stem, fields=(), refused_ok=False):
        """Runs every subcommand on `snap` in three encodings. Each warning names the file; each
        field in `fields` (key, value text) is named on stderr exactly once per run."""
        good = os.path.join(WORK, "good.pickle")
        with open(good, "wb") as f:
            pickle.dump(S.pytorch_snapshot(), f)
        results = {}
        for path in self.files(snap, stem):
            for cmd, args in commands(path, good):
                p = run(cmd, *args)
                label = (os.path.basename(path), cmd, args[0])
                allowed = (0, 1) if cmd in ("leaks", "replay") else (0,)
                if refused_ok and p.returncode == 2:
                    lines = p.stderr.strip().splitlines()
                    self.assertEqual(len(lines), 1, (label, p.stderr))
                    self.assertIn(os.path.basename(path), lines[0])
                    continue
                self.assertIn(p.returncode, allowed, (label, p.stderr, p.stdout[-2000:]))
                for line in p.stderr.strip().splitlines():
                    self.assertTrue(line.startswith("cuprof: "), (label, line))
                    if cmd != "diff" or path in line:
                        self.assertIn(os.path.basename(path), line, (label, line))
                for key, value in fields:
                    hits = [l for l in p.stderr.splitlines()
                            if ('field "%s"' % key) in l and value in l]
                    self.assertEqual(len(hits), 1, (label, key, value, p.stderr))
                self.assertNotIn(str(U64_MAX), p.stdout, label)
                results[label] = p
        return results


class OddValues(Base):
    def test_pytorch_2x_unknown_lines_read_silently(self):
        snap = pytorch_2x()
        res = self.every_command(snap, "pt2x")
        for (name, cmd, first), p in res.items():
            self.assertEqual(p.stderr, "", (name, cmd))   # PyTorch's own conventions: no noise
            if cmd == "leaks" and first == "--json":
                got = json.loads(p.stdout)
                lines = {f["line"] for s in got["sites"] for f in s["frames"]}
                self.assertNotIn(0, lines)                # the allocator's frame is hidden
                self.assertIn(42, lines)
                got = json.loads(run("leaks", "--json", "--all-frames",
                                        os.path.join(WORK, name)).stdout)
                lines = {f["line"] for s in got["sites"] for f in s["frames"]}
                self.assertIn(0, lines)                   # unknown, as PyTorch writes C++ frames
            if cmd == "leaks" and first == "--all-frames":
                self.assertIn("c10::cuda::CUDACachingAllocator::malloc (CUDACachingAllocator.cpp)\n",
                              p.stdout)
                self.assertIn("forward (model.c:42)", p.stdout)
            if cmd == "leaks" and first not in ("--json", "--all-frames"):
                self.assertNotIn("CUDACachingAllocator", p.stdout)
                self.assertIn("      forward (model.c:42)", p.stdout)
        # The numbers are those of the same snapshot without the extra keys.
        plain = os.path.join(WORK, "plain.pickle")
        with open(plain, "wb") as f:
            pickle.dump(S.pytorch_snapshot(), f)
        want = json.loads(run("stats", plain).stdout)
        for path in self.files(snap, "pt2x"):
            self.assertEqual(json.loads(run("stats", path).stdout), want, path)

    def test_block_size_past_int64(self):
        snap = pytorch_2x()
        snap["segments"][1]["blocks"][0]["size"] = (1 << 63) + 5
        res = self.every_command(snap, "size63", fields=[("size", str((1 << 63) + 5))])
        for (name, cmd, first), p in res.items():
            self.assertIn("segment skipped", p.stderr, (name, cmd))
            if cmd == "stats":   # the small segment is dropped, the large one is read
                st = json.loads(p.stdout)
                self.assertEqual(st["segment.all.current"], 1)
                self.assertEqual(st["reserved_bytes.all.current"], 20 * S.MiB)

    def test_records_of_the_wrong_shape(self):
        """A segment that is not a dict, `blocks` that is not a list, a trace entry that is not a
        dict and a device's history that is not a list: each record is skipped with one line,
        the rest of the file is read."""
        snap = pytorch_2x()
        good_segment = snap["segments"][0]
        snap["segments"].append(7)
        snap["segments"].append(dict(good_segment, address=1 << 40, blocks=7))
        snap["device_traces"][0].append("not an entry")
        snap["device_traces"].append(5)
        res = self.every_command(snap, "shapes", fields=[
            ("segments[]", "7"), ("blocks", "7"), ("device_traces[][]", "not an entry"),
            ("device_traces[]", "5")])
        for (name, cmd, first), p in res.items():
            if cmd == "stats":   # the two good segments are read, as without the bad records
                st = json.loads(p.stdout)
                self.assertEqual(st["segment.all.current"], 2, name)

    def test_big_int_under_unused_keys(self):
        snap = pytorch_2x()
        snap["mystery"] = BIG20
        snap["segments"][0]["mystery"] = BIG20
        snap["segments"][0]["blocks"][1]["mystery"] = -BIG20
        snap["segments"][0]["blocks"][1]["frames"][1]["mystery"] = BIG20
        snap["device_traces"][0][2]["compile_context"] = BIG20
        snap["allocator_settings"]["mystery"] = BIG20
        data = pickle.dumps(snap, protocol=2)
        self.assertIn(b"\x8a\x14", data)                 # Python wrote LONG1 of 20 bytes
        res = self.every_command(snap, "big20")
        for (name, cmd, first), p in res.items():
            self.assertEqual(p.stderr, "", (name, cmd))

    def test_big_ints_where_cuprof_reads_them(self):
        snap = pytorch_2x()
        frames = snap["segments"][0]["blocks"][1]["frames"]
        frames[1] = dict(frames[1], line=BIG20)
        snap["device_traces"][0][1]["time_us"] = BIG20
        snap["device_traces"][0][1]["stream"] = BIG20
        snap["allocator_settings"]["max_split_size"] = U64_MAX     # SIZE_MAX: no limit
        res = self.every_command(snap, "bigread", fields=[("line", str(BIG20)),
                                                          ("time_us", str(BIG20)),
                                                          ("stream", str(BIG20))])
        for (name, cmd, first), p in res.items():
            if cmd == "stats":
                self.assertEqual(json.loads(p.stdout)["max_split_size"], -1)

    def test_negative_counts(self):
        snap = pytorch_2x()
        snap["segments"][0]["total_size"] = -1
        snap["segments"][0]["blocks"][1]["requested_size"] = -7
        snap["device_traces"][0][1]["size"] = -5
        stats = {"allocated_bytes.all.current": -12345, "num_alloc_retries": 3,
                 "max_split_size": -1}
        snap["cuprof"] = {"version": "0.1.0", "mode": "cache", "config": {}, "pid": 42,
                          "rank": 0, "host": "h", "argv": ["prog"], "stats": [stats],
                          "dropped_entries": [-3]}
        fields = [("total_size", "-1"), ("requested_size", "-7"), ("size", "-5"),
                  ("dropped_entries", "-3")]
        res = self.every_command(snap, "negative", fields=fields)
        for (name, cmd, first), p in res.items():
            if cmd == "stats":
                self.assertIn('field "allocated_bytes.all.current" is -12345: negative',
                              p.stderr)
                st = json.loads(p.stdout)
                self.assertEqual(st["num_alloc_retries"], 3)
                self.assertEqual(st["allocated_bytes.all.current"], 0)   # ignored: not recorded

    def test_negative_block_size(self):
        snap = pytorch_2x()
        snap["segments"][0]["blocks"][0]["size"] = -5
        self.every_command(snap, "negsize", fields=[("size", "-5")])


class JsonNumbers(Base):
    def put(self, name, text):
        path = os.path.join(WORK, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_integers_of_any_size_and_exponents(self):
        snap = pytorch_2x()
        text = json.dumps(snap)
        # JavaScript's JSON.stringify writes 2^64-1 as 18446744073709552000 and large sizes with
        # an exponent; 1e3-style integers are read where an integer is expected.
        text = text.replace('"line": %d' % U64_MAX, '"line": 18446744073709552000')
        text = text.replace('"size": %d' % (20 * S.MiB), '"size": 2.097152e7', 1)
        text = text.replace('"mystery": 0', '')
        path = self.put("numbers.json", text.replace("}", ', "mystery": %d}' % (10 ** 40), 1))
        ref = json.loads(run("stats", self.files(snap, "numbers-ref")[0]).stdout)
        p = run("stats", path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout), ref)
        self.assertIn('field "line" is 18446744073709552000', p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        p = run("stats", self.put("frac.json", json.dumps(
            dict(snap, segments=[dict(snap["segments"][0], total_size=1.5)]))))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn('field "total_size" is 1.5: not a whole number', p.stderr)


class JsonText(Base):
    """The JSON cuprof prints (leaks and diff --json, timeline, the data in plot's page) comes
    from the snapshot module's JSON emitter: strings with '<', quotes, backslashes and control
    bytes read back unchanged, '<' is never written raw (the plot's data sits in a <script>), and
    unsigned values above 2^63 print unsigned."""
    NAME = 'std::map<int, "q">::at \\ \x01\x1f\t\n</script>'
    LABEL = '<b>"stage"</b>\x02 \u00e9'
    SEG_STREAM = (1 << 63) + 7
    ENTRY_STREAM = U64_MAX - 1

    def snapshot(self):
        snap = pytorch_2x()
        odd = {"name": self.NAME, "filename": "a<b>.py", "line": 3}
        for seg in snap["segments"]:
            seg["stream"] = self.SEG_STREAM
            for b in seg["blocks"]:
                if b["frames"]:
                    b["frames"] = [odd] + b["frames"]
        trace = snap["device_traces"][0]
        for e in trace:
            e["stream"] = self.ENTRY_STREAM
            if e["frames"]:
                e["frames"] = [odd] + e["frames"]
        trace.append({"action": "annotate", "addr": 0, "size": 0, "stream": 0,
                      "time_us": trace[-1]["time_us"] + 1, "frames": [],
                      "user_metadata": self.LABEL})
        return snap

    def names(self, sites):
        return [f["name"] for s in sites for f in s["frames"]]

    def test_strings_and_big_unsigned_read_back(self):
        good = os.path.join(WORK, "good.pickle")
        with open(good, "wb") as f:
            pickle.dump(S.pytorch_snapshot(), f)
        for path in self.files(self.snapshot(), "jsontext"):
            p = run("leaks", "--json", path)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertNotIn("<", p.stdout)
            self.assertIn(self.NAME, self.names(json.loads(p.stdout)["sites"]), path)
            p = run("diff", "--json", good, path)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertNotIn("<", p.stdout)
            self.assertIn(self.NAME, self.names(json.loads(p.stdout)["sites"]), path)
            p = run("timeline", path)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertNotIn("<", p.stdout)
            events = json.loads(p.stdout)["traceEvents"]
            self.assertIn(self.LABEL, [e["name"] for e in events], path)
            streams = [e["args"]["stream"] for e in events if "stream" in e.get("args", {})]
            self.assertIn(self.ENTRY_STREAM, streams, path)
            self.check_plot(path)

    def check_plot(self, path):
        html = os.path.join(WORK, "jsontext.html")
        p = run("plot", "-o", html, path)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(html, encoding="utf-8") as f:
            page = f.read()
        start = page.index('<script id="cuprof-data"')
        end = page.index("</script>", start)
        self.assertNotIn("<", page[page.index(">", start) + 1:end], path)
        data = report_data.read(html)
        run0 = data.data["runs"][0]
        dev = run0["devices"][0]
        frames = [t for s in report_data.sites(data, run0, dev) for t in s["frames"]]
        self.assertTrue(any(t.startswith(self.NAME) for t in frames), (path, frames[:4]))
        self.assertIn("0x%x" % self.SEG_STREAM, dev["streams"], path)
        streams = {r["stream"] for r in report_data.history(data, dev)["segments"]}
        self.assertIn(dev["streams"].index("0x%x" % self.SEG_STREAM), streams, path)


def main():
    global CUPROF, WORK
    CUPROF, WORK = sys.argv[1], sys.argv[2]
    os.makedirs(WORK, exist_ok=True)
    suite = unittest.TestSuite()
    for case in (OddValues, JsonNumbers, JsonText):
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(case))
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
