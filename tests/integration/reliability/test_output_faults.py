#!/usr/bin/env python3
"""Output faults (issue 7): a snapshot that cannot be written never hurts the program. For disk
full (RLIMIT_FSIZE, whose SIGXFSZ would kill the program; a tiny tmpfs where this machine lets us
mount one), an unwritable directory, links and files at the template's name, and dumps asked for
from two program threads during a SIGUSR1 storm: the program's stdout and exit status equal a run
without cuprof, each failed dump is one `cuprof: snapshot to X failed: REASON` line, no partial
or temporary file is left, earlier dumps keep their bytes, and every written dump loads and passes
tests/golden/check_snapshot.py. Where the template's folder is at fault (missing, unwritable, a
file, full), the dumps nobody asked for by name (exit, signal) go to $TMPDIR instead, each with one
`...; written to Y instead` line (preload/snapshot_place.c), and the program's own API dumps fail
with the error.

usage: test_output_faults.py OUTFAULTS_APP LIBCUPROF [unittest args]
"""
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import relutil

APP = None
LIB = None
IO_ERROR = -4  # CUPROF_ERROR_IO
WRITTEN = re.compile(r"^cuprof: snapshot written to (.+)$")
FAILED = re.compile(r"^cuprof: snapshot to (.+) failed: (.+)$")
MOVED = re.compile(r"^cuprof: snapshot to (.+) failed: (.+); written to (.+) instead$")
FOLDER_AT_START = re.compile(r"^cuprof: CUPROF_SNAPSHOT: cannot write in (.+) \((.+)\): "
                             r"snapshots go to (.+) while it cannot$")


def app_args(**kw):
    return [APP] + ["%s=%s" % (k, v) for k, v in kw.items()]


def run_app(args, env, between=None, timeout=120):
    """Runs the app; `between` (if any) runs while it waits after phase 1. Returns
    (rc, stdout, stderr); a hang prints every thread's stack and fails."""
    p = subprocess.Popen(args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    first = p.stdout.readline()
    if first != "phase1\n":
        out, err = p.communicate(timeout=timeout)
        relutil.fail(f"no phase1 line: {first!r} {out!r} exit {p.returncode}\n{err[-3000:]}")
    if between is not None:
        between()
    try:
        out, err = p.communicate("go\n", timeout=timeout)
    except subprocess.TimeoutExpired:
        relutil.dump_stacks(p.pid)
        p.kill()
        p.communicate()
        relutil.fail(f"watchdog: {args} still running after {timeout} s")
    return p.returncode, first + out, err


def baseline(**kw):
    """The program alone (no cuprof writes anything): its stdout, the reference."""
    rc, out, err = run_app(app_args(**kw), relutil.sim_env())
    if rc != 0:
        relutil.fail(f"baseline exit {rc}: {err[-3000:]}")
    return out


def cuprof_env(template, **extra):
    return relutil.sim_env(preload=LIB, CUPROF_SNAPSHOT=template, **extra)


def cuprof_lines(err, moved=None):
    """(written paths, [(failed path, reason)]); a moved dump goes to `moved` as (failed path,
    reason, where it went) and must be expected (moved is a list); the line at start about the
    folder is skipped; any other cuprof line is a test failure."""
    written, failed = [], []
    for line in err.splitlines():
        if not line.startswith("cuprof:") or line.startswith("cuprof: stacks by "):
            continue  # the unwinder's own line (issue 30) is neither
        if FOLDER_AT_START.match(line):
            continue
        m = WRITTEN.match(line)
        if m:
            written.append(m.group(1))
            continue
        m = MOVED.match(line)
        if m:
            if moved is None:
                relutil.fail(f"unexpected moved dump: {line!r}")
            moved.append(m.groups())
            continue
        m = FAILED.match(line)
        if m is None:
            relutil.fail(f"unexpected cuprof line: {line!r}")
        failed.append((m.group(1), m.group(2)))
    return written, failed


def app_rcs(err, phase):
    return [int(x) for x in re.findall(r"^app: %s dump rc=(-?\d+)$" % phase, err, re.M)]


def listing(d):
    """name -> sha256 of every entry (hidden ones included: a temporary file is one)."""
    out = {}
    for name in sorted(os.listdir(d)):
        path = os.path.join(d, name)
        if os.path.islink(path):
            out[name] = "link:" + os.readlink(path)
        elif os.path.isfile(path):
            with open(path, "rb") as f:
                out[name] = hashlib.sha256(f.read()).hexdigest()
        else:
            out[name] = "dir"
    return out


def good_dump(d, name):
    """A snapshot written by a plain run, at d/name (an 'earlier dump')."""
    with tempfile.TemporaryDirectory(prefix="cuprof-outfaults-seed-") as s:
        rc, _, err = run_app(app_args(dir=s), cuprof_env(os.path.join(s, "seed.pickle")))
        if rc != 0 or not os.path.exists(os.path.join(s, "seed.pickle")):
            relutil.fail(f"seed run: exit {rc}\n{err[-3000:]}")
        shutil.copy(os.path.join(s, "seed.pickle"), os.path.join(d, name))


class OutputFaults(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cuprof-outfaults-")
        self.addCleanup(shutil.rmtree, self.dir, True)  # runs after later cleanups (chattr -i)
        # Where moved dumps go (TMPDIR): the test's own, never the machine's /tmp.
        self.fallback = tempfile.mkdtemp(prefix="cuprof-outfaults-fb-")
        self.addCleanup(shutil.rmtree, self.fallback, True)

    def assert_failed_run(self, rc, out, err, base, api, reason_re, moves=False):
        """Every fault-phase dump failed with one line each; the program did not notice. With
        `moves` (the folder is at fault), the API dumps fail and the exit and signal dumps are in
        the fallback folder, each loading."""
        self.assertEqual(rc, 0, err[-3000:])
        self.assertEqual(out, base)
        self.assertEqual(app_rcs(err, "fault"), [IO_ERROR] * (api + 1), err[-3000:])
        moved = []
        _, failed = cuprof_lines(err, moved if moves else None)
        for path, reason in failed:
            self.assertRegex(reason, reason_re, path)
        template = [p for p, _ in failed if not p.endswith("explicit.pickle")]
        # One line per dump: the template's %n makes each failed dump's name distinct; the API
        # dumps and the exit dump are there at least (signal dumps coalesce: any number).
        self.assertEqual(len(template), len(set(template)), err[-3000:])
        if not moves:
            self.assertGreaterEqual(len(template), api + 1)
            return failed
        self.assertGreaterEqual(len(template), api, err[-3000:])  # its API dumps, at least
        self.assertGreaterEqual(len(moved), 1, err[-3000:])  # the exit dump at least
        for path, reason, where in moved:
            self.assertRegex(reason, reason_re, path)
            self.assertEqual(where, os.path.join(self.fallback, os.path.basename(path)))
        self.assertEqual(sorted(os.listdir(self.fallback)),
                         sorted(os.path.basename(w) for _, _, w in moved))
        self.assertEqual(len(relutil.verify_dumps(self.fallback, keep=False)), len(moved))
        return failed

    def disk_full_rlimit(self, xfsz):
        tmpl = os.path.join(self.dir, "full-%n.pickle")
        explicit = os.path.join(self.dir, "explicit.pickle")
        own = os.path.join(tempfile.gettempdir(), "cuprof-outfaults-own-%d" % os.getpid())
        kw = dict(dir=self.dir, pre=1, api=4, storm=200, limit=2048, xfsz=xfsz, path=explicit,
                  own=own)
        base = baseline(**kw)
        before = {}

        def snapshot_state():
            before.update(listing(self.dir))

        try:
            rc, out, err = run_app(app_args(**kw), cuprof_env(tmpl), between=snapshot_state)
        finally:
            if os.path.exists(own):
                os.unlink(own)
        self.assertEqual(sorted(before), ["explicit.pickle", "full-0.pickle"], err[-3000:])
        self.assertEqual(app_rcs(err, "pre"), [0, 0])
        failed = self.assert_failed_run(rc, out, err, base, 4, r"^File too large$")
        self.assertEqual([p for p, _ in failed if p == explicit], [explicit])
        self.assertEqual(listing(self.dir), before)  # earlier dumps intact, nothing left over
        self.assertEqual(len(relutil.verify_dumps(self.dir, keep=False)), 2)
        return out

    def test_disk_full_rlimit_default_sigxfsz(self):
        """SIGXFSZ's default action would kill the program: the dumps block it."""
        out = self.disk_full_rlimit(0)
        self.assertIn("usr1_seen=yes xfsz=0", out)

    def test_disk_full_rlimit_program_handler(self):
        """The program's SIGXFSZ handler never runs for our writes, and still runs for its own
        write past the limit after ours (mask restored, no pending signal left)."""
        out = self.disk_full_rlimit(1)
        self.assertIn("own_written=2048 own_xfsz=1\n", out)
        self.assertIn("xfsz=1\n", out)

    def test_disk_full_tmpfs(self):
        """ENOSPC in the middle of a dump on a tmpfs with one free page."""
        if os.geteuid() != 0 or shutil.which("unshare") is None:
            self.skipTest("mounting a tmpfs needs root and unshare; RLIMIT_FSIZE covers disk full")
        mnt = os.path.join(self.dir, "mnt")
        os.mkdir(mnt)
        probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                                'mount -t tmpfs -o size=64k cuprof-probe "$0"', mnt],
                               capture_output=True, text=True)
        if probe.returncode != 0:
            self.skipTest("cannot mount a tmpfs here: " + probe.stderr.strip())
        save = os.path.join(self.dir, "save")
        os.mkdir(save)
        good_dump(save, "earlier.pickle")
        kw = dict(dir=mnt, pre=1, api=3, storm=50, path=os.path.join(mnt, "explicit.pickle"))
        base = baseline(**kw)
        env = relutil.sim_env(OUTF_PRELOAD=cuprof_env("x.pickle").get("LD_PRELOAD", ""),
                              OUTF_TEMPLATE=os.path.join(mnt, "t-%n.pickle"),
                              OUTF_SAVE=save, OUTF_MNT=mnt, TMPDIR=self.fallback)
        env.pop("LD_PRELOAD", None)  # sh, mount and cp run without sanitizer runtimes
        script = r'''
set -e
mount -t tmpfs -o size=64k cuprof-full "$OUTF_MNT"
cp "$OUTF_SAVE/earlier.pickle" "$OUTF_MNT/earlier.pickle"
cat /dev/zero > "$OUTF_MNT/filler" 2>/dev/null || true
truncate -s -4096 "$OUTF_MNT/filler"
set +e
echo go | env LD_PRELOAD="$OUTF_PRELOAD" CUPROF_SNAPSHOT="$OUTF_TEMPLATE" "$@"
echo "rc=$?"
for f in "$OUTF_MNT"/* "$OUTF_MNT"/.[!.]*; do [ -e "$f" ] && echo "entry=${f##*/}"; done
cp "$OUTF_MNT/earlier.pickle" "$OUTF_SAVE/earlier.after.pickle"
'''
        rc, out, err = relutil.run_watched(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh"] +
            app_args(**kw), env, 120)
        self.assertEqual(rc, 0, err[-3000:])
        self.assertIn("rc=0\n", out)
        prog_out = out[:out.index("rc=0\n")]
        self.assertEqual(prog_out, base)
        self.assertEqual(sorted(re.findall(r"^entry=(.*)$", out, re.M)), ["earlier.pickle",
                                                                         "filler"])
        self.assertEqual(app_rcs(err, "pre"), [IO_ERROR, IO_ERROR])
        self.assert_failed_run(0, prog_out, err, base, 3, r"^No space left on device$",
                               moves=True)
        with open(os.path.join(save, "earlier.pickle"), "rb") as a, \
                open(os.path.join(save, "earlier.after.pickle"), "rb") as b:
            self.assertEqual(a.read(), b.read())

    def make_unwritable(self, d):
        """chmod 555 (root ignores it: chattr +i instead); skips where neither holds."""
        if os.geteuid() != 0:
            os.chmod(d, 0o555)
            self.addCleanup(os.chmod, d, 0o755)
        else:
            r = subprocess.run(["chattr", "+i", d], capture_output=True, text=True)
            if r.returncode != 0:
                self.skipTest("root, and chattr +i fails here: " + r.stderr.strip())
            self.addCleanup(subprocess.run, ["chattr", "-i", d])
        try:
            open(os.path.join(d, "probe"), "w").close()
        except OSError:
            return
        os.unlink(os.path.join(d, "probe"))
        self.skipTest("cannot make a directory unwritable here")

    def test_unwritable_directory(self):
        d = os.path.join(self.dir, "ro")
        os.mkdir(d)
        good_dump(d, "earlier.pickle")
        good_dump(d, "explicit.pickle")
        kw = dict(dir=d, pre=1, api=3, storm=100, path=os.path.join(d, "explicit.pickle"))
        base = baseline(**kw)
        before = listing(d)
        self.make_unwritable(d)
        rc, out, err = run_app(app_args(**kw), cuprof_env(os.path.join(d, "u-%n.pickle"),
                                                          TMPDIR=self.fallback))
        self.assertEqual(app_rcs(err, "pre"), [IO_ERROR, IO_ERROR])
        self.assert_failed_run(rc, out, err, base, 3,
                               r"^(Permission denied|Operation not permitted)$", moves=True)
        self.assertEqual(listing(d), before)

    def test_template_under_a_file(self):
        """A template whose directory is a regular file (ENOTDIR): the file is untouched."""
        blocker = os.path.join(self.dir, "afile")
        with open(blocker, "w") as f:
            f.write("not a directory\n")
        kw = dict(dir=self.dir, pre=0, api=2, storm=50)
        base = baseline(**kw)
        before = listing(self.dir)
        rc, out, err = run_app(app_args(**kw),
                               cuprof_env(os.path.join(blocker, "x-%n.pickle"),
                                          TMPDIR=self.fallback))
        self.assertEqual(rc, 0, err[-3000:])
        self.assertEqual(out, base)
        self.assertEqual(app_rcs(err, "fault"), [IO_ERROR] * 2)
        moved = []
        written, failed = cuprof_lines(err, moved)
        self.assertEqual(written, [])
        self.assertEqual(len(failed), 2)  # the program's own dumps: it got the error
        self.assertGreaterEqual(len(moved), 1)  # the exit dump, and signal dumps
        self.assertEqual({r for _, r in failed} | {r for _, r, _ in moved}, {"Not a directory"})
        self.assertEqual(len(relutil.verify_dumps(self.fallback, keep=False)), len(moved))
        self.assertEqual(listing(self.dir), before)

    def test_links_at_the_template_name(self):
        """A symlink (to a precious file, or dangling) or a directory at the expanded name is
        never written through, replaced or created: the dumps take the next free names."""
        precious = os.path.join(self.dir, "precious.txt")
        with open(precious, "w") as f:
            f.write("keep me\n")
        cases = {"tolink.pickle": precious,
                 "dangling.pickle": os.path.join(self.dir, "target-never-created.pickle")}
        for name, target in cases.items():
            os.symlink(target, os.path.join(self.dir, name))
        os.mkdir(os.path.join(self.dir, "adir.pickle"))
        for name in ("tolink.pickle", "dangling.pickle", "adir.pickle"):
            with self.subTest(name=name):
                before = listing(self.dir)
                stem = name[:-len(".pickle")]
                rc, out, err = run_app(app_args(dir=self.dir, api=2),
                                       cuprof_env(os.path.join(self.dir, name)))
                self.assertEqual(rc, 0, err[-3000:])
                written, failed = cuprof_lines(err)
                self.assertEqual(failed, [])
                want = [os.path.join(self.dir, "%s.%d.pickle" % (stem, i)) for i in (1, 2, 3)]
                self.assertEqual(sorted(written), want)
                after = listing(self.dir)
                for w in want:
                    after.pop(os.path.basename(w))
                self.assertEqual(after, before)
                for w in want:
                    relutil.verify_dumps(self.dir, pattern=os.path.basename(w), keep=False)
                    os.unlink(w)
        with open(precious) as f:
            self.assertEqual(f.read(), "keep me\n")

    def concurrent(self, template_name, name_re):
        explicit = os.path.join(self.dir, "explicit.pickle")
        kw = dict(dir=self.dir, pre=0, api=16, storm=300, wait=1, path=explicit)
        base = baseline(**kw)
        rc, out, err = run_app(app_args(**kw), cuprof_env(os.path.join(self.dir, template_name),
                                                          CUPROF_MAX_ENTRIES="20000"))
        self.assertEqual(rc, 0, err[-3000:])
        self.assertEqual(out, base)
        self.assertEqual(app_rcs(err, "pre") + app_rcs(err, "fault"), [0] * 18, err[-3000:])
        written, failed = cuprof_lines(err)
        self.assertEqual(failed, [])
        self.assertEqual(written.count(explicit), 2)
        template = [w for w in written if w != explicit]
        self.assertEqual(len(template), len(set(template)))  # distinct names
        # 16 API dumps, >= 1 signal dump (the app waited for one), the exit dump
        self.assertGreaterEqual(len(template), 18)
        for w in template:
            self.assertRegex(os.path.basename(w), name_re)
        self.assertEqual(sorted(os.listdir(self.dir)),
                         sorted([os.path.basename(w) for w in template] + ["explicit.pickle"]))
        snaps = relutil.verify_dumps(self.dir, keep=False)  # no temp file, each loads and checks
        self.assertEqual(len(snaps), len(template) + 1)

    def test_dumps_during_signal_storm_numbered(self):
        self.concurrent("c-%n.pickle", r"^c-\d+\.pickle$")

    def test_dumps_during_signal_storm_fixed_name(self):
        self.concurrent("fixed.pickle", r"^fixed(\.\d+)?\.pickle$")


if __name__ == "__main__":
    APP, LIB = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0]] + sys.argv[3:], verbosity=2)
