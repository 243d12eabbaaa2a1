"""test_edge - every question in every format on the smallest databases
trace-import makes: a trace with no events, and one with a single
allocation (never freed). The answers are exact, and empty answers are
well-formed files (an empty profile once passed NULL to qsort_r and
memcpy: undefined behaviour, which the sanitizer build now turns into a
failed run)."""
import gzip
import os

import hrtest
import fixture

SNAP = hrtest.TRACE_SNAP
hrtest.need(SNAP, hrtest.TRACE_IMPORT, hrtest.MKTRACE)
tmp = hrtest.tmpdir("q-edge")
HEAD = ("header 1000 1 5000000000 1700000000000000000 0 /bin/prog prog\n"
        "thread 1000 main\n")
ALLOC_T, END_T, SIZE, IP = 50, 130, 100, "0x401000"


def database(name, events):
    trc, db = os.path.join(tmp, name + ".trc"), os.path.join(tmp, name + ".db")
    hrtest.mktrace(trc, HEAD + events + "close %d\n" % END_T)
    hrtest.trace_import(["-q", trc, db])
    return db


EMPTY = database("empty", "")
ONE = database("one", "node 1 0 401000\nevents 1 1000\na %d 4096 %d 1\n" % (ALLOC_T, SIZE))

HEAP_EMPTY = "heap profile:      0:        0 [     0:        0] @ heapprofile\n\nMAPPED_LIBRARIES:\n"
HEAP_ONE = ("heap profile:      1:      100 [     1:      100] @ heapprofile\n"
            "     1:      100 [     1:      100] @ 0x400fff\n\nMAPPED_LIBRARIES:\n")
# format -> (the empty answer, the answer holding the one block)
WANT = {
    "heap": (HEAP_EMPTY, HEAP_ONE),
    "folded": ("", "%s %d\n" % (IP, SIZE)),
    "text": ("Total: 0 B (0 B)\nflat human flat% sum% cum human cum%  function\n",
             "Total: 100 B (100 B)\nflat human  flat%   sum% cum human   cum%  function\n"
             " 100 100 B 100.0% 100.0% 100 100 B 100.0%  0x401000\n"),
    "stack": ("Total: 0 B (0 B), 0 objects\nbytes human bytes% objects  stack, leaf first\n",
              "Total: 100 B (100 B), 1 objects\nbytes human bytes% objects  stack, leaf first\n"
              "  100 100 B 100.0%       1  0x401000\n"),
}
# (question, whether its answer about the one-allocation trace shows the block)
QUESTIONS = [(["--at", "start"], False), (["--at", "0s"], False),
             (["--at", "%dns" % (ALLOC_T - 1)], False), (["--at", "%dns" % ALLOC_T], True),
             (["--at", "end"], True), (["--peak"], True),
             (["--growth", "start..end"], True), (["--growth", "10ns..10ns"], False),
             (["--growth", "%dns..end" % ALLOC_T], False),       # live at both ends
             (["--steady", "start..end"], True),
             (["--steady", "%dns..end" % ALLOC_T], False),       # (T1, T2]
             (["--leaks"], True), (["--temporary"], False), (["--top"], True),
             (["--top", "--window", "start..end"], True),
             (["--top", "--window", "%dns..end" % (ALLOC_T + 1)], False)]
checks = 0


def pb_values(db, q):
    """The values of each sample of the .pb.gz answer, and its sample types."""
    out = os.path.join(tmp, "a.pb.gz")
    hrtest.run([SNAP, db] + q + ["-o", out, "--force"])
    with open(out, "rb") as fh:
        prof = gzip.decompress(fh.read())
    top = fixture.pb_fields(prof)
    samples = [fixture.pb_packed(fixture.pb_one(v, 2)) for f, v in top if f == 2]
    return samples, len([v for f, v in top if f == 1])


for db, full in ((EMPTY, False), (ONE, True)):
    for q, shows in QUESTIONS:
        has = full and shows
        for fmt, want in WANT.items():
            args = ["--by", "stack"] if fmt == "stack" else ["--format", fmt]
            p = hrtest.run([SNAP, db] + q + args)
            assert p.stdout == want[has], (db, q, fmt, p.stdout, want[has])
            assert p.stderr == "", (db, q, fmt, p.stderr)
            checks += 1
        samples, ntypes = pb_values(db, q)
        assert ntypes == 4 and samples == ([[1, SIZE, 1, SIZE]] if has else []), (db, q, samples)
        checks += 1
# An instant between two events of a trace is still inside it; past the end is not.
p = hrtest.run([SNAP, EMPTY, "--at", "%dns" % (END_T + 1)], check=False)
assert p.returncode == 4 and "outside the trace" in p.stderr, (p.returncode, p.stderr)
checks += 1
print("ok: %d checks" % checks)
