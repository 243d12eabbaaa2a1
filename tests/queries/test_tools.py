"""test_tools - the real pipeline and the real readers: q_known runs under
libheapreel.so, trace-import loads it, trace-snap writes .heap files at several
instants (found in the database by the phases' unique sizes), and
google-pprof, jeprof and go tool pprof each name our functions with the
exact bytes and objects; --growth matches google-pprof --base; the .pb.gz is
read by go tool pprof; folded sums equal the snapshot; peak, steady window
and leaks are exact. Readers that are not installed are skipped (said on
stdout); the whole test skips without the recorder, importer or program."""
import os
import shutil
import sqlite3
import subprocess

import hrtest

SNAP = hrtest.TRACE_SNAP
PROG = os.path.join(hrtest.REC_BUILD, "tests", "queries", "q_known")
tmp, _, DB = hrtest.recorded_db(PROG, "q-tools", needs=(SNAP,))
c = sqlite3.connect(DB)


def one(sql):
    return c.execute(sql).fetchone()[0]


T1 = one("SELECT max(t_alloc) FROM allocations WHERE size = 24")       # phase 1 done
T3 = one("SELECT max(t_alloc) FROM allocations WHERE size = 5000")     # phase 3 done
W1 = one("SELECT min(t_alloc) FROM allocations WHERE size = 333") - 1  # phase 5
W2 = one("SELECT max(t_free) FROM allocations WHERE size = 777")
PEAK_T = one("SELECT min(t_alloc) FROM allocations WHERE size = 777")
assert one("SELECT peak_t FROM processes") == PEAK_T
assert T1 < T3 < W1 < PEAK_T < W2
KNOWN = ("alloc_small", "alloc_big", "mid", "leak_some", "churn", "main")
# instant -> {function: (inuse bytes, inuse objects)}, flat except mid/main (cum)
CASES = {
    "t1": (["--at", "%dns" % T1], {"alloc_small": (240, 10), "main": (240, 10)}),
    "t3": (["--at", "%dns" % T3], {"alloc_small": (240, 10), "alloc_big": (25000, 5),
                                   "mid": (10000, 2), "main": (25240, 15)}),
    "peak": (["--peak"], {"alloc_small": (120, 5), "alloc_big": (25000, 5), "mid": (10000, 2),
                          "leak_some": (1332, 4), "churn": (777, 1), "main": (27229, 15)}),
    "leaks": (["--leaks"], {"alloc_big": (5000, 1), "mid": (5000, 1), "leak_some": (1332, 4),
                            "main": (6332, 5)}),
}
CUM = ("mid", "main")
checks = 0


def table(out):
    """google-pprof/jeprof --text, go tool pprof -top lines -> {name: (flat,
    cum)} as strings."""
    rows = {}
    for l in out.splitlines():
        w = l.split()
        if len(w) >= 6 and w[1].endswith("%") and w[5] in KNOWN:
            rows[w[5]] = (w[0], w[3])
    return rows


def snap(args):
    """trace-snap's own text table -> {name: (flat, cum)} as strings."""
    cols, rows = hrtest.snap_table(hrtest.run([SNAP, DB] + args).stdout)
    f, c = cols.index("flat"), cols.index("cum")
    return {r[-1]: (r[f], r[c]) for r in rows if r[-1] in KNOWN}


def pick(rows, unit=""):
    return {k: rows[k][1 if k in CUM else 0] for k in rows
            if rows[k][1 if k in CUM else 0] not in ("0", "0" + unit)}


def want_of(exp, i, unit=""):
    return {k: "%d%s" % (v[i], unit) for k, v in exp.items() if v[i]}


heaps = {}
for name, (args, exp) in CASES.items():
    h = os.path.join(tmp, name + ".heap")
    hrtest.run([SNAP, DB] + args + ["-o", h, "--force"])
    heaps[name] = h
    # our own text table, folded sums
    got = pick(snap(args))
    assert got == want_of(exp, 0), (name, got)
    got = pick(snap(args + ["--metric", "inuse_objects"]))
    assert got == want_of(exp, 1), (name, got)
    fold = hrtest.run([SNAP, DB] + args + ["--format", "folded"]).stdout
    total = hrtest.run([SNAP, DB] + args).stdout
    assert hrtest.snap_total(total) == sum(int(l.rsplit(" ", 1)[1]) for l in fold.splitlines())
    assert total.startswith("Total: %d B (" % hrtest.snap_total(total)), total
    checks += 3
    for tool in ("google-pprof", "jeprof"):
        exe = shutil.which(tool)
        if not exe:
            print("note: %s not installed" % tool)
            continue
        for flag, i in (("--show_bytes", 0), ("--inuse_objects", 1)):
            p = hrtest.run([exe, "--text", flag, PROG, h])
            got = pick(table(p.stdout))
            assert got == want_of(exp, i), (tool, name, flag, p.stdout, p.stderr)
            assert "0x" not in "".join(l.split()[-1] for l in p.stdout.splitlines()[1:]
                                       if len(l.split()) >= 6), (tool, p.stdout)
            checks += 1

GO = shutil.which("go")
GOENV = dict(os.environ, HOME=tmp, GOCACHE=os.path.join(tmp, "gocache"),
             GOPATH=os.path.join(tmp, "gopath"), GOTOOLCHAIN="local")


def go_top(args):
    p = subprocess.run([GO, "tool", "pprof", "-top", "-nodefraction=0"] + args,
                       capture_output=True, text=True, env=GOENV, timeout=hrtest.limit(120))
    assert p.returncode == 0, (args, p.stderr)
    return p.stdout


if GO:
    for name, (args, exp) in CASES.items():
        # Every allocation up to t1/t3 is still live: inuse == alloc, so Go
        # sees two sample types (objects, space); otherwise four.
        out = go_top(["-unit=B", PROG, heaps[name]])
        assert pick(table(out), "B") == want_of(exp, 0, "B"), (name, out)
        typ = "objects" if "Type: space" in out else "inuse_objects"
        out = go_top(["-sample_index=" + typ, PROG, heaps[name]])
        assert pick(table(out)) == want_of(exp, 1), (name, out)
        checks += 2
    pb = os.path.join(tmp, "peak.pb.gz")
    hrtest.run([SNAP, DB, "--peak", "-o", pb])
    out = go_top(["-unit=B", pb])                  # symbolized: no binary needed
    assert pick(table(out), "B") == want_of(CASES["peak"][1], 0, "B"), out
    out = go_top(["-sample_index=alloc_objects", pb])
    assert pick(table(out))["churn"] == "1", out   # cumulative up to the peak
    checks += 2
else:
    print("note: go not installed")

# Growth = google-pprof --base (positive and negative).
pprof = shutil.which("google-pprof")
for a, b in (("t1", "t3"), ("t3", "leaks")):
    win = {"t1": "%dns" % T1, "t3": "%dns" % T3, "leaks": "end"}
    ours = pick(snap(["--growth", win[a] + ".." + win[b]]))
    want = {("t1", "t3"): {"alloc_big": "25000", "mid": "10000", "main": "25000"},
            ("t3", "leaks"): {"alloc_big": "-20000", "alloc_small": "-240", "mid": "-5000",
                              "leak_some": "1332", "main": "-18908"}}[(a, b)]
    assert ours == want, (a, b, ours)
    checks += 1
    if pprof:
        p = hrtest.run([pprof, "--text", "--show_bytes", "--base=" + heaps[a], PROG, heaps[b]])
        assert pick(table(p.stdout)) == want, (a, b, p.stdout)
        checks += 1

# Peak is the snapshot at the first churn block; steady window; leaks.
assert open(heaps["peak"]).read() == hrtest.run([SNAP, DB, "--at", "%dns" % PEAK_T,
                                                 "--format", "heap"]).stdout
w = ["--steady", "%dns..%dns" % (W1, W2)]
assert pick(snap(w)) == \
    {"leak_some": "1332", "main": "1332"}
assert pick(snap(w + ["--metric", "alloc_space"])) == \
    {"leak_some": "1332", "churn": "4662", "main": "5994"}
assert pick(snap(["--temporary"])) == \
    {"churn": "4662", "main": "4662"}
top = snap(["--top", "--metric", "alloc_objects"])
assert pick(top) == {"alloc_small": "10", "alloc_big": "5", "mid": "2",
                     "leak_some": "4", "churn": "6", "main": "25"}, top
checks += 5
print("ok: %d checks" % checks)
