#!/usr/bin/env python3
"""`cuprof plot` in headless Chromium: the page loads without console messages, the peaks it shows
are the ones `cuprof summary` prints, on the hand-built snapshot and on a 10^5-entry snapshot;
a screenshot of each is saved in WORKDIR. Skips (77) when /usr/bin/chromium is absent.

Usage: test_plot.py CUPROF WORKDIR
"""
import os
import pickle
import random
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import snapshots as S  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def big_snapshot(n_entries):
    """A 10^5-entry history: allocs and frees of varied sizes inside four 64 MiB segments."""
    rng = random.Random(7)
    segs = [S.BASE + i * 0x8000000 for i in range(4)]
    trace = [S.entry("segment_alloc", a, 64 * S.MiB, S.F_PARAMS, t=i) for i, a in enumerate(segs)]
    live = {}
    slots = [(a + k * S.MiB, k) for a in segs for k in range(64)]
    stacks = [S.F_ACT, S.F_SMALL, S.F_TMP, S.F_PARAMS]
    t = 10
    while len(trace) < n_entries:
        addr, _ = rng.choice(slots)
        t += 1
        if addr in live:
            size, fr = live.pop(addr)
            trace.append(S.entry("free_requested", addr, size, fr, t=t))
            trace.append(S.entry("free_completed", addr, size, fr, t=t))
        else:
            size = rng.randrange(512, S.MiB, 512)
            fr = rng.choice(stacks)
            live[addr] = (size, fr)
            trace.append(S.entry("alloc", addr, size, fr, t=t))
    segments = []
    for a in segs:
        blocks, off = [], 0
        for k in range(64):
            ba = a + k * S.MiB
            if ba in live:
                size, fr = live[ba]
                rounded = (size + 511) // 512 * 512
                blocks.append(S.block(ba, rounded, size, "active_allocated", fr))
                if rounded < S.MiB:
                    blocks.append(S.block(ba + rounded, S.MiB - rounded, 0, "inactive", []))
            else:
                blocks.append(S.block(ba, S.MiB, 0, "inactive", []))
        segments.append({"device": 0, "address": a, "total_size": 64 * S.MiB,
                         "allocated_size": 0, "active_size": 0, "requested_size": 0,
                         "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
                         "is_expandable": False, "frames": S.F_PARAMS, "blocks": blocks})
    return {"segments": segments, "device_traces": [trace],
            "allocator_settings": S.allocator_settings()}


def check(cuprof, work, name, snap):
    path = os.path.join(work, name + ".pickle")
    with open(path, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    html = os.path.join(work, name + ".html")
    p = subprocess.run([cuprof, "plot", path, "-o", html], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    page = open(html).read()
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "") \
        and "https://" not in page, "the page must not reach the network"
    summary = subprocess.run([cuprof, "summary", path], capture_output=True, text=True).stdout
    want = {
        "peak-reserved": re.search(r"^peak reserved: (.+?) at", summary, re.M).group(1),
        "peak-live": re.search(r"^peak live: +(.+?) at", summary, re.M).group(1),
        "end-reserved": re.search(r"^at the end: (.+?) reserved", summary, re.M).group(1),
        "end-live": re.search(r"^at the end: .* allocated, (.+?) live", summary, re.M).group(1),
    }
    entries = re.search(r"^history: (\d+) trace entries", summary, re.M).group(1)
    common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
              "--disable-background-networking", "--enable-logging=stderr", "--v=0"]
    with tempfile.TemporaryDirectory() as prof:
        r = subprocess.run(common + ["--user-data-dir=" + prof, "--dump-dom", "file://" + html],
                           capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    console = [l for l in r.stderr.splitlines() if "CONSOLE" in l]
    assert not console, "console messages:\n" + "\n".join(console)
    dom = r.stdout
    assert 'data-ready="1"' in dom, "the page script did not finish"
    for key, text in want.items():
        m = re.search(r'id="%s-0"[^>]*>([^<]*)<' % key, dom)
        assert m, key + " not in the DOM"
        assert m.group(1) == text, "%s: page shows %r, summary %r" % (key, m.group(1), text)
    m = re.search(r'id="entries-0"[^>]*>(\d+)<', dom)
    assert m and m.group(1) == entries, "trace entries differ"
    assert dom.count('class="block"') > 0, "no blocks drawn in the segment map"
    shot = os.path.join(work, name + ".png")
    with tempfile.TemporaryDirectory() as prof:
        r = subprocess.run(common + ["--user-data-dir=" + prof, "--window-size=1200,1400",
                                     "--screenshot=" + shot, "file://" + html],
                           capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and os.path.getsize(shot) > 10000, "no screenshot"
    print("%s: ok, %s entries, screenshot %s" % (name, entries, shot))


def main():
    cuprof, work = sys.argv[1], sys.argv[2]
    if not os.access(CHROMIUM, os.X_OK):
        print("chromium not installed (scripts/setup installs it): skipped")
        sys.exit(77)
    os.makedirs(work, exist_ok=True)
    check(cuprof, work, "handmade", S.pytorch_snapshot())
    check(cuprof, work, "entries-1e5", big_snapshot(100_000))


if __name__ == "__main__":
    main()
