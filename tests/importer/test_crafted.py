#!/usr/bin/env python3
"""Importer tests on traces written by mktrace (the tf writer API): exact
pairing across threads, the equal-time ordering rule, realloc chains,
unmatched and missed frees, the peak, marks, threads, checkpoints, several
traces into one database, .ring recovery, and every kind of bad input.

usage: test_crafted.py CASE   (one of the functions named case_*)"""
import os
import resource
import shutil
import sqlite3
import stat
import struct
import subprocess
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hrtest  # noqa: E402
from imptest import (MKTRACE, check_invariants, connect, meta, mktrace,  # noqa: E402
                     one, trace_import)

HEADER = "header 1000 1 5000000000 1700000000000000000 0 /bin/prog prog --arg x\n"

# Two threads; see case_pairing for what each line must become.
PAIRING = HEADER + """
thread 1000 main
thread 1001 worker
node 1 0 401000
node 2 1 401100
node 3 1 401200
mark 55 half
flush
events 2 1001
a 40 2000 300 3
f 45 1000
f 90 9999
f 91 0
flush
events 1 1000
a 10 1000 100 2
a 20 2000 200 3
f 40 2000
a 50 3000 10 2
r 60 61 3000 3000 20 3
r 70 72 3000 4000 40 3
f 80 4000
a 100 5000 64 2
a 110 5000 32 2
a 120 6000 1000 3
f 121 6000
close 130
"""


# Mappings (FORMAT.md "Mappings"): stack 2 maps, stack 3 maps beside it.
MAPS = HEADER + """
thread 1000 main
node 1 0 401000
node 2 1 401100
node 3 1 401200
events 1 1000
a 5 9000 100 2
m 10 100000 40960 2
m 20 200000 8192 3
u 30 102000 8192 0
u 40 200000 8192 0
M 40 300000 16384 3
u 50 500000 4096 0
M 50 600000 4096 3
u 60 ffffffffffff0000 131072 0
m 70 fffffffffffff000 65536 2
u 80 100000 4096 0
close 90
"""


# An attached recording that ended by a detach at 60: the events stamped
# after its mark (the new half of a realloc begun before it, an allocation,
# a free) are left out, and the recording ends at the mark.
DETACH = HEADER + """
thread 1000 main
node 1 0 401000
node 2 1 401100
mark 5 heapreel.attach
mark 60 heapreel.detach
flush
events 1 1000
a 10 1000 100 2
a 20 2000 200 2
f 30 1000
a 40 5000 64 2
r 55 65 2000 3000 400 2
a 70 4000 50 2
f 80 5000
close 90
"""


def case_detach(d):
    trc = mktrace(os.path.join(d, "d.trc"), DETACH)
    db = os.path.join(d, "d.db")
    p = trace_import([trc, db])
    assert "%s: the recording ends at the detach (0.000000 s): 3 events after it left out" % trc \
        in p.stderr, p.stderr
    c = connect(db)
    rows = c.execute("SELECT t_alloc, t_free, size, addr FROM allocations ORDER BY id").fetchall()
    assert rows == [(10, 30, 100, 0x1000), (20, 55, 200, 0x2000), (40, None, 64, 0x5000)], rows
    assert c.execute("SELECT t_end, t_loss FROM processes").fetchall() == [(60, None)]
    assert meta(c, "unmatched_frees") == 0 and meta(c, "frees_before_attach") == 0
    check_invariants(c)


def case_maps(d):
    """Partial unmaps split a region, an mremap's new range counts only
    after its old range held a mapping (not at 50: a file's), a damaged
    range that wraps past the top of the address space is cut there, and
    none of it is heap: the timeline and the peak hold the malloc alone."""
    trc = mktrace(os.path.join(d, "m.trc"), MAPS)
    db = os.path.join(d, "m.db")
    trace_import(["-q", trc, db])
    c = connect(db)
    rows = c.execute("""SELECT id, t_alloc, t_free, size, addr, from_realloc, kind
                        FROM allocations ORDER BY id""").fetchall()
    want = [
        (1, 5, None, 100, 0x9000, 0, 0),
        (2, 10, 30, 40960, 0x100000, 0, 1),
        (3, 20, 40, 8192, 0x200000, 0, 1),
        (4, 30, 80, 8192, 0x100000, 0, 1),        # the left piece...
        (5, 30, None, 24576, 0x104000, 0, 1),     # ...and the right one
        (6, 40, None, 16384, 0x300000, 1, 1),     # b moved
        (7, 70, None, 4095, -4096, 0, 1),         # cut at the top (addr: signed)
        (8, 80, None, 4096, 0x101000, 0, 1),      # what the last unmap left
    ]
    assert rows == want, "allocations:\n%s" % "\n".join(map(str, rows))
    assert one(c, "SELECT peak_bytes FROM processes") == 100
    assert one(c, "SELECT MAX(max_bytes) FROM timeline") == 100
    check_invariants(c)


def case_pairing(d):
    trc = mktrace(os.path.join(d, "p.trc"), PAIRING)
    db = os.path.join(d, "p.db")
    trace_import(["-q", "--checkpoint-interval", "2", trc, db])
    c = connect(db)
    rows = c.execute("""SELECT id, t_alloc, t_free, size, tid, pid, addr,
                        from_realloc, temporary FROM allocations ORDER BY id""").fetchall()
    want = [
        (1, 10, 45, 100, 1000, 1000, 0x1000, 0, 0),    # freed by the other thread
        (2, 20, 40, 200, 1000, 1000, 0x2000, 0, 1),    # freed before...
        (3, 40, None, 300, 1001, 1000, 0x2000, 0, 0),  # ...this alloc at equal t
        (4, 50, 60, 10, 1000, 1000, 0x3000, 0, 1),     # realloc chain
        (5, 61, 70, 20, 1000, 1000, 0x3000, 1, 1),
        (6, 72, 80, 40, 1000, 1000, 0x4000, 1, 1),
        (7, 100, 110, 64, 1000, 1000, 0x5000, 0, 0),   # its free was missed
        (8, 110, None, 32, 1000, 1000, 0x5000, 0, 0),
        (9, 120, 121, 1000, 1000, 1000, 0x6000, 0, 1),  # temporary
    ]
    assert rows == want, "allocations:\n%s" % "\n".join(map(str, rows))
    frees = c.execute("SELECT f.id, a.t_free, f.alloc_id, f.size, p.pid FROM frees f"
                      " JOIN allocations a ON a.id = f.alloc_id"
                      " JOIN processes p ON p.proc = f.proc ORDER BY f.id").fetchall()
    assert frees == [(1, 40, 2, 200, 1000), (2, 45, 1, 100, 1000), (3, 60, 4, 10, 1000),
                     (4, 70, 5, 20, 1000), (5, 80, 6, 40, 1000), (6, 110, 7, 64, 1000),
                     (7, 121, 9, 1000, 1000)], frees
    assert meta(c, "unmatched_frees") == 2
    assert meta(c, "missed_frees") == 1
    # the missed free is a lost event, from the start of the bucket of its
    # block's allocation (t=100) on
    bucket = meta(c, "timeline_bucket_ns")
    assert c.execute("SELECT t_loss FROM processes").fetchall() == [(100 // bucket * bucket,)]
    assert meta(c, "events") == 15
    assert meta(c, "allocations") == 9
    assert meta(c, "damaged") == 0
    assert meta(c, "format") == "heapreel"
    assert meta(c, "t0_mono_ns") == 5000000000
    # peak: 1332 bytes in 3 objects at t=120
    assert (meta(c, "peak_t"), meta(c, "peak_bytes"), meta(c, "peak_objects")) == (120, 1332, 3)
    assert c.execute("SELECT peak_t, peak_bytes, peak_objects, ppid, exe, cmdline, t_start, t_end"
                     " FROM processes").fetchall() == \
        [(120, 1332, 3, 1, "/bin/prog", "prog --arg x", 0, 130)]
    assert c.execute("SELECT pid, tid, name, t_first, t_last FROM threads ORDER BY tid").fetchall() == \
        [(1000, 1000, "main", 10, 121), (1000, 1001, "worker", 40, 91)]
    assert c.execute("SELECT pid, t, label FROM marks").fetchall() == [(1000, 55, "half")]
    # no modules: functions are named by address, never dropped
    by_fn = c.execute("""SELECT f.function, COUNT(*), SUM(a.size) FROM allocations a
                         JOIN stacks s ON s.id = a.stack_id JOIN frames f ON f.id = s.frame_id
                         GROUP BY f.function ORDER BY 1""").fetchall()
    assert by_fn == [("0x401100", 4, 206), ("0x401200", 5, 1560)], by_fn
    # the trie: node 2's parent is node 1 (ip 0x401000, a root)
    assert one(c, """SELECT f.function FROM stacks s JOIN stacks p ON p.id = s.parent_id
                     JOIN frames f ON f.id = p.frame_id JOIN frames g ON g.id = s.frame_id
                     WHERE g.function = '0x401100'""") == "0x401000"
    assert one(c, """SELECT COUNT(*) FROM stacks s JOIN frames f ON f.id = s.frame_id
                     WHERE f.function = '0x401000' AND s.parent_id IS NULL""") == 1
    n = check_invariants(c)
    assert n >= 2, "expected a checkpoint before the end, got %d" % n
    # the last checkpoint holds the end state
    assert c.execute("""SELECT SUM(live_bytes), SUM(live_objects), SUM(alloc_objects)
                        FROM checkpoints WHERE checkpoint_id = (SELECT MAX(id)
                        FROM checkpoint_index)""").fetchone() == (332, 2, 9)


EXAMPLE = HEADER + """
node 1 0 500000
node 2 1 500100
node 3 1 500200
events 1 1000
a 1000000000 a000 100 2
a 2000000000 b000 200 3
f 2200000000 a000
a 2400000000 c000 50 2
a 3000000000 d000 1000 3
close 3000000001
"""

def readme_query():
    """The README's example query ("Live bytes by function ... at 2.5 s"),
    so that the documented text itself is what is tested."""
    with open(os.path.join(hrtest.SRC, "README.md")) as f:
        text = f.read()
    at = text.index("Live bytes by function")
    start = text.index("```sql\n", at) + len("```sql\n")
    return text[start:text.index("```", start)]


def case_example_query(d):
    """The README's "live bytes by function at 2.5 s", through sqlite3 too."""
    trc = mktrace(os.path.join(d, "e.trc"), EXAMPLE)
    db = os.path.join(d, "e.db")
    trace_import(["-q", trc, db])
    c = connect(db)
    query = readme_query()
    assert c.execute(query).fetchall() == [("0x500200", 200, 1), ("0x500100", 50, 1)]
    check_invariants(c)
    if shutil.which("sqlite3"):
        out = hrtest.run(["sqlite3", db, query]).stdout
        assert out.split() == ["0x500200|200|1", "0x500100|50|1"], out


CHILD = """header 2001 2000 1000000500 1700000000000000500 0 /bin/child child
node 1 0 402000
events 1 2001
a 100 7000 5000 1
a 200 8000 1 1
f 300 7000
close 400
"""

PARENT = """header 2000 1 1000000000 1700000000000000000 0 /bin/parent parent
node 1 0 401000
events 1 2000
a 50 7000 10 1
a 700 9000 20 1
close 800
"""


def case_multi(d):
    """Parent and forked child into one database on one time axis."""
    os.mkdir(os.path.join(d, "run"))
    a = mktrace(os.path.join(d, "run", "run.trc"), PARENT)
    b = mktrace(os.path.join(d, "run", "run.2001.trc"), CHILD)
    for args in ([b, a], [os.path.join(d, "run")]):
        db = os.path.join(d, "m.db")
        trace_import(["-q", "--force"] + args + [db])
        c = connect(db)
        assert meta(c, "t0_mono_ns") == 1000000000
        assert meta(c, "peak_pid") == 2000
        assert c.execute("SELECT pid, ppid, t_start, t_end, peak_t, peak_bytes FROM processes"
                         " ORDER BY pid").fetchall() == \
            [(2000, 1, 0, 800, 700, 30), (2001, 2000, 500, 900, 700, 5001)]
        # same address in both processes: paired per process
        assert c.execute("SELECT pid, t_alloc, t_free, size FROM allocations ORDER BY id").fetchall() == \
            [(2000, 50, None, 10), (2001, 600, 800, 5000), (2001, 700, None, 1),
             (2000, 700, None, 20)]
        assert one(c, "SELECT COUNT(DISTINCT pid) FROM modules") == 0
        check_invariants(c)
        c.close()


# A shim (pid 3000) forks a helper (3001) and execs the real program, which
# has the same pid and parent: three traces, three processes.
SHIM = """header 3000 1 1000000000 1700000000000000000 0 /bin/shim shim
node 1 0 403000
events 1 3000
a 10 7000 100 1
close 20
"""

SHIM_CHILD = """header 3001 3000 1000000015 1700000000000000015 0 /bin/helper helper
node 1 0 404000
events 1 3001
a 5 7000 90000 1
close 50
"""

SHIM_REAL = """header 3000 1 1000000030 1700000000000000030 0 /bin/real real
node 1 0 405000
events 1 3000
a 10 7000 5000 1
a 20 8000 3000 1
f 30 7000
close 40
"""


def case_exec_chain(d):
    """The run's program is what the first process exec'd last (not the
    shim it started as, nor a forked child with a larger peak): meta.peak_*,
    the import summary and trace-snap's default process all name it. The
    shim's trace imported alone: the summary names the trace beside it."""
    run = os.path.join(d, "run")
    os.mkdir(run)
    for name, script in (("r.trc", SHIM), ("r.3001.trc", SHIM_CHILD), ("r.trc.1", SHIM_REAL)):
        mktrace(os.path.join(run, name), script)
    db = os.path.join(d, "x.db")
    err = trace_import([run, db]).stderr
    real = 3000 + 10000000
    assert "the run's program (what trace-snap and trace-tui show without --pid) " \
        "is pid %d, /bin/real; trace-snap %s --processes lists all 3\n" % (real, db) in err, err
    assert "peak 7.8 KiB (8000 bytes, 2 objects) at " in err, err
    c = connect(db)
    assert c.execute("SELECT pid, ppid, exe FROM processes ORDER BY t_start").fetchall() == \
        [(3000, 1, "/bin/shim"), (3001, 3000, "/bin/helper"), (real, 1, "/bin/real")]
    assert [meta(c, k) for k in ("peak_pid", "peak_t", "peak_bytes", "peak_objects")] == \
        [real, 50, 8000, 2]
    check_invariants(c)
    c.close()
    for args, total in (([], 8000), (["--pid", "3000"], 100), (["--pid", "3001"], 90000)):
        out = hrtest.run([hrtest.TRACE_SNAP, db, "--peak"] + args).stdout
        assert hrtest.snap_total(out) == total and out.startswith("Total: %d B (" % total), \
            (args, out)
    # the shim's trace alone: its exec'd program's trace beside it is named
    shim = os.path.join(run, "r.trc")
    err = trace_import(["--force", shim, db]).stderr
    assert err.endswith("trace-import: %s.1 is beside %s: likely the trace of a program it "
                        "exec'd or a process it forked (trace-import %s* DB imports them "
                        "together)\n" % (shim, shim, shim)), err
    assert "is beside" not in trace_import(["--force", run, db]).stderr


SEGMENTS = HEADER + """
node 1 0 401000
flush
events 1 1000
""" + "".join("a %d %x 10 1\n" % (10 + i, 0x1000 + 16 * i) for i in range(10)) + """flush
events 1 1000
""" + "".join("a %d %x 20 1\n" % (100 + i, 0x2000 + 16 * i) for i in range(10)) + """flush
events 1 1000
""" + "".join("a %d %x 30 1\n" % (200 + i, 0x3000 + 16 * i) for i in range(10)) + """flush
abandon
"""


def case_truncated(d):
    trc = mktrace(os.path.join(d, "t.trc"), SEGMENTS)
    size = os.path.getsize(trc)
    os.truncate(trc, size - 5)
    db = os.path.join(d, "t.db")
    p = trace_import([trc, db], expect=5)
    assert trc + ": byte " in p.stderr, p.stderr
    c = connect(db)
    assert meta(c, "damaged") == 1
    # the first two segments' 20 allocations, nothing of the torn third
    assert c.execute("SELECT COUNT(*), SUM(size) FROM allocations").fetchone() == (20, 300)
    check_invariants(c)


def segments_script(n):
    """SEGMENTS with only its first n event segments."""
    parts = SEGMENTS.split("flush\n")
    return "flush\n".join(parts[:n + 1]) + "flush\nabandon\n"


def case_bitflip(d):
    trc = mktrace(os.path.join(d, "b.trc"), SEGMENTS)
    # The writer is deterministic: a trace with fewer segments is a prefix,
    # so its size is where the next segment starts.
    s1 = os.path.getsize(mktrace(os.path.join(d, "s1.trc"), segments_script(1)))
    s2 = os.path.getsize(mktrace(os.path.join(d, "s2.trc"), segments_script(2)))
    with open(trc, "rb") as f:
        assert f.read(s2) == open(os.path.join(d, "s2.trc"), "rb").read()
    full = os.path.join(d, "full.db")
    trace_import(["-q", trc, full])
    assert one(connect(full), "SELECT COUNT(*) FROM allocations") == 30
    # one bit inside the second event segment's compressed payload
    with open(trc, "r+b") as f:
        f.seek(s2 - 10)
        b = f.read(1)
        f.seek(s2 - 10)
        f.write(bytes([b[0] ^ 0x10]))
    assert s1 < s2 - 10
    db = os.path.join(d, "b.db")
    p = trace_import([trc, db], expect=5)
    assert trc + ": byte " in p.stderr, p.stderr
    c = connect(db)
    assert meta(c, "damaged") == 1
    # the first segment; the damaged one and the rest of its thread are lost
    assert c.execute("SELECT COUNT(*), SUM(size) FROM allocations").fetchone() == (10, 100)
    check_invariants(c)


def set_version(trc, v):
    """Rewrites the trace's version (the u32 after the 8-byte magic) and the
    header's crc (the u32 before header_size, a zlib crc32); the old one."""
    with open(trc, "r+b") as f:
        data = bytearray(f.read())
        old = int.from_bytes(data[8:12], "little")
        data[8:12] = v.to_bytes(4, "little")
        end = int.from_bytes(data[12:16], "little") - 4
        data[end:end + 4] = zlib.crc32(bytes(data[:end])).to_bytes(4, "little")
        f.seek(0)
        f.write(data)
    return old


def case_version(d):
    # versions 1 (no mappings) and 2 (no STACKS records) are read as before
    for v in (1, 2):
        old = mktrace(os.path.join(d, "v%d.trc" % v), PAIRING)
        assert set_version(old, v) == 3
        trace_import([old, os.path.join(d, "v%d.db" % v)])
        assert connect(os.path.join(d, "v%d.db" % v)).execute(
            "SELECT COUNT(*) FROM allocations").fetchone()[0] > 0
    trc = mktrace(os.path.join(d, "v.trc"), PAIRING)
    assert set_version(trc, 99) == 3
    db = os.path.join(d, "v.db")
    p = trace_import([trc, db], expect=1)
    assert p.stderr.startswith("trace-import: " + trc + ": byte "), p.stderr
    assert "version" in p.stderr, p.stderr
    assert not os.path.exists(db)
    assert not [f for f in os.listdir(d) if ".tmp-" in f]


def case_empty_missing(d):
    empty = os.path.join(d, "empty.trc")
    open(empty, "w").close()
    db = os.path.join(d, "x.db")
    p = trace_import([empty, db], expect=1)
    assert p.stderr == "trace-import: %s: byte 0: empty file, not a trace\n" % empty, p.stderr
    p = trace_import([os.path.join(d, "nope.trc"), db], expect=1)
    assert p.stderr == "trace-import: %s: No such file or directory\n" % os.path.join(d, "nope.trc")
    notrace = os.path.join(d, "text.trc")
    with open(notrace, "w") as f:
        f.write("hello, this is not a trace at all\n" * 10)
    p = trace_import([notrace, db], expect=1)
    assert p.stderr.startswith("trace-import: %s: byte " % notrace), p.stderr
    # the good one is not written either when another input is bad
    good = mktrace(os.path.join(d, "good.trc"), PAIRING)
    trace_import([good, empty, db], expect=1)
    assert not os.path.exists(db)
    assert not [f for f in os.listdir(d) if ".tmp-" in f]


def case_output(d):
    trc = mktrace(os.path.join(d, "o.trc"), PAIRING)
    db = os.path.join(d, "o.db")
    with open(db, "w") as f:
        f.write("precious")
    # an existing output: exit 3; --force replaces only a heapreel database
    p = trace_import([trc, db], expect=3)
    assert p.stderr == "trace-import: %s: exists (--force replaces a heapreel database)\n" % (
        db,), p.stderr
    p = trace_import(["--force", trc, db], expect=3)
    assert p.stderr == ("trace-import: %s: exists and is not a heapreel database; not "
                        "replacing it, even with --force\n" % db), p.stderr
    assert open(db).read() == "precious"
    other = os.path.join(d, "other.db")
    c = sqlite3.connect(other)
    c.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value)")
    c.execute("INSERT INTO meta VALUES ('format', 'not heapreel')")
    c.commit()
    c.close()
    before = open(other, "rb").read()
    p = trace_import(["--force", trc, other], expect=3)
    assert "is not a heapreel database" in p.stderr and open(other, "rb").read() == before
    # the database argument forgotten: the last trace is not made a database
    trc2 = mktrace(os.path.join(d, "o2.trc"), PAIRING)
    before = open(trc2, "rb").read()
    p = trace_import(["--force", trc, trc2], expect=3)
    assert p.stderr == ("trace-import: %s: exists and is not a heapreel database; not "
                        "replacing it, even with --force\n" % trc2), p.stderr
    assert open(trc2, "rb").read() == before
    # an input as the output (also under another name): refused first
    link = os.path.join(d, "o2.db")
    os.link(trc2, link)
    for args in ([trc2, trc2], [trc2, link], [trc, trc2, link]):
        p = trace_import(["--force"] + args, expect=3)
        assert p.stderr == ("trace-import: %s: is one of the inputs; not replacing it (the "
                            "database comes last: trace-import TRACE... OUT.db)\n" % args[-1]), (
            args, p.stderr)
        assert open(trc2, "rb").read() == before
    assert not [f for f in os.listdir(d) if ".tmp-" in f]
    os.unlink(db)
    trace_import(["-q", trc, db])
    trace_import(["-q", "--force", trc2, db])
    p = trace_import(["--force", db, db], expect=3)
    assert "is one of the inputs" in p.stderr
    assert meta(connect(db), "allocations") == 9
    assert stat.S_IMODE(os.stat(db).st_mode) & 0o077 == 0
    assert meta(connect(db), "allocations") == 9
    # unwritable output directory (root writes anywhere: then a missing one)
    ro = os.path.join(d, "ro")
    os.mkdir(ro)
    os.chmod(ro, 0o500)
    target = os.path.join(ro, "x.db") if os.geteuid() != 0 else os.path.join(d, "no", "x.db")
    p = trace_import([trc, target], expect=3)
    assert p.stderr.startswith("trace-import: %s: cannot create" % target), p.stderr
    assert not os.path.exists(target)
    os.chmod(ro, 0o700)
    assert "usage:" in trace_import(["--help"]).stdout


def case_usage(d):
    """A usage error is one line saying what is wrong and where to read
    more (not the whole usage text), exit 2, nothing written."""
    trc = mktrace(os.path.join(d, "t.trc"), PAIRING)
    db = os.path.join(d, "t.db")
    for args, what in (([trc], "give the traces (or their directory), then the database"),
                       ([], "no trace and no database given"),
                       (["--bogus", trc, db], "unknown option '--bogus'"),
                       (["-x", trc, db], "unknown option '-x'"),
                       (["-qx", trc, db], "unknown option '-x'"),
                       ([trc, db, "-c"], "option -c needs a value"),
                       ([trc, db, "--checkpoint-interval"],
                        "option --checkpoint-interval needs a value")):
        p = trace_import(args, expect=2)
        assert p.stderr == "trace-import: %s (see trace-import --help)\n" % what, (args, p.stderr)
        assert not os.path.exists(db)


RECOVER = HEADER + """
thread 1000 main
node 1 0 401000
events 1 1000
a 10 1000 100 1
a 20 2000 200 1
a 30 3000 300 1
f 40 1000
a 50 4000 400 1
abandon
ring 64 4 16
rnode 1 0 401000
rnode 2 1 401100
rring 0 1000 1 3 3 main
rev 0 f 40 1000 0 0
rev 0 a 50 4000 400 1
rev 0 f 60 2000 0 0
rev 0 ro 70 3000 0 0
rev 0 rn 71 5000 600 2
rring 1 1002 2 0 0 late
rev 1 a 65 6000 7 2
"""


def case_ring(d):
    """A killed process: the trace lacks END and the last events, which
    the leftover .ring still has (seq 3 and 4 are in both: taken once).
    A .ring named with its trace is read with it, not as a trace."""
    trc = mktrace(os.path.join(d, "k.trc"), RECOVER)
    db = os.path.join(d, "k.db")
    # the .ring listed too (a glob such as k.trc*) is read with its trace
    trace_import(["-q", trc + ".ring", trc, db])
    c = connect(db)
    assert c.execute("SELECT t_alloc, t_free, size, tid, from_realloc FROM allocations"
                     " ORDER BY id").fetchall() == [
        (10, 40, 100, 1000, 0), (20, 60, 200, 1000, 0), (30, 70, 300, 1000, 0),
        (50, None, 400, 1000, 0), (65, None, 7, 1002, 0), (71, None, 600, 1000, 1)]
    # records, as meta.events counts them: a realloc is one
    assert one(c, "SELECT recovered FROM processes") == 3
    assert meta(c, "recovered_events") == 3
    assert meta(c, "damaged") == 0
    # node 2 came from the ring only
    assert one(c, """SELECT f.function FROM allocations a JOIN stacks s ON s.id = a.stack_id
                     JOIN frames f ON f.id = s.frame_id WHERE a.size = 600""") == "0x401100"
    assert c.execute("SELECT tid, name FROM threads ORDER BY tid").fetchall() == \
        [(1000, "main"), (1002, "late")]
    check_invariants(c)
    # a ring of another process is ignored
    os.rename(trc + ".ring", os.path.join(d, "saved.ring"))
    other = mktrace(os.path.join(d, "o.trc"), RECOVER.replace("header 1000", "header 1001"))
    os.unlink(other + ".ring")
    os.rename(os.path.join(d, "saved.ring"), other + ".ring")
    trace_import(["-q", "--force", other, db])
    assert one(connect(db), "SELECT COUNT(*) FROM allocations") == 4
    # a .ring without its trace is no trace
    p = trace_import(["--force", other + ".ring", db], expect=1)
    assert p.stderr == "trace-import: %s.ring: byte 0: not a heapreel trace (bad magic)\n" \
        % other, p.stderr


PADS = "".join("pad 20 %d %x 1\nflush\n" % (31 + 40 * i, 0x100000 + 0x10000 * i)
               for i in range(8))    # filler of stream 2, seq 0 to 319, times 31-350

# A bounded trace (FORMAT.md "Bounded traces") whose ring of 1600 bytes
# wrapped: block 0x1000 and the first filler are overwritten, keyframe 1
# survives whole. Its cuts drop what survived from before it (the filler,
# the allocation at 400); its events bring back 0x1000 (allocated at 10)
# and 0x3000 (at 400) and the free of 0x2000 (at 30, kept as a free).
# The filler's segment sizes decide where the ring wraps: if the codec
# changes, the bound may need a new value (trace-dump --summary says
# "wrapped 1" and "keyframes 1" when it is right).
BOUNDED = HEADER + """
bound 1600
thread 1000 main
thread 1001 worker
node 1 0 401000
node 2 1 401100
node 3 1 401200
events 1 1000
a 10 1000 100 2
a 20 2000 200 3
f 30 2000
flush
events 2 1001
""" + PADS + """events 1 1000
a 400 3000 300 3
flush
key 1 begin
node 1 0 401000
node 2 1 401100
node 3 1 401200
thread 1000 main
kev 1 a 10 1 1000 1000 100 2
kev 1 a 400 1 1000 3000 300 3
kev 1 f 30 1 1000 2000 0 0
kcut 1 1 1000 4
kcut 1 2 1001 320
key 1 end 400
flush
events 2 1001
f 500 3000
events 1 1000
a 600 4000 40 2
f 700 1000
flush
events 2 1001
pad 20 1000 200000 1
flush
events 1 1000
a 2000 5000 50 3
close 2100
"""


# An allocation waits for its free in a window of the importer's latest
# allocations (importer/sink.c, 2^18) and is inserted when it falls out;
# a free after that rewrites the row. PAD_CHUNKS x PAD_N pairs push the
# first three far out of the window before their fates are known.
PAD_N, PAD_CHUNKS = 30000, 10
WINDOW = HEADER + """
thread 1000 main
thread 1001 worker
node 1 0 401000
events 2 1001
a 5 7000 70 1
flush
events 1 1000
a 10 1000 100 1
a 11 2000 200 1
""" + "".join("pad %d %d %x 1\nflush\n" % (PAD_N, 100 + 2 * PAD_N * k, 0x10000000 + 0x100000 * k)
              for k in range(PAD_CHUNKS)) + """
f 700000 1000
flush
events 2 1001
f 700001 7000
close 800000
"""


# A parent (pid 4000) and its child forked at 400 (the parent's axis):
# blocks 7000 and 7200 are live at the fork (7100 was freed before it,
# 7300 comes after it); the parent frees 7000 after the fork, the child
# frees both.
FORK_PARENT = """header 4000 1 1000000000 1700000000000000000 0 /bin/parent parent
node 1 0 401000
events 1 4000
a 50 7000 10 1
a 60 7100 20 1
a 70 7200 30 1
f 300 7100
a 450 7300 40 1
f 460 7000
close 800
"""

FORK_CHILD = """header 4001 4000 1000000500 1700000000000000500 0 /bin/parent parent
fork 4000 1000000000 400
node 1 0 402000
events 1 4001
a 100 8000 5000 1
f 200 7200
f 250 7000
close 400
"""

# The bounded parent of case_bounded (window from 400): a child forked
# at 650 (live then: 1000 of 100 B and 4000 of 40 B) and one forked at
# 300, before the window (its parent's live set then is not known).
FORK_LATE = """header 1001 1000 5000000700 1700000000000000700 0 /bin/prog prog
fork 1000 5000000000 650
node 1 0 402000
events 1 1001
f 10 4000
a 20 9000 7 1
close 100
"""
FORK_EARLY = """header 1002 1000 5000000310 1700000000000000310 0 /bin/prog prog
fork 1000 5000000000 300
events 1 1002
f 10 1000
close 100
"""


def case_fork(d):
    """A forked child's live set starts with its parent's at the fork
    (FORK record): exact rows, pairing, fork_t and inherited; the child
    alone (inherited 2: its frees of inherited blocks counted apart); a
    bounded parent whose window starts before or after the fork."""
    run = os.path.join(d, "run")
    os.mkdir(run)
    a = mktrace(os.path.join(run, "run.trc"), FORK_PARENT)
    b = mktrace(os.path.join(run, "run.trc.1"), FORK_CHILD)
    db = os.path.join(d, "f.db")
    p = trace_import([run, db])
    assert "forked children start with the 2 blocks they inherited" in p.stderr, p.stderr
    c = connect(db)
    check_invariants(c)
    parent_stack = one(c, "SELECT stack_id FROM allocations WHERE id = 1")
    assert c.execute("SELECT id, pid, t_alloc, t_free, size, addr, tid, stack_id = ? "
                     "FROM allocations ORDER BY id", (parent_stack,)).fetchall() == [
        (1, 4000, 50, 460, 10, 0x7000, 4000, 1), (2, 4000, 60, 300, 20, 0x7100, 4000, 1),
        (3, 4000, 70, None, 30, 0x7200, 4000, 1),
        (4, 4001, 400, 750, 10, 0x7000, 4001, 1), (5, 4001, 400, 700, 30, 0x7200, 4001, 1),
        (6, 4000, 450, None, 40, 0x7300, 4000, 1), (7, 4001, 600, None, 5000, 0x8000, 4001, 0)]
    assert c.execute("SELECT pid, t_start, fork_t, inherited, peak_t, peak_bytes FROM processes"
                     " ORDER BY pid").fetchall() == [
        (4000, 0, None, 0, 450, 80), (4001, 400, 400, 1, 600, 5040)]
    assert [meta(c, k) for k in ("unmatched_frees", "inherited_blocks", "inherited_frees",
                                 "allocations")] == [0, 2, 0, 7]
    # the parent's free of 0x7100 missing (allocated again at 500, after
    # the fork): the loss reaches back to its allocation (60) in the
    # parent, and to the fork in the child, which inherited the block
    missed = FORK_PARENT.replace("f 300 7100\n", "").replace("close 800", "a 500 7100 25 1\nclose 800")
    run2 = os.path.join(d, "run2")
    os.mkdir(run2)
    mktrace(os.path.join(run2, "run.trc"), missed)
    mktrace(os.path.join(run2, "run.trc.1"), FORK_CHILD)
    db = os.path.join(d, "missed.db")
    trace_import([run2, db])
    c = connect(db)
    assert meta(c, "missed_frees") == 1 and meta(c, "timeline_bucket_ns") == 1
    assert c.execute("SELECT pid, t_loss FROM processes ORDER BY pid").fetchall() == \
        [(4000, 60), (4001, 400)]
    # the child alone: the fork 100 ns before its start, its frees apart
    db = os.path.join(d, "alone.db")
    p = trace_import([b, db])
    assert "2 frees of blocks forked children inherited from a parent whose trace is " \
           "not imported" in p.stderr, p.stderr
    c = connect(db)
    check_invariants(c)
    assert c.execute("SELECT t_start, fork_t, inherited FROM processes").fetchone() == (0, -100, 2)
    assert [meta(c, k) for k in ("unmatched_frees", "inherited_blocks", "inherited_frees")] == \
        [0, 0, 2]
    # a bounded parent: seeded after its window's start, not before
    bounded = mktrace(os.path.join(d, "b.trc"), BOUNDED)
    late = mktrace(os.path.join(d, "b.trc.1"), FORK_LATE)
    early = mktrace(os.path.join(d, "b.trc.2"), FORK_EARLY)
    db = os.path.join(d, "b.db")
    trace_import([bounded, late, early, db])
    c = connect(db)
    assert c.execute("SELECT pid, fork_t, inherited FROM processes ORDER BY pid").fetchall() == \
        [(1000, None, 0), (1001, 650, 1), (1002, 300, 2)]
    assert c.execute("SELECT t_alloc, t_free, size, addr FROM allocations WHERE pid = 1001"
                     " ORDER BY id").fetchall() == [
        (650, None, 100, 0x1000), (650, 710, 40, 0x4000), (720, None, 7, 0x9000)]
    assert [meta(c, k) for k in ("unmatched_frees", "missed_frees", "inherited_blocks",
                                 "inherited_frees")] == [0, 0, 2, 1]


def case_window(d):
    trc = mktrace(os.path.join(d, "w.trc"), WINDOW)
    db = os.path.join(d, "w.db")
    trace_import(["-q", trc, db])
    c = connect(db)
    pads = PAD_N * PAD_CHUNKS
    assert c.execute("""SELECT id, t_alloc, t_free, size, tid, temporary FROM allocations
                        WHERE id <= 4 ORDER BY id""").fetchall() == [
        (1, 5, 700001, 70, 1001, 1),      # the worker's: freed with nothing between
        (2, 10, 700000, 100, 1000, 0),    # main allocated since
        (3, 11, None, 200, 1000, 0),      # never freed
        (4, 100, 101, 16, 1000, 1)]
    assert c.execute("""SELECT COUNT(*), SUM(t_free = t_alloc + 1), SUM(temporary)
                        FROM allocations WHERE id > 3""").fetchone() == (pads, pads, pads)
    assert meta(c, "allocations") == pads + 3
    assert c.execute("SELECT id, alloc_id FROM frees WHERE alloc_id <= 3").fetchall() == \
        [(pads + 1, 2), (pads + 2, 1)]
    # one to one (check_invariants' per-checkpoint replay is quadratic here)
    assert one(c, """SELECT COUNT(*) FROM frees f JOIN allocations a ON a.id = f.alloc_id
                     WHERE a.size = f.size AND a.t_free IS NOT NULL""") == pads + 2
    assert one(c, "SELECT COUNT(*) FROM allocations WHERE t_free IS NOT NULL") == pads + 2
    assert c.execute("""SELECT SUM(live_bytes), SUM(live_objects) FROM checkpoints
                        WHERE checkpoint_id = (SELECT MAX(id) FROM checkpoint_index)""").fetchone() \
        == (200, 1)


def case_bounded(d):
    trc = mktrace(os.path.join(d, "b.trc"), BOUNDED)
    s = hrtest.summary(trc)
    assert (s["wrapped"], s["keyframes"]) == (1, 1) and s["file_bytes"] <= 1600, s
    db = os.path.join(d, "b.db")
    p = trace_import([trc, db])
    assert "exact from 0.000000 s to the end (keyframe 1)" in p.stderr, p.stderr
    c = connect(db)
    # before the window (400) everything happens at its start
    assert c.execute("SELECT t_alloc, t_free, size, tid FROM allocations WHERE size <> 16"
                     " ORDER BY t_alloc, size").fetchall() == [
        (400, 700, 100, 1000), (400, 500, 300, 1000), (600, None, 40, 1000),
        (2000, None, 50, 1000)]
    assert c.execute("SELECT COUNT(*), MIN(t_alloc) FROM allocations WHERE size = 16"
                     " AND t_free = t_alloc + 1").fetchone() == (20, 1000)
    assert (meta(c, "window_start_ns"), meta(c, "peak_bytes"), meta(c, "peak_t")) == (400, 400, 400)
    assert one(c, "SELECT t_start FROM processes") == 400
    assert (meta(c, "unmatched_frees"), meta(c, "missed_frees")) == (0, 0)
    check_invariants(c)
    # the keyframe's free at the very instant of its END: still before the window
    at_end = mktrace(os.path.join(d, "e.trc"),
                     BOUNDED.replace("kev 1 f 30 1 1000 2000", "kev 1 f 400 1 1000 2000"))
    trace_import(["-q", at_end, os.path.join(d, "e.db")])
    assert meta(connect(os.path.join(d, "e.db")), "unmatched_frees") == 0
    # damage in the newest lap, with newer segments after it: reported, not
    # taken for the end of the lap
    with open(trc, "rb") as f:
        data = bytearray(f.read())
    offs = [struct.unpack_from("<I", data, 12)[0]]   # segment offsets
    while offs[-1] + 56 <= len(data) and struct.unpack_from("<I", data, offs[-1])[0] == 0x47535248:
        offs.append(offs[-1] + 56 + struct.unpack_from("<I", data, offs[-1] + 44)[0])
    bad_at = offs[-3]                         # the newest lap's next to last
    data[bad_at + 52] ^= 0xff                 # its header's crc
    bad = os.path.join(d, "bad.trc")
    with open(bad, "wb") as f:
        f.write(data)
    p = trace_import(["-q", bad, os.path.join(d, "bad.db")], expect=None)
    assert p.returncode == 5 and "byte %d:" % bad_at in p.stderr, (p.returncode, p.stderr)
    # a ring so small that no keyframe survives whole: refused, nothing written
    small = mktrace(os.path.join(d, "s.trc"), BOUNDED.replace("bound 1600", "bound 1024"))
    p = trace_import([small, os.path.join(d, "s.db")], expect=1)
    assert "no whole keyframe survived" in p.stderr and p.stderr.count("\n") == 1, p.stderr
    assert not os.path.exists(os.path.join(d, "s.db"))


def pid_trace(pid, t0):
    return "header %d 1 %d 1700000000000000000 0 /bin/p p\nclose 10\n" % (pid, t0)


def case_keys(d):
    """Process keys (importer/keys.c): later traces of a pid get pid + n *
    10^7 in start order, whatever the order listed; a key that clashes with
    a real pid, or one beyond 32 bits, is refused naming the trace."""
    mk = lambda name, pid, t0: mktrace(os.path.join(d, name), pid_trace(pid, t0))
    late, first, mid = mk("late.trc", 7, 3000000000), mk("first.trc", 7, 1000000000), \
        mk("mid.trc", 7, 2000000000)
    db = os.path.join(d, "k.db")
    trace_import(["-q", late, first, mid, db])
    c = connect(db)
    assert c.execute("SELECT pid, trace_path FROM processes ORDER BY pid").fetchall() == \
        [(7, first), (10000007, mid), (20000007, late)]
    c.close()
    other = mk("other.trc", 10000007, 1500000000)
    p = trace_import([first, mid, other, os.path.join(d, "x.db")], expect=1)
    assert p.stderr == "trace-import: %s: its process key 10000007 clashes with %s's\n" % (
        other, mid), p.stderr
    big = [mk("big%d.trc" % i, 4294967295, 1000000000 * (2 - i)) for i in range(2)]
    p = trace_import(big + [os.path.join(d, "y.db")], expect=1)
    assert p.stderr == "trace-import: %s: too many traces of pid 4294967295\n" % big[0], p.stderr


MANY_TRACES = 200                       # traces of one import ...
NOFILE_SOFT = 64                        # ... above this soft limit of descriptors
NOFILE_HARD = 1024


def case_nofile(d):
    """A run of more traces than the soft limit of open files (1024 on most
    systems; issue 22's run had 3042): trace-import keeps every trace open,
    so it raises its soft limit to the hard one and imports them all."""
    run = os.path.join(d, "run")
    os.mkdir(run)
    for i in range(MANY_TRACES):
        mktrace(os.path.join(run, "p%d.trc" % i), pid_trace(1000 + i, 1000000000 + i))
    db = os.path.join(d, "n.db")

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE_SOFT, NOFILE_HARD))
    p = subprocess.run([hrtest.TRACE_IMPORT, "-q", run, db], capture_output=True, text=True,
                       preexec_fn=limit)
    assert p.returncode == 0 and p.stderr == "", (p.returncode, p.stderr)
    c = connect(db)
    assert one(c, "SELECT COUNT(*) FROM processes") == MANY_TRACES
    c.close()


def main():
    name = sys.argv[1]
    if not os.path.exists(MKTRACE):
        hrtest.skip("mktrace not built")
    globals()["case_" + name](hrtest.tmpdir("imp-" + name))
    print("ok", name)


if __name__ == "__main__":
    main()
