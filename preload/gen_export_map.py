#!/usr/bin/env python3
"""Writes libcuprof.so's version script from preload/entry_points.def: cuprof's own API
(cuprof_*), dlsym, dlclose, _exit, _Exit and abort, the exec family, sigaction and signal(3)'s family, NVTX's tool entry points (InitializeInjectionNvtx2 for the core API:
preload/nvtx.c; InitializeInjectionNvtxExtension for its extensions: preload/nvtx_mem.c) and the exported
name of every DRIVER_LOOKUP, DRIVER_WRAPPER, DRIVER_RETRY and RUNTIME_WRAPPER row; everything else local. The script is anonymous so the exports stay
unversioned and interpose versioned references (dlsym@GLIBC_2.34, cudaMalloc@libcudart.so.13).

Usage: gen_export_map.py ENTRY_POINTS_DEF OUTPUT_MAP
"""
import re
import sys

# A row's kind and its first two columns (the exported name is the second for driver rows).
ROW = re.compile(r"^(DRIVER_LOOKUP|DRIVER_WRAPPER|DRIVER_RETRY|DRIVER_CALLED|RUNTIME_WRAPPER)\(\s*(\w+)\s*,\s*(\w+)?",
                 re.MULTILINE)


# The names NVTX looks up in the library NVTX_INJECTION64_PATH names.
NVTX_ENTRY_POINTS = ["InitializeInjectionNvtx2", "InitializeInjectionNvtxExtension"]
# A program asking for a signal's disposition gets the default where cuprof's handler stands in
# for it (preload/end_signals.c).
SIGNAL_SETTERS = ["sigaction", "signal", "bsd_signal", "sysv_signal"]
# An exec ends the image without exit's handlers: its snapshot is written first (preload/exec_dump.c).
EXEC_FAMILY = ["execve", "execv", "execvp", "execvpe", "execl", "execle", "execlp", "fexecve",
               "execveat"]


def exported_names(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL)
    names = []
    for kind, first, second in ROW.findall(text):
        if kind == "DRIVER_CALLED":
            continue
        name = first if kind == "RUNTIME_WRAPPER" else second
        if not name:
            sys.exit(f"gen_export_map.py: a {kind} row starting {first!r} has no exported name")
        names.append(name)
    if len(set(names)) != len(names):
        sys.exit("gen_export_map.py: an exported name appears twice in entry_points.def")
    return names


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], encoding="utf-8") as f:
        names = exported_names(f.read())
    if not names:
        sys.exit(f"gen_export_map.py: no entry point rows in {sys.argv[1]}")
    lines = ["/* Generated from preload/entry_points.def by preload/gen_export_map.py. */", "{",
             "  global:", "    cuprof_*;", "    dlsym;", "    dlclose;",
             "    _exit;", "    _Exit;", "    abort;"]
    lines += [f"    {name};" for name in EXEC_FAMILY]
    lines += [f"    {name};" for name in SIGNAL_SETTERS]
    lines += [f"    {name};" for name in NVTX_ENTRY_POINTS]
    lines += [f"    {name};" for name in names]
    lines += ["  local:", "    *;", "};", ""]
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
