"""test_random - trace-snap against brute force on a random two-process
fixture with many checkpoints: snapshots at random instants and at event
instants, peak, growth, steady, top windows and leaks, per process; and a
sampled process: heap_v2/P with raw numbers, unbiased text."""
import math
import os
import random

import hrtest
import fixture
from fixture import S

SNAP = hrtest.TRACE_SNAP
if not os.path.exists(SNAP):
    hrtest.skip("trace-snap not built")
tmp = hrtest.tmpdir("q-rand")
DB = os.path.join(tmp, "r.db")
rng = random.Random(4242)
f = fixture.Fixture(DB)
f.process(100, t_end=10 * S)
f.process(200, exe="/opt/app/bin/child", t_start=2 * S, t_end=9 * S, sample_period=0)
stacks = []
for k in range(6):
    depth = rng.randint(1, 5)
    frames = [(0x500000 + 0x100 * k + d, "f%d_%d" % (k, d)) for d in range(depth)]
    stacks.append(f.stack(*frames))
for pid, (lo, hi) in ((100, (0, 10 * S)), (200, (2 * S, 9 * S))):
    times = []
    for i in range(300):
        t = rng.randint(lo, hi)
        if rng.random() < 0.1 and times:
            t = rng.choice(times)          # several events at one instant
        times.append(t)
        tf = None
        if rng.random() < 0.7:
            tf = rng.randint(t, hi) if rng.random() < 0.8 else t
        f.alloc(pid, t, rng.choice([0, 1, 8, 24, 100, 4096]), rng.choice(stacks), t_free=tf)
    f.checkpoints(pid, sorted(rng.sample(range(lo, hi), 9)) + [hi])
f.finish()
checks = 0


def heap_rows(args):
    out = os.path.join(tmp, "o.heap")
    hrtest.run([SNAP, DB] + args + ["-o", out, "--force"])
    with open(out) as fh:
        typ, rows, _ = fixture.parse_heap(fh.read())
    return rows


def by_stack(st):
    """brute-force state -> {address tuple: values} as trace-snap writes it."""
    rows = {}
    for s, v in st.items():
        if any(v):
            rows[addrs_of(s)] = list(v)
    return rows


node_parent = {nid: (parent, fid) for (parent, fid), nid in f.nodes.items()}
frame_ip = {fid: ip for (ip, name, file, line, depth), fid in f.frames.items()}


def addrs_of(s):
    """the .heap line's addresses: the leaf minus one, callers raw"""
    out = []
    while s is not None:
        parent, fid = node_parent[s]
        out.append("0x%x" % (frame_ip[fid] - (not out)))
        s = parent
    return tuple(out)


def clamp(v):
    """what .heap does with a growth pair: negative cut, no bytes without count"""
    n, b = v
    if b < 0 or (b == 0 and n < 0):
        return [0, 0]
    if n <= 0 and b > 0:
        return [1, b]
    return [max(n, 0), b]


def diff(a, b, heap=True):
    out = {}
    for k in set(a) | set(b):
        v = [x - y for x, y in zip(a.get(k, [0] * 4), b.get(k, [0] * 4))]
        if heap:
            v = clamp(v[:2]) + clamp(v[2:])
        if any(v):
            out[k] = v
    return out


for pid, (lo, hi) in ((100, (0, 10 * S)), (200, (2 * S, 9 * S))):
    ev = sorted({a["t_alloc"] for a in f.allocs if a["pid"] == pid} |
                {a["t_free"] for a in f.allocs if a["pid"] == pid and a["t_free"]})
    instants = [rng.randint(lo, hi) for _ in range(15)] + rng.sample(ev, 15) + [lo, hi]
    for t in instants:
        got = heap_rows(["--pid", str(pid), "--at", "%dns" % t])
        assert got == by_stack(f.state(pid, t)), (pid, t)
        checks += 1
    pt, pb, po = f.peak(pid)
    assert heap_rows(["--pid", str(pid), "--peak"]) == by_stack(f.state(pid, pt))
    out = hrtest.run([SNAP, DB, "--pid", str(pid), "--peak"]).stdout
    assert hrtest.snap_total(out) == pb and out.startswith("Total: %d B (" % pb), (out, pb)
    leaks = {k: v for k, v in by_stack(f.state(pid, hi)).items() if v[0] or v[1]}
    assert heap_rows(["--pid", str(pid), "--leaks"]) == leaks
    checks += 3
    for _ in range(8):
        t1, t2 = sorted(rng.sample(ev, 2))
        w = ["%dns..%dns" % (t1, t2)]
        assert heap_rows(["--pid", str(pid), "--growth"] + w) == \
            diff(by_stack(f.state(pid, t2)), by_stack(f.state(pid, t1)))
        want = {}
        for a in f.allocs:
            if a["pid"] == pid and t1 < a["t_alloc"] <= t2:
                r = want.setdefault(addrs_of(a["stack"]), [0, 0, 0, 0])
                live = a["t_free"] is None or a["t_free"] > t2
                r[0] += live
                r[1] += a["size"] if live else 0
                r[2] += 1
                r[3] += a["size"]
        want = {k: v for k, v in want.items() if any(v)}
        assert heap_rows(["--pid", str(pid), "--steady"] + w) == want, (t1, t2)
        top = {}
        for a in f.allocs:
            if a["pid"] == pid and t1 <= a["t_alloc"] <= t2:
                r = top.setdefault(addrs_of(a["stack"]), [0, 0, 0, 0])
                r[0] += 1
                r[1] += a["size"]
        top = {k: [v[0], v[1], v[0], v[1]] for k, v in top.items()}
        assert heap_rows(["--pid", str(pid), "--top", "--window"] + w) == top, (t1, t2)
        checks += 3

# Sampled: heap_v2/P, raw numbers in .heap; text/folded unbiased per stack.
SDB = os.path.join(tmp, "s.db")
P = 524288
g = fixture.Fixture(SDB)
g.process(1, sample_period=P)
s1 = g.stack((0x401000, "tiny"), (0x401100, "main"))
s2 = g.stack((0x401200, "page"), (0x401110, "main"))
for i in range(5):
    g.alloc(1, S + i, 16, s1)
for i in range(3):
    g.alloc(1, S + 10 + i, 4096, s2)
g.finish()
out = os.path.join(tmp, "s.heap")
hrtest.run([SNAP, SDB, "--at", "end", "-o", out])
with open(out) as fh:
    typ, rows, _ = fixture.parse_heap(fh.read())
assert typ == "heap_v2/%d" % P, typ
assert rows == {("0x400fff", "0x401100"): [5, 80, 5, 80],   # leaves minus one
                ("0x4011ff", "0x401110"): [3, 12288, 3, 12288]}, rows


def unb(n, b):
    sc = 1 / (1 - math.exp(-(b / n) / P))
    return int(n * sc), int(b * sc)


text = hrtest.run([SNAP, SDB, "--at", "end"]).stdout
tb = unb(5, 80)[1] + unb(3, 12288)[1]
assert unb(5, 80)[1] == 2621480 and hrtest.snap_total(text) == tb, (text, tb)
fold = hrtest.run([SNAP, SDB, "--at", "end", "--format", "folded"]).stdout
assert sorted(fold.splitlines()) == sorted(["main;tiny %d" % unb(5, 80)[1],
                                            "main;page %d" % unb(3, 12288)[1]]), fold
checks += 3
print("ok: %d checks" % checks)
