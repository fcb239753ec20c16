#!/usr/bin/env python3
"""Writes a C file defining `const char NAME[]` (NUL-terminated) and `NAME_len` from a file.

Usage: embed_file.py INPUT OUTPUT.c NAME HEADER
A byte-array initializer, not a string literal: ISO C limits literal length (-Woverlength-strings).
Bytes past 127 (UTF-8 text) are cast, as char may be signed.
"""
import sys


def main():
    src, dst, name, header = sys.argv[1:5]
    data = open(src, "rb").read()
    lines = [f"/* Generated from {src.split('/')[-1]} by embed_file.py: do not edit. */",
             f'#include "{header}"', "", f"const char {name}[] = {{"]
    for i in range(0, len(data), 16):
        lines.append("    " + ", ".join(str(b) if b < 128 else "(char)%d" % b
                                      for b in data[i:i + 16]) + ",")
    lines.append("    0,")
    lines.append("};")
    lines.append(f"const size_t {name}_len = {len(data)};")
    with open(dst, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
