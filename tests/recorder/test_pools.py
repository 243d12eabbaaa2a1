"""test_pools CASE - a custom allocator's blocks reported through rec.h
(recorder/custom.c), imported as allocations of kind custom per pool and
shown by trace-snap --pool and --kind custom. The program is
tests/programs/pools: two named pools carving blocks out of malloc'd
arenas, rec_alloc blocks of no pool, marks pools-0 ... pools-3.

CASE:
  snap      --pool alpha, --pool beta: per function at each mark,
            byte-exact, and the text output's Total, Kinds and Pool
            lines; rec_pool_destroy ends the pool's blocks at one instant;
            --kind custom totals (the rec_alloc blocks included); the
            arenas are heap blocks, each once, and no custom block pairs
            with one; a free through the wrong pool ends nothing
  norec     the program without the recorder (weak symbols NULL) runs
  empty     --pool on a process without pools, or a name it never used:
            exit 4, one line naming the pools it has
  usage     --pool with --stats, --histogram or no name: usage (2)
  sampled   under REC_SAMPLE no custom block is recorded, and the answers
            say from when they lack them (one warning)
  bounded   the same under REC_MAX_SIZE
  fork      a child forked after pools-1 holds the custom blocks it
            inherited, in their pools (its trace names them again), then
            its own frees, destroy and pool: --pool byte-exact at its marks
  churn     a pool whose one address was taken and given back 1000 times
            beside 10 kept blocks: --pool byte-exact before its destroy,
            empty after, every block of it ended once, the 11 live ones
            at the destroy's instant, in allocation order
"""
import os
import re

import hrtest

ARENA = 65536
FUNCS = ["alpha_small", "alpha_big", "beta_obj", "gamma_obj", "loose_alloc", "loose_grow",
         "make_pool", "delta_keep", "delta_churn"]
# live bytes per function at each mark (tests/programs/pools.c)
ALPHA = [{"alpha_small": 300, "alpha_big": 4000}, {"alpha_small": 200, "alpha_big": 4000},
         {"alpha_small": 200, "alpha_big": 4000}, {}]
BETA = [{"beta_obj": 320}, {"beta_obj": 320}, {}, {}]
LOOSE = [{"loose_alloc": 2000}, {"loose_alloc": 1000, "loose_grow": 3000},
         {"loose_grow": 3000}, {}]
HEAP = [{"make_pool": 2 * ARENA}, {"make_pool": 2 * ARENA}, {"make_pool": ARENA}, {}]


def per_function(db, args):
    got = hrtest.folded_per_function(db, args, FUNCS, "inuse_space")
    return {k: v for k, v in got.items() if v}


def at(m):
    return ["--at", "mark:pools-%d" % m]


def case_snap(d, trace, db):
    for m in range(4):
        for name, want in (("alpha", ALPHA[m]), ("beta", BETA[m])):
            got = per_function(db, at(m) + ["--pool", name])
            assert got == want, "pools-%d %s: %s != %s" % (m, name, got, want)
            total = sum(want.values())
            out = hrtest.run([hrtest.TRACE_SNAP, db, "--pool", name, "--format", "text"]
                             + at(m)).stdout
            lines = out.splitlines()
            assert hrtest.snap_total(out) == total, out
            assert lines[1].startswith("Kinds: heap 0 B (0 B), mmap 0 B (0 B), custom %d B "
                                       % total), out
            assert lines[2] == "Pool: %s" % name, out
        custom = {**ALPHA[m], **BETA[m], **LOOSE[m]}
        got = per_function(db, at(m) + ["--kind", "custom"])
        assert got == custom, "pools-%d custom: %s != %s" % (m, got, custom)
        got = per_function(db, at(m) + ["--kind", "heap"])
        assert got == HEAP[m], "pools-%d heap: %s != %s" % (m, got, HEAP[m])
    out = hrtest.run([hrtest.TRACE_SNAP, db, "--at", "mark:pools-1"]).stdout
    assert out.splitlines()[1].startswith(
        "Kinds: heap %d B (128.0 KiB), mmap 0 B (0 B), custom 8520 B (8.3 KiB)" % (2 * ARENA)), out
    print("--pool per function at 4 marks byte-exact, --kind custom totals: ok")
    c = hrtest.connect(db)
    ends = c.execute("SELECT DISTINCT a.t_free FROM allocations a JOIN pools p "
                     "ON p.pid = a.pid AND p.id = a.pool_id WHERE p.name = 'beta'").fetchall()
    assert len(ends) == 1 and ends[0][0] is not None, ends
    assert hrtest.one(c, "SELECT count(*) FROM allocations WHERE kind = 2") == 12
    assert hrtest.one(c, "SELECT count(*) FROM allocations WHERE kind = 0 AND size = ?",
                      ARENA) == 2
    assert hrtest.meta(c, "unmatched_frees") == 1, "the free through the wrong pool"
    assert hrtest.meta(c, "missed_frees") == 0
    print("destroy ends beta's blocks at one instant; arenas once, as heap: ok")


def case_norec(d, trace, db):
    p = hrtest.run([hrtest.prog("pools")])
    assert p.stdout == "no recorder\n", p.stdout
    print("without the recorder: runs, no-op: ok")


def case_empty(d, trace, db):
    other = os.path.join(d, "entry.trc")
    odb = os.path.join(d, "entry.db")
    hrtest.record([hrtest.prog("entry")], other)
    hrtest.run([hrtest.TRACE_IMPORT, "-q", other, odb])
    for base, name, pools in ((odb, "alpha", "none"), (db, "gamma", "alpha, beta")):
        p = hrtest.run([hrtest.TRACE_SNAP, base, "--pool", name, "--at", "end"], check=False)
        assert p.returncode == 4 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
        assert p.stderr.splitlines() == [
            "trace-snap: %s: process %s had no pool '%s' (its pools: %s)" % (
                base, hrtest.one(hrtest.connect(base), "SELECT pid FROM processes"), name,
                pools)], p.stderr
    print("--pool of no pool: exit 4, one line with the pools there are: ok")


def case_usage(d, trace, db):
    for args in (["--pool", "alpha", "--stats"], ["--pool", "alpha", "--histogram"],
                 ["--pool"]):
        p = hrtest.run([hrtest.TRACE_SNAP, db] + args, check=False)
        assert p.returncode == 2 and p.stderr.startswith("trace-snap: ") and \
            len(p.stderr.splitlines()) == 1, (args, p.returncode, p.stderr)
    print("--pool usage errors: ok")


def case_sampled(d, trace, db):
    sampled = os.path.join(d, "sampled.trc")
    hrtest.record([hrtest.prog("pools")], sampled, env={"REC_SAMPLE": "64"})
    def custom(t):
        return [r for r in hrtest.dump(t) if any(w.startswith("pool=") for w in r)]
    assert len(custom(trace)) == 19, "the unsampled trace's custom records"
    assert not custom(sampled), custom(sampled)
    recs = hrtest.dump(sampled)
    assert [r for r in recs if r[0] == "pool"], "pool names still recorded"
    unrecorded_said(d, sampled)
    print("sampled: no custom block recorded, the answers say so: ok")


def unrecorded_said(d, trace):
    """trace's answers say they lack custom blocks from the first call not
    recorded (one mark), which the recorder made at pools-0's blocks."""
    marks = [r for r in hrtest.dump(trace) if r[0] == "mark"]
    said = [r for r in marks if r[-1] == "label=heapreel.custom-unrecorded"]
    assert len(said) == 1, marks
    db = trace + ".db"
    hrtest.run([hrtest.TRACE_IMPORT, "-q", trace, db])
    for q in (["--pool", "alpha", "--at", "mark:pools-0"], ["--kind", "custom", "--at", "end"]):
        p = hrtest.run([hrtest.TRACE_SNAP, db, "--format", "folded"] + q)
        assert p.stdout == "", (q, p.stdout)
        assert re.fullmatch(r"trace-snap: warning: process \d+ reported custom allocator "
                            r"blocks from \S+ on that its trace does not hold \(sampled or "
                            r"bounded\): the answer lacks them\n", p.stderr), p.stderr


def case_bounded(d, trace, db):
    bounded = os.path.join(d, "bounded.trc")
    hrtest.record([hrtest.prog("pools")], bounded, env={"REC_MAX_SIZE": "4M"})
    assert not [r for r in hrtest.dump(bounded) if any(w.startswith("pool=") for w in r)]
    unrecorded_said(d, bounded)
    p = hrtest.run([hrtest.TRACE_SNAP, db, "--pool", "alpha", "--at", "end"])
    assert p.stderr == "", "the unbounded trace's answers lack nothing: " + p.stderr
    print("bounded: no custom block recorded, the answers say so: ok")


def case_fork(d, trace, db):
    fdb, c, _, child = hrtest.forked_db(d, [hrtest.prog("pools"), "fork"])
    assert hrtest.one(c, "SELECT inherited FROM processes WHERE pid = ?", child) == 1
    names = [r[0] for r in c.execute("SELECT name FROM pools WHERE pid = ? ORDER BY id", (child,))]
    assert names == ["alpha", "beta", "gamma"], names
    want = {
        "alpha": [ALPHA[1], {"alpha_small": 100, "alpha_big": 4000}],
        "beta": [BETA[1], {}],
        "gamma": [None, {"gamma_obj": 32}],
    }
    for m in range(2):
        for name, w in want.items():
            args = ["--pid", str(child), "--at", "mark:child-%d" % m, "--pool", name]
            if w[m] is None:   # not made yet: the name is unknown then, not later
                continue
            got = per_function(fdb, args)
            assert got == w[m], "child-%d %s: %s != %s" % (m, name, got, w[m])
        got = per_function(fdb, ["--pid", str(child), "--at", "mark:child-%d" % m, "--kind",
                                 "custom"])
        loose = LOOSE[1]
        whole = {**want["alpha"][m], **want["beta"][m], **(want["gamma"][m] or {}), **loose}
        assert got == whole, "child-%d custom: %s != %s" % (m, got, whole)
    for m in range(4):                      # the parent's answers as without the fork
        for name, w in (("alpha", ALPHA[m]), ("beta", BETA[m])):
            got = per_function(fdb, at(m) + ["--pool", name])
            assert got == w, "parent pools-%d %s: %s != %s" % (m, name, got, w)
    assert hrtest.meta(c, "unmatched_frees") == 1 and hrtest.meta(c, "inherited_frees") == 0
    print("fork: the child's inherited custom blocks per pool, then its own calls: exact")


def case_churn(d, trace, db):
    churned, cdb = os.path.join(d, "churn.trc"), os.path.join(d, "churn.db")
    hrtest.record([hrtest.prog("pools"), "churn"], churned)
    hrtest.trace_import([churned, cdb])
    want = [{"delta_keep": 10 * 48, "delta_churn": 48}, {}]
    for m in range(2):
        got = per_function(cdb, ["--at", "mark:churn-%d" % m, "--pool", "delta"])
        assert got == want[m], "churn-%d: %s != %s" % (m, got, want[m])
    c = hrtest.connect(cdb)
    rows = c.execute("SELECT a.id, a.t_free FROM allocations a JOIN pools p ON p.pid = a.pid "
                     "AND p.id = a.pool_id WHERE p.name = 'delta' ORDER BY a.id").fetchall()
    assert len(rows) == 10 + 1000 and all(t is not None for _, t in rows), len(rows)
    destroyed = hrtest.one(c, "SELECT t FROM marks WHERE label = 'churn-1'")
    kept = rows[:10] + rows[-1:]
    assert len({t for _, t in kept}) == 1 and kept[0][1] < destroyed, kept
    assert all(t < kept[0][1] for _, t in rows[10:-1]), "a churned block ended at the destroy"
    assert hrtest.meta(c, "unmatched_frees") == 1 and hrtest.meta(c, "missed_frees") == 0
    print("a churned pool's destroy ends its 11 live blocks, once each: ok")


if __name__ == "__main__":
    hrtest.run_case(hrtest.prog("pools"), "rec-pools-", globals())
