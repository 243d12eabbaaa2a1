"""trace-record: runs a program preloaded, passes its options on, says
where the trace went (and counts the traces of its forks and execs), exits
with the program's status (128 + N for a signal), goes first in LD_PRELOAD,
refuses a --max-size below 4M or not a size, bad values, an existing
trace file or an earlier run's fork and exec traces beside it (exit 3;
--force replaces only traces) and a directory it
cannot write to (exit 1) before running anything; puts a run's traces in a
directory of its own (-o DIR/, by default heapreel-out/PROGRAM.STAMP/) and
prints the exact command that imports them; preloads libheapreel.so by its
absolute path, so a child that changes directory is recorded too; run under
a caller's LD_PRELOAD of libheapreel.so, is not recorded itself and
preloads one recorder."""
import os
import re
import shutil
import struct
import subprocess

import ctltest
import hrtest

ctltest.need(ctltest.TRACE_RECORD, hrtest.LIBREC, hrtest.TRACE_DUMP)
d = hrtest.tmpdir("record")
RING_MAGIC = 0x31474e4952524845    # trace_format.h TF_RING_MAGIC, "EHRRING1"


def rec(args, **kw):
    return subprocess.run([ctltest.TRACE_RECORD] + args, capture_output=True, text=True,
                          cwd=d, timeout=hrtest.limit(60), **kw)


# Exit status passes through: 0, 3, killed by SIGTERM -> 143.
for code, script in ((0, "exit 0"), (3, "exit 3"), (128 + 15, "kill -TERM $$")):
    t = os.path.join(d, "code%d.trc" % code)
    p = rec(["-o", t, "--", "sh", "-c", script])
    assert p.returncode == code, (script, p.returncode, p.stderr)
    lines = p.stderr.splitlines()
    said = "trace-record: trace written to %s; import it: trace-import %s %s.db" % (
        t, t, t[:-len(".trc")])
    if code < 128:
        assert lines[-1] == said, p.stderr
        assert hrtest.summary(t)["alloc"] > 0
    else:  # a killed program leaves its last events in the .ring, and it is said
        assert lines[-2] == said, p.stderr
        assert lines[-1].startswith("trace-record: %s.ring is beside it: " % t), p.stderr

# Default: a run directory of its own, heapreel-out/PROGRAM.YYYYmmdd-HHMMSS/
# (.N when one of the same second exists), private; %p expands.
runs = []
for _ in range(2):
    p = rec(["--", "sh", "-c", "exit 0"])
    m = re.fullmatch(r"trace-record: trace written to (%s/heapreel-out/sh\.\d{8}-\d{6}(\.1)?)"
                     r"/run\.trc; import it: trace-import (\S+) (\S+)" % re.escape(d),
                     p.stderr.strip())
    assert p.returncode == 0 and m, p.stderr
    assert m.group(3) == m.group(1) and m.group(4) == m.group(1) + "/run.db", p.stderr
    assert os.listdir(m.group(1)) == ["run.trc"], os.listdir(m.group(1))
    assert os.stat(m.group(1)).st_mode & 0o077 == 0
    runs.append(m.group(1))
assert runs[0] != runs[1], runs
hrtest.trace_import([runs[1], runs[1] + "/run.db"])
shutil.rmtree(os.path.join(d, "heapreel-out"))
p = rec(["-o", "pid-%p.trc", "--", "sh", "-c", "echo $$"])
pid = p.stdout.strip()
assert p.stderr.strip() == ("trace-record: trace written to %s/pid-%s.trc; import it: "
                            "trace-import %s/pid-%s.trc %s/pid-%s.db" % ((d, pid) * 3)), p.stderr

# A run that forks and execs (forker: the child execs true) leaves three
# traces; trace-record counts them and names them for trace-import (an
# earlier run's beside them: below).
forker = hrtest.prog("forker")
t = os.path.join(d, "f.trc")
p = rec(["-o", t, "--", forker, "exec", "/bin/true"])
assert p.returncode == 0, p.stderr
assert p.stderr.splitlines()[-1] == (
    "trace-record: 3 traces written: %s, and beside it 2 of the programs it exec'd and "
    "the processes it forked (f.trc.1, f.trc.2); import them together: trace-import %s* %s"
    % (t, t, os.path.join(d, "f.db"))), p.stderr
db = os.path.join(d, "f.db")
hrtest.trace_import([t, t + ".1", t + ".2", db])
c = hrtest.connect(db)
assert [r[0] for r in c.execute("SELECT exe FROM processes ORDER BY t_start")] == \
    [forker, forker, "/usr/bin/true"]
c.close()
p = rec(["-o", "forker.%p.trc", "--", forker, "exec", "/bin/true"])
parent, child = p.stdout.split()[1], p.stdout.split()[7]
assert p.returncode == 0 and p.stderr.splitlines()[-1] == (
    "trace-record: 3 traces written: %s/forker.%s.trc, and beside it 2 of the programs it "
    "exec'd and the processes it forked (forker.%s.trc, forker.%s.trc.1); import them "
    "together: trace-import %s/forker.*.trc* %s/forker.%s.db" % (d, parent, child, child, d, d,
                                                                 parent)), p.stderr
# The same run into a directory of its own: the command names the directory.
run = os.path.join(d, "run dir")
p = rec(["-o", run + "/", "--", forker, "exec", "/bin/true"])
assert p.returncode == 0 and p.stderr.splitlines()[-1] == (
    "trace-record: 3 traces written: %s/run.trc, and beside it 2 of the programs it exec'd "
    "and the processes it forked (run.trc.1, run.trc.2); import them together: "
    "trace-import '%s' '%s/run.db'" % (run, run, run)), p.stderr
hrtest.trace_import([run, os.path.join(run, "run.db")])
assert hrtest.connect(os.path.join(run, "run.db")).execute(
    "SELECT COUNT(*) FROM processes").fetchone()[0] == 3
# A child that changes directory before it execs is recorded too (libheapreel.so
# is preloaded by its absolute path), whatever path trace-record was run by.
cd = os.path.join(d, "cd")
p = subprocess.run([os.path.relpath(ctltest.TRACE_RECORD, d), "-o", cd + "/", "--", "sh", "-c",
                    "cd / && exec /bin/sh -c 'echo $LD_PRELOAD'"],
                   capture_output=True, text=True, cwd=d, timeout=hrtest.limit(60))
assert p.returncode == 0 and sorted(os.listdir(cd)) == ["run.trc", "run.trc.1"], (
    p.stderr, os.listdir(cd))
assert p.stdout.strip() == os.path.realpath(hrtest.LIBREC), p.stdout
assert hrtest.summary(os.path.join(cd, "run.trc.1"))["alloc"] > 0

# Options become the recorder's environment; LD_PRELOAD keeps the caller's after it.
other = "/lib/x86_64-linux-gnu/libm.so.6"
env = dict(os.environ, LD_PRELOAD=other)
p = rec(["-o", "env.trc", "--sample", "4096", "--paused", "--depth", "7", "--max-size", "8M",
         "--", "sh", "-c", 'echo "$LD_PRELOAD|$REC_SAMPLE|$REC_PAUSED|$REC_DEPTH|$REC_MAX_SIZE"'],
        env=env)
assert p.returncode == 0, p.stderr
preload, sample, paused, depth, max_size = p.stdout.strip().split("|")
assert preload.split(":") == [os.path.realpath(hrtest.LIBREC), other], preload
assert (sample, paused, depth, max_size) == ("4096", "1", "7", "8M"), p.stdout

# A preloaded allocator comes after the recorder, which then sees its
# allocations (behind it, it saw none).
jemalloc = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
if os.path.exists(jemalloc):
    p = rec(["-o", "jemalloc.trc", "--", "sh", "-c", "echo $LD_PRELOAD"],
            env=dict(os.environ, LD_PRELOAD=jemalloc))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().split(":") == [os.path.realpath(hrtest.LIBREC), jemalloc], p.stdout
    assert hrtest.summary(os.path.join(d, "jemalloc.trc"))["alloc"] > 0
else:
    print("no %s: the preloaded allocator's case not run" % jemalloc)

# Run under the caller's LD_PRELOAD of libheapreel.so (another copy of it,
# as an installed one would be): trace-record is not recorded itself (no
# trace of its own in the working directory, its fork does not take the
# program's trace name), and the program gets one recorder, the one found.
copy_dir = os.path.join(d, "other-lib")
os.makedirs(copy_dir, exist_ok=True)
other_rec = os.path.join(copy_dir, "libheapreel.so")
shutil.copy(hrtest.LIBREC, other_rec)
under = os.path.join(d, "under")
os.makedirs(under, exist_ok=True)
p = subprocess.run([ctltest.TRACE_RECORD, "-o", "self.trc", "--", "sh", "-c", "echo $LD_PRELOAD"],
                   capture_output=True, text=True, cwd=under, timeout=hrtest.limit(60),
                   env=dict(os.environ, LD_PRELOAD=other_rec + ":" + other))
assert p.returncode == 0, p.stderr
assert p.stdout.strip().split(":") == [os.path.realpath(hrtest.LIBREC), other], p.stdout
assert sorted(os.listdir(under)) == ["self.trc"], os.listdir(under)
assert hrtest.summary(os.path.join(under, "self.trc"))["alloc"] > 0
# Two copies preloaded by hand: the first records, the other stays idle
# (one trace per process, not two).
twice = os.path.join(d, "twice")
os.makedirs(twice, exist_ok=True)
p = subprocess.run(["sh", "-c", "ls / > /dev/null"], capture_output=True, text=True, cwd=twice,
                   timeout=hrtest.limit(60), env=dict(os.environ, LD_PRELOAD=other_rec + " " + hrtest.LIBREC))
assert p.returncode == 0, p.stderr
names = sorted(os.listdir(twice))
assert len(names) == 2 and all(re.fullmatch(r"(sh|ls)\.\d+\.trc", n) for n in names), names
assert p.stderr.count("another libheapreel.so is loaded first and records; ") == 2, p.stderr

# Refusals: one line, the program never runs.
marker = os.path.join(d, "ran")
with open(os.path.join(d, "notes.txt"), "w") as f:
    f.write("not a trace")
for args, code, words in (
        (["--max-size", "1M"], 2, "--max-size 1M"),
        (["--max-size", "lots"], 2, "--max-size lots"),
        (["--sample", "lots"], 2, "--sample lots"),
        (["--depth", "0"], 2, "--depth 0"),
        (["-o", "code0.trc"], 3, "already exists"),
        (["-o", "notes.txt", "--force"], 3, "is not a trace"),
        (["-o", os.path.join(d, "missing", "x.trc")], 1, "cannot record into"),
        (["-o", os.path.join(d, "missing", "x") + "/"], 1, "cannot make the run directory"),
        (["-o", run + "/"], 3, "is not empty"),
        (["--bogus"], 2, "unknown option --bogus")):
    before = os.path.getsize(os.path.join(d, "code0.trc"))
    p = rec(args + ["--", "sh", "-c", "touch " + marker])
    assert p.returncode == code, (args, p.returncode, p.stderr)
    assert len(p.stderr.splitlines()) == 1 and words in p.stderr, (args, p.stderr)
    assert not os.path.exists(marker), args
    assert os.path.getsize(os.path.join(d, "code0.trc")) == before

p = rec(["-o", "none.trc", "--", os.path.join(d, "no-such-program")])
assert p.returncode == 127 and "cannot run" in p.stderr, p.stderr
# nothing left behind: neither the default run directory nor heapreel-out
p = rec(["--", os.path.join(d, "no-such-program")])
assert p.returncode == 127 and len(p.stderr.splitlines()) == 1, p.stderr
assert not os.path.exists(os.path.join(d, "heapreel-out"))
# --force replaces a trace (and its leftover .ring), nothing else
t = os.path.join(d, "code3.trc")
p = rec(["--force", "-o", t, "--", "sh", "-c", "exit 0 # replaced"])
assert p.returncode == 0 and hrtest.summary(t)["alloc"] > 0, p.stderr
assert b"exit 0 # replaced" in open(t, "rb").read(4096)   # the header's command line
t = os.path.join(d, "code143.trc")
assert os.path.exists(t + ".ring")
p = rec(["-f", "-o", t, "--", "sh", "-c", "exit 0"])
assert p.returncode == 0 and not os.path.exists(t + ".ring"), p.stderr

# An earlier run's children beside a fixed -o (fam.trc.1, .2): refused
# without --force, replaced with it, so this run's children are numbered
# from .1 again and the printed glob takes in no stale trace; a file there
# that is not a trace is never removed.
t = os.path.join(d, "fam.trc")
fam = ["sh", "-c", "/bin/true; /bin/true"]
p = rec(["-o", t, "--"] + fam)
assert p.returncode == 0 and "3 traces written" in p.stderr, p.stderr
os.unlink(t)
p = rec(["-o", t, "--", "sh", "-c", "touch " + marker])
assert p.returncode == 3 and len(p.stderr.splitlines()) == 1, p.stderr
assert "fam.trc.1 exists, left by an earlier run" in p.stderr and not os.path.exists(marker)
p = rec(["--force", "-o", t, "--", "sh", "-c", "exit 0"])
assert p.returncode == 0 and not os.path.exists(t + ".1") and not os.path.exists(t + ".2")
p = rec(["-o", t + ".x", "--"] + fam)
os.rename(t + ".x", t + ".9")                  # a trace where a child's would be
with open(t + ".12", "w") as f:
    f.write("not a trace")
p = rec(["--force", "-o", t, "--", "sh", "-c", "touch " + marker])
assert p.returncode == 3 and "fam.trc.12 exists and is not a trace" in p.stderr, p.stderr
assert os.path.exists(t + ".9") and os.path.exists(t + ".12") and not os.path.exists(marker)
# a child's .ring (a killed child's) goes with the run; a file so named
# that is not a ring stops it
os.unlink(t + ".12")
with open(t + ".9.ring", "wb") as f:
    f.write(struct.pack("<Q", RING_MAGIC) + bytes(56))
with open(t + ".3.ring", "w") as f:
    f.write("not a ring")
p = rec(["--force", "-o", t, "--", "sh", "-c", "touch " + marker])
assert p.returncode == 3 and "fam.trc.3.ring exists and is not a trace" in p.stderr, p.stderr
assert os.path.exists(t + ".9.ring") and not os.path.exists(marker)
os.unlink(t + ".3.ring")
p = rec(["--force", "-o", t, "--", "sh", "-c", "exit 0"])
assert p.returncode == 0, p.stderr
assert not [f for f in os.listdir(d) if re.fullmatch(r"fam\.trc\.\d+(\.ring)?", f)], os.listdir(d)

# exit() from a worker while the main thread waits for it: the .ring is left
# for the threads still running then, and trace-record says so
p = rec(["-o", "texit.trc", "--", hrtest.prog("threads"), "4", "300", "exit"])
assert p.returncode == 3, (p.returncode, p.stderr)
ring = os.path.join(d, "texit.trc.ring")
assert p.stderr.splitlines()[-1].startswith("trace-record: %s is beside it: " % ring), p.stderr
print("ok")
