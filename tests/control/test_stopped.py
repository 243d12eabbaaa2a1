"""While recording is stopped, the trace gets the frees of blocks it
recorded and nothing else (ctl_stopped.c lists the calls): exactly, once
rec_flush has returned after rec_stop, from a first stop (the trace read
back) and a second one, in an unbounded and a bounded trace; with
threads racing 200 stops and starts, no recorded block loses its free
(heap blocks and custom ones); and a bounded trace that overwrote its stop
and start marks still says that its snapshots lack what was allocated
while stopped."""
import os

import ctltest
import hrtest

prog = ctltest.prog("ctl_stopped")
ctltest.need(ctltest.TRACE_RECORD, prog, hrtest.TRACE_DUMP, hrtest.TRACE_IMPORT)
d = hrtest.tmpdir("stopped")
KEPT = 1000


def between(recs, kind, t0, t1):
    return [r for r in recs if r["kind"] == kind and t0 < r["t"] < t1]


def one_stop_each(name, env=None):
    t = os.path.join(d, name + ".trc")
    hrtest.run([ctltest.TRACE_RECORD, "-o", t, "--", prog], env=env)
    recs = ctltest.dump(t)
    ms = ctltest.marks(recs)
    labels = [m["label"] for m in ms]
    assert labels == ["heapreel.stop", "freed", "heapreel.start", "heapreel.stop", "freed"], \
        labels
    kept = [a for a in ctltest.events(recs, "alloc", 100)]
    assert len(kept) == 2 * KEPT, len(kept)
    end = max(r["t"] for r in recs if "t" in r) + 1
    for stop, freed, after in ((ms[0], ms[1], ms[2]), (ms[3], ms[4], None)):
        t_after = after["t"] if after else end
        frees = between(recs, "free", stop["t"], freed["t"])
        addrs = {a["addr"] for a in kept if a["t"] < stop["t"]}
        # the 1000 frees of recorded 100-byte blocks, none of the 100 000
        # unrecorded 64-byte blocks (before the fix: 101 000 frees)
        assert len(frees) == KEPT, (name, len(frees))
        assert {f["addr"] for f in frees} <= addrs, name
        # the unrecorded 300-byte blocks' frees: none
        assert between(recs, "free", freed["t"], t_after) == [], name
        assert between(recs, "alloc", stop["t"], t_after) == [], name
    db = os.path.join(d, name + ".db")
    hrtest.trace_import(["-q", t, db])
    c = hrtest.connect(db)
    assert hrtest.meta(c, "unmatched_frees") == 0, hrtest.meta(c, "unmatched_frees")
    assert hrtest.one(c, "SELECT unknown_frees FROM processes") == 0, name
    assert hrtest.one(c, "SELECT COUNT(*) FROM allocations WHERE t_free IS NULL "
                         "AND size IN (100, 200, 300, 400)") == 0, name
    assert hrtest.one(c, "SELECT COUNT(*) FROM allocations WHERE size = 400") == KEPT // 2
    c.close()


one_stop_each("plain")
one_stop_each("bounded", env=dict(os.environ, REC_MAX_SIZE="64M"))

# Racing threads: every block of 5000..6008 bytes is freed before the end,
# so none recorded may be left live; frees of blocks allocated while
# stopped are at most counted (unknown_frees), never unmatched.
t = os.path.join(d, "threads.trc")
hrtest.run([ctltest.TRACE_RECORD, "-o", t, "--", prog, "threads"])
db = os.path.join(d, "threads.db")
hrtest.trace_import(["-q", t, db])
c = hrtest.connect(db)
assert hrtest.meta(c, "unmatched_frees") == 0, hrtest.meta(c, "unmatched_frees")
assert hrtest.one(c, "SELECT lost_events FROM processes") == 0
recorded = hrtest.one(c, "SELECT COUNT(*) FROM allocations WHERE size BETWEEN 5000 AND 6008")
live = hrtest.one(c, "SELECT COUNT(*) FROM allocations WHERE t_free IS NULL "
                     "AND size BETWEEN 5000 AND 6008")
assert recorded > 0 and live == 0, (recorded, live)
# a recorded block whose free went unwritten, its address handed out and
# recorded again, would show as a missed free
assert hrtest.meta(c, "missed_frees") == 0, hrtest.meta(c, "missed_frees")
# the racers' custom blocks too, in their pools and in none
recorded = hrtest.one(c, "SELECT COUNT(*) FROM allocations WHERE kind = 2")
live = hrtest.one(c, "SELECT COUNT(*) FROM allocations WHERE kind = 2 AND t_free IS NULL")
pooled = hrtest.one(c, "SELECT COUNT(*) FROM allocations WHERE kind = 2 AND pool_id != 0")
assert recorded > pooled > 0 and live == 0, (recorded, pooled, live)
c.close()

# A bounded trace whose ring overwrote the stop and start marks (ctl_stopped
# wrap): the keyframes hold them again, so a snapshot after them still says
# that the blocks allocated while stopped (1000 x 300 bytes, live to the
# end) are missing.
t = os.path.join(d, "wrap.trc")
hrtest.run([ctltest.TRACE_RECORD, "-o", t, "--", prog, "wrap"],
           env=dict(os.environ, REC_MAX_SIZE="4M"))
db = os.path.join(d, "wrap.db")
hrtest.trace_import(["-q", t, db])
c = hrtest.connect(db)
marks = c.execute("SELECT t, label FROM marks WHERE label IN ('heapreel.stop', "
                  "'heapreel.start') ORDER BY t").fetchall()
window = hrtest.meta(c, "window_start_ns")
assert window is not None and [m[1] for m in marks] == ["heapreel.stop", "heapreel.start"] \
    and marks[1][0] < window, (window, marks)
assert hrtest.one(c, "SELECT COUNT(*) FROM allocations WHERE t_free IS NULL") == 0
c.close()
snap = hrtest.run([hrtest.TRACE_SNAP, db, "--at", "end", "--format", "text"])
assert "was stopped from " in snap.stderr, snap.stderr
print("ok")
