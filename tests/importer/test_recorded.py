#!/usr/bin/env python3
"""Importer tests on real recordings (libheapreel.so preloaded into our programs
imp_known and imp_inline): exact counts and byte sums per function, a call
site's file:line, an inlined frame, realloc chains, pairing across threads,
the peak.

usage: test_recorded.py CASE (known, inline, killed, forker, cxx, inherit, forkstorm,
                             shared, rebuilt)"""
import os
import shutil
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
        # (exit 5) whose events the ring still holds
        imp = trace_import(["-q", trc, db], expect=None)
        assert imp.returncode in (0, 5), imp.stderr
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
    # the child starts with the parent's 5 blocks (it never frees them)
    assert rows == [(parent, "parent_site", 5, 15005, 0), (child, "child_site", 7, 21014, 3),
                    (child, "parent_site", 5, 15005, 5)], rows
    fork_t, inherited, t_start = c.execute(
        "SELECT fork_t, inherited, t_start FROM processes WHERE pid = ?", (child,)).fetchone()
    assert (inherited, t_start) == (1, fork_t), (fork_t, inherited, t_start)
    assert one(c, "SELECT COUNT(*) FROM allocations WHERE pid = ? AND t_alloc = ?",
               child, fork_t) == one(c, "SELECT value FROM meta WHERE key = 'inherited_blocks'")
    assert c.execute("SELECT fork_t, inherited FROM processes WHERE pid = ?",
                     (parent,)).fetchone() == (None, 0)
    assert meta(c, "peak_pid") == parent


def traces_of(run):
    return sorted(os.path.join(run, f) for f in os.listdir(run) if not f.endswith(".ring"))


def live_by_function(db, pid, t, names):
    """{function: (objects, bytes)} of pid's live set at t (None: the end)
    by the allocating function, through trace-snap's folded output."""
    at = ["--leaks"] if t is None else ["--at", "%dns" % t]
    args = at + ["--pid", str(pid)]
    space = hrtest.folded_per_function(db, args, names, "inuse_space")
    objects = hrtest.folded_per_function(db, args, names, "inuse_objects")
    return {n: (objects[n], space[n]) for n in names}


INHERIT_SITES = ("keep_site", "drop_site", "child_site", "grand_site", "exec_site")


def case_inherit(d):
    """A forked child's live set starts with what it inherited
    (tests/programs/inherit): a multithreaded parent, a child that frees
    inherited blocks, a grandchild holding the parent's blocks through the
    child, a vfork+exec'd program that inherits nothing. Exact answers per
    function at the children's marks and at their ends, every free paired;
    the child imported without its parent: inherited=2 and its frees of
    inherited blocks counted as such, not as unmatched. Also bounded and
    sampled."""
    prog = hrtest.prog("inherit")
    for p in (hrtest.LIBREC, prog, hrtest.TRACE_IMPORT, hrtest.TRACE_SNAP):
        if not os.path.exists(p):
            hrtest.skip("%s not built" % p)
    # bounded (not wrapping) and sampled with a period of 1 byte (every
    # block sampled: the answers stay exact, and the child must keep
    # recording the frees of the sampled blocks it inherited)
    for k, env in enumerate(({}, {"REC_MAX_SIZE": "64M"}, {"REC_SAMPLE": "1"})):
        run = os.path.join(d, "run-%d" % k)
        os.mkdir(run)
        out = hrtest.record([prog], os.path.join(run, "run.trc"), env=env).stdout.split()
        parent, child, grand, execd = (int(out[i]) for i in (1, 3, 5, 7))
        traces = traces_of(run)
        assert len(traces) == 4, traces
        db = os.path.join(d, "all-%d.db" % k)
        imp = trace_import([run, db])
        assert "forked children start with the" in imp.stderr, imp.stderr
        c = connect(db)
        check_invariants(c)
        assert (meta(c, "unmatched_frees"), meta(c, "missed_frees"),
                meta(c, "inherited_frees")) == (0, 0, 0)
        procs = {r[0]: r[1:] for r in c.execute(
            "SELECT pid, ppid, fork_t, inherited, t_start FROM processes")}
        assert procs[parent][1:3] == (None, 0), procs
        assert procs[execd][1:3] == (None, 0), procs   # vfork + exec: a new heap
        assert procs[child][:3] == (parent, procs[child][3], 1), procs
        assert procs[grand][:3] == (child, procs[grand][3], 1), procs
        assert procs[parent][3] < procs[child][1] < procs[grand][1]
        marks = dict(c.execute("SELECT label, t FROM marks"))
        want = {
            (child, marks["child-done"]): {"keep_site": (6, 6666), "child_site": (2, 6666)},
            (child, None): {"keep_site": (6, 6666), "child_site": (2, 6666)},
            (grand, marks["grand-done"]): {"keep_site": (4, 4444), "child_site": (2, 6666),
                                           "grand_site": (2, 8888)},
            (grand, None): {"keep_site": (4, 4444), "child_site": (2, 6666),
                            "grand_site": (2, 8888)},
            (execd, None): {},
            # at the fork: the parent's blocks, none of the child's yet
            (child, procs[child][1]): {"keep_site": (6, 6666), "drop_site": (4, 8888)},
        }
        for (pid, t), live in want.items():
            got = live_by_function(db, pid, t, INHERIT_SITES)
            exp = {n: live.get(n, (0, 0)) for n in INHERIT_SITES}
            assert got == exp, (pid, t, got, exp)
        # the inherited blocks pair with the child's frees
        assert one(c, """SELECT COUNT(*) FROM allocations a JOIN stacks s ON s.id = a.stack_id
                         JOIN frames f ON f.id = s.frame_id WHERE a.pid = ?
                         AND f.function = 'drop_site' AND a.t_free IS NOT NULL""", child) == 4
    # The child alone, then with the grandchild: the parent's blocks unknown.
    ctrace = one(c, "SELECT trace_path FROM processes WHERE pid = ?", child)
    gtrace = one(c, "SELECT trace_path FROM processes WHERE pid = ?", grand)
    for inputs, frees in (([ctrace], 4), ([ctrace, gtrace], 4 + 2)):
        db = os.path.join(d, "alone-%d.db" % len(inputs))
        imp = trace_import(inputs + [db])
        assert "%d frees of blocks forked children inherited" % frees in imp.stderr, imp.stderr
        c = connect(db)
        check_invariants(c)
        assert (meta(c, "unmatched_frees"), meta(c, "inherited_frees"),
                meta(c, "inherited_blocks")) == (0, frees, 0)
        assert set(c.execute("SELECT pid, inherited FROM processes")) == \
            {(child, 2), (grand, 2)} if len(inputs) == 2 else {(child, 2)}
        assert one(c, "SELECT fork_t FROM processes WHERE pid = ?", child) < 0
        got = live_by_function(db, child, None, INHERIT_SITES)
        assert got == {n: (2, 6666) if n == "child_site" else (0, 0) for n in INHERIT_SITES}, got


FORKSTORM_CHILDREN = 150


def case_forkstorm(d):
    """FORKSTORM_CHILDREN forked children under one REC_OUT without %p
    (tests/programs/forkstorm, 50 alive at a time): every child's trace is
    written (no name runs out: before, names stopped at .99), the directory
    imports, and each child's allocations are exact, its inherited blocks
    included. 150 children pass the old limit."""
    prog = hrtest.prog("forkstorm")
    for p in (hrtest.LIBREC, prog, hrtest.TRACE_IMPORT):
        if not os.path.exists(p):
            hrtest.skip("%s not built" % p)
    n = FORKSTORM_CHILDREN
    run = os.path.join(d, "run")
    os.mkdir(run)
    p = hrtest.record([prog, str(n), "50"], os.path.join(run, "run.trc"))
    assert p.stderr == "", p.stderr
    index = {int(w[1]): int(w[2]) for w in (line.split() for line in p.stdout.splitlines())}
    assert len(index) == n
    files = os.listdir(run)
    assert len(files) == n + 1 and "run.trc" in files, sorted(files)[:5]
    db = os.path.join(d, "storm.db")
    trace_import(["-q", run, db])
    c = connect(db)
    check_invariants(c)
    assert (meta(c, "unmatched_frees"), meta(c, "missed_frees")) == (0, 0)
    got = {}
    for pid, fn, count, total, live in c.execute(
            """SELECT a.pid, f.function, COUNT(*), SUM(a.size), SUM(a.t_free IS NULL)
               FROM allocations a JOIN stacks s ON s.id = a.stack_id
               JOIN frames f ON f.id = s.frame_id
               WHERE f.function IN ('base_site', 'storm_site') GROUP BY 1, 2"""):
        got.setdefault(pid, {})[fn] = (count, total, live)
    parent = one(c, "SELECT pid FROM processes WHERE inherited = 0")
    assert got.pop(parent) == {"base_site": (3, 2997, 0)}
    want = {pid: {"base_site": (3, 2997, 2),
                  "storm_site": (i % 5 + 1, (i % 5 + 1) * (100 + i), i % 5 + 1)}
            for pid, i in index.items()}
    assert got == want, [(pid, got.get(pid), w) for pid, w in want.items() if got.get(pid) != w][:5]
    assert one(c, "SELECT COUNT(*) FROM processes WHERE inherited = 1 AND ppid = ?", parent) == n
    # what reads the names: the parent's trace alone gets the note naming
    # run.trc.1; trace-record counts the run's traces
    alone = trace_import([os.path.join(run, "run.trc"), os.path.join(d, "alone.db")])
    assert "run.trc.1 is beside " in alone.stderr, alone.stderr
    if os.path.exists(hrtest.TRACE_RECORD):
        again = os.path.join(d, "again")
        os.mkdir(again)
        rec = hrtest.run([hrtest.TRACE_RECORD, "-o", os.path.join(again, "run.trc"), "--",
                          prog, str(n), "50"])
        assert len(os.listdir(again)) == n + 1
        assert "trace-record: %d traces written: " % (n + 1) in rec.stderr, rec.stderr


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


SHARED_PADS = (0, 256)               # MiB reserved before the dlopen, per run
SHARED_SIZES = (5003, 4001, 4002)    # imp_shared's own site, libhrdltest's two


def symbolized_stacks(db, pid):
    """pid's allocations of SHARED_SIZES, in order: (size, every frame of
    its stack from the leaf, as (function, file, line, inline_depth))."""
    c = connect(db)
    out = []
    for size, sid in c.execute("SELECT size, stack_id FROM allocations WHERE pid = ? "
                               "AND size IN (%s) ORDER BY id" % ",".join("?" * len(SHARED_SIZES)),
                               (pid,) + SHARED_SIZES).fetchall():
        chain = []
        while sid is not None:
            sid, fn, file, line, depth = c.execute(
                """SELECT s.parent_id, f.function, f.file, f.line, f.inline_depth
                   FROM stacks s JOIN frames f ON f.id = s.frame_id WHERE s.id = ?""",
                (sid,)).fetchone()
            chain.append((fn, file, line, depth))
        out.append((size, tuple(chain)))
    return out


def case_shared(d):
    """Two processes of one program (tests/importer/imp_shared), its library
    libhrdltest.so loaded at different addresses in each, imported
    together: trace-import opens each module file once per import and
    resolves through that cache at each mapping's bias, so both processes
    get the same function/file/line for every frame, and the same as each
    trace imported alone."""
    prog, lib = program("imp_shared"), hrtest.prog("libhrdltest.so")
    for p in (hrtest.LIBREC, prog, lib, hrtest.TRACE_IMPORT):
        if not os.path.exists(p):
            hrtest.skip("%s not built" % p)
    traces = []
    for pad in SHARED_PADS:
        traces.append(os.path.join(d, "pad%d.trc" % pad))
        hrtest.record([prog, lib, str(pad)], traces[-1])
    db = os.path.join(d, "both.db")
    trace_import(["-q"] + traces + [db])
    c = connect(db)
    check_invariants(c)
    pids = [r[0] for r in c.execute("SELECT pid FROM processes ORDER BY t_start")]
    starts = [one(c, "SELECT start FROM modules WHERE pid = ? AND path LIKE '%/libhrdltest.so'", p)
              for p in pids]
    assert len(pids) == 2 and starts[0] != starts[1], (pids, starts)
    both = [symbolized_stacks(db, p) for p in pids]
    line = site_line("imp_shared.c", "SHARED_SITE")
    want_sizes = [5003] * 3 + [4001] * 2 + [4002] * 4
    assert [size for size, _ in both[0]] == want_sizes, both[0]
    assert both[0] == both[1], [x for x in zip(both[0], both[1]) if x[0] != x[1]][:2]
    leaves = {size: chain[0] for size, chain in both[0]}
    assert leaves[5003][:3] == ("shared_site", os.path.join(HERE, "imp_shared.c"), line), leaves
    assert leaves[4001][0] == "ctor_site" and leaves[4002][0] == "work_site", leaves
    assert all(fr[1] and fr[1].endswith("hrdltest.c") and fr[2] > 0
               for fr in (leaves[4001], leaves[4002])), leaves
    for p, trc in zip(pids, traces):
        alone = os.path.join(d, os.path.basename(trc) + ".db")
        trace_import(["-q", trc, alone])
        assert symbolized_stacks(alone, p) == symbolized_stacks(db, p)


def case_rebuilt(d):
    """A module file replaced since recording (another build id) is not
    used: its frames stay "libhrdltest.so+0x...", and the summary says
    modules changed. The same code at another path (found by the build
    id recorded) resolves them, whatever the order of the traces."""
    prog, lib = program("imp_shared"), hrtest.prog("libhrdltest.so")
    for p in (hrtest.LIBREC, prog, lib, hrtest.TRACE_IMPORT):
        if not os.path.exists(p):
            hrtest.skip("%s not built" % p)
    libs = [os.path.join(d, sub, "libhrdltest.so") for sub in ("a", "b")]
    traces = [os.path.join(d, sub + ".trc") for sub in ("a", "b")]
    os.mkdir(os.path.dirname(libs[0]))
    shutil.copy(lib, libs[0])
    hrtest.record([prog, libs[0], "0"], traces[0])
    os.unlink(libs[0])
    shutil.copy(hrtest.LIBREC, libs[0])       # another library: another build id
    db = os.path.join(d, "a.db")
    err = trace_import([traces[0], db]).stderr
    assert "; some modules changed since recording (build id)\n" in err, err
    pid = one(connect(db), "SELECT pid FROM processes")
    work = [chain[0] for size, chain in symbolized_stacks(db, pid) if size == 4002]
    assert len(work) == 4 and all(f[0].startswith("libhrdltest.so+0x") and f[1] is None
                                  for f in work), work
    os.mkdir(os.path.dirname(libs[1]))
    shutil.copy(lib, libs[1])
    hrtest.record([prog, libs[1], "0"], traces[1])
    both = os.path.join(d, "both.db")
    err = trace_import(traces + [both]).stderr
    assert "changed since recording" not in err, err
    pids = [r[0] for r in connect(both).execute("SELECT pid FROM processes ORDER BY t_start")]
    got = [symbolized_stacks(both, p) for p in pids]
    assert got[0] == got[1], [x for x in zip(got[0], got[1]) if x[0] != x[1]][:2]
    assert [chain[0][0] for size, chain in got[0] if size == 4002] == ["work_site"] * 4, got[0]


def main():
    name = sys.argv[1]
    globals()["case_" + name](hrtest.tmpdir("imprec-" + name))
    print("ok", name)


if __name__ == "__main__":
    main()
