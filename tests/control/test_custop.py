"""While recording is stopped, a custom allocator's frees are written only
for the custom blocks the trace recorded (ctl_custop.c lists the calls):
rec_free, rec_pool_free and rec_realloc's free half of recorded blocks,
rec_pool_destroy of a pool with recorded blocks; none of a block allocated
while stopped, of a pool-0 free at a recorded heap block's address (whose
own free still is written), nor of a pool that recorded nothing. The import
counts one unknown free (the one made while recording) and answers
byte-exact."""
import os

import ctltest
import hrtest

prog = ctltest.prog("ctl_custop")
ctltest.need(ctltest.TRACE_RECORD, prog, hrtest.TRACE_DUMP, hrtest.TRACE_IMPORT,
             hrtest.TRACE_SNAP)
d = hrtest.tmpdir("custop")
BASE, STEP, QBASE, UNKNOWN = 0x10000000, 0x40, 0x20000000, 0x50000000
P, Q = 1, 2                             # the pools' ids: the first two made
STACK = "_start;__libc_start_main;__libc_start_call_main;main;recording "

t = os.path.join(d, "custop.trc")
hrtest.run([ctltest.TRACE_RECORD, "-o", t, "--", prog])
recs = ctltest.dump(t)
ms = ctltest.marks(recs)
assert [m["label"] for m in ms] == ["heapreel.stop", "freed", "heapreel.start"], ms
stop, freed, start = (m["t"] for m in ms)


def ends(t0, t1):
    """(fn, pool, addr) of the custom ends stamped in (t0, t1), in time order."""
    return [(r["fn"], r["pool"], r["addr"]) for r in sorted(recs, key=lambda r: r.get("t", 0))
            if r["kind"] == "alloc" and r.get("fn") in ("custom_free", "pool_destroy")
            and t0 < r["t"] < t1]


heap = [r["addr"] for r in ctltest.events(recs, "alloc", 96) if r["t"] < stop]
assert len(heap) == 1, heap
# before the fix: 10 ends, with those of 0x30000000 (allocated while
# stopped), of the heap address, and pool 3's destroy (nothing recorded)
assert ends(stop, freed) == [
    ("custom_free", 0, BASE), ("custom_free", 0, BASE + STEP),
    ("custom_free", P, BASE + 2 * STEP), ("custom_free", P, BASE + 3 * STEP),
    ("custom_free", 0, BASE + 2 * STEP), ("pool_destroy", Q, 0)], ends(stop, freed)
# the recorded heap block at the address of the pool-0 free still ends
assert [r for r in recs if r["kind"] == "free" and r.get("addr") == heap[0]
        and stop < r["t"] < freed], "heap free lost"
after = ends(start, 1 << 62)
assert after == [("custom_free", 0, BASE + 3 * STEP), ("custom_free", P, BASE),
                 ("custom_free", 0, UNKNOWN)], after
written = [r for r in recs if r["kind"] == "alloc" and stop < r["t"] < start
           and r.get("fn") not in ("custom_free", "pool_destroy")]
assert not written, "an allocation recorded while stopped"

db = os.path.join(d, "custop.db")
hrtest.trace_import(["-q", t, db])
c = hrtest.connect(db)
# no unmatched free; one unknown, rec_free(UNKNOWN) made while recording
# (before the fix: 5); the heap block ended
got = (hrtest.meta(c, "unmatched_frees"), hrtest.one(c, "SELECT unknown_frees FROM processes"),
       hrtest.one(c, "SELECT COUNT(*) FROM allocations WHERE size = 96 AND t_free IS NULL"))
assert got == (0, 1, 0), got
c.close()


def folded(at):
    out = hrtest.run([hrtest.TRACE_SNAP, db, "--at", at, "--kind", "custom",
                      "--format", "folded"]).stdout
    return sorted(out.splitlines())


# c0[3] and p[0], p[1] at "freed"; p[1] alone at the end (q destroyed)
assert folded("mark:freed") == [STACK + "100", STACK + "400"], folded("mark:freed")
assert folded("end") == [STACK + "200"], folded("end")
print("ok")
