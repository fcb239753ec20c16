#!/usr/bin/env python3
"""The README's install line installs where the pages say: `meson setup` with the README's
options, in a scratch folder, lists (meson introspect --installed) every /opt/cuprof/... file the
pages name, and the folder the README puts on PYTHONPATH holds the `cuprof` module.

Usage: check_install_paths.py SOURCE_DIR
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile


def main():
    root = sys.argv[1]
    readme = open(os.path.join(root, "README.md")).read()
    m = re.search(r"^meson setup build (--prefix=\S+.*?)(?:\s+#.*)?$", readme, re.M)
    assert m, "README.md: no `meson setup build --prefix=...` line"
    options = shlex.split(m.group(1))
    prefix = next(o.split("=", 1)[1] for o in options if o.startswith("--prefix="))
    with tempfile.TemporaryDirectory(prefix="cuprof-install-") as build:
        p = subprocess.run(["meson", "setup", build, root, *options, "-Dviewer=disabled"],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stdout + p.stderr
        installed = set(json.loads(subprocess.run(
            ["meson", "introspect", build, "--installed"], check=True, capture_output=True,
            text=True).stdout).values())
    problems = []
    pages = [os.path.join(root, "README.md")]
    for top, _dirs, names in os.walk(os.path.join(root, "docs")):
        pages += [os.path.join(top, n) for n in names if n.endswith(".md")]
    named = set()
    for page in pages:
        for path in re.findall(re.escape(prefix) + r"/lib/[\w./-]+\.so\b", open(page).read()):
            named.add(path)
            if path not in installed:
                problems.append(f"{os.path.relpath(page, root)} names {path}, which the README's "
                                "install line does not install")
    for pythonpath in re.findall(r"^export PYTHONPATH=(" + re.escape(prefix) + r"[^:\s]*)", readme,
                                 re.M):
        if os.path.join(pythonpath, "cuprof", "__init__.py") not in installed:
            problems.append(f"README.md: PYTHONPATH={pythonpath} holds no installed cuprof module")
    if not named:
        problems.append("no page names a library under " + prefix)
    for problem in problems:
        print("FAIL: " + problem)
    if not problems:
        print("ok: %d installed path(s) named by the pages" % len(named))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
