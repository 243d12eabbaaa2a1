"""test_counters CASE - the recorder's counters (REC_STATS_MS: RSS and the
allocator's own figures, counters.c), imported into the counters table and
shown by trace-snap --stats. The program is tests/programs/rss_marks, which
changes its heap by known amounts, has the recorder sample (rec_flush),
reads its own VmRSS and marks rss-0 ... rss-4.

CASE:
  glibc     rss_bytes at each mark within 2 % of the program's VmRSS there;
            the glibc counters present and consistent (in use + free =
            arena, in use <= arena + mmapped; the 64 MiB block in mmapped
            at rss-1 and rss-2 only); --stats --at prints the exact live heap and
            rss_bytes; --stats over a window its min and max
  jemalloc  the same RSS check with libjemalloc.so.2 serving malloc; its
            counters present, allocated <= active <= resident, also when
            it is preloaded before libheapreel.so (skips if it is not
            installed)
  tcmalloc  the same with libtcmalloc_minimal.so.4: allocated <= heap size,
            page-heap free and unmapped within the heap (skips likewise);
            preloaded before libheapreel.so, its counters in each of 10 runs
  tcmalloc_late
            an allocator whose statistics begin to answer half-way through
            the recorder's first pass over them (tests/programs/late_tc.c,
            as tcmalloc's initializer may run after the writer starts):
            all four tcmalloc counters are sampled
  off       REC_STATS_MS=0: no COUNTER or SAMPLE record, and --stats says
            the process has none (exit 4); the heapreel.stats mark says
            the sampling cost nothing
  env       REC_STATS_MS as a duration (20ms) samples, and the
            heapreel.stats mark counts the writer's CPU time in them; a
            malformed value is said once on stderr and the default used
  fork      a forked child's trace has its own counters
"""
import os
import re
import subprocess
import sys

import hrtest
import rectest

MARKS = 5
RSS_TOLERANCE = 0.02
BASE, BIG = 16 << 20, 64 << 20
SMALL, SMALL_COUNT = 1024, 32768
# the live heap at each mark (tests/programs/rss_marks.c)
LIVE = [BASE + x for x in (0, BIG, BIG + SMALL * SMALL_COUNT, SMALL * SMALL_COUNT, 0)]
LIBDIR = "/usr/lib/x86_64-linux-gnu"
ALLOCATORS = {"jemalloc": "libjemalloc.so.2", "tcmalloc": "libtcmalloc_minimal.so.4"}
GLIBC = ["glibc.arena_bytes", "glibc.mmapped_bytes", "glibc.in_use_bytes",
         "glibc.free_bytes", "glibc.top_pad_bytes"]
JEMALLOC = ["jemalloc.allocated_bytes", "jemalloc.active_bytes", "jemalloc.resident_bytes",
            "jemalloc.mapped_bytes", "jemalloc.retained_bytes"]
TCMALLOC = ["tcmalloc.allocated_bytes", "tcmalloc.heap_size_bytes",
            "tcmalloc.pageheap_free_bytes", "tcmalloc.pageheap_unmapped_bytes"]
RSS = ["rss_bytes", "rss_anon_bytes", "rss_file_shmem_bytes"]
PRELOADED_FIRST_RUNS = 10


def run_recorded(argv, trace, preload_after=None, preload_before=None, **env):
    """argv under libheapreel.so (and after it the allocator to use, so
    that ours interposes and the real malloc is that allocator's; or before
    it, so that the program calls that allocator's malloc directly)."""
    e = dict(os.environ)
    e.update(env)
    e["LD_PRELOAD"] = " ".join(p for p in (preload_before, hrtest.LIBREC, preload_after) if p)
    e["REC_OUT"] = trace
    p = subprocess.run(argv, env=e, capture_output=True, text=True)
    assert p.returncode == 0, "%s exited %d: %s" % (argv, p.returncode, p.stderr)
    return p


def record_marks(d, preload_after=None):
    """rss_marks recorded and imported: (database connection, db path,
    VmRSS per mark as the program read it)."""
    trace, db = os.path.join(d, "run.trc"), os.path.join(d, "run.db")
    p = run_recorded([hrtest.prog("rss_marks")], trace, preload_after)
    vmrss = {}
    for line in p.stdout.splitlines():
        label, value = line.split()
        vmrss[label] = int(value)
    assert len(vmrss) == MARKS and all(vmrss.values()), p.stdout
    hrtest.trace_import([trace, db])
    return hrtest.connect(db), db, vmrss


def at_mark(c, name, label):
    """The value of counter name at mark label (its last sample at or
    before the mark), or None."""
    r = c.execute("SELECT (SELECT value FROM counters k WHERE k.pid = m.pid AND k.name = ? "
                  "AND k.t <= m.t ORDER BY k.t DESC LIMIT 1) FROM marks m WHERE m.label = ?",
                  (name, label)).fetchone()
    assert r is not None, "no mark %s" % label
    return r[0]


def check_rss(c, vmrss):
    for label, want in sorted(vmrss.items()):
        got = at_mark(c, "rss_bytes", label)
        assert got is not None, "no rss_bytes sample at or before %s" % label
        assert abs(got - want) <= RSS_TOLERANCE * want, \
            "%s: rss_bytes %d, the program's VmRSS %d (more than 2 %% apart)" % (label, got, want)
        anon, shared = at_mark(c, "rss_anon_bytes", label), at_mark(c, "rss_file_shmem_bytes", label)
        assert anon + shared == got, "%s: anon %d + file/shmem %d != rss %d" % (
            label, anon, shared, got)
    print("rss_bytes at each mark within 2 %% of VmRSS: %s" % ", ".join(
        "%s %d/%d" % (l, at_mark(c, "rss_bytes", l), v) for l, v in sorted(vmrss.items())))


def names(c):
    return {r[0] for r in c.execute("SELECT DISTINCT name FROM counters")}


def values(c, label, wanted):
    return [at_mark(c, n, label) for n in wanted]


def case_glibc(d):
    c, db, vmrss = record_marks(d)
    check_rss(c, vmrss)
    assert names(c) == set(RSS + GLIBC), names(c)
    for k in range(MARKS):
        arena, mmapped, in_use, free, top = values(c, "rss-%d" % k, GLIBC)
        assert in_use + free == arena, "rss-%d: in use %d + free %d != arena %d" % (
            k, in_use, free, arena)
        assert in_use <= arena + mmapped and top <= free, (k, arena, mmapped, in_use, free, top)
        assert (mmapped >= BASE + BIG) == (k in (1, 2)) and mmapped >= BASE, \
            "rss-%d: mmapped %d" % (k, mmapped)
    assert hrtest.meta(c, "counter_values_unnamed") == 0
    print("glibc counters consistent at every mark: ok")

    for k in range(MARKS):
        out = hrtest.run([hrtest.TRACE_SNAP, db, "--stats", "--at", "mark:rss-%d" % k]).stdout
        heap = re.search(r"^live heap \(events\) +(\d+) ", out, re.M)
        rss = re.search(r"^rss_bytes +(\d+) \(", out, re.M)
        unused = re.search(r"^unused: rss - live heap - mmap +(-?\d+) ", out, re.M)
        assert heap and rss and unused, out
        assert int(heap.group(1)) == LIVE[k], "rss-%d: live heap %s, want %d" % (
            k, heap.group(1), LIVE[k])
        assert int(rss.group(1)) == at_mark(c, "rss_bytes", "rss-%d" % k), out
        assert int(unused.group(1)) == int(rss.group(1)) - LIVE[k], out
    print("--stats --at each mark: exact live heap, rss_bytes, rss - heap: ok")

    out = hrtest.run([hrtest.TRACE_SNAP, db, "--stats", "--growth", "mark:rss-1..mark:rss-3"]).stdout
    row = re.search(r"^rss_bytes +(\d+) \([^)]*\) +(\d+) \([^)]*\) +(\d+) \([^)]*\) +(\d+) \(",
                    out, re.M)
    assert row, out
    a, b, lo, hi = map(int, row.groups())
    assert (a, b) == (at_mark(c, "rss_bytes", "rss-1"), at_mark(c, "rss_bytes", "rss-3")), out
    # the window holds the samples of rss-1, rss-2 and rss-3 (and those
    # between): rss-2's is the largest of the marks', rss-3's the smallest
    assert hi >= at_mark(c, "rss_bytes", "rss-2") and lo <= b and lo <= a <= hi, out
    print("--stats over a window: each end, min, max: ok")


def case_allocator(d, which):
    lib = os.path.join(LIBDIR, ALLOCATORS[which])
    if not os.path.exists(lib):
        hrtest.skip("%s is not installed (%s)" % (which, lib))
    c, db, vmrss = record_marks(d, lib)
    check_rss(c, vmrss)
    want = JEMALLOC if which == "jemalloc" else TCMALLOC
    assert names(c) == set(RSS + want), names(c)
    for k in range(MARKS):
        v = values(c, "rss-%d" % k, want)
        if which == "jemalloc":
            allocated, active, resident = v[:3]
            assert allocated <= active <= resident, "rss-%d: %s" % (k, v)
            assert (allocated >= BASE + BIG) == (k in (1, 2)), "rss-%d: allocated %d" % (
                k, allocated)
        else:
            allocated, heap, free, unmapped = v
            assert allocated <= heap and free + unmapped <= heap, "rss-%d: %s" % (k, v)
            assert (allocated >= BASE + BIG) == (k in (1, 2)), "rss-%d: allocated %d" % (
                k, allocated)
    print("%s counters present and ordered at every mark: ok" % which)
    # preloaded before the recorder, the allocator still serves the
    # program's malloc: its figures are sampled, not glibc's idle arena's.
    # Its initializer then runs after ours, beside our writer thread: a
    # first query from that thread broke tcmalloc's interface for good in
    # 3 runs of 10 (counters.c), so several runs.
    for k in range(PRELOADED_FIRST_RUNS):
        trace = os.path.join(d, "first-%d.trc" % k)
        run_recorded([hrtest.prog("rss_marks")], trace, preload_before=lib)
        got = [r["name"] for r in rectest.dump(trace) if r["kind"] == "counter"]
        assert got == RSS + want, (k, got)
    print("%s preloaded before libheapreel.so: its counters, %d runs of %d: ok" % (
        which, PRELOADED_FIRST_RUNS, PRELOADED_FIRST_RUNS))


def case_tcmalloc_late(d):
    trace = os.path.join(d, "late.trc")
    lib = os.path.join(os.path.dirname(hrtest.prog("rss_marks")), "liblate_tc.so")
    run_recorded([hrtest.prog("rss_marks")], trace, preload_after=lib)
    got = [r["name"] for r in rectest.dump(trace) if r["kind"] == "counter"]
    assert got == RSS + TCMALLOC, got
    print("statistics that begin to answer during the first pass: all four sampled: ok")


def sampling_spent(trace):
    """counters_cpu_us and allocator_stats_us of the trace's heapreel.stats mark."""
    marks = [r for r in rectest.dump(trace) if r["kind"] == "mark"
             and r["label"] == "heapreel.stats"]     # its key=value words parsed too
    assert len(marks) == 1, marks
    return marks[0]["counters_cpu_us"], marks[0]["allocator_stats_us"]


def case_off(d):
    trace, db = os.path.join(d, "off.trc"), os.path.join(d, "off.db")
    run_recorded([hrtest.prog("rss_marks")], trace, REC_STATS_MS="0")
    s = hrtest.summary(trace)
    assert s["counters"] == 0 and s["samples"] == 0, s
    assert sampling_spent(trace) == (0, 0)
    hrtest.trace_import([trace, db])
    c = hrtest.connect(db)
    assert hrtest.one(c, "SELECT count(*) FROM counters") == 0
    p = hrtest.run([hrtest.TRACE_SNAP, db, "--stats"], check=False)
    assert p.returncode == 4 and "has no counters" in p.stderr, (p.returncode, p.stderr)
    print("REC_STATS_MS=0: no counters, --stats exits 4: ok")


def case_env(d):
    trace = os.path.join(d, "dur.trc")
    p = run_recorded([hrtest.prog("rss_marks")], trace, REC_STATS_MS="20ms")
    assert "REC_STATS_MS" not in p.stderr, p.stderr
    s = hrtest.summary(trace)
    # rec_flush samples once per mark, and the end once more
    assert s["counters"] == len(RSS + GLIBC) and s["samples"] >= MARKS + 1, s
    # each sample opens and reads /proc/self/statm: microseconds of CPU
    assert sampling_spent(trace)[0] > 0
    trace = os.path.join(d, "bad.trc")
    p = run_recorded([hrtest.prog("rss_marks")], trace, REC_STATS_MS="-5")
    lines = [l for l in p.stderr.splitlines() if "REC_STATS_MS" in l]
    assert lines == ["heapreel: REC_STATS_MS=-5 is not 0 (off), milliseconds (10) or a "
                     "duration from 1ms to 1h (0.5s); sampling every 10 ms"], p.stderr
    assert hrtest.summary(trace)["samples"] >= MARKS + 1
    print("REC_STATS_MS as a duration, and a malformed one: ok")


def case_fork(d):
    pattern = os.path.join(d, "f.%p.trc")
    run_recorded([hrtest.prog("forker")], pattern)
    traces = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".trc"))
    assert len(traces) == 2, traces
    for t in traces:
        recs = rectest.dump(t)
        counters = [r["name"] for r in recs if r["kind"] == "counter"]
        samples = [r for r in recs if r["kind"] == "sample"]
        assert counters == RSS + GLIBC, (t, counters)
        # every sample holds the RSS counters, some the allocator's too,
        # and the last (at the end) all of them
        sizes = [len(str(r["values"]).split(",")) for r in samples if r["first"] == 1]
        assert len(sizes) == len(samples) and set(sizes) <= {len(RSS), len(counters)}, (t, sizes)
        assert sizes[-1] == len(counters), (t, sizes)
    print("parent and forked child: each trace its own counters: ok")


CASES = {"glibc": case_glibc, "off": case_off, "env": case_env, "fork": case_fork,
         "jemalloc": lambda d: case_allocator(d, "jemalloc"),
         "tcmalloc": lambda d: case_allocator(d, "tcmalloc"),
         "tcmalloc_late": case_tcmalloc_late}

if __name__ == "__main__":
    rectest.need_tools()
    hrtest.need(hrtest.prog("rss_marks"), hrtest.TRACE_IMPORT, hrtest.TRACE_SNAP)
    CASES[sys.argv[1]](hrtest.tmpdir("counters"))
