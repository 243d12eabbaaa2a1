"""imptest - shared helpers of the importer tests: run trace-import, open the
database, and check the invariants every imported database must satisfy
(the ones queries/ relies on: ordering of allocations and frees, pairing,
checkpoints equal to a replay of the rows, timeline consistent)."""
import sys

import hrtest

meta = hrtest.meta
one = hrtest.one
connect = hrtest.connect

MKTRACE = hrtest.MKTRACE
mktrace = hrtest.mktrace


def trace_import(args, expect=0):
    return hrtest.trace_import(args, None if expect is None else (expect,))


def check_invariants(c):
    """What every database must satisfy; returns the number of checkpoints."""
    # allocations in t_alloc order, frees in t_free order
    assert one(c, """SELECT COUNT(*) FROM allocations a JOIN allocations b
                     ON b.id = a.id + 1 WHERE b.t_alloc < a.t_alloc""") == 0
    assert one(c, """SELECT COUNT(*) FROM frees f JOIN frees g ON g.id = f.id + 1
                     JOIN allocations a ON a.id = f.alloc_id
                     JOIN allocations b ON b.id = g.alloc_id
                     WHERE b.t_free < a.t_free""") == 0
    # frees <-> allocations.t_free, one to one
    assert one(c, "SELECT COUNT(*) FROM allocations WHERE t_free IS NOT NULL") == \
        one(c, "SELECT COUNT(*) FROM frees")
    assert one(c, """SELECT COUNT(*) FROM frees f JOIN allocations a
                     ON a.id = f.alloc_id JOIN processes p ON p.proc = f.proc
                     WHERE a.t_free IS NULL
                     OR a.size != f.size OR a.stack_id != f.stack_id
                     OR a.pid != p.pid OR a.t_free < a.t_alloc""") == 0
    assert one(c, "SELECT COUNT(DISTINCT alloc_id) FROM frees") == \
        one(c, "SELECT COUNT(*) FROM frees")
    assert one(c, "SELECT COUNT(*) FROM allocations") == meta(c, "allocations")
    # every stack id resolves to a frame
    assert one(c, """SELECT COUNT(*) FROM allocations a LEFT JOIN stacks s
                     ON s.id = a.stack_id WHERE s.id IS NULL""") == 0
    assert one(c, """SELECT COUNT(*) FROM stacks s LEFT JOIN frames f
                     ON f.id = s.frame_id WHERE f.id IS NULL""") == 0
    # checkpoints: the replay of rows up to (alloc_id, free_id) per stack,
    # and the same as "everything up to t" by time
    n = 0
    for cid, pid, t, aid, fid in c.execute(
            "SELECT id, pid, t, alloc_id, free_id FROM checkpoint_index").fetchall():
        n += 1
        got = {r[0]: r[1:] for r in c.execute(
            """SELECT stack_id, live_bytes, live_objects, alloc_bytes, alloc_objects
               FROM checkpoints WHERE checkpoint_id=?""", (cid,))}
        want = {}
        for sid, size, freed in c.execute(
                """SELECT a.stack_id, a.size, EXISTS(SELECT 1 FROM frees f
                          WHERE f.alloc_id = a.id AND f.id <= ?)
                   FROM allocations a WHERE a.pid=? AND a.id <= ?""", (fid, pid, aid)):
            w = want.setdefault(sid, [0, 0, 0, 0])
            w[2] += size
            w[3] += 1
            if not freed:
                w[0] += size
                w[1] += 1
        want = {k: tuple(v) for k, v in want.items()}
        assert got == want, "checkpoint %d: %s != %s" % (cid, got, want)
        by_time = {r[0]: (r[1], r[2]) for r in c.execute(
            """SELECT stack_id, SUM(size), COUNT(*) FROM allocations
               WHERE pid=? AND t_alloc <= ? AND (t_free IS NULL OR t_free > ?)
               GROUP BY stack_id""", (pid, t, t))}
        live = {k: (v[0], v[1]) for k, v in want.items() if v[1]}
        assert by_time == live, "checkpoint %d at t=%d: by time %s != %s" % (
            cid, t, by_time, live)
    # timeline: live heap bytes at each bucket's end (mappings, kind 1, are not heap)
    bucket = meta(c, "timeline_bucket_ns")
    for pid, t, live_bytes, objs, mx in c.execute(
            "SELECT pid, t, live_bytes, live_objects, max_bytes FROM timeline").fetchall():
        end = t + bucket - 1
        b, o = c.execute("""SELECT COALESCE(SUM(size),0), COUNT(*) FROM allocations
                            WHERE pid=? AND t_alloc <= ? AND (t_free IS NULL OR t_free > ?)
                            AND kind = 0""",
                         (pid, end, end)).fetchone()
        assert (live_bytes, objs) == (b, o), "timeline %d@%d: %s != %s" % (
            pid, t, (live_bytes, objs), (b, o))
        assert mx >= live_bytes
    # peak per process: the live bytes right after its allocation
    for pid, pt, pb, po in c.execute(
            "SELECT pid, peak_t, peak_bytes, peak_objects FROM processes").fetchall():
        if not pb:
            continue
        b, o = c.execute("""SELECT SUM(size), COUNT(*) FROM allocations WHERE pid=?
                            AND t_alloc <= ? AND (t_free IS NULL OR t_free > ?) AND kind = 0""",
                         (pid, pt, pt)).fetchone()
        assert (b, o) == (pb, po), "peak of %d: %s != %s" % (pid, (b, o), (pb, po))
        assert one(c, "SELECT MAX(max_bytes) FROM timeline WHERE pid=?", pid) == pb
    return n


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)
