"""test_pools - trace-snap --pool on hand-made databases: a database with no
pools table (imported before pools existed), one with pools but none of
the name asked (exit 4, one line naming the pools there are), a pool
without a block (every format answers empty, well-formed: the filter's
empty block list is walked), and two pools allocating from the same
stacks: every answer of --pool equals the brute-force answer over that
pool's rows only, at every instant, alone and with --tid, and --peak is
the pool's own (the first instant of its largest live bytes)."""
import os
import sqlite3

import hrtest
import fixture

SNAP = hrtest.TRACE_SNAP
hrtest.need(SNAP)
tmp = hrtest.tmpdir("q-pools")
S, PID = fixture.S, 100


def snap(db, *args, ok=0):
    p = hrtest.run([SNAP, db] + list(args), check=False)
    assert p.returncode == ok, (args, p.returncode, p.stdout, p.stderr)
    return p


def missing(db, name, pools):
    p = snap(db, "--pool", name, "--at", "5s", ok=4)
    want = "trace-snap: %s: process %d had no pool '%s' (its pools: %s)\n" % (db, PID, name, pools)
    assert p.stdout == "" and p.stderr == want, p.stderr


def no_table():
    _, _, _ = fixture.standard(os.path.join(tmp, "old.db"))
    db = os.path.join(tmp, "old.db")
    c = sqlite3.connect(db)
    c.execute("DROP TABLE pools")
    c.commit()
    c.close()
    missing(db, "alpha", "none")
    print("no pools table: exit 4, one line: ok")


def two_pools():
    """Pools 1 'alpha' and 2 'beta' from the same two stacks, 3 'gamma'
    with no block, heap blocks at the same stacks too."""
    path = os.path.join(tmp, "pools.db")
    f = fixture.Fixture(path)
    p = f.process(PID, exe=fixture.EXE)
    p.pools = [(1, "alpha"), (2, "beta"), (3, "gamma")]
    p.threads = [(1, "main"), (2, "worker")]
    start = (0x401000, "_start", "start.S", 1, 0)
    get = f.stack((0x401010, "pool_get", "p.c", 3, 0), (0x401100, "make_a", "p.c", 9, 0), start)
    other = f.stack((0x401010, "pool_get", "p.c", 3, 0), (0x401200, "make_b", "p.c", 12, 0),
                    start)
    for i in range(12):
        pool = 1 + i % 2
        f.alloc(PID, S + i * S // 4, 16 * (i + 1), get if i % 3 else other,
                t_free=(6 * S + i * S // 8) if i % 4 else None, tid=1 + i % 2, kind=2, pool=pool)
    for i in range(3):
        f.alloc(PID, S + i * S, 1000, get, t_free=8 * S)
    f.checkpoints(PID, [3 * S, 7 * S])
    f.finish()
    return f, path


def brute(f, t, pools, tids=None):
    got = {}
    for a in f.allocs:
        if a["kind"] != 2 or a["pool"] not in pools or a["t_alloc"] > t:
            continue
        if tids and a["tid"] not in tids:
            continue
        if a["t_free"] is None or a["t_free"] > t:
            got[a["stack"]] = got.get(a["stack"], 0) + a["size"]
    return got


def folded_total(db, args):
    out = snap(db, *args, "--format", "folded").stdout
    return sum(int(line.rsplit(" ", 1)[1]) for line in out.splitlines())


def exact(f, db):
    for t in range(0, 10 * S + 1, S // 2):
        for name, ids in (("alpha", {1}), ("beta", {2})):
            want = sum(brute(f, t, ids).values())
            got = folded_total(db, ["--pool", name, "--at", "%dns" % t])
            assert got == want, (name, t, got, want)
            want = sum(brute(f, t, ids, {2}).values())
            got = folded_total(db, ["--pool", name, "--tid", "2", "--at", "%dns" % t])
            assert got == want, (name, "tid 2", t, got, want)
    for name, ids in (("alpha", {1}), ("beta", {2})):
        times = sorted({a["t_alloc"] for a in f.allocs if a["pool"] in ids})
        best = max(sum(brute(f, t, ids).values()) for t in times)
        first = min(t for t in times if sum(brute(f, t, ids).values()) == best)
        got = folded_total(db, ["--pool", name, "--peak"])
        at = folded_total(db, ["--pool", name, "--at", "%dns" % first])
        assert got == best == at, (name, got, best, at)
    out = snap(db, "--pool", "alpha", "--at", "5s").stdout.splitlines()
    assert out[0] == "Total: %d B (%d B)" % ((sum(brute(f, 5 * S, {1}).values()),) * 2), out
    assert out[2] == "Pool: alpha", out
    print("--pool equals brute force over the pool's rows at 21 instants, with --tid, "
          "and at its own peak: ok")


def empty_pool(db):
    for fmt, want in (("text", "Total: 0 B (0 B)\nKinds: heap 0 B (0 B), mmap 0 B (0 B), "
                               "custom 0 B (0 B)\nPool: gamma\n"
                               "flat human flat% sum% cum human cum%  function\n"),
                      ("folded", ""),
                      ("heap", None)):
        for q in (["--at", "5s"], ["--leaks"], ["--growth", "1s..9s"], ["--top"],
                  ["--temporary"]):
            out = snap(db, "--pool", "gamma", "--format", fmt, *q).stdout
            if want is not None:
                assert out == want, (fmt, q, out)
            else:
                assert out.startswith("heap profile:      0:        0 [     0:        0]"), out
    print("a pool without a block: empty answers in every format: ok")


no_table()
fx, pdb = two_pools()
missing(pdb, "delta", "alpha, beta, gamma")
print("a name no pool has: exit 4, its pools listed: ok")
exact(fx, pdb)
empty_pool(pdb)
