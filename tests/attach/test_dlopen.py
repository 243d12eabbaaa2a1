"""A library dlopen'ed while attached (att_dlopen.c, att_dl_lib.c): its
calls reach the allocator unrecorded until the writer's next look at the
loaded objects routes them, so the trace says when (heapreel.unrouted ..
heapreel.routed marks), the answers say what they lack, and the library's
calls made after the routing (here, after a trace-ctl flush: a writer
round) are recorded exactly. Its constructor's block, allocated inside
dlopen, is recorded only if the writer routed the library in between.
An entry the recorder cannot route at all is an unrouted span to the end."""
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(__file__))
import atttest as at
from hrtest import REC_BUILD, TRACE_CTL, TRACE_IMPORT, TRACE_SNAP, connect, meta, run, tmpdir

CTOR_SIZE, TAKE_SIZE, OWN_SIZE = 3333, 4444, 5555     # att_dl_lib.c, att_dlopen.c

at.need_attach()
d = tmpdir("attach-dlopen")
lib = os.path.join(REC_BUILD, "tests", "attach", "libatt_dl.so")


def recorded(name, extra_env=None, said=""):
    """att_dlopen attached to from start to end, the library loaded and
    routed (trace-ctl flush: a writer round) before it calls into it; its
    stderr must be `said`. (pid, database of the trace, its connection)."""
    go, take, end = (os.path.join(d, name + "." + n) for n in ("go", "take", "end"))
    p, pid = at.start([at.program("att_dlopen"), lib, go, take, end], cwd=d, extra_env=extra_env)
    trace, db = os.path.join(d, name + ".trc"), os.path.join(d, name + ".db")
    r = at.attach(pid, trace)
    at.touch(go)
    at.wait_line(p, "loaded")
    run([TRACE_CTL, str(pid), "flush"])
    at.touch(take)
    at.wait_line(p, "taken")
    r.send_signal(signal.SIGINT)
    at.finish(r)
    at.touch(end)
    out, perr = p.communicate(timeout=at.WAIT_S)
    assert p.returncode == 0 and out == "bye\n" and perr == said, (p.returncode, out, perr)
    run([TRACE_IMPORT, trace, db])
    return pid, db, connect(db)


pid, db, c = recorded("run")
for key in ("unmatched_frees", "missed_frees", "lost_events", "damaged"):
    assert meta(c, key) == 0, (key, meta(c, key))
marks = c.execute("SELECT t, label FROM marks WHERE label IN ('heapreel.unrouted', "
                  "'heapreel.routed') ORDER BY t, rowid").fetchall()
assert marks and marks[0][1] == "heapreel.unrouted" and marks[-1][1] == "heapreel.routed", marks

# After the routing, every call is recorded, from the library and the program.
rows = c.execute("SELECT a.size, a.t_alloc, f.function FROM allocations a "
                 "JOIN stacks s ON s.id = a.stack_id JOIN frames f ON f.id = s.frame_id "
                 "ORDER BY a.t_alloc").fetchall()
by_size = {size: (t, fn) for size, t, fn in rows}
assert sorted(by_size) in ([TAKE_SIZE, OWN_SIZE], [CTOR_SIZE, TAKE_SIZE, OWN_SIZE]), rows
assert len(rows) == len(by_size), rows
assert by_size[TAKE_SIZE][1] == "att_dl_take" and by_size[OWN_SIZE][1] == "own", rows
assert by_size[TAKE_SIZE][0] > marks[-1][0], (rows, marks)
if CTOR_SIZE in by_size:       # routed between the loader's relocation and the constructor
    print("the constructor's block was recorded")

snap = run([TRACE_SNAP, db, "--at", "end", "--format", "text"])
want = "some calls of process %d reached the allocator unrecorded from " % pid
assert want in snap.stderr and "Warning: " + want in snap.stdout, (snap.stdout, snap.stderr)

# An entry the recorder cannot route (REC_TEST_GOT_FAIL=malloc: as a full
# table of entries would) leaves the calls through it unrecorded for good:
# an unrouted span from then to the end, whatever is routed later.
pid, db, c = recorded("fail", {"REC_TEST_GOT_FAIL": "malloc"},
                      "heapreel: cannot redirect every GOT entry of an allocator function;"
                      " the calls through those left go unrecorded\n")
assert c.execute("SELECT count(*) FROM allocations WHERE size IN (?, ?)",
                 (TAKE_SIZE, OWN_SIZE)).fetchone() == (0,)
labels = [m for (m,) in c.execute("SELECT label FROM marks WHERE label IN "
                                  "('heapreel.unrouted', 'heapreel.routed') ORDER BY t, rowid")]
assert labels.count("heapreel.unrouted") == labels.count("heapreel.routed") + 1, labels
snap = run([TRACE_SNAP, db, "--at", "end", "--format", "text"])
want = "some calls of process %d reached the allocator unrecorded from " % pid
assert want in snap.stderr and " to its end (" in snap.stderr, snap.stderr
