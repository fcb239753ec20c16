"""The data inside a `cuprof plot` page (viewer/DATA.md), read as a test wants it: the JSON values
and the binary tables decoded into dicts, with no code of the page's own.

read(path) -> Page with .data, .ranks, .blobs; table(page, t) -> [row dicts]; stacks(page, run) ->
([frame texts per stack, innermost first], [site of each stack]); sites(page, run, dev) -> [row
dicts with "frames"]; history(page, dev) -> {"allocs", "events", "segments", "times"}.
"""
import base64
import json
import re


class Page:
    def __init__(self, data, ranks, blobs):
        self.data, self.ranks, self.blobs = data, ranks, blobs


def _script(html, name):
    m = re.search(r'<script id="cuprof-%s" type="application/[a-z-]+">(.*?)</script>' % name,
                  html, re.S)
    return m.group(1) if m else None


def read(path):
    with open(path, encoding="utf-8") as f:
        html = f.read()
    data = json.loads(_script(html, "data"))
    ranks = _script(html, "ranks")
    blobs = base64.b64decode(_script(html, "blobs") or "")
    return Page(data, json.loads(ranks) if ranks else None, blobs)


def varints(blobs, at):
    pos, end = at[0], at[0] + at[1]
    while pos < end:
        v, shift = 0, 0
        while True:
            b = blobs[pos]
            pos += 1
            v |= (b & 127) << shift
            shift += 7
            if b < 128:
                break
        yield v


def _unzig(v):
    return v >> 1 if v % 2 == 0 else -((v + 1) >> 1)


def table(page, t):
    """Rows of a table; "x+" fields are running sums, "x~" running sums of zigzag deltas."""
    fields = t["fields"]
    values = varints(page.blobs, t["at"])
    rows, acc = [], {f: 0 for f in fields}
    for _ in range(t["count"]):
        row = {}
        for f in fields:
            v = next(values)
            if f.endswith("+"):
                acc[f] += v
                row[f[:-1]] = acc[f]
            elif f.endswith("~"):
                acc[f] += _unzig(v)
                row[f[:-1]] = acc[f]
            else:
                row[f] = v
        rows.append(row)
    return rows


def stacks(page, run):
    values = varints(page.blobs, run["stacks"]["at"])
    out = []
    for _ in range(run["stacks"]["count"]):
        n = next(values)
        out.append([run["frames"][next(values)] for _ in range(n)])
    site_of = list(varints(page.blobs, run["site_of"]["at"]))
    return out, site_of


def sites(page, run, dev):
    texts, _ = stacks(page, run)
    fields = dev["site_fields"]
    rows = []
    for r in dev["sites"]:
        row = dict(zip(fields, r))
        row["frames"] = texts[row["site"]]
        rows.append(row)
    return rows


def history(page, dev):
    h = dev["history"]
    out = {k: table(page, h[k]) for k in ("allocs", "events", "segments") if k in h}
    if "times" in h:
        out["times"] = [r["time"] for r in table(page, h["times"])]
    return out
