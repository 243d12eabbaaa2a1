"""trace-ctl on a running program (ctl_steps, driven through its stdin so
nothing depends on timing): stop, start, mark, flush, status and
record --for (ended early by SIGINT) land between the right allocations;
record --sample on a paused trace sets its period (processes.sample_period);
the marks reach the database and trace-snap --at mark:LABEL; a process
that is not recorded is a one-line error (exit 1), a pid with no process
exit 4; record --for takes the one time grammar."""
import os
import re
import signal
import sqlite3
import subprocess

import ctltest
import hrtest

ctltest.need(ctltest.TRACE_RECORD, ctltest.TRACE_CTL, ctltest.prog("ctl_steps"),
             hrtest.TRACE_DUMP)
d = hrtest.tmpdir("ctl")
t = os.path.join(d, "s.trc")
s = ctltest.Steps(t)
pid = s.pid
st = ctltest.ctl(pid, "status").stdout.strip()
assert st == "ok state=active sample=0 trace=%s" % t, st

s.step()                                    # 1: 10 x 111, recorded
ctltest.ctl(pid, "mark", "after one")
ctltest.ctl(pid, "stop")
assert ctltest.ctl(pid, "status").stdout.startswith("ok state=stopped ")
s.step()                                    # 2: 20 x 222 unrecorded; frees the 111s
ctltest.ctl(pid, "start")
ctltest.ctl(pid, "mark", "two")
s.step()                                    # 3: 30 x 333, recorded
ctltest.ctl(pid, "flush")
mid = ctltest.dump(t)                       # the file, while the program runs
assert len(ctltest.events(mid, "alloc", 333)) == 30
assert "two" in [m["label"] for m in ctltest.marks(mid)]
ctltest.ctl(pid, "stop")

# A trace that has recorded keeps its period.
p = ctltest.ctl(pid, "record", "--for", "1s", "--sample", "4096", check=False)
assert p.returncode == 1 and "sample period 0" in p.stderr, p.stderr

# record --for: started, then ended by SIGINT once step 4 is done.
rec = subprocess.Popen([ctltest.TRACE_CTL, str(pid), "record", "--for", "600s"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
ctltest.wait_active(pid)
s.step()                                    # 4: 40 x 444, recorded
rec.send_signal(signal.SIGINT)
out, err = rec.communicate(timeout=hrtest.limit(30))
assert rec.returncode == 0, err
said = re.fullmatch(r"recorded process %d for ([0-9.]+) s \(interrupted\); its trace: (.*)"
                    r" \(written as the process runs; trace-ctl %d flush writes out what is"
                    r" pending\)\n" % (pid, pid), out)
assert said and float(said[1]) < 600 and said[2] == os.path.abspath(t), out
assert ctltest.ctl(pid, "status").stdout.startswith("ok state=stopped ")
s.step()                                    # 5: 50 x 555, unrecorded
s.finish()

recs = ctltest.dump(t)
counts = {n: len(ctltest.events(recs, "alloc", n)) for n in (111, 222, 333, 444, 555)}
assert counts == {111: 10, 222: 0, 333: 30, 444: 40, 555: 0}, counts
a111 = {r["addr"] for r in ctltest.events(recs, "alloc", 111)}
freed111 = [r for r in ctltest.events(recs, "free") if r["addr"] in a111]
assert len(freed111) == 10                  # freed while stopped: still recorded

ms = ctltest.marks(recs)
labels = [m["label"] for m in ms]
assert labels == ["after one", "heapreel.stop", "heapreel.start", "two", "heapreel.stop",
                  "heapreel.start", "heapreel.stop"], labels
t_of = [m["t"] for m in ms]


def times(size):
    return [r["t"] for r in ctltest.events(recs, "alloc", size)]


assert max(times(111)) < t_of[0]
assert all(r["t"] > t_of[1] and r["t"] < t_of[2] for r in freed111)
assert min(times(333)) > t_of[3] and max(times(333)) < t_of[4]
assert min(times(444)) > t_of[5] and max(times(444)) < t_of[6]

# The marks in the database, and as instants for trace-snap.
db = os.path.join(d, "s.db")
hrtest.run([hrtest.TRACE_IMPORT, t, db])
c = sqlite3.connect(db)
got = [r[0] for r in c.execute("SELECT label FROM marks ORDER BY t, rowid")]
assert got[:len(labels)] == labels and got[-1].startswith("heapreel.stats"), got
out = hrtest.run([hrtest.TRACE_SNAP, db, "--at", "mark:after one", "--format", "text",
                  "--by", "stack", "--metric", "inuse_objects"]).stdout
assert "step" in out, out
win = hrtest.run([hrtest.TRACE_SNAP, db, "--steady", "mark:two..end",
                  "--format", "folded", "--metric", "alloc_objects"]).stdout
assert sum(int(l.rsplit(" ", 1)[1]) for l in win.splitlines() if "step" in l) == 70, win

# Paused from the start, a period can still be chosen: record --sample.
t2 = os.path.join(d, "r.trc")
s = ctltest.Steps(t2, extra=["--paused"])
s.step()                                    # 1: unrecorded (paused)
rec = subprocess.Popen([ctltest.TRACE_CTL, str(s.pid), "record", "--for", "600s",
                        "--sample", "4096"], stderr=subprocess.PIPE, text=True)
ctltest.wait_active(s.pid)
st = ctltest.ctl(s.pid, "status").stdout.split()
assert st[:3] == ["ok", "state=active", "sample=4096"], st
s.step()                                    # 2: 20 x 222 = 4440 bytes, sampled
rec.send_signal(signal.SIGINT)
assert rec.wait(timeout=hrtest.limit(30)) == 0, rec.stderr.read()
s.finish()
recs = ctltest.dump(t2)
assert [m["label"] for m in ctltest.marks(recs)] == [
    "heapreel.stop", "heapreel.sample=4096", "heapreel.start", "heapreel.stop"]
assert ctltest.events(recs, "alloc", 111) == []
db2 = os.path.join(d, "r.db")
hrtest.run([hrtest.TRACE_IMPORT, t2, db2])
c = sqlite3.connect(db2)
assert c.execute("SELECT sample_period FROM processes").fetchall() == [(4096,)]

# Not recorded: a live process without the recorder, and no process at all.
p = ctltest.ctl(os.getpid(), "status", check=False)
assert p.returncode == 1 and "is not being recorded" in p.stderr, p.stderr
assert len(p.stderr.splitlines()) == 1
p = ctltest.ctl(pid, "status", check=False)       # exited by now: not in the data
assert p.returncode == 4 and p.stderr == "trace-ctl: no process %d\n" % pid, p.stderr
p = ctltest.ctl(pid, "record", "--for", "1s", check=False)
assert p.returncode == 4 and p.stderr == "trace-ctl: no process %d\n" % pid, p.stderr
p = ctltest.ctl("x", "status", check=False)
assert p.returncode == 2, p.stderr
p = ctltest.ctl(os.getpid(), "jump", check=False)
assert p.returncode == 2 and "unknown command" in p.stderr, p.stderr

# record --for takes the one time grammar (README "Times"): a well-formed
# duration gets past the parsing to the process (not recorded: 1), a
# malformed one is a usage error (2) before anything is asked.
for dur in ["2m", "1h", "5", "0.5", ".5", "1.5m", "250ms", "10us", "5ns", "007s"]:
    p = ctltest.ctl(os.getpid(), "record", "--for", dur, check=False)
    assert p.returncode == 1 and "is not being recorded" in p.stderr, (dur, p.stderr)
for dur in ["5d", "-1", "1e3", "0x10", "inf", "", "1.", "1 s", "1.5sec", "2562048h"]:
    p = ctltest.ctl(os.getpid(), "record", "--for", dur, check=False)
    assert p.returncode == 2 and "expected a duration" in p.stderr, (dur, p.stderr)
    assert len(p.stderr.splitlines()) == 1, p.stderr
print("ok")
