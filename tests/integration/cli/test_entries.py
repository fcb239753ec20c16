#!/usr/bin/env python3
"""Call sites named by the user's entry into a library (issue 27, item 6), on snapshots of a real
run and on the names nvcc's static runtime really carries:
  - stripped_user calls a stripped library (stripped_lib.c, built like cuBLAS: only its entry
    point named). The recorded stack shows the library's offsets; reports collapse them into
    `sblasCreate (libstripped_lib.so)` followed by the program's line.
  - stripped_user also allocates through functions named as NVIDIA's statically linked runtime
    names its own (libcudart_static_<40 hex digits>): hidden as the shared runtime is.
  - every text symbol of that form in a program nvcc built with its default -cudart static, as
    frames of a hand-built snapshot ahead of main: all hidden.
--all-frames shows everything. Numbers and frames are read back with pickle, never from cuprof.

Usage: test_entries.py CUPROF WORKDIR STRIPPED_USER SRC_DIR [NVCC_STATIC_PROGRAM]
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
from test_apps import sanitizer_preload  # noqa: E402

CUPROF = WORK = PROGRAM = SRC = STATIC = None
HASHED = re.compile(r"^libcudart_static_[0-9a-f]{40}$")


def cuprof(*args, rc=None):
    env = dict(os.environ, **(sanitizer_preload() if args[0] == "run" else {}))
    for k in list(env):
        if k.startswith("CUPROF_") and k != "CUPROF_SOCKET_DIR":
            del env[k]
    p = subprocess.run([CUPROF, *args], capture_output=True, text=True, timeout=300, env=env)
    if "Sanitizer" in p.stderr or "runtime error" in p.stderr:
        raise AssertionError("sanitizer report:\n" + p.stderr)
    if rc is not None and p.returncode != rc:
        raise AssertionError("cuprof %s: exit %d, expected %d\n%s\n%s"
                             % (" ".join(args), p.returncode, rc, p.stdout, p.stderr))
    return p


def source_line(marker):
    with open(os.path.join(SRC, "stripped_user.c")) as f:
        hits = [i + 1 for i, l in enumerate(f) if "@" + marker in l]
    assert len(hits) == 1, (marker, hits)
    return hits[0]


class Recorded(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.path = os.path.join(WORK, "stripped.pickle")
        for f in os.listdir(WORK):
            if f.startswith("stripped."):
                os.unlink(os.path.join(WORK, f))
        p = cuprof("run", "--sim", "-q", "-o", cls.path, "--", PROGRAM, rc=0)
        assert "stripped_user: handles=2 runtime_bytes=3145728" in p.stdout, p.stdout
        with open(cls.path, "rb") as f:
            cls.snap = pickle.load(f)

    def allocs(self):
        return [e for e in self.snap["device_traces"][0] if e["action"] == "alloc"]

    def test_recorded_stacks_show_the_offsets(self):
        """The snapshot keeps every frame: the library's internal functions as offsets."""
        lib = [e for e in self.allocs() if e["size"] == 4 << 20]
        self.assertEqual(len(lib), 2)
        names = [f["name"] for f in lib[0]["frames"]]
        at = names.index("sblasCreate")
        bare = [n for n in names[:at] if n.startswith("libstripped_lib.so+0x")]
        self.assertEqual(len(bare), 2, names)  # handle_init and workspace_alloc
        self.assertEqual(names[at + 1], "main", names)
        runtime = [e for e in self.allocs() if e["size"] == 3 << 20]
        names = [f["name"] for f in runtime[0]["frames"]]
        self.assertEqual(sum(1 for n in names if HASHED.match(n)), 2, names)

    def test_reports_name_the_entry_point(self):
        main = "main (%s:%d)"
        src = [f["filename"] for f in self.allocs()[0]["frames"] if f["name"] == "main"][0]
        self.assertTrue(src.endswith("/stripped_user.c"), src)
        got = json.loads(cuprof("leaks", "--json", self.path, rc=1).stdout)
        sites = [([S.frame_text(f) for f in s["frames"]], s["requested_bytes"], s["blocks"])
                 for s in got["sites"]]
        create = ["sblasCreate (libstripped_lib.so)", main % (src, source_line("create"))]
        runtime = [main % (src, source_line("runtime"))]
        self.assertEqual(sites, [(create, 8 << 20, 2), (runtime, 3 << 20, 1)])
        # summary: the same site, in the same words.
        out = cuprof("summary", self.path, rc=0).stdout
        self.assertIn("   1. 8.00 MiB in 2 allocations\n       %s\n       %s\n" % tuple(create),
                      out)
        self.assertIn("   2. 3.00 MiB in 1 allocation\n       %s\n" % runtime[0], out)
        # --all-frames: the offsets and the runtime's names are there again.
        every = cuprof("leaks", "--all-frames", self.path, rc=1).stdout
        self.assertIn("libstripped_lib.so+0x", every)
        self.assertIn("libcudart_static_4d8b33a106dceb3c07a56e26de61f545ff6e5ec8", every)
        self.assertIn("sblasCreate (" + os.path.dirname(PROGRAM), every)


class NvccNames(unittest.TestCase):
    def test_every_static_runtime_function_is_hidden(self):
        if not STATIC or not os.path.exists(STATIC):
            self.skipTest("no program built by nvcc")
        nm = subprocess.run(["nm", STATIC], capture_output=True, text=True, check=True).stdout
        names = sorted({l.split()[2] for l in nm.splitlines()
                        if len(l.split()) == 3 and l.split()[1] in "tT"
                        and l.split()[2].startswith("libcudart_static_")})
        self.assertGreater(len(names), 100)
        self.assertTrue(all(HASHED.match(n) for n in names), names[:5])
        # One block per runtime function: cudaMalloc, that function, main.
        base = 0x7F0000000000
        user = S.frame("main", "/src/app.cu", 12)
        blocks, trace = [], []
        for i, n in enumerate(names):
            frames = [S.frame("cudaMalloc", STATIC, 0), S.frame(n, STATIC, 0), user]
            blocks.append(S.block(base + 512 * i, 512, 512, "active_allocated", frames))
            trace.append(S.entry("alloc", base + 512 * i, 512, frames, t=i))
        size = 2 << 20
        blocks.append(S.block(base + 512 * len(names), size - 512 * len(names), 0, "inactive",
                              []))
        seg = {"device": 0, "address": base, "total_size": size,
               "allocated_size": 512 * len(names), "active_size": 512 * len(names),
               "requested_size": 512 * len(names), "stream": 0, "segment_type": "small",
               "segment_pool_id": (0, 0), "is_expandable": False, "frames": [user],
               "blocks": blocks}
        snap = {"segments": [seg], "device_traces": [trace],
                "allocator_settings": S.allocator_settings()}
        path = os.path.join(WORK, "nvcc-names.pickle")
        with open(path, "wb") as f:
            pickle.dump(snap, f, protocol=4)
        got = json.loads(cuprof("leaks", "--json", path, rc=1).stdout)
        self.assertEqual([([S.frame_text(f) for f in s["frames"]], s["blocks"])
                          for s in got["sites"]], [(["main (/src/app.cu:12)"], len(names))])
        every = json.loads(cuprof("leaks", "--json", "--all-frames", path, rc=1).stdout)
        self.assertEqual(len(every["sites"]), len(names))


def main():
    global CUPROF, WORK, PROGRAM, SRC, STATIC
    CUPROF, WORK, PROGRAM, SRC = (os.path.abspath(a) for a in sys.argv[1:5])
    STATIC = sys.argv[5] if len(sys.argv) > 5 else ""
    os.makedirs(WORK, exist_ok=True)
    suite = unittest.TestSuite()
    for case in (Recorded, NvccNames):
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(case))
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
