#!/usr/bin/env python3
"""Prints docs/reference/environment.md's CUPROF_* reference from preload/config.def (the one list).
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


def wrap(text, width=100):
    """Prose wrapped at `width` columns, never inside a `code span`."""
    words, lines, line = re.findall(r"`[^`]*`\S*|\S+", text), [], ""
    for w in words:
        if line and len(line) + 1 + len(w) > width:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}" if line else w
    return "\n".join(lines + [line] if line else lines)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                              "config.def")
    with open(path) as f:
        rows = list(entries(f.read()))
    print("| variable | default |")
    print("|---|---|")
    for name, _field, _kind, default, *_ in rows:
        print("| [`%s`](#%s) | %s |" % (name, name.lower(), "`%s`" % default if default else
                                        "(empty)"))
    for name, _field, kind, default, lo, hi, accepted, help_text in rows:
        if kind == "UINT":
            accepted = "an integer from %s to %s" % (lo, hi)
        elif kind in ("ENUM", "FLAGS"):
            accepted = ", ".join("`%s`" % v for v in accepted.split(","))
            if kind == "FLAGS":
                accepted = "a comma list of " + accepted + ", or `none`"
        print()
        print("### `%s`" % name)
        print()
        print(wrap("Accepted: %s. Default: %s." % (accepted, "`%s`" % default if default else
                                                   "empty")))
        print()
        print(wrap(help_text[0].upper() + help_text[1:] + "."))


if __name__ == "__main__":
    main()
