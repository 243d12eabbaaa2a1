"""./heapreel profile: the whole pipeline on a program of the caller's, with
the tools of build/. forker execs true from its forked child: three traces in
the run's directory (private, as everything in it), imported together; the
peak shown is the parent's five blocks of 3001 bytes (parent_site), and
peak.heap holds the same total. The
program's exit status passes through (3; 137 for SIGKILL, whose events the
.ring gives back); a directory that is not empty and a missing -- are
refused before anything runs; a program that cannot be run exits 127 and
leaves no directory behind; no --help builds anything."""
import os
import re
import subprocess

import ctltest
import hrtest

HEAPREEL = os.path.join(hrtest.SRC, "heapreel")
if os.path.realpath(hrtest.BUILD) != os.path.realpath(os.path.join(hrtest.SRC, "build")):
    hrtest.skip("heapreel profile uses build/, and this build is %s" % hrtest.BUILD)
forker = hrtest.prog("forker")
ctltest.need(ctltest.TRACE_RECORD, hrtest.TRACE_IMPORT, hrtest.TRACE_SNAP, forker)
d = hrtest.tmpdir("profile")


def profile(args, cwd=d):
    return subprocess.run([HEAPREEL, "profile"] + args, capture_output=True, text=True,
                          cwd=cwd, stdin=subprocess.DEVNULL, timeout=hrtest.limit(120))


p = profile(["-o", "run", "--", forker, "exec", "/bin/true"])
assert p.returncode == 0, p.stdout + p.stderr
out = os.path.join(d, "run")
assert sorted(os.listdir(out)) == ["peak.heap", "peak.txt", "run.db", "run.trc", "run.trc.1",
                                   "run.trc.2"], os.listdir(out)
assert all(os.stat(os.path.join(out, f)).st_mode & 0o077 == 0 for f in [""] + os.listdir(out))
assert "3 processes" in p.stdout and "Total: 15005 B (14.7 KiB)\n" in p.stdout, p.stdout
assert re.search(r"^ *15005 +14\.7 KiB +100\.0% +100\.0% +15005 +14\.7 KiB +100\.0%  parent_site$",
                 p.stdout, re.M), p.stdout
with open(os.path.join(out, "peak.heap")) as f:
    assert re.match(r"heap profile: +5: +15005 \[", f.readline())
assert "google-pprof --text %s %s/peak.heap" % (forker, out) in p.stdout, p.stdout

# The program's status passes through, after the pipeline ran on its trace.
p = profile(["-o", "three", "--", "sh", "-c", "exit 3"])
assert p.returncode == 3 and "Total: " in p.stdout, (p.returncode, p.stdout, p.stderr)
p = profile(["-o", "killed", "--", "sh", "-c", "kill -KILL $$"])
assert p.returncode == 128 + 9 and "events recovered from" in p.stdout, (p.returncode, p.stdout)

# Refusals: nothing runs.
marker = os.path.join(d, "ran")
for args, code, words in ((["-o", "run", "--", "touch", marker], 1, "is not empty"),
                          (["touch", marker], 2, "usage: ./heapreel profile")):
    p = profile(args)
    assert p.returncode == code and words in p.stderr, (args, p.returncode, p.stderr)
    assert not os.path.exists(marker), args

# A program that cannot be run: 127, and nothing left behind (neither the
# default heapreel-out/PROGRAM.TIME nor the parents -o needed).
fresh = os.path.join(d, "fresh")
os.mkdir(fresh)
for args in ([], ["-o", "a/b/run"]):
    p = profile(args + ["--", "no-such-program-here"], cwd=fresh)
    assert p.returncode == 127 and "cannot run no-such-program-here" in p.stderr, (
        args, p.returncode, p.stderr)
    assert os.listdir(fresh) == [], (args, os.listdir(fresh))

# --help builds and installs nothing: the build and package tools are
# replaced by ones that leave a mark.
fake = os.path.join(d, "fake-bin")
os.mkdir(fake)
for tool in ("meson", "ninja", "dpkg-query", "apt-get", "sudo", "cc", "gcc"):
    with open(os.path.join(fake, tool), "w") as f:
        f.write("#!/bin/sh\ntouch %s\nexit 1\n" % marker)
    os.chmod(os.path.join(fake, tool), 0o755)
env = dict(os.environ, PATH=fake + ":" + os.environ["PATH"])
for args, words in ((["bench", "--help"], "usage: heapreel bench"),
                    (["stress", "--help"], "usage: heapreel stress"),
                    (["build", "--help"], "./heapreel build"),
                    (["test", "-h"], "./heapreel test"),
                    (["profile", "--help"], "./heapreel profile")):
    p = subprocess.run([HEAPREEL] + args, capture_output=True, text=True, cwd=d, env=env,
                       stdin=subprocess.DEVNULL, timeout=hrtest.limit(60))
    assert p.returncode == 0 and words in p.stdout, (args, p.returncode, p.stdout, p.stderr)
    assert not os.path.exists(marker), (args, p.stdout, p.stderr)
print("ok")
