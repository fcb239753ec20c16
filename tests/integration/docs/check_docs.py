#!/usr/bin/env python3
"""The documentation and the program agree, and the Markdown stays readable:
- docs/reference/environment.md holds preload/config_table.py's output (the one list of CUPROF_*
  variables, from preload/config.def) and a section for every CUPROF_ALLOC_CONF key
  (allocator/alloc_config.def); every CUPROF_* and SIMCUDA_* name the pages mention exists, and
  every CUPROF_* name the project's scripts and tests read from the environment is a variable;
- docs/reference/commands.md has a section and a `--help` example for every subcommand
  `cuprof --help` lists, and no section for one it does not; every `--option` written after
  `cuprof SUBCOMMAND` in the pages is one that subcommand's `--help` lists;
- the README stays a front door (at most 250 lines), and no line outside code blocks is longer
  than 120 characters (table rows included: long explanations go under the table);
- every relative link points at a file that exists.

usage: check_docs.py SOURCE_ROOT CUPROF
"""
import os
import re
import subprocess
import sys

MAX_LINE = 120
MAX_README_LINES = 250


def pages(root):
    files = [os.path.join(root, "README.md"), os.path.join(root, "CHANGELOG.md")]
    for top, _dirs, names in os.walk(os.path.join(root, "docs")):
        files += [os.path.join(top, n) for n in sorted(names) if n.endswith(".md")]
    return [f for f in files if os.path.exists(f)]


def prose_lines(text):
    """(line number, line) of every line outside fenced code blocks."""
    inside = False
    for n, line in enumerate(text.split("\n"), 1):
        if line.startswith("```"):
            inside = not inside
            continue
        if not inside:
            yield n, line


def code_lines(text):
    inside = False
    for line in text.split("\n"):
        if line.startswith("```"):
            inside = not inside
            continue
        if inside:
            yield line


def normalized(text):
    return re.sub(r"\s+", " ", text).strip()


def subcommands(cuprof):
    out = subprocess.run([cuprof, "--help"], capture_output=True, text=True).stdout
    block = out.split("subcommands:", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in block.strip().split("\n") if line.strip()]


def options_of(cuprof, cmd):
    out = subprocess.run([cuprof, cmd, "--help"], capture_output=True, text=True).stdout
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", out))


def main():
    root, cuprof = sys.argv[1], sys.argv[2]
    problems = []
    texts = {p: open(p).read() for p in pages(root)}
    rel = {p: os.path.relpath(p, root) for p in texts}

    # The variables.
    env_page = os.path.join(root, "docs", "reference", "environment.md")
    table = subprocess.run([sys.executable, os.path.join(root, "preload", "config_table.py")],
                           check=True, capture_output=True, text=True).stdout
    if normalized(table) not in normalized(texts.get(env_page, "")):
        problems.append("docs/reference/environment.md differs from preload/config_table.py's "
                        "output (run scripts/docs)")
    config_def = open(os.path.join(root, "preload", "config.def")).read()
    known_vars = set(re.findall(r"^CUPROF_VAR\((CUPROF_\w+),", config_def, re.M))
    # Not settings: what `cuprof run` sets for its program (the shim accepts it too).
    forwarded = open(os.path.join(root, "snapshot", "forwarded_signal.h")).read()
    known_vars |= set(re.findall(r'^#define FORWARDED_SIGNAL_ENV "(CUPROF_\w+)"', forwarded, re.M))
    keys = re.findall(r"^ALLOC_CONF_KEY\((\w+),",
                      open(os.path.join(root, "allocator", "alloc_config.def")).read(), re.M)
    for key in keys:
        if f"### `{key}`" not in texts.get(env_page, ""):
            problems.append(f"docs/reference/environment.md has no section for CUPROF_ALLOC_CONF "
                            f"key {key}")
    # The shim refuses to start on a CUPROF_* name it does not know: a knob of the project's own
    # tests or scripts under that prefix would stop `cuprof run` wherever it is exported.
    tree = subprocess.run(["git", "-C", root, "ls-files", "scripts", "tests", "viewer/tests"],
                          capture_output=True, text=True).stdout.split()
    reads = re.compile(r"environ(?:\.get\(|\[) *[\"'](CUPROF_\w+)|process\.env\.(CUPROF_\w+)|"
                       r"\$\{?(CUPROF_\w+)|getenv\(\"(CUPROF_\w+)\"|\"(CUPROF_\w+)\" in os\.environ")
    for rel_path in tree:
        try:
            text = open(os.path.join(root, rel_path), errors="replace").read()
        except (IsADirectoryError, FileNotFoundError):
            continue
        for m in reads.finditer(text):
            name = next(g for g in m.groups() if g)
            if name not in known_vars:
                problems.append(f"{rel_path}: reads {name}, which the shim refuses as an unknown "
                                "variable (name it outside CUPROF_)")
    sim_names = set()
    for top, _dirs, names in os.walk(os.path.join(root, "tests", "sim")):
        for n in names:
            if n.endswith((".c", ".h")):
                sim_names |= set(re.findall(r"\"(SIMCUDA_\w+)\"", open(os.path.join(top, n)).read()))
    for p, text in texts.items():
        if p.endswith("CHANGELOG.md"):
            continue  # history may name what is gone
        for name in sorted(set(re.findall(r"\bCUPROF_[A-Z][A-Z0-9_]*\b", text))):
            if name.startswith(("CUPROF_E", "CUPROF_SUCCESS")):
                continue  # the C API's results and cuprof's own error codes, not variables
            if name not in known_vars:
                problems.append(f"{rel[p]}: {name} is not a variable cuprof knows")
        for name in sorted(set(re.findall(r"\bSIMCUDA_[A-Z][A-Z0-9_]*\b", text))):
            if name not in sim_names:
                problems.append(f"{rel[p]}: {name} is not a setting of the simulated device")

    # The subcommands and their options.
    commands_page = os.path.join(root, "docs", "reference", "commands.md")
    ctext = texts.get(commands_page, "")
    cmds = subcommands(cuprof)
    headed = set()
    for h in re.findall(r"^## (cuprof .*)$", ctext, re.M):
        headed |= set(re.findall(r"\b([a-z][a-z-]*)\b", h.replace("cuprof", "")))
    headed.discard("and")
    for c in cmds:
        if c not in headed:
            problems.append(f"docs/reference/commands.md has no section for `cuprof {c}`")
        if f"$ cuprof {c} --help" not in ctext:
            problems.append(f"docs/reference/commands.md does not show `cuprof {c} --help`")
    for c in sorted(headed - set(cmds)):
        problems.append(f"docs/reference/commands.md has a section for `cuprof {c}`, which does "
                        "not exist")
    opts = {c: options_of(cuprof, c) for c in cmds}
    for p, text in texts.items():
        if p.endswith("CHANGELOG.md"):
            continue
        spans = list(code_lines(text)) + re.findall(r"`(cuprof [^`]+)`", text)
        for span in spans:
            for m in re.finditer(r"\bcuprof ([a-z]+)\b([^|;&]*)", span):
                cmd, rest = m.group(1), m.group(2)
                if cmd not in opts:
                    continue
                rest = rest.split(" -- ")[0]  # what follows `--` is the program's
                for opt in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest):
                    if opt not in opts[cmd]:
                        problems.append(f"{rel[p]}: `cuprof {cmd} {opt}`: no such option")

    # The Python module: every public call (and PyTorch's underscored ones) in its reference.
    py_page = texts.get(os.path.join(root, "docs", "reference", "python.md"), "")
    module = open(os.path.join(root, "python", "cuprof", "__init__.py")).read()
    calls = re.findall(r"^(?:def|class) ([a-zA-Z_]\w*)", module, re.M)
    for name in calls:
        if name.startswith("_") and name not in ("_record_memory_history", "_snapshot",
                                                 "_dump_snapshot"):
            continue
        if name in ("CuprofError", "NotLoadedError"):
            ok = f"cuprof.{name}" in py_page
        else:
            ok = f"`{name}(" in py_page
        if not ok:
            problems.append(f"docs/reference/python.md does not document {name}")

    # One version: the changelog's newest is the program's.
    changelog = texts.get(os.path.join(root, "CHANGELOG.md"), "")
    newest = re.search(r"^## (\d+\.\d+\.\d+)", changelog, re.M)
    version = subprocess.run([cuprof, "--version"], capture_output=True, text=True).stdout.split()
    if not newest or version[-1:] != [newest.group(1)]:
        problems.append(f"CHANGELOG.md's newest version {newest and newest.group(1)} is not "
                        f"`cuprof --version` ({' '.join(version)})")

    # Readable Markdown.
    readme = os.path.join(root, "README.md")
    if readme in texts and texts[readme].count("\n") > MAX_README_LINES:
        problems.append(f"README.md has {texts[readme].count(chr(10))} lines; at most "
                        f"{MAX_README_LINES}: the rest belongs in docs/")
    for p, text in texts.items():
        for n, line in prose_lines(text):
            if len(line) > MAX_LINE:
                problems.append(f"{rel[p]}:{n}: {len(line)} characters (at most {MAX_LINE})")
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            if not os.path.exists(os.path.join(os.path.dirname(p), target)):
                problems.append(f"{rel[p]}: link to {target}, which does not exist")

    for problem in problems:
        print("FAIL:", problem)
    if not problems:
        print(f"ok: {len(texts)} pages, {len(cmds)} subcommands, {len(known_vars)} variables")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
