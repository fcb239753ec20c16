#!/usr/bin/env python3
"""Cross-checks stats/ against a Python rendering of torch.cuda.memory_summary() and
json.dumps(torch.cuda.memory_stats()) on seeded random counters. Usage: check_summary.py TOOL"""
import json
import os
import random
import subprocess
import sys

ARRAYS = ["allocation", "segment", "active", "inactive_split", "allocated_bytes",
          "reserved_bytes", "active_bytes", "inactive_split_bytes", "requested_bytes"]
SINGLES = ["oversize_allocations", "oversize_segments"]
SCALARS = ["num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc",
           "num_device_free", "max_split_size"]
FIELDS = ["current", "peak", "allocated", "freed"]


def all_keys():
    keys = [f"{a}.{p}.{f}" for a in ARRAYS for p in ("all", "small_pool", "large_pool")
            for f in FIELDS]
    keys += [f"{s}.{f}" for s in SINGLES for f in FIELDS]
    return sorted(keys + SCALARS)


def format_size(sz, pref_sz):
    prefixes = ["B  ", "KiB", "MiB", "GiB", "TiB", "PiB"]
    prefix = prefixes[0]
    for new_prefix in prefixes[1:]:
        if pref_sz < 768 * 1024:
            break
        prefix = new_prefix
        sz //= 1024
        pref_sz /= 1024
    return f"{sz:6d} {prefix}"


def format_count(cnt, pref_cnt):
    prefixes = [" ", "K", "M"]
    prefix = prefixes[0]
    for new_prefix in prefixes[1:]:
        if pref_cnt < 750 * 1000:
            break
        prefix = new_prefix
        cnt //= 1000
        pref_cnt /= 1000
    return f"{cnt:7d} {prefix} "


def summary(stats, device, abbreviated):
    metrics = [("allocated_bytes", "Allocated memory", format_size),
               ("active_bytes", "Active memory", format_size),
               ("requested_bytes", "Requested memory", format_size),
               ("reserved_bytes", "GPU reserved memory", format_size),
               ("inactive_split_bytes", "Non-releasable memory", format_size),
               ("allocation", "Allocations", format_count),
               ("active", "Active allocs", format_count),
               ("segment", "GPU reserved segments", format_count),
               ("inactive_split", "Non-releasable allocs", format_count)]
    lines = ["=" * 75,
             " " + " " * 16 + f" PyTorch CUDA memory summary, device ID {device:<17d} ",
             "-" * 75,
             "  " + " " * 9 + f" CUDA OOMs: {stats['num_ooms']:<12d} | " + " " * 6
             + f" cudaMalloc retries: {stats['num_alloc_retries']:<8d}  ",
             "=" * 75,
             "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  "]
    for key, name, fmt in metrics:
        lines.append("-" * 75)
        rows = [("all", name)]
        if not abbreviated:
            rows += [("large_pool", "      from large pool"), ("small_pool", "      from small pool")]
        pref = [stats[f"{key}.all.{f}"] for f in FIELDS]
        for pool, label in rows:
            cells = [fmt(stats[f"{key}.{pool}.{f}"], pref[i]) for i, f in enumerate(FIELDS)]
            lines.append(f" {label:<21} | " + " | ".join(cells) + " ")
    for key, name in [("oversize_allocations", "Oversize allocations"),
                      ("oversize_segments", "Oversize GPU segments")]:
        lines.append("-" * 75)
        cells = [format_count(stats[f"{key}.{f}"], stats[f"{key}.{f}"]) for f in FIELDS]
        lines.append(f" {name:<21} | " + " | ".join(cells) + " ")
    lines.append("=" * 75)
    return "|" + "|\n|".join(lines) + "|\n"


def random_value(rng):
    scale = rng.choice([0, 10, 1000, 750000, 786432, 2 ** 20, 2 ** 30, 2 ** 40, 2 ** 50, 2 ** 61])
    return max(0, scale + rng.randint(-3, 3)) if rng.random() < 0.5 else rng.randint(0, scale)


def main():
    tool = sys.argv[1]
    rng = random.Random(20240531)
    keys = all_keys()
    assert len(keys) == 122
    # 200 random cases, 60 under ASan (a slow start per run; the same code each time).
    for case in range(60 if os.environ.get("SANITIZER_BUILD") else 200):
        stats = {k: random_value(rng) for k in keys}
        stats["max_split_size"] = rng.choice([-1, 134217728])
        device = rng.randint(0, 7)
        abbreviated = case % 3 == 0
        text = "".join(f"{k} {v}\n" for k, v in stats.items())
        out = subprocess.run([tool, str(device), str(int(abbreviated))], input=text,
                             capture_output=True, text=True, check=True).stdout
        table, js = out.split("JSON\n")
        expected = summary(stats, device, abbreviated)
        if table != expected:
            print(f"case {case}: summary differs\n--- expected\n{expected}--- got\n{table}")
            return 1
        if json.loads(js) != stats or js != json.dumps(dict(sorted(stats.items()))) + "\n":
            print(f"case {case}: JSON differs\n{js}")
            return 1
    print("200 cases agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
