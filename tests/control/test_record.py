"""trace-record: runs a program preloaded, passes its options on, says
where the trace went (and counts the traces of its forks and execs), exits
with the program's status (128 + N for a signal), appends to LD_PRELOAD,
refuses a --max-size below 4M or not a size, bad values and an existing
trace file."""
import os
import re
import subprocess

import ctltest
import hrtest

ctltest.need(ctltest.TRACE_RECORD, hrtest.LIBREC, hrtest.TRACE_DUMP)
d = hrtest.tmpdir("record")


def rec(args, **kw):
    return subprocess.run([ctltest.TRACE_RECORD] + args, capture_output=True, text=True,
                          cwd=d, timeout=60, **kw)


# Exit status passes through: 0, 3, killed by SIGTERM -> 143.
for code, script in ((0, "exit 0"), (3, "exit 3"), (128 + 15, "kill -TERM $$")):
    t = os.path.join(d, "code%d.trc" % code)
    p = rec(["-o", t, "--", "sh", "-c", script])
    assert p.returncode == code, (script, p.returncode, p.stderr)
    lines = p.stderr.splitlines()
    if code < 128:
        assert lines[-1] == "trace-record: trace written to %s" % t, p.stderr
        assert hrtest.summary(t)["alloc"] > 0
    else:  # a killed program leaves its last events in the .ring, and it is said
        assert lines[-2] == "trace-record: trace written to %s" % t, p.stderr
        assert lines[-1].startswith("trace-record: %s.ring is beside it: " % t), p.stderr

# Default name: PROGRAM.PID.trc in the working directory; %p expands.
p = rec(["--", "sh", "-c", "exit 0"])
m = re.fullmatch(r"trace-record: trace written to (%s/sh\.(\d+)\.trc)" % re.escape(d),
                 p.stderr.strip())
assert p.returncode == 0 and m and os.path.exists(m.group(1)), p.stderr
p = rec(["-o", "pid-%p.trc", "--", "sh", "-c", "echo $$"])
pid = p.stdout.strip()
assert p.stderr.strip() == "trace-record: trace written to %s/pid-%s.trc" % (d, pid), p.stderr

# A run that forks and execs (forker: the child execs true) leaves three
# traces; trace-record counts those written since it started, not an older
# file of the same name, and names them for trace-import.
forker = hrtest.prog("forker")
stale = os.path.join(d, "f.trc.7")
open(stale, "w").close()
os.utime(stale, (1e9, 1e9))
t = os.path.join(d, "f.trc")
p = rec(["-o", t, "--", forker, "exec", "/bin/true"])
assert p.returncode == 0, p.stderr
assert p.stderr.splitlines()[-1] == (
    "trace-record: 3 traces written: %s, and beside it 2 of the programs it exec'd and "
    "the processes it forked (f.trc.1, f.trc.2); import them together: trace-import %s* DB"
    % (t, t)), p.stderr
os.unlink(stale)
db = os.path.join(d, "f.db")
hrtest.trace_import([t, t + ".1", t + ".2", db])
c = hrtest.connect(db)
assert [r[0] for r in c.execute("SELECT exe FROM processes ORDER BY t_start")] == \
    [forker, forker, "/usr/bin/true"]
c.close()
p = rec(["--", forker, "exec", "/bin/true"])
parent, child = p.stdout.split()[1], p.stdout.split()[7]
assert p.returncode == 0 and p.stderr.splitlines()[-1] == (
    "trace-record: 3 traces written: %s/forker.%s.trc, and beside it 2 of the programs it "
    "exec'd and the processes it forked (forker.%s.trc, forker.%s.trc.1); import them "
    "together: trace-import TRACE... DB" % (d, parent, child, child)), p.stderr

# Options become the recorder's environment; LD_PRELOAD is appended to.
other = "/lib/x86_64-linux-gnu/libm.so.6"
env = dict(os.environ, LD_PRELOAD=other)
p = rec(["-o", "env.trc", "--sample", "4096", "--paused", "--depth", "7", "--max-size", "8M",
         "--", "sh", "-c", 'echo "$LD_PRELOAD|$REC_SAMPLE|$REC_PAUSED|$REC_DEPTH|$REC_MAX_SIZE"'],
        env=env)
assert p.returncode == 0, p.stderr
preload, sample, paused, depth, max_size = p.stdout.strip().split("|")
assert preload.split(":") == [other, hrtest.LIBREC], preload
assert (sample, paused, depth, max_size) == ("4096", "1", "7", "8M"), p.stdout

# Refusals: one line, the program never runs.
marker = os.path.join(d, "ran")
for args, code, words in (
        (["--max-size", "1M"], 2, "--max-size 1M"),
        (["--max-size", "lots"], 2, "--max-size lots"),
        (["--sample", "lots"], 2, "--sample lots"),
        (["--depth", "0"], 2, "--depth 0"),
        (["-o", "code0.trc"], 127, "already exists"),
        (["--bogus"], 2, "unknown option --bogus")):
    before = os.path.getsize(os.path.join(d, "code0.trc"))
    p = rec(args + ["--", "sh", "-c", "touch " + marker])
    assert p.returncode == code, (args, p.returncode, p.stderr)
    assert len(p.stderr.splitlines()) == 1 and words in p.stderr, (args, p.stderr)
    assert not os.path.exists(marker), args
    assert os.path.getsize(os.path.join(d, "code0.trc")) == before

p = rec(["-o", "none.trc", "--", os.path.join(d, "no-such-program")])
assert p.returncode == 127 and "cannot run" in p.stderr, p.stderr

# exit() from a worker while the main thread waits for it: the .ring is left
# for the threads still running then, and trace-record says so
p = rec(["-o", "texit.trc", "--", hrtest.prog("threads"), "4", "300", "exit"])
assert p.returncode == 3, (p.returncode, p.stderr)
ring = os.path.join(d, "texit.trc.ring")
assert p.stderr.splitlines()[-1].startswith("trace-record: %s is beside it: " % ring), p.stderr
print("ok")
