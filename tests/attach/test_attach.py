"""Attach to a running program of ours part-way (att_phases.c): the trace
holds exactly what it allocated after the attach, per function; its frees
(and a realloc) of blocks allocated before count as frees_before_attach,
nothing is unmatched, missed or lost; its output is unchanged and the
answers say they show the heap since the attach; the recording ends at
the detach's mark (later events are left out, the import says how many),
so answers at its end are exact. A process whose exit
races the detach (REC_TEST_DETACH_KILL: killed as the request comes, left
a zombie) is an ended process, not a failed detach; an exit during the
detach waits for the trace to be closed. Prints the time from
trace-record -p to the first recorded event. With argv[1] att_phases_je,
the same program with jemalloc serving malloc, which libc's strdup then
calls through libc's own GOT."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import atttest as at
from hrtest import (TRACE_IMPORT, TRACE_SNAP, connect, dump, folded_per_function, meta, one,
                    run, tmpdir)

PROGRAM = sys.argv[1] if len(sys.argv) > 1 else "att_phases"   # att_phases_je: jemalloc's

at.need_attach()
d = tmpdir("attach")
go, end = os.path.join(d, "go"), os.path.join(d, "end")
# The writer thread held back (REC_TEST_WRITER_LATE_US): the attach must
# wait for its first step before it routes any call, else with jemalloc
# its first touch of our TLS (allocated by jemalloc, which maps memory
# through its GOT, then routed to our mmap hook) deadlocks on jemalloc's lock.
p, pid = at.start([at.program(PROGRAM), go, end], cwd=d,
                  extra_env={"REC_TEST_WRITER_LATE_US": "100000"})
trace, db = os.path.join(d, "run.trc"), os.path.join(d, "run.db")
t_launch = time.time()
r = at.attach(pid, trace)
at.touch(go)
at.wait_line(p, "phase2 done")
r.send_signal(signal.SIGINT)              # Ctrl-C: detach, the program runs on
err = at.finish(r)
assert "trace written to %s" % trace in err, err
assert p.poll() is None, "the program died: %s" % p.stderr.read()
at.touch(end)
out, perr = p.communicate(timeout=at.WAIT_S)
assert p.returncode == 0 and out == "bye\n" and perr == "", (p.returncode, out, perr)

imp = run([TRACE_IMPORT, trace, db])
assert "frees of blocks allocated before" in imp.stderr, imp.stderr
c = connect(db)
assert meta(c, "frees_before_attach") == 10, meta(c, "frees_before_attach")
for key in ("unmatched_frees", "missed_frees", "lost_events", "damaged"):
    assert meta(c, key) == 0, (key, meta(c, key))
assert meta(c, "attach_t") is not None
assert one(c, "SELECT count(*) FROM marks WHERE label = 'heapreel.attach'") == 1
# the detach stops recording before the trace ends (the writer's grace
# rounds): the recording ends at its mark, after every recorded allocation
detach = c.execute("SELECT t FROM marks WHERE label = 'heapreel.detach'").fetchall()
assert len(detach) == 1, detach
t_end, t_loss = c.execute("SELECT t_end, t_loss FROM processes").fetchone()
assert one(c, "SELECT max(t_alloc) FROM allocations") < detach[0][0] == t_end, (detach, t_end)
assert t_loss is None, t_loss

# delta's block comes from libc's strdup, whose malloc call goes through
# libc's own GOT
names = ["alpha", "beta", "regrow", "delta", "early", "gamma_child"]
got = folded_per_function(db, ["--at", "end"], names, "inuse_space")
assert got == {"alpha": 2000, "beta": 10000, "regrow": 200, "delta": 24, "early": 0,
               "gamma_child": 0}, got
got = folded_per_function(db, ["--at", "end"], names, "inuse_objects")
assert got == {"alpha": 2, "beta": 2, "regrow": 1, "delta": 1, "early": 0, "gamma_child": 0}, got
got = folded_per_function(db, ["--top"], names, "alloc_space")
assert got == {"alpha": 3000, "beta": 10000, "regrow": 200, "delta": 24, "early": 0,
               "gamma_child": 0}, got
# and nothing else: gdb's own calls after the attach allocate nothing in
# the process (a string literal in them would be a malloc of gdb's, with
# gdb's dummy frame on the stack for a stack)
allocs = c.execute("SELECT size, count(*) FROM allocations GROUP BY size ORDER BY size").fetchall()
assert sum(n for _, n in allocs) == 7 and sum(s * n for s, n in allocs) == 13224, allocs
assert one(c, "SELECT count(*) FROM frames WHERE module_id IS NULL AND ip != 0") == 0
# the forked child was not recorded: no trace of its own anywhere
assert sorted(os.listdir(d)) == ["end", "go", "run.db", "run.trc"], os.listdir(d)

snap = run([TRACE_SNAP, db, "--at", "end", "--format", "text"])
assert "Warning: process %d was recorded by attaching to it" % pid in snap.stdout, snap.stdout
assert "heap allocated since the attach" in snap.stderr, snap.stderr
assert "may be missing" not in snap.stderr, snap.stderr

first = one(c, "SELECT min(t_alloc) FROM allocations")
t_first = (meta(c, "t0_real_ns") + first) / 1e9
print("attach: %.3f s from trace-record -p to the first recorded event" % (t_first - t_launch))

# The exit comes while the detach puts the GOT back (slowed down by
# REC_TEST_GOT_PAUSE_US): it waits for the writer to close the trace, so no
# .ring is left and the trace imports whole (before: its last segment cut,
# the .ring left behind, 4 times in 5).
stop = os.path.join(d, "stop-detaching")
p, pid = at.start([at.program("att_churn"), stop], extra_env={"REC_TEST_GOT_PAUSE_US": "3000"})
trace = os.path.join(d, "exit.trc")
r = at.attach(pid, trace)
at.settle()
r.send_signal(signal.SIGINT)
time.sleep(0.01)
at.touch(stop)
at.finish(r)
assert p.wait(timeout=at.WAIT_S) == 0, p.stderr.read()
assert not os.path.exists(trace + ".ring"), os.listdir(d)
imp = run([TRACE_IMPORT, trace, os.path.join(d, "exit.db")])
# The threads went on churning through the detach: the events stamped
# after its mark (frees until the GOT was back, allocations already inside
# a hook) are left out, counted, and the answers end at the mark, exact.
# (An exit that came before the request was served ends the trace
# itself: no mark, nothing left out.)
c = connect(os.path.join(d, "exit.db"))
left = "the recording ends at the detach"
marks = c.execute("SELECT t FROM marks WHERE label = 'heapreel.detach'").fetchall()
if not marks:
    assert left not in imp.stderr, imp.stderr
    print("exit during the detach: the exit came first")
else:
    t_detach, after = marks[0][0], 0   # one trace: its time axis is the database's
    for words in dump(trace):
        f = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        if words[0] in ("alloc", "free", "realloc"):   # a realloc: a free at t, an allocation at t2
            after += sum(int(f[k]) > t_detach for k in ("t", "t2") if k in f)
    if after:
        assert "%s (%.6f s): %d events after it left out" % (left, t_detach / 1e9, after) \
            in imp.stderr, (after, imp.stderr)
    else:
        assert left not in imp.stderr, imp.stderr
    assert c.execute("SELECT t_end, t_loss FROM processes").fetchone() == (t_detach, None)
    assert one(c, "SELECT count(*) FROM allocations WHERE t_alloc > ? OR t_free > ?",
               t_detach, t_detach) == 0
    print("exit during the detach: %d events after its mark left out" % after)

# The exit races the detach: the connection closes unanswered and the
# process stays a zombie until we reap it, which kill(pid, 0) still finds.
stop = os.path.join(d, "stop-racing")
p, pid = at.start([at.program("att_churn"), stop], extra_env={"REC_TEST_DETACH_KILL": "1"})
r = at.attach(pid, os.path.join(d, "race.trc"))
r.send_signal(signal.SIGINT)
err = at.finish(r)
assert "trace-record: process %d ended" % pid in err, err
assert p.wait(timeout=at.WAIT_S) == -signal.SIGKILL, p.returncode
