#!/usr/bin/env python3
"""The README's tables must list every CUPROF_* variable (generated from preload/config.def)
and every CUPROF_ALLOC_CONF key (allocator/alloc_config.def), so the docs cannot drift."""
import re
import subprocess
import sys

root = sys.argv[1]
readme = open(f"{root}/README.md").read()
problems = []

table = subprocess.run([sys.executable, f"{root}/preload/config_table.py"], check=True,
                       capture_output=True, text=True).stdout.strip()
if table not in readme:
    problems.append("README's CUPROF_* table differs from `preload/config_table.py` output")

keys = re.findall(r"^ALLOC_CONF_KEY\((\w+),", open(f"{root}/allocator/alloc_config.def").read(),
                  re.M)
for key in keys:
    if f"| `{key}` |" not in readme:
        problems.append(f"README does not document CUPROF_ALLOC_CONF key {key}")

for p in problems:
    print("FAIL:", p)
sys.exit(1 if problems else 0)
