"""test_threads - trace-snap --tid and --histogram on a hand-checked fixture:
every question narrowed to one thread or two is byte-exact (the same
stacks shared by two threads split between them), --peak under a filter
is the threads' own peak instant, text output names the threads, an
unknown tid exits 4 listing the process's threads; the size histogram of
an instant, a window, the peak and the whole run has exact bins, totals
and top sizes, unbiased per size when sampled.

The fixture, process 100 over 0..10 s (threads 100 main, 101 worker-a,
102 worker-b, 103 idle which never allocates):
  100: 0 B at 0.5 s (zero), never freed; 3 B at 0.6 s (zero) freed at
       0.7 s, temporary
  101: 4 x 24 B at 1 s + i ms (small), freed at 5 s + i ms;
       1000 B at 2 s (big), never freed
  102: 2 x 24 B at 1.5 s + i ms (small), never freed;
       5000 B at 3 s and 3 s + 1 ns (big), freed at 4 s and 4 s + 1 ns
Peaks: 101 at 2 s (1096 B), 102 and the process at 3 s + 1 ns (10048 B,
11144 B)."""
import gzip
import math
import os

import hrtest
import fixture
from fixture import S, MS

SNAP = hrtest.TRACE_SNAP
if not os.path.exists(SNAP):
    hrtest.skip("trace-snap not built")
tmp = hrtest.tmpdir("q-threads")
checks = 0


def build(path, sample_period=0):
    f = fixture.Fixture(path)
    p = f.process(100, exe=fixture.EXE, sample_period=sample_period)
    p.threads = [(100, "main"), (101, "worker-a"), (102, "worker-b"), (103, "idle")]
    main = (0x401100, "main", "app.c", 10, 0)
    st = {"zero": f.stack((0x401010, "alloc_zero", "app.c", 3, 0), main),
          "small": f.stack((0x401020, "alloc_small", "app.c", 4, 0), main),
          "big": f.stack((0x401030, "alloc_big", "app.c", 5, 0), main)}
    f.alloc(100, S // 2, 0, st["zero"], tid=100)
    f.alloc(100, 600 * MS, 3, st["zero"], t_free=700 * MS, tid=100, temporary=1)
    for i in range(4):
        f.alloc(100, S + i * MS, 24, st["small"], t_free=5 * S + i * MS, tid=101)
    f.alloc(100, 2 * S, 1000, st["big"], tid=101)
    for i in range(2):
        f.alloc(100, 3 * S // 2 + i * MS, 24, st["small"], tid=102)
        f.alloc(100, 3 * S + i, 5000, st["big"], t_free=4 * S + i, tid=102)
    f.checkpoints(100, [2 * S, 4 * S, 6 * S])
    f.finish()
    return st


DB = os.path.join(tmp, "t.db")
build(DB)
ADDR = {"zero": ("0x40100f", "0x401100"), "small": ("0x40101f", "0x401100"),
        "big": ("0x40102f", "0x401100")}


def heap(args):
    out = os.path.join(tmp, "o.heap")
    hrtest.run([SNAP, DB] + args + ["-o", out, "--force"])
    with open(out) as fh:
        typ, rows, _ = fixture.parse_heap(fh.read())
    return {name: rows[a] for name, a in ADDR.items() if a in rows}


def expect(args, want):
    global checks
    got = heap(args)
    assert got == want, "%s:\n got %s\nwant %s" % (args, got, want)
    checks += 1


# ---- --tid: every question, byte-exact per thread ----------------------------
expect(["--peak", "--tid", "101"], {"small": [4, 96, 4, 96], "big": [1, 1000, 1, 1000]})
expect(["--peak", "--tid", "102"], {"small": [2, 48, 2, 48], "big": [2, 10000, 2, 10000]})
expect(["--peak", "--tid", "101,102"], {"small": [6, 144, 6, 144],
                                        "big": [3, 11000, 3, 11000]})
expect(["--peak", "--tid", "101", "--tid", "102"], {"small": [6, 144, 6, 144],
                                                    "big": [3, 11000, 3, 11000]})
expect(["--peak"], {"zero": [1, 0, 2, 3], "small": [6, 144, 6, 144], "big": [3, 11000, 3, 11000]})
# the same instants across checkpoints (2 s, 4 s) and exactly at events
expect(["--at", "4s", "--tid", "102"], {"small": [2, 48, 2, 48], "big": [1, 5000, 2, 10000]})
expect(["--at", "2s", "--tid", "101"], {"small": [4, 96, 4, 96], "big": [1, 1000, 1, 1000]})
expect(["--at", "5001ms", "--tid", "101"], {"small": [2, 48, 4, 96], "big": [1, 1000, 1, 1000]})
expect(["--at", "1s", "--tid", "102"], {})
expect(["--leaks", "--tid", "101"], {"big": [1, 1000, 1, 1000]})
expect(["--leaks", "--tid", "102"], {"small": [2, 48, 2, 48]})
expect(["--temporary", "--tid", "100"], {"zero": [1, 3, 1, 3]})
expect(["--temporary", "--tid", "101"], {})
expect(["--steady", "2s..3.5s", "--tid", "102"], {"big": [2, 10000, 2, 10000]})
expect(["--steady", "1s..5s", "--tid", "101"], {"small": [3, 72, 3, 72], "big": [1, 1000, 1, 1000]})
expect(["--top", "--tid", "102"], {"small": [2, 48, 2, 48], "big": [2, 10000, 2, 10000]})
expect(["--top", "--window", "0s..1.5s", "--tid", "100,102"],
       {"zero": [2, 3, 2, 3], "small": [1, 24, 1, 24]})
# .heap growth has no negative counts: 101's small shrank and is left out
expect(["--growth", "1.5s..5.5s", "--tid", "101"], {"big": [1, 1000, 1, 1000]})
expect(["--tid", "103", "--at", "end"], {})      # a thread that never allocated


# ---- text output names the threads --------------------------------------------
def text(args, code=0):
    p = hrtest.run([SNAP, DB] + args, check=False)
    assert p.returncode == code, (args, p.returncode, p.stderr)
    return p


out = text(["--peak", "--tid", "102,101"]).stdout.splitlines()
assert out[0] == "Total: 11144 B (10.9 KiB)", out
assert out[1] == "Threads: 101 (worker-a), 102 (worker-b)", out
out = text(["--peak", "--by", "stack", "--tid", "100"]).stdout.splitlines()
assert out[1] == "Threads: 100 (main)", out
assert not any(l.startswith("Threads:") for l in text(["--peak"]).stdout.splitlines())
# folded stacks of the filtered peak sum to its bytes
fold = text(["--peak", "--tid", "102", "--format", "folded"]).stdout.splitlines()
assert sorted(fold) == ["main;alloc_big 10000", "main;alloc_small 48"], fold
checks += 4

# pb.gz: the samples of the filtered peak, [alloc n, alloc b, inuse n, inuse b] summed
PB = os.path.join(tmp, "p.pb.gz")
hrtest.run([SNAP, DB, "--peak", "--tid", "102", "-o", PB])
with open(PB, "rb") as fh:
    prof = gzip.decompress(fh.read())
vals = [fixture.pb_packed(fixture.pb_one(v, 2)) for f, v in fixture.pb_fields(prof) if f == 2]
assert [sum(v[k] for v in vals) for k in range(4)] == [4, 10048, 4, 10048], vals
checks += 1

# ---- errors ---------------------------------------------------------------------
p = text(["--at", "2s", "--tid", "999"], code=4)
assert p.stderr == ("trace-snap: %s: process 100 had no thread 999 (its threads: 100, 101, "
                    "102, 103)\n" % DB), p.stderr
for bad in ("0", "x", "101,", ",101", "101,,102", "-5", ""):
    p = text(["--peak", "--tid", bad], code=2)
    assert p.stderr.startswith("trace-snap: --tid takes thread ids"), (bad, p.stderr)
p = text(["--processes", "--tid", "101"], code=2)
p = text(["--histogram", "--leaks"], code=2)
assert "--histogram goes with" in p.stderr, p.stderr
p = text(["--histogram", "--format", "heap"], code=2)
p = text(["--histogram", "-o", os.path.join(tmp, "h.heap")], code=2)
assert not os.path.exists(os.path.join(tmp, "h.heap"))
checks += 12


# ---- the histogram ----------------------------------------------------------------
def hist(args, db=DB):
    """--histogram text -> (lines before the table, {bin: (objects, bytes)},
    [(size, objects, bytes)] of the top sizes, in order)."""
    lines = hrtest.run([SNAP, db, "--histogram"] + args).stdout.splitlines()
    head = lines[:lines.index(next(l for l in lines if l.strip().startswith("size (bytes)")))]
    bins, top, in_top = {}, [], False
    for l in lines[len(head) + 1:]:
        if l.startswith("Most frequent sizes"):
            in_top = True
            continue
        w = l.split()
        if not w or w[0] == "size":
            continue
        if in_top:
            top.append((int(w[0]), int(w[1]), int(w[3])))
        else:
            lo, hi = l.split("]")[0].split("[")[1].split(", ")
            bins[(int(lo), int(hi))] = (int(w[2]), int(w[4]))
    return head, bins, top


head, bins, top = hist([])
assert head[0].startswith("Allocation sizes of process 100: every allocation of the run"), head
assert head[1] == "Total: 11 objects, 11147 B (10.9 KiB)", head
assert bins == {(0, 0): (1, 0), (1, 1): (0, 0), (2, 3): (1, 3), (4, 7): (0, 0), (8, 15): (0, 0),
                (16, 31): (6, 144), (32, 63): (0, 0), (64, 127): (0, 0), (128, 255): (0, 0),
                (256, 511): (0, 0), (512, 1023): (1, 1000), (1024, 2047): (0, 0),
                (2048, 4095): (0, 0), (4096, 8191): (2, 10000)}, bins
assert top == [(24, 6, 144), (5000, 2, 10000), (0, 1, 0), (3, 1, 3), (1000, 1, 1000)], top
head, bins, top = hist(["--peak"])
assert head[0] == "Allocation sizes of process 100: blocks live at the peak, 3.000000001s", head
assert head[1] == "Total: 10 objects, 11144 B (10.9 KiB)", head
assert {k: v for k, v in bins.items() if v[0]} == {(0, 0): (1, 0), (16, 31): (6, 144),
                                                   (512, 1023): (1, 1000),
                                                   (4096, 8191): (2, 10000)}, bins
head, bins, top = hist(["--at", "3.5s", "--tid", "102"])
assert head[1:] == ["Threads: 102 (worker-b)", "Total: 4 objects, 10048 B (9.8 KiB)"], head
assert {k: v for k, v in bins.items() if v[0]} == {(16, 31): (2, 48), (4096, 8191): (2, 10000)}
assert top == [(24, 2, 48), (5000, 2, 10000)], top
head, bins, top = hist(["--peak", "--tid", "101"])
assert head[0].endswith("blocks live at the peak, 2.000000000s"), head
assert head[2] == "Total: 5 objects, 1096 B (1.1 KiB)", head
# a window: what it allocated, (T1, T2]
head, bins, top = hist(["--steady", "1.5s..2s", "--tid", "101,102"])
assert head[0].endswith("allocations made in (1.500000000s, 2.000000000s]"), head
assert bins == {(16, 31): (1, 24), (32, 63): (0, 0), (64, 127): (0, 0), (128, 255): (0, 0),
                (256, 511): (0, 0), (512, 1023): (1, 1000)}, bins
assert hist(["--growth", "1.5s..2s", "--tid", "101,102"])[1] == bins
# the bar: the fullest bin 40 characters, a bin with objects at least one
lines = text(["--histogram"]).stdout.splitlines()
bars = {l.split("]")[0].strip() + "]": l.rstrip().split()[-1] for l in lines
        if l.strip().startswith("[") and l.rstrip().endswith("#")}
assert bars == {"[16, 31]": "#" * 40, "[0, 0]": "#" * 6, "[2, 3]": "#" * 6,
                "[512, 1023]": "#" * 6, "[4096, 8191]": "#" * 13}, bars
checks += 14

# -o FILE: a new 0600 text file, refused when it exists
out = os.path.join(tmp, "h.txt")
hrtest.run([SNAP, DB, "--histogram", "--at", "end", "-o", out])
assert oct(os.stat(out).st_mode & 0o777) == "0o600"
with open(out) as fh:
    assert fh.read() == text(["--histogram", "--at", "end"]).stdout
text(["--histogram", "-o", out], code=3)
checks += 3

# ---- sampled: unbiased per exact size ------------------------------------------
PERIOD = 1000
SDB = os.path.join(tmp, "s.db")
build(SDB, sample_period=PERIOD)


def unbiased(n, size):
    if n == 0 or size == 0:
        return n, n * size
    scale = 1 / (1 - math.exp(-size / PERIOD))
    return int(n * scale), int(n * size * scale)


head, bins, top = hist(["--at", "3.5s"], db=SDB)
want = {24: unbiased(6, 24), 0: (1, 0), 1000: unbiased(1, 1000), 5000: unbiased(2, 5000)}
assert head[2] == "Sampled every 1000 bytes: counts unbiased per size (estimates)", head
assert {k: v for k, v in bins.items() if v[0]} == {
    (0, 0): want[0], (16, 31): want[24], (512, 1023): want[1000], (4096, 8191): want[5000]}, bins
assert head[1] == "Total: %d objects, %d B (%s)" % (
    sum(v[0] for v in want.values()), sum(v[1] for v in want.values()),
    "%.1f KiB" % (sum(v[1] for v in want.values()) / 1024)), head
checks += 3
print("%d checks passed" % checks)
