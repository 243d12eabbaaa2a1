"""hardtest - shared helpers of the hardening tests: where our programs are,
importing a trace, and the checks every imported database of a real or a
killed program must pass (pairing, no negative live bytes, what the
importer counted as lost or unmatched). Every check fails by raising
AssertionError that says what was wrong."""
import os
import sqlite3
import subprocess

import hrtest

need = hrtest.need
meta = hrtest.meta
one = hrtest.one


def prog(name):
    """A program built in tests/hardening."""
    return os.path.join(hrtest.REC_BUILD, "tests", "hardening", name)


def rec_env(trace, **kw):
    """The environment of a recorded run writing `trace`."""
    e = dict(os.environ)
    for k in ("REC_OUT", "REC_DEPTH", "REC_SAMPLE", "REC_PAUSED", "REC_MAX_SIZE"):
        e.pop(k, None)
    e["LD_PRELOAD"] = hrtest.LIBREC
    e["REC_OUT"] = trace
    e.update(kw)
    return e


def plain_env(**kw):
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    e.update(kw)
    return e


def trace_import(inputs, db, ok=(0,)):
    """trace-import -q INPUTS DB; returns the CompletedProcess. `ok`: the
    exit codes accepted (2 = a damaged tail, everything before it in)."""
    p = subprocess.run([hrtest.TRACE_IMPORT, "-q"] + list(inputs) + [db],
                       capture_output=True, text=True)
    assert p.returncode in ok, "trace-import %s: exit %d\n%s" % (inputs, p.returncode, p.stderr)
    return p


def connect(db):
    c = sqlite3.connect(db)
    assert meta(c, "complete") == 1, "%s not marked complete" % db
    return c


def consistency(c, max_unmatched=0):
    """What any imported run must satisfy. Returns a dict of figures.
    - every free pairs an allocation: frees rows <-> allocations.t_free one
      to one; meta unmatched_frees (a free of an address never allocated in
      the trace) at most max_unmatched; missed_frees (an address allocated
      again while live) 0; lost_events 0;
    - live bytes and objects never negative in the timeline, each bucket's
      max at least its end value, and the peak equal to the timeline's max."""
    f = {k: meta(c, k) or 0 for k in ("allocations", "frees", "unmatched_frees",
                                       "missed_frees", "lost_events", "peak_bytes",
                                       "recovered_events", "damaged", "events")}
    closed = one(c, "SELECT COUNT(*) FROM allocations WHERE t_free IS NOT NULL")
    assert closed == one(c, "SELECT COUNT(*) FROM frees") == f["frees"], \
        "frees %d, closed allocations %d, meta frees %d" % (
            one(c, "SELECT COUNT(*) FROM frees"), closed, f["frees"])
    assert one(c, "SELECT COUNT(DISTINCT alloc_id) FROM frees") == f["frees"], "a block freed twice"
    assert one(c, "SELECT COUNT(*) FROM allocations WHERE t_free < t_alloc") == 0, \
        "a block freed before it was allocated"
    assert f["unmatched_frees"] <= max_unmatched, \
        "%d unmatched frees (bound %d)" % (f["unmatched_frees"], max_unmatched)
    assert f["missed_frees"] == 0, "%d missed frees (address reused while live)" % f["missed_frees"]
    assert f["lost_events"] == 0, "%d events lost" % f["lost_events"]
    neg = one(c, "SELECT COUNT(*) FROM timeline WHERE live_bytes < 0 OR live_objects < 0 "
                 "OR max_bytes < live_bytes")
    assert neg == 0, "%d timeline rows with negative live bytes/objects or max < live" % neg
    if f["allocations"]:
        for pid, pb in c.execute("SELECT pid, peak_bytes FROM processes"):
            mx = one(c, "SELECT MAX(max_bytes) FROM timeline WHERE pid=?", pid)
            assert (mx or 0) == (pb or 0), "pid %d: peak %s, timeline max %s" % (pid, pb, mx)
    return f
