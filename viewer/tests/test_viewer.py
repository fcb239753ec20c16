#!/usr/bin/env python3
"""The report page in Debian's Chromium (drive.mjs, through playwright-core), checked against the
snapshots read back by Python's pickle (tests/integration/cli/snapshots.py's model) and against
`cuprof summary` and `cuprof flamegraph`. Screenshots are kept in WORKDIR.

Usage: test_viewer.py CUPROF WORKDIR GROUP     GROUP: page, timeline, state, flame, sites, ranks,
compare. Skips (77) without /usr/bin/chromium or viewer/node_modules (scripts/setup installs both).
"""
import json
import os
import pickle
import random
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "integration", "cli"))
import report_data  # noqa: E402
import snapshots as S  # noqa: E402

CHROMIUM = os.environ.get("VIEWER_CHROMIUM", "/usr/bin/chromium")
MiB = S.MiB
F = S.frame
MACHINERY = [F("cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.13", 0),
             F("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc",
               "c10/cuda/CUDACachingAllocator.cpp", 1180)]


def user(*names):
    """A stack: the machinery, then user frames named `names` (innermost first), then main."""
    return MACHINERY + [F(n, "/src/model.py", 30 + i) for i, n in enumerate(names)] + \
        [F("main", "/src/train.py", 9)]


# ---- A training-shaped PyTorch snapshot, complete from an empty device: 6 parameters kept,
# 5 iterations of 8 activations stacked then freed in reverse, a second segment made in iteration
# 2 and given back at the end, an annotation per pass, an OOM. Every allocation is at least
# 1 MiB, so each is a band at every zoom.

SEG1 = S.BASE
SEG2 = S.BASE + 0x10000000


def training_snapshot():
    trace, t = [], [0]

    def add(action, addr, size, frames, **kw):
        t[0] += 7
        trace.append(dict(S.entry(action, addr, size, frames, t=t[0], **kw)))

    add("segment_alloc", SEG1, 64 * MiB, user("init"))
    params = []
    for k in range(6):
        a, size = SEG1 + k * 4 * MiB, (1 + k % 3) * MiB + 512 * k
        add("alloc", a, size, user("param_%d" % k, "init"))
        params.append((a, size, user("param_%d" % k, "init")))
    for it in range(5):
        trace.append({"action": "annotate", "addr": 0, "size": 0, "stream": 0,
                      "time_us": trace[-1]["time_us"] + 1, "frames": [],
                      "user_metadata": "iteration %d forward" % it})
        base = SEG1 + 24 * MiB if it != 2 else SEG2
        if it == 2:
            add("segment_alloc", SEG2, 32 * MiB, user("grow", "forward"))
        acts = []
        for k in range(8):
            a, size = base + k * 4 * MiB, (1 + (k + it) % 3) * MiB + 100 * k
            fr = user("layer%d_forward" % k, "forward")
            add("alloc", a, size, fr)
            acts.append((a, size, fr))
        for a, size, fr in reversed(acts):
            add("free_requested", a, size, fr)
            add("free_completed", a, size, fr)
    add("oom", 0, 200 * MiB, user("huge", "forward"), device_free=10 * MiB)
    add("segment_free", SEG2, 32 * MiB, user("empty_cache"))
    # The table at the end: SEG1 with the parameters, the rest free.
    blocks, off = [], 0
    for a, size, fr in params:
        if a > SEG1 + off:
            blocks.append(S.block(SEG1 + off, a - SEG1 - off, 0, "inactive", []))
        rounded = (size + 511) // 512 * 512
        blocks.append(S.block(a, rounded, size, "active_allocated", fr))
        off = a - SEG1 + rounded
    blocks.append(S.block(SEG1 + off, 64 * MiB - off, 0, "inactive", []))
    seg = {"device": 0, "address": SEG1, "total_size": 64 * MiB,
           "allocated_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
           "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
           "segment_pool_id": (0, 0), "is_expandable": False, "frames": user("init"),
           "blocks": blocks}
    return {"segments": [seg], "device_traces": [trace],
            "allocator_settings": S.allocator_settings()}


def with_cuprof(snap, rank, scale=1.0):
    """A copy with cuprof's section: rank, libraries and the device footprint."""
    snap = json.loads(json.dumps(snap))   # deep copy; tuples become lists, as JSON reads them
    for e in snap["device_traces"][0]:
        if e["action"] == "alloc" and "param" in e["frames"][2]["name"]:
            e["size"] = int(e["size"] * scale)
    lib = {"device": 0, "library": "libtorch_cuda.so", "path": "/opt/torch/libtorch_cuda.so",
           "is_program": False, "cache_requested_bytes": 20 * MiB,
           "cache_requested_bytes_peak": 40 * MiB, "cache_reserved_bytes": 64 * MiB,
           "cache_reserved_bytes_peak": 96 * MiB, "passthrough_bytes": 4 * MiB,
           "passthrough_bytes_peak": 4 * MiB, "device_bytes": 68 * MiB,
           "device_bytes_peak": 100 * MiB}
    snap["cuprof"] = {"version": "0.1.0", "mode": "cache", "config": {}, "pid": 100 + rank,
                      "rank": rank, "host": "node%d" % rank, "argv": ["train"], "stats": [{}],
                      "dropped_entries": [0], "libraries": [lib],
                      "device_footprint": [{"device": 0, "total_bytes": 1 << 30,
                                            "used_bytes_at_start": 4 * MiB,
                                            "used_bytes_at_dump": 80 * MiB,
                                            "graph_reserved_bytes_at_dump": 0}]}
    return snap


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


def check_page(cuprof, work, name, path):
    """One snapshot file's page loads with no console message and shows summary's figures (for
    the apps' snapshots that cuprof run wrote: tests/integration/cli/test_apps.py, group plot)."""
    html = plot(cuprof, work, name, [path])
    out = drive("load", html, work)
    check_figures(cuprof, path, out["figures"], name)
    out = drive("timeline", html, work)
    assert out["timeline"]["full"]["bands"], name + ": no band drawn"
    print("%s: ok (first paint %d ms, %d bands)" % (name, out["figures"]["painted"],
                                                    len(out["timeline"]["full"]["bands"])))


def usable():
    """Why the page cannot be tested here (None: it can)."""
    if not os.access(CHROMIUM, os.X_OK):
        return "chromium not installed (scripts/setup installs it)"
    if not os.path.isdir(os.path.join(HERE, "..", "node_modules", "playwright-core")) or \
            shutil.which("node") is None:
        return "node or viewer/node_modules missing (scripts/setup runs npm ci)"
    return None


# ---- The independent model: allocations as (born, died, addr, size, frames) with the page's
# state indices (born = alloc entry + 1, 0 when live at the start; died = free_completed + 1,
# or len(trace) + 1 when live at the end).

def allocations(snap):
    trace = snap["device_traces"][0]
    start = S.live_blocks(snap, 0, 0)
    open_, out = {}, []
    for addr, (size, frames) in sorted(start.items()):
        open_[addr] = len(out)
        out.append([0, len(trace) + 1, addr, size, frames])
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            if e["addr"] in open_:
                out[open_[e["addr"]]][1] = i + 1
            open_[e["addr"]] = len(out)
            out.append([i + 1, len(trace) + 1, e["addr"], e["size"], e["frames"]])
        elif e["action"] == "free_completed" and e["addr"] in open_:
            out[open_.pop(e["addr"])][1] = i + 1
    return out


def segments_after(snap, entry):
    """{addr: size} of the segments after trace entry `entry` (MemoryViz's backward replay)."""
    segs = {s["address"]: s["total_size"] for s in snap["segments"] if s["device"] == 0}
    for e in reversed(snap["device_traces"][0][entry + 1:]):
        if e["action"] == "segment_alloc":
            segs.pop(e["addr"], None)
        elif e["action"] == "segment_free":
            segs[e["addr"]] = e["size"]
    return segs


# ---- Running things

def run(args, rc=0):
    p = subprocess.run(args, capture_output=True, text=True)
    assert p.returncode == rc, "%s: exit %d\n%s%s" % (" ".join(args), p.returncode, p.stdout,
                                                      p.stderr[-3000:])
    return p


def write(work, name, snap):
    path = os.path.join(work, name + (".json" if name.endswith("-json") else ".pickle"))
    if path.endswith(".json"):
        with open(path, "w") as f:
            json.dump(snap, f)
    else:
        with open(path, "wb") as f:
            pickle.dump(snap, f, protocol=4)
    return path


def plot(cuprof, work, name, paths, *opts):
    html = os.path.join(work, name + ".html")
    run([cuprof, "plot", *opts, "-o", html, *paths])
    page = open(html, encoding="utf-8").read()
    # No address but XML namespaces, outside the bundled libraries' licence texts (drive.mjs
    # also fails on any request the page makes).
    code = page.split("<!--\nLicences of the libraries")[0]
    addresses = set(re.findall(r"https?://[^\s\"'<>)]*", code))
    assert all(a.startswith("http://www.w3.org/") for a in addresses), (name, addresses)
    return html


def drive(scenario, html, work, **args):
    p = subprocess.run(["node", os.path.join(HERE, "drive.mjs"), scenario, html, work,
                        json.dumps(args)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, "drive.mjs %s %s failed:\n%s" % (scenario, html, p.stderr[-4000:])
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["messages"] == [], "%s: console messages or requests: %s" % (html, out["messages"])
    return out


def summary_figures(cuprof, path):
    s = run([cuprof, "summary", path]).stdout
    return {
        "peak-reserved": re.search(r"^peak reserved: (.+?) at", s, re.M).group(1),
        "peak-live": re.search(r"^peak live: +(.+?) at", s, re.M).group(1),
        "end-reserved": re.search(r"^at the end: (.+?) reserved", s, re.M).group(1),
        "end-live": re.search(r"^at the end: .* allocated, (.+?) live", s, re.M).group(1),
        "entries": re.search(r"^history: (\d+) trace entries", s, re.M).group(1),
    }


def check_figures(cuprof, path, fig, what):
    want = summary_figures(cuprof, path)
    assert fig["shown"] == want, "%s: page shows %s, summary %s" % (what, fig["shown"], want)
    if fig["model"]:   # the page's own sums of the history are summary's peaks
        m, d = fig["model"], fig["dev"]
        assert m["peakLive"] == d["peak_live"] and m["peakLiveAt"] == d["peak_live_at"], (what, m, d)
        assert m["peakReserved"] == d["peak_reserved"], (what, m, d)
        assert m["endLive"] == d["end_live"] and m["endReserved"] == d["end_reserved"], (what, m, d)


# ---- Groups

def group_page(cuprof, work):
    """Loads with no console message: PyTorch's layouts (complete, mid-run, JSON), a 10^5-entry
    history, a page without the history, a flame graph page; figures are summary's."""
    cases = [("pytorch", S.pytorch_snapshot()), ("pytorch-midrun", S.pytorch_snapshot(True)),
             ("training-json", training_snapshot()), ("entries-1e5", big_snapshot(100_000))]
    for name, snap in cases:
        path = write(work, name, snap)
        html = plot(cuprof, work, name, [path])
        out = drive("load", html, work)
        check_figures(cuprof, path, out["figures"], name)
        print("%s: ok (first paint %d ms)" % (name, out["figures"]["painted"]))
    # The mid-run history's blocks live before it began are drawn from the start.
    path = write(work, "midrun", S.pytorch_snapshot(True))
    out = drive("timeline", plot(cuprof, work, "midrun", [path]), work, index=True)
    assert any(b["entry"] == -1 for b in out["timeline"]["full"]["bands"]), out["timeline"]["full"]
    # Without the history: figures still summary's.
    path = write(work, "training", training_snapshot())
    html = plot(cuprof, work, "training-nohistory", [path], "--no-history")
    out = drive("load", html, work)
    check_figures(cuprof, path, out["figures"], "--no-history")
    assert os.path.getsize(html) < os.path.getsize(plot(cuprof, work, "training", [path]))
    print("no-history: ok")


def group_timeline(cuprof, work):
    snap = training_snapshot()
    path = write(work, "training", snap)
    html = plot(cuprof, work, "training", [path])
    allocs = allocations(snap)
    # Hover the third activation of iteration 1: its own frames, not the machinery's.
    trace = snap["device_traces"][0]
    target = [i for i, e in enumerate(trace) if e["action"] == "alloc"
              and e["frames"][2]["name"] == "layer2_forward"][1]
    out = drive("timeline", html, work, index=True, hover=target)
    tl = out["timeline"]

    def live_in(lo, hi):
        """Allocations live in some state of [lo, hi): (alloc entry, addr, size)."""
        return sorted((b - 1, a, s) for b, d, a, s, _ in allocs if b < hi and d > lo)

    full = tl["full"]
    got = sorted((b["entry"], b["addr"], b["size"]) for b in full["bands"])
    assert full["visible"]["lo"] == 0 and full["visible"]["hi"] == len(trace) + 1, full["visible"]
    assert got == live_in(0, len(trace) + 1), "whole run: bands %s\nwant %s" % (
        got, live_in(0, len(trace) + 1))
    z = tl["zoomed"]["visible"]
    assert z["x1"] - z["x0"] < full["visible"]["x1"] - full["visible"]["x0"], (z, full["visible"])
    got = sorted((b["entry"], b["addr"], b["size"]) for b in tl["zoomed"]["bands"])
    assert got == live_in(z["lo"], z["hi"]), "zoomed %s: bands %s\nwant %s" % (
        z, got, live_in(z["lo"], z["hi"]))
    assert tl["panned"]["visible"]["x0"] < z["x0"], (tl["panned"]["visible"], z)
    r = tl["ranged"]["visible"]
    assert r["x1"] - r["x0"] < tl["panned"]["visible"]["x1"] - tl["panned"]["visible"]["x0"], r
    tip = tl["hover"]["tip"]
    assert "layer2_forward (/src/model.py:30)" in tip and "forward (/src/model.py:31)" in tip, tip
    assert "cudaMalloc" not in tip and "requested" in tip, tip
    pinned = tl["pinned"]
    assert "layer2_forward" in pinned["details"] and "cudaMalloc" not in pinned["details"], pinned
    assert pinned["highlight"] is not None and "cudaMalloc" in pinned["all"], pinned
    print("timeline: ok (%d bands, zoomed to states %d-%d with %d; hover %d ms, zoom %d ms, "
          "render %.1f ms)" % (len(full["bands"]), z["lo"], z["hi"], len(tl["zoomed"]["bands"]),
                               tl["hoverMs"], tl["zoomMs"], tl["renderMs"]))


def group_state(cuprof, work):
    snap = training_snapshot()
    path = write(work, "training", snap)
    html = plot(cuprof, work, "training", [path])
    trace = snap["device_traces"][0]
    marks = [i for i, e in enumerate(trace) if e["action"] in ("segment_alloc", "segment_free")]
    entries = sorted({0, 5, len(trace) // 2, len(trace) - 1} | set(marks) |
                     {m - 1 for m in marks if m > 0})
    oom = next(i for i, e in enumerate(trace) if e["action"] == "oom")
    out = drive("state", html, work, entries=entries + [oom])  # the OOM's step last
    series = S.series(snap, 0)
    for n, step in zip(entries, out["state"]["steps"]):
        assert step["at"] == n + 1, step
        want = sorted(segments_after(snap, n).items())
        got = sorted((a, s) for a, s in step["segments"])
        assert got == want, "after entry %d: page lists %s, the snapshot says %s" % (n, got, want)
        assert trace[n]["action"] in step["event"], (n, step["event"][:200])
        assert step["allocated"] == S.format_size(series[n + 1][0]), (n, step["allocated"])
        assert step["reserved"].startswith(S.format_size(series[n + 1][1])), (n, step["reserved"])
    before, after = out["state"]["arrows"]
    assert after == before + 1, out["state"]["arrows"]
    # An OOM shows `cuprof explain`'s verdict for it, in explain's own words.
    step = out["state"]["steps"][-1]
    assert step["at"] == oom + 1, step
    told = run([cuprof, "explain", "--at", str(oom), path]).stdout
    sentence = next(l for l in told.splitlines() if l.startswith("verdict: "))[len("verdict: "):]
    # explain's words once (the page used to put the verdict's kind before them again).
    assert step["verdict"] and step["verdict"].startswith(sentence), (step["verdict"], sentence)
    assert "what would have avoided it" in step["verdict"], step["verdict"]
    assert step["outOfMemory"] is None and step["driverMarkers"] == 0, step
    driver_oom(cuprof, work, snap)
    print("state: ok (%d entries stepped to, segments as the snapshot's replay; the OOM's verdict "
          "is explain's, and a driver's own call's)" % len(entries))


def driver_oom(cuprof, work, snap):
    """A refusal of the driver's own call (cuprof.oom_messages' `api`, no entry of its own) after
    20 entries: its marker on the timeline, and the state it met shows the call and explain's
    verdict for it."""
    snap = with_cuprof(snap, 0)
    message = "cuLaunchKernel: the driver found no device memory for itself"
    snap["cuprof"]["oom_messages"] = [{"device": 0, "trace_index": 20, "api": "cuLaunchKernel",
                                       "time_us": snap["device_traces"][0][19]["time_us"] + 1,
                                       "message": message}]
    path = write(work, "driver-oom", snap)
    html = plot(cuprof, work, "driver-oom", [path])
    out = drive("state", html, work, entries=[19], oomTips=True)["state"]
    step = out["steps"][0]
    told = run([cuprof, "explain", path]).stdout
    assert "the first OOM, in cuLaunchKernel (the driver's own memory) after 20 entries" in told, told
    sentence = next(l for l in told.splitlines() if l.startswith("verdict: "))[len("verdict: "):]
    assert step["at"] == 20 and step["driverMarkers"] == 1, step
    assert step["outOfMemory"] == "in cuLaunchKernel, the driver's own memory: " + message, step
    assert step["verdict"] and step["verdict"].startswith(sentence), (step["verdict"], sentence)
    assert "what the cache kept at the call under each setting" in step["verdict"], step["verdict"]
    # Hovered, the timeline's markers: the oom entry's, and the driver's call with its verdict.
    tips = {t["driver"]: t["tip"] for t in out["tips"]}
    assert len(out["tips"]) == 2 and tips[False].startswith("OOM at entry"), out["tips"]
    want = ("OOM in cuLaunchKernel (the driver's own memory) after 20 entries" + message +
            sentence)
    assert tips[True].startswith(want), (tips[True], want)


def folded(cuprof, path, at):
    lines = {}
    for line in run([cuprof, "flamegraph", "--at", at, path]).stdout.splitlines():
        stack, n = line.rsplit(" ", 1)
        lines[stack] = int(n)
    return lines


def group_flame(cuprof, work):
    snap = training_snapshot()
    path = write(work, "training", snap)
    for html in (plot(cuprof, work, "training", [path]),
                 os.path.join(work, "training-flamegraph.html")):
        if html.endswith("flamegraph.html"):
            run([cuprof, "flamegraph", "--html", "-o", html, path])
        out = drive("flame", html, work, search="layer3")
        fl = out["flame"]
        for at in ("peak", "end"):
            assert fl[at] == folded(cuprof, path, at), "%s at %s: page %s\nfolded %s" % (
                html, at, fl[at], folded(cuprof, path, at))
        total = {}
        for e in snap["device_traces"][0]:
            if e["action"] == "alloc":
                key = ";".join(S.frame_text(f) for f in reversed(e["frames"][2:]))
                total[key] = total.get(key, 0) + e["size"]
        assert fl["total"] == total, (fl["total"], total)
        s = fl["search"]
        assert s["found"] and all("layer3" in n for n in s["found"]), s
        assert s["colored"] > 0 and "search \"layer3\"" in s["status"], s
        assert "%" in fl["hoverTip"] and "layer3" in fl["hoverTip"], fl["hoverTip"]
        assert fl["zoomed"] > 0, "a click on a frame zooms (its ancestors fade)"
        print("flame: ok (%s)" % os.path.basename(html))


def group_sites(cuprof, work):
    snap = training_snapshot()
    path = write(work, "training", snap)
    out = drive("sites", plot(cuprof, work, "training", [path]), work, search="layer5")["sites"]
    for key, col in (("byEnd", 0), ("byTotal", 4), ("byCount", 5)):
        values = [r["values"][col] for r in out[key]]
        assert values == sorted(values, reverse=True), (key, values)
    assert out["byEnd"][0]["values"][0] == max(r["values"][0] for r in out["byEnd"])
    allocs = [e for e in snap["device_traces"][0] if e["action"] == "alloc"]
    assert sum(r["values"][5] for r in out["byEnd"]) == len(allocs)
    assert sum(r["values"][4] for r in out["byEnd"]) == sum(e["size"] for e in allocs)
    assert out["searched"] and all("layer5" in r["name"] for r in out["searched"]), out["searched"]
    assert out["highlight"] == out["searched"][0]["site"], out["highlight"]
    assert [r["highlighted"] for r in out["after"]] == [True], out["after"]
    print("sites: ok (%d sites)" % len(out["byEnd"]))


def group_ranks(cuprof, work):
    snap = training_snapshot()
    paths = [write(work, "rank%d" % r, with_cuprof(snap, r, 1.0 + 0.6 * r)) for r in range(2)]
    html = plot(cuprof, work, "ranks", paths)
    out = drive("ranks", html, work)
    check_figures(cuprof, paths[0], out["figures"], "ranks")
    rk = out["ranks"]
    text = run([cuprof, "summary", "--ranks-only"] + paths).stdout
    rows = re.findall(r"^(\d+) +node\d +(\d+) +(\S+ \S+) +(\S+ \S+) +(\d+)", text, re.M)
    got = [(r["cells"][0], r["cells"][2], r["cells"][3], r["cells"][5], r["cells"][7])
           for r in rk["rows"]]
    assert got == [tuple(x) for x in rows], (rk["rows"], rows)
    outliers = re.search(r"^outliers of peak allocated.*?:(.*)$", text, re.M).group(1)
    for r, row in zip(rows, rk["rows"]):
        assert row["outlier"] == ("rank %s " % r[0] in outliers), (row, outliers)
    assert rk["sparks"] == 2 and rk["charts"] == 1 and rk["sites"], rk
    print("ranks: ok")


def group_compare(cuprof, work):
    snap = training_snapshot()
    # B's path sorts first: the page must still show A, then B.
    a = write(work, "second", with_cuprof(snap, 0))
    b = write(work, "first", with_cuprof(snap, 0, 1.5))
    html = plot(cuprof, work, "compare", [a, b], "--compare")
    out = drive("ranks", html, work, tab="compare")
    check_figures(cuprof, a, out["figures"], "compare A")
    check_figures(cuprof, b, out["ranks"]["second"], "compare B")
    rows = {(r["cells"][0], r["cells"][1]): r["cells"][2:] for r in out["ranks"]["rows"]}
    fa, fb = summary_figures(cuprof, a), summary_figures(cuprof, b)
    assert rows[("0", "peak allocated")][:2] == [fa["peak-live"], fb["peak-live"]], rows
    assert rows[("0", "peak reserved")][:2] == [fa["peak-reserved"], fb["peak-reserved"]], rows
    assert out["ranks"]["charts"] == 1 and out["ranks"]["sites"], out["ranks"]
    for k in range(6):   # the parameters are half as large again in B
        size = (1 + k % 3) * MiB + 512 * k
        row = [r for r in out["ranks"]["sites"] if r[0].startswith("param_%d " % k)]
        assert row and row[0][2:] == [S.format_size(size), S.format_size(int(size * 1.5))], row
    assert len(out["ranks"]["runs"]) == 2, out["ranks"]["runs"]
    # `cuprof diff`'s answer, in its own words.
    told = run([cuprof, "diff", a, b]).stdout
    assert out["ranks"]["diff"] is not None and out["ranks"]["diff"].strip() == told.strip(), (
        out["ranks"]["diff"], told)
    # Libraries and the footprint, as charts.
    data = report_data.read(html).data
    assert data["runs"][0]["devices"][0]["libraries"][0]["name"] == "libtorch_cuda.so"
    print("compare: ok")


def main():
    cuprof, work, group = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]
    why = usable()
    if why:
        print(why + ": skipped")
        sys.exit(77)
    os.makedirs(work, exist_ok=True)
    globals()["group_" + group](cuprof, work)


if __name__ == "__main__":
    main()
