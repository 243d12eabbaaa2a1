"""test_lacks - answers say what they lack: a loss, a damaged (cut) trace,
a stopped span (heapreel.stop .. heapreel.start marks), calls not routed
yet (heapreel.unrouted .. heapreel.routed), a forked child
whose inherited blocks are unknown. Each is one "trace-snap: warning:"
line on stderr, in every format, and a "Warning:" line right after the
Total line of the text output; an answer that lacks nothing has neither.
Hand-made databases (fixture.py) set the schema version 4 columns; a real
trace cut short, imported (exit 5, meta.damaged=1), gets the warning too."""
import os

import hrtest
import fixture
from fixture import S

SNAP = hrtest.TRACE_SNAP
hrtest.need(SNAP)
tmp = hrtest.tmpdir("q-lacks")
checks = 0
LEAF = (0x401010, "alloc_one")


def build(name, setup, meta=None, pids=(100,)):
    """Process(es) over 0..10 s: 100 B at 1 s never freed, 200 B at 2 s
    freed at 6 s; setup(proc) sets what they lack."""
    path = os.path.join(tmp, name + ".db")
    f = fixture.Fixture(path)
    st = f.stack(LEAF)
    for pid in pids:
        setup(f.process(pid))
        f.alloc(pid, 1 * S, 100, st)
        f.alloc(pid, 2 * S, 200, st, t_free=6 * S)
    f.finish(meta_over=meta)
    return path


def snap(db, args, fmt="text"):
    """trace-snap's answer: text on stdout, other formats to a file."""
    out = [] if fmt == "text" else ["-o", os.path.join(tmp, "answer." + fmt), "--force"]
    return hrtest.run([SNAP, db] + args + ["--format", fmt] + out)


def expect(db, args, warnings, total=None):
    """The warning sentences of one answer, in stderr for every format and
    after the Total line of the text output."""
    global checks
    for fmt in ("heap", "pb.gz", "folded", "text"):
        p = snap(db, args, fmt)
        got = p.stderr.splitlines()
        assert got == ["trace-snap: warning: " + w for w in warnings], (db, args, fmt, got)
        if fmt == "text":
            lines = p.stdout.splitlines()
            assert lines[1:1 + len(warnings)] == ["Warning: " + w for w in warnings], \
                (db, args, lines)
            assert not any(l.startswith("Warning") for l in lines[1 + len(warnings):]), lines
            assert lines[1 + len(warnings)].split()[:2] == ["flat", "human"], lines
            if total is not None:
                assert hrtest.snap_total(p.stdout) == total, (args, lines)
    p = hrtest.run([SNAP, db] + args + ["--by", "stack"])
    lines = p.stdout.splitlines()
    assert lines[1:1 + len(warnings)] == ["Warning: " + w for w in warnings], (args, lines)
    checks += 1


ALL = [["--at", "end"], ["--peak"], ["--growth", "1s..9s"], ["--steady", "1s..9s"],
       ["--leaks"], ["--temporary"], ["--top"]]

# Nothing lost: no warning anywhere.
clean = build("clean", lambda p: None)
for q in ALL:
    expect(clean, q, [])

# A loss from 5 s: instants and windows reaching it say so; the peak (2 s,
# but the maximum of a trace with holes) and the leaks are about the whole.
LOSS = ("events of process 100 may be missing from 5.000000000s on (3 lost): the answer "
        "may lack blocks, or hold blocks whose free was lost")


def loss(p):
    p.t_loss, p.lost_events = 5 * S, 3


lossy = build("loss", loss)
expect(lossy, ["--at", "4999999999ns"], [], total=300)
expect(lossy, ["--at", "5s"], [LOSS], total=300)
expect(lossy, ["--growth", "1s..4s"], [])
expect(lossy, ["--growth", "1s..6s"], [LOSS])
for q in (["--peak"], ["--leaks"], ["--temporary"], ["--top"]):
    expect(lossy, q, [LOSS])
expect(build("loss_t", lambda p: setattr(p, "t_loss", 5 * S)), ["--at", "5s"],
       [LOSS.replace(" (3 lost)", "")])
# Events counted lost without their instant: any instant may lack them.
expect(build("loss0", lambda p: setattr(p, "lost_events", 2)), ["--at", "1s"],
       ["events of process 100 may be missing from 0.000000000s on (2 lost): the answer "
        "may lack blocks, or hold blocks whose free was lost"])

# Damaged: read up to 8 s.
CUT = "the trace of process 100 was cut (damaged) after %s: nothing after it was read"
LEAKS = ("the trace of process 100 was cut (damaged) after %s: these \"leaks\" are blocks "
         "whose free was not read")


def damaged(p):
    p.damaged, p.t_damaged = 1, 8 * S


cut = build("cut", damaged)
expect(cut, ["--at", "7s"], [], total=100)
expect(cut, ["--at", "8s"], [CUT % "8.000000000s"], total=100)
expect(cut, ["--leaks"], [LEAKS % "8.000000000s"], total=100)
expect(cut, ["--peak"], [CUT % "8.000000000s"], total=300)
expect(cut, ["--steady", "1s..7s"], [])
# Without t_damaged (an importer that does not know it): read up to the end.
cut_end = build("cut_end", lambda p: setattr(p, "damaged", 1))
expect(cut_end, ["--at", "9s"], [])
expect(cut_end, ["--at", "end"], [CUT % "10.000000000s"])
expect(cut_end, ["--leaks"], [LEAKS % "10.000000000s"])
# meta.damaged=1 naming no process: each may be the damaged one.
both = build("meta_cut", lambda p: None, meta={"damaged": 1, "peak_pid": 100}, pids=(100, 200))
expect(both, ["--leaks"], [LEAKS % "10.000000000s"])
expect(both, ["--leaks", "--pid", "200"], [(LEAKS % "10.000000000s").replace("100", "200")])
# ... but only the process named when one is.
named = build("named_cut", lambda p: setattr(p, "damaged", int(p.pid == 200)),
              meta={"damaged": 1, "peak_pid": 100}, pids=(100, 200))
expect(named, ["--leaks"], [])
expect(named, ["--leaks", "--pid", "200"], [(LEAKS % "10.000000000s").replace("100", "200")])

# Stopped from 3 s to 5 s, and from 8 s to the end (never restarted).
STOP1 = ("recording of process 100 was stopped from 3.000000000s to 5.000000000s: blocks "
         "allocated then are in no answer")
STOP2 = ("recording of process 100 was stopped from 8.000000000s to its end: blocks "
         "allocated then are in no answer")


def stopped(p):
    p.marks = [(3 * S, "heapreel.stop"), (4 * S, "heapreel.stop"), (5 * S, "heapreel.start"),
               (6 * S, "user"), (8 * S, "heapreel.stop")]


STOP2E = STOP2.replace("its end:", "its end (and in 1 earlier span):")
stop = build("stop", stopped)
# A live set lacks the blocks allocated in any span begun by its instant
# (they may still be live after it), an allocation count those of a span
# it meets; the sentence names the last such span.
for at, want in (("2999999999ns", []), ("3s", [STOP1]), ("4999999999ns", [STOP1]),
                 ("5s", [STOP1]), ("7s", [STOP1]), ("8s", [STOP2E]), ("end", [STOP2E])):
    expect(stop, ["--at", at], want)
expect(stop, ["--growth", "1s..2s"], [])
expect(stop, ["--growth", "1s..4s"], [STOP1])
expect(stop, ["--steady", "2s..3s"], [STOP1])
expect(stop, ["--steady", "5s..7s"], [])
expect(stop, ["--top", "--window", "5s..7s"], [])
expect(stop, ["--temporary"], [STOP2E])
expect(stop, ["--peak"], [STOP2E])                       # the whole trace's maximum
expect(stop, ["--leaks"], [STOP2E])
# Frees of blocks allocated while stopped: how many such blocks, at least.
expect(build("stop_frees", lambda p: (stopped(p), setattr(p, "unknown_frees", 7))),
       ["--at", "4s"], [STOP1 + " (7 frees of blocks it never saw allocated)"])

# Calls of a dlopen'ed object unrecorded until the recorder routed them:
# the recorder's spans may overlap (each reaches back to its previous look
# at the loaded objects), and nest into one from 3 s to 5 s.
UNR = ("some calls of process 100 reached the allocator unrecorded from %s to %s (GOT "
       "entries not routed to the recorder: a library loaded since its last look): blocks "
       "allocated then are in no answer%s, and blocks freed then may look live")
UNR1 = UNR % ("3.000000000s", "5.000000000s", "")


def unrouted(p):
    p.marks = [(3 * S, "heapreel.unrouted"), (3 * S + S // 2, "heapreel.unrouted"),
               (4 * S, "heapreel.routed"), (5 * S, "heapreel.routed"), (6 * S, "heapreel.routed")]


unr = build("unrouted", unrouted)
for at, want in (("2999999999ns", []), ("3s", [UNR1]), ("4500ms", [UNR1]), ("7s", [UNR1])):
    expect(unr, ["--at", at], want)
expect(unr, ["--top", "--window", "5s..7s"], [])          # a routed mark alone opens nothing
expect(unr, ["--top", "--window", "4s..7s"], [UNR1])
expect(build("unrouted_frees", lambda p: (unrouted(p), setattr(p, "unknown_frees", 2))),
       ["--at", "4s"], [UNR % ("3.000000000s", "5.000000000s",
                               " (2 frees of blocks it never saw allocated)")])
# Never routed (a trace cut by a kill): to the end. Stopped too: the frees
# are told once, with the stop.
expect(build("unrouted_stop", lambda p: (setattr(p, "marks", [
    (2 * S, "heapreel.stop"), (3 * S, "heapreel.start"), (8 * S, "heapreel.unrouted")]),
    setattr(p, "unknown_frees", 2))), ["--at", "end"],
    [STOP1.replace("3.000000000s to 5", "2.000000000s to 3") +
     " (2 frees of blocks it never saw allocated)", UNR % ("8.000000000s", "its end", "")])

# A forked child whose parent's trace was not imported.
INHERIT = ("process 200 was forked from 100 at 1.000000000s, whose trace was not imported: "
           "its snapshots lack the blocks it inherited from its parent")


def child(p):
    if p.pid == 200:
        p.ppid, p.fork_t, p.inherited = 100, 1 * S, 2


orphan = build("orphan", child, meta={"peak_pid": 200}, pids=(200,))
for q in ALL:       # live sets lack the inherited blocks; allocation counts do not
    live = q[0] in ("--at", "--peak", "--growth", "--leaks")
    expect(orphan, q, [INHERIT] if live else [])
seeded = build("seeded", lambda p: (child(p), setattr(p, "inherited", 1)), pids=(200,))
expect(seeded, ["--at", "end"], [])

# Everything at once, in the order loss, damage, stopped, inheritance.
def everything(p):
    loss(p)
    damaged(p)
    stopped(p)
    child(p)


allof = build("all", everything, pids=(200,))
expect(allof, ["--at", "end"], [w.replace("process 100", "process 200") for w in
                                (LOSS, CUT % "8.000000000s", STOP2E)] + [INHERIT])

# A real trace cut short: trace-import exits 5 with meta.damaged=1, and
# the leaks say that they are blocks whose free was not read.
PROG = os.path.join(hrtest.REC_BUILD, "tests", "queries", "q_known")
if all(os.path.exists(x) for x in (hrtest.LIBREC, hrtest.TRACE_IMPORT, PROG)):
    trc, short, db = (os.path.join(tmp, n) for n in ("k.trc", "short.trc", "short.db"))
    hrtest.record([PROG], trc)
    with open(trc, "rb") as fh:
        data = fh.read()
    with open(short, "wb") as fh:
        fh.write(data[:len(data) - len(data) // 5])
    hrtest.trace_import([short, db], ok=(5,))
    c = hrtest.connect(db)
    assert hrtest.meta(c, "damaged") == 1
    c.close()
    p = snap(db, ["--leaks"])
    lines = p.stdout.splitlines()
    err = p.stderr.splitlines()
    assert len(err) == 1 and err[0].startswith("trace-snap: warning: the trace of process ") \
        and err[0].endswith(": these \"leaks\" are blocks whose free was not read"), p.stderr
    assert lines[1] == "Warning: " + err[0][len("trace-snap: warning: "):], lines
    p = snap(db, ["--at", "0s"])
    assert p.stderr == "", p.stderr
    checks += 1
else:
    print("note: recorder, importer or q_known not built: no real cut trace")
print("ok: %d checks" % checks)
