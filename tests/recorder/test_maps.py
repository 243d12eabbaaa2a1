"""test_maps CASE - the program's anonymous mappings (recorder/mmap.c),
imported as allocations of kind mmap and shown by trace-snap --kind. The
program is tests/programs/maps, which maps, partially unmaps, remaps (in
place and moved) and maps MAP_FIXED over known page counts from known
functions, maps a file, mallocs 64 MiB, and marks maps-0 ... maps-3.

CASE:
  snap      --kind mmap per function at each mark, byte-exact; --kind heap
            holds heap_big's 64 MiB once, at maps-0 to maps-2, and no
            mapping; the file mapping is nowhere; the text output's Kinds
            line splits the total; --stats shows the live mappings; the
            trace holds the 64 MiB block once,
            as a malloc (glibc's own mapping of it is not recorded); --tid
            of the only thread gives the same peak (the heap's) and snapshot
  usage     --kind with another word, or with --stats, is a usage error (2)
  jemalloc  the same per-function answers with libjemalloc.so.2 or
  tcmalloc  libtcmalloc_minimal.so.4 serving malloc: the extents they map
            from inside malloc are not the program's (skip if not installed)
  sampled   under REC_SAMPLE no mapping is recorded (unbiasing would
            inflate them), the 64 MiB malloc still is
  bounded   under REC_MAX_SIZE no mapping is recorded either (keyframes
            hold blocks, not regions that munmap trims): the trace wraps,
            its keyframes keep the mark that says so, and the answers
            after the wrap say they lack mappings
  fork      a child forked after maps-1 holds the mappings it inherited
            (its snapshots seeded with them), then loses a's two pieces
            to its own munmap: --kind mmap byte-exact at its marks
"""
import os
import re

import hrtest

LIBDIR = "/usr/lib/x86_64-linux-gnu"
PAGE = 4096
BIG = 64 << 20
FUNCS = ["map_a", "map_b", "grow_b", "move_b", "fixed_c", "map_file", "heap_big"]
# live mapped bytes per function at each mark (tests/programs/maps.c)
MMAP = [
    {"map_a": 16 * PAGE, "map_b": 8 * PAGE},
    {"map_a": 12 * PAGE, "grow_b": 12 * PAGE},
    {"map_a": 10 * PAGE, "move_b": 20 * PAGE, "fixed_c": 2 * PAGE},
    {},
]
HEAP = [{"heap_big": BIG}, {"heap_big": BIG}, {"heap_big": BIG}, {}]


def per_function(db, mark, kind):
    got = hrtest.folded_per_function(db, ["--at", "mark:maps-%d" % mark, "--kind", kind],
                                     FUNCS, "inuse_space")
    return {k: v for k, v in got.items() if v}


def check_marks(db):
    for m in range(4):
        got = per_function(db, m, "mmap")
        assert got == MMAP[m], "maps-%d mmap: %s != %s" % (m, got, MMAP[m])
        got = per_function(db, m, "heap")
        want = dict(HEAP[m])
        assert got == want, "maps-%d heap: %s != %s" % (m, got, want)


def case_snap(d, trace, db):
    check_marks(db)
    out = hrtest.run([hrtest.TRACE_SNAP, db, "--at", "mark:maps-2"]).stdout
    kinds = out.splitlines()[1]
    mapped = sum(MMAP[2].values())
    assert kinds.startswith("Kinds: heap ") and (", mmap %d B " % mapped) in kinds, out
    heap = int(kinds.split()[2].rstrip(","))
    assert hrtest.snap_total(out) == heap + mapped, out
    stats = hrtest.run([hrtest.TRACE_SNAP, db, "--stats", "--at", "mark:maps-2"]).stdout
    row = re.search(r"^live mmap \(events\) +(\d+) ", stats, re.M)
    assert row and int(row.group(1)) == mapped, stats
    big = [r for r in hrtest.dump(trace) if "size=%d" % BIG in r]
    assert len(big) == 1 and big[0][0] == "alloc" and "fn=malloc" in big[0], big
    print("mmap per function at 4 marks byte-exact, 64 MiB once as heap: ok")
    # one thread: a filter keeping it answers as no filter does, the peak
    # the heap's (mappings are in snapshots, not in the peak)
    pid = str(hrtest.one(hrtest.connect(db), "SELECT pid FROM processes"))
    for q in (["--peak"], ["--at", "mark:maps-2"]):
        whole = hrtest.run([hrtest.TRACE_SNAP, db, "--format", "folded"] + q).stdout
        one = hrtest.run([hrtest.TRACE_SNAP, db, "--format", "folded", "--tid", pid] + q).stdout
        assert sorted(one.splitlines()) == sorted(whole.splitlines()), (q, one, whole)
    print("--tid of the only thread: the same peak and snapshot: ok")


def case_usage(d, trace, db):
    for args in (["--kind", "stack"], ["--kind", "mmap", "--stats"]):
        p = hrtest.run([hrtest.TRACE_SNAP, db, "--at", "end"] + args, check=False)
        assert p.returncode == 2 and p.stderr.startswith("trace-snap: ") and \
            len(p.stderr.splitlines()) == 1, (args, p.returncode, p.stderr)
    print("--kind usage errors: ok")


def with_allocator(d, lib):
    path = os.path.join(LIBDIR, lib)
    if not os.path.exists(path):
        hrtest.skip("%s not installed" % path)
    trace, db = os.path.join(d, lib + ".trc"), os.path.join(d, lib + ".db")
    e = dict(os.environ, LD_PRELOAD=hrtest.LIBREC + " " + path, REC_OUT=trace)
    hrtest.run([hrtest.prog("maps")], env=e)
    hrtest.run([hrtest.TRACE_IMPORT, "-q", trace, db])
    check_marks(db)
    print("%s: mmap per function byte-exact, its own mappings not counted: ok" % lib)
    # Sampled, its allocations pass on without a hook around them: its own
    # mappings (extents) are still not the program's, so a program that
    # maps nothing itself gets no mark of mappings unrecorded.
    sampled = os.path.join(d, lib + ".sampled.trc")
    e.update(REC_OUT=sampled, REC_SAMPLE="65536")
    hrtest.run([hrtest.prog("rss_marks")], env=e)
    marks = [r for r in hrtest.dump(sampled) if r[-1] == "label=heapreel.mmap-unrecorded"]
    assert not marks, marks
    print("%s, sampled: its own mappings leave no mark: ok" % lib)


def case_jemalloc(d, trace, db):
    with_allocator(d, "libjemalloc.so.2")


def case_tcmalloc(d, trace, db):
    with_allocator(d, "libtcmalloc_minimal.so.4")


def unrecorded(trace, env):
    """maps recorded to trace under env (sampled, bounded): no mapping in
    it, the 64 MiB malloc still, and one mark at the first mapping."""
    hrtest.record([hrtest.prog("maps")], trace, env=env)
    recs = hrtest.dump(trace)
    maps = [r for r in recs if any(w in r for w in ("fn=mmap", "fn=mremap", "fn=munmap"))]
    assert not maps, maps
    assert [r for r in recs if "size=%d" % BIG in r and "fn=malloc" in r], "no 64 MiB malloc"
    marks = [r for r in recs if r[-1] == "label=heapreel.mmap-unrecorded"]
    assert len(marks) == 1, marks


def case_sampled(d, trace, db):
    sampled = os.path.join(d, "sampled.trc")
    unrecorded(sampled, {"REC_SAMPLE": "4096"})
    print("sampled: no mapping recorded, one mark at the first: ok")
    # the mapping thread may not wait for room in the mark queue: when it
    # is full (forced by a test hook), the writer writes the mark, stamped
    # when the first mapping was turned away (before maps-0)
    full = os.path.join(d, "full.trc")
    hrtest.record([hrtest.prog("maps")], full,
                  env={"REC_SAMPLE": "4096", "REC_TEST_MARK_QUEUE_FULL": "1"})
    marks = [r for r in hrtest.dump(full) if r[0] == "mark"]
    said = [r for r in marks if r[-1] == "label=heapreel.mmap-unrecorded"]
    first = [r for r in marks if r[-1] == "label=maps-0"]
    t_of = lambda r: int(r[1].split("=")[1])
    assert len(said) == 1 and len(first) == 1 and t_of(said[0]) < t_of(first[0]), marks
    print("sampled, mark queue full: the writer writes the mark, at the first mapping: ok")
    # ... and every answer reaching the mark says so, unless it asks for
    # heap blocks only; an instant before it, or the unsampled recording's
    # answers, do not
    sdb = os.path.join(d, "sampled.db")
    hrtest.trace_import([sampled, sdb])
    said = "that its trace does not hold (sampled or bounded): the answer lacks it (kind mmap)"
    for args, want in ((["--peak"], True), (["--at", "mark:maps-0", "--kind", "mmap"], True),
                       (["--stats"], True), (["--peak", "--kind", "heap"], False),
                       (["--at", "start"], False)):
        text = [] if "--stats" in args else ["--format", "text"]
        p = hrtest.run([hrtest.TRACE_SNAP, sdb] + args + text)
        warned = [l for l in p.stderr.splitlines() if said in l]
        assert len(warned) == int(want), (args, p.stderr)
        assert (said in p.stdout) == want, (args, p.stdout)
    p = hrtest.run([hrtest.TRACE_SNAP, db, "--peak", "--format", "text"])
    assert said not in p.stderr + p.stdout, p.stderr
    print("sampled: its answers say the mappings were not recorded: ok")


def case_bounded(d, trace, db):
    unrecorded(os.path.join(d, "bounded.trc"), {"REC_MAX_SIZE": "4M"})
    print("bounded: no mapping recorded, one mark at the first: ok")
    # a trace that wraps (maps.c "churn") past the mark: a keyframe's copy
    # of it remains, and the answers after the wrap still say so
    wrapped, wdb = os.path.join(d, "wrapped.trc"), os.path.join(d, "wrapped.db")
    hrtest.record([hrtest.prog("maps"), "churn"], wrapped, env={"REC_MAX_SIZE": "4M"})
    hrtest.trace_import([wrapped, wdb])
    c = hrtest.connect(wdb)
    window = hrtest.one(c, "SELECT value FROM meta WHERE key='window_start_ns'")
    assert hrtest.one(c, "SELECT COUNT(*) FROM marks WHERE label='maps-0'") == 0, "no wrap"
    got = c.execute("SELECT t FROM marks WHERE label='heapreel.mmap-unrecorded'").fetchall()
    assert len(got) == 1 and got[0][0] < window, (got, window)
    p = hrtest.run([hrtest.TRACE_SNAP, wdb, "--at", "mark:churned", "--format", "text"])
    warn = "that its trace does not hold (sampled or bounded): the answer lacks it (kind mmap)"
    assert warn in p.stderr and warn in p.stdout, (p.stderr, p.stdout)
    print("bounded, wrapped: the mark kept by the keyframes (once), answers say so: ok")


def case_fork(d, trace, db):
    fdb, _, _, child = hrtest.forked_db(d, [hrtest.prog("maps"), "fork"])
    check_marks(fdb)                        # the parent's answers as without the fork
    want = [MMAP[1], {"grow_b": 12 * PAGE}]
    for m, w in enumerate(want):
        got = hrtest.folded_per_function(fdb, ["--pid", str(child), "--at", "mark:child-%d" % m,
                                               "--kind", "mmap"], FUNCS, "inuse_space")
        got = {k: v for k, v in got.items() if v}
        assert got == w, "child-%d mmap: %s != %s" % (m, got, w)
    print("fork: the child's inherited mappings, then its own munmap: exact")


if __name__ == "__main__":
    hrtest.run_case(hrtest.prog("maps"), "rec-maps-", globals())
