#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_cfi (tests/fuzz/corpus/cfi/): real .eh_frame records, each a
CIE and then one of its FDEs (its CIE pointer rewritten to match), with a pc inside the FDE, from libc (which has glibc's signal trampoline, the PLT's expression-defined CFA
and hand-written assembly) and libstdc++ (personality routines and LSDAs). Input layout: see
fuzz_cfi.c. Run once; the files are checked in.
Usage: tests/fuzz/make_cfi_corpus.py [ELF...]"""
import os
import struct
import sys

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "cfi")
LIBS = ["/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libstdc++.so.6"]


def eh_frame(path):
    data = open(path, "rb").read()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = sections[shstrndx]
    for s in sections:
        start = names[4] + s[0]
        name = data[start:data.index(b"\0", start)]
        if name == b".eh_frame":
            return data[s[4]:s[4] + s[5]]
    return b""


def uleb(b, i):
    v = shift = 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return v, i


def fde_encoding(eh, cie):
    """The 'R' encoding of the CIE at offset cie (None if unreadable)."""
    i = cie + 9
    end = eh.index(b"\0", i)
    aug = eh[i:end].decode()
    i = end + 1
    _, i = uleb(eh, i)          # code alignment
    while eh[i] & 0x80:          # data alignment (sleb)
        i += 1
    i += 1
    i += 1                       # return address register (version 1)
    if not aug.startswith("z"):
        return None
    _, i = uleb(eh, i)
    for c in aug[1:]:
        if c == "R":
            return eh[i]
        if c == "L":
            i += 1
        elif c == "P":
            enc = eh[i]
            i += 1 + {0x03: 4, 0x0B: 4, 0x00: 8, 0x04: 8, 0x0C: 8}[enc & 0x0F]
    return 0


def seeds(eh, limit):
    off, cies, out = 0, {}, []
    while off + 8 <= len(eh) and len(out) < limit:
        length, ident = struct.unpack_from("<II", eh, off)
        if length in (0, 0xFFFFFFFF):
            break
        if ident == 0:
            cies[off] = fde_encoding(eh, off)
        else:
            cie = off + 4 - ident
            if cies.get(cie) == 0x1B:  # pcrel sdata4, gcc's
                cie_bytes = eh[cie:cie + 4 + struct.unpack_from("<I", eh, cie)[0]]
                value, rng = struct.unpack_from("<iI", eh, off + 8)
                fde = struct.pack("<II", length, len(cie_bytes) + 4) + eh[off + 8:off + 4 + length]
                field = len(cie_bytes) + 8
                for delta in (0, rng // 2, max(rng - 1, 0)):
                    out.append(struct.pack("<iHH", field + value + delta, len(cie_bytes), 0) +
                               cie_bytes + fde)
        off += 4 + length
    return out


def handmade():
    """Instructions real code seldom has: an undefined return address (a thread's first frame),
    remember/restore_state, rbp-based CFAs, set_loc, the long advances, restore, the _sf and
    val_ forms, DW_CFA_register and expression rules (refused), a bad opcode."""
    cie_body = (b"\0\0\0\0" + b"\x01zR\0" + b"\x01\x78\x10" + b"\x01\x1b" +
                b"\x0c\x07\x08\x90\x01")
    cie = struct.pack("<I", len(cie_body)) + cie_body
    programs = [
        b"\x44\x07\x10",                                      # advance 4; undefined r16
        b"\x41\x0e\x10\x86\x02\x43\x0d\x06\x0a\x48\x0c\x07\x08\x0b\x42",  # push rbp...
        b"\x01\x00\x00\x00\x00\x02\x05\x03\x01\x00\x04\x01\x00\x00\x00\xc6\x06\x06",
        b"\x11\x06\x7e\x12\x06\x7e\x13\x7c\x14\x03\x01\x15\x03\x7f\x2e\x10\x2f\x06\x02",
        b"\x09\x06\x03\x10\x06\x02\x76\x00\x16\x06\x01\x00\x0f\x02\x77\x08",
        b"\x08\x06\x07\x07\x0a\x0a\x0a\x0a\x0a\x0a\x0a\x0a\x0a",
        b"\x2d\x3f",
    ]
    out = []
    for prog in programs:
        fde_body = struct.pack("<IiI", len(cie) + 4, -len(cie) - 8 + 0x100, 0x40) + b"\0" + prog
        fde_body += b"\0" * (-len(fde_body) % 4)
        fde = struct.pack("<I", len(fde_body)) + fde_body
        for pc in (0x100, 0x108, 0x13f):
            out.append(struct.pack("<iHH", pc, len(cie), 0) + cie + fde)
    return out


def main():
    os.makedirs(HERE, exist_ok=True)
    n = 0
    for path in sys.argv[1:] or LIBS:
        eh = eh_frame(path)
        every = seeds(eh, 100000)
        picked = every[::max(1, len(every) // 30)]
        # glibc's signal trampoline (augmentation "zRS"), always.
        picked += [s for s in every if b"zRS\0" in s[8:40]]
        for s in picked:
            with open(os.path.join(HERE, "seed-%03d" % n), "wb") as f:
                f.write(s)
            n += 1
    for s in handmade():
        with open(os.path.join(HERE, "hand-%03d" % n), "wb") as f:
            f.write(s)
        n += 1
    print(f"{n} seeds in {HERE}")


if __name__ == "__main__":
    main()
