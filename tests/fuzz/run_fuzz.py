#!/usr/bin/env python3
"""Runs one libFuzzer target for a bounded time from the checked-in seed corpus (read-only: new
inputs go to a scratch directory) and reports its execution count; a crash fails the test and
leaves the reproducer next to the build (crash-*, leak-*, timeout-*).

usage: run_fuzz.py TARGET CORPUS_DIR SECONDS

In scripts/test (no FUZZ_SECONDS) the run is reproducible: seed 1 and a fixed number of runs
(about SECONDS of work), so a pass/fail never depends on luck or machine load. FUZZ_SECONDS (set
by scripts/stress) switches to open-ended exploration for that long with a random seed.
"""
import os
import re
import subprocess
import sys
import tempfile


def main():
    exe, corpus, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    explore = "FUZZ_SECONDS" in os.environ
    seconds = int(os.environ.get("FUZZ_SECONDS", seconds))
    name = os.path.basename(exe)
    budget = ([f"-max_total_time={seconds}"] if explore
              else ["-seed=1", f"-runs={3000 * seconds}", f"-max_total_time={12 * seconds}"])
    if not os.path.isdir(corpus) or not os.listdir(corpus):
        sys.exit(f"{name}: no seed corpus in {corpus}")
    with tempfile.TemporaryDirectory(prefix=name + "-") as scratch:
        cmd = [exe, *budget, "-timeout=20", "-rss_limit_mb=2048",
               "-print_final_stats=1", "-max_len=65536",
               "-artifact_prefix=" + os.path.abspath(name) + "-", scratch, corpus]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=12 * seconds + 120)
    stats = dict(re.findall(r"stat::(\w+):\s+(\d+)", p.stderr))
    if p.returncode != 0:
        print(p.stderr[-6000:])
        sys.exit(f"{name}: libFuzzer exited {p.returncode} (reproducer: {name}-crash-* in "
                 f"{os.getcwd()})")
    execs = int(stats.get("number_of_executed_units", 0))
    if execs == 0:
        print(p.stderr[-3000:])
        sys.exit(f"{name}: no input was executed")
    print(f"{name}: {execs} executions ({'explored' if explore else 'seed 1'}), corpus {len(os.listdir(corpus))} seeds, "
          f"peak rss {stats.get('peak_rss_mb', '?')} MB")


if __name__ == "__main__":
    main()
