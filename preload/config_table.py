#!/usr/bin/env python3
"""Prints the README's table of CUPROF_* variables from preload/config.def (the one list).
Usage: preload/config_table.py [path/to/config.def]"""
import os
import re
import sys


def entries(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    for m in re.finditer(r"CUPROF_VAR\((.*?)\)\s*(?=CUPROF_VAR|$)", text, re.S):
        args = re.findall(r'"(?:[^"\\]|\\.)*"(?:\s*"(?:[^"\\]|\\.)*")*|[^,\s][^,]*', m.group(1))
        args = [a.strip() for a in args]
        yield [re.sub(r'"\s*"', "", a).strip('"') if a.startswith('"') else a for a in args]


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                              "config.def")
    with open(path) as f:
        rows = list(entries(f.read()))
    print("| variable | accepted | default | meaning |")
    print("|---|---|---|---|")
    for name, _field, kind, default, lo, hi, accepted, help_text in rows:
        if kind == "UINT":
            accepted = "integer %s to %s" % (lo, hi)
        elif kind in ("ENUM", "FLAGS"):
            accepted = ", ".join("`%s`" % v for v in accepted.split(","))
            if kind == "FLAGS":
                accepted += ", or `none`"
        print("| `%s` | %s | %s | %s |" % (name, accepted, "`%s`" % default if default else "(empty)",
                                           help_text))


if __name__ == "__main__":
    main()
