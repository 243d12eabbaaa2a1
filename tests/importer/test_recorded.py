#!/usr/bin/env python3
"""Importer tests on real recordings (librec.so preloaded into our programs
imp_known and imp_inline): exact counts and byte sums per function, a call
site's file:line, an inlined frame, realloc chains, pairing across threads,
the peak.

usage: test_recorded.py known|inline"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hrtest  # noqa: E402
from imptest import check_invariants, connect, meta, one, trace_import  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def program(name):
    return os.path.join(hrtest.REC_BUILD, "tests", "importer", name)


def site_line(src, marker):
    with open(os.path.join(HERE, src)) as f:
        for n, line in enumerate(f, 1):
            if marker in line:
                return n
    raise AssertionError("no %s in %s" % (marker, src))


def record_and_import(d, name, killed=False):
    for p in (hrtest.LIBREC, program(name), hrtest.TRACE_IMPORT):
        if not os.path.exists(p):
            hrtest.skip("%s not built" % p)
    trc = os.path.join(d, name + ".trc")
    db = os.path.join(d, name + ".db")
    p = hrtest.record([program(name)], trc, check=not killed)
    if killed:
        assert p.returncode == -9, p
        assert os.path.exists(trc + ".ring")
        # the writer may have been killed inside a segment: a torn tail
        # (exit 2) whose events the ring still holds
        imp = trace_import(["-q", trc, db], expect=None)
        assert imp.returncode in (0, 2), imp.stderr
    else:
        trace_import(["-q", trc, db])
    c = connect(db)
    check_invariants(c)
    return c


# Rows per function of the allocating frame (the leaf node of the stack).
BY_FUNCTION = """SELECT COUNT(*), SUM(a.size), SUM(a.t_free IS NULL), SUM(a.from_realloc)
                 FROM allocations a JOIN stacks s ON s.id = a.stack_id
                 JOIN frames f ON f.id = s.frame_id WHERE f.function = ?"""


def case_known(d):
    c = record_and_import(d, "imp_known")
    assert meta(c, "damaged") == 0
    # modules keep the recorded GNU build id, as lowercase hex
    dumped = {}
    for tok in hrtest.dump(os.path.join(d, "imp_known.trc")):
        if tok and tok[0] == "module":
            f = dict(t.split("=", 1) for t in tok[1:])
            dumped[f["path"]] = f["build_id"]
    rows = c.execute("SELECT path, build_id FROM modules").fetchall()
    assert rows and all(dumped.get(p) == b for p, b in rows), (rows, dumped)
    # count, bytes, still live, from realloc
    assert c.execute(BY_FUNCTION, ("make_a",)).fetchone() == (100, 100000, 0, 0)
    assert c.execute(BY_FUNCTION, ("make_b",)).fetchone() == (50, 15000, 50, 0)
    assert c.execute(BY_FUNCTION, ("grow_c",)).fetchone() == (10, 5500, 0, 9)
    assert c.execute(BY_FUNCTION, ("produce",)).fetchone() == (1000, 48000, 0, 0)
    assert c.execute(BY_FUNCTION, ("peak_step",)).fetchone() == (9, 8 * 2**20 + 3 * 2**20, 0, 0)
    # the call site of make_a's malloc
    files = c.execute("""SELECT DISTINCT f.file, f.line FROM allocations a
                         JOIN stacks s ON s.id = a.stack_id JOIN frames f ON f.id = s.frame_id
                         WHERE f.function = 'make_a'""").fetchall()
    assert len(files) == 1 and files[0][0].endswith("imp_known.c") and \
        files[0][1] == site_line("imp_known.c", "SITE_A"), files
    # make_a is called by main
    assert one(c, """SELECT DISTINCT g.function FROM allocations a
                     JOIN stacks s ON s.id = a.stack_id JOIN frames f ON f.id = s.frame_id
                     JOIN stacks p ON p.id = s.parent_id JOIN frames g ON g.id = p.frame_id
                     WHERE f.function = 'make_a'""") == "main"
    # the realloc chain: each block ends where the next begins
    chain = c.execute("""SELECT a.t_alloc, a.t_free, a.size FROM allocations a
                         JOIN stacks s ON s.id = a.stack_id JOIN frames f ON f.id = s.frame_id
                         WHERE f.function = 'grow_c' ORDER BY a.id""").fetchall()
    assert [r[2] for r in chain] == [100 * i for i in range(1, 11)]
    for cur, nxt in zip(chain, chain[1:]):
        assert cur[1] is not None and cur[1] <= nxt[0], chain
    # allocated by the producer thread, freed by the consumer: all paired
    tids = c.execute("""SELECT DISTINCT a.tid FROM allocations a JOIN stacks s ON s.id = a.stack_id
                        JOIN frames f ON f.id = s.frame_id WHERE f.function = 'produce'""").fetchall()
    assert len(tids) == 1
    assert tids[0][0] != one(c, "SELECT pid FROM processes")
    assert one(c, "SELECT COUNT(*) FROM threads") >= 3
    # the peak: right after the 3 MiB block, 11 MiB of it from peak_step
    pt, pb = c.execute("SELECT peak_t, peak_bytes FROM processes").fetchone()
    assert pt == one(c, "SELECT t_alloc FROM allocations WHERE size = ?", 3 * 2**20)
    assert (meta(c, "peak_t"), meta(c, "peak_bytes")) == (pt, pb)
    live_p = one(c, """SELECT SUM(a.size) FROM allocations a JOIN stacks s ON s.id = a.stack_id
                       JOIN frames f ON f.id = s.frame_id WHERE f.function = 'peak_step'
                       AND a.t_alloc <= ? AND (a.t_free IS NULL OR a.t_free > ?)""", pt, pt)
    assert live_p == 11 * 2**20
    # the rest live at the peak: make_b's 15000 bytes and the C library's
    assert 15000 <= pb - live_p < 2**20, pb


def case_inline(d):
    c = record_and_import(d, "imp_inline")
    rows = c.execute("""SELECT f.function, f.inline_depth, f.file, f.line, g.function,
                        g.inline_depth, g.ip = f.ip, COUNT(*), SUM(a.size)
                        FROM allocations a JOIN stacks s ON s.id = a.stack_id
                        JOIN frames f ON f.id = s.frame_id
                        JOIN stacks p ON p.id = s.parent_id JOIN frames g ON g.id = p.frame_id
                        WHERE a.size BETWEEN 65 AND 84 GROUP BY 1, 2, 3, 4, 5, 6, 7""").fetchall()
    assert len(rows) == 1, rows
    fn, depth, file, line, outer, odepth, same_ip, n, total = rows[0]
    assert (fn, depth, outer, odepth, same_ip) == ("inl_alloc", 1, "outer_fn", 0, 1), rows
    assert file.endswith("imp_inline.c") and line == site_line("imp_inline.c", "SITE_INL"), rows
    assert (n, total) == (20, sum(65 + i for i in range(20)))


def case_killed(d):
    """SIGKILLed right after its allocations: all of them are in the
    database, through the trace or the leftover .ring."""
    c = record_and_import(d, "imp_killed", killed=True)
    assert c.execute(BY_FUNCTION, ("doomed",)).fetchone() == \
        (5000, sum(32 + i % 7 for i in range(5000)), 5000, 0)
    assert one(c, "SELECT t_end FROM processes") >= one(c, "SELECT MAX(t_alloc) FROM allocations")


def case_forker(d):
    """A parent and its forked child (tests/programs/forker): two traces,
    one database, each process's allocations paired in its own table."""
    prog = hrtest.prog("forker")
    for p in (hrtest.LIBREC, prog, hrtest.TRACE_IMPORT):
        if not os.path.exists(p):
            hrtest.skip("%s not built" % p)
    run = os.path.join(d, "run")
    os.mkdir(run)
    out = hrtest.record([prog], os.path.join(run, "run.trc")).stdout.split()
    parent, child = int(out[1]), int(out[7])
    db = os.path.join(d, "f.db")
    trace_import(["-q", run, db])
    c = connect(db)
    check_invariants(c)
    assert c.execute("SELECT pid, ppid FROM processes ORDER BY t_start").fetchall()[:2] == \
        [(parent, one(c, "SELECT ppid FROM processes WHERE pid = ?", parent)), (child, parent)]
    assert one(c, "SELECT t_start FROM processes WHERE pid = ?", child) > 0
    rows = c.execute("""SELECT a.pid, f.function, COUNT(*), SUM(a.size), SUM(a.t_free IS NULL)
                        FROM allocations a JOIN stacks s ON s.id = a.stack_id
                        JOIN frames f ON f.id = s.frame_id
                        WHERE f.function IN ('parent_site', 'child_site')
                        GROUP BY 1, 2 ORDER BY 1""").fetchall()
    assert rows == [(parent, "parent_site", 5, 15005, 0), (child, "child_site", 7, 21014, 3)], rows
    assert meta(c, "peak_pid") == parent


def case_cxx(d):
    """C++ names come out demangled (tests/programs/cxx_mix)."""
    prog = hrtest.prog("cxx_mix")
    for p in (hrtest.LIBREC, prog, hrtest.TRACE_IMPORT):
        if not os.path.exists(p):
            hrtest.skip("%s not built" % p)
    trc = os.path.join(d, "cxx.trc")
    db = os.path.join(d, "cxx.db")
    hrtest.record([prog, "2", "20"], trc)
    trace_import(["-q", trc, db])
    c = connect(db)
    names = {r[0] for r in c.execute("SELECT DISTINCT function FROM frames")}
    assert "work(int, int)" in names, sorted(names)[:50]
    assert any(n.startswith("std::") for n in names), sorted(names)[:50]
    assert not [n for n in names if n.startswith("_Z")], [n for n in names if n.startswith("_Z")]


def main():
    name = sys.argv[1]
    globals()["case_" + name](hrtest.tmpdir("imprec-" + name))
    print("ok", name)


if __name__ == "__main__":
    main()
