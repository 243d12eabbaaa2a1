"""hardtest - shared helpers of the hardening tests: where our programs are,
importing a trace, and the checks every imported database of a real or a
killed program must pass (pairing, no negative live bytes, what the
importer counted as lost or unmatched). Every check fails by raising
AssertionError that says what was wrong. Also the layout of hr_kill.c's
counters file, which test_kill, test_real and test_security read."""
import os
import struct
import sys

import hrtest

need = hrtest.need
meta = hrtest.meta
one = hrtest.one
connect = hrtest.connect


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
    return hrtest.trace_import(["-q"] + list(inputs) + [db], ok)


def consistency(c, max_unmatched=0, lost=0, missed_if_lost=False):
    """What any imported run must satisfy. Returns a dict of figures.
    - every free pairs an allocation: frees (free_blocks) <-> allocations.t_free one
      to one; meta unmatched_frees (a free of an address never allocated in
      the trace) at most max_unmatched, or with missed_if_lost at most
      max_unmatched + lost_events (an allocation counted lost leaves its
      free unmatched: a thread that lost a call for want of a ring may get
      one for its next; glibc frees a thread's blocks from another thread);
      missed_frees (an address allocated again while live) 0, or with
      missed_if_lost at most lost_events (a free counted lost leaves its
      block live until the address comes back); lost_events `lost` (None:
      any);
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
    unmatched_bound = max_unmatched + (f["lost_events"] if missed_if_lost else 0)
    assert f["unmatched_frees"] <= unmatched_bound, \
        "%d unmatched frees (bound %d)" % (f["unmatched_frees"], unmatched_bound)
    assert f["missed_frees"] <= (f["lost_events"] if missed_if_lost else 0), \
        "%d missed frees (address reused while live), %d events lost" % (
            f["missed_frees"], f["lost_events"])
    assert lost is None or f["lost_events"] == lost, \
        "%d events lost (expected %d)" % (f["lost_events"], lost)
    neg = one(c, "SELECT COUNT(*) FROM timeline WHERE live_bytes < 0 OR live_objects < 0 "
                 "OR max_bytes < live_bytes")
    assert neg == 0, "%d timeline rows with negative live bytes/objects or max < live" % neg
    if f["allocations"]:
        for pid, pb in c.execute("SELECT pid, peak_bytes FROM processes"):
            mx = one(c, "SELECT MAX(max_bytes) FROM timeline WHERE pid=?", pid)
            assert (mx or 0) == (pb or 0), "pid %d: peak %s, timeline max %s" % (pid, pb, mx)
    return f


# ---- hr_kill.c's counters file: what the program says it has done ------
# Mirrors hr_kill.c.
MAX_WORKERS = 8
SPAN = 512
SLOT = 64
FILE_BYTES = SLOT * (MAX_WORKERS + 2)
SHORT = MAX_WORKERS                    # slot of the short-lived threads
SHORT_CALLS = 40                       # blocks per short-lived thread
PROCS = 2                              # counter regions: parent, forked child
GROW_BYTES = 256 * 1024


def size_class(w):
    return 1024 * (w + 1)


SHORT_MIN = size_class(MAX_WORKERS)


def counters_file(path):
    with open(path, "wb") as f:
        f.write(b"\0" * FILE_BYTES * PROCS)


def read_counters(path, proc=0):
    """[(tid, allocs, reallocs, frees)] for slots 0..MAX_WORKERS, and the
    header (ready, grow allocs), of the parent (proc 0) or the child."""
    with open(path, "rb") as f:
        f.seek(FILE_BYTES * proc)
        b = f.read(FILE_BYTES)
    slots = [struct.unpack_from("<4Q", b, SLOT * (k + 1)) for k in range(MAX_WORKERS + 1)]
    ready, grown = struct.unpack_from("<2Q", b, 0)
    return slots, ready, grown


def imported(c, lo, tid=None, exclude=()):
    """(allocs, reallocs, closed) of blocks with sizes in [lo, lo + SPAN)
    allocated by thread tid (or by any thread not in exclude)."""
    where = "size >= ? AND size < ?"
    args = [lo, lo + SPAN]
    if tid is not None:
        where += " AND tid = ?"
        args.append(tid)
    if exclude:
        where += " AND tid NOT IN (%s)" % ",".join("?" * len(exclude))
        args += list(exclude)
    return c.execute("SELECT COALESCE(SUM(from_realloc = 0), 0), COALESCE(SUM(from_realloc), 0), "
                     "COALESCE(SUM(t_free IS NOT NULL), 0) FROM allocations WHERE " + where,
                     args).fetchone()


def compare(c, slots, nworkers, exact):
    """Per thread, published calls vs imported events. Returns (lost,
    in_flight, problems): lost = published calls missing from the
    database; in_flight = calls in the database the program had not
    published (at most one per thread)."""
    lost = in_flight = 0
    problems = []
    tids = [slots[w][0] for w in range(nworkers) if slots[w][0]]
    groups = [("worker %d" % w, size_class(w), slots[w], slots[w][0], ())
              for w in range(nworkers) if slots[w][0]]
    groups.append(("short-lived threads", SHORT_MIN, slots[SHORT], None, tids))
    for name, lo, (tid, a, r, f), t, excl in groups:
        A, R, F = imported(c, lo, t, excl)
        d = (A - a, R - r, (F - R) - f)   # allocs, reallocs, frees beyond the published
        lost += sum(-x for x in d if x < 0)
        in_flight += sum(x for x in d if x > 0)
        bad = any(x < 0 for x in d) or (exact and any(d)) or sum(x for x in d if x > 0) > 1
        if bad:
            problems.append("%s (tid %s): published allocs %d reallocs %d frees %d, "
                            "imported allocs %d reallocs %d frees %d" % (
                                name, tid or "-", a, r, f, A, R, F - R))
    return lost, in_flight, problems


def check_worker_losses(c, slots, nworkers):
    """A worker makes no call but its own: its events missing from the
    database (in events: a realloc is two) are exactly those counted lost in
    its threads row, or one call fewer if the program ended between a call
    counted lost and its publication. Other threads (glibc's own calls,
    short-lived threads) may count events the counters do not know."""
    for w in range(nworkers):
        tid, a, r, fr = slots[w]
        A, R, F = imported(c, size_class(w), tid)
        missing = (a - A) + 2 * (r - R) + (fr - (F - R))
        counted = one(c, "SELECT lost_events FROM threads WHERE tid = ?", tid)
        print("worker %d: %d events missing, %d counted lost" % (w, missing, counted))
        assert missing <= counted <= missing + 2, \
            "worker %d: %d events missing, %d counted lost" % (w, missing, counted)


# ---- running programs as another user, and a python to record ---------------

def as_user(uid):
    """A preexec_fn that drops root for uid (as its own group, no others)."""
    def drop():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    return drop


def system_python():
    """Debian's python3 when there is one: a python built with full debug
    info (pyenv's) takes many seconds to symbolize at import."""
    return "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
