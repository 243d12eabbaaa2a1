"""test_tids - --tid and --histogram on the real pipeline: q_threads (two
threads, alpha then beta, known sizes from known call sites) runs under
libheapreel.so, trace-import loads it, and trace-snap answers per thread
byte-exact (each thread's own peak, its leaks, its temporaries, the
thread list in the text output), the size histograms of each thread are
exact, and a tid the process never had exits 4. Skips without the
recorder, the importer or the program."""
import os
import sqlite3

import hrtest

SNAP = hrtest.TRACE_SNAP
PROG = os.path.join(hrtest.REC_BUILD, "tests", "queries", "q_threads")
tmp, _, DB = hrtest.recorded_db(PROG, "q-tids", needs=(SNAP,))
c = sqlite3.connect(DB)
TID = dict(c.execute("SELECT name, tid FROM threads WHERE name IN ('alpha', 'beta')"))
assert sorted(TID) == ["alpha", "beta"], TID
A, B = str(TID["alpha"]), str(TID["beta"])
KNOWN = ("alpha_small", "alpha_big", "beta_keep", "beta_tmp")
checks = 0


def snap(args, code=0):
    p = hrtest.run([SNAP, DB] + args, check=False)
    assert p.returncode == code, (args, p.returncode, p.stderr)
    return p.stdout


def flat(args, metric="inuse_space"):
    """text table -> {our function: flat value}; also the Threads line."""
    out = snap(args + ["--metric", metric])
    _, table = hrtest.snap_table(out)
    rows = {r[-1]: int(r[0]) for r in table if r[-1] in KNOWN and r[0] != "0"}
    return rows, out.splitlines()[1]


def expect(args, space, objects, threads):
    global checks
    got, line = flat(args)
    assert got == space, (args, got)
    got, line = flat(args, "inuse_objects")
    assert got == objects, (args, got)
    assert line == "Threads: " + threads, (args, line)
    checks += 3


expect(["--peak", "--tid", A], {"alpha_small": 384, "alpha_big": 6000},
       {"alpha_small": 8, "alpha_big": 2}, A + " (alpha)")
expect(["--peak", "--tid", B], {"beta_keep": 1000, "beta_tmp": 4096},
       {"beta_keep": 5, "beta_tmp": 1}, B + " (beta)")
expect(["--leaks", "--tid", A], {"alpha_small": 384, "alpha_big": 3000},
       {"alpha_small": 8, "alpha_big": 1}, A + " (alpha)")
expect(["--leaks", "--tid", "%s,%s" % (B, A)],
       {"alpha_small": 384, "alpha_big": 3000, "beta_keep": 1000},
       {"alpha_small": 8, "alpha_big": 1, "beta_keep": 5},
       ", ".join("%s (%s)" % (t, {A: "alpha", B: "beta"}[t]) for t in sorted((A, B), key=int)))
expect(["--temporary", "--tid", B], {"beta_tmp": 12288}, {"beta_tmp": 3}, B + " (beta)")
expect(["--top", "--tid", A], {"alpha_small": 384, "alpha_big": 6000},
       {"alpha_small": 8, "alpha_big": 2}, A + " (alpha)")
# the process's own peak holds both threads' blocks, filtered or not
peak_t = c.execute("SELECT max(t_alloc) FROM allocations WHERE size = 3000").fetchone()[0]
got, _ = flat(["--at", "%dns" % peak_t, "--tid", B])
assert got == {}, got                            # beta had not started
checks += 1


def bins(args):
    """--histogram text -> {"[lo, hi]": (objects, bytes)} of the bins used."""
    out = {}
    for l in snap(["--histogram"] + args).splitlines():
        if l.strip().startswith("[") and "]" in l:
            w = l.split("]")[1].split()
            if w[0] != "0":
                out[l.split("]")[0].strip() + "]"] = (int(w[0]), int(w[2]))
        if l.startswith("Most frequent"):
            break
    return out


assert bins(["--tid", A]) == {"[32, 63]": (8, 384), "[2048, 4095]": (2, 6000)}
assert bins(["--tid", B]) == {"[128, 255]": (5, 1000), "[4096, 8191]": (3, 12288)}
assert bins(["--peak", "--tid", B]) == {"[128, 255]": (5, 1000), "[4096, 8191]": (1, 4096)}
assert bins(["--at", "end", "--tid", "%s,%s" % (A, B)]) == {
    "[32, 63]": (8, 384), "[128, 255]": (5, 1000), "[2048, 4095]": (1, 3000)}
checks += 4

# a tid the process never had: not in the data
bogus = str(c.execute("SELECT max(tid) + 1 FROM threads").fetchone()[0])
err = hrtest.run([SNAP, DB, "--peak", "--tid", bogus], check=False)
assert err.returncode == 4, err
assert ("had no thread %s (its threads: " % bogus) in err.stderr, err.stderr
assert err.stderr.count("\n") == 1, err.stderr
checks += 3
print("%d checks passed" % checks)
