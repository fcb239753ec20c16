#!/usr/bin/env python3
"""Invalid SIMCUDA_* values: one stderr line naming the variable (and the bad SIMCUDA_FAIL rule),
and cuInit fails (test_sim_mem's bad_env group checks the calls and prints cuInit's code)."""
import os
import subprocess
import sys
import unittest

PROG = sys.argv.pop(1)


def run(**env):
    full = {k: v for k, v in os.environ.items() if not k.startswith("SIMCUDA_")}
    full.update(env)
    p = subprocess.run([PROG, "bad_env"], env=full, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, [l for l in p.stderr.splitlines() if l.startswith("cuprof")]


class BadEnvironment(unittest.TestCase):
    def check(self, var, value, needle, code=1):
        rc, out, lines = run(**{var: value})
        self.assertEqual(rc, 0, out)
        self.assertIn("cuInit=%d" % code, out)
        self.assertEqual(len(lines), 1, lines)
        self.assertIn(var, lines[0])
        self.assertIn(needle, lines[0])

    def test_mem(self):
        for bad in ["12X", "", "G", "-5G", "1.5G", "1M", "99999999999999999999G"]:
            with self.subTest(bad=bad):
                self.check("SIMCUDA_MEM", bad, bad)

    def test_context_mem(self):
        for bad in ["3X", "", "-2M", "1.5M", "17T"]:
            with self.subTest(bad=bad):
                self.check("SIMCUDA_CONTEXT_MEM", bad, bad)

    def test_devices(self):
        self.check("SIMCUDA_DEVICES", "two", "two")

    def test_delays(self):
        for var in ["SIMCUDA_STREAM_DELAY_US", "SIMCUDA_MALLOC_US", "SIMCUDA_FREE_US"]:
            with self.subTest(var=var):
                self.check(var, "-1", "-1")

    def test_strict_handles(self):
        for bad in ["2", "yes", "-1"]:
            with self.subTest(bad=bad):
                self.check("SIMCUDA_STRICT_HANDLES", bad, bad)

    def test_fail_rules(self):
        for bad in ["alloc:nth=0", "alloc", "alloc:nth=x", "frees:nth=1", "free:above=1G",
                    "proc:", "proc:cuA:cuB", "alloc:nth=1:nth=2", "event_query:sometimes"]:
            with self.subTest(bad=bad):
                self.check("SIMCUDA_FAIL", "alloc:nth=3;" + bad, bad)

    def test_no_devices(self):
        rc, out, lines = run(SIMCUDA_DEVICES="0")
        self.assertEqual(rc, 0)
        self.assertIn("cuInit=100", out)  # CUDA_ERROR_NO_DEVICE
        self.assertEqual(lines, [])


if __name__ == "__main__":
    unittest.main()
