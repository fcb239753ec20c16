"""cuprof's CPython field offsets against CPython's own headers: layout_check.c is compiled
against the headers of every CPython 3.9 to 3.13 found on the machine (Debian's python3-dev,
pyenv's versions) and must find every offset equal. Fails when no headers are found at all."""
import glob
import os
import re
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.normpath(os.path.join(here, os.pardir, os.pardir, os.pardir))
cc = sys.argv[1] if len(sys.argv) > 1 else "cc"

dirs = sorted(set(glob.glob("/usr/include/python3.*") +
                  glob.glob("/usr/local/include/python3.*") +
                  glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/include/python3.*")) +
                  glob.glob("/root/.pyenv/versions/3.*/include/python3.*")))
checked, failed = [], []
for inc in dirs:
    m = re.search(r"python3\.(\d+)$", inc)
    if not m or not 9 <= int(m.group(1)) <= 13 or not os.path.exists(os.path.join(inc, "Python.h")):
        continue
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "layout_check")
        build = subprocess.run([cc, "-std=gnu11", "-D_GNU_SOURCE", "-w", "-I", inc, "-I", os.path.join(inc, "internal"),
                                "-I", root, os.path.join(here, "layout_check.c"),
                                os.path.join(root, "snapshot", "python_frames.c"),
                                os.path.join(root, "snapshot", "loader_gate.c"), "-o", exe,
                                "-ldl", "-lpthread"], capture_output=True, text=True)
        if build.returncode != 0:
            failed.append(inc)
            print(f"FAIL: {inc}: does not compile:\n{build.stderr[-1500:]}")
            continue
        run = subprocess.run([exe], capture_output=True, text=True)
        print(run.stdout.strip())
        (checked if run.returncode == 0 else failed).append(inc)
print("headers checked:", ", ".join(checked) or "none")
if failed or not checked:
    sys.exit(1)
print("ok")
